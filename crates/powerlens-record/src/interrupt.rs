//! Ctrl-C and SIGTERM: record that the user asked to stop, so that a series of runs can end
//! cleanly, print what it has and save it, instead of dying with nothing.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use powerlens_sys::nudge::{self, Nudge};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Rung by the handler, so that a thread waiting on it ([`wait`]) wakes at the signal
/// instead of polling the flag.
static NUDGE: OnceLock<Option<Nudge>> = OnceLock::new();
/// The nudge's fd for the handler (−1: none), read with one atomic load.
static NUDGE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    // An atomic store and a write(2): async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
    let fd = NUDGE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        nudge::ring_raw(fd);
    }
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP (a closed terminal), so that every
/// setting a configuration changed is restored and finished runs are kept. The measured
/// command, in the same process group, still receives Ctrl-C itself and stops.
pub fn install() {
    if let Some(n) = NUDGE.get_or_init(|| Nudge::new().ok()) {
        NUDGE_FD.store(n.raw_fd(), Ordering::SeqCst);
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask is well-formed;
        // the handler only stores an atomic and writes an eventfd.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Sleeps for `duration` unless interrupted first; returns false when interrupted.
pub fn sleep(duration: Duration) -> bool {
    !wait(Some(duration))
}

/// Waits until a signal [`install`] handles arrives or `timeout` passes (`None`: no
/// limit); returns whether the process was interrupted. After [`install`] the signal ends
/// the wait at once and nothing wakes before; without it (no eventfd) the flag is
/// checked every 20 ms.
pub fn wait(timeout: Option<Duration>) -> bool {
    wait_or(&[], timeout) == Woke::Interrupted
}

/// What ended a [`wait_or`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    Interrupted,
    /// One of the descriptors reads ready (a pidfd: its process exited).
    Ready,
    TimedOut,
}

/// Waits as [`wait`] does, and also until one of `fds` reads ready, checked first when
/// both come at once.
pub fn wait_or(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> Woke {
    let end = timeout.map(|t| Instant::now() + t);
    let nudge = NUDGE.get().and_then(Option::as_ref);
    loop {
        if interrupted() {
            return Woke::Interrupted;
        }
        let mut left = end.map(|e| e.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Woke::TimedOut;
        }
        if nudge.is_none() {
            let step = Duration::from_millis(20);
            left = Some(left.map_or(step, |l| l.min(step)));
        }
        let mut polled: Vec<libc::pollfd> = fds
            .iter()
            .map(|f| f.as_raw_fd())
            .chain(nudge.map(Nudge::raw_fd))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // Another signal (a child's exit) can end the poll early (EINTR): the loop waits
        // on. A rung nudge stays readable; the flag it stands for ends the loop above.
        nudge::poll_ms(&mut polled, left);
        if polled[..fds.len()].iter().any(|p| p.revents != 0) {
            return Woke::Ready;
        }
    }
}

/// The exit code of a command that measured a series: success when it finished, 130 (as
/// shells report SIGINT) when the user interrupted it, 1 when a run failed.
pub fn exit_code(stopped_early: Option<&str>) -> ExitCode {
    match stopped_early {
        None => ExitCode::SUCCESS,
        Some(_) if interrupted() => ExitCode::from(130),
        Some(_) => ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_wait_ends_when_its_process_exits_or_its_time_is_up() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        let pidfd = crate::exec::pidfd_open(child.id()).expect("pidfds (Linux 5.3+)");
        let start = Instant::now();
        let woke = wait_or(&[pidfd.as_fd()], Some(Duration::from_millis(100)));
        assert_eq!(woke, Woke::TimedOut);
        assert!(start.elapsed() >= Duration::from_millis(100));
        // Not reaped yet (a zombie): its pidfd reads ready all the same.
        let woke = wait_or(&[pidfd.as_fd()], Some(Duration::from_secs(10)));
        let took = start.elapsed();
        assert_eq!(woke, Woke::Ready);
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_secs(5),
            "{took:?}"
        );
        child.wait().unwrap();
    }
}
