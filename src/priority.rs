//! CPU priorities of threads. On Linux a priority (niceness) belongs to one thread, so work that
//! can wait (a re-import while the previous database answers, heavy queries, an import's
//! full-text indexing) can yield the cores to work that cannot. Elsewhere niceness applies to
//! the whole process, and nothing is changed.

/// The nice value of the least favoured threads.
const LOWEST: i32 = 19;

/// Lowers the calling thread's priority by `steps` nice levels (to 19 at most), relative to the
/// priority it has (inherited from the thread that started it).
pub fn lower_this_thread(steps: i32) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: errno is this thread's own; getpriority and setpriority take plain integers
        // and touch no memory of ours; `who = 0` is the calling thread only.
        unsafe {
            *libc::__errno_location() = 0;
            let now = libc::getpriority(libc::PRIO_PROCESS, 0);
            if now == -1 && *libc::__errno_location() != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let wanted = now.saturating_add(steps).min(LOWEST);
            if libc::setpriority(libc::PRIO_PROCESS, 0, wanted) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = steps;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn only_the_calling_thread_is_lowered() {
        fn nice() -> i32 {
            // SAFETY: as above.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
        }
        let before = nice();
        let (lowered, lowered_again) = std::thread::spawn(|| {
            lower_this_thread(3).unwrap();
            let once = nice();
            lower_this_thread(LOWEST).unwrap();
            (once, nice())
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + 3).min(LOWEST));
        assert_eq!(lowered_again, LOWEST, "capped at the lowest priority");
        assert_eq!(nice(), before, "the calling thread only");
    }
}
