//! Compact binary encoding of scheduler [`Event`]s, in self-contained chunks.
//!
//! A recording stores its raw events as chunks of a few thousand events each. A chunk
//! carries everything needed to decode it: a header (codec version, event count, base
//! time), its thread ids and strings interned once, then the events as a tag byte and
//! LEB128 varints with the time as a delta from the previous event. A CRC-32 trailer
//! makes a damaged chunk an error instead of wrong numbers. The byte layout is documented
//! in docs/FORMAT.md ("Chunk encoding") so other tools can read it.
//!
//! Pure: no I/O. Decoding never panics and never allocates more than the input can
//! justify, whatever the bytes.

use std::collections::HashMap;

use crate::sched::event::{
    Event, EventKind, InterruptKind, Name, StackId, SwitchedOut, Tid, TidMap,
};

mod window;
use window::{EventBytes, Fallback, Window};

/// Version of the chunk encoding, the first varint of every chunk. Version 2 added the
/// codes from [`IRQ_ENTER_TIMER_ID`] on; version-1 chunks (a subset) still decode.
pub const CODEC_VERSION: u32 = 2;
/// The oldest version the decoder reads.
const OLDEST_VERSION: u64 = 1;

// Event codes: the low five bits of the tag byte.
const SWITCH_PREEMPTED: u8 = 0;
const SWITCH_BLOCKED: u8 = 1;
const SWITCH_EXITED: u8 = 2;
const WAKEUP: u8 = 3;
const WAKEUP_NEW: u8 = 4;
const MIGRATE: u8 = 5;
const FORK: u8 = 6;
const EXEC: u8 = 7;
const EXIT: u8 = 8;
const IDLE_ENTER: u8 = 9;
const IDLE_EXIT: u8 = 10;
const IRQ_ENTER_TIMER: u8 = 11;
const IRQ_ENTER_IRQ: u8 = 12;
const IRQ_ENTER_SOFTIRQ: u8 = 13;
const IRQ_ENTER_IPI: u8 = 14;
const IRQ_EXIT: u8 = 15;
const FREQUENCY: u8 = 16;
const RUNTIME: u8 = 17;
/// A timer callback with the timer's and the callback's addresses (version 2).
const IRQ_ENTER_TIMER_ID: u8 = 18;
const TIMER_ARM: u8 = 19;
const STACK: u8 = 20;
const CPU_SAMPLE: u8 = 21;
const LAST_CODE: u8 = CPU_SAMPLE;

const CODE_MASK: u8 = 0x1F;
/// The wake-up's target CPU is the event's CPU (no target varint follows).
const FLAG_SAME_TARGET: u8 = 0x20;
/// A CPU varint follows the time delta; otherwise the CPU is the previous event's.
const FLAG_CPU: u8 = 0x40;
/// A context varint follows (after the CPU varint): 0 when unknown, else the index + 1 of
/// the thread that was current when the event fired (the perf sample's tid). Without the
/// flag the context is the previous event's (unknown at a chunk's start).
const FLAG_CONTEXT: u8 = 0x80;

/// Why a chunk could not be decoded. The offsets are byte positions in the chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("chunk truncated: {needed} more bytes needed at byte {at}")]
    Truncated { at: usize, needed: usize },
    #[error("chunk checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the chunk is damaged")]
    Checksum { stored: u32, computed: u32 },
    #[error("chunk encoding version {found}, but this powerlens reads version {supported} (if the recording is newer: upgrade powerlens)")]
    Version { found: u32, supported: u32 },
    #[error("malformed varint at byte {at}")]
    Varint { at: usize },
    #[error("unknown event tag {tag:#04x} at byte {at}")]
    Tag { at: usize, tag: u8 },
    #[error("{what} index {index} out of range (the chunk has {len}) at byte {at}")]
    Index {
        what: &'static str,
        index: u64,
        len: usize,
        at: usize,
    },
    #[error("string at byte {at} is not UTF-8")]
    Utf8 { at: usize },
    #[error("{count} bytes left over after the last event (the header announced {events} events)")]
    Trailing { count: usize, events: u64 },
    #[error("{what} count {count} at byte {at} cannot fit in the {left} bytes left")]
    Count {
        what: &'static str,
        count: u64,
        left: usize,
        at: usize,
    },
}

impl From<Box<CodecError>> for CodecError {
    fn from(e: Box<CodecError>) -> CodecError {
        *e
    }
}

/// Builds one chunk from events pushed in time order.
#[derive(Debug, Default)]
pub struct ChunkEncoder {
    body: Vec<u8>,
    tids: Vec<u32>,
    tid_index: TidMap<u32>,
    strings: Vec<String>,
    string_index: HashMap<String, u32>,
    /// Bytes the interned tids and strings take in the header.
    table_bytes: usize,
    count: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    last_cpu: u32,
    last_context: Option<Tid>,
}

