//! The records of a perf ring buffer, decoded from the bytes [`super::ring::Ring::read`]
//! passes: samples (tracepoint hits and CPU-clock samples, each with the sample type its
//! event was opened with), lost-record counts, and the side-band MMAP2 and COMM records.
//!
//! Events of one CPU share a ring, and they do not all carry the same items (only some
//! record stacks), so a sample is decoded in two steps: `PERF_SAMPLE_IDENTIFIER` is the
//! first word of every sample, it names the event, and the event's sample type says what
//! follows. Records copied out of a wrapping ring are not 8-byte aligned: everything here
//! reads bytes, never casts.

use crate::perf::{
    PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_PERIOD,
    PERF_SAMPLE_RAW, PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER, PERF_SAMPLE_TID,
    PERF_SAMPLE_TIME,
};

/// What every tracepoint sample of the collector holds, in the kernel's order: identifier
/// (which event, when several share a ring), pid/tid, time, cpu, period, raw tracepoint
/// payload. [`STACK_SAMPLE_TYPE`] adds the call chain (between period and raw) and the
/// user registers and stack (after raw).
///
/// The period matters for tracepoints that count more than one per hit
/// (`__perf_count`, e.g. sched_stat_runtime counts nanoseconds): with PERF_SAMPLE_PERIOD
/// the kernel writes one sample per hit carrying the count; without it, a sampling event
/// of period 1 would write one sample per unit counted.
pub const SAMPLE_TYPE: u64 = PERF_SAMPLE_IDENTIFIER
    | PERF_SAMPLE_TID
    | PERF_SAMPLE_TIME
    | PERF_SAMPLE_CPU
    | PERF_SAMPLE_PERIOD
    | PERF_SAMPLE_RAW;

/// The items that make a sample unwindable in user space: the frame-pointer call chain
/// (kernel and user), the user registers [`USER_REGS_MASK`] and a copy of the user stack.
pub const STACK_SAMPLE_TYPE: u64 =
    PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;

/// `sample_regs_user` on x86_64: BP (bit 6), SP (7) and IP (8), what unwinding needs. The
/// kernel writes selected registers in bit order, so the sample holds bp, sp, ip.
pub const USER_REGS_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);

pub(crate) const PERF_RECORD_LOST: u32 = 2;
pub(crate) const PERF_RECORD_COMM: u32 = 3;
pub(crate) const PERF_RECORD_SAMPLE: u32 = 9;
pub(crate) const PERF_RECORD_MMAP2: u32 = 10;

/// `header.misc` of a COMM record written by exec (with `comm_exec`).
pub(crate) const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;

/// Length of the `struct sample_id` that `sample_id_all` appends to non-sample records of
/// events whose sample type includes [`SAMPLE_TYPE`]'s TID, TIME, CPU and IDENTIFIER (PERIOD
/// and RAW are not part of it): `u32 pid, tid; u64 time; u32 cpu, res; u64 identifier`.
pub const SAMPLE_ID_LEN: usize = 32;

/// One decoded record of the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    /// The kernel dropped `lost` records because the buffer was full.
    Lost {
        lost: u64,
    },
    /// A new executable mapping (`PERF_RECORD_MMAP2`).
    Mmap2(Mmap2<'a>),
    /// A task's name changed, or it called exec (`PERF_RECORD_COMM`).
    Comm(Comm<'a>),
    /// A sample whose identifier names no event of ours: its layout is unknown.
    UnknownId {
        id: u64,
    },
    /// A record type the collector does not ask for (throttling, …).
    Other {
        kind: u32,
    },
    /// Shorter than its type requires: counted as lost by the collector.
    Malformed,
}

/// A `PERF_RECORD_SAMPLE`; which items are filled depends on the event's sample type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample<'a> {
    /// The event's id (`PerfCounter::id`).
    pub id: u64,
    pub pid: u32,
    pub tid: u32,
    /// In the clock of the event's `clockid`.
    pub time: u64,
    pub cpu: u32,
    /// What the hit counted: 1 for most tracepoints, the `__perf_count` value for those
    /// that have one (sched_stat_runtime's nanoseconds), the nanoseconds since the last
    /// sample for the CPU clock; 1 without PERF_SAMPLE_PERIOD.
    pub period: u64,
    /// The tracepoint payload, including its trailing alignment padding; empty without
    /// PERF_SAMPLE_RAW.
    pub raw: &'a [u8],
    /// Empty unless the sample type has [`PERF_SAMPLE_CALLCHAIN`].
    pub callchain: Callchain<'a>,
    /// The user-space registers of the task (at its last entry into the kernel, or where it
    /// was interrupted); `None` without PERF_SAMPLE_REGS_USER or for a kernel thread.
    pub user_regs: Option<UserRegs>,
    /// The valid bytes of the user stack copied from `user_regs.sp` upwards (the kernel's
    /// `dyn_size`, at most the requested size); empty without PERF_SAMPLE_STACK_USER.
    pub user_stack: &'a [u8],
}

