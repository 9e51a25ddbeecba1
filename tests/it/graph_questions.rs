//! `acp_trace` and `acp_unused` over the real binary (stdio): shortest call paths checked
//! against a plain breadth-first search of the database, and dead-code candidates of a small
//! fixture whose answer is known.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{json, Value};

use crate::common::mcp::Client;
use crate::common::{fixture, TempProject};

/// The entities of the call graph as the tools see them (a resolved symbol, else the raw node,
/// negated) and their callees, read with plain SQL.
fn entity_graph(conn: &rusqlite::Connection) -> (HashMap<i64, Vec<i64>>, HashMap<i64, String>) {
    let mut stmt = conn
        .prepare(
            "SELECT coalesce(a.symbol_id, -a.id), coalesce(b.symbol_id, -b.id)
             FROM call_edges e JOIN graph_nodes a ON a.id = e.caller_id
             JOIN graph_nodes b ON b.id = e.callee_id",
        )
        .unwrap();
    let mut edges: HashMap<i64, Vec<i64>> = HashMap::new();
    for row in stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
        .unwrap()
    {
        let (from, to) = row.unwrap();
        edges.entry(from).or_default().push(to);
    }
    let mut names = HashMap::new();
    let mut stmt = conn
        .prepare("SELECT id, coalesce(qualified_name, key) FROM symbols")
        .unwrap();
    for row in stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
    {
        let (id, name) = row.unwrap();
        names.insert(id, name);
    }
    (edges, names)
}

/// Distances from `start` and the number of shortest paths to each entity.
fn bfs(edges: &HashMap<i64, Vec<i64>>, start: i64) -> (HashMap<i64, u32>, HashMap<i64, u64>) {
    let mut distance = HashMap::from([(start, 0)]);
    let mut paths = HashMap::from([(start, 1u64)]);
    let mut queue = VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        let mut next: Vec<i64> = edges.get(&at).cloned().unwrap_or_default();
        next.sort_unstable();
        next.dedup();
        for to in next {
            let d = distance[&at] + 1;
            match distance.get(&to) {
                None => {
                    distance.insert(to, d);
                    paths.insert(to, paths[&at]);
                    queue.push_back(to);
                }
                Some(&known) if known == d => *paths.get_mut(&to).unwrap() += paths[&at],
                Some(_) => {}
            }
        }
    }
    (distance, paths)
}

