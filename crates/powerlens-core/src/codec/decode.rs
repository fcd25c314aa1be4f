//! Decoding a chunk back into events, checked (length and CRC) or streamed event by
//! event with each event's context, and the byte reader both use.

use super::window::{EventBytes, Fallback, Window};
use super::{
    crc32, CodecError, CODEC_VERSION, CODE_MASK, CPU_SAMPLE, EXEC, EXIT, FLAG_CONTEXT, FLAG_CPU,
    FLAG_SAME_TARGET, FORK, FREQUENCY, IDLE_ENTER, IDLE_EXIT, IRQ_ENTER_IPI, IRQ_ENTER_IRQ,
    IRQ_ENTER_SOFTIRQ, IRQ_ENTER_TIMER, IRQ_ENTER_TIMER_ID, IRQ_EXIT, LAST_CODE, MIGRATE,
    OLDEST_VERSION, STACK, SWITCH_BLOCKED, SWITCH_EXITED, SWITCH_PREEMPTED, TIMER_ARM, VALID_TAGS,
    VALID_TAGS_V1, WAKEUP, WAKEUP_NEW,
};
use crate::sched::event::{Event, EventKind, InterruptKind, Name, StackId, SwitchedOut, Tid};

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
pub(super) fn checked_body_len(data: &[u8]) -> Result<usize, CodecError> {
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
pub(super) fn decode_unchecked(data: &[u8], out: &mut Vec<Event>) -> Result<(), CodecError> {
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
pub(super) type Res<T> = Result<T, Box<CodecError>>;

/// A chunk's interned thread ids and strings.
#[derive(Default)]
pub(super) struct Tables {
    tids: Vec<Tid>,
    strings: Vec<Name>,
}

/// Which tag bytes a chunk of each version may hold, by tag: a known code, and the
/// same-target flag only on a wake-up.
pub(super) const fn valid_tags(version: u64) -> [bool; 256] {
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

/// Where the decoding of a chunk's events stands: what each event's deltas and flags are
/// relative to.
pub(super) struct DecodeState {
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
pub(super) fn read_header(r: &mut Reader<'_>) -> Res<(DecodeState, Tables)> {
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
pub(super) const ABSENT: u32 = u32::MAX;

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
pub(super) fn decode_one(
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
pub(super) fn event_with_stack<B: EventBytes>(
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
