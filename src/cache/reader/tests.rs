//! The reader's tests: documents read back as events, at every read size.

use super::*;
use crate::cache::scanner::{READ_SIZE, TEST_READ_SIZE};
use sha2::{Digest, Sha256};

fn read(text: &str, limits: Limits) -> Result<Vec<Event>, ReadError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, text).unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel(1024);
    let result = read_document(
        &path,
        DocumentKind::Cache,
        limits,
        Arc::new(Progress::default()),
        tx,
    );
    let events: Vec<Event> = rx.try_iter().flatten().collect();
    // Every byte is hashed once, even those read again.
    if let Ok(outcome) = &result {
        let sha256 = crate::hex::encode(&Sha256::digest(text.as_bytes()));
        assert_eq!(outcome.sha256, sha256);
        assert_eq!(outcome.bytes, text.len() as u64);
        // Taken without reading the document, the same outcome, a few bytes a read.
        struct Trickle<'a>(&'a [u8]);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0.len()).min(7);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let taken = ReadOutcome::of_bytes(Trickle(text.as_bytes())).unwrap();
        assert_eq!((taken.sha256, taken.bytes), (sha256, outcome.bytes));
    }
    result.map(|_| events)
}

#[test]
fn streams_entries_and_members() {
    let events = read(
        r#" {"version": "1", "files": {"a": {"x": "}\"{"}, "b": {}}, "graph": {"reverse": {"f": ["g", "g"], "h": ["g", 1]}, "n": [1]},
            "constraints": {"hacks": [{"id": 1}, {"id": 2}]}, "symbols": {}} "#,
        Limits::default(),
    )
    .unwrap();
    let entries = events
        .iter()
        .filter(|e| matches!(e, Event::File { .. } | Event::Entry { .. }))
        .count();
    let items = events
        .iter()
        .filter(|e| matches!(e, Event::Item { .. }))
        .count();
    assert_eq!((entries, items), (3, 2));
    // A list of names comes with its names hashed; another list as its value.
    let lists: Vec<(&str, usize)> = events
        .iter()
        .filter_map(|e| match e {
            Event::GraphList {
                key,
                key_hash,
                names,
                ..
            } => {
                assert_eq!(*key_hash, name_hash(key));
                Some((key.as_str(), names.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(lists, [("f", 2)]);
    assert!(events.iter().any(
        |e| matches!(e, Event::Entry { section: Section::GraphReverse, key, .. } if key == "h")
    ));
    assert!(events.iter().any(
        |e| matches!(e, Event::Member { scope: Scope::Graph, key, value: Some(_) } if key == "n")
    ));
}

#[test]
fn a_hub_list_larger_than_many_reads_comes_in_parts_and_what_follows_too() {
    // A reverse list of 1M names (about 10 MiB), then lists after it, read through more
    // reads once the buffer that held the hub has been given back.
    let names = |n: usize| -> String {
        serde_json::to_string(&(0..n).map(|i| format!("n{i:07}")).collect::<Vec<_>>()).unwrap()
    };
    let text = format!(
        r#"{{"graph": {{"reverse": {{"hub": {}, "a": ["x"], "after": {}, "b": ["y", "z"]}}}}}}"#,
        names(1_000_000),
        names(300_000)
    );
    assert!(text.len() > 8 * READ_SIZE);
    let events = read(&text, Limits::default()).unwrap();
    // Per list: its key, its parts, its names in order (the last one), and its digest.
    let mut lists: Vec<(String, usize, usize, Option<String>, i64)> = Vec::new();
    let mut parts = 0;
    let mut count = 0;
    let mut expected = 0;
    for event in &events {
        let (key, names) = match event {
            Event::GraphListPart { key, names, .. } => {
                assert_eq!(names.len(), LIST_PART);
                parts += 1;
                (key, names)
            }
            Event::GraphList { key, names, .. } => (key, names),
            _ => continue,
        };
        for (name, hash) in names.iter() {
            assert_eq!(hash, name_hash(name));
            if name.starts_with('n') {
                assert_eq!(name, format!("n{expected:07}"), "in {key}");
                expected += 1;
            }
        }
        count += names.len();
        if let Event::GraphList { names, digest, .. } = event {
            let last = names.iter().last().map(|(name, _)| name.to_string());
            lists.push((key.clone(), parts, count, last, *digest));
            (parts, count, expected) = (0, 0, 0);
        }
    }
    let shape: Vec<_> = lists
        .iter()
        .map(|(key, parts, count, last, _)| (key.as_str(), *parts, *count, last.as_deref()))
        .collect();
    assert_eq!(
        shape,
        [
            ("hub", 1_000_000 / LIST_PART, 1_000_000, Some("n0999999")),
            ("a", 0, 1, Some("x")),
            ("after", 300_000 / LIST_PART, 300_000, Some("n0299999")),
            ("b", 0, 2, Some("z"))
        ]
    );
    // Each digest is the digest of the entry's bytes, read whole or not.
    let hub = names(1_000_000);
    assert_eq!(
        lists[0].4,
        entry_digest(Section::GraphReverse, "hub", hub.as_bytes())
    );
    assert_eq!(
        lists[3].4,
        entry_digest(Section::GraphReverse, "b", br#"["y", "z"]"#)
    );
}

#[test]
fn a_list_with_an_item_that_is_not_a_name_is_read_again_whole() {
    // Parts of a long list (several reads long, escapes falling across reads) go over
    // before its last item, a number, is met; then the whole list comes as a value, read
    // again, with the digest of its bytes. A short one has no parts.
    const NAMES: usize = 150_000;
    let mut items: Vec<Value> = (0..NAMES)
        .map(|i| Value::String(format!("name \"{i}\"\n")))
        .collect();
    items.push(Value::from(7));
    let long = serde_json::to_string_pretty(&items).unwrap();
    let text = format!(
        r#"{{"graph": {{"forward": {{"long": {long}, "short": ["a", {{"b": 1}}], "bad": ["a" "b"]}}}}}}"#
    );
    let err = read(&text, Limits::default()).unwrap_err().to_string();
    assert!(
        err.contains("graph.forward.bad") && err.contains("expected"),
        "{err}"
    );
    let text = text.replace(r#", "bad": ["a" "b"]"#, "");
    let events = read(&text, Limits::default()).unwrap();
    let parts = events
        .iter()
        .filter(|e| matches!(e, Event::GraphListPart { key, .. } if key == "long"))
        .count();
    assert_eq!(parts, NAMES / LIST_PART);
    assert!(long.len() > 3 * READ_SIZE);
    let entries: Vec<(&str, &Value, Option<i64>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Entry {
                key, value, digest, ..
            } => Some((key.as_str(), value, *digest)),
            _ => None,
        })
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0].0, "long");
    assert_eq!(entries[0].1, &Value::Array(items));
    assert_eq!(
        entries[0].2,
        Some(entry_digest(Section::GraphForward, "long", long.as_bytes()))
    );
    assert_eq!(entries[1].0, "short");
    assert!(!events.iter().any(|e| matches!(e, Event::GraphList { .. })));
}

#[test]
fn a_list_of_names_is_held_to_the_entry_limit_and_may_end_with_a_part() {
    let names = |n: usize| {
        serde_json::to_string(&(0..n).map(|i| format!("n\\{i}")).collect::<Vec<_>>()).unwrap()
    };
    let text = format!(
        r#"{{"graph": {{"reverse": {{"hub": {}}}}}}}"#,
        names(300_000)
    );
    let limits = Limits {
        max_entry_bytes: 1 << 20,
    };
    let err = read(&text, limits).unwrap_err().to_string();
    assert!(
        err.contains("graph.reverse.hub") && err.contains("1 MiB limit"),
        "{err}"
    );
    let text = format!(
        r#"{{"graph": {{"reverse": {{"hub": {}}}}}}}"#,
        names(LIST_PART)
    );
    let events = read(&text, Limits::default()).unwrap();
    let sizes: Vec<(bool, usize)> = events
        .iter()
        .filter_map(|e| match e {
            Event::GraphListPart { names, .. } => Some((true, names.len())),
            Event::GraphList { names, .. } => Some((false, names.len())),
            _ => None,
        })
        .collect();
    assert_eq!(sizes, [(true, LIST_PART), (false, 0)]);
}

#[test]
fn large_entries_go_in_batches_of_their_own() {
    let big = |i: usize| {
        let files: Vec<String> = (0..60_000)
            .map(|f| format!("src/d{i}/file{f}.ts"))
            .collect();
        format!(
            r#""d{i}": {{"files": {}}}"#,
            serde_json::to_string(&files).unwrap()
        )
    };
    let text = format!(
        r#"{{"domains": {{{}, {}, {}}}, "graph": {{"forward": {{"a": ["b"]}}}}}}"#,
        big(0),
        big(1),
        big(2)
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, text).unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel(16);
    read_document(
        &path,
        DocumentKind::Cache,
        Limits::default(),
        Arc::new(Progress::default()),
        tx,
    )
    .unwrap();
    // Each domain spans more than a batch's bytes; what follows them goes together.
    let batches: Vec<Vec<Event>> = rx.try_iter().collect();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(sizes[..3], [1, 1, 1], "entries per batch: {sizes:?}");
    assert!(batches[..3].iter().all(|b| matches!(
        &b[0],
        Event::Entry { section: Section::Domains, value, .. } if value["files"].as_array().unwrap().len() == 60_000
    )));
    assert!(batches.len() <= 4, "{sizes:?}");
}

#[test]
fn the_reader_waits_while_the_bytes_ahead_are_over_the_bound() {
    let written = Arc::new(InFlight::default());
    let mut ahead = Ahead {
        written: written.clone(),
        sent: 0,
        waiting: VecDeque::new(),
    };
    // The first batch always goes, whatever its size; so does one within the bound.
    assert!(ahead.has_room(BYTES_AHEAD * 2));
    ahead.sent(BYTES_AHEAD * 2);
    assert!(!ahead.has_room(1));
    written.wrote_batch();
    for _ in 0..2 {
        assert!(ahead.has_room(BYTES_AHEAD / 2));
        ahead.sent(BYTES_AHEAD / 2);
    }
    // A third is over the bound until the consumer writes one.
    assert!(!ahead.has_room(1));
    written.wrote_batch();
    assert!(ahead.has_room(1));
    ahead.sent(1);
    assert!(!ahead.has_room(BYTES_AHEAD));
    // A consumer that stopped, or is gone, never holds the reader back.
    written.stopped();
    assert!(ahead.has_room(BYTES_AHEAD));
    assert!(ahead.waiting.is_empty());
    let mut orphan = Ahead {
        written: Arc::new(InFlight::default()),
        sent: 0,
        waiting: VecDeque::new(),
    };
    orphan.sent(BYTES_AHEAD);
    assert!(orphan.has_room(BYTES_AHEAD), "no consumer counts batches");
}

#[test]
fn errors_carry_path_and_position() {
    let err = read(
        "{\"files\": {\"a\": {\"lines\": 1,\n \"x\": tru}}}",
        Limits::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("files.a") && err.contains("line 2"), "{err}");
    let err = read("{\"files\": {\"a\": 5}}", Limits::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("expected an object") && err.contains("line 1 column 17"),
        "{err}"
    );
    let err = read(
        "{\"files\": {\"a\": {\"b\": \"unterminated",
        Limits::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("truncated") && err.contains("files.a"),
        "{err}"
    );
    let err = read("{\"files\": {} } x", Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("trailing"), "{err}");
    // A member name is held to JSON as its value is: a raw control character is refused.
    let err = read("{\"files\": {\"a\tb\": {}}}", Limits::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("control character") && err.contains("at files"),
        "{err}"
    );
    let big = format!(
        "{{\"files\": {{\"a\": {{\"s\": \"{}\"}}}}}}",
        "x".repeat(3 << 20)
    );
    let err = read(
        &big,
        Limits {
            max_entry_bytes: 1 << 20,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("1 MiB limit"), "{err}");
}

#[test]
fn a_cache_cut_inside_a_scalar_is_refused() {
    // Found by the fuzz tests below: the end of the file used to shift the buffer under a
    // scalar being scanned, and slicing it panicked.
    let err = read(
        "{\n  \"version\": \"0.7.0\",\n  \"generated_at\": \"2026-01-12T08:41:27Z\",\n  \"git_commit\": n",
        Limits::default(),
    )
    .unwrap_err();
    assert!(err.message.contains("EOF while parsing"), "{err}");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// A real cache to mutate.
    const SEED: &str = include_str!("../../../fixtures/demo/.acp/acp.cache.json");

    /// Bytes that change a JSON document's structure.
    const STRUCTURAL: &[u8] = b"{}[]\",:\\ 0123456789eE-+.tfnul\n\x00\xff";

    /// One edit of a document: cut it, overwrite a byte, or insert structural bytes.
    fn mutated() -> impl Strategy<Value = Vec<u8>> {
        let edits = prop::collection::vec(
            (
                0usize..3,
                any::<prop::sample::Index>(),
                prop::collection::vec(prop::sample::select(STRUCTURAL), 1..8),
            ),
            1..6,
        );
        edits.prop_map(|edits| {
            let mut bytes = SEED.as_bytes().to_vec();
            for (kind, at, insert) in edits {
                let at = at.index(bytes.len().max(1));
                match kind {
                    0 => bytes.truncate(at),
                    1 if at < bytes.len() => bytes[at] = insert[0],
                    _ => {
                        let at = at.min(bytes.len());
                        bytes.splice(at..at, insert);
                    }
                }
            }
            bytes
        })
    }

    fn read_bytes(bytes: &[u8], read_size: usize) -> Result<usize, ReadError> {
        TEST_READ_SIZE.with(|size| size.set(read_size));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, bytes).unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        let consumer = std::thread::spawn(move || rx.iter().map(|b: Vec<Event>| b.len()).sum());
        let result = read_document(
            &path,
            DocumentKind::Cache,
            Limits::default(),
            Arc::new(Progress::default()),
            tx,
        );
        let events: usize = consumer.join().unwrap();
        result.map(|_| events)
    }

    /// JSON values whose strings hold escapes, quotes and brackets.
    fn value() -> impl Strategy<Value = Value> {
        let text = "[a-z\"\\\\{}\\[\\]é\n ]{0,16}".prop_map(Value::String);
        text.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\"{}]{0,4}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Whatever the bytes, the reader ends with events or an error naming a position,
        /// and never panics or hangs.
        #[test]
        fn mutated_caches_are_read_or_refused(bytes in mutated(), read_size in 1usize..4096) {
            if let Err(err) = read_bytes(&bytes, read_size) {
                prop_assert!(!err.message.is_empty());
            }
        }

        #[test]
        fn arbitrary_bytes_are_read_or_refused(
            bytes in prop::collection::vec(any::<u8>(), 0..512),
            read_size in 1usize..64,
        ) {
            let _ = read_bytes(&bytes, read_size);
        }

        /// Member names and entries with escapes, brackets and quotes inside strings, read a
        /// few bytes at a time, are what serde_json reads from the whole document.
        #[test]
        fn members_and_entries_read_across_reads_are_read_as_whole(
            entries in prop::collection::btree_map("[a-z\"\\\\/é{}\\[\\]\u{1F600} ]{0,10}", value(), 0..12),
            members in prop::collection::btree_map("[a-z\"\\\\é{}\\[\\] ]{1,10}", value(), 0..6),
            pretty in any::<bool>(),
            read_size in 1usize..80,
        ) {
            let mut document = serde_json::Map::new();
            for (key, value) in &members {
                document.insert(format!("m{key}"), value.clone());
            }
            document.insert("source_files".into(), Value::Object(entries.clone().into_iter().collect()));
            let text = if pretty {
                serde_json::to_string_pretty(&document).unwrap()
            } else {
                serde_json::to_string(&document).unwrap()
            };
            TEST_READ_SIZE.with(|size| size.set(read_size));
            let events = read(&text, Limits::default()).unwrap();
            TEST_READ_SIZE.with(|size| size.set(READ_SIZE));
            let mut read_entries = std::collections::BTreeMap::new();
            let mut read_members = serde_json::Map::new();
            for event in events {
                match event {
                    Event::Entry { section: Section::SourceFiles, key, value, .. } => {
                        read_entries.insert(key, value);
                    }
                    Event::Member { scope: Scope::Root, key, value: Some(value) } => {
                        read_members.insert(key, value);
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(read_entries, entries);
            document.remove("source_files");
            prop_assert_eq!(read_members, document);
        }

        /// A call-graph list read a few bytes at a time gives what serde_json reads from the
        /// whole: the same names, or the same value when an item is not a name, or an error
        /// for both; with the digest of its bytes.
        #[test]
        fn graph_lists_read_across_reads_are_read_as_whole(
            items in prop::collection::vec(prop_oneof![
                8 => "[a-z\"\\\\/é\u{1F600}\n\t ]{0,12}".prop_map(Value::String),
                1 => any::<i64>().prop_map(Value::from),
            ], 0..40),
            pretty in any::<bool>(),
            read_size in 1usize..48,
        ) {
            let list = if pretty {
                serde_json::to_string_pretty(&items).unwrap()
            } else {
                serde_json::to_string(&items).unwrap()
            };
            let text = format!(r#"{{"graph": {{"forward": {{"k": {list}, "z": ["y"]}}}}}}"#);
            TEST_READ_SIZE.with(|size| size.set(read_size));
            let events = read(&text, Limits::default()).unwrap();
            TEST_READ_SIZE.with(|size| size.set(READ_SIZE));
            let digest = entry_digest(Section::GraphForward, "k", list.as_bytes());
            let mut names: Vec<Value> = Vec::new();
            let mut whole = None;
            for event in &events {
                match event {
                    Event::GraphListPart { key, names: part, .. } if key == "k" => {
                        names.extend(part.iter().map(|(n, _)| Value::String(n.to_string())));
                    }
                    Event::GraphList { key, names: last, digest: d, .. } if key == "k" => {
                        names.extend(last.iter().map(|(n, _)| Value::String(n.to_string())));
                        prop_assert!(last.iter().all(|(n, h)| h == name_hash(n)));
                        whole = Some((Value::Array(names.clone()), *d));
                    }
                    Event::Entry { key, value, digest: d, .. } if key == "k" => {
                        whole = Some((value.clone(), d.unwrap_or_default()));
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(whole, Some((Value::Array(items), digest)));
            let after = events
                .iter()
                .any(|e| matches!(e, Event::GraphList { key, .. } if key == "z"));
            prop_assert!(after, "the list after it is read");
        }
    }
}

/// A file rewritten in place while it is read is told apart (its size or its time moved), a
/// file replaced by a rename is not: the one open stays whole.
#[test]
fn a_file_rewritten_in_place_is_told_from_one_replaced_by_a_rename() {
    use std::fs::{self, File};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    fs::write(&path, b"{\"a\": 1}").unwrap();
    let open = || {
        let file = File::open(&path).unwrap();
        let opened = disk_state(&file).expect("a state");
        (file, opened)
    };
    let (file, opened) = open();
    assert_eq!(disk_state(&file), Some(opened));
    let next = dir.path().join("next.json");
    fs::write(&next, b"{\"a\": 22}").unwrap();
    fs::rename(&next, &path).unwrap();
    assert_eq!(disk_state(&file), Some(opened));
    // Truncated and written again, longer.
    let (file, opened) = open();
    fs::write(&path, b"{\"a\": 333}").unwrap();
    assert_ne!(disk_state(&file), Some(opened));
    // The same size, a later time.
    let (file, opened) = open();
    let later = std::time::UNIX_EPOCH
        + std::time::Duration::from_nanos(opened.mtime_ns as u64)
        + std::time::Duration::from_secs(2);
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_ne!(disk_state(&file), Some(opened), "a time that moved");
    assert!(REWRITTEN.starts_with("changed while it was read"));
}
