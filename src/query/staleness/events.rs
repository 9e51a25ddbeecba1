//! Edits to the indexed source files as the kernel reports them (Linux `inotify`), so that an
//! answer can tell that a file did not change since the last sweep without looking at the disk.
//!
//! [`SourceEvents::watch`] watches the directories that hold indexed files and their
//! ancestors up to the project directory, each opened beneath the project without passing
//! through a symbolic link ([`crate::regular_file::Beneath::directory`]) and watched through
//! its handle, so no link, even one swapped in between, makes it watch outside the project. A
//! thread of its own reads the events and records, per indexed file, when the last one was
//! read. A directory is *covered* when it and every directory above it up to the project are
//! watched: one moved, removed or replaced stops being covered (its files are looked at on
//! disk again, as without events), and so do those a watch could not be added for (the
//! kernel's limit, permissions), those on network or FUSE file systems (where other machines'
//! edits raise no event), and every directory once the kernel's queue overflowed, the reading
//! thread stopped, or the project directory's path names another directory
//! ([`SourceEvents::check_root`], each tick). [`SourceEvents::should_rewatch`] then says that
//! the watches should be set up anew; [`SourceEvents::complete`] says whether every directory
//! asked for is covered (else the sweep goes on as without events).
//!
//! *Invariant:* [`SourceEvents::edited_since`] says `None` only when every edit to the file
//! after that moment raised an event that was read since, or none was raised: a watch set up
//! before it, on a covered directory, and nothing lost since. An event the kernel has queued
//! but the thread has not read yet (normally well under a millisecond) is not known, as a look
//! kept for the watch interval would not know of it either.

// Without `inotify` nothing is watched: the recording side is never built.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[cfg(target_os = "linux")]
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::baseline::path_hash;
#[cfg(target_os = "linux")]
use crate::regular_file::Beneath;

/// Files whose last event is kept at most: past it the events count as lost (a checkout of
/// another branch touches more files than it pays to track one by one).
const TOUCHED_KEPT: usize = 65_536;

/// Events on indexed files read so far by every watch of this process (files touched,
/// directories reshaped, events lost), counted in [`super::changes_seen`].
pub(super) static EDITS_READ: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
struct EventState {
    /// Watched directories by watch descriptor: their paths relative to the project (`""`
    /// for the project directory).
    dirs: HashMap<i32, String>,
    /// Directories whose files' events are all seen.
    covered: HashSet<String>,
    /// The directories asked for: one created or moved in is a reason to watch anew.
    wanted: HashSet<String>,
    /// The [`path_hash`] of every indexed file: events on other files (editors' swap files,
    /// build output) are not recorded.
    indexed: HashSet<u64>,
    /// Indexed files with an event, and when its last one was read.
    touched: HashMap<String, Instant>,
    /// When events were last lost (the queue overflowed, too many files touched).
    lost_at: Option<Instant>,
    /// When a directory asked for last stopped being, or became, what its path names (moved,
    /// removed, replaced, created).
    reshaped_at: Option<Instant>,
}

/// A file that may have been edited ([`SourceEvents::edited_since`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Edited {
    /// When its last event was read, or events were last lost or a directory reshaped: a look
    /// from before it is out of date.
    pub(super) last_event: Option<Instant>,
}

