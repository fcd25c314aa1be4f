//! What a [`super::Collector`] collects, and how: its options and their defaults.

/// How to collect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectorOptions {
    /// Data pages of each CPU's ring buffer, rounded up to a power of two (at least 1).
    /// Records arriving faster than `drain` empties the ring are lost (and counted).
    /// A record with a user stack is about `user_stack_bytes` + 1 KiB: size the ring for it.
    pub buffer_pages: usize,
    /// Record every event's call stack (`PERF_SAMPLE_CALLCHAIN`): kernel frames always,
    /// user frames where the program keeps frame pointers. Makes records several times
    /// larger. Events in `stack_events` have call chains either way.
    pub callchains: bool,
    /// Events (`system/name`, as passed to [`Collector::open`](super::Collector::open)) whose records also carry
    /// what it takes to unwind user stacks without frame pointers: the user registers
    /// ([`TraceRecord::user_regs`](super::TraceRecord::user_regs)) and a copy of the top of the user stack
    /// ([`TraceRecord::user_stack`](super::TraceRecord::user_stack)), and the call chain that
    /// [`CollectorOptions::stack_events_user_chain`] and
    /// [`CollectorOptions::stack_events_kernel_frames`] ask for. Names not among the opened
    /// events are ignored.
    pub stack_events: Vec<String>,
    /// Bytes of user stack copied per record of a stack event, rounded up to a multiple of
    /// 8 and at most 32 KiB. The kernel copies this much at every hit, in the context of
    /// the thread that hit the tracepoint, and the record carries it through the ring:
    /// on a switch-bound load it is most of what stacks cost. A few hundred bytes reach
    /// past libc's blocking calls into the caller, where the frame-pointer chain takes
    /// over (`unwind`).
    pub user_stack_bytes: u32,
    /// Whether the call chains of `stack_events` include the kernel's frames. Unwinding
    /// the kernel stack at each hit cost about 1.2 µs of the 2.1–2.4 µs a stack event cost
    /// the thread on this project's VMs (user frames, registers and the stack copy the
    /// rest); without it the chain holds the user frames only. CPU-clock samples always
    /// have kernel frames (they say where kernel time went).
    pub stack_events_kernel_frames: bool,
    /// Whether the call chains of `stack_events` include the user frames the kernel finds
    /// by walking the frame-pointer chain, which reaches the stack's root where the copy of
    /// `user_stack_bytes` ends before it. On this project's VMs that walk was a fixed
    /// ~1.4 µs per event, whatever the depth: 2–3× what the tracepoint and the stack copy
    /// cost together (docs/PERFORMANCE.md). Without it, user stacks are unwound from the
    /// copy alone and end where it ends.
    pub stack_events_user_chain: bool,
    /// Sample the stacks of `stack_events` instead of copying one at every hit: their own
    /// records then carry no stack, and a twin event on each of their tracepoints
    /// ([`Collected::StackSample`](super::Collected::StackSample)) records the stack of one hit in N, N paced by
    /// [`Collector::pace_stack_samples`](super::Collector::pace_stack_samples) to keep each twin near this many stacks a second
    /// per CPU (every hit while the event is rarer). `None`: every record carries its
    /// stack. On a switch-bound load a stack on every switch cost the switching threads
    /// more than the tracepoints themselves (docs/PERFORMANCE.md).
    pub stack_samples_per_s: Option<u32>,
    /// Sample what each CPU runs with the `cpu-clock` software event at this frequency
    /// (Hz), with call chain, user registers and user stack ([`CpuSampleRecord`](super::CpuSampleRecord)); `None`
    /// for no CPU samples.
    pub cpu_clock_hz: Option<u32>,
    /// Bytes of user stack copied per CPU-clock sample (as `user_stack_bytes`). Samples
    /// come at a fixed rate, not with every switch, so they can afford a deeper copy: it
    /// unwinds more callers of code without frame pointers.
    pub cpu_clock_stack_bytes: u32,
    /// Deliver `PERF_RECORD_MMAP2` records of new executable mappings ([`MmapRecord`](super::MmapRecord)) and
    /// `PERF_RECORD_COMM` records ([`CommRecord`](super::CommRecord), flagged on exec), from one side-band
    /// event per CPU.
    pub mmap_records: bool,
    /// Serve sched_switch, sched_waking and sched_stat_runtime in the kernel (BPF,
    /// [`crate::trace::in_kernel`]) where it allows, and not a tracepoint whose stacks are
    /// asked for (`stack_events`): the same records, at a fraction of what a perf record
    /// costs the traced thread. Where it cannot, the perf rings take them and
    /// [`Collector::in_kernel_refused`](super::Collector::in_kernel_refused) says why.
    pub in_kernel: bool,
}

impl Default for CollectorOptions {
    /// 256 pages (1 MiB with 4 KiB pages) per CPU, about 9,000 sched_switch records
    /// without call chains; no stacks, no CPU samples, no mappings; 512-byte user stacks
    /// when stack events are set, 4 KiB on CPU-clock samples.
    fn default() -> Self {
        CollectorOptions {
            buffer_pages: 256,
            callchains: false,
            stack_events: Vec::new(),
            user_stack_bytes: DEFAULT_USER_STACK_BYTES,
            stack_events_kernel_frames: true,
            stack_events_user_chain: true,
            stack_samples_per_s: None,
            cpu_clock_hz: None,
            cpu_clock_stack_bytes: DEFAULT_SAMPLE_STACK_BYTES,
            mmap_records: false,
            in_kernel: false,
        }
    }
}

/// [`CollectorOptions::user_stack_bytes`] by default: enough to unwind out of glibc's
/// blocking calls (nanosleep, futex waits, poll) into the program's frame, which is what
/// the function grid names; the frame-pointer chain continues from there where the
/// program keeps frame pointers. A quarter of the 2 KiB copied before, which made stacks
/// cost more than the tracepoints themselves on a switch-bound load (docs/PERFORMANCE.md).
pub const DEFAULT_USER_STACK_BYTES: u32 = 512;
/// [`CollectorOptions::cpu_clock_stack_bytes`] by default.
pub const DEFAULT_SAMPLE_STACK_BYTES: u32 = 4096;
