//! CPU priorities of threads. On Linux a priority (niceness) belongs to one thread, so work that
//! can wait (a re-import while the previous database answers, heavy queries, an import's
//! full-text indexing) can yield the cores to work that cannot. Elsewhere niceness applies to
//! the whole process, and nothing is changed.

/// The nice value of the least favoured threads.
#[cfg(target_os = "linux")]
const LOWEST: i32 = 19;

/// Nice levels below the server at which heavy queries run (walks, scans, `acp_impact`,
/// `acp_trace`, `acp_unused`): when every core is busy, the scheduler gives the threads that
/// answer point lookups about ten times their share, so a lookup that arrives during a row of
/// searches and walks is answered at once rather than time-sliced with them.
pub const HEAVY_QUERIES: i32 = 10;

/// Nice levels below the server at which a re-import runs while the previous database answers:
/// below the heavy queries too (about a seventh of their share when they compete), since an
/// agent waits on every answer and on no re-import. With a core free it runs at full speed.
pub const REIMPORT: i32 = 19;

const _: () = assert!(REIMPORT > HEAVY_QUERIES && HEAVY_QUERIES > 0);

/// Sets the calling thread's priority to `steps` nice levels below the process's own (its main
/// thread's, which nothing here lowers), at most 19. Measured from the process, not from the
/// calling thread, so a thread started by a lowered one is not lowered twice.
pub fn lower_this_thread(steps: i32) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: errno is this thread's own; getpid, getpriority and setpriority take plain
        // integers and touch no memory of ours. On Linux `who = pid` names the main thread
        // and `who = 0` the calling thread only.
        unsafe {
            *libc::__errno_location() = 0;
            let process = libc::getpriority(libc::PRIO_PROCESS, libc::getpid() as libc::id_t);
            if process == -1 && *libc::__errno_location() != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let wanted = process.saturating_add(steps).min(LOWEST);
            if libc::setpriority(libc::PRIO_PROCESS, 0, wanted) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = steps;
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn nice() -> i32 {
        // SAFETY: getpriority takes plain integers; `who = 0` is the calling thread.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn threads_are_lowered_from_the_process_not_from_each_other() {
        let before = nice();
        let (lowered, lowered_child, capped) = std::thread::spawn(|| {
            lower_this_thread(3).unwrap();
            let once = nice();
            // A thread started by a lowered one, lowered by the same steps, ends at the same
            // level, not lower.
            let child = std::thread::spawn(|| {
                lower_this_thread(3).unwrap();
                nice()
            })
            .join()
            .unwrap();
            lower_this_thread(LOWEST).unwrap();
            (once, child, nice())
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + 3).min(LOWEST));
        assert_eq!(lowered_child, lowered);
        assert_eq!(capped, LOWEST, "capped at the lowest priority");
        assert_eq!(nice(), before, "the calling thread only");
    }
}