/// The user registers needed to unwind a user stack (x86_64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserRegs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// A `PERF_RECORD_MMAP2`: `len` bytes of `filename` from file offset `pgoff` mapped at
/// `addr` in process `pid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mmap2<'a> {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    /// `PROT_*` bits of the mapping.
    pub prot: u32,
    /// The file, or a pseudo name such as `[vdso]`, without the NUL padding.
    pub filename: &'a [u8],
    /// From the `sample_id` trailer.
    pub time: u64,
    pub cpu: u32,
}

/// A `PERF_RECORD_COMM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comm<'a> {
    pub pid: u32,
    pub tid: u32,
    /// The new name, without the NUL padding.
    pub comm: &'a [u8],
    /// Written by exec rather than by prctl(PR_SET_NAME) or a write to `comm`.
    pub exec: bool,
    pub time: u64,
    pub cpu: u32,
}

/// `ips[nr]` of a `PERF_SAMPLE_CALLCHAIN`: instruction pointers, innermost first, with
/// context markers (`PERF_CONTEXT_KERNEL`, `PERF_CONTEXT_USER`, …) before each part.
/// Kept as bytes because a record copied out of a wrapping ring is not 8-byte aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Callchain<'a> {
    bytes: &'a [u8],
}

/// Markers are the top 4095 values of u64 (`PERF_CONTEXT_MAX` is (u64)-4095).
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
pub const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
pub const PERF_CONTEXT_USER: u64 = -512i64 as u64;

/// One frame of a call chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub ip: u64,
    /// In user space (after a `PERF_CONTEXT_USER` marker) rather than the kernel.
    pub user: bool,
}

impl<'a> Callchain<'a> {
    /// A chain over `bytes`, `ips[nr]` as the kernel writes them (native endian).
    pub fn from_bytes(bytes: &'a [u8]) -> Self {
        let whole = bytes.len() / 8 * 8;
        Callchain {
            bytes: &bytes[..whole],
        }
    }

    /// Entries, markers included.
    pub fn len(&self) -> usize {
        self.bytes.len() / 8
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The raw entries, markers included.
    pub fn entries(&self) -> impl Iterator<Item = u64> + 'a {
        self.bytes
            .chunks_exact(8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
    }

    /// The frames, innermost first, markers turned into [`Frame::user`].
    pub fn frames(&self) -> impl Iterator<Item = Frame> + 'a {
        let mut user = false;
        self.entries().filter_map(move |ip| {
            if ip >= PERF_CONTEXT_MAX {
                user = ip == PERF_CONTEXT_USER;
                None
            } else {
                Some(Frame { ip, user })
            }
        })
    }

    /// The user-space part, innermost first: the user instruction pointer, then return
    /// addresses found by following frame pointers. Replaces the contents of `out` (a
    /// buffer the caller reuses, so that no call allocates once it has grown).
    pub fn user_ips(&self, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.frames().filter(|f| f.user).map(|f| f.ip));
    }
}