impl ChunkEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one event whose context is unknown (see [`ChunkEncoder::push_in_context`]).
    pub fn push(&mut self, e: &Event) {
        self.push_in_context(e, None);
    }

    /// Appends one event recorded while `context` was the current thread on its CPU (the
    /// tid of the perf sample's header; 0 for the idle task, `None` when unknown). Events
    /// of a chunk come in non-decreasing time order; an event out of order still
    /// round-trips (the delta wraps) but costs ten bytes. A context costs nothing while it
    /// stays the same from one event to the next.
    pub fn push_in_context(&mut self, e: &Event, context: Option<Tid>) {
        if self.first_ns.is_none() {
            self.first_ns = Some(e.time_ns);
            self.last_ns = e.time_ns;
        }
        debug_assert!(
            e.time_ns >= self.last_ns,
            "events of a chunk must come in time order ({} after {})",
            e.time_ns,
            self.last_ns
        );
        let (code, aux) = match &e.kind {
            EventKind::Switch { how, .. } => (
                match how {
                    SwitchedOut::Preempted => SWITCH_PREEMPTED,
                    SwitchedOut::Blocked => SWITCH_BLOCKED,
                    SwitchedOut::Exited => SWITCH_EXITED,
                },
                0,
            ),
            EventKind::Wakeup {
                target_cpu,
                new_thread,
                ..
            } => (
                if *new_thread { WAKEUP_NEW } else { WAKEUP },
                if *target_cpu == e.cpu {
                    FLAG_SAME_TARGET
                } else {
                    0
                },
            ),
            EventKind::Migrate { .. } => (MIGRATE, 0),
            EventKind::Fork { .. } => (FORK, 0),
            EventKind::Exec { .. } => (EXEC, 0),
            EventKind::Exit { .. } => (EXIT, 0),
            EventKind::IdleEnter { .. } => (IDLE_ENTER, 0),
            EventKind::IdleExit => (IDLE_EXIT, 0),
            EventKind::InterruptEnter(k) => (
                match k {
                    InterruptKind::Timer {
                        timer: 0,
                        function: 0,
                    } => IRQ_ENTER_TIMER,
                    InterruptKind::Timer { .. } => IRQ_ENTER_TIMER_ID,
                    InterruptKind::Irq(_) => IRQ_ENTER_IRQ,
                    InterruptKind::SoftIrq(_) => IRQ_ENTER_SOFTIRQ,
                    InterruptKind::Ipi => IRQ_ENTER_IPI,
                },
                0,
            ),
            EventKind::InterruptExit => (IRQ_EXIT, 0),
            EventKind::Frequency { .. } => (FREQUENCY, 0),
            EventKind::Runtime { .. } => (RUNTIME, 0),
            EventKind::TimerArm { .. } => (TIMER_ARM, 0),
            EventKind::Stack { .. } => (STACK, 0),
            EventKind::CpuSample { .. } => (CPU_SAMPLE, 0),
        };
        // The decoder starts every chunk at CPU 0 and an unknown context.
        let cpu_flag = if e.cpu == self.last_cpu { 0 } else { FLAG_CPU };
        let context_flag = if context == self.last_context {
            0
        } else {
            FLAG_CONTEXT
        };
        self.body.push(code | aux | cpu_flag | context_flag);
        put_varint(&mut self.body, e.time_ns.wrapping_sub(self.last_ns));
        if cpu_flag != 0 {
            put_varint(&mut self.body, e.cpu as u64);
        }
        if context_flag != 0 {
            let v = context.map_or(0, |tid| self.intern_tid(tid) as u64 + 1);
            put_varint(&mut self.body, v);
            self.last_context = context;
        }
        match &e.kind {
            EventKind::Switch { prev, next, .. } => {
                self.put_tid(*prev);
                self.put_tid(*next);
            }
            EventKind::Wakeup {
                tid, target_cpu, ..
            } => {
                self.put_tid(*tid);
                if aux == 0 {
                    put_varint(&mut self.body, *target_cpu as u64);
                }
            }
            EventKind::Migrate { tid, from, to } => {
                self.put_tid(*tid);
                put_varint(&mut self.body, *from as u64);
                put_varint(&mut self.body, *to as u64);
            }
            EventKind::Fork { parent, child } => {
                self.put_tid(*parent);
                self.put_tid(*child);
            }
            EventKind::Exec { tid, comm } => {
                self.put_tid(*tid);
                self.put_string(comm);
            }
            EventKind::Exit { tid } => self.put_tid(*tid),
            EventKind::IdleEnter { state } => put_varint(&mut self.body, *state as u64),
            EventKind::InterruptEnter(InterruptKind::Irq(name))
            | EventKind::InterruptEnter(InterruptKind::SoftIrq(name)) => self.put_string(name),
            EventKind::Frequency { khz } => put_varint(&mut self.body, *khz),
            EventKind::Runtime { tid, ns } => {
                self.put_tid(*tid);
                put_varint(&mut self.body, *ns);
            }
            EventKind::InterruptEnter(InterruptKind::Timer { timer, function })
                if code == IRQ_ENTER_TIMER_ID =>
            {
                self.put_kernel_addresses(*timer, *function)
            }
            EventKind::TimerArm { timer, function } => self.put_kernel_addresses(*timer, *function),
            EventKind::Stack { id } => put_varint(&mut self.body, *id as u64),
            EventKind::CpuSample { tid, period_ns } => {
                self.put_tid(*tid);
                put_varint(&mut self.body, *period_ns);
            }
            EventKind::IdleExit | EventKind::InterruptExit | EventKind::InterruptEnter(_) => {}
        }
        self.last_ns = e.time_ns;
        self.last_cpu = e.cpu;
        self.count += 1;
    }

    fn intern_tid(&mut self, tid: u32) -> u32 {
        let next = self.tids.len() as u32;
        *self.tid_index.entry(tid).or_insert_with(|| {
            self.tids.push(tid);
            self.table_bytes += varint_len(tid as u64);
            next
        })
    }

    /// Kernel addresses have their top bits set: stored complemented, a timer's address
    /// takes 7 bytes and a function's 5 instead of 10 each.
    fn put_kernel_addresses(&mut self, timer: u64, function: u64) {
        put_varint(&mut self.body, !timer);
        put_varint(&mut self.body, !function);
    }

    fn put_tid(&mut self, tid: u32) {
        let index = self.intern_tid(tid);
        put_varint(&mut self.body, index as u64);
    }

    fn put_string(&mut self, s: &str) {
        let index = match self.string_index.get(s) {
            Some(&i) => i,
            None => {
                let i = self.strings.len() as u32;
                self.strings.push(s.to_owned());
                self.string_index.insert(s.to_owned(), i);
                self.table_bytes += varint_len(s.len() as u64) + s.len();
                i
            }
        };
        put_varint(&mut self.body, index as u64);
    }

    /// Events pushed since the last [`finish`](Self::finish).
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Time of the first event pushed.
    pub fn first_ns(&self) -> Option<u64> {
        self.first_ns
    }

    /// Time of the last event pushed.
    pub fn last_ns(&self) -> Option<u64> {
        self.first_ns.map(|_| self.last_ns)
    }

    /// Size the chunk would have if finished now (exact), so a writer can cut chunks by size.
    pub fn encoded_bytes(&self) -> usize {
        self.header_bytes() + self.table_bytes + self.body.len() + 4
    }

    fn header_bytes(&self) -> usize {
        varint_len(CODEC_VERSION as u64)
            + varint_len(self.count)
            + varint_len(self.first_ns.unwrap_or(0))
            + varint_len(self.tids.len() as u64)
            + varint_len(self.strings.len() as u64)
    }

    /// The chunk's bytes. Resets the encoder for the next chunk.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_bytes());
        put_varint(&mut out, CODEC_VERSION as u64);
        put_varint(&mut out, self.count);
        put_varint(&mut out, self.first_ns.unwrap_or(0));
        put_varint(&mut out, self.tids.len() as u64);
        for &t in &self.tids {
            put_varint(&mut out, t as u64);
        }
        put_varint(&mut out, self.strings.len() as u64);
        for s in &self.strings {
            put_varint(&mut out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        out.extend_from_slice(&self.body);
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len(), self.encoded_bytes());
        self.body.clear();
        self.tids.clear();
        self.tid_index.clear();
        self.strings.clear();
        self.string_index.clear();
        self.table_bytes = 0;
        self.count = 0;
        self.first_ns = None;
        self.last_ns = 0;
        self.last_cpu = 0;
        self.last_context = None;
        out
    }
}

