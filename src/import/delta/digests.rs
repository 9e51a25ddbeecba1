//! The digests of the entries a database stores, read on connections of their own while the
//! delta's reader starts on the cache: each section handed to [`KnownEntries`] as soon as it
//! is read.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;

use crate::cache::digest::{KnownEntries, StoredDigests};
use crate::cache::event::Section;

/// The digests of the entries stored in a database, being read on connections of their own:
/// the files' and symbols' on one thread, the call-graph lists' on another (the two take about
/// as long). Each section is published to [`DigestReading::known`] as soon as it is read, so
/// that the delta's reader scans the first sections of the cache meanwhile. The import lock
/// keeps other writers out, and the delta's own writes are not committed before the reading
/// ends, so every connection sees the same state. Dropped, it stops the reading and waits for
/// its threads.
pub(crate) struct DigestReading {
    known: Arc<KnownEntries>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Result<()>>>,
}

impl DigestReading {
    /// Starts reading the digests stored in the database at `db` (`started`: when the import
    /// started, for the log).
    pub(crate) fn start(db: &Path, started: Instant) -> Result<DigestReading> {
        let known = Arc::new(KnownEntries::pending());
        let stop = Arc::new(AtomicBool::new(false));
        let mut reading = DigestReading {
            known: known.clone(),
            stop: stop.clone(),
            threads: Vec::new(),
        };
        for reads in [&DIGEST_READS[..2], &DIGEST_READS[2..]] {
            let (db, known, stop) = (db.to_path_buf(), known.clone(), stop.clone());
            let thread = std::thread::Builder::new()
                .name("acpdb-digests".into())
                .spawn(move || read_or_abandon(&db, reads, &known, &stop, started))?;
            reading.threads.push(thread);
        }
        Ok(reading)
    }

    /// The digests, each section's as soon as it is read.
    pub(crate) fn known(&self) -> Arc<KnownEntries> {
        self.known.clone()
    }

    /// Waits until every section is read; the reading's error if it failed.
    pub(crate) fn finish(mut self) -> Result<()> {
        for thread in std::mem::take(&mut self.threads) {
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("the thread reading entry digests panicked"))??;
        }
        Ok(())
    }
}

impl Drop for DigestReading {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Abandons the sections of its reads that were not published when it is dropped (the thread
/// reading them failed, stopped or panicked), so that no lookup waits for them forever.
struct Abandoned<'k>(&'k KnownEntries, &'static [DigestRead]);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        for (_, sections) in self.1 {
            sections.iter().for_each(|section| self.0.abandon(*section));
        }
    }
}

/// [`read_digests`], then abandons the sections of `reads` it did not publish.
fn read_or_abandon(
    db: &Path,
    reads: &'static [DigestRead],
    known: &KnownEntries,
    stop: &AtomicBool,
    started: Instant,
) -> Result<()> {
    let abandoned = Abandoned(known, reads);
    read_digests(db, reads, abandoned.0, stop, started)
}

/// Stored digests read between two looks at the flag that stops a [`DigestReading`].
const STOP_CHECKED_EVERY: usize = 4096;

/// A read of stored digests and the sections of its rows: the query's third column is 0 for
/// the first section, 1 for the second.
type DigestRead = (&'static str, [Section; 2]);

/// Each read of stored digests: files, symbols, then call-graph lists (by `reverse`).
static DIGEST_READS: [DigestRead; 3] = [
    (
        "SELECT digest, id, 0 FROM files INDEXED BY files_digest",
        [Section::Files; 2],
    ),
    (
        "SELECT digest, id, 0 FROM symbols INDEXED BY symbols_digest",
        [Section::Symbols; 2],
    ),
    (
        "SELECT digest, id, reverse FROM graph_lists",
        [Section::GraphForward, Section::GraphReverse],
    ),
];

/// Reads the `(digest, row id)` pairs of `reads` from the database at `db`, publishing each
/// read's sections to `known` when it ends, until `stop` is set.
fn read_digests(
    db: &Path,
    reads: &[DigestRead],
    known: &KnownEntries,
    stop: &AtomicBool,
    started: Instant,
) -> Result<()> {
    let conn = crate::db::open_read_only(db)?;
    for (sql, sections) in reads {
        let mut stmt = conn.prepare(sql)?;
        let mut rows = stmt.query([])?;
        let mut read: [StoredDigests; 2] = Default::default();
        let mut count = 0usize;
        while let Some(row) = rows.next()? {
            if count.is_multiple_of(STOP_CHECKED_EVERY) && stop.load(Ordering::Relaxed) {
                anyhow::bail!("the delta stopped reading the stored digests");
            }
            count += 1;
            read[usize::from(row.get::<_, bool>(2)?)].push(row.get(0)?, row.get(1)?);
        }
        // A read of one section fills only the first.
        let distinct = if sections[0] == sections[1] { 1 } else { 2 };
        for (section, rows) in sections[..distinct].iter().zip(read) {
            known.publish(*section, rows);
        }
        tracing::debug!(
            "read {count} digests of {} at {:.2} s",
            sections[..distinct]
                .iter()
                .map(|section| section.path())
                .collect::<Vec<_>>()
                .join(" and "),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    use rusqlite::{params, Connection};

    use super::{read_or_abandon, DigestReading, DIGEST_READS};
    use crate::cache::digest::{DigestsUnavailable, Hints, KnownEntries};
    use crate::cache::event::Section;

    #[test]
    fn stored_digests_are_all_read_unless_the_reading_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("acp.db");
        let mut conn = Connection::open(&db).unwrap();
        crate::db::migrate(&mut conn, None).unwrap();
        let lists = 10_000u32;
        let tx = conn.transaction().unwrap();
        for id in 1..=lists {
            tx.execute(
                "INSERT INTO graph_nodes(id, name) VALUES (?1, ?2)",
                params![id, format!("node_{id}")],
            )
            .unwrap();
            tx.execute(
                "INSERT INTO graph_lists(node_id, reverse, items, digest) VALUES (?1, 0, x'', ?1)",
                [id],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        drop(conn);
        let reading = DigestReading::start(&db, Instant::now()).unwrap();
        let known = reading.known();
        reading.finish().unwrap();
        assert_eq!(known.entries().unwrap().count(), lists as usize);
        // Stopped, the reading publishes nothing and abandons its sections: a lookup fails
        // instead of waiting.
        let known = KnownEntries::pending();
        let stopped = read_or_abandon(
            &db,
            &DIGEST_READS[2..],
            &known,
            &AtomicBool::new(true),
            Instant::now(),
        )
        .unwrap_err();
        assert!(stopped.to_string().contains("stopped"), "{stopped:#}");
        assert_eq!(
            known.find(Section::GraphReverse, 1, &mut Hints::default()),
            Err(DigestsUnavailable(Section::GraphReverse))
        );
    }
}
