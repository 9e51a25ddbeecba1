//! `acpdb bench` end to end: the real binary on a copy of the demo project, in-process and over
//! stdio, with tiny iteration counts. Timings are never asserted, only the report's shape.

use crate::common;

use std::collections::HashMap;
use std::fs;

use serde_json::Value;

use common::{fixture, TempProject};

/// Every group of the default mix on the demo project (which has domains, constraints and vars).
const DEFAULT_GROUPS: &[&str] = &[
    "acp_get_architecture",
    "acp_get_file_context",
    "acp_get_symbol_context",
    "acp_get_domain_files",
    "acp_check_constraints",
    "acp_get_hotpaths",
    "acp_expand_variable",
    "acp_generate_primer",
    "acp_context:modify",
    "acp_context:debug",
    "acp_context:explore",
    "acp_query:symbol",
    "acp_query:file",
    "acp_query:domain",
    "acp_query:callers",
    "acp_query:callers(depth=3)",
    "acp_query:callees",
    "acp_query:callees(depth=3)",
    "acp_query:search(words)",
    "acp_query:search(glob)",
    "acp_query:search(substring)",
    "acp_query:stats",
    "acp_expand",
    "acp_constraints",
];

fn imported_demo() -> TempProject {
    let project = TempProject::copy_of(&fixture("demo"));
    let out = project.run(&["import", "--no-progress"]);
    assert!(
        out.status.success(),
        "import failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    project
}

fn bench(project: &TempProject, args: &[&str]) -> String {
    let mut all = vec!["bench", "--iterations", "2", "--samples", "2"];
    all.extend_from_slice(args);
    let out = project.run(&all);
    assert!(
        out.status.success(),
        "acpdb {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 report")
}

fn assert_table(table: &str) {
    for group in DEFAULT_GROUPS {
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().next() == Some(group)),
            "{group} missing from\n{table}"
        );
    }
    assert!(table.contains("p99 ms"), "{table}");
    assert!(table.contains("peak RSS"), "{table}");
}

/// Checks a JSON report: every default group present with percentiles, all answered, four
/// calls each (two samples, two passes) per client.
fn assert_json(text: &str, mode: &str) -> Value {
    let report: Value = serde_json::from_str(text).expect("--json prints JSON");
    assert_eq!(report["mode"], mode);
    assert!(
        report["peak_rss_kb"].as_u64().is_some_and(|kb| kb > 0),
        "{report}"
    );
    let tools = report["tools"].as_array().expect("tools array");
    for group in DEFAULT_GROUPS {
        let stats = tools
            .iter()
            .find(|t| t["label"] == *group)
            .unwrap_or_else(|| panic!("{group} missing from {report}"));
        assert_eq!(stats["status"], "ok", "{stats}");
        let clients = report["clients"].as_u64().unwrap_or(1);
        assert_eq!(stats["count"], 4 * clients, "{stats}");
        assert_eq!(stats["errors"], 0, "{stats}");
        for key in ["p50_ms", "p95_ms", "p99_ms", "max_ms"] {
            assert!(stats[key].as_f64().is_some(), "{group}: {key} in {stats}");
        }
        assert!(stats["p50_ms"].as_f64() <= stats["max_ms"].as_f64());
    }
    report
}

#[test]
fn in_process_table_lists_every_group() {
    let project = imported_demo();
    assert_table(&bench(&project, &[]));
}

#[test]
fn in_process_json_has_percentiles() {
    let project = imported_demo();
    let report = assert_json(&bench(&project, &["--json"]), "in-process");
    assert!(report.get("startup").is_none());
    assert_eq!(report["passes"], 2);
}

#[test]
fn stdio_table_lists_every_group_and_startup() {
    let project = imported_demo();
    let table = bench(&project, &["--stdio"]);
    assert_table(&table);
    assert!(table.contains("start-up: initialize"), "{table}");
}

#[test]
fn stdio_json_has_startup_figures() {
    let project = imported_demo();
    let report = assert_json(&bench(&project, &["--stdio", "--json"]), "stdio");
    let startup = &report["startup"];
    let initialize = startup["initialize_ms"].as_f64().expect("initialize_ms");
    let first = startup["first_tool_ms"].as_f64().expect("first_tool_ms");
    assert!(initialize > 0.0 && first >= initialize, "{startup}");
    assert!(report["server_info"]
        .as_str()
        .is_some_and(|s| s.starts_with("acpdb")));
}