/// Bounds-checked native-endian reads of a record's bytes.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn u16(&self, at: usize) -> Option<u16> {
        let b = self.0.get(at..at.checked_add(2)?)?;
        Some(u16::from_ne_bytes(b.try_into().unwrap()))
    }
    fn u32(&self, at: usize) -> Option<u32> {
        let b = self.0.get(at..at.checked_add(4)?)?;
        Some(u32::from_ne_bytes(b.try_into().unwrap()))
    }
    fn u64(&self, at: usize) -> Option<u64> {
        let b = self.0.get(at..at.checked_add(8)?)?;
        Some(u64::from_ne_bytes(b.try_into().unwrap()))
    }
    fn slice(&self, at: usize, len: usize) -> Option<&'a [u8]> {
        self.0.get(at..at.checked_add(len)?)
    }
}

/// Decodes one whole record (header included), as [`super::ring::Ring::read`] passes it,
/// for a ring whose samples all have `sample_type`.
pub fn parse_record(bytes: &[u8], sample_type: u64) -> Record<'_> {
    parse_record_with(bytes, |_| Some(sample_type))
}

/// Decodes one whole record, looking up each sample's type by its identifier (`None`: not
/// one of ours). Every sample type must include PERF_SAMPLE_IDENTIFIER, TID, TIME and CPU,
/// and non-sample records are expected to carry the `sample_id` trailer of those items
/// (`sample_id_all`), which is where MMAP2 and COMM records get their time and CPU.
pub fn parse_record_with(bytes: &[u8], sample_type_of: impl Fn(u64) -> Option<u64>) -> Record<'_> {
    let b = Bytes(bytes);
    let (Some(kind), Some(misc)) = (b.u32(0), b.u16(4)) else {
        return Record::Malformed;
    };
    match kind {
        // struct { header; u64 id; u64 lost; sample_id; }
        PERF_RECORD_LOST => match b.u64(16) {
            Some(lost) => Record::Lost { lost },
            None => Record::Malformed,
        },
        PERF_RECORD_SAMPLE => {
            let Some(id) = b.u64(8) else {
                return Record::Malformed;
            };
            match sample_type_of(id) {
                Some(sample_type) => parse_sample(&b, id, sample_type),
                None => Record::UnknownId { id },
            }
        }
        PERF_RECORD_MMAP2 => parse_mmap2(&b),
        PERF_RECORD_COMM => parse_comm(&b, misc),
        kind => Record::Other { kind },
    }
}

/// struct { header; u64 identifier; u32 pid, tid; u64 time; u32 cpu, res; [u64 period;]
/// [u64 nr; u64 ips[nr];] [u32 size; char data[size];] [u64 abi; u64 regs[weight(mask)];]
/// [u64 size; char data[size]; u64 dyn_size;] }
fn parse_sample<'a>(b: &Bytes<'a>, id: u64, sample_type: u64) -> Record<'a> {
    let (Some(pid), Some(tid), Some(time), Some(cpu)) =
        (b.u32(16), b.u32(20), b.u64(24), b.u32(32))
    else {
        return Record::Malformed;
    };
    let mut sample = Sample {
        id,
        pid,
        tid,
        time,
        cpu,
        period: 1,
        raw: &[],
        callchain: Callchain::default(),
        user_regs: None,
        user_stack: &[],
    };
    let mut at = 40;
    let parsed = (|| -> Option<()> {
        if sample_type & PERF_SAMPLE_PERIOD != 0 {
            sample.period = b.u64(at)?;
            at += 8;
        }
        if sample_type & PERF_SAMPLE_CALLCHAIN != 0 {
            let len = usize::try_from(b.u64(at)?).ok()?.checked_mul(8)?;
            sample.callchain = Callchain {
                bytes: b.slice(at + 8, len)?,
            };
            at += 8 + len;
        }
        if sample_type & PERF_SAMPLE_RAW != 0 {
            let size = b.u32(at)? as usize;
            sample.raw = b.slice(at + 4, size)?;
            at += 4 + size;
        }
        if sample_type & PERF_SAMPLE_REGS_USER != 0 {
            // PERF_SAMPLE_REGS_ABI_NONE (0): no user context (a kernel thread), no regs.
            let abi = b.u64(at)?;
            at += 8;
            if abi != 0 {
                sample.user_regs = Some(UserRegs {
                    bp: b.u64(at)?,
                    sp: b.u64(at + 8)?,
                    ip: b.u64(at + 16)?,
                });
                at += 8 * USER_REGS_MASK.count_ones() as usize;
            }
        }
        if sample_type & PERF_SAMPLE_STACK_USER != 0 {
            // A zero size has no data and no dyn_size after it (no user context).
            let size = usize::try_from(b.u64(at)?).ok()?;
            if size > 0 {
                let data = b.slice(at + 8, size)?;
                let dyn_size = usize::try_from(b.u64(at + 8 + size)?).ok()?;
                sample.user_stack = &data[..dyn_size.min(size)];
            }
        }
        Some(())
    })();
    match parsed {
        Some(()) => Record::Sample(sample),
        None => Record::Malformed,
    }
}

