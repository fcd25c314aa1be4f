//! The records the in-kernel collector writes (`powerlens.bpf.c`), and the tracepoint
//! formats that describe their payloads, so that the rest of powerlens reads them as it
//! reads a perf ring's records: by field name. Pure: no I/O, so it can be fuzzed.
//!
//! Every record starts with a 24-byte head — time (CLOCK_MONOTONIC ns), kind, CPU, and the
//! process and thread current on the CPU — and its payload follows:
//!
//! | kind | payload |
//! |---|---|
//! | 1 switch | sched_switch's fields, then the runtime part: the CPU time the thread switching out ran since its last runtime record; then, when it took its stack, the stack part |
//! | 2 waking | sched_waking's fields; then, when it took its stack, the stack part |
//! | 3 runtime | the runtime part alone |
//!
//! The stack part: the current thread's user registers (ip, sp, bp: u64 each), the bytes
//! of user stack copied (u32) and 4 bytes of padding, then those bytes, from sp up.
//!
//! A copy of the ring ([`super::InKernel::copy_out`]) is a run of records, each behind its
//! length (u32, little-endian).

use crate::trace::format::{EventFormat, FormatError};
use crate::trace::records::UserRegs;

/// The bytes before every payload.
pub const HEAD_BYTES: usize = 24;

/// What a record is, from its kind word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Switch,
    Waking,
    Runtime,
}

impl Kind {
    /// Every kind, in kind-word order.
    pub const ALL: [Kind; 3] = [Kind::Switch, Kind::Waking, Kind::Runtime];

    /// The kind word the programs write after a record's time (`KIND_*` in
    /// `powerlens.bpf.c`, checked by a test against that source).
    fn word(self) -> u32 {
        match self {
            Kind::Switch => 1,
            Kind::Waking => 2,
            Kind::Runtime => 3,
        }
    }

    fn from_word(word: u32) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.word() == word)
    }

    /// The index of this kind in the collector's `control` map: its kind word, as the
    /// programs index it.
    pub fn control_index(self) -> u32 {
        self.word()
    }

    /// The tracepoint this kind stands in for.
    pub fn tracepoint(self) -> &'static str {
        match self {
            Kind::Switch => "sched/sched_switch",
            Kind::Waking => "sched/sched_waking",
            Kind::Runtime => "sched/sched_stat_runtime",
        }
    }

    /// The kind that stands in for `tracepoint`, if any.
    pub fn for_tracepoint(tracepoint: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.tracepoint() == tracepoint)
    }

    /// The format of this kind's payload (for a switch, of its sched_switch part).
    pub fn format(self) -> EventFormat {
        let text = match self {
            Kind::Switch => SWITCH_FORMAT,
            Kind::Waking => WAKING_FORMAT,
            Kind::Runtime => RUNTIME_FORMAT,
        };
        parse(text).expect("the in-kernel formats parse")
    }
}

fn parse(text: &str) -> Result<EventFormat, FormatError> {
    EventFormat::parse("sched", text)
}

/// sched_switch's fields as `on_switch` writes them (struct switch_record), with the
/// tracepoint's names; ID 0: no perf event is opened for it.
const SWITCH_FORMAT: &str = "name: sched_switch
ID: 0
format:
\tfield:char prev_comm[16];\toffset:0;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:16;\tsize:4;\tsigned:1;
\tfield:pid_t next_pid;\toffset:20;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:24;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:32;\tsize:16;\tsigned:0;
";
/// Where a switch's runtime part starts in its payload, and its length.
const SWITCH_RUNTIME_AT: usize = 48;
const RUNTIME_BYTES: usize = 16;

const WAKING_FORMAT: &str = "name: sched_waking
ID: 0
format:
\tfield:char comm[16];\toffset:0;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:16;\tsize:4;\tsigned:1;
\tfield:int target_cpu;\toffset:20;\tsize:4;\tsigned:1;
";
const WAKING_BYTES: usize = 24;

/// The runtime part (struct runtime_part): the thread, and the nanoseconds it ran.
const RUNTIME_FORMAT: &str = "name: sched_stat_runtime
ID: 0
format:
\tfield:pid_t pid;\toffset:0;\tsize:4;\tsigned:1;
\tfield:u64 runtime;\toffset:8;\tsize:8;\tsigned:0;
";

/// One record, read: its head, and the payload of each tracepoint it stands for, in
/// the order the kernel would have written them (a switch's runtime before the switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub time_ns: u64,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub kind: Kind,
    /// The payload of `kind`'s format.
    pub payload: &'a [u8],
    /// A switch's runtime part, when the thread switching out had CPU time unwritten.
    pub runtime: Option<&'a [u8]>,
    /// The current thread's user registers and the top of its user stack, for an event
    /// that took its stack.
    pub stack: Option<(UserRegs, &'a [u8])>,
}

/// The stack part's bytes before the copy of the stack.
const STACK_HEAD_BYTES: usize = 32;

