//! Raises a thread ahead of the load (nice −10) at a deadline, from a thread of its own.
//!
//! A live session's thread hands the events that came on to its analysis at nice 19,
//! between its waits, so that the load goes first; it goes back to nice −10 for each
//! interval's end. But only a running thread can raise itself, and beside CPU-bound work
//! at a higher priority than its own a nice-19 thread waits a long time for a CPU (the
//! scheduler weighs nice 19 at 15 against nice −10's 9,548, and charges the time it ran
//! at that rate). Beside two spinners at nice −10, a debug build's hand-on of 50 ms of
//! events waited up to 6 s to finish, and the interval it was in closed that late
//! (`agent --trace-duty 100`). The alarm raises the thread from outside when the
//! interval's end is due, as `Urgency` raises the drain's threads, whatever it is doing
//! then: it finishes that hand-on ahead of the load and closes the interval. (The thread
//! looks at the clock again after it yields, so that a raise that came just before its
//! yield is not undone.)

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::priority::{set_nice, HURRIED_NICE};

pub(crate) struct Alarm {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    tid: libc::pid_t,
    due: Option<Instant>,
    /// After each deadline the next is one period later, as the caller's schedule goes:
    /// its [`Alarm::set`] for it then finds it set, and wakes nothing.
    period: Duration,
    stop: bool,
}

impl Alarm {
    /// An alarm for the calling thread, whose deadlines come every `period`, none set
    /// yet; `None` when its thread cannot be started.
    pub(crate) fn for_current_thread(period: Duration) -> Option<Alarm> {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                tid,
                due: None,
                period,
                stop: false,
            }),
            changed: Condvar::new(),
        });
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("powerlens-alarm".into())
            .spawn(move || {
                // Ahead of the load itself: it only sleeps, and must wake on time. Its
                // lock is shared with the caller at nice −10, never with a yielding thread.
                set_nice(0, HURRIED_NICE);
                theirs.raise_when_due();
            })
            .ok()?;
        Some(Alarm {
            shared,
            thread: Some(thread),
        })
    }

    /// Raises the thread at `due` and every period after it, instead of on the schedule
    /// set before. Call it ahead of the load: the alarm's thread takes the same lock.
    pub(crate) fn set(&self, due: Instant) {
        let mut state = self.shared.lock();
        if state.due != Some(due) {
            state.due = Some(due);
            self.shared.changed.notify_one();
        }
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn raise_when_due(&self) {
        let mut state = self.lock();
        while !state.stop {
            let now = Instant::now();
            if let Some(due) = state.due.filter(|&due| now >= due) {
                // Whatever it does: a thread already ahead stays so.
                set_nice(state.tid, HURRIED_NICE);
                state.due = Some(due + state.period);
            }
            state = match state.due {
                Some(due) => {
                    self.changed
                        .wait_timeout(state, due.saturating_duration_since(now))
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.changed.wait(state).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::{nice_of, YIELDING_NICE};

    /// Polls `tid`'s nice until it is [`HURRIED_NICE`]; when it was, if within 2 s.
    fn raised(tid: libc::pid_t) -> Option<Instant> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            if nice_of(tid) == HURRIED_NICE {
                return Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }

    /// A yielding thread is raised when its deadline comes, not before, and again a period
    /// later when it has yielded again.
    #[test]
    #[ignore = "live: the real scheduler's priorities (root)"]
    fn a_yielding_thread_is_raised_when_its_deadline_comes() {
        if unsafe { libc::geteuid() } != 0 {
            powerlens_sys::skip_test!("raising a priority needs CAP_SYS_NICE (root)");
            return;
        }
        let (to_test, told) = std::sync::mpsc::channel();
        let (to_yielder, orders) = std::sync::mpsc::channel::<()>();
        let yielder = std::thread::spawn(move || {
            let alarm = Alarm::for_current_thread(Duration::from_millis(200)).unwrap();
            set_nice(0, YIELDING_NICE);
            let due = Instant::now() + Duration::from_millis(100);
            alarm.set(due);
            // SAFETY: gettid has no preconditions.
            to_test.send((unsafe { libc::gettid() }, due)).unwrap();
            // Yields again after the raise, with the next deadline a period later.
            orders.recv().unwrap();
            set_nice(0, YIELDING_NICE);
            to_test.send((0, due)).unwrap();
            // Keeps the alarm until the test is done with it.
            orders.recv().unwrap();
        });
        let (tid, due) = told.recv().unwrap();
        let nice = nice_of(tid);
        if Instant::now() < due {
            assert_eq!(nice, YIELDING_NICE, "raised before its deadline");
        }
        let at = raised(tid).expect("not raised within 2 s of its deadline");
        assert!(at >= due, "raised {:?} before its deadline", due - at);
        to_yielder.send(()).unwrap();
        told.recv().unwrap();
        let again = raised(tid).expect("not raised at its next deadline");
        assert!(
            again >= due + Duration::from_millis(200),
            "raised again {:?} after the first deadline, before the next",
            again - due
        );
        to_yielder.send(()).unwrap();
        yielder.join().unwrap();
    }
}