/// The time and CPU of a `sample_id` trailer (see [`SAMPLE_ID_LEN`]).
fn sample_id(b: &Bytes<'_>, body_end: usize) -> Option<(u64, u32)> {
    Some((b.u64(body_end + 8)?, b.u32(body_end + 16)?))
}

/// The bytes of a NUL-padded string field.
fn c_string(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// struct { header; u32 pid, tid; u64 addr, len, pgoff; u32 maj, min; u64 ino,
/// ino_generation; u32 prot, flags; char filename[]; sample_id; }
fn parse_mmap2<'a>(b: &Bytes<'a>) -> Record<'a> {
    let Some(body_end) = b.0.len().checked_sub(SAMPLE_ID_LEN).filter(|&e| e >= 72) else {
        return Record::Malformed;
    };
    let fields = (|| {
        let (time, cpu) = sample_id(b, body_end)?;
        Some(Mmap2 {
            pid: b.u32(8)?,
            tid: b.u32(12)?,
            addr: b.u64(16)?,
            len: b.u64(24)?,
            pgoff: b.u64(32)?,
            prot: b.u32(64)?,
            filename: c_string(&b.0[72..body_end]),
            time,
            cpu,
        })
    })();
    fields.map_or(Record::Malformed, Record::Mmap2)
}