/// Reads one record; `None` for a record too short for its kind or of an unknown kind
/// (a newer object), which the caller counts as lost.
pub fn read(bytes: &[u8]) -> Option<Record<'_>> {
    let head = bytes.get(..HEAD_BYTES)?;
    let word = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().unwrap());
    let kind = Kind::from_word(word(8))?;
    let payload = &bytes[HEAD_BYTES..];
    let needed = match kind {
        Kind::Switch => SWITCH_RUNTIME_AT + RUNTIME_BYTES,
        Kind::Waking => WAKING_BYTES,
        Kind::Runtime => RUNTIME_BYTES,
    };
    if payload.len() < needed {
        return None;
    }
    let stack = match &payload[needed..] {
        [] => None,
        part => Some(stack_part(part)?),
    };
    let mut record = Record {
        time_ns: u64::from_le_bytes(head[..8].try_into().unwrap()),
        cpu: word(12),
        pid: word(16),
        tid: word(20),
        kind,
        payload: &payload[..needed],
        runtime: None,
        stack,
    };
    if kind == Kind::Switch {
        let runtime = &payload[SWITCH_RUNTIME_AT..needed];
        record.payload = &payload[..SWITCH_RUNTIME_AT];
        if runtime_ns(runtime) > 0 {
            record.runtime = Some(runtime);
        }
    }
    Some(record)
}

/// A stack part: the registers and the copied stack; `None` when it is torn.
fn stack_part(part: &[u8]) -> Option<(UserRegs, &[u8])> {
    let head = part.get(..STACK_HEAD_BYTES)?;
    let u64_at = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap());
    let bytes = u32::from_le_bytes(head[24..28].try_into().unwrap()) as usize;
    let stack = part.get(STACK_HEAD_BYTES..STACK_HEAD_BYTES + bytes)?;
    let regs = UserRegs {
        ip: u64_at(0),
        sp: u64_at(8),
        bp: u64_at(16),
    };
    Some((regs, stack))
}

/// The nanoseconds of a runtime part.
fn runtime_ns(part: &[u8]) -> u64 {
    u64::from_le_bytes(part[8..16].try_into().unwrap())
}

/// A runtime record for what a CPU's sum held when collection stopped: `tid` ran `ns`
/// unwritten on `cpu`. The head's context is unknown (tid 0).
pub fn runtime_record(time_ns: u64, cpu: u32, tid: u32, ns: u64) -> Vec<u8> {
    let mut r = Vec::with_capacity(HEAD_BYTES + RUNTIME_BYTES);
    r.extend_from_slice(&time_ns.to_le_bytes());
    r.extend_from_slice(&3u32.to_le_bytes());
    r.extend_from_slice(&cpu.to_le_bytes());
    r.extend_from_slice(&0u32.to_le_bytes());
    r.extend_from_slice(&0u32.to_le_bytes());
    r.extend_from_slice(&tid.to_le_bytes());
    r.extend_from_slice(&0u32.to_le_bytes());
    r.extend_from_slice(&ns.to_le_bytes());
    r
}

/// Appends one record to a copy, behind its length.
pub fn push_framed(out: &mut Vec<u8>, record: &[u8]) {
    out.extend_from_slice(&(record.len() as u32).to_le_bytes());
    out.extend_from_slice(record);
}

