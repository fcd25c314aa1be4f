//! What ends a run besides a panic: an allocation no input can justify, an abort (an
//! allocation that failed, a stack overflow), a hang. Each saves the input that caused it
//! before the process ends, so that the crash can be replayed.
//!
//! The input being run is published in [`CURRENT`] (a pointer and a length the fuzz loop
//! sets before each run) and the file to save it to in [`CRASH_PATH`], so that a signal
//! handler can write it with plain system calls.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::CString;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The largest single allocation a target may make: a parser reserving more than this
/// for inputs of at most a few MiB trusts a count it read. The allocator refuses it,
/// which aborts the process (Rust's `handle_alloc_error`) unless the code asked with
/// `try_reserve` and handles the refusal.
pub const ALLOCATION_LIMIT: usize = 1 << 30;

/// The system allocator with [`ALLOCATION_LIMIT`]; the fuzzer and the corpus test use it.
pub struct LimitedAlloc;

// SAFETY: forwards to the system allocator, or returns null (a refusal) for sizes above
// the limit, which GlobalAlloc allows.
unsafe impl GlobalAlloc for LimitedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_LIMIT {
            return std::ptr::null_mut();
        }
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_LIMIT {
            return std::ptr::null_mut();
        }
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOCATION_LIMIT {
            return std::ptr::null_mut();
        }
        System.realloc(ptr, layout, new_size)
    }
}

/// The input being run (pointer, length), or null between runs.
static CURRENT: (AtomicPtr<u8>, AtomicUsize) =
    (AtomicPtr::new(std::ptr::null_mut()), AtomicUsize::new(0));
/// Where a fatal signal saves the input being run.
static CRASH_PATH: OnceLock<CString> = OnceLock::new();

/// Publishes the input about to run (it must stay alive and unchanged until
/// [`clear_current`]).
pub fn set_current(input: &[u8]) {
    CURRENT.1.store(input.len(), Ordering::Release);
    CURRENT
        .0
        .store(input.as_ptr() as *mut u8, Ordering::Release);
}

/// No input is running.
pub fn clear_current() {
    CURRENT.0.store(std::ptr::null_mut(), Ordering::Release);
}

/// Installs the SIGABRT handler that saves the running input to `path` (once per process).
pub fn save_on_abort(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return;
    };
    if CRASH_PATH.set(c).is_err() {
        return;
    }
    // SAFETY: installs a handler that only makes async-signal-safe calls.
    unsafe {
        libc::signal(
            libc::SIGABRT,
            on_abort as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

extern "C" fn on_abort(_: libc::c_int) {
    let ptr = CURRENT.0.load(Ordering::Acquire);
    let len = CURRENT.1.load(Ordering::Acquire);
    if let (false, Some(path)) = (ptr.is_null(), CRASH_PATH.get()) {
        // SAFETY: open/write/close are async-signal-safe; `ptr..len` is the input the fuzz
        // loop published and keeps alive while it runs.
        unsafe {
            let fd = libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o644,
            );
            if fd >= 0 {
                libc::write(fd, ptr as *const libc::c_void, len);
                libc::close(fd);
            }
            let msg = b"\npowerlens-fuzz: the process aborted (an allocation refused or failed, a stack overflow, a panic while panicking); the input was saved to ";
            libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len());
            let p = path.as_bytes();
            libc::write(2, p.as_ptr() as *const libc::c_void, p.len());
            libc::write(2, b"\n".as_ptr() as *const libc::c_void, 1);
        }
    }
    // SAFETY: back to the default action, then let the abort proceed.
    unsafe {
        libc::signal(libc::SIGABRT, libc::SIG_DFL);
        libc::raise(libc::SIGABRT);
    }
}
