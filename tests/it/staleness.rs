//! Staleness of the source over the real binary (stdio): files edited or deleted after the
//! import are named in the answers that name them, until the next import; the project's git
//! HEAD is compared with the commit the cache was made at.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::mcp::{first_sweep_done, Client};
use crate::common::{fixture, TempProject};

/// Rewrites the cache as `acp index` does after the edit of `src/auth/session.ts` (its summary
/// changes).
fn reindex_after_the_edit(project: &TempProject) {
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    cache["files"]["./src/auth/session.ts"]["summary"] = json!("Sessions, edited");
    std::fs::write(project.cache_path(), cache.to_string()).unwrap();
}

/// The texts of a tool's answer (the answer, then its notes).
async fn texts(client: &Client, tool: &str, args: Value) -> Vec<String> {
    client.call(tool, args).await.expect("an answer").texts
}

#[tokio::test(flavor = "multi_thread")]
async fn files_changed_after_the_import_are_named_until_the_next_one() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let client = Client::spawn(project.root(), &["--watch-interval", "1"]).await;
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
    project.edit_source("src/auth/session.ts");
    std::fs::remove_file(project.root().join("src/auth/token.ts")).unwrap();
    // The file checks are kept for the watch interval, a second here.
    std::thread::sleep(Duration::from_millis(1100));

    for (tool, args) in [
        ("acp_get_file_context", file.clone()),
        ("acp_get_symbol_context", symbol.clone()),
        (
            "acp_context",
            json!({"operation": "modify", "target": "src/auth/session.ts"}),
        ),
        (
            "acp_context",
            json!({"operation": "debug", "target": "validateSession"}),
        ),
        ("acp_get_domain_files", json!({"name": "auth"})),
        (
            "acp_check_constraints",
            json!({"path": "src/auth/session.ts"}),
        ),
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
            assert_eq!(s["signal"], "baseline", "{s}");
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
    // Resources keep the entry as indexed and say it in `_meta`.
    for uri in [
        "acp://file/src/auth/session.ts",
        "acp://symbol/validateSession",
    ] {
        let (_, meta) = client.read_with_meta(uri).await.unwrap();
        assert_eq!(
            meta["stale_files"][0]["path"], "src/auth/session.ts",
            "{uri}: {meta}"
        );
        assert!(meta["note"]
            .as_str()
            .unwrap()
            .contains("re-run `acp index`"));
    }
    let (_, meta) = client
        .read_with_meta("acp://file/src/billing/tax.ts")
        .await
        .unwrap();
    assert!(meta.is_null(), "{meta}");
    // A file the answer does not name is not mentioned.
    let other = texts(
        &client,
        "acp_get_file_context",
        json!({"path": "src/billing/tax.ts"}),
    )
    .await;
    assert_eq!(other.len(), 1, "{other:?}");
    client.close().await;

    // After the next import (of the cache `acp index` writes after the edit, the deleted file
    // gone from it), the edit is part of the index: nothing is stale.
    reindex_after_the_edit(&project);
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    cache["files"]
        .as_object_mut()
        .unwrap()
        .remove("./src/auth/token.ts");
    std::fs::write(project.cache_path(), cache.to_string()).unwrap();
    assert!(project.import().status.success());
    let client = Client::spawn(project.root(), &[]).await;
    for (tool, args) in [
        ("acp_get_file_context", file),
        ("acp_get_symbol_context", symbol),
        (
            "acp_context",
            json!({"operation": "modify", "target": "src/auth/session.ts"}),
        ),
    ] {
        let texts = texts(&client, tool, args).await;
        assert_eq!(texts.len(), 1, "{tool}: {texts:?}");
    }
    let answer = client.ok("acp_impact", impact).await;
    assert!(answer.get("stale_files").is_none(), "{answer}");
    client.close().await;
}

