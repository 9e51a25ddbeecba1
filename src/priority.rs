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

/// The calling thread confined to half the cores it may run on (the last ones, at least one),
/// and so are the threads it starts meanwhile, until this value is dropped on that thread, which
/// gives it back the cores it had. Nothing is confined on one core, or outside Linux.
///
/// Niceness decides who runs when threads wait for a core, not what a running thread costs the
/// others: a re-import scanning a cache on every core fills the caches and memory that the tool
/// calls read. Confined, it leaves the other cores' to them.
#[must_use]
pub struct Confined {
    /// The cores the thread had, to give back.
    #[cfg(target_os = "linux")]
    before: Option<libc::cpu_set_t>,
}

impl Confined {
    /// Confines the calling thread to half the cores it may run on.
    pub fn to_half_the_cores() -> std::io::Result<Confined> {
        #[cfg(target_os = "linux")]
        {
            let before = allowed_cores()?;
            let cores: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                // SAFETY: the index is below the set's size.
                .filter(|&core| unsafe { libc::CPU_ISSET(core, &before) })
                .collect();
            if cores.len() < 2 {
                return Ok(Confined { before: None });
            }
            // SAFETY: a zeroed set is an empty one, and the indexes are below its size.
            let mut half: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            for &core in &cores[cores.len() - cores.len() / 2..] {
                unsafe { libc::CPU_SET(core, &mut half) };
            }
            set_allowed_cores(&half)?;
            Ok(Confined {
                before: Some(before),
            })
        }
        #[cfg(not(target_os = "linux"))]
        Ok(Confined {})
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(before) = self.before {
            if let Err(err) = set_allowed_cores(&before) {
                tracing::debug!("cannot give a thread back its cores: {err}");
            }
        }
    }
}

/// The cores the calling thread may run on.
#[cfg(target_os = "linux")]
fn allowed_cores() -> std::io::Result<libc::cpu_set_t> {
    // SAFETY: a zeroed set is an empty one; the call writes at most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// Lets the calling thread run on `set` only.
#[cfg(target_os = "linux")]
fn set_allowed_cores(set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: the call reads at most the set's size from it; `pid = 0` is the calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
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

    #[test]
    fn a_confined_thread_and_those_it_starts_run_on_half_its_cores_until_it_gives_them_back() {
        std::thread::spawn(|| {
            // SAFETY: the sets are valid ones read from the kernel.
            let count = |set: &libc::cpu_set_t| unsafe { libc::CPU_COUNT(set) } as usize;
            let before = allowed_cores().unwrap();
            let confined = Confined::to_half_the_cores().unwrap();
            let during = allowed_cores().unwrap();
            let started = std::thread::spawn(|| allowed_cores().unwrap())
                .join()
                .unwrap();
            drop(confined);
            let after = allowed_cores().unwrap();

            let cores = count(&before);
            assert_eq!(count(&during), if cores < 2 { cores } else { cores / 2 });
            for core in 0..libc::CPU_SETSIZE as usize {
                // SAFETY: the index is below the sets' size.
                unsafe {
                    assert!(!libc::CPU_ISSET(core, &during) || libc::CPU_ISSET(core, &before));
                    assert_eq!(
                        libc::CPU_ISSET(core, &started),
                        libc::CPU_ISSET(core, &during)
                    );
                    assert_eq!(
                        libc::CPU_ISSET(core, &after),
                        libc::CPU_ISSET(core, &before)
                    );
                }
            }
        })
        .join()
        .unwrap();
    }
}
