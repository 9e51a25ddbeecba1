//! Edits to the indexed source files as the kernel reports them (Linux `inotify`), so that an
//! answer can tell that a file did not change since the last sweep without looking at the disk.
//!
//! [`SourceEvents::watch`] watches the directories that hold indexed files and their
//! ancestors up to the project directory, each opened beneath the project without passing
//! through a symbolic link ([`crate::regular_file::Beneath::directory`]) and watched through its handle, so no
//! link, even one swapped in between, makes it watch outside the project. A thread of its own
//! reads the events and records, per file, when the last one arrived. A directory that is
//! moved, removed or replaced is no longer *covered* (its files are looked at on disk again,
//! as without events); so are the directories a watch could not be added for (the kernel's
//! limit), those on network or FUSE file systems (where other machines' edits raise no
//! event), and every directory once the kernel's queue overflowed. [`SourceEvents::should_rewatch`] then
//! says that the watches should be set up anew.
//!
//! *Invariant:* [`SourceEvents::edited_since`] says `None` only when every edit to the file
//! after that moment would have raised an event already recorded: a watch set up before it,
//! on a covered directory, and nothing lost since.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[cfg(target_os = "linux")]
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

#[cfg(target_os = "linux")]
use crate::regular_file::Beneath;

/// Files whose last event is kept at most: past it the events count as lost (a checkout of
/// another branch touches more files than it pays to track one by one).
const TOUCHED_KEPT: usize = 65_536;

/// What the reading thread shares with the answers.
#[derive(Debug)]
struct Shared {
    state: Mutex<EventState>,
    /// Events recorded so far (files touched, directories lost, overflows).
    seen: AtomicU64,
}

#[derive(Debug)]
struct EventState {
    /// Watched directories by watch descriptor: their paths relative to the project (`""`
    /// for the project directory).
    dirs: HashMap<i32, String>,
    /// Directories whose files' events are all seen.
    covered: HashSet<String>,
    /// Files with an event, and when its last one arrived.
    touched: HashMap<String, Instant>,
    /// When events were last lost (the queue overflowed, too many files touched).
    lost_at: Option<Instant>,
    /// When a covered directory last stopped being what its path names (moved, removed,
    /// replaced).
    reshaped_at: Option<Instant>,
}

/// A file that may have been edited ([`SourceEvents::edited_since`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Edited {
    /// When its last event arrived, if one did.
    pub(super) last_event: Option<Instant>,
}

/// The watches on one project's source directories and the events they reported.
#[derive(Debug)]
pub(super) struct SourceEvents {
    shared: Arc<Shared>,
    /// When every watch was in place.
    started: Instant,
    stop: Arc<AtomicBool>,
}

impl Drop for SourceEvents {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl SourceEvents {
    /// Watches the directories `dirs` (relative to `root`, as the index writes them) and
    /// their ancestors; `None` where the kernel offers no `inotify` or no directory could be
    /// watched.
    pub(super) fn watch(
        root: &Path,
        dirs: impl IntoIterator<Item = String>,
    ) -> Option<SourceEvents> {
        let mut wanted: HashSet<String> = HashSet::new();
        for dir in dirs {
            let mut dir = dir.as_str();
            loop {
                if !wanted.insert(dir.to_string()) {
                    break;
                }
                match dir.rsplit_once('/') {
                    Some((parent, _)) => dir = parent,
                    None if dir.is_empty() => break,
                    None => dir = "",
                }
            }
        }
        watch_directories(root, wanted)
    }

    /// For each of `paths` (relative to the project), whether no edit can have happened since
    /// `since` without a look at the disk (`None`: its directory covered, watched before
    /// `since`, no event for it and nothing lost after), or else when its last event arrived
    /// (`Some`; a look from before it is out of date).
    pub(super) fn edited_since(&self, paths: &[&str], since: Instant) -> Vec<Option<Edited>> {
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let trusted = self.started <= since && state.lost_at.is_none_or(|lost| lost < since);
        paths
            .iter()
            .map(|path| {
                let last = state.touched.get(*path).copied();
                let unchanged = trusted
                    && state.covered.contains(parent_of(path))
                    && last.is_none_or(|at| at < since);
                (!unchanged).then_some(Edited { last_event: last })
            })
            .collect()
    }

    /// Whether nothing happened since `since`: no event, nothing lost, the watches set up
    /// before it.
    pub(super) fn quiet_since(&self, since: Instant) -> bool {
        if self.started > since {
            return false;
        }
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.lost_at.is_none_or(|lost| lost < since)
            && state.reshaped_at.is_none_or(|reshaped| reshaped < since)
            && state.touched.values().all(|at| *at < since)
    }

    /// Whether events were lost or a covered directory was moved, removed or replaced: the
    /// watches should be set up anew.
    pub(super) fn should_rewatch(&self) -> bool {
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.lost_at.is_some() || state.reshaped_at.is_some()
    }

    /// Forgets the files' events from before `since` (the start of a complete pass, which saw
    /// what they did).
    pub(super) fn forget_before(&self, since: Instant) {
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.touched.retain(|_, at| *at >= since);
    }

