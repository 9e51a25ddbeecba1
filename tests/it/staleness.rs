//! Staleness of the source over the real binary (stdio): files edited or deleted after the
//! import are named in the answers that name them, until the next import; the project's git
//! HEAD is compared with the commit the cache was made at.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::mcp::Client;
use crate::common::{fixture, TempProject};

/// The texts of a tool's answer (the answer, then its notes).
async fn texts(client: &Client, tool: &str, args: Value) -> Vec<String> {
    client.call(tool, args).await.expect("an answer").texts
}

#[tokio::test(flavor = "multi_thread")]
async fn files_changed_after_the_import_are_named_until_the_next_one() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let client = Client::spawn(project.root(), &[]).await;
    let file = json!({"path": "src/auth/session.ts"});
    let symbol = json!({"name": "validateSession"});
    let impact = json!({"files": ["src/auth/session.ts"]});
    // Freshly copied and imported: nothing is stale.
    assert_eq!(
        texts(&client, "acp_get_file_context", file.clone())
            .await
            .len(),
        1
    );
    let answer = client.ok("acp_impact", impact.clone()).await;
    assert!(answer.get("stale_files").is_none(), "{answer}");

    std::thread::sleep(Duration::from_millis(20));
    let source = project.root().join("src/auth/session.ts");
    let mut text = std::fs::read_to_string(&source).unwrap();
    text.push_str("\n// edited\n");
    std::fs::write(&source, text).unwrap();
    std::fs::remove_file(project.root().join("src/auth/token.ts")).unwrap();
    // The file checks are kept for a second.
    std::thread::sleep(Duration::from_millis(1100));

    for (tool, args) in [
        ("acp_get_file_context", file.clone()),
        ("acp_get_symbol_context", symbol.clone()),
    ] {
        let texts = texts(&client, tool, args).await;
        assert_eq!(texts.len(), 2, "{tool}: {texts:?}");
        assert!(
            texts[1].starts_with("Stale: changed on disk since the index was imported")
                && texts[1].contains("src/auth/session.ts (modified ")
                && texts[1].contains("re-run `acp index`"),
            "{tool}: {}",
            texts[1]
        );
    }
    let answer = client
        .ok(
            "acp_impact",
            json!({"files": ["src/auth/session.ts", "src/auth/token.ts"]}),
        )
        .await;
    let stale: Vec<(String, String)> = answer["stale_files"]
        .as_array()
        .expect("stale files")
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap().to_string(),
                s["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        stale.contains(&("src/auth/session.ts".into(), "modified".into()))
            && stale.contains(&("src/auth/token.ts".into(), "deleted".into())),
        "{stale:?}"
    );
    // A file the answer does not name is not mentioned.
    let other = texts(
        &client,
        "acp_get_file_context",
        json!({"path": "src/billing/tax.ts"}),
    )
    .await;
    assert_eq!(other.len(), 1, "{other:?}");
    client.close().await;

    // After the next import, the edit is part of the index: nothing is stale.
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    cache["files"]["./src/auth/session.ts"]["summary"] = json!("Sessions, edited");
    std::fs::write(project.cache_path(), cache.to_string()).unwrap();
    assert!(project.import().status.success());
    let client = Client::spawn(project.root(), &[]).await;
    assert_eq!(texts(&client, "acp_get_file_context", file).await.len(), 1);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_moved_head_is_reported_by_stats() {
    let project = TempProject::copy_of(&fixture("demo"));
    let indexed = "1".repeat(40);
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    cache["git_commit"] = json!(indexed);
    std::fs::write(project.cache_path(), cache.to_string()).unwrap();
    let git = project.root().join(".git");
    std::fs::create_dir_all(git.join("refs/heads")).unwrap();
    std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(git.join("refs/heads/main"), format!("{indexed}\n")).unwrap();
    project.import();
    let client = Client::spawn(project.root(), &[]).await;
    let stats = || client.ok("acp_query", json!({"type": "stats"}));
    let source = stats().await["source"].clone();
    assert_eq!(source["head_moved"], false, "{source}");
    assert_eq!(source["head"], json!(indexed));

    let moved = "2".repeat(40);
    std::fs::write(git.join("refs/heads/main"), format!("{moved}\n")).unwrap();
    let source = stats().await["source"].clone();
    assert_eq!(source["head_moved"], true, "{source}");
    assert_eq!(source["head"], json!(moved));
    assert!(
        source["message"]
            .as_str()
            .unwrap()
            .starts_with("Indexed at commit 111111111111, HEAD is 222222222222"),
        "{source}"
    );
    client.close().await;
}

/// An index served without its sources (here generated, with no file on disk) calls none of
/// its files deleted.
#[tokio::test(flavor = "multi_thread")]
async fn an_index_without_its_sources_reports_nothing() {
    let project = TempProject::generated(3);
    let conn = rusqlite::Connection::open(project.db()).unwrap();
    let path: String = conn
        .query_row("SELECT path FROM files ORDER BY id LIMIT 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(!project.root().join(&path).exists());
    let client = Client::spawn(project.root(), &[]).await;
    let answer = texts(&client, "acp_get_file_context", json!({"path": path})).await;
    assert_eq!(answer.len(), 1, "{answer:?}");
    client.close().await;
}