/// Under the server's watcher, the kernel reports edits as they happen (Linux): an edit shows
/// in the next answer although a file's look is kept for the (long) watch interval, one edited
/// before the server started is told by its first sweep, and a directory moved away and
/// replaced is looked at again, not trusted.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn an_edit_shows_at_once_where_the_kernel_reports_it() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    // Edited before the server starts: its first sweep finds it.
    project.edit_source("src/util/format.ts");
    let client = Client::spawn(project.root(), &["--watch-interval", "60"]).await;
    let watched = first_sweep_done(
        || async {
            client.ok("acp_query", json!({"type": "stats"})).await["source"]["files"].clone()
        },
        true,
    )
    .await;
    assert_eq!(watched["watched"], true, "{watched}");
    assert_eq!(watched["changed"], 1, "{watched}");
    let format = texts(
        &client,
        "acp_get_file_context",
        json!({"path": "src/util/format.ts"}),
    )
    .await;
    assert!(
        format.len() == 2 && format[1].contains("src/util/format.ts (modified "),
        "{format:?}"
    );
    let session = json!({"path": "src/auth/session.ts"});
    let tax = json!({"path": "src/billing/tax.ts"});
    for args in [&session, &tax] {
        let texts = texts(&client, "acp_get_file_context", args.clone()).await;
        assert_eq!(texts.len(), 1, "{texts:?}");
    }

    // A file with no event since the sweep began is answered from the sweep, without a look at
    // the disk: an edit through a hard link in a directory that holds no indexed file raises
    // no event the server watches, and shows only at the next full sweep.
    let links = project.root().join("links");
    std::fs::create_dir(&links).unwrap();
    std::fs::hard_link(
        project.root().join("src/billing/invoice.ts"),
        links.join("invoice.ts"),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    std::fs::write(links.join("invoice.ts"), "// edited through a link\n").unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let invoice = texts(
        &client,
        "acp_get_file_context",
        json!({"path": "src/billing/invoice.ts"}),
    )
    .await;
    assert_eq!(invoice.len(), 1, "{invoice:?}");

    project.edit_source("src/auth/session.ts");
    let billing = project.root().join("src/billing");
    std::fs::rename(&billing, project.root().join("src/billing-before")).unwrap();
    std::fs::create_dir(&billing).unwrap();
    std::fs::write(billing.join("tax.ts"), "// another file in its place\n").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (args, path) in [
        (&session, "src/auth/session.ts"),
        (&tax, "src/billing/tax.ts"),
    ] {
        let texts = texts(&client, "acp_get_file_context", args.clone()).await;
        assert_eq!(texts.len(), 2, "{path}: {texts:?}");
        assert!(
            texts[1].contains(&format!("{path} (modified ")),
            "{}",
            texts[1]
        );
    }
    let untouched = texts(
        &client,
        "acp_get_file_context",
        json!({"path": "src/auth/token.ts"}),
    )
    .await;
    assert_eq!(untouched.len(), 1, "{untouched:?}");
    client.close().await;
}

