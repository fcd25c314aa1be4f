//! The priority of a session's own threads: a calm nice while they keep up, and ahead of
//! the load (nice −10) while they fall behind. A thread that yields to the load (nice 19)
//! runs in the CPU time the load leaves, so that watching costs the load little; one
//! that falls behind would lose records, hold ever more memory or miss its consumer's
//! deadlines, and takes the CPU it needs until it has caught up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The nice of a thread that has fallen behind.
pub(crate) const HURRIED_NICE: i32 = -10;

/// The nice of a thread that yields to the load while it keeps up.
pub(crate) const YIELDING_NICE: i32 = 19;

/// One thread's priority, set on the calling thread (a thread's nice is its own on
/// Linux). Set at every call, not only on a change: its consumer may have raised it from
/// outside ([`Urgency::set`]), and a system call per drain costs nothing beside one.
#[derive(Debug)]
pub(crate) struct Hurry {
    /// The nice while the thread keeps up.
    calm_nice: i32,
    /// The nice while it is behind: [`HURRIED_NICE`], or the calm one where the thread
    /// may not raise its priority.
    hurried_nice: i32,
}

impl Hurry {
    /// For the calling thread, whose nice is left as it is until [`Hurry::follow`] (a
    /// thread it spawns before inherits it). A thread that may not raise its priority
    /// again (raising needs CAP_SYS_NICE: an agent run with CAP_PERFMON alone) keeps the
    /// nice it has throughout, rather than yield once for good.
    pub(crate) fn new(calm_nice: i32) -> Hurry {
        let before = own_nice();
        if !may_raise() {
            return Hurry {
                calm_nice: before,
                hurried_nice: before,
            };
        }
        Hurry {
            calm_nice,
            hurried_nice: HURRIED_NICE,
        }
    }

    /// Whether it ever yields: a thread that may not hurry back keeps its priority.
    pub(crate) fn yields(&self) -> bool {
        self.calm_nice > self.hurried_nice
    }

    /// Sets the calling thread's nice for `behind`: [`HURRIED_NICE`] when it is, its calm
    /// nice when not.
    pub(crate) fn follow(&self, behind: bool) {
        let nice = if behind {
            self.hurried_nice
        } else {
            self.calm_nice
        };
        set_nice(0, nice);
    }
}

/// A consumer's say on the priority of the threads that feed it: a live session whose
/// drain falls behind its intervals' ends hurries the drain's threads, which may be too
/// starved to notice on their own (at nice 19 beside a load of CPU-bound processes they
/// can wait seconds for a CPU). The threads hurry while it is set, and go back to their
/// own judgement once it is cleared.
#[derive(Debug, Default)]
pub(crate) struct Urgency {
    behind: AtomicBool,
    /// The threads to raise, by thread id.
    threads: Mutex<Vec<libc::pid_t>>,
}

impl Urgency {
    /// Counts the calling thread among those [`Urgency::set`] raises.
    pub(crate) fn enlist(&self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tid);
    }

    /// Whether the consumer finds its feeders behind.
    pub(crate) fn is_set(&self) -> bool {
        self.behind.load(Ordering::Relaxed)
    }

    /// Says whether the feeders are behind; when they are, raises each at once, from this
    /// thread.
    pub(crate) fn set(&self, behind: bool) {
        self.behind.store(behind, Ordering::Relaxed);
        if behind {
            for &tid in self
                .threads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                set_nice(tid, HURRIED_NICE);
            }
        }
    }
}

/// Whether this process may raise its threads' priority (nice −10 needs CAP_SYS_NICE),
/// tried on the calling thread, whose nice is then put back.
pub(crate) fn may_raise() -> bool {
    let before = own_nice();
    set_nice(0, HURRIED_NICE);
    let raised = own_nice() == HURRIED_NICE;
    set_nice(0, before);
    raised
}

/// The calling thread ahead of the load (nice −10) until dropped, when its nice is put
/// back; left as it is where it may not be raised. For work that nothing watched pays for
/// and that a busy machine would otherwise slow: a recorder's start-up, before the first
/// event it can record. Threads the raised thread spawns inherit its nice: drop it first.
pub(crate) struct Raised {
    before: i32,
}

impl Raised {
    pub(crate) fn now() -> Raised {
        let before = own_nice();
        if before > HURRIED_NICE {
            set_nice(0, HURRIED_NICE);
        }
        Raised { before }
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        set_nice(0, self.before);
    }
}

/// The calling thread's nice, as the kernel holds it.
pub(crate) fn own_nice() -> i32 {
    nice_of(0)
}

