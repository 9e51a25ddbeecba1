//! The import's two threads: the reader (`cache::reader`, on a thread of its own) sends
//! batches of events over a bounded channel; the writing thread hands each event to the
//! [`Loader`] and the written ones back to the reader to be freed.

use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

use anyhow::Result;

use crate::cache::digest::KnownEntries;
use crate::cache::event::{DocumentKind, Event};
use crate::cache::reader::{self, InFlight, Limits, ReadOutcome};
use crate::cache::scanner::{Progress, ReadError};

use super::loader::{EntryWriter, Loader};
use super::progress::Reporter;

/// A document being read on a thread of its own.
pub(super) struct Reading {
    path: PathBuf,
    kind: DocumentKind,
    rx: std::sync::mpsc::Receiver<Vec<Event>>,
    /// Written events, back to the reading thread to free.
    spent: std::sync::mpsc::SyncSender<Vec<Event>>,
    /// Batches written, for the reader's bound on the bytes ahead (not in a delta's reading
    /// of the cache).
    written: Option<Arc<InFlight>>,
    thread: std::thread::JoinHandle<Result<ReadOutcome, ReadError>>,
}

/// Batches of events the reader may be ahead of the writer.
pub(super) const READ_AHEAD: usize = 16;

impl Reading {
    /// Starts reading `path`, sending at most `ahead` batches before they are consumed.
    pub(super) fn start(
        path: &Path,
        kind: DocumentKind,
        limits: Limits,
        known: Option<Arc<KnownEntries>>,
        progress: Arc<Progress>,
        ahead: usize,
    ) -> Result<Reading> {
        let (tx, rx) = sync_channel::<Vec<Event>>(ahead);
        let (spent, returned) = sync_channel::<Vec<Event>>(ahead);
        // A delta's reader sends mostly unchanged entries, small events for many bytes: only
        // the channel's length bounds it.
        let written = known.is_none().then(|| Arc::new(InFlight::default()));
        let owned_path = path.to_path_buf();
        let counted = written.clone();
        let thread = std::thread::Builder::new()
            .name("acpdb-reader".into())
            .spawn(move || {
                let channels = reader::Channels {
                    events: tx,
                    spent: Some(returned),
                    written: counted,
                };
                reader::read_document_with(&owned_path, kind, limits, known, progress, channels)
            })?;
        Ok(Reading {
            path: path.to_path_buf(),
            kind,
            rx,
            spent,
            written,
            thread,
        })
    }

    /// Hands each batch to `take`, which returns the events to free and whether to go on (an
    /// error stops too), until the document ends; then stops the reader. Returns `take`'s
    /// error, else the reader's outcome.
    pub(super) fn drain(
        self,
        mut take: impl FnMut(Vec<Event>) -> (Vec<Event>, Result<bool>),
    ) -> (Result<()>, Result<Result<ReadOutcome, ReadError>>) {
        let Reading {
            rx,
            spent,
            written,
            thread,
            ..
        } = self;
        let mut taken = Ok(());
        for batch in rx.iter() {
            let (done, go_on) = take(batch);
            // The reading thread frees what it allocated (freeing another thread's memory
            // contends for its allocator's lock); if it has enough to free, this one does.
            if !done.is_empty() {
                let _ = spent.try_send(done);
            }
            match go_on {
                Ok(true) => {}
                stop => {
                    taken = stop.map(drop);
                    break;
                }
            }
            if let Some(written) = &written {
                written.wrote_batch();
            }
        }
        if let Some(written) = &written {
            written.stopped();
        }
        drop(rx);
        let read = thread
            .join()
            .map_err(|_| anyhow::anyhow!("the reader thread panicked"));
        (taken, read)
    }

    /// Hands the events to `look` as they arrive until it returns false or the document ends,
    /// then stops the reader. A read failure is left to the reading that follows (a reader
    /// stopped early ends with the error of a closed channel).
    pub(super) fn inspect(self, mut look: impl FnMut(&Event) -> Result<bool>) -> Result<()> {
        self.drain(|batch| {
            let go_on = batch.iter().try_fold(true, |go_on, event| match go_on {
                true => look(event),
                false => Ok(false),
            });
            (batch, go_on)
        })
        .0
    }

    /// Writes every event into `loader` as it arrives, until the document ends.
    pub(super) fn finish<'c, W: EntryWriter<'c>>(
        self,
        loader: &mut Loader<'c, W>,
        reporter: Option<&Reporter>,
    ) -> Result<ReadOutcome> {
        let (path, kind) = (self.path.clone(), self.kind);
        let (written, read) = self.drain(|batch| {
            let mut done = Vec::new();
            for event in batch {
                match loader.event(kind, event) {
                    Ok(Some(event)) => done.push(event),
                    Ok(None) => {}
                    Err(err) => return (done, Err(err)),
                }
            }
            if let Some(reporter) = reporter {
                reporter.tick();
            }
            (done, Ok(true))
        });
        written?;
        let outcome = read??;
        if kind == DocumentKind::Cache {
            loader.tables.check_cache_shape(&path)?;
        }
        Ok(outcome)
    }
}