    /// How many events were recorded so far: a change from one look to the next means files
    /// may have changed in between.
    pub(super) fn seen(&self) -> u64 {
        self.shared.seen.load(Ordering::Relaxed)
    }

    /// How many directories are covered.
    pub(super) fn covered(&self) -> usize {
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.covered.len()
    }
}

/// The directory of `path` (`""` at the project's top).
fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

/// `name` in the directory `dir`.
fn joined(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl EventState {
    /// A file in the directory watched by `wd` had an event.
    fn touched(&mut self, wd: i32, name: &str, now: Instant) {
        let Some(dir) = self.dirs.get(&wd) else {
            return;
        };
        let path = joined(dir, name);
        if self.touched.len() >= TOUCHED_KEPT && !self.touched.contains_key(&path) {
            self.touched.clear();
            self.lost_at = Some(now);
            return;
        }
        self.touched.insert(path, now);
    }

    /// `sub` (and every directory below it) no longer is what its path names.
    fn uncover(&mut self, sub: &str, now: Instant) {
        let below = format!("{sub}/");
        let before = self.covered.len();
        self.covered
            .retain(|dir| dir != sub && !(sub.is_empty() || dir.starts_with(&below)));
        if self.covered.len() != before {
            self.reshaped_at = Some(now);
        }
    }
}

/// The events watched: a file's contents, times or name changing, and the directory
/// itself moved or removed.
#[cfg(target_os = "linux")]
const MASK: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_EXCL_UNLINK;

/// File systems whose edits from elsewhere raise no event here: NFS, SMB/CIFS, FUSE
/// (virtiofs, sshfs), 9p, Ceph, AFS, Lustre, GPFS.
#[cfg(target_os = "linux")]
const REMOTE_FILE_SYSTEMS: [i64; 10] = [
    0x6969,
    0x517b,
    0xff53_4d42,
    0xfe53_4d42,
    0x6573_5546,
    0x0102_1997,
    0x00c3_6400,
    0x5346_414f,
    0x0bd0_0bd0,
    0x4750_4653,
];

/// How long the reading thread waits for events before it checks whether it should stop.
#[cfg(target_os = "linux")]
const POLL_MS: i32 = 500;

/// [`SourceEvents::watch`] of the directories `wanted`, ancestors included.
#[cfg(target_os = "linux")]
fn watch_directories(root: &Path, wanted: HashSet<String>) -> Option<SourceEvents> {
    // SAFETY: plain system call; the descriptor returned is owned below.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        tracing::debug!(
            "no inotify ({}): source files are looked at on disk",
            io::Error::last_os_error()
        );
        return None;
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    let inotify = unsafe { OwnedFd::from_raw_fd(fd) };
    let project = Beneath::new(root);
    let mut state = EventState {
        dirs: HashMap::new(),
        covered: HashSet::new(),
        touched: HashMap::new(),
        lost_at: None,
        reshaped_at: None,
    };
    let mut wanted: Vec<String> = wanted.into_iter().collect();
    wanted.sort();
    for dir in wanted {
        match add_watch(&inotify, &project, &dir) {
            Ok(wd) => {
                state.dirs.insert(wd, dir.clone());
                state.covered.insert(dir);
            }
            Err(err) if err.raw_os_error() == Some(libc::ENOSPC) => {
                tracing::info!(
                    "the kernel's limit of inotify watches is reached after {} directories \
                     (fs.inotify.max_user_watches): files in the others are looked at on disk",
                    state.dirs.len()
                );
                break;
            }
            Err(err) => tracing::debug!("{dir:?} is not watched: {err}"),
        }
    }
    if state.dirs.is_empty() {
        return None;
    }
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        seen: AtomicU64::new(0),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let reader = (shared.clone(), stop.clone());
    std::thread::Builder::new()
        .name("acpdb-source-events".into())
        .spawn(move || read_events(inotify, &reader.0, &reader.1))
        .ok()?;
    Some(SourceEvents {
        shared,
        started: Instant::now(),
        stop,
    })
}

/// Watches `dir` through a handle opened beneath the project, unless it lies on a file
/// system whose edits from elsewhere raise no event.
#[cfg(target_os = "linux")]
fn add_watch(inotify: &OwnedFd, project: &Beneath, dir: &str) -> io::Result<i32> {
    let handle = project.directory(dir)?;
    // SAFETY: `fs` is plain data the kernel fills in.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `handle` is open for the call and `fs` outlives it.
    if unsafe { libc::fstatfs(handle.as_raw_fd(), &mut fs) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)]
    if REMOTE_FILE_SYSTEMS.contains(&(fs.f_type as i64)) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a network or FUSE file system",
        ));
    }
    // The handle's own directory, whatever its path names by now.
    let name = std::ffi::CString::new(format!("/proc/self/fd/{}", handle.as_raw_fd()))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both arguments outlive the call.
    let wd = unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), name.as_ptr(), MASK) };
    if wd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(wd)
}

