//! Deltas written in place beside readers of this process.

use std::time::{Duration, Instant};

use super::*;

/// A project holding the demo cache, imported.
fn demo_project(dir: &Path) -> Project {
    fs::create_dir(dir.join(".acp")).unwrap();
    let demo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/demo/.acp/acp.cache.json"
    );
    fs::copy(demo, dir.join(".acp/acp.cache.json")).unwrap();
    let project = Project::from_args(&crate::project::ProjectArgs {
        project: dir.to_path_buf(),
        cache: None,
        db: None,
    })
    .unwrap();
    import(&project, &ImportArgs::default()).unwrap();
    project
}

/// The prefix [`edit`] gives the first summary of the cache.
const EDITED: &str = "Edited. ";

/// Edits the first summary of the project's cache, a file's (`on`), or takes the edit back.
fn edit(project: &Project, on: bool) {
    let cache = project.cache.as_deref().unwrap();
    let text = fs::read_to_string(cache).unwrap();
    let text = if on {
        text.replacen("\"summary\": \"", &format!("\"summary\": \"{EDITED}"), 1)
    } else {
        text.replacen(EDITED, "", 1)
    };
    fs::write(cache, text).unwrap();
}

/// Runs an import that must be a delta.
fn delta(project: &Project) {
    let summary = import(project, &ImportArgs::default()).unwrap();
    assert!(summary.delta.is_some(), "{}", summary.line());
}

/// The size of the project's WAL file.
fn wal_size(project: &Project) -> u64 {
    fs::metadata(crate::sqlite_locks::companion(&project.db, "-wal"))
        .unwrap()
        .len()
}

#[test]
fn a_delta_keeps_the_locks_of_the_process_on_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let project = demo_project(dir.path());
    // A reader of this process, as the server's pools are: in WAL mode it keeps a shared lock
    // on the database file while it is open.
    let reader = Connection::open(&project.db).unwrap();
    reader
        .query_row("SELECT count(*) FROM symbols", [], |r| r.get::<_, i64>(0))
        .unwrap();
    crate::sqlite_locks::register(&project.db);
    let probe = fs::File::open(&project.db).unwrap();
    assert!(crate::sqlite_locks::shared_lock_held(&probe));
    edit(&project, true);
    delta(&project);
    assert!(crate::sqlite_locks::shared_lock_held(&probe));
    drop(reader);
}

#[test]
fn a_delta_checkpoints_past_a_reader_of_the_state_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let project = demo_project(dir.path());
    // Open throughout, so that the WAL is not removed when an import's connection closes.
    let watcher = Connection::open(&project.db).unwrap();
    let edited = || -> i64 {
        watcher
            .query_row(
                "SELECT count(*) FROM files WHERE summary LIKE ?1 || '%'",
                [EDITED],
                |r| r.get(0),
            )
            .unwrap()
    };
    // A reader holds the state before the first delta until after its commit.
    let reader = Connection::open(&project.db).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    reader
        .query_row("SELECT count(*) FROM symbols", [], |r| r.get::<_, i64>(0))
        .unwrap();
    edit(&project, true);
    let first = std::thread::spawn({
        let project = project.clone();
        move || delta(&project)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while edited() == 0 {
        assert!(!first.is_finished(), "the delta ended without committing");
        assert!(Instant::now() < deadline, "the delta never committed");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    reader.execute_batch("COMMIT").unwrap();
    first.join().unwrap();
    // The WAL is cut to nothing only once the checkpoint has copied every page the reader had
    // kept from the database: otherwise it is left, and the next delta appends to it.
    assert_eq!(wal_size(&project), 0, "the first delta's WAL was kept");
    edit(&project, false);
    delta(&project);
    assert_eq!(edited(), 0);
    assert_eq!(wal_size(&project), 0, "the second delta's WAL was kept");
}

/// A full import into a database a reader holds copies its new database into place, then
/// removes it whole: the temporary file and the `-wal` and `-shm` files its read-only
/// connection made.
#[test]
fn a_full_import_copied_into_place_leaves_nothing_of_its_new_database() {
    let dir = tempfile::tempdir().unwrap();
    let project = demo_project(dir.path());
    let files_in_acp = || -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir.path().join(".acp"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            // The served database's own, which come and go with its readers.
            .filter(|name| name != "acp.db-wal" && name != "acp.db-shm")
            .collect();
        names.sort();
        names
    };
    let before = files_in_acp();
    let reader = Connection::open(&project.db).unwrap();
    reader
        .query_row("SELECT count(*) FROM symbols", [], |r| r.get::<_, i64>(0))
        .unwrap();
    let full = ImportArgs {
        full: true,
        ..ImportArgs::default()
    };
    let summary = import(&project, &full).unwrap();
    assert!(summary.delta.is_none(), "{}", summary.line());
    assert!(in_use(&project.db), "the reader's database was replaced");
    assert_eq!(files_in_acp(), before);
    drop(reader);
}
