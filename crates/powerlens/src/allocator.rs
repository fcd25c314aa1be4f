//! The process's allocator: mimalloc, not glibc's malloc.
//!
//! A live session's threads run at different priorities (nice 19 while they keep up, −10
//! for an interval's end), and glibc frees a block another thread allocated under that
//! thread's arena lock. The session's thread, freeing a batch the decoder had allocated,
//! waited on that lock while the decoder, preempted inside `realloc` at nice 19 beside
//! CPU-bound work at −10, waited seconds for a CPU: an agent's interval closed 2.6 s late
//! in CI, and 31 s late on a 2-CPU VM. mimalloc's free of another thread's block is an
//! atomic push onto the owning page's list, with no lock to wait on.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Gives the memory freed since the last call back to the system, once mimalloc's purge
/// delay (10 ms) has passed. A command that runs without end calls it once per interval:
/// mimalloc purges freed memory on later activity of the allocator, and an agent between
/// scrapes has little, so the ~25 MiB its start-up used and freed stayed resident (41 MiB
/// of anonymous memory against glibc's 17).
pub fn give_back_freed_memory() {
    // SAFETY: mi_collect takes no pointers; `false` asks for the cheap collection.
    unsafe { libmimalloc_sys::mi_collect(false) };
}