/// Thread `tid`'s nice (0: the calling thread's), as the kernel holds it.
pub(crate) fn nice_of(tid: libc::pid_t) -> i32 {
    // SAFETY: getpriority takes no pointers.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) }
}

/// Sets thread `tid`'s nice (0: the calling thread's). Refused (raising a priority needs
/// CAP_SYS_NICE; the thread has ended), the thread stays as it is.
pub(crate) fn set_nice(tid: libc::pid_t, nice: i32) {
    // SAFETY: setpriority has no memory preconditions.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The nices a thread following `calm_nice` takes, calm then behind then calm again,
    /// read from the kernel, in a thread of its own.
    pub(crate) fn nices_of(calm_nice: i32) -> Vec<i32> {
        std::thread::spawn(move || {
            let hurry = Hurry::new(calm_nice);
            [false, true, false]
                .into_iter()
                .map(|behind| {
                    hurry.follow(behind);
                    own_nice()
                })
                .collect()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_thread_yields_while_it_keeps_up_and_hurries_while_behind() {
        // Raising a thread's priority needs CAP_SYS_NICE (root on this project's machines).
        if unsafe { libc::geteuid() } != 0 {
            // Unprivileged, a thread that could not hurry back keeps its nice throughout
            // (the one it inherited: `nice cargo test` starts it at 10).
            assert_eq!(nices_of(YIELDING_NICE), [own_nice(); 3]);
            return;
        }
        assert_eq!(nices_of(YIELDING_NICE), [19, -10, 19]);
        assert_eq!(nices_of(0), [0, -10, 0]);
    }

    /// Without CAP_SYS_NICE (dropped from this thread's effective set), a thread that
    /// yielded could never hurry back: it keeps the nice it had (the one it inherited:
    /// `nice cargo test` starts it at 10).
    #[test]
    fn a_thread_that_may_not_hurry_does_not_yield() {
        let nices = std::thread::spawn(|| {
            if !drop_own_sys_nice() {
                return None;
            }
            let before = own_nice();
            let hurry = Hurry::new(YIELDING_NICE);
            Some((
                before,
                [false, true, false].map(|behind| {
                    hurry.follow(behind);
                    own_nice()
                }),
            ))
        })
        .join()
        .unwrap();
        match nices {
            Some((before, n)) => assert_eq!(n, [before; 3]),
            None => powerlens_sys::skip_test!("could not drop CAP_SYS_NICE from a thread"),
        }
    }

    /// Drops CAP_SYS_NICE from the calling thread's effective capabilities (capset works
    /// per thread on Linux); whether it could.
    fn drop_own_sys_nice() -> bool {
        const CAP_SYS_NICE: u32 = 23;
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let mut data = [Data::default(); 2];
        // SAFETY: capget/capset with a version-3 header and two data structs, as the
        // kernel expects; they touch only the calling thread.
        unsafe {
            if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
                return false;
            }
            data[0].effective &= !(1 << CAP_SYS_NICE);
            libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) == 0
        }
    }

    /// A consumer raises an enlisted thread from its own thread, at once; the thread,
    /// when it next looks, hurries while the urgency holds and calms down after.
    #[test]
    fn a_consumer_raises_the_threads_that_feed_it() {
        if unsafe { libc::geteuid() } != 0 {
            powerlens_sys::skip_test!("raising a priority needs CAP_SYS_NICE (root)");
            return;
        }
        use std::sync::{mpsc, Arc};
        let urgency = Arc::new(Urgency::default());
        let (to_feeder, orders) = mpsc::channel::<()>();
        let (to_test, nices) = mpsc::channel();
        let feeder = {
            let urgency = urgency.clone();
            std::thread::spawn(move || {
                let hurry = Hurry::new(YIELDING_NICE);
                hurry.follow(false);
                urgency.enlist();
                for () in orders {
                    let before = own_nice();
                    hurry.follow(urgency.is_set());
                    to_test.send((before, own_nice())).unwrap();
                }
            })
        };
        to_feeder.send(()).unwrap();
        assert_eq!(nices.recv().unwrap(), (19, 19));
        urgency.set(true);
        // Raised before it ran again, and hurried when it looks.
        to_feeder.send(()).unwrap();
        assert_eq!(nices.recv().unwrap(), (-10, -10));
        urgency.set(false);
        to_feeder.send(()).unwrap();
        assert_eq!(nices.recv().unwrap(), (-10, 19));
        drop(to_feeder);
        feeder.join().unwrap();
    }
}
