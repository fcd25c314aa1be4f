//! The perf event attributes the collector opens: the ring's shared settings, tracepoints
//! with or without stacks, their sampled twins, the CPU clock and the side-band event.

use super::CollectorOptions;
use crate::perf::{
    PerfEventAttr, FLAG_COMM, FLAG_COMM_EXEC, FLAG_DISABLED, FLAG_EXCLUDE_CALLCHAIN_KERNEL,
    FLAG_EXCLUDE_CALLCHAIN_USER, FLAG_EXCLUDE_IDLE, FLAG_FREQ, FLAG_MMAP, FLAG_MMAP2,
    FLAG_SAMPLE_ID_ALL, FLAG_USE_CLOCKID, FLAG_WATERMARK, PERF_COUNT_SW_CPU_CLOCK,
    PERF_COUNT_SW_DUMMY, PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_RAW, PERF_SAMPLE_REGS_USER,
    PERF_TYPE_SOFTWARE, PERF_TYPE_TRACEPOINT,
};
use crate::trace::format::EventFormat;
use crate::trace::records::{SAMPLE_TYPE, STACK_SAMPLE_TYPE, USER_REGS_MASK};

/// Records are at most 64 KiB (a u16 size) with the call chain and the rest.
pub(super) const MAX_USER_STACK_BYTES: u32 = 32 * 1024;

pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// What every event of a ring shares: disabled at open so that all CPUs start together
/// on `enable`, CLOCK_MONOTONIC timestamps (to line up with the sysfs sampler), a wake-up
/// of `Collector::wait` when the ring is half full, and the `sample_id` trailer on
/// non-sample records (the LOST, MMAP2 and COMM records' time and CPU).
pub(super) fn ring_attr(type_: u32, config: u64, pages: usize, sample_type: u64) -> PerfEventAttr {
    let page = page_size();
    let mut attr = PerfEventAttr::counting(type_, config);
    attr.sample_type = sample_type;
    attr.flags = FLAG_DISABLED | FLAG_USE_CLOCKID | FLAG_WATERMARK | FLAG_SAMPLE_ID_ALL;
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.wakeup_events = (page * pages / 2).min(u32::MAX as usize) as u32;
    attr
}

/// A requested user-stack size as the kernel takes it: a multiple of 8, at most
/// [`MAX_USER_STACK_BYTES`].
pub(super) fn user_stack_size(bytes: u32) -> u32 {
    bytes.next_multiple_of(8).min(MAX_USER_STACK_BYTES)
}

/// Asks for the user registers and `stack_bytes` of user stack when `sample_type` has
/// them.
/// A stack event's sample type and call-chain flags: the call chain goes when neither its
/// user nor its kernel frames are asked for (and every event's chain is not), and the
/// kernel is told to leave out the half that is not asked for.
pub(super) fn stack_event_chain(sample_type: u64, options: &CollectorOptions) -> (u64, u64) {
    let (user, kernel) = (
        options.stack_events_user_chain || options.callchains,
        options.stack_events_kernel_frames || options.callchains,
    );
    match (user, kernel) {
        (true, true) => (sample_type, 0),
        (true, false) => (sample_type, FLAG_EXCLUDE_CALLCHAIN_KERNEL),
        (false, true) => (sample_type, FLAG_EXCLUDE_CALLCHAIN_USER),
        (false, false) => (sample_type & !PERF_SAMPLE_CALLCHAIN, 0),
    }
}

/// The twin of a stack event whose stacks are sampled: the same tracepoint, the stack of
/// one hit in `sample_period` (paced later; every hit at first). Without
/// `PERF_SAMPLE_PERIOD`, or the kernel would sample every hit whatever the period.
pub(super) fn stack_sample_attr(
    format: &EventFormat,
    pages: usize,
    stack_bytes: u32,
    options: &CollectorOptions,
) -> PerfEventAttr {
    let (sample_type, chain_flags) = stack_event_chain(
        (SAMPLE_TYPE | STACK_SAMPLE_TYPE) & !crate::perf::PERF_SAMPLE_PERIOD,
        options,
    );
    let mut attr = tracepoint_attr(format, pages, sample_type, stack_bytes);
    attr.flags |= chain_flags;
    attr
}

pub(super) fn with_user_stack(mut attr: PerfEventAttr, stack_bytes: u32) -> PerfEventAttr {
    if attr.sample_type & PERF_SAMPLE_REGS_USER != 0 {
        attr.sample_regs_user = USER_REGS_MASK;
        attr.sample_stack_user = stack_bytes;
    }
    attr
}

/// A sampling tracepoint event: every hit is a sample (period 1) of `sample_type`
/// ([`SAMPLE_TYPE`], with a call chain or user stack on request).
pub(super) fn tracepoint_attr(
    format: &EventFormat,
    pages: usize,
    sample_type: u64,
    stack_bytes: u32,
) -> PerfEventAttr {
    let mut attr = ring_attr(PERF_TYPE_TRACEPOINT, format.id, pages, sample_type);
    attr.sample_period = 1;
    with_user_stack(attr, stack_bytes)
}

/// The CPU-clock sampler: an hrtimer per CPU at `hz` (frequency mode, so the period in
/// each sample is the CPU time it stands for), with stacks, not while the CPU idles.
pub(super) fn cpu_clock_attr(hz: u32, pages: usize, stack_bytes: u32) -> PerfEventAttr {
    let sample_type = SAMPLE_TYPE & !PERF_SAMPLE_RAW | STACK_SAMPLE_TYPE;
    let mut attr = ring_attr(
        PERF_TYPE_SOFTWARE,
        PERF_COUNT_SW_CPU_CLOCK,
        pages,
        sample_type,
    );
    attr.sample_period = u64::from(hz.max(1));
    attr.flags |= FLAG_FREQ | FLAG_EXCLUDE_IDLE;
    with_user_stack(attr, stack_bytes)
}

/// The side-band event: a dummy software event (it never samples) that writes MMAP2
/// records of executable mappings and COMM records (exec flagged). One per CPU, because
/// the kernel writes each record to the events of the CPU where it happened.
pub(super) fn side_band_attr() -> PerfEventAttr {
    let mut attr = ring_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY, 1, SAMPLE_TYPE);
    attr.flags |= FLAG_MMAP | FLAG_MMAP2 | FLAG_COMM | FLAG_COMM_EXEC;
    attr.sample_period = 1;
    attr
}