/// Each record of a copy; a truncated last frame ends it, counted in `lost`.
pub fn framed<'a>(mut bytes: &'a [u8], lost: &mut u64, mut f: impl FnMut(&'a [u8])) {
    while !bytes.is_empty() {
        let Some(len) = bytes.get(..4) else {
            *lost += 1;
            return;
        };
        let len = u32::from_le_bytes(len.try_into().unwrap()) as usize;
        let Some(record) = bytes.get(4..4 + len) else {
            *lost += 1;
            return;
        };
        f(record);
        bytes = &bytes[4 + len..];
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The programs' `#define NAME VALUE` constants, read from their C source.
    pub(crate) fn c_constant(name: &str) -> u64 {
        let source = include_str!("powerlens.bpf.c");
        let value = source
            .lines()
            .filter_map(|l| l.strip_prefix("#define "))
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("powerlens.bpf.c defines no {name}"));
        let value = value.split_whitespace().next().unwrap();
        match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => value.trim_end_matches("ULL").parse(),
        }
        .unwrap_or_else(|e| panic!("{name} = {value}: {e}"))
    }

    /// The kind words are written in C and read in Rust: the two must agree, or every
    /// record would be read as another kind (or dropped as unknown).
    #[test]
    fn the_kind_words_are_the_programs() {
        for (kind, name) in [
            (Kind::Switch, "KIND_SWITCH"),
            (Kind::Waking, "KIND_WAKING"),
            (Kind::Runtime, "KIND_RUNTIME"),
        ] {
            assert_eq!(u64::from(kind.word()), c_constant(name), "{kind:?}");
            assert_eq!(Kind::from_word(kind.word()), Some(kind));
        }
        assert_eq!(Kind::from_word(0), None);
    }

    /// A switch record as `on_switch` lays it out.
    pub(crate) fn switch(prev: i32, state: i64, next: i32, runtime_ns: u64) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&1_000u64.to_le_bytes());
        r.extend_from_slice(&1u32.to_le_bytes());
        r.extend_from_slice(&1u32.to_le_bytes()); // cpu
        r.extend_from_slice(&40u32.to_le_bytes()); // pid
        r.extend_from_slice(&(prev as u32).to_le_bytes()); // tid
        r.extend_from_slice(b"ping\0\0\0\0\0\0\0\0\0\0\0\0");
        r.extend_from_slice(&prev.to_le_bytes());
        r.extend_from_slice(&next.to_le_bytes());
        r.extend_from_slice(&state.to_le_bytes());
        r.extend_from_slice(b"pong\0\0\0\0\0\0\0\0\0\0\0\0");
        r.extend_from_slice(&(prev as u32).to_le_bytes());
        r.extend_from_slice(&0u32.to_le_bytes());
        r.extend_from_slice(&runtime_ns.to_le_bytes());
        r
    }

    #[test]
    fn a_switch_reads_by_the_tracepoints_field_names() {
        let bytes = switch(41, 1, 42, 12_345);
        let r = read(&bytes).unwrap();
        assert_eq!((r.time_ns, r.cpu, r.pid, r.tid), (1_000, 1, 40, 41));
        assert_eq!(r.kind, Kind::Switch);
        let f = Kind::Switch.format();
        let d = f.decode(r.payload);
        assert_eq!(d.str("prev_comm").as_deref(), Some("ping"));
        assert_eq!(d.i64("prev_pid"), Some(41));
        assert_eq!(d.i64("prev_state"), Some(1));
        assert_eq!(d.i64("next_pid"), Some(42));
        assert_eq!(d.str("next_comm").as_deref(), Some("pong"));
        let runtime = Kind::Runtime.format();
        let d = runtime.decode(r.runtime.expect("it ran 12,345 ns"));
        assert_eq!((d.i64("pid"), d.u64("runtime")), (Some(41), Some(12_345)));
    }

    #[test]
    fn a_switch_with_no_cpu_time_unwritten_has_no_runtime_part() {
        let bytes = switch(41, 0x100, 42, 0);
        assert_eq!(read(&bytes).unwrap().runtime, None);
    }

    #[test]
    fn a_stacked_switch_carries_the_registers_and_the_stack_copied() {
        let mut bytes = switch(41, 1, 42, 0);
        for reg in [0x40_1000u64, 0x7ffd_0000, 0x7ffd_0040] {
            bytes.extend_from_slice(&reg.to_le_bytes());
        }
        bytes.extend_from_slice(&16u32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&[7; 16]);
        let r = read(&bytes).unwrap();
        let (regs, stack) = r.stack.expect("a stack part");
        assert_eq!(
            (regs.ip, regs.sp, regs.bp),
            (0x40_1000, 0x7ffd_0000, 0x7ffd_0040)
        );
        assert_eq!(stack, &[7; 16]);
        assert_eq!(r.payload.len(), 48, "the switch's own fields");
        // A stack part that says more bytes than it holds is torn: the record is refused.
        assert!(read(&bytes[..bytes.len() - 1]).is_none());
    }

    #[test]
    fn short_and_unknown_records_are_refused() {
        let bytes = switch(41, 1, 42, 5);
        assert!(read(&bytes[..bytes.len() - 1]).is_none(), "one byte short");
        assert!(read(&bytes[..10]).is_none(), "no whole head");
        let mut unknown = bytes.clone();
        unknown[8] = 9;
        assert!(read(&unknown).is_none(), "kind 9");
    }

    #[test]
    fn the_end_of_collection_runtime_record_reads_back() {
        let bytes = runtime_record(7, 1, 99, 4_000);
        let r = read(&bytes).unwrap();
        assert_eq!((r.kind, r.time_ns, r.cpu, r.tid), (Kind::Runtime, 7, 1, 0));
        let d = Kind::Runtime.format();
        let d = d.decode(r.payload);
        assert_eq!((d.i64("pid"), d.u64("runtime")), (Some(99), Some(4_000)));
    }

    #[test]
    fn frames_round_trip_and_a_torn_frame_is_lost() {
        let (a, b) = (switch(1, 1, 2, 0), runtime_record(5, 0, 3, 9));
        let mut copy = Vec::new();
        push_framed(&mut copy, &a);
        push_framed(&mut copy, &b);
        let mut seen = Vec::new();
        let mut lost = 0;
        framed(&copy, &mut lost, |r| seen.push(r.to_vec()));
        assert_eq!((seen, lost), (vec![a, b.clone()], 0));
        let mut seen = 0;
        framed(&copy[..copy.len() - 3], &mut lost, |_| seen += 1);
        assert_eq!((seen, lost), (1, 1));
    }

    #[test]
    fn every_kind_stands_for_its_tracepoint() {
        for kind in [Kind::Switch, Kind::Waking, Kind::Runtime] {
            assert_eq!(Kind::for_tracepoint(kind.tracepoint()), Some(kind));
            assert_eq!(kind.format().full_name(), kind.tracepoint());
        }
        assert_eq!(Kind::for_tracepoint("sched/sched_wakeup"), None);
    }
}