#[test]
fn workload_file_round_trips_and_reports_unknown_tools() {
    let project = imported_demo();
    let saved = project.root().join("mix.json");
    bench(
        &project,
        &["--save-workload", saved.to_str().unwrap(), "--json"],
    );
    let mix: Value = serde_json::from_str(&fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(mix["version"], 1);
    assert!(mix["calls"].as_array().unwrap().len() >= DEFAULT_GROUPS.len() * 2);

    let custom = project.root().join("custom.json");
    fs::write(
        &custom,
        r#"{"version": 1, "calls": [
            {"tool": "acp_query", "arguments": {"type": "stats"}},
            {"tool": "acp_query", "arguments": {"type": "search", "pattern": "tax"}, "label": "tax search"},
            {"tool": "no_such_tool"}
        ]}"#,
    )
    .unwrap();
    for mode in [&[][..], &["--stdio"][..]] {
        let mut args = vec!["--workload", custom.to_str().unwrap(), "--json"];
        args.extend_from_slice(mode);
        let report: Value = serde_json::from_str(&bench(&project, &args)).unwrap();
        let labels: Vec<(&str, &str)> = report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["label"].as_str().unwrap(), t["status"].as_str().unwrap()))
            .collect();
        assert_eq!(
            labels,
            [
                ("acp_query:stats", "ok"),
                ("tax search", "ok"),
                ("no_such_tool", "unsupported")
            ],
            "{report}"
        );
    }
}

