//! `acpdb mcp-config` over the real binary, for each client: the printed entry parses back and
//! starts this binary on the project; `--write` creates the client's file, merges into one that
//! exists (other servers kept, the file before kept as `.bak`), and refuses a malformed one,
//! leaving it untouched. A configured stdio entry starts a server that answers.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use crate::common::mcp::Client;
use crate::common::{acpdb, fixture, stderr, TempProject};

/// The five clients: name, file under the project or the home directory, and the format.
const CLIENTS: [(&str, &str, Format); 5] = [
    (
        "claude-code",
        "project:.mcp.json",
        Format::Json("mcpServers"),
    ),
    (
        "claude-desktop",
        "home:.config/Claude/claude_desktop_config.json",
        Format::Json("mcpServers"),
    ),
    (
        "cursor",
        "project:.cursor/mcp.json",
        Format::Json("mcpServers"),
    ),
    (
        "vscode",
        "project:.vscode/mcp.json",
        Format::Json("servers"),
    ),
    ("codex", "home:.codex/config.toml", Format::Toml),
];

#[derive(Debug, Clone, Copy)]
enum Format {
    /// JSON, with the servers under this member.
    Json(&'static str),
    Toml,
}

/// `acpdb -C <project> mcp-config <args>` with `home` as the home directory.
fn mcp_config(project: &Path, home: &Path, args: &[&str]) -> Output {
    acpdb()
        .arg("-C")
        .arg(project)
        .arg("mcp-config")
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CODEX_HOME")
        .output()
        .expect("run acpdb mcp-config")
}

/// The servers of a client's file, as JSON.
fn servers(text: &str, format: Format) -> Value {
    match format {
        Format::Json(member) => serde_json::from_str::<Value>(text).expect("JSON")[member].clone(),
        Format::Toml => {
            let doc: toml_edit::DocumentMut = text.parse().expect("TOML");
            let mut servers = serde_json::Map::new();
            for (name, item) in doc["mcp_servers"].as_table().expect("mcp_servers").iter() {
                let table = item.as_table().expect("a server table");
                let mut entry = serde_json::Map::new();
                for (key, value) in table.iter() {
                    let value = match value.as_value().expect("a value") {
                        toml_edit::Value::String(s) => json!(s.value()),
                        toml_edit::Value::Array(items) => {
                            json!(items
                                .iter()
                                .map(|i| i.as_str().unwrap())
                                .collect::<Vec<_>>())
                        }
                        other => panic!("unexpected {other}"),
                    };
                    entry.insert(key.to_string(), value);
                }
                servers.insert(name.to_string(), Value::Object(entry));
            }
            Value::Object(servers)
        }
    }
}

fn file_of(where_: &str, project: &Path, home: &Path) -> PathBuf {
    match where_.split_once(':').unwrap() {
        ("project", path) => project.join(path),
        ("home", path) => home.join(path),
        _ => unreachable!(),
    }
}

/// What another server's entry looks like in the file before the merge.
fn existing_file(format: Format) -> String {
    match format {
        Format::Json(member) => format!(
            "{{\n  \"theme\": \"dark\",\n  \"{member}\": {{\"other\": {{\"command\": \"other-server\", \"args\": [\"--x\"]}}, \"acp-demo\": {{\"url\": \"http://old\", \"env\": {{\"TOKEN\": \"t\"}}}}}}\n}}\n"
        ),
        Format::Toml => "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"other-server\"\nargs = [\"--x\"]\n\n[mcp_servers.acp-demo]\nurl = \"http://old\"\nnote = \"mine\"\n".into(),
    }
}

#[test]
fn each_client_gets_an_entry_printed_or_merged_into_its_file() {
    let project = TempProject::copy_of(&fixture("demo"));
    let root = project.root().canonicalize().unwrap();
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_acpdb"))
        .canonicalize()
        .unwrap();
    let expected_args = json!(["-C", root.display().to_string(), "serve"]);
    for (client, where_, format) in CLIENTS {
        let home = tempfile::tempdir().unwrap();
        // Printed: the entry alone, which parses back.
        let out = mcp_config(&root, home.path(), &[client]);
        assert!(out.status.success(), "{client}: {}", stderr(&out));
        let printed = servers(&String::from_utf8(out.stdout.clone()).unwrap(), format);
        assert_eq!(
            printed["acp"]["command"],
            json!(binary.display().to_string()),
            "{client}"
        );
        assert_eq!(printed["acp"]["args"], expected_args, "{client}");
        let file = file_of(where_, &root, home.path());
        assert!(
            stderr(&out).contains(&file.display().to_string()),
            "{client}: {}",
            stderr(&out)
        );
        assert!(!file.exists(), "{client}: printing wrote a file");

        // Written where there is no file yet.
        let out = mcp_config(&root, home.path(), &[client, "--write"]);
        assert!(out.status.success(), "{client}: {}", stderr(&out));
        let written = std::fs::read_to_string(&file).unwrap();
        assert_eq!(servers(&written, format), printed, "{client}");

        // Merged into a file with another server: both, the rest kept, the file before saved,
        // as private as the file (which may hold tokens), whatever a stale backup allowed.
        let before = existing_file(format);
        std::fs::write(&file, &before).unwrap();
        let backup = PathBuf::from(format!("{}.bak", file.display()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |mode| std::fs::Permissions::from_mode(mode);
            std::fs::set_permissions(&file, mode(0o600)).unwrap();
            std::fs::write(&backup, "stale").unwrap();
            std::fs::set_permissions(&backup, mode(0o644)).unwrap();
        }
        let out = mcp_config(
            &root,
            home.path(),
            &[client, "--write", "--name", "acp-demo"],
        );
        assert!(out.status.success(), "{client}: {}", stderr(&out));
        let merged = std::fs::read_to_string(&file).unwrap();
        let all = servers(&merged, format);
        assert_eq!(
            all["other"]["command"], "other-server",
            "{client}: {merged}"
        );
        assert_eq!(all["other"]["args"], json!(["--x"]), "{client}");
        assert_eq!(all["acp-demo"]["args"], expected_args, "{client}");
        // The entry's own keys are the user's and stay; how to reach the server is replaced.
        let (kept, value) = match format {
            Format::Json(_) => ("env", json!({"TOKEN": "t"})),
            Format::Toml => ("note", json!("mine")),
        };
        assert_eq!(all["acp-demo"][kept], value, "{client}: {merged}");
        assert!(all["acp-demo"].get("url").is_none(), "{client}: {merged}");
        assert!(
            merged.contains("dark") || merged.contains("# my settings"),
            "{client}: {merged}"
        );
        assert_eq!(
            std::fs::read_to_string(&backup).unwrap(),
            before,
            "{client}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |path: &PathBuf| std::fs::metadata(path).unwrap().permissions().mode();
            assert_eq!(mode(&backup) & 0o777, 0o600, "{client}");
            assert_eq!(mode(&file) & 0o777, 0o600, "{client}");
        }

        // A malformed file is refused, named, and left as it was.
        let broken = match format {
            Format::Json(_) => "{\"mcpServers\": {\"other\": ",
            Format::Toml => "[mcp_servers.other\ncommand = 1",
        };
        std::fs::write(&file, broken).unwrap();
        std::fs::remove_file(&backup).unwrap();
        let out = mcp_config(&root, home.path(), &[client, "--write"]);
        assert!(!out.status.success(), "{client}");
        let message = stderr(&out);
        assert!(
            message.contains(&file.display().to_string()) && message.contains("left as it was"),
            "{client}: {message}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), broken, "{client}");
        assert!(!backup.exists(), "{client}");
    }
}

#[test]
fn an_http_endpoint_is_configured_where_the_client_can_reach_one() {
    let project = TempProject::copy_of(&fixture("demo"));
    let home = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:8080/mcp";
    for (client, expected) in [
        ("claude-code", json!({"type": "http", "url": url})),
        ("vscode", json!({"type": "http", "url": url})),
        ("cursor", json!({"url": url})),
    ] {
        let out = mcp_config(project.root(), home.path(), &[client, "--http", url]);
        assert!(out.status.success(), "{client}: {}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        let member = if client == "vscode" {
            "servers"
        } else {
            "mcpServers"
        };
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap()[member]["acp"],
            expected
        );
    }
    let out = mcp_config(
        project.root(),
        home.path(),
        &["claude-desktop", "--http", url],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("custom connector"),
        "{}",
        stderr(&out)
    );
    let out = mcp_config(
        project.root(),
        home.path(),
        &["cursor", "--http", "ftp://x"],
    );
    assert!(!out.status.success());
}

/// The entry Claude Code gets starts a server that answers on the project.
#[tokio::test(flavor = "multi_thread")]
async fn the_configured_command_serves_the_project() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let home = tempfile::tempdir().unwrap();
    let out = mcp_config(project.root(), home.path(), &["claude-code"]);
    let entry = serde_json::from_str::<Value>(&String::from_utf8(out.stdout).unwrap()).unwrap()
        ["mcpServers"]["acp"]
        .clone();
    let args: Vec<String> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let client = Client::spawn_command(entry["command"].as_str().unwrap(), &args).await;
    let answer = client.ok("acp_query", json!({"type": "stats"})).await;
    assert_eq!(answer["result"]["symbols"], 36, "{answer}");
    client.close().await;
}
