//! Ctrl-C and SIGTERM: record that the user asked to stop, so that a series of runs can end
//! cleanly, print what it has and save it, instead of dying with nothing.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP (a closed terminal), so that every
/// setting a configuration changed is restored and finished runs are kept. The measured
/// command, in the same process group, still receives Ctrl-C itself and stops.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask is well-formed;
        // the handler only touches an atomic.
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
    let end = Instant::now() + duration;
    loop {
        if interrupted() {
            return false;
        }
        let now = Instant::now();
        if now >= end {
            return true;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(20)));
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
