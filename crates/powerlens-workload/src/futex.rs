//! Blocking waits on a futex word: the kernel primitive under every Linux mutex, condvar
//! and OpenMP passive barrier, used directly so that each wait and each wake-up in a
//! workload is one the workload asked for (no lock around it adding contention), and so
//! that a thread can tell whether a wait really slept.

use std::sync::atomic::{AtomicU32, Ordering};

/// Waits until `done(value of word)` holds, sleeping in FUTEX_WAIT while it does not.
/// Returns whether the thread slept at least once (a sleep is a voluntary context switch
/// ended by another thread's wake-up — except, rarely, a wake-up that lands between the
/// kernel queueing the waiter and calling schedule(): the wait returns 0 without a switch).
pub fn wait_until(word: &AtomicU32, done: impl Fn(u32) -> bool) -> bool {
    let mut slept = false;
    loop {
        let value = word.load(Ordering::Acquire);
        if done(value) {
            return slept;
        }
        slept |= sleep_while_equal(word, value);
    }
}

/// Sleeps until woken, unless `word` no longer holds `expected`. Returns whether the
/// thread slept.
fn sleep_while_equal(word: &AtomicU32, expected: u32) -> bool {
    // SAFETY: FUTEX_WAIT reads the aligned u32 behind the atomic; no timeout pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        )
    };
    // -1 is EAGAIN (the value had already changed: no sleep) or EINTR (a signal); the
    // caller re-checks the word either way.
    rc == 0
}

/// Whether a thread's voluntary switches (the kernel's count) fit the waits it counted as
/// sleeps: at most a few more (blocking outside the waits, e.g. at thread start), and at
/// most one plus 2% fewer (waits woken before they could switch, see [`wait_until`]).
#[cfg(test)]
pub fn switches_match_waits(voluntary: u64, waits: u64) -> bool {
    voluntary <= waits + 3 && voluntary + 1 + waits / 50 >= waits
}

/// Wakes up to `count` threads sleeping on `word`.
pub fn wake(word: &AtomicU32, count: u32) {
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    // SAFETY: FUTEX_WAKE only uses the address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_wait_that_is_already_done_does_not_sleep() {
        let word = AtomicU32::new(3);
        assert!(!wait_until(&word, |v| v == 3));
    }

    #[test]
    fn a_waiter_sleeps_until_the_word_changes_and_is_woken() {
        let word = AtomicU32::new(0);
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| wait_until(&word, |v| v == 1));
            std::thread::sleep(Duration::from_millis(20));
            word.store(1, Ordering::Release);
            wake(&word, 1);
            assert!(waiter.join().unwrap(), "the waiter should have slept");
        });
    }
}