/// The watches on one project's source directories and the events they reported.
#[derive(Debug)]
pub(super) struct SourceEvents {
    /// What the reading thread records, shared with the answers.
    state: Arc<Mutex<EventState>>,
    /// When every watch was in place.
    started: Instant,
    /// The project directory, and the identity (device, inode) of the directory watched as it.
    root: (PathBuf, (u64, u64)),
    /// Whether every directory asked for was watched, or was absent with the one above it
    /// watched (its creation is an event there).
    complete: bool,
    /// Wakes the reading thread to stop it.
    #[cfg(target_os = "linux")]
    wake: OwnedFd,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SourceEvents {
    /// Stops the reading thread and waits for it, so that its watches are gone when this is.
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        {
            let one: u64 = 1;
            // SAFETY: eight bytes from a live value to the eventfd this value owns.
            unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl SourceEvents {
    /// Watches the directories `dirs` (relative to `root`, as the index writes them) and
    /// their ancestors, recording the events of the files whose [`path_hash`] is in
    /// `indexed`; `None` where the kernel offers no `inotify` or no directory could be
    /// watched.
    pub(super) fn watch(
        root: &Path,
        dirs: impl IntoIterator<Item = String>,
        indexed: HashSet<u64>,
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
        watch_directories(root, wanted, indexed)
    }

    /// For each of `paths` (relative to the project), whether no edit can have happened since
    /// `since` without a look at the disk (`None`: its directory covered, watched before
    /// `since`, no event for it and nothing lost after), or else when a look is out of date.
    pub(super) fn edited_since(&self, paths: &[&str], since: Instant) -> Vec<Option<Edited>> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let trusted = self.started <= since && state.lost_at.is_none_or(|lost| lost < since);
        paths
            .iter()
            .map(|path| {
                let last = state.touched.get(*path).copied();
                let unchanged = trusted
                    && state.covered.contains(parent_of(path))
                    && last.is_none_or(|at| at < since);
                (!unchanged).then(|| Edited {
                    last_event: last.max(state.lost_at).max(state.reshaped_at),
                })
            })
            .collect()
    }

    /// Whether nothing happened since `since`: no event, nothing lost or reshaped, the
    /// watches set up before it.
    pub(super) fn quiet_since(&self, since: Instant) -> bool {
        if self.started > since {
            return false;
        }
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.lost_at.is_none_or(|lost| lost < since)
            && state.reshaped_at.is_none_or(|reshaped| reshaped < since)
            && state.touched.values().all(|at| *at < since)
    }

    /// Whether the watches should be set up anew: events were lost (or the reading thread
    /// stopped, or the project's path named another directory), or a directory asked for was
    /// moved, removed, replaced or created.
    pub(super) fn should_rewatch(&self) -> bool {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.lost_at.is_some() || state.reshaped_at.is_some()
    }

    /// Whether every directory asked for is watched (or absent, its creation watched).
    pub(super) fn complete(&self) -> bool {
        self.complete
    }

    /// Checks (one `stat`) that the project's path still names the directory watched; when
    /// it names another (a link to it swapped, a directory above it moved), nothing is
    /// trusted any more.
    pub(super) fn check_root(&self) {
        let (path, identity) = &self.root;
        if std::fs::metadata(path).is_ok_and(|meta| identity_of(&meta) == *identity) {
            return;
        }
        lose_everything(&self.state);
    }

    /// Forgets the files' events from before `since` (the start of a complete pass, which saw
    /// what they did).
    pub(super) fn forget_before(&self, since: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.touched.retain(|_, at| *at >= since);
    }

    /// How many directories are covered.
    pub(super) fn covered(&self) -> usize {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.covered.len()
    }
}

/// Nothing the events said can be trusted any more: events were lost.
fn lose_everything(state: &Mutex<EventState>) {
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    if state.lost_at.is_none() || !state.covered.is_empty() {
        state.covered.clear();
        state.lost_at = Some(Instant::now());
        EDITS_READ.fetch_add(1, Ordering::SeqCst);
    }
}

/// A directory's device and inode.
fn identity_of(meta: &std::fs::Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        (0, 0)
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
    /// A file in the directory watched by `wd` had an event; whether it is an indexed file.
    fn touched(&mut self, wd: i32, name: &str, now: Instant) -> bool {
        let Some(dir) = self.dirs.get(&wd) else {
            return false;
        };
        let path = joined(dir, name);
        if !self.indexed.contains(&path_hash(&path)) {
            return false;
        }
        if self.touched.len() >= TOUCHED_KEPT && !self.touched.contains_key(&path) {
            self.touched.clear();
            self.lost_at = Some(now);
            return true;
        }
        self.touched.insert(path, now);
        true
    }

    /// `sub` (and every directory below it) no longer is what its path names; whether a
    /// covered directory was among them.
    fn uncover(&mut self, sub: &str, now: Instant) -> bool {
        let below = format!("{sub}/");
        let before = self.covered.len();
        self.covered
            .retain(|dir| dir != sub && !(sub.is_empty() || dir.starts_with(&below)));
        let reshaped = self.covered.len() != before;
        if reshaped {
            self.reshaped_at = Some(now);
        }
        reshaped
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

/// File systems whose edits from elsewhere raise no event here (`statfs` magic numbers): NFS,
/// SMB, CIFS, SMB2, FUSE (virtiofs, sshfs), 9p, Ceph, AFS, Lustre, GPFS, VirtualBox shared
/// folders, OCFS2, GFS2.
#[cfg(target_os = "linux")]
const REMOTE_FILE_SYSTEMS: [u32; 13] = [
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
    0x786f_4256,
    0x7461_636f,
    0x0116_1970,
];

/// [`SourceEvents::watch`] of the directories `wanted`, ancestors included: each is covered
/// only if the one above it is.
#[cfg(target_os = "linux")]
fn watch_directories(
    root: &Path,
    wanted: HashSet<String>,
    indexed: HashSet<u64>,
) -> Option<SourceEvents> {
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
    // SAFETY: plain system call; the descriptor returned is owned below.
    let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if wake < 0 {
        return None;
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    let wake = unsafe { OwnedFd::from_raw_fd(wake) };
    let project = Beneath::new(root);
    let root_handle = project.directory("").ok()?;
    let root_identity = identity_of(&root_handle.metadata().ok()?);
    let mut state = EventState {
        dirs: HashMap::new(),
        covered: HashSet::new(),
        wanted: HashSet::new(),
        indexed,
        touched: HashMap::new(),
        lost_at: None,
        reshaped_at: None,
    };
    let mut dirs: Vec<&String> = wanted.iter().collect();
    // Parents before their children.
    dirs.sort();
    let mut complete = true;
    for dir in dirs {
        if !dir.is_empty() && !state.covered.contains(parent_of(dir)) {
            complete = false;
            continue;
        }
        match add_watch(&inotify, &project, dir) {
            // Two paths naming one directory (a bind mount): neither is covered, as an edit
            // through one would be reported under the other's name.
            Ok(wd) if state.dirs.contains_key(&wd) => {
                if let Some(other) = state.dirs.get(&wd).cloned() {
                    state.covered.remove(&other);
                }
                complete = false;
            }
            Ok(wd) => {
                state.dirs.insert(wd, dir.clone());
                state.covered.insert(dir.clone());
            }
            // Gone since the import: its creation is an event in the directory above.
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) if err.raw_os_error() == Some(libc::ENOSPC) => {
                tracing::info!(
                    "the kernel's limit of inotify watches is reached after {} directories \
                     (fs.inotify.max_user_watches): files in the others are looked at on disk",
                    state.dirs.len()
                );
                complete = false;
                break;
            }
            Err(err) => {
                tracing::debug!("{dir:?} is not watched: {err}");
                complete = false;
            }
        }
    }
    if state.dirs.is_empty() {
        return None;
    }
    state.wanted = wanted;
    let state = Arc::new(Mutex::new(state));
    let reading = state.clone();
    let woken = wake.as_raw_fd();
    let reader = std::thread::Builder::new()
        .name("acpdb-source-events".into())
        .spawn(move || read_events(inotify, woken, &reading))
        .ok()?;
    Some(SourceEvents {
        state,
        started: Instant::now(),
        root: (root.to_path_buf(), root_identity),
        complete,
        wake,
        reader: Some(reader),
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
    // The magic numbers are 32-bit; `f_type` is wider (and signed) on some targets.
    #[allow(clippy::unnecessary_cast)]
    if REMOTE_FILE_SYSTEMS.contains(&(fs.f_type as u32)) {
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

/// Reads events until the eventfd `woken` is written to.
#[cfg(target_os = "linux")]
fn read_events(inotify: OwnedFd, woken: i32, state: &Mutex<EventState>) {
    // Aligned for `inotify_event`.
    let mut buffer = vec![0u64; 8192];
    loop {
        let mut ready = [
            libc::pollfd {
                fd: inotify.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: woken,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two `pollfd`s that outlive the call.
        let polled = unsafe { libc::poll(ready.as_mut_ptr(), 2, -1) };
        if polled < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if ready[1].revents != 0 {
            return;
        }
        if polled < 0 || ready[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            // Nothing more will be read: nothing is trusted.
            lose_everything(state);
            return;
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
            record(state, events);
        }
    }
}

/// Records a buffer of events.
#[cfg(target_os = "linux")]
fn record(state: &Mutex<EventState>, mut events: &[u8]) {
    let header = std::mem::size_of::<libc::inotify_event>();
    let now = Instant::now();
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let mut recorded = 0;
    while events.len() >= header {
        // SAFETY: a whole header lies in the buffer; read unaligned all the same.
        let event: libc::inotify_event =
            unsafe { std::ptr::read_unaligned(events.as_ptr().cast()) };
        let end = header.saturating_add(event.len as usize).min(events.len());
        let name = &events[header..end];
        let name = name.split(|b| *b == 0).next().unwrap_or_default();
        let name = String::from_utf8_lossy(name);
        events = &events[end..];
        let mask = event.mask;
        if mask & libc::IN_Q_OVERFLOW != 0 {
            state.covered.clear();
            state.lost_at = Some(now);
            recorded += 1;
            continue;
        }
        if mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED | libc::IN_UNMOUNT)
            != 0
        {
            if let Some(dir) = state.dirs.get(&event.wd).cloned() {
                recorded += u64::from(state.uncover(&dir, now));
            }
            continue;
        }
        if name.is_empty() {
            continue;
        }
        if mask & libc::IN_ISDIR != 0 {
            let Some(dir) = state.dirs.get(&event.wd).cloned() else {
                continue;
            };
            let sub = joined(&dir, &name);
            if mask & (libc::IN_MOVED_FROM | libc::IN_MOVED_TO | libc::IN_DELETE) != 0
                && state.uncover(&sub, now)
            {
                recorded += 1;
            }
            // A directory asked for that appears: watched at the next setting up.
            if mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 && state.wanted.contains(&sub) {
                state.reshaped_at = Some(now);
                recorded += 1;
            }
            continue;
        }
        recorded += u64::from(state.touched(event.wd, &name, now));
    }
    drop(state);
    EDITS_READ.fetch_add(recorded, Ordering::SeqCst);
}

/// No `inotify`: source files are looked at on disk.
#[cfg(not(target_os = "linux"))]
fn watch_directories(
    _root: &Path,
    _wanted: HashSet<String>,
    _indexed: HashSet<u64>,
) -> Option<SourceEvents> {
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
        let root = &dir.path().join("project");
        for file in ["top.ts", "src/a/one.ts", "src/a/two.ts", "src/b/three.ts"] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        std::os::unix::fs::symlink(outside.path(), root.join("linked")).unwrap();
        std::fs::write(outside.path().join("out.ts"), "x").unwrap();
        let indexed = [
            "top.ts",
            "src/a/one.ts",
            "src/a/two.ts",
            "src/b/three.ts",
            "linked/out.ts",
        ]
        .map(path_hash)
        .into_iter()
        .collect();
        let events = SourceEvents::watch(
            root,
            ["", "src/a", "src/b", "linked"].map(String::from),
            indexed,
        )
        .expect("inotify");
        // The directories and their ancestors, never one through a link (so not all).
        assert_eq!(events.covered(), 4);
        assert!(!events.complete());
        let before = Instant::now();
        let read_before = EDITS_READ.load(Ordering::SeqCst);
        let unchanged =
            |path: &str, since: Instant| events.edited_since(&[path], since)[0].is_none();
        for file in ["top.ts", "src/a/one.ts", "src/b/three.ts"] {
            assert!(unchanged(file, before), "{file}");
        }
        assert!(!unchanged("linked/out.ts", before));
        assert!(events.quiet_since(before));

        // Files that are not indexed (an editor's swap file) are not recorded.
        std::fs::write(root.join("src/a/.one.ts.swp"), "x").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(EDITS_READ.load(Ordering::SeqCst), read_before);
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
        let read = EDITS_READ.load(Ordering::SeqCst);
        std::fs::rename(root.join("src/b"), root.join("src/old")).unwrap();
        std::fs::create_dir(root.join("src/b")).unwrap();
        std::fs::write(root.join("src/b/three.ts"), "other").unwrap();
        assert!(eventually(|| events.should_rewatch()));
        assert!(EDITS_READ.load(Ordering::SeqCst) > read);
        assert!(!unchanged("src/b/three.ts", before));
        assert!(unchanged("src/a/two.ts", before));
        // A look from before the directory was replaced is out of date.
        let after = events.edited_since(&["src/b/three.ts"], before)[0];
        assert!(after.is_some_and(|e| e.last_event.is_some_and(|at| at > before)));

        // The project's path naming another directory (a link to it swapped) is seen by the
        // directory's identity: no event tells it.
        let link = dir.path().join("current");
        std::os::unix::fs::symlink(root, &link).unwrap();
        let indexed = HashSet::from([path_hash("src/a/two.ts")]);
        let fresh = SourceEvents::watch(&link, [String::from("src/a")], indexed).unwrap();
        assert!(fresh.complete());
        let now = Instant::now();
        fresh.check_root();
        assert!(!fresh.should_rewatch());
        assert_eq!(fresh.edited_since(&["src/a/two.ts"], now), [None]);
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        fresh.check_root();
        assert!(fresh.should_rewatch());
        assert!(fresh.edited_since(&["src/a/two.ts"], now)[0].is_some());
        assert!(!events.quiet_since(before));
    }
}