fn names_of(path: &Value) -> Vec<String> {
    path.as_array()
        .unwrap()
        .iter()
        .map(|step| step["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn trace_finds_the_shortest_call_paths_of_the_demo() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let client = Client::spawn(project.root(), &[]).await;
    let answer = client
        .ok("acp_trace", json!({"from": "main", "to": "digest"}))
        .await;
    assert_eq!(answer["found"], true, "{answer}");
    assert_eq!(answer["length"], 3);
    let found = answer.clone();
    assert_eq!(
        names_of(&answer["paths"][0]),
        [
            "src/index.ts:main",
            "src/auth/session.ts:validateSession",
            "src/auth/token.ts:verifyToken",
            "src/auth/token.ts:digest"
        ]
    );
    let step = &answer["paths"][0][2];
    assert_eq!(
        (&step["file"], &step["lines"], &step["lock_level"]),
        (
            &json!("src/auth/token.ts"),
            &json!([22, 28]),
            &json!("frozen")
        )
    );
    // Too shallow, or against the calls: an answer saying so, not an error.
    for args in [
        json!({"from": "main", "to": "digest", "max_depth": 2}),
        json!({"from": "digest", "to": "main"}),
    ] {
        let answer = client.ok("acp_trace", args.clone()).await;
        assert_eq!(answer["found"], false, "{args}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap()
                .starts_with("No call path"),
            "{answer}"
        );
        assert_eq!(answer["paths"], json!([]));
    }
    // Names resolve as elsewhere: an ambiguous simple name lists its candidates.
    let err = client
        .err("acp_trace", json!({"from": "format", "to": "padLeft"}))
        .await;
    assert_eq!(err.code, -32602, "{err:?}");
    assert!(err.message.contains("ambiguous"), "{err:?}");
    for bad in [
        json!({"from": "main", "to": "digest", "max_depth": 11}),
        json!({"from": "main"}),
    ] {
        assert_eq!(client.err("acp_trace", bad).await.code, -32602);
    }
    // The command line answers the same.
    let out = project.run(&["query", "trace", "main", "digest"]);
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli, found);
}

/// On a generated graph, every answer agrees with a plain breadth-first search: the length,
/// the number of shortest paths, each path a chain of real calls; pages cover every path once.
#[tokio::test(flavor = "multi_thread")]
async fn trace_agrees_with_a_plain_search_and_pages() {
    let project = TempProject::generated(60);
    let conn = rusqlite::Connection::open(project.db()).unwrap();
    let (edges, names) = entity_graph(&conn);
    let client = Client::spawn(project.root(), &[]).await;
    let mut starts: Vec<i64> = edges.keys().copied().filter(|&e| e > 0).collect();
    starts.sort_unstable();
    let mut checked = 0;
    let mut paged = false;
    for &start in starts.iter().step_by(starts.len() / 12 + 1) {
        let (distance, counts) = bfs(&edges, start);
        let mut targets: Vec<(&i64, &u32)> = distance
            .iter()
            .filter(|(e, d)| **e > 0 && **d >= 2 && **d <= 6)
            .collect();
        targets.sort_unstable();
        for (&target, &d) in targets.into_iter().step_by(7).take(4) {
            let args = json!({"from": names[&start], "to": names[&target], "limit": 2});
            let answer = client.ok("acp_trace", args.clone()).await;
            assert_eq!(answer["length"], d, "{args}: {answer}");
            assert_eq!(answer["total"], counts[&target], "{args}: {answer}");
            // Every path, page after page, once.
            let mut seen = HashSet::new();
            let mut page = answer;
            loop {
                assert!(
                    page["paths"].as_array().unwrap().len() <= 2,
                    "{args}: {page}"
                );
                for path in page["paths"].as_array().unwrap() {
                    let steps = names_of(path);
                    assert_eq!(steps.len() as u32, d + 1, "{args}: {path}");
                    assert_eq!(steps.first(), Some(&names[&start]));
                    assert_eq!(steps.last(), Some(&names[&target]));
                    assert!(seen.insert(steps), "{args}: a path listed twice");
                }
                let Some(cursor) = page["next_cursor"].as_str() else {
                    break;
                };
                paged = true;
                let mut next = args.clone();
                next["cursor"] = json!(cursor);
                page = client.ok("acp_trace", next).await;
            }
            assert_eq!(seen.len() as u64, counts[&target], "{args}");
            // A depth below the length finds nothing.
            let mut shallow = args.clone();
            shallow["max_depth"] = json!(d - 1);
            assert_eq!(client.ok("acp_trace", shallow).await["found"], false);
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} pairs checked");
    assert!(paged, "no pair had more paths than a page");
}

/// A search whose next level would pass the bound on expanded symbols stops before it and says
/// so: here both ends fan out to more names than the bound.
#[tokio::test(flavor = "multi_thread")]
async fn trace_stops_before_a_level_past_its_bound_and_says_so() {
    let fan = acpdb::query::trace::MAX_EXPANDED + 50;
    let symbol = |name: &str| {
        json!({"name": name, "qualified_name": format!("src/a.ts:{name}"), "type": "function",
               "file": "src/a.ts", "lines": [1, 2]})
    };
    let cache = json!({
        "version": "0.7.0",
        "generated_at": "2026-01-12T08:41:27Z",
        "project": {"name": "fan", "root": "."},
        "stats": {"files": 1, "symbols": 2, "lines": 10},
        "files": {"src/a.ts": {"path": "src/a.ts", "lines": 10, "language": "typescript",
                               "exports": [], "imports": []}},
        "symbols": {"src/a.ts:from": symbol("from"), "src/a.ts:to": symbol("to")},
        "graph": {
            "forward": {"src/a.ts:from": (0..fan).map(|i| format!("callee{i}")).collect::<Vec<_>>()},
            "reverse": {"src/a.ts:to": (0..fan).map(|i| format!("caller{i}")).collect::<Vec<_>>()}
        },
    });
    let project = TempProject::with_cache(&cache.to_string(), None);
    assert!(project.import().status.success());
    let client = Client::spawn(project.root(), &[]).await;
    let answer = client
        .ok("acp_trace", json!({"from": "from", "to": "to"}))
        .await;
    assert_eq!(answer["walk_capped"], true, "{answer}");
    assert_eq!(answer["found"], false, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("stopped"),
        "{answer}"
    );
    client.close().await;
}

/// The fixture: which functions nothing calls is known by construction.
fn unused_fixture() -> TempProject {
    let symbol = |file: &str, name: &str, kind: &str, lines: [u32; 2], exported: bool| {
        (
            format!("{file}:{name}"),
            json!({"name": name, "qualified_name": format!("{file}:{name}"), "type": kind,
                   "file": file, "lines": lines, "exported": exported}),
        )
    };
    let symbols: serde_json::Map<String, Value> = [
        symbol("src/app.ts", "main", "function", [1, 10], false),
        symbol("src/app.ts", "helper", "function", [12, 20], false),
        symbol("src/app.ts", "orphanBig", "function", [22, 80], false),
        symbol("src/app.ts", "orphanSmall", "method", [82, 84], false),
        symbol("src/app.ts", "publicApi", "function", [86, 99], true),
        symbol("src/app.ts", "Widget", "class", [100, 140], false),
        symbol("src/app.ts", "constructor", "method", [101, 105], false),
        symbol("src/app.test.ts", "testHelper", "function", [1, 30], false),
        symbol("src/lib/util.ts", "leftover", "function", [1, 40], false),
    ]
    .into_iter()
    .collect();
    let file = |path: &str| json!({"path": path, "lines": 150, "language": "typescript", "exports": [], "imports": []});
    let cache = json!({
        "version": "0.7.0",
        "generated_at": "2026-01-12T08:41:27Z",
        "project": {"name": "unused", "root": "."},
        "stats": {"files": 3, "symbols": 9, "lines": 300},
        "files": {
            "src/app.ts": file("src/app.ts"),
            "src/app.test.ts": file("src/app.test.ts"),
            "src/lib/util.ts": file("src/lib/util.ts"),
        },
        "symbols": symbols,
        "graph": {
            "forward": {
                "src/app.ts:main": ["src/app.ts:helper"],
                "src/app.ts:orphanBig": ["src/app.ts:helper"],
                "src/app.test.ts:testHelper": ["src/app.ts:helper"]
            },
            "reverse": {}
        },
        "domains": {"core": {"name": "core", "files": ["src/lib/util.ts"]}},
    });
    let project = TempProject::with_cache(&cache.to_string(), None);
    let out = project.import();
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
    project
}

fn listed(answer: &Value) -> Vec<String> {
    answer["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn unused_lists_exactly_what_nothing_calls() {
    let project = unused_fixture();
    let client = Client::spawn(project.root(), &[]).await;
    let answer = client.ok("acp_unused", json!({})).await;
    // Largest first; main (an entry point), the exported API, the class, the constructor, the
    // test file's function and everything called are left out.
    assert_eq!(
        listed(&answer),
        [
            "src/app.ts:orphanBig",
            "src/lib/util.ts:leftover",
            "src/app.ts:orphanSmall"
        ],
        "{answer}"
    );
    assert_eq!(answer["total"], 3);
    let first = &answer["result"][0];
    assert_eq!(
        (&first["size"], &first["lines"]),
        (&json!(59), &json!([22, 80]))
    );
    assert_eq!(first["reason"], "nothing in the call graph calls it");
    assert_eq!(
        answer["result"][1]["reason"],
        "nothing in the call graph calls it, and it calls nothing"
    );
    // Of the 9 symbols, main, helper, orphanBig and testHelper have a call edge.
    assert_eq!(
        answer["coverage"],
        json!([{"language": "typescript", "sampled": 9, "with_call_edges": 4}])
    );
    assert!(answer["note"].as_str().unwrap().contains("not proof"));

    let with_exported = client
        .ok("acp_unused", json!({"include_exported": true}))
        .await;
    assert_eq!(listed(&with_exported)[2], "src/app.ts:publicApi");
    let classes = client.ok("acp_unused", json!({"type": "class"})).await;
    assert_eq!(listed(&classes), ["src/app.ts:Widget"]);
    let in_lib = client.ok("acp_unused", json!({"path": "src/lib/**"})).await;
    assert_eq!(listed(&in_lib), ["src/lib/util.ts:leftover"]);
    let in_domain = client.ok("acp_unused", json!({"domain": "core"})).await;
    assert_eq!(listed(&in_domain), ["src/lib/util.ts:leftover"]);
    assert_eq!(
        client
            .err("acp_unused", json!({"domain": "nowhere"}))
            .await
            .code,
        -32602
    );
    // One candidate a page, the cursor carrying on.
    let mut names = Vec::new();
    let mut args = json!({"limit": 1});
    loop {
        let page = client.ok("acp_unused", args.clone()).await;
        names.extend(listed(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => args["cursor"] = json!(cursor),
            None => break,
        }
    }
    assert_eq!(names, listed(&answer));
}
