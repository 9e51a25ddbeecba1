//! The streaming cache reader on arbitrary bytes: events or an error, never a panic or a hang.
#![no_main]

use std::sync::Arc;

use acpdb::cache::event::DocumentKind;
use acpdb::cache::reader::{read_document, Limits};
use acpdb::cache::scanner::Progress;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acp.cache.json");
    std::fs::write(&path, data).unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel(4);
    let consumer = std::thread::spawn(move || rx.iter().count());
    let _ = read_document(
        &path,
        DocumentKind::Cache,
        Limits::default(),
        Arc::new(Progress::default()),
        tx,
    );
    consumer.join().unwrap();
});
