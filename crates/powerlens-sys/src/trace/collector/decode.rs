//! The records of the rings, decoded: what a tracepoint hit, a CPU-time sample, a
//! mapping or an exec wrote, found by its event's id ([`EventIds`]), on the collector or
//! away from it ([`RecordDecoder`]).

use super::{served, Source, SourceKind};
use crate::procfs::maps::Mapping;
use crate::trace::format::{Decoded, EventFormat};
use crate::trace::records::{parse_record_with, Callchain, Record, UserRegs};

/// The pid/tid perf writes for a task that has exited (its final sched_switch): (u32)-1.
pub const EXITED: u32 = u32::MAX;

/// One tracepoint hit.
#[derive(Debug, Clone, Copy)]
pub struct TraceRecord<'a> {
    /// The CPU it happened on.
    pub cpu: u32,
    /// CLOCK_MONOTONIC nanoseconds, comparable with `clock_gettime(CLOCK_MONOTONIC)`.
    pub time_ns: u64,
    /// Process (thread group) and thread of the task that was current, as perf saw them:
    /// the idle task is 0/0; for sched_switch this is the task switching out; [`EXITED`]
    /// for a task that has already exited (its final switch-out).
    pub pid: u32,
    pub tid: u32,
    /// Index of the event in [`Collector::events`](super::Collector::events).
    pub event: usize,
    pub format: &'a EventFormat,
    /// The tracepoint payload (with trailing padding), described by `format`.
    pub raw: &'a [u8],
    /// The call stack at the tracepoint; empty unless [`CollectorOptions::callchains`](super::CollectorOptions::callchains) or
    /// the event is one of [`CollectorOptions::stack_events`](super::CollectorOptions::stack_events).
    pub callchain: Callchain<'a>,
    /// The current task's user registers (where it entered the kernel); `None` unless the
    /// event is a stack event, and for kernel threads.
    pub user_regs: Option<UserRegs>,
    /// The valid bytes of the user stack from `user_regs.sp` up; empty unless the event is
    /// a stack event.
    pub user_stack: &'a [u8],
}

impl<'a> TraceRecord<'a> {
    /// The payload's fields by name.
    pub fn decoded(&self) -> Decoded<'a> {
        self.format.decode(self.raw)
    }
}

/// One CPU-clock sample: `tid` was running on `cpu` (in user or kernel mode) when the
/// sampling timer fired.
#[derive(Debug, Clone, Copy)]
pub struct CpuSampleRecord<'a> {
    pub cpu: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    /// CPU time, in nanoseconds, this sample stands for (the time since the previous
    /// sample of this CPU's event, as the kernel's frequency mode adjusts it).
    pub period_ns: u64,
    /// Kernel part (when interrupted in the kernel) and frame-pointer user part.
    pub callchain: Callchain<'a>,
    pub user_regs: Option<UserRegs>,
    pub user_stack: &'a [u8],
}

/// A new executable mapping of a process (`PERF_RECORD_MMAP2`), so that addresses in it
/// can be unwound and symbolized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MmapRecord {
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub time_ns: u64,
    pub mapping: Mapping,
}

/// A task's new name (`PERF_RECORD_COMM`); with `exec` set the process called exec: its
/// old mappings are gone and the following [`MmapRecord`]s describe the new image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommRecord<'a> {
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub time_ns: u64,
    pub comm: &'a [u8],
    pub exec: bool,
}