/// Decodes one chunk, appending its events to `out`. A damaged, truncated or foreign
/// chunk is an error (and `out` is left as it was); never a panic.
/// [`decode_chunk_in_context`] also gives each event's context.
pub fn decode_chunk(data: &[u8], out: &mut Vec<Event>) -> Result<(), CodecError> {
    let body_len = checked_body_len(data)?;
    let start = out.len();
    let result = decode_unchecked(&data[..body_len], out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// The length of the chunk's body once its CRC trailer checks out.
fn checked_body_len(data: &[u8]) -> Result<usize, CodecError> {
    let Some(body_len) = data.len().checked_sub(4) else {
        return Err(CodecError::Truncated {
            at: data.len(),
            needed: 4 - data.len(),
        });
    };
    let stored = u32::from_le_bytes(data[body_len..].try_into().expect("four bytes"));
    let computed = crc32(&data[..body_len]);
    if stored != computed {
        return Err(CodecError::Checksum { stored, computed });
    }
    Ok(body_len)
}

/// Decodes a chunk without its CRC trailer (`data` ends where the checksum would start).
/// The parser itself must survive any bytes; tests exercise it directly.
fn decode_unchecked(data: &[u8], out: &mut Vec<Event>) -> Result<(), CodecError> {
    let mut r = Reader { data, pos: 0 };
    let decoded: Res<()> = (|| {
        let (mut state, tables) = read_header(&mut r)?;
        out.reserve(state.left as usize);
        while state.left > 0 {
            out.push(state.next_event(&mut r, &tables)?.0);
        }
        state.check_end(&r)
    })();
    Ok(decoded?)
}

/// The decoder's results. The error is boxed so that a result is two words, returned in
/// registers: the reads return one per varint, a few per event, and a 40-byte error
/// inline made every one of them go through memory.
type Res<T> = Result<T, Box<CodecError>>;

/// A chunk's interned thread ids and strings.
#[derive(Default)]
struct Tables {
    tids: Vec<Tid>,
    strings: Vec<Name>,
}

/// Which tag bytes a chunk of each version may hold, by tag: a known code, and the
/// same-target flag only on a wake-up.
const fn valid_tags(version: u64) -> [bool; 256] {
    let mut valid = [false; 256];
    let mut tag = 0;
    while tag < 256 {
        let code = tag as u8 & CODE_MASK;
        valid[tag] = code <= LAST_CODE
            && !(version < 2 && code >= IRQ_ENTER_TIMER_ID)
            && !(tag as u8 & FLAG_SAME_TARGET != 0 && code != WAKEUP && code != WAKEUP_NEW);
        tag += 1;
    }
    valid
}

static VALID_TAGS_V1: [bool; 256] = valid_tags(1);
static VALID_TAGS: [bool; 256] = valid_tags(CODEC_VERSION as u64);

/// Where the decoding of a chunk's events stands: what each event's deltas and flags are
/// relative to.
struct DecodeState {
    version: u64,
    /// The tags this chunk's version may hold ([`valid_tags`]).
    valid_tags: &'static [bool; 256],
    count: u64,
    /// Events not decoded yet.
    left: u64,
    time: u64,
    cpu: u32,
    context: Option<Tid>,
}

/// Reads a chunk's header and tables, leaving `r` at its first event.
fn read_header(r: &mut Reader<'_>) -> Res<(DecodeState, Tables)> {
    let version = r.varint()?;
    if !(OLDEST_VERSION..=CODEC_VERSION as u64).contains(&version) {
        return Err(Box::new(CodecError::Version {
            found: u32::try_from(version).unwrap_or(u32::MAX),
            supported: CODEC_VERSION,
        }));
    }
    let at = r.pos;
    let count = r.varint()?;
    // Every event takes at least two bytes (tag and time delta).
    r.check_count("event", count, 2, at)?;
    let base = r.varint()?;
    let at = r.pos;
    let ntids = r.varint()?;
    r.check_count("thread id", ntids, 1, at)?;
    let mut tids = Vec::with_capacity(ntids as usize);
    for _ in 0..ntids {
        tids.push(r.varint_u32()?);
    }
    let at = r.pos;
    let nstrings = r.varint()?;
    r.check_count("string", nstrings, 1, at)?;
    let mut strings = Vec::with_capacity(nstrings as usize);
    for _ in 0..nstrings {
        let len = r.varint()?;
        let at = r.pos;
        let bytes = r.take(len)?;
        let s = std::str::from_utf8(bytes).map_err(|_| CodecError::Utf8 { at })?;
        strings.push(Name::new(s));
    }
    let state = DecodeState {
        version,
        valid_tags: if version < 2 {
            &VALID_TAGS_V1
        } else {
            &VALID_TAGS
        },
        count,
        left: count,
        time: base,
        cpu: 0,
        context: None,
    };
    Ok((state, Tables { tids, strings }))
}

impl DecodeState {
    /// The next event and its context; `self.left` must be above zero. Inlined into the
    /// decoding loops, so that the event is built where it is stored.
    #[inline(always)]
    fn next_event<B: EventBytes>(
        &mut self,
        r: &mut B,
        tables: &Tables,
    ) -> Result<(Event, Option<Tid>), B::Error> {
        let Tables { tids, strings } = tables;
        let at = r.pos();
        let tag = r.byte()?;
        let code = tag & CODE_MASK;
        if !self.valid_tags[tag as usize] {
            return Err(r.error(|| CodecError::Tag { at, tag }));
        }
        self.time = self.time.wrapping_add(r.varint()?);
        if tag & FLAG_CPU != 0 {
            self.cpu = r.varint_u32()?;
        }
        if tag & FLAG_CONTEXT != 0 {
            let at = r.pos();
            self.context = match r.varint()? {
                0 => None,
                i => Some(*tids.get((i - 1) as usize).ok_or_else(|| {
                    r.error(|| CodecError::Index {
                        what: "context thread id",
                        index: i - 1,
                        len: tids.len(),
                        at,
                    })
                })?),
            };
        }
        let cpu = self.cpu;
        let kind = match code {
            SWITCH_PREEMPTED | SWITCH_BLOCKED | SWITCH_EXITED => {
                let prev = *r.index(tids, "thread id")?;
                let next = *r.index(tids, "thread id")?;
                let how = match code {
                    SWITCH_PREEMPTED => SwitchedOut::Preempted,
                    SWITCH_BLOCKED => SwitchedOut::Blocked,
                    _ => SwitchedOut::Exited,
                };
                EventKind::Switch { prev, how, next }
            }
            WAKEUP | WAKEUP_NEW => {
                let t = *r.index(tids, "thread id")?;
                let target_cpu = if tag & FLAG_SAME_TARGET != 0 {
                    cpu
                } else {
                    r.varint_u32()?
                };
                EventKind::Wakeup {
                    tid: t,
                    target_cpu,
                    new_thread: code == WAKEUP_NEW,
                }
            }
            MIGRATE => EventKind::Migrate {
                tid: *r.index(tids, "thread id")?,
                from: r.varint_u32()?,
                to: r.varint_u32()?,
            },
            FORK => EventKind::Fork {
                parent: *r.index(tids, "thread id")?,
                child: *r.index(tids, "thread id")?,
            },
            EXEC => EventKind::Exec {
                tid: *r.index(tids, "thread id")?,
                comm: *r.index(strings, "string")?,
            },
            EXIT => EventKind::Exit {
                tid: *r.index(tids, "thread id")?,
            },
            IDLE_ENTER => EventKind::IdleEnter {
                state: r.varint_u32()?,
            },
            IDLE_EXIT => EventKind::IdleExit,
            IRQ_ENTER_TIMER => EventKind::InterruptEnter(InterruptKind::Timer {
                timer: 0,
                function: 0,
            }),
            IRQ_ENTER_TIMER_ID => EventKind::InterruptEnter(InterruptKind::Timer {
                timer: !r.varint()?,
                function: !r.varint()?,
            }),
            TIMER_ARM => EventKind::TimerArm {
                timer: !r.varint()?,
                function: !r.varint()?,
            },
            STACK => EventKind::Stack {
                id: r.varint_u32()?,
            },
            CPU_SAMPLE => EventKind::CpuSample {
                tid: *r.index(tids, "thread id")?,
                period_ns: r.varint()?,
            },
            IRQ_ENTER_IRQ => {
                EventKind::InterruptEnter(InterruptKind::Irq(*r.index(strings, "string")?))
            }
            IRQ_ENTER_SOFTIRQ => {
                EventKind::InterruptEnter(InterruptKind::SoftIrq(*r.index(strings, "string")?))
            }
            IRQ_ENTER_IPI => EventKind::InterruptEnter(InterruptKind::Ipi),
            IRQ_EXIT => EventKind::InterruptExit,
            FREQUENCY => EventKind::Frequency { khz: r.varint()? },
            _ => EventKind::Runtime {
                tid: *r.index(tids, "thread id")?,
                ns: r.varint()?,
            },
        };
        self.left -= 1;
        let event = Event {
            time_ns: self.time,
            cpu,
            kind,
        };
        Ok((event, self.context))
    }

    /// What decoding an event changes, to undo it.
    #[inline(always)]
    fn snapshot(&self) -> (u64, u64, u32, Option<Tid>) {
        (self.left, self.time, self.cpu, self.context)
    }

    #[inline(always)]
    fn restore(&mut self, (left, time, cpu, context): (u64, u64, u32, Option<Tid>)) {
        (self.left, self.time, self.cpu, self.context) = (left, time, cpu, context);
    }

    /// After the last event: the body must end there.
    fn check_end(&self, r: &Reader<'_>) -> Res<()> {
        if r.pos != r.data.len() {
            return Err(Box::new(CodecError::Trailing {
                count: r.data.len() - r.pos,
                events: self.count,
            }));
        }
        Ok(())
    }
}

/// What a chunk says of an event besides the event: the thread that was current on its CPU
/// when it fired, and the call stack recorded with it. Eight bytes, as the `Option<Tid>`
/// it replaced: the decoder, the merge and the analyses move one per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventContext {
    thread: u32,
    stack: u32,
}

/// "None" in an [`EventContext`] field. No thread has this id (the kernel's are below
/// 2^22) and no recording has 2^32 − 1 stacks; a damaged chunk naming it reads as none.
const ABSENT: u32 = u32::MAX;

impl EventContext {
    pub fn new(thread: Option<Tid>, stack: Option<StackId>) -> Self {
        EventContext {
            thread: thread.unwrap_or(ABSENT),
            stack: stack.unwrap_or(ABSENT),
        }
    }

    /// The thread current on the event's CPU when it fired (`None` when not recorded).
    #[inline]
    pub fn thread(self) -> Option<Tid> {
        (self.thread != ABSENT).then_some(self.thread)
    }

    /// The call stack recorded with the event.
    #[inline]
    pub fn stack(self) -> Option<StackId> {
        (self.stack != ABSENT).then_some(self.stack)
    }

    /// The records `event` was decoded from, each with its thread: the event, then the
    /// [`EventKind::Stack`] record folded into it (with its time, CPU and context).
    pub fn records(self, event: &Event) -> impl Iterator<Item = (Event, Option<Tid>)> {
        let stack = self.stack().map(|id| Event {
            time_ns: event.time_ns,
            cpu: event.cpu,
            kind: EventKind::Stack { id },
        });
        std::iter::once(*event)
            .chain(stack)
            .map(move |e| (e, self.thread()))
    }
}

/// The records a decoded chunk was encoded from: each event with its context's thread, and
/// after it the stack folded into it (see [`decode_chunk_in_context`]).
pub fn unfold(events: &[Event], contexts: &[EventContext]) -> Vec<(Event, Option<Tid>)> {
    events
        .iter()
        .zip(contexts)
        .flat_map(|(e, c)| c.records(e))
        .collect()
}

/// Decodes one chunk, appending its events to `events` and, for each, its
/// [`EventContext`]: the thread that was current on its CPU when it fired (for merging the
/// CPUs' chunks by time), and its stack. The checksum is verified before the first event.
/// Bytes that pass it and still do not parse (a foreign encoder) are an error, and the
/// events before them stay appended, so that a reader can deliver what came before the
/// damage. [`ChunkDecoder`] decodes a chunk an event or a run of events at a time.
///
/// A `Stack` record is folded into the event before it (the same perf sample: the same
/// time, CPU and context), so that the merge and the analyses handle a quarter fewer
/// events; [`EventContext::records`] gives it back. One that follows no event of the
/// chunk, or an event that has a stack already, stays a record of its own.
pub fn decode_chunk_in_context(
    data: &[u8],
    events: &mut Vec<Event>,
    contexts: &mut Vec<EventContext>,
) -> Result<(), CodecError> {
    let mut decoder = ChunkDecoder::new(data)?;
    events.reserve(decoder.records_left() as usize + 1);
    contexts.reserve(decoder.records_left() as usize + 1);
    // Only an event at the very end of time stops a run before the chunk's end.
    while decoder.next_time().is_some() {
        decoder.decode_before(u64::MAX, usize::MAX, events, contexts)?;
    }
    Ok(())
}

/// A chunk being decoded a run of events at a time, its next event decoded ahead. The
/// replay merges the CPUs' chunks by comparing their next events' times and decoding the
/// earliest CPU's run of events straight into the merged batch
/// ([`ChunkDecoder::decode_before`]): no chunk is decoded whole into a buffer of its own
/// that the merge would copy from.
pub struct ChunkDecoder<D> {
    /// The chunk, CRC trailer included.
    data: D,
    /// Where the CRC trailer starts.
    body_len: usize,
    /// Where the event after `next` starts.
    pos: usize,
    state: DecodeState,
    tables: Tables,
    /// The next event, decoded; `None` after the last one (or an error).
    next: Option<(Event, EventContext)>,
}

impl<D: AsRef<[u8]>> ChunkDecoder<D> {
    /// Checks the chunk's checksum, reads its header and tables, and decodes its first
    /// event.
    pub fn new(data: D) -> Result<Self, CodecError> {
        let body_len = checked_body_len(data.as_ref())?;
        let mut r = Reader {
            data: &data.as_ref()[..body_len],
            pos: 0,
        };
        let (mut state, tables) = read_header(&mut r)?;
        let next = decode_one(&mut state, &tables, &mut r)?;
        let pos = r.pos;
        Ok(ChunkDecoder {
            data,
            body_len,
            pos,
            state,
            tables,
            next,
        })
    }

    /// The chunk's bytes back, to read another chunk into.
    pub fn into_data(self) -> D {
        self.data
    }

    /// Records not decoded yet, besides the next event (a stack counts apart from the
    /// event it folds into).
    pub fn records_left(&self) -> u64 {
        self.state.left
    }

    /// The time of the next event, `None` after the last one.
    #[inline]
    pub fn next_time(&self) -> Option<u64> {
        self.next.as_ref().map(|(e, _)| e.time_ns)
    }

    /// Appends the next event with its context, then the events after it that come
    /// before `limit`, `max` events in all at most (and at least the next one); the one
    /// that stopped it becomes the next event. After the last event the chunk must end
    /// (trailing bytes are an error). On an error the events decoded before it stay
    /// appended, and the decoder gives nothing more.
    #[inline]
    pub fn decode_before(
        &mut self,
        limit: u64,
        max: usize,
        events: &mut Vec<Event>,
        contexts: &mut Vec<EventContext>,
    ) -> Result<(), CodecError> {
        let Some((event, context)) = self.next.take() else {
            return Ok(());
        };
        events.push(event);
        contexts.push(context);
        let mut r = Reader {
            data: &self.data.as_ref()[..self.body_len],
            pos: self.pos,
        };
        let state = &mut self.state;
        let tables = &self.tables;
        let mut appended = 1;
        let result = loop {
            match decode_one(state, tables, &mut r) {
                Ok(Some((event, context))) if event.time_ns < limit && appended < max => {
                    events.push(event);
                    contexts.push(context);
                    appended += 1;
                }
                Ok(next) => break Ok(next),
                Err(e) => break Err(e),
            }
        };
        self.pos = r.pos;
        match result {
            Ok(next) => {
                self.next = next;
                Ok(())
            }
            Err(e) => {
                self.state.left = 0;
                Err(*e)
            }
        }
    }
}

/// The next event of a chunk and its context, with the stack record that follows it
/// folded in; `None` after the last event, once the chunk is checked to end there. Where
/// the rest of the chunk holds a whole [`Window`], the event is read from it without a
/// check per byte; anything unusual there (damage, a varint of nine bytes or more) is read
/// again by the checked reader, which names the error.
#[inline(always)]
fn decode_one(
    state: &mut DecodeState,
    tables: &Tables,
    r: &mut Reader<'_>,
) -> Res<Option<(Event, EventContext)>> {
    if state.left == 0 {
        state.check_end(r)?;
        return Ok(None);
    }
    if let Some(mut window) = Window::at(r.data, r.pos) {
        let before = state.snapshot();
        match event_with_stack(state, tables, &mut window) {
            Ok(decoded) => {
                r.pos = window.pos();
                return Ok(Some(decoded));
            }
            Err(Fallback) => state.restore(before),
        }
    }
    event_with_stack(state, tables, r).map(Some)
}

/// The next event and its context, with the stack record that follows it folded in: a
/// stack record with the same time (delta 0), CPU and context (no flags), whose id names
/// a stack.
#[inline(always)]
fn event_with_stack<B: EventBytes>(
    state: &mut DecodeState,
    tables: &Tables,
    r: &mut B,
) -> Result<(Event, EventContext), B::Error> {
    let (event, thread) = state.next_event(r, tables)?;
    let mut context = EventContext::new(thread, None);
    if state.left > 0 && state.version >= 2 {
        if let Some(stack) = r.folded_stack()? {
            context.stack = stack;
            state.left -= 1;
        }
    }
    Ok((event, context))
}

pub(crate) struct Reader<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn byte(&mut self) -> Res<u8> {
        match self.data.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(Box::new(CodecError::Truncated {
                at: self.pos,
                needed: 1,
            })),
        }
    }

    /// Unsigned LEB128, at most ten bytes, no bits beyond the 64th.
    #[inline(always)]
    pub(crate) fn varint(&mut self) -> Res<u64> {
        // One- to three-byte values (tags' fields, table indexes, time deltas up to 2 ms)
        // inline.
        if let Some(&[b0, b1, b2]) = self.data.get(self.pos..self.pos + 3) {
            if b0 < 0x80 {
                self.pos += 1;
                return Ok(b0 as u64);
            }
            if b1 < 0x80 {
                self.pos += 2;
                return Ok((b0 & 0x7F) as u64 | (b1 as u64) << 7);
            }
            if b2 < 0x80 {
                self.pos += 3;
                return Ok((b0 & 0x7F) as u64 | ((b1 & 0x7F) as u64) << 7 | (b2 as u64) << 14);
            }
        }
        self.varint_slow()
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Res<u64> {
        let start = self.pos;
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(Box::new(CodecError::Varint { at: start }));
            }
            value |= ((b & 0x7F) as u64) << shift;
            if b < 0x80 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    fn take(&mut self, len: u64) -> Res<&'a [u8]> {
        let left = self.data.len() - self.pos;
        if len > left as u64 {
            return Err(Box::new(CodecError::Truncated {
                at: self.pos,
                needed: (len - left as u64).min(usize::MAX as u64) as usize,
            }));
        }
        let s = &self.data[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(s)
    }

    /// A count of items of at least `min_bytes` each must fit in what is left, so a
    /// damaged count cannot make the decoder reserve gigabytes.
    fn check_count(&self, what: &'static str, count: u64, min_bytes: u64, at: usize) -> Res<()> {
        let left = self.data.len() - self.pos;
        if count.saturating_mul(min_bytes) > left as u64 {
            return Err(Box::new(CodecError::Count {
                what,
                count,
                left,
                at,
            }));
        }
        Ok(())
    }
}