/// Reads events until `stop` is set.
#[cfg(target_os = "linux")]
fn read_events(inotify: OwnedFd, shared: &Shared, stop: &AtomicBool) {
    // Aligned for `inotify_event`.
    let mut buffer = vec![0u64; 8192];
    while !stop.load(Ordering::Relaxed) {
        let mut ready = libc::pollfd {
            fd: inotify.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one `pollfd` that outlives the call.
        if unsafe { libc::poll(&mut ready, 1, POLL_MS) } <= 0 {
            continue;
        }
        loop {
            let bytes = std::mem::size_of_val(buffer.as_slice());
            // SAFETY: the buffer is writable for `bytes` bytes.
            let read =
                unsafe { libc::read(inotify.as_raw_fd(), buffer.as_mut_ptr().cast(), bytes) };
            let Ok(read) = usize::try_from(read) else {
                break;
            };
            if read == 0 {
                break;
            }
            // SAFETY: the kernel wrote `read` bytes at the start of the buffer.
            let events = unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), read) };
            record(shared, events);
        }
    }
}

/// Records a buffer of events.
#[cfg(target_os = "linux")]
fn record(shared: &Shared, mut events: &[u8]) {
    let header = std::mem::size_of::<libc::inotify_event>();
    let now = Instant::now();
    let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    while events.len() >= header {
        // SAFETY: a whole header lies in the buffer; read unaligned all the same.
        let event: libc::inotify_event =
            unsafe { std::ptr::read_unaligned(events.as_ptr().cast()) };
        let end = (header + event.len as usize).min(events.len());
        let name = &events[header..end];
        let name = name.split(|b| *b == 0).next().unwrap_or_default();
        let name = String::from_utf8_lossy(name);
        events = &events[end..];
        shared.seen.fetch_add(1, Ordering::Relaxed);
        let mask = event.mask;
        if mask & libc::IN_Q_OVERFLOW != 0 {
            state.covered.clear();
            state.lost_at = Some(now);
            continue;
        }
        if mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED | libc::IN_UNMOUNT)
            != 0
        {
            if let Some(dir) = state.dirs.get(&event.wd).cloned() {
                state.uncover(&dir, now);
            }
            continue;
        }
        if name.is_empty() {
            continue;
        }
        if mask & libc::IN_ISDIR != 0 {
            if mask & (libc::IN_MOVED_FROM | libc::IN_MOVED_TO | libc::IN_DELETE) != 0 {
                if let Some(dir) = state.dirs.get(&event.wd).cloned() {
                    state.uncover(&joined(&dir, &name), now);
                }
            }
            continue;
        }
        state.touched(event.wd, &name, now);
    }
}

/// No `inotify`: source files are looked at on disk.
#[cfg(not(target_os = "linux"))]
fn watch_directories(_root: &Path, _wanted: HashSet<String>) -> Option<SourceEvents> {
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Waits until `done` holds, at most two seconds.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        done()
    }

    #[test]
    fn edits_are_told_by_events_and_moved_or_linked_directories_are_not_trusted() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for file in ["top.ts", "src/a/one.ts", "src/a/two.ts", "src/b/three.ts"] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        std::os::unix::fs::symlink(outside.path(), root.join("linked")).unwrap();
        std::fs::write(outside.path().join("out.ts"), "x").unwrap();
        let events = SourceEvents::watch(root, ["", "src/a", "src/b", "linked"].map(String::from))
            .expect("inotify");
        // The directories and their ancestors, never one through a link.
        assert_eq!(events.covered(), 4);
        let before = Instant::now();
        let unchanged =
            |path: &str, since: Instant| events.edited_since(&[path], since)[0].is_none();
        for file in ["top.ts", "src/a/one.ts", "src/b/three.ts"] {
            assert!(unchanged(file, before), "{file}");
        }
        assert!(!unchanged("linked/out.ts", before));
        assert!(events.quiet_since(before));

        std::fs::write(outside.path().join("out.ts"), "edited").unwrap();
        std::fs::write(root.join("src/a/one.ts"), "edited").unwrap();
        assert!(eventually(|| !unchanged("src/a/one.ts", before)));
        let said = events.edited_since(&["src/a/one.ts", "src/a/two.ts"], before);
        assert!(said[0].is_some_and(|e| e.last_event.is_some_and(|at| at > before)));
        assert_eq!(said[1], None);
        assert!(!events.quiet_since(before));
        assert!(!events.should_rewatch());
        // Watched before a moment, and no event after it: unchanged since.
        std::thread::sleep(Duration::from_millis(20));
        assert!(unchanged("src/a/one.ts", Instant::now()));

        // A directory moved away and another put in its place: its files are looked at again.
        let seen = events.seen();
        std::fs::rename(root.join("src/b"), root.join("src/old")).unwrap();
        std::fs::create_dir(root.join("src/b")).unwrap();
        std::fs::write(root.join("src/b/three.ts"), "other").unwrap();
        assert!(eventually(|| events.should_rewatch()));
        assert!(events.seen() > seen);
        assert!(!unchanged("src/b/three.ts", before));
        assert!(unchanged("src/a/two.ts", before));
        assert!(!events.quiet_since(before));
    }
}