#[test]
fn duration_mode_and_invalid_workloads() {
    let project = imported_demo();
    let out = project.run(&["bench", "--duration", "0.2", "--samples", "1", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["passes"].as_u64().unwrap() >= 1);

    let bad = project.root().join("bad.json");
    fs::write(&bad, r#"{"version": 2, "calls": []}"#).unwrap();
    let out = project.run(&["bench", "--workload", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("version"));
}

#[test]
fn http_clients_at_once_against_a_server_the_bench_starts() {
    let project = imported_demo();
    let report = assert_json(
        &bench(&project, &["--http", "--clients", "3", "--json"]),
        "http",
    );
    assert_eq!(report["clients"], 3);
    let calls = report["calls"].as_u64().unwrap();
    assert_eq!(calls, 3 * 2 * report["workload_calls"].as_u64().unwrap());
    assert!(
        report["calls_per_s"].as_f64().is_some_and(|r| r > 0.0),
        "{report}"
    );
    assert!(
        report["server"][0].as_str().unwrap().ends_with("acpdb"),
        "{report}"
    );
    // The report says how many calls the server's answer cache answered: the passes repeat.
    let cache = &report["answer_cache"];
    let (hits, misses) = (
        cache["hits"].as_u64().unwrap(),
        cache["misses"].as_u64().unwrap(),
    );
    assert!(hits > 0 && misses > 0, "{cache}");
    let uncached = assert_json(
        &bench(
            &project,
            &[
                "--http",
                "--clients",
                "2",
                "--answer-cache-mb",
                "0",
                "--json",
            ],
        ),
        "http",
    );
    assert!(
        uncached["server"].to_string().contains("--answer-cache-mb"),
        "{uncached}"
    );
    assert_eq!(uncached["answer_cache"]["budget_bytes"], 0, "{uncached}");
    assert_eq!(uncached["answer_cache"]["hits"], 0, "{uncached}");

    // Against a running server given by URL, with its token and pid.
    let token = project.root().join("token");
    std::fs::write(&token, "bench-token").unwrap();
    let token = token.to_str().unwrap();
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .arg("-C")
        .arg(project.root())
        .args([
            "--log-level",
            "info",
            "serve",
            "--stateless",
            "--token-file",
            token,
        ])
        .args(["--http", "127.0.0.1:0"])
        .env_remove("ACPDB_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(server.stderr.take().unwrap());
    let url = std::io::BufRead::lines(stderr)
        .map_while(Result::ok)
        .find_map(|l| {
            Some(
                l.split("over MCP at ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .to_string(),
            )
        })
        .expect("the server's address");
    let pid = server.id().to_string();
    let table = bench(
        &project,
        &[
            "--http",
            &url,
            "--clients",
            "2",
            "--token-file",
            token,
            "--server-pid",
            &pid,
        ],
    );
    assert_table(&table);
    assert!(table.contains("clients: 2 at once; 0 errors"), "{table}");
    let wrong = project.root().join("wrong");
    std::fs::write(&wrong, "not-the-token").unwrap();
    let wrong = wrong.to_str().unwrap();
    let out = project.run(&["bench", "--http", &url, "--token-file", wrong]);
    let _ = server.kill();
    let _ = server.wait();
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(message.contains("cannot initialize"), "{message}");
}

/// The chart's bars (fill colour → count) and texts of an SVG `acpdb bench --plot` drew.
fn chart(path: &std::path::Path) -> (HashMap<String, usize>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let mut bars: HashMap<String, usize> = HashMap::new();
    let mut texts = Vec::new();
    for node in doc.descendants() {
        match node.tag_name().name() {
            "rect" => {
                *bars
                    .entry(node.attribute("fill").unwrap_or("").to_string())
                    .or_default() += 1
            }
            "text" => texts.push(node.text().unwrap_or("").trim().to_string()),
            _ => {}
        }
    }
    (bars, texts)
}

/// The fill of server `s`'s bars of percentile `p`.
fn bar_fill(s: usize, p: usize) -> String {
    let colour = &acpdb::bench::plot::PALETTES[s][p];
    format!("#{:02X}{:02X}{:02X}", colour.0, colour.1, colour.2)
}

#[test]
fn the_plot_has_a_bar_group_per_tool_group_with_the_measured_values() {
    let project = imported_demo();
    let svg = project.root().join("latency.svg");
    let report = bench(&project, &["--json", "--plot", svg.to_str().unwrap()]);
    let report: Value = serde_json::from_str(&report).unwrap();
    let groups = report["tools"].as_array().unwrap();
    let (bars, texts) = chart(&svg);
    // One bar per group and percentile (and one in the legend), labelled with its value.
    for (p, key) in ["p50_ms", "p90_ms", "p99_ms"].iter().enumerate() {
        assert_eq!(
            bars.get(&bar_fill(0, p)),
            Some(&(groups.len() + 1)),
            "{key}: {bars:?}"
        );
        for group in groups {
            let value = group[key].as_f64().unwrap();
            let label = acpdb::bench::plot::value_label(value);
            assert!(texts.contains(&label), "{} {key} {label}", group["label"]);
        }
    }
    for group in groups {
        assert!(
            texts.contains(&group["label"].as_str().unwrap().to_string()),
            "{group}"
        );
    }
    let title = texts
        .iter()
        .find(|t| t.starts_with("acpdb bench"))
        .expect("a title");
    assert!(
        title.contains("36 symbols") && title.contains("cores"),
        "{title}"
    );
}

/// Two servers measured in one run over stdio, one colour each (here acpdb twice: the second
/// given as the other server's command).
#[test]
fn compare_measures_two_servers_and_draws_both() {
    let project = imported_demo();
    let svg = project.root().join("compare.svg");
    let root = project.root().to_str().unwrap().to_string();
    let reports = bench(
        &project,
        &[
            "--json",
            "--compare",
            "--plot",
            svg.to_str().unwrap(),
            "--",
            env!("CARGO_BIN_EXE_acpdb"),
            "-C",
            &root,
            "serve",
        ],
    );
    let reports: Value = serde_json::from_str(&reports).unwrap();
    let reports = reports.as_array().expect("one report per server");
    assert_eq!(reports.len(), 2);
    for report in reports {
        assert_eq!(report["mode"], "stdio");
        assert!(report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["errors"] == 0));
    }
    let groups = reports[0]["tools"].as_array().unwrap().len();
    let (bars, _) = chart(&svg);
    for s in 0..2 {
        for p in 0..3 {
            assert_eq!(
                bars.get(&bar_fill(s, p)),
                Some(&(groups + 1)),
                "server {s}: {bars:?}"
            );
        }
    }
}

#[test]
fn the_calls_log_holds_every_measured_call_in_the_order_they_started() {
    let project = imported_demo();
    let log = project.root().join("calls.jsonl");
    let modes: [&[&str]; 3] = [&[], &["--stdio"], &["--http", "--clients", "2"]];
    for mode in modes {
        let since_epoch = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_micros() as u64
        };
        let before = since_epoch();
        let mut args = vec!["--calls-log", log.to_str().unwrap(), "--json"];
        args.extend_from_slice(mode);
        let report: Value = serde_json::from_str(&bench(&project, &args)).unwrap();
        let after = since_epoch();
        let calls: Vec<Value> = fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON object a line"))
            .collect();
        assert_eq!(
            calls.len() as u64,
            report["calls"].as_u64().unwrap(),
            "{mode:?}"
        );
        let starts: Vec<u64> = calls
            .iter()
            .map(|c| c["start_us"].as_u64().unwrap())
            .collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]), "in start order");
        assert!(
            starts.iter().all(|&s| (before..=after).contains(&s)),
            "{mode:?}"
        );
        let mut per_group: HashMap<&str, (u64, u64)> = HashMap::new();
        for call in &calls {
            let counts = per_group
                .entry(call["group"].as_str().unwrap())
                .or_default();
            counts.0 += 1;
            counts.1 += u64::from(call["failed"].as_bool().unwrap());
            assert!(call["latency_us"].as_u64().is_some(), "{call}");
        }
        for tool in report["tools"].as_array().unwrap() {
            let label = tool["label"].as_str().unwrap();
            let expected = (
                tool["count"].as_u64().unwrap(),
                tool["errors"].as_u64().unwrap(),
            );
            assert_eq!(
                per_group.remove(label).unwrap_or_default(),
                expected,
                "{label}"
            );
        }
        assert!(
            per_group.is_empty(),
            "groups the report lacks: {per_group:?}"
        );
    }
}