/// struct { header; u32 pid, tid; char comm[]; sample_id; }
fn parse_comm<'a>(b: &Bytes<'a>, misc: u16) -> Record<'a> {
    let Some(body_end) = b.0.len().checked_sub(SAMPLE_ID_LEN).filter(|&e| e >= 16) else {
        return Record::Malformed;
    };
    let fields = (|| {
        let (time, cpu) = sample_id(b, body_end)?;
        Some(Comm {
            pid: b.u32(8)?,
            tid: b.u32(12)?,
            comm: c_string(&b.0[16..body_end]),
            exec: misc & PERF_RECORD_MISC_COMM_EXEC != 0,
            time,
            cpu,
        })
    })();
    fields.map_or(Record::Malformed, Record::Comm)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds records the way the kernel lays them out, 8-byte padded.
    #[derive(Default)]
    pub(crate) struct RecordBuilder {
        bytes: Vec<u8>,
    }

    impl RecordBuilder {
        pub(crate) fn new(kind: u32, misc: u16) -> Self {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(&kind.to_ne_bytes());
            bytes.extend_from_slice(&misc.to_ne_bytes());
            bytes.extend_from_slice(&0u16.to_ne_bytes());
            RecordBuilder { bytes }
        }
        pub(crate) fn u32(mut self, v: u32) -> Self {
            self.bytes.extend_from_slice(&v.to_ne_bytes());
            self
        }
        pub(crate) fn u64(mut self, v: u64) -> Self {
            self.bytes.extend_from_slice(&v.to_ne_bytes());
            self
        }
        pub(crate) fn bytes(mut self, v: &[u8]) -> Self {
            self.bytes.extend_from_slice(v);
            self
        }
        pub(crate) fn pad8(mut self) -> Self {
            let len = self.bytes.len().next_multiple_of(8);
            self.bytes.resize(len, 0);
            self
        }
        /// The `sample_id` trailer: pid/tid, time, cpu, identifier.
        pub(crate) fn sample_id(self, pid: u32, time: u64, cpu: u32, id: u64) -> Self {
            self.u32(pid).u32(pid).u64(time).u32(cpu).u32(0).u64(id)
        }
        pub(crate) fn finish(mut self) -> Vec<u8> {
            let len = self.bytes.len() as u16;
            self.bytes[6..8].copy_from_slice(&len.to_ne_bytes());
            self.bytes
        }
    }

    /// A sample with the common head (identifier, tid, time, cpu, period).
    pub(crate) fn sample_head(id: u64, pid: u32, tid: u32, time: u64, cpu: u32) -> RecordBuilder {
        RecordBuilder::new(PERF_RECORD_SAMPLE, 0)
            .u64(id)
            .u32(pid)
            .u32(tid)
            .u64(time)
            .u32(cpu)
            .u32(0)
            .u64(1)
    }

    /// A sample record of SAMPLE_TYPE (plus a call chain when `ips` is given) with
    /// `payload`, padded to 8 bytes as the kernel does.
    pub(crate) fn sample_bytes(tid: u32, ips: Option<&[u64]>, payload: &[u8]) -> Vec<u8> {
        let raw_len = (4 + payload.len()).next_multiple_of(8);
        let mut b = RecordBuilder::new(PERF_RECORD_SAMPLE, 0)
            .u64(tid as u64 * 10) // identifier
            .u32(tid + 1000)
            .u32(tid)
            .u64(tid as u64 * 100) // time
            .u32(tid % 4) // cpu
            .u32(0)
            .u64(tid as u64 + 5); // period
        if let Some(ips) = ips {
            b = b.u64(ips.len() as u64);
            for &ip in ips {
                b = b.u64(ip);
            }
        }
        b.u32((raw_len - 4) as u32).bytes(payload).pad8().finish()
    }

    pub(crate) fn lost_bytes(lost: u64) -> Vec<u8> {
        RecordBuilder::new(PERF_RECORD_LOST, 0)
            .u64(7)
            .u64(lost)
            .finish()
    }

    #[test]
    fn parses_samples_and_lost() {
        let bytes = sample_bytes(7, None, b"hello");
        match parse_record(&bytes, SAMPLE_TYPE) {
            Record::Sample(s) => {
                assert_eq!((s.id, s.pid, s.tid, s.time, s.cpu), (70, 1007, 7, 700, 3));
                assert_eq!(s.period, 12);
                assert!(s.callchain.is_empty());
                assert_eq!(&s.raw[..5], b"hello");
                assert_eq!(
                    s.raw.len(),
                    12,
                    "payload plus padding to 8 bytes with its size"
                );
                assert_eq!((s.user_regs, s.user_stack), (None, &[][..]));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_record(&lost_bytes(9), SAMPLE_TYPE),
            Record::Lost { lost: 9 }
        );
        assert_eq!(parse_record(&bytes[..30], SAMPLE_TYPE), Record::Malformed);
        assert_eq!(parse_record(&bytes[..44], SAMPLE_TYPE), Record::Malformed);
        assert_eq!(parse_record(&bytes[..2], SAMPLE_TYPE), Record::Malformed);
        let mut throttle = lost_bytes(0);
        throttle[0] = 5;
        assert_eq!(
            parse_record(&throttle, SAMPLE_TYPE),
            Record::Other { kind: 5 }
        );
        // A raw size beyond the record is malformed, not an out-of-bounds read.
        let mut lying = bytes.clone();
        lying[48..52].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(parse_record(&lying, SAMPLE_TYPE), Record::Malformed);
    }

    #[test]
    fn parses_call_chains() {
        let with_chain = SAMPLE_TYPE | PERF_SAMPLE_CALLCHAIN;
        let ips = [
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0010,
            0xffff_ffff_8100_0020,
        ];
        let mut chain = ips.to_vec();
        chain.extend([PERF_CONTEXT_USER, 0x40_1000, 0x40_2000]);
        let bytes = sample_bytes(7, Some(&chain), b"payload");
        let Record::Sample(s) = parse_record(&bytes, with_chain) else {
            panic!("not a sample");
        };
        assert_eq!(&s.raw[..7], b"payload");
        assert_eq!(s.callchain.len(), 6);
        let frames: Vec<_> = s.callchain.frames().map(|f| (f.ip, f.user)).collect();
        assert_eq!(
            frames,
            [
                (ips[1], false),
                (ips[2], false),
                (0x40_1000, true),
                (0x40_2000, true)
            ]
        );
        let mut user = vec![99];
        s.callchain.user_ips(&mut user);
        assert_eq!(user, [0x40_1000, 0x40_2000]);
        // An empty chain, and a count that runs past the record.
        let empty = sample_bytes(7, Some(&[]), b"x");
        let Record::Sample(s) = parse_record(&empty, with_chain) else {
            panic!("not a sample");
        };
        assert_eq!((s.callchain.len(), &s.raw[..1]), (0, &b"x"[..]));
        let mut lying = bytes.clone();
        lying[48..56].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(parse_record(&lying, with_chain), Record::Malformed);
    }

    /// A tracepoint sample with everything: chain, raw, user regs, user stack of which
    /// `dyn_size` bytes are valid.
    fn stack_sample(id: u64, stack: &[u8], dyn_size: u64) -> Vec<u8> {
        sample_head(id, 10, 11, 500, 1)
            .u64(3)
            .u64(PERF_CONTEXT_KERNEL)
            .u64(0xffff_ffff_8100_0000)
            .u64(PERF_CONTEXT_USER)
            .u32(4)
            .bytes(b"abcd")
            .u64(2) // PERF_SAMPLE_REGS_ABI_64
            .u64(0x7ffd_0000_0100) // bp
            .u64(0x7ffd_0000_0000) // sp
            .u64(0x7f00_0000_1234) // ip
            .u64(stack.len() as u64)
            .bytes(stack)
            .u64(dyn_size)
            .finish()
    }

    #[test]
    fn parses_user_regs_and_the_valid_part_of_the_stack() {
        let stack: Vec<u8> = (0..64).collect();
        let bytes = stack_sample(3, &stack, 40);
        let Record::Sample(s) = parse_record(&bytes, SAMPLE_TYPE | STACK_SAMPLE_TYPE) else {
            panic!("not a sample");
        };
        assert_eq!(s.raw, b"abcd");
        assert_eq!(s.callchain.len(), 3);
        assert_eq!(
            s.user_regs,
            Some(UserRegs {
                ip: 0x7f00_0000_1234,
                sp: 0x7ffd_0000_0000,
                bp: 0x7ffd_0000_0100
            })
        );
        assert_eq!(s.user_stack, &stack[..40]);
        // A dyn_size beyond the copied size is capped.
        let capped = stack_sample(3, &stack, 1000);
        let Record::Sample(s) = parse_record(&capped, SAMPLE_TYPE | STACK_SAMPLE_TYPE) else {
            panic!("not a sample");
        };
        assert_eq!(s.user_stack.len(), 64);
        // Cut anywhere inside the stack part: malformed, never a panic or a short read.
        for cut in [bytes.len() - 1, bytes.len() - 8, bytes.len() - 40, 100] {
            assert_eq!(
                parse_record(&bytes[..cut], SAMPLE_TYPE | STACK_SAMPLE_TYPE),
                Record::Malformed,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_kernel_thread_has_no_user_regs_nor_stack() {
        // ABI_NONE and a zero stack size, which has no data nor dyn_size after it.
        let bytes = sample_head(5, 0, 0, 9, 0)
            .u64(0)
            .u32(4)
            .bytes(b"wxyz")
            .u64(0)
            .u64(0)
            .finish();
        let Record::Sample(s) = parse_record(&bytes, SAMPLE_TYPE | STACK_SAMPLE_TYPE) else {
            panic!("not a sample");
        };
        assert_eq!(
            (s.user_regs, s.user_stack, s.raw),
            (None, &[][..], &b"wxyz"[..])
        );
    }

    #[test]
    fn each_sample_is_parsed_with_its_own_events_type() {
        // Two events in one ring: a plain tracepoint (id 1) and a CPU-clock sampler (id 2)
        // with stacks but no raw payload.
        let plain = sample_bytes(0, None, b"tp");
        let mut plain = plain;
        plain[8..16].copy_from_slice(&1u64.to_ne_bytes());
        let clock = sample_head(2, 10, 11, 600, 1)
            .u64(2)
            .u64(PERF_CONTEXT_USER)
            .u64(0x40_1000)
            .u64(2)
            .u64(1)
            .u64(2)
            .u64(0x40_1000)
            .u64(8)
            .u64(0xdead)
            .u64(8)
            .finish();
        let types = |id| match id {
            1 => Some(SAMPLE_TYPE),
            2 => Some(SAMPLE_TYPE & !PERF_SAMPLE_RAW | STACK_SAMPLE_TYPE),
            _ => None,
        };
        let Record::Sample(s) = parse_record_with(&plain, types) else {
            panic!()
        };
        assert_eq!((&s.raw[..2], s.user_regs), (&b"tp"[..], None));
        let Record::Sample(s) = parse_record_with(&clock, types) else {
            panic!()
        };
        assert_eq!(s.raw, b"");
        assert_eq!(s.user_regs.unwrap().ip, 0x40_1000);
        assert_eq!(s.user_stack, 0xdeadu64.to_ne_bytes());
        let mut other = clock.clone();
        other[8..16].copy_from_slice(&3u64.to_ne_bytes());
        assert_eq!(
            parse_record_with(&other, types),
            Record::UnknownId { id: 3 }
        );
    }

    pub(crate) fn mmap2_bytes(pid: u32, addr: u64, len: u64, pgoff: u64, name: &str) -> Vec<u8> {
        RecordBuilder::new(PERF_RECORD_MMAP2, 2)
            .u32(pid)
            .u32(pid + 1)
            .u64(addr)
            .u64(len)
            .u64(pgoff)
            .u32(8)
            .u32(1)
            .u64(1234)
            .u64(0)
            .u32(5) // PROT_READ | PROT_EXEC
            .u32(2) // MAP_PRIVATE
            .bytes(name.as_bytes())
            .u32(0)
            .pad8()
            .sample_id(pid, 777, 1, 42)
            .finish()
    }

    #[test]
    fn parses_mmap2_and_comm_with_their_sample_id() {
        let bytes = mmap2_bytes(50, 0x7f00_0000_0000, 0x2000, 0x1000, "/usr/lib/libc.so.6");
        assert_eq!(bytes.len() % 8, 0);
        assert_eq!(
            parse_record(&bytes, SAMPLE_TYPE),
            Record::Mmap2(Mmap2 {
                pid: 50,
                tid: 51,
                addr: 0x7f00_0000_0000,
                len: 0x2000,
                pgoff: 0x1000,
                prot: 5,
                filename: b"/usr/lib/libc.so.6",
                time: 777,
                cpu: 1,
            })
        );
        assert_eq!(
            parse_record(&bytes[..bytes.len() - 40], SAMPLE_TYPE),
            Record::Malformed
        );
        let comm = |misc| {
            RecordBuilder::new(PERF_RECORD_COMM, misc)
                .u32(60)
                .u32(61)
                .bytes(b"worker\0")
                .pad8()
                .sample_id(60, 888, 0, 42)
                .finish()
        };
        let exec = comm(PERF_RECORD_MISC_COMM_EXEC);
        let Record::Comm(c) = parse_record(&exec, SAMPLE_TYPE) else {
            panic!()
        };
        assert_eq!(
            (c.pid, c.tid, c.comm, c.exec, c.time),
            (60, 61, &b"worker"[..], true, 888)
        );
        let renamed = comm(0);
        let Record::Comm(c) = parse_record(&renamed, SAMPLE_TYPE) else {
            panic!()
        };
        assert!(!c.exec);
    }
}