impl EventBytes for Reader<'_> {
    type Error = Box<CodecError>;

    #[inline(always)]
    fn error(&self, e: impl FnOnce() -> CodecError) -> Box<CodecError> {
        Box::new(e())
    }

    #[inline(always)]
    fn pos(&self) -> usize {
        self.pos
    }

    #[inline(always)]
    fn byte(&mut self) -> Res<u8> {
        Reader::byte(self)
    }

    #[inline(always)]
    fn varint(&mut self) -> Res<u64> {
        Reader::varint(self)
    }

    #[inline(always)]
    fn folded_stack(&mut self) -> Res<Option<StackId>> {
        if self.data.get(self.pos..self.pos + 2) != Some(&[STACK, 0]) {
            return Ok(None);
        }
        let mut id = Reader {
            data: self.data,
            pos: self.pos + 2,
        };
        // A malformed id, or one no table has, is left to be read as written.
        match id.varint_u32() {
            Ok(stack) if stack != ABSENT => {
                self.pos = id.pos;
                Ok(Some(stack))
            }
            _ => Ok(None),
        }
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    // 1 byte per started group of 7 bits; 0 takes one byte.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, initial value and final XOR
/// 0xFFFFFFFF): the checksum of zlib, PNG and Ethernet.
fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::event::IDLE_TID;

    fn ev(time_ns: u64, cpu: u32, kind: EventKind) -> Event {
        Event { time_ns, cpu, kind }
    }

    fn encode(events: &[Event]) -> Vec<u8> {
        let mut enc = ChunkEncoder::new();
        for e in events {
            enc.push(e);
        }
        let expected_len = enc.encoded_bytes();
        let bytes = enc.finish();
        assert_eq!(bytes.len(), expected_len, "encoded_bytes is exact");
        assert!(enc.is_empty() && enc.first_ns().is_none(), "finish resets");
        bytes
    }

    #[test]
    fn contexts_round_trip_and_cost_a_byte_only_when_they_change() {
        let events: Vec<Event> = (0..6)
            .map(|i| ev(100 + i, 0, EventKind::IdleExit))
            .collect();
        let contexts = [Some(7), Some(7), None, Some(0), Some(9), Some(9)];
        let mut enc = ChunkEncoder::new();
        for (e, c) in events.iter().zip(contexts) {
            enc.push_in_context(e, c);
        }
        let with = enc.finish();
        let plain = encode(&events);
        let (out, ctx): (Vec<Event>, Vec<Option<Tid>>) = stream(&with).unwrap().into_iter().unzip();
        assert_eq!(out, events);
        assert_eq!(ctx, contexts);
        // Four changes (7, None, 0, 9): one varint each; tids 7, 0 and 9 interned once (the
        // table's count stays one byte). The tag bits are free.
        assert_eq!(with.len(), plain.len() + 4 + 3);
        // A plain decode skips the contexts; a plain chunk decodes to unknown contexts.
        let mut out2 = Vec::new();
        decode_chunk(&with, &mut out2).unwrap();
        assert_eq!(out2, events);
        let ctx3: Vec<Option<Tid>> = stream(&plain)
            .unwrap()
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        assert_eq!(ctx3, vec![None; 6]);
    }

    /// A chunk through [`decode_chunk_in_context`], events paired with their contexts'
    /// threads, folded stacks unfolded again: the records as they were encoded.
    fn stream(bytes: &[u8]) -> Result<Vec<(Event, Option<Tid>)>, CodecError> {
        let (mut events, mut contexts) = (Vec::new(), Vec::new());
        decode_chunk_in_context(bytes, &mut events, &mut contexts)?;
        assert_eq!(events.len(), contexts.len());
        Ok(unfold(&events, &contexts))
    }

    /// The widest event a decoding window can meet: a migration (three payload varints)
    /// with a CPU and a context, every varint padded to eight bytes (a crafted chunk; the
    /// encoder writes the shortest form), then its stack record with a padded id, early
    /// in a chunk (read from a window). It decodes as the checked reader reads it, the
    /// stack folded in, and a ninth padding byte sends it to the checked reader.
    #[test]
    fn the_widest_event_a_window_holds_reads_as_the_checked_reader_reads_it() {
        let padded = |v: u8, len: usize| {
            let mut b = vec![0x80u8; len];
            b[0] |= v;
            b[len - 1] = 0;
            b
        };
        for len in [8, 9] {
            let mut body = Vec::new();
            for v in [CODEC_VERSION as u64, 12, 1_000, 1, 7, 0] {
                put_varint(&mut body, v); // version, count, base, 1 tid (7), no strings
            }
            body.push(MIGRATE | FLAG_CPU | FLAG_CONTEXT);
            for v in [5, 1, 1, 0, 2, 3] {
                body.extend(padded(v, len)); // time +5, cpu 1, context tids[0], tid 0, 2 → 3
            }
            body.extend([STACK, 0]);
            body.extend(padded(4, len));
            for _ in 0..10 {
                body.extend([IDLE_EXIT, 1]);
            }
            let crc = crc32(&body);
            body.extend(crc.to_le_bytes());
            let (mut events, mut contexts) = (Vec::new(), Vec::new());
            decode_chunk_in_context(&body, &mut events, &mut contexts).unwrap();
            let migrate = EventKind::Migrate {
                tid: 7,
                from: 2,
                to: 3,
            };
            assert_eq!(events[0], ev(1_005, 1, migrate), "{len}-byte varints");
            assert_eq!(contexts[0], EventContext::new(Some(7), Some(4)));
            assert_eq!(events.len(), 11);
            let mut plain = Vec::new();
            decode_chunk(&body, &mut plain).unwrap();
            let records: Vec<Event> = unfold(&events, &contexts)
                .into_iter()
                .map(|(e, _)| e)
                .collect();
            assert_eq!(records, plain);
        }
    }

    /// A stack record right after its event (same time, CPU and context) is folded into
    /// it; one at a chunk's start, a second one, one at another time, CPU or context stays
    /// a record of its own. Unfolded, the records are the ones encoded.
    #[test]
    fn stacks_fold_into_the_event_they_were_recorded_with() {
        let stack = |t, cpu, id| ev(t, cpu, EventKind::Stack { id });
        let records = [
            (stack(100, 0, 9), Some(5)),
            (ev(200, 0, EventKind::IdleExit), Some(5)),
            (stack(200, 0, 1), Some(5)),
            (stack(200, 0, 2), Some(5)),
            (ev(300, 0, EventKind::IdleExit), Some(5)),
            (stack(301, 0, 3), Some(5)),
            (ev(400, 0, EventKind::IdleExit), Some(5)),
            (stack(400, 1, 4), Some(5)),
            (ev(500, 1, EventKind::IdleExit), Some(5)),
            (stack(500, 1, 6), Some(7)),
            (ev(600, 1, EventKind::IdleExit), None),
            (stack(600, 1, 8), None),
        ];
        let mut enc = ChunkEncoder::new();
        for (e, c) in &records {
            enc.push_in_context(e, *c);
        }
        let bytes = enc.finish();
        let (mut events, mut contexts) = (Vec::new(), Vec::new());
        decode_chunk_in_context(&bytes, &mut events, &mut contexts).unwrap();
        let stacks: Vec<(u64, Option<StackId>)> = events
            .iter()
            .zip(&contexts)
            .map(|(e, c)| (e.time_ns, c.stack()))
            .collect();
        assert_eq!(
            stacks,
            [
                (100, None),
                (200, Some(1)),
                (200, None),
                (300, None),
                (301, None),
                (400, None),
                (400, None),
                (500, None),
                (500, None),
                (600, Some(8)),
            ]
        );
        assert_eq!(unfold(&events, &contexts), records);
    }

    /// Bytes that pass the checksum but do not parse (a foreign encoder): an error, with
    /// the events before them kept, so a reader delivers what came before the damage.
    #[test]
    fn a_parse_error_keeps_the_events_before_it() {
        let events = every_kind(1_000, 1);
        let good = encode(&events);
        let body = &good[..good.len() - 4];
        // The same chunk announcing one event more, which is a tag the format lacks.
        let mut r = Reader { data: body, pos: 0 };
        r.varint().unwrap();
        let count = r.varint().unwrap();
        let mut bytes = Vec::new();
        put_varint(&mut bytes, CODEC_VERSION as u64);
        put_varint(&mut bytes, count + 1);
        bytes.extend_from_slice(&body[r.pos..]);
        bytes.extend_from_slice(&[0x1F, 0]);
        bytes.extend_from_slice(&crc32(&bytes).to_le_bytes());
        let (mut out, mut contexts) = (Vec::new(), Vec::new());
        let err = decode_chunk_in_context(&bytes, &mut out, &mut contexts).unwrap_err();
        assert!(matches!(err, CodecError::Tag { tag: 0x1F, .. }), "{err}");
        assert_eq!(out.len(), contexts.len());
        let unfolded: Vec<Event> = unfold(&out, &contexts)
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        assert_eq!(unfolded, events);
    }

    #[test]
    fn the_decoder_in_context_reads_what_the_chunk_decoder_reads() {
        let events: Vec<Event> = (0..3)
            .flat_map(|i| every_kind(1_000 + i * 1_000_000, i as u32))
            .collect();
        let bytes = encode(&events);
        let streamed: Vec<Event> = stream(&bytes)
            .unwrap()
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        assert_eq!(streamed, events);
        // Damage is found before the first event (the checksum), or at the end (bytes
        // after the last event, which a checksum computed over them does not catch).
        let mut damaged = bytes.clone();
        damaged[5] ^= 0x40;
        assert!(matches!(stream(&damaged), Err(CodecError::Checksum { .. })));
        let mut trailing = bytes[..bytes.len() - 4].to_vec();
        trailing.push(0);
        trailing.extend_from_slice(&crc32(&trailing).to_le_bytes());
        assert!(matches!(
            stream(&trailing),
            Err(CodecError::Trailing { count: 1, .. })
        ));
        assert!(matches!(
            decode_chunk(&trailing, &mut Vec::new()),
            Err(CodecError::Trailing { count: 1, .. })
        ));
    }

    fn round_trip(events: &[Event]) -> Vec<u8> {
        let bytes = encode(events);
        let mut out = vec![ev(1, 1, EventKind::IdleExit)];
        decode_chunk(&bytes, &mut out).unwrap();
        assert_eq!(out[0], ev(1, 1, EventKind::IdleExit), "decode appends");
        assert_eq!(&out[1..], events);
        bytes
    }

    fn every_kind(t: u64, cpu: u32) -> Vec<Event> {
        use EventKind::*;
        use InterruptKind::*;
        let kinds = vec![
            Switch {
                prev: 7,
                how: SwitchedOut::Preempted,
                next: 8,
            },
            Switch {
                prev: 8,
                how: SwitchedOut::Blocked,
                next: IDLE_TID,
            },
            Switch {
                prev: 9,
                how: SwitchedOut::Exited,
                next: 7,
            },
            Wakeup {
                tid: 8,
                target_cpu: cpu,
                new_thread: false,
            },
            Wakeup {
                tid: 10,
                target_cpu: cpu ^ 1,
                new_thread: true,
            },
            Migrate {
                tid: 8,
                from: 0,
                to: 3,
            },
            Fork {
                parent: 7,
                child: 10,
            },
            Exec {
                tid: 10,
                comm: "make".into(),
            },
            Exit { tid: 9 },
            IdleEnter { state: 2 },
            IdleExit,
            InterruptEnter(Timer {
                timer: 0,
                function: 0,
            }),
            InterruptEnter(Timer {
                timer: 0xffff_c900_056d_3be0,
                function: 0xffff_ffff_8142_d089,
            }),
            TimerArm {
                timer: 0xffff_c900_056d_3be0,
                function: 0xffff_ffff_8142_d089,
            },
            Stack { id: 0 },
            CpuSample {
                tid: 8,
                period_ns: 1_001_234,
            },
            Stack { id: 70_000 },
            InterruptEnter(Irq("virtio0-input.0".into())),
            InterruptEnter(SoftIrq("NET_RX".into())),
            InterruptEnter(Ipi),
            InterruptExit,
            Frequency { khz: 2_400_000 },
            Runtime {
                tid: 8,
                ns: 1_234_567,
            },
        ];
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, k)| ev(t + i as u64 * 1000, cpu, k))
            .collect()
    }

    /// The example of docs/FORMAT.md, byte by byte.
    #[test]
    fn documented_example_bytes() {
        let events = [
            ev(
                1_000,
                2,
                EventKind::Wakeup {
                    tid: 500,
                    target_cpu: 2,
                    new_thread: false,
                },
            ),
            ev(
                2_500,
                2,
                EventKind::Switch {
                    prev: IDLE_TID,
                    how: SwitchedOut::Blocked,
                    next: 500,
                },
            ),
        ];
        let bytes = round_trip(&events);
        let body = [
            0x02, 0x02, 0xe8, 0x07, 0x02, 0xf4, 0x03, 0x00, 0x00, // header, tids, strings
            0x63, 0x00, 0x02, 0x00, // wake-up
            0x01, 0xdc, 0x0b, 0x01, 0x00, // switch
        ];
        assert_eq!(&bytes[..body.len()], &body);
        assert_eq!(&bytes[body.len()..], &crc32(&body).to_le_bytes());
        assert_eq!(bytes.len(), body.len() + 4);
    }

    #[test]
    fn crc32_is_the_standard_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"a"), 0xE8B7_BE43);
        // The sliced loop agrees with the bytewise definition at every alignment/length.
        let data: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..data.len() {
            let mut c = !0u32;
            for &b in &data[..len] {
                c ^= b as u32;
                for _ in 0..8 {
                    c = if c & 1 != 0 {
                        0xEDB8_8320 ^ (c >> 1)
                    } else {
                        c >> 1
                    };
                }
            }
            assert_eq!(crc32(&data[..len]), !c, "length {len}");
        }
    }

    #[test]
    fn every_variant_round_trips() {
        let events = every_kind(1_000_000_000, 1);
        // The test covers every code the format defines (stacks twice: a small and a
        // multi-byte id).
        assert_eq!(events.len(), LAST_CODE as usize + 2);
        round_trip(&events);
        round_trip(&every_kind(0, 0));
    }

    #[test]
    fn empty_chunk_round_trips() {
        let bytes = round_trip(&[]);
        let mut out = Vec::new();
        decode_chunk(&bytes, &mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn edge_values_round_trip() {
        use EventKind::*;
        let long = "x".repeat(100_000) + "é漢";
        let events = vec![
            ev(
                0,
                u32::MAX,
                Switch {
                    prev: u32::MAX,
                    how: SwitchedOut::Blocked,
                    next: 0,
                },
            ),
            ev(
                u64::MAX - 1,
                0,
                Wakeup {
                    tid: u32::MAX,
                    target_cpu: u32::MAX,
                    new_thread: true,
                },
            ),
            ev(
                u64::MAX,
                u32::MAX,
                Migrate {
                    tid: 0,
                    from: u32::MAX,
                    to: u32::MAX,
                },
            ),
            ev(
                u64::MAX,
                u32::MAX,
                Exec {
                    tid: u32::MAX,
                    comm: Name::new(""),
                },
            ),
            ev(
                u64::MAX,
                7,
                Exec {
                    tid: 1,
                    comm: Name::new(&long),
                },
            ),
            ev(
                u64::MAX,
                7,
                InterruptEnter(InterruptKind::Irq(Name::new(&long))),
            ),
            ev(
                u64::MAX,
                7,
                InterruptEnter(InterruptKind::SoftIrq(Name::new(""))),
            ),
            ev(u64::MAX, 7, Frequency { khz: u64::MAX }),
            ev(u64::MAX, 7, IdleEnter { state: u32::MAX }),
        ];
        round_trip(&events);
        // A chunk starting at u64::MAX.
        round_trip(&[ev(u64::MAX, 3, IdleExit), ev(u64::MAX, 3, IdleExit)]);
    }

    #[test]
    #[cfg(not(debug_assertions))]
    fn out_of_order_times_still_round_trip_in_release() {
        round_trip(&[
            ev(10, 0, EventKind::IdleExit),
            ev(5, 0, EventKind::IdleExit),
        ]);
    }

    /// xorshift64: deterministic pseudo-random numbers for the property tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_stream(rng: &mut Rng, n: usize) -> Vec<Event> {
        let mut t = rng.next() >> 4;
        let names = [
            "timer",
            "eth0",
            "",
            "NET_RX",
            "RCU",
            "a-much-longer-name-1234",
        ];
        (0..n)
            .map(|_| {
                // Mostly small steps, sometimes large ones, sometimes none.
                t += match rng.below(10) {
                    0 => 0,
                    1 => rng.below(1 << 40),
                    _ => rng.below(50_000),
                };
                let cpu = if rng.below(20) == 0 {
                    rng.next() as u32
                } else {
                    rng.below(4) as u32
                };
                let tid = |rng: &mut Rng| {
                    if rng.below(30) == 0 {
                        rng.next() as u32
                    } else {
                        rng.below(300) as u32
                    }
                };
                let name =
                    |rng: &mut Rng| names[rng.below(names.len() as u64) as usize].to_string();
                let kind = match rng.below(18) {
                    0 => EventKind::Switch {
                        prev: tid(rng),
                        how: SwitchedOut::Preempted,
                        next: tid(rng),
                    },
                    1 => EventKind::Switch {
                        prev: tid(rng),
                        how: SwitchedOut::Blocked,
                        next: tid(rng),
                    },
                    2 => EventKind::Switch {
                        prev: tid(rng),
                        how: SwitchedOut::Exited,
                        next: tid(rng),
                    },
                    3 | 4 => EventKind::Wakeup {
                        tid: tid(rng),
                        target_cpu: if rng.below(2) == 0 {
                            cpu
                        } else {
                            rng.below(8) as u32
                        },
                        new_thread: rng.below(2) == 0,
                    },
                    5 => EventKind::Migrate {
                        tid: tid(rng),
                        from: rng.below(8) as u32,
                        to: rng.next() as u32,
                    },
                    6 => EventKind::Fork {
                        parent: tid(rng),
                        child: tid(rng),
                    },
                    7 => EventKind::Exec {
                        tid: tid(rng),
                        comm: name(rng).into(),
                    },
                    8 => EventKind::Exit { tid: tid(rng) },
                    9 => EventKind::IdleEnter {
                        state: rng.below(5) as u32,
                    },
                    10 => EventKind::IdleExit,
                    11 => EventKind::InterruptEnter(InterruptKind::Timer {
                        timer: 0,
                        function: 0,
                    }),
                    12 => EventKind::InterruptEnter(InterruptKind::Irq(name(rng).into())),
                    13 => EventKind::InterruptEnter(InterruptKind::SoftIrq(name(rng).into())),
                    14 => EventKind::InterruptEnter(InterruptKind::Ipi),
                    15 => EventKind::InterruptExit,
                    16 => EventKind::Runtime {
                        tid: tid(rng),
                        ns: rng.next(),
                    },
                    _ => EventKind::Frequency { khz: rng.next() },
                };
                ev(t, cpu, kind)
            })
            .collect()
    }

    #[test]
    fn random_streams_round_trip_and_encoder_is_reusable() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut enc = ChunkEncoder::new();
        for round in 0..200 {
            let n = rng.below(if round % 10 == 0 { 5000 } else { 200 }) as usize;
            let events = random_stream(&mut rng, n);
            for e in &events {
                enc.push(e);
            }
            assert_eq!(enc.len(), n);
            assert_eq!(enc.first_ns(), events.first().map(|e| e.time_ns));
            assert_eq!(enc.last_ns(), events.last().map(|e| e.time_ns));
            let predicted = enc.encoded_bytes();
            let bytes = enc.finish();
            assert_eq!(bytes.len(), predicted);
            let mut out = Vec::new();
            decode_chunk(&bytes, &mut out).unwrap();
            assert_eq!(out, events, "round {round}");
        }
    }

    fn scheduler_stream(n: usize) -> Vec<Event> {
        // Switches and same-CPU wake-ups among 50 threads on one CPU, a few µs apart.
        let mut rng = Rng(42);
        let mut t = 10_000_000_000u64;
        let mut running = IDLE_TID;
        let mut events = Vec::with_capacity(n);
        while events.len() < n {
            t += 1_000 + rng.below(20_000);
            let tid = 30_000 + rng.below(50) as u32;
            let kind = if rng.below(2) == 0 {
                EventKind::Wakeup {
                    tid,
                    target_cpu: 1,
                    new_thread: false,
                }
            } else {
                let prev = running;
                running = tid;
                EventKind::Switch {
                    prev,
                    how: SwitchedOut::Blocked,
                    next: tid,
                }
            };
            events.push(ev(t, 1, kind));
        }
        events
    }

    #[test]
    fn typical_scheduler_events_take_at_most_eight_bytes() {
        let events = scheduler_stream(10_000);
        let bytes = round_trip(&events);
        let per_event = bytes.len() as f64 / events.len() as f64;
        assert!(per_event <= 8.0, "{per_event:.2} bytes per event");
        assert!(
            per_event >= 3.0,
            "{per_event:.2}: a test that measures nothing"
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        let events = every_kind(123_456_789, 2);
        let bytes = encode(&events);
        for len in 0..bytes.len() {
            let mut out = Vec::new();
            assert!(
                decode_chunk(&bytes[..len], &mut out).is_err(),
                "truncated to {len} bytes"
            );
            assert!(out.is_empty());
            // The parser alone, behind a checksum that happens to match.
            let body = &bytes[..len.min(bytes.len() - 4)];
            if body.len() < bytes.len() - 4 {
                assert!(
                    decode_unchecked(body, &mut out).is_err(),
                    "body cut at {len}"
                );
            }
        }
    }

    #[test]
    fn damaged_chunks_are_errors_never_panics() {
        let mut rng = Rng(7);
        let events = random_stream(&mut rng, 300);
        let bytes = encode(&events);
        let mut out = Vec::new();
        let mut caught_by_crc = 0;
        let mut parser_errors = 0;
        for i in 0..20_000 {
            let mut m = bytes.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(m.len() as u64) as usize;
                match rng.below(4) {
                    0 => m[at] ^= 1 << rng.below(8),
                    1 => m[at] = rng.next() as u8,
                    2 => m[at] = 0xFF,
                    _ => {
                        m.insert(at, rng.next() as u8);
                    }
                }
            }
            if m == bytes {
                continue;
            }
            out.clear();
            if decode_chunk(&m, &mut out).is_err() {
                caught_by_crc += 1;
                assert!(out.is_empty(), "mutation {i}: nothing appended on error");
            }
            // Re-seal the damaged bytes with a valid checksum: the parser must cope alone.
            let n = m.len() - 4;
            let crc = crc32(&m[..n]).to_le_bytes();
            m[n..].copy_from_slice(&crc);
            out.clear();
            match decode_chunk(&m, &mut out) {
                Err(_) => parser_errors += 1,
                Ok(()) => assert!(out.len() <= m.len() / 2),
            }
        }
        assert!(caught_by_crc > 19_000, "{caught_by_crc}");
        assert!(parser_errors > 1_000, "{parser_errors}");
    }

    #[test]
    fn huge_counts_do_not_allocate() {
        let mut data = Vec::new();
        put_varint(&mut data, CODEC_VERSION as u64);
        put_varint(&mut data, u64::MAX);
        put_varint(&mut data, 0);
        put_varint(&mut data, 0);
        put_varint(&mut data, 0);
        let crc = crc32(&data);
        data.extend_from_slice(&crc.to_le_bytes());
        let err = decode_chunk(&data, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(err, CodecError::Count { what: "event", .. }),
            "{err}"
        );

        let mut data = Vec::new();
        put_varint(&mut data, CODEC_VERSION as u64);
        put_varint(&mut data, 0);
        put_varint(&mut data, 0);
        put_varint(&mut data, 0);
        put_varint(&mut data, 1);
        put_varint(&mut data, u64::MAX); // a string "as long as memory"
        let err = decode_unchecked(&data, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, CodecError::Truncated { .. }), "{err}");
    }

    #[test]
    fn newer_version_is_refused() {
        let mut data = Vec::new();
        put_varint(&mut data, CODEC_VERSION as u64 + 1);
        let err = decode_unchecked(&data, &mut Vec::new()).unwrap_err();
        assert_eq!(
            err,
            CodecError::Version {
                found: CODEC_VERSION + 1,
                supported: CODEC_VERSION
            }
        );
        assert!(err.to_string().contains("upgrade powerlens"));
    }

    /// Recordings written before stacks (chunk version 1) still decode; a version-1 chunk
    /// cannot hold the codes version 2 added.
    #[test]
    fn version_one_chunks_decode_without_the_new_codes() {
        let as_version_one = |events: &[Event]| {
            let mut enc = ChunkEncoder::new();
            for e in events {
                enc.push(e);
            }
            let mut bytes = enc.finish();
            bytes.truncate(bytes.len() - 4);
            assert_eq!(bytes[0], CODEC_VERSION as u8);
            bytes[0] = 1;
            decode_unchecked(&bytes, &mut Vec::new())
        };
        let old: Vec<Event> = every_kind(5_000, 1)
            .into_iter()
            .filter(|e| {
                !matches!(
                    e.kind,
                    EventKind::Stack { .. }
                        | EventKind::CpuSample { .. }
                        | EventKind::TimerArm { .. }
                        | EventKind::InterruptEnter(InterruptKind::Timer { timer: 1.., .. })
                )
            })
            .collect();
        assert_eq!(as_version_one(&old), Ok(()));
        let stack = [ev(5_000, 0, EventKind::Stack { id: 3 })];
        assert!(matches!(
            as_version_one(&stack),
            Err(CodecError::Tag { tag: STACK, .. })
        ));
    }

    #[test]
    fn overlong_varints_are_errors() {
        let mut r = Reader {
            data: &[0xFF; 11],
            pos: 0,
        };
        assert!(matches!(
            r.varint().map_err(|e| *e),
            Err(CodecError::Varint { at: 0 })
        ));
        let mut max = Vec::new();
        put_varint(&mut max, u64::MAX);
        assert_eq!(max.len(), 10);
        let mut r = Reader { data: &max, pos: 0 };
        assert_eq!(r.varint(), Ok(u64::MAX));
        for v in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
    }
}