/// Everything [`Collector::drain_all`](super::Collector::drain_all) hands out, each kind as it came from the ring.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Collected<'a> {
    Trace(TraceRecord<'a>),
    /// The stack of one hit of a stack event whose stacks are sampled
    /// ([`CollectorOptions::stack_samples_per_s`](super::CollectorOptions::stack_samples_per_s)): the same payload as that hit's own
    /// [`Collected::Trace`] record, which comes next on the CPU, with the stack. Pair them
    /// by CPU, event and payload.
    StackSample(TraceRecord<'a>),
    CpuSample(CpuSampleRecord<'a>),
    Mmap(MmapRecord),
    Comm(CommRecord<'a>),
}

/// One CPU's ring contents, copied out by [`Collector::copy_out`](super::Collector::copy_out).
#[derive(Debug, Clone, Default)]
pub struct RawChunk {
    pub cpu: u32,
    pub bytes: Vec<u8>,
}

/// Decodes the records of [`RawChunk`]s as [`Collector::drain_all`](super::Collector::drain_all) does, away from the
/// collector (it holds what the records' ids mean, not the rings).
#[derive(Debug, Clone)]
pub struct RecordDecoder {
    pub(super) ids: EventIds,
    pub(super) sources: Vec<Source>,
    pub(super) events: Vec<EventFormat>,
    pub(super) served: served::Served,
}

impl RecordDecoder {
    /// Passes each record of `chunk` to `f`; records the kernel lost, or that cannot be
    /// read, are added to `lost`. Returns how many were passed.
    pub fn decode(
        &self,
        chunk: &RawChunk,
        lost: &mut u64,
        mut f: impl FnMut(Collected<'_>),
    ) -> usize {
        if chunk.cpu == served::IN_KERNEL_CHUNK {
            return self.served.decode(&chunk.bytes, &self.events, lost, f);
        }
        let mut passed = 0;
        crate::trace::ring::records_in(&chunk.bytes, |bytes| {
            if let Some(c) = decode_record(bytes, &self.ids, &self.sources, &self.events, lost) {
                f(c);
                passed += 1;
            }
        });
        passed
    }
}

pub(super) fn trace_record<'a>(
    sample: &crate::trace::records::Sample<'a>,
    event: usize,
    events: &'a [EventFormat],
) -> TraceRecord<'a> {
    TraceRecord {
        cpu: sample.cpu,
        time_ns: sample.time,
        pid: sample.pid,
        tid: sample.tid,
        event,
        format: &events[event],
        raw: sample.raw,
        callchain: sample.callchain,
        user_regs: sample.user_regs,
        user_stack: sample.user_stack,
    }
}

/// One record as the recorder sees it; `None` (and `lost` counted) for a loss record, a
/// record of no event of ours or one that cannot be read, and for side-band records that
/// carry nothing the recorder uses.
pub(super) fn decode_record<'a>(
    bytes: &'a [u8],
    ids: &EventIds,
    sources: &[Source],
    events: &'a [EventFormat],
    lost: &mut u64,
) -> Option<Collected<'a>> {
    let source_of = |id| ids.get(id).map(|index| sources[index]);
    let record = parse_record_with(bytes, |id| source_of(id).map(|s| s.sample_type));
    let collected = match record {
        Record::Sample(sample) => match source_of(sample.id).map(|s| s.kind) {
            Some(SourceKind::Trace(event)) => {
                Collected::Trace(trace_record(&sample, event, events))
            }
            Some(SourceKind::StackSample(event)) => {
                Collected::StackSample(trace_record(&sample, event, events))
            }
            Some(SourceKind::CpuClock) => Collected::CpuSample(CpuSampleRecord {
                cpu: sample.cpu,
                time_ns: sample.time,
                pid: sample.pid,
                tid: sample.tid,
                period_ns: sample.period,
                callchain: sample.callchain,
                user_regs: sample.user_regs,
                user_stack: sample.user_stack,
            }),
            Some(SourceKind::SideBand) | None => {
                *lost += 1;
                return None;
            }
        },
        Record::Mmap2(m) => Collected::Mmap(MmapRecord {
            pid: m.pid,
            tid: m.tid,
            cpu: m.cpu,
            time_ns: m.time,
            mapping: Mapping {
                start: m.addr,
                end: m.addr.saturating_add(m.len),
                file_offset: m.pgoff,
                path: String::from_utf8_lossy(m.filename).into_owned(),
            },
        }),
        Record::Comm(c) => Collected::Comm(CommRecord {
            pid: c.pid,
            tid: c.tid,
            cpu: c.cpu,
            time_ns: c.time,
            comm: c.comm,
            exec: c.exec,
        }),
        Record::Lost { lost: n } => {
            *lost += n;
            return None;
        }
        Record::Malformed | Record::UnknownId { .. } => {
            *lost += 1;
            return None;
        }
        Record::Other { .. } => return None,
    };
    Some(collected)
}

/// Perf event id → index of its source, looked up for every record. The kernel hands out
/// ids consecutively, so the table is a vector indexed by `id − first id` (a linear search
/// over the events of every CPU cost more than parsing the record).
#[derive(Debug, Default, Clone)]
pub(super) struct EventIds {
    first: u64,
    /// `usize::MAX` for an id of no event of ours.
    index: Vec<usize>,
}

impl EventIds {
    pub(super) fn insert(&mut self, id: u64, event: usize) {
        if self.index.is_empty() {
            self.first = id;
        }
        if id < self.first {
            let shift = (self.first - id) as usize;
            self.index
                .splice(0..0, std::iter::repeat_n(usize::MAX, shift));
            self.first = id;
        }
        let slot = (id - self.first) as usize;
        if slot >= self.index.len() {
            self.index.resize(slot + 1, usize::MAX);
        }
        self.index[slot] = event;
    }

    pub(super) fn get(&self, id: u64) -> Option<usize> {
        let slot = usize::try_from(id.checked_sub(self.first)?).ok()?;
        self.index.get(slot).copied().filter(|&e| e != usize::MAX)
    }
}