/// Over HTTP, an answer kept by the answer cache is not served once the kernel reports an edit
/// of a file: the next call computes it again, with its note, without waiting for the watcher's
/// next check (a minute away here).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_answer_is_not_served_after_an_edit_the_kernel_reports() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let server = crate::http::HttpServer::start(project.root(), &["--watch-interval", "60"]);
    let client = Client::http(&server.url(), None).await;
    crate::common::mcp::wait_ready(&client, 60).await;
    let health = || crate::http::json_body(&crate::http::get(server.addr, "/healthz"));
    let watched = first_sweep_done(|| async { health()["source"]["files"].clone() }, true).await;
    assert_eq!(watched["watched"], true, "{watched}");
    let session = json!({"path": "src/auth/session.ts"});
    assert_eq!(
        texts(&client, "acp_get_file_context", session.clone())
            .await
            .len(),
        1
    );
    let hits = health()["answer_cache"]["hits"].as_u64().unwrap();
    assert_eq!(
        texts(&client, "acp_get_file_context", session.clone())
            .await
            .len(),
        1
    );
    assert_eq!(health()["answer_cache"]["hits"].as_u64(), Some(hits + 1));

    project.edit_source("src/auth/session.ts");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let texts = texts(&client, "acp_get_file_context", session).await;
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[1].contains("src/auth/session.ts (modified "),
        "{}",
        texts[1]
    );
    assert_eq!(health()["answer_cache"]["hits"].as_u64(), Some(hits + 1));
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
    let said = "Indexed at commit 111111111111, HEAD is 222222222222";
    let source = stats().await["source"].clone();
    assert_eq!(source["head_moved"], true, "{source}");
    assert_eq!(source["head"], json!(moved));
    assert!(
        source["message"].as_str().unwrap().starts_with(said),
        "{source}"
    );
    let architecture = texts(&client, "acp_get_architecture", json!({})).await;
    assert!(
        architecture.len() == 2 && architecture[1].contains(said),
        "{architecture:?}"
    );
    let cache: Value = serde_json::from_str(&client.read("acp://cache").await.unwrap()).unwrap();
    assert_eq!(cache["source"]["head_moved"], true, "{cache}");
    client.close().await;

    let cli = project.run(&["query", "stats"]);
    assert!(cli.status.success(), "{}", crate::common::stderr(&cli));
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(cli["source"]["head_moved"], true, "{cli}");

    let server = crate::http::HttpServer::start(project.root(), &[]);
    let health = crate::http::json_body(&crate::http::get(server.addr, "/healthz"));
    assert_eq!(health["source"]["head_moved"], true, "{health}");
    assert_eq!(health["source"]["head"], json!(moved), "{health}");
}

/// Links and special files in the project never make an answer fail or wait, and a file
/// reached through a linked directory (which could lead outside the project) is never looked
/// at.
#[tokio::test(flavor = "multi_thread")]
async fn links_and_fifos_among_the_sources_never_fail_or_stall_an_answer() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    // After the import: `src/billing` becomes a link to an edited copy outside the project,
    // and `src/auth/token.ts` a FIFO that no one writes to.
    let outside = tempfile::tempdir().unwrap();
    crate::common::copy_tree(&project.root().join("src/billing"), outside.path());
    std::fs::write(outside.path().join("tax.ts"), "// edited outside\n").unwrap();
    std::fs::remove_dir_all(project.root().join("src/billing")).unwrap();
    std::os::unix::fs::symlink(outside.path(), project.root().join("src/billing")).unwrap();
    std::fs::remove_file(project.root().join("src/auth/token.ts")).unwrap();
    crate::common::mkfifo(&project.root().join("src/auth/token.ts"));
    let client = Client::spawn(project.root(), &["--watch-interval", "0"]).await;
    let linked = texts(
        &client,
        "acp_get_file_context",
        json!({"path": "src/billing/tax.ts"}),
    )
    .await;
    assert_eq!(linked.len(), 1, "{linked:?}");
    let fifo = texts(
        &client,
        "acp_get_file_context",
        json!({"path": "src/auth/token.ts"}),
    )
    .await;
    assert!(
        fifo.len() == 2 && fifo[1].contains("src/auth/token.ts (modified "),
        "{fifo:?}"
    );
    let answer = client
        .ok(
            "acp_impact",
            json!({"files": ["src/billing/tax.ts", "src/auth/token.ts"]}),
        )
        .await;
    let stale: Vec<&str> = answer["stale_files"]
        .as_array()
        .expect("stale files")
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(stale, ["src/auth/token.ts"], "{answer}");
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

/// After a fresh clone or checkout every file may look newer than anything: what the import saw
/// on disk is the baseline, so a file dated after the import but unchanged since is fresh.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_dated_after_the_import_but_untouched_since_is_fresh() {
    let project = TempProject::copy_of(&fixture("demo"));
    let source = project.root().join("src/auth/session.ts");
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&source)
        .unwrap()
        .set_modified(later)
        .unwrap();
    project.import();
    let client = Client::spawn(project.root(), &[]).await;
    let answer = texts(
        &client,
        "acp_get_file_context",
        json!({"path": "src/auth/session.ts"}),
    )
    .await;
    assert_eq!(answer.len(), 1, "{answer:?}");
    client.close().await;
}

