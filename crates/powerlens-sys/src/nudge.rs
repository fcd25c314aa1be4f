//! A nudge: an eventfd one thread (or a signal handler) makes readable to end another's
//! `poll`, so that a thread with nothing to do can wait without a timeout instead of
//! waking every few milliseconds to check a flag. A power tool that polls is what it
//! measures: a watcher waking 50 times a second is a wake-up source of its own.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::error::SysError;

#[derive(Debug)]
pub struct Nudge {
    fd: OwnedFd,
}

impl Nudge {
    pub fn new() -> Result<Nudge, SysError> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new fd we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(SysError::Unavailable {
                what: "an eventfd (to wake a waiting thread)".into(),
                reason: std::io::Error::last_os_error().to_string(),
                fix: None,
            });
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        Ok(Nudge {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Makes the nudge readable: a `poll` on it ends, now or at its next call.
    pub fn ring(&self) {
        ring_raw(self.fd.as_raw_fd());
    }

    /// Makes it unreadable again; returns whether it had been rung (the fd is
    /// non-blocking: an unrung nudge reads EAGAIN).
    pub fn clear(&self) -> bool {
        crate::perf::read_u64(self.fd.as_raw_fd(), "eventfd").is_ok_and(|count| count > 0)
    }

    /// Waits until the nudge is rung or `timeout` passes (`None`: no timeout); returns
    /// whether it was rung. It stays rung: [`Nudge::clear`] takes that back.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        readable(self.fd.as_fd(), timeout)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Nudge {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// [`Nudge::ring`] on a raw fd, for a signal handler: one `write`, async-signal-safe.
pub fn ring_raw(fd: RawFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from a live u64; a full counter (never, at one per ring)
    // or a closed fd only makes the write fail, which changes nothing.
    unsafe {
        libc::write(fd, (&one as *const u64).cast(), std::mem::size_of::<u64>());
    }
}

/// Waits until `fd` reads ready or `timeout` passes (`None`: no timeout; zero: only
/// looks); whether it reads ready.
pub fn readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> bool {
    let mut fds = [libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    poll_ms(&mut fds, timeout);
    fds[0].revents & libc::POLLIN != 0
}

/// `poll(2)` with a timeout in whole milliseconds, rounded up (a wait of 0.4 ms truncated
/// to 0 would spin until it ends), `None` for no timeout; returns poll's result, `-1`
/// with `errno` set on failure (EINTR included: a signal ended the wait).
pub fn poll_ms(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> libc::c_int {
    let ms = timeout.map_or(-1, |t| {
        t.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int
    });
    // SAFETY: `fds` is a live slice of pollfd structs that poll fills in.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_wait_ends_when_another_thread_rings() {
        let nudge = std::sync::Arc::new(Nudge::new().unwrap());
        assert!(!nudge.wait(Some(Duration::from_millis(1))), "not rung yet");
        let ringer = nudge.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            ringer.ring();
        });
        let start = Instant::now();
        assert!(nudge.wait(None), "a wait with no timeout ends on the ring");
        assert!(start.elapsed() >= Duration::from_millis(25));
        t.join().unwrap();
        assert!(nudge.wait(Some(Duration::ZERO)), "it stays rung");
        assert!(nudge.clear());
        assert!(!nudge.wait(Some(Duration::ZERO)), "cleared");
        assert!(!nudge.clear(), "nothing to clear twice");
    }
}