/// Overviews (stats, the architecture, `acp://cache`) say how many indexed files changed on
/// disk since the import.
#[tokio::test(flavor = "multi_thread")]
async fn overviews_count_the_files_changed_on_disk() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let indexed: i64 = rusqlite::Connection::open(project.db())
        .unwrap()
        .query_row("SELECT count(DISTINCT path) FROM files", [], |r| r.get(0))
        .unwrap();
    let client = Client::spawn(project.root(), &["--watch-interval", "0"]).await;
    let files = client.ok("acp_query", json!({"type": "stats"})).await["source"]["files"].clone();
    assert_eq!(files["changed"], 0, "{files}");
    assert_eq!(files["deleted"], 0, "{files}");
    assert_eq!(files["checked"], json!(indexed), "{files}");
    assert_eq!(files["indexed"], json!(indexed), "{files}");
    client.close().await;

    project.edit_source("src/auth/session.ts");
    std::fs::remove_file(project.root().join("src/auth/token.ts")).unwrap();
    let client = Client::spawn(project.root(), &["--watch-interval", "0"]).await;
    let files = client.ok("acp_query", json!({"type": "stats"})).await["source"]["files"].clone();
    assert_eq!(files["changed"], 1, "{files}");
    assert_eq!(files["deleted"], 1, "{files}");
    assert!(files["swept_at"].is_string(), "{files}");
    let architecture = texts(&client, "acp_get_architecture", json!({})).await;
    assert_eq!(architecture.len(), 2, "{architecture:?}");
    assert!(
        architecture[1].contains(&format!("2 of {indexed} indexed files changed on disk")),
        "{}",
        architecture[1]
    );
    let cache: Value = serde_json::from_str(&client.read("acp://cache").await.unwrap()).unwrap();
    assert_eq!(cache["source"]["files"]["changed"], 1, "{cache}");
    client.close().await;

    // The next import (of the cache `acp index` writes after the edits) takes them in:
    // nothing changed since.
    reindex_after_the_edit(&project);
    project.import();
    let client = Client::spawn(project.root(), &["--watch-interval", "0"]).await;
    let files = client.ok("acp_query", json!({"type": "stats"})).await["source"]["files"].clone();
    assert_eq!(
        (files["changed"].as_u64(), files["deleted"].as_u64()),
        (Some(0), Some(0)),
        "{files}"
    );
    client.close().await;
}

/// A database copied or moved with its project would judge the source files in the directory it
/// was imported for: outside the project served, and blind to edits in it. Its freshness says
/// so, which has a server import it again; the import records the new directory.
#[test]
fn a_project_copied_elsewhere_is_imported_again_for_its_new_directory() {
    let first = TempProject::copy_of(&fixture("demo"));
    first.import();
    let copy = tempfile::tempdir().unwrap();
    crate::common::copy_tree(first.root(), copy.path());
    let project = crate::common::project_at(copy.path());
    match acpdb::freshness::check(&project).unwrap() {
        acpdb::freshness::Freshness::Stale(reason) => assert_eq!(
            reason,
            format!(
                "the database was imported for the project at {}, not {}",
                first.root().display(),
                copy.path().display()
            )
        ),
        other => panic!("{other:?}"),
    }
    crate::common::import_in_process(copy.path(), false);
    assert!(matches!(
        acpdb::freshness::check(&project).unwrap(),
        acpdb::freshness::Freshness::Fresh
    ));
    let conn = acpdb::db::open_read_only(&project.db).unwrap();
    let recorded = acpdb::freshness::recorded(&conn).unwrap().project_dir;
    assert_eq!(recorded, Some(copy.path().display().to_string()));
    // The same directory reached through a link is not another one.
    #[cfg(unix)]
    {
        let links = tempfile::tempdir().unwrap();
        let link = links.path().join("linked");
        std::os::unix::fs::symlink(copy.path(), &link).unwrap();
        assert!(matches!(
            acpdb::freshness::check(&crate::common::project_at(&link)).unwrap(),
            acpdb::freshness::Freshness::Fresh
        ));
    }
}
