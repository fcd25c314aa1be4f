//! One perf ring buffer, mmap'd from an event descriptor, and the records in it.
//!
//! Layout (linux/perf_event.h): one metadata page (`struct perf_event_mmap_page`) followed
//! by 2^n data pages. The kernel writes records at `data_head` and never past `data_tail`,
//! which we advance after reading; when the buffer is full it drops records and later
//! writes a `PERF_RECORD_LOST` saying how many. Records are 8-byte aligned and may wrap
//! around the end of the data area.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::perf::{
    PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_PERIOD,
    PERF_SAMPLE_RAW, PERF_SAMPLE_TID, PERF_SAMPLE_TIME,
};

/// What every sample of the collector holds, in the kernel's order: identifier (which
/// event, when several share a ring), pid/tid, time, cpu, period, raw tracepoint payload;
/// with [`PERF_SAMPLE_CALLCHAIN`] added, a call chain comes between period and raw.
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

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;

/// Offsets in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

const HEADER_LEN: usize = 8;

/// One decoded record of the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    /// The kernel dropped `lost` records because the buffer was full.
    Lost {
        lost: u64,
    },
    /// A record type the collector does not ask for (throttling, …).
    Other {
        kind: u32,
    },
    /// Shorter than its type requires: counted as lost by the collector.
    Malformed,
}

/// A `PERF_RECORD_SAMPLE` of [`SAMPLE_TYPE`].
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
    /// that have one (sched_stat_runtime's nanoseconds); 1 without PERF_SAMPLE_PERIOD.
    pub period: u64,
    /// The tracepoint payload, including its trailing alignment padding.
    pub raw: &'a [u8],
    /// Empty unless the sample type has [`PERF_SAMPLE_CALLCHAIN`].
    pub callchain: Callchain<'a>,
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
}

/// Decodes one whole record (header included), as [`Ring::read`] passes it, for events
/// opened with `sample_type` ([`SAMPLE_TYPE`], optionally with [`PERF_SAMPLE_CALLCHAIN`]).
pub fn parse_record(bytes: &[u8], sample_type: u64) -> Record<'_> {
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
    };
    let Some(kind) = u32_at(0) else {
        return Record::Malformed;
    };
    match kind {
        // struct { header; u64 id; u64 lost; }
        PERF_RECORD_LOST => match u64_at(16) {
            Some(lost) => Record::Lost { lost },
            None => Record::Malformed,
        },
        // struct { header; u64 identifier; u32 pid, tid; u64 time; u32 cpu, res;
        // [u64 nr; u64 ips[nr];] u32 size; char data[size]; }
        PERF_RECORD_SAMPLE => {
            let (Some(id), Some(pid), Some(tid), Some(time), Some(cpu)) =
                (u64_at(8), u32_at(16), u32_at(20), u64_at(24), u32_at(32))
            else {
                return Record::Malformed;
            };
            let mut at = 40;
            let mut period = 1;
            if sample_type & PERF_SAMPLE_PERIOD != 0 {
                let Some(p) = u64_at(at) else {
                    return Record::Malformed;
                };
                period = p;
                at += 8;
            }
            let mut callchain = Callchain::default();
            if sample_type & PERF_SAMPLE_CALLCHAIN != 0 {
                let ips = u64_at(at)
                    .and_then(|nr| usize::try_from(nr).ok()?.checked_mul(8))
                    .and_then(|len| bytes.get(at + 8..(at + 8).checked_add(len)?));
                let Some(ips) = ips else {
                    return Record::Malformed;
                };
                callchain = Callchain { bytes: ips };
                at += 8 + ips.len();
            }
            let raw = u32_at(at).and_then(|size| bytes.get(at + 4..at + 4 + size as usize));
            match raw {
                Some(raw) => Record::Sample(Sample {
                    id,
                    pid,
                    tid,
                    time,
                    cpu,
                    period,
                    raw,
                    callchain,
                }),
                None => Record::Malformed,
            }
        }
        kind => Record::Other { kind },
    }
}

/// An mmap'd ring buffer, unmapped on drop. Does not own the descriptor: keep the event
/// open as long as the ring.
#[derive(Debug)]
pub struct Ring {
    base: *mut u8,
    map_len: usize,
    data: *const u8,
    data_size: usize,
    /// Copy of a record that wraps around the end, so callers always get one slice.
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value alone; the kernel is the only other writer
// and synchronises through data_head/data_tail as below.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of `fd` with `data_pages` data pages (a power of two).
    pub fn map(fd: BorrowedFd<'_>, data_pages: usize) -> io::Result<Ring> {
        assert!(
            data_pages.is_power_of_two(),
            "data pages must be a power of two"
        );
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let map_len = page * (1 + data_pages);
        // SAFETY: a fresh shared mapping of a perf descriptor; PROT_WRITE is what tells the
        // kernel that we advance data_tail, so it stops instead of overwriting unread data.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base.cast::<u8>();
        // SAFETY: the metadata page is mapped and these are plain u64 fields of it; kernels
        // before 4.1 leave data_offset/data_size zero, meaning "right after the first page".
        let (offset, size) = unsafe {
            (
                (base.add(DATA_OFFSET) as *const u64).read_volatile() as usize,
                (base.add(DATA_SIZE) as *const u64).read_volatile() as usize,
            )
        };
        let (offset, size) = if size == 0 {
            (page, page * data_pages)
        } else {
            (offset, size)
        };
        Ok(Ring {
            base,
            map_len,
            // SAFETY: offset lies within the mapping (the kernel says so, or it is `page`).
            data: unsafe { base.add(offset) },
            data_size: size,
            scratch: Vec::new(),
        })
    }

    /// Size of the data area in bytes.
    pub fn data_size(&self) -> usize {
        self.data_size
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: data_head is an 8-aligned u64 in the mapped metadata page, which lives as
        // long as `self`; the kernel updates it concurrently, hence the atomic.
        unsafe { AtomicU64::from_ptr(self.base.add(DATA_HEAD).cast()) }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for `head`; only we write data_tail.
        unsafe { AtomicU64::from_ptr(self.base.add(DATA_TAIL).cast()) }
    }

    /// Passes every record written since the last call (header included, one contiguous
    /// slice even when it wraps) to `f`, then frees their space. Returns how many.
    pub fn read(&mut self, f: impl FnMut(&[u8])) -> usize {
        // Acquire pairs with the kernel's write barrier before it publishes data_head: every
        // record byte below head is visible to the reads that follow.
        let head = self.head().load(Ordering::Acquire);
        let tail = self.tail().load(Ordering::Relaxed);
        // SAFETY: `data` points to `data_size` mapped bytes; walk reads only [tail, head),
        // which the kernel does not touch until we move data_tail.
        let (new_tail, count) =
            unsafe { walk(self.data, self.data_size, tail, head, &mut self.scratch, f) };
        // Release: all our reads of the records happen before the kernel can see the space
        // as free and overwrite it.
        self.tail().store(new_tail, Ordering::Release);
        count
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; nothing borrows it any more.
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}

/// Walks the records in `[tail, head)` of a ring data area of `size` bytes (a power of
/// two); positions grow without bound and are taken modulo `size`. Returns the new tail
/// and the number of records. A record with an impossible size means a corrupt or
/// misunderstood ring: the rest is skipped rather than looping or reading out of bounds.
///
/// # Safety
/// `data` must point to `size` readable bytes, of which `[tail, head)` (modulo `size`) are
/// not written while this runs.
unsafe fn walk(
    data: *const u8,
    size: usize,
    mut tail: u64,
    head: u64,
    scratch: &mut Vec<u8>,
    mut f: impl FnMut(&[u8]),
) -> (u64, usize) {
    let mut count = 0;
    while head.wrapping_sub(tail) >= HEADER_LEN as u64 {
        let start = (tail % size as u64) as usize;
        let mut header = [0u8; HEADER_LEN];
        // SAFETY (all copies below): offsets are reduced modulo `size` and lengths split at
        // the end of the area, so every access stays within `size` bytes.
        copy_wrapping(data, size, start, &mut header);
        let len = u16::from_ne_bytes([header[6], header[7]]) as usize;
        if len < HEADER_LEN || len as u64 > head.wrapping_sub(tail) {
            return (head, count);
        }
        if start + len <= size {
            f(std::slice::from_raw_parts(data.add(start), len));
        } else {
            scratch.resize(len, 0);
            copy_wrapping(data, size, start, scratch);
            f(scratch);
        }
        tail = tail.wrapping_add(len as u64);
        count += 1;
    }
    (tail, count)
}

/// Copies `out.len()` bytes starting at `start`, continuing at 0 past the end.
unsafe fn copy_wrapping(data: *const u8, size: usize, start: usize, out: &mut [u8]) {
    let first = out.len().min(size - start);
    std::ptr::copy_nonoverlapping(data.add(start), out.as_mut_ptr(), first);
    std::ptr::copy_nonoverlapping(data, out.as_mut_ptr().add(first), out.len() - first);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample record of SAMPLE_TYPE (plus a call chain when `ips` is given) with
    /// `payload`, padded to 8 bytes as the kernel does.
    fn sample_bytes(tid: u32, ips: Option<&[u64]>, payload: &[u8]) -> Vec<u8> {
        let raw_len = (4 + payload.len()).next_multiple_of(8);
        let chain_len = ips.map_or(0, |ips| 8 + 8 * ips.len());
        let len = 48 + chain_len + raw_len;
        let mut b = Vec::with_capacity(len);
        b.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&(len as u16).to_ne_bytes());
        b.extend_from_slice(&(tid as u64 * 10).to_ne_bytes()); // identifier
        b.extend_from_slice(&(tid + 1000).to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&(tid as u64 * 100).to_ne_bytes()); // time
        b.extend_from_slice(&(tid % 4).to_ne_bytes()); // cpu
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&(tid as u64 + 5).to_ne_bytes()); // period
        if let Some(ips) = ips {
            b.extend_from_slice(&(ips.len() as u64).to_ne_bytes());
            ips.iter()
                .for_each(|ip| b.extend_from_slice(&ip.to_ne_bytes()));
        }
        b.extend_from_slice(&((raw_len - 4) as u32).to_ne_bytes());
        b.extend_from_slice(payload);
        b.resize(len, 0);
        b
    }

    fn lost_bytes(lost: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&PERF_RECORD_LOST.to_ne_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&24u16.to_ne_bytes());
        b.extend_from_slice(&7u64.to_ne_bytes());
        b.extend_from_slice(&lost.to_ne_bytes());
        b
    }

    /// Writes `records` into a ring of `size` bytes starting at position `start`, as the
    /// kernel would, and returns the area and the head.
    fn ring_with(size: usize, start: u64, records: &[Vec<u8>]) -> (Vec<u8>, u64) {
        let mut area = vec![0xAAu8; size];
        let mut pos = start;
        for r in records {
            for &byte in r {
                area[(pos % size as u64) as usize] = byte;
                pos += 1;
            }
        }
        (area, pos)
    }

    fn walk_all(area: &[u8], tail: u64, head: u64) -> (u64, Vec<Vec<u8>>) {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        // SAFETY: `area` is a live buffer of area.len() bytes that nothing else writes.
        let (tail, n) = unsafe {
            walk(area.as_ptr(), area.len(), tail, head, &mut scratch, |r| {
                out.push(r.to_vec())
            })
        };
        assert_eq!(n, out.len());
        (tail, out)
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
        chain.extend([PERF_CONTEXT_USER, 0x40_1000]);
        let bytes = sample_bytes(7, Some(&chain), b"payload");
        let Record::Sample(s) = parse_record(&bytes, with_chain) else {
            panic!("not a sample");
        };
        assert_eq!(&s.raw[..7], b"payload");
        assert_eq!(s.callchain.len(), 5);
        let frames: Vec<_> = s.callchain.frames().map(|f| (f.ip, f.user)).collect();
        assert_eq!(
            frames,
            [(ips[1], false), (ips[2], false), (0x40_1000, true)]
        );
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

    #[test]
    fn records_that_wrap_around_come_out_whole() {
        let records = vec![
            sample_bytes(10, None, b"first"),
            sample_bytes(
                11,
                Some(&[PERF_CONTEXT_KERNEL, 1, 2]),
                b"second, longer payload",
            ),
            lost_bytes(3),
            sample_bytes(12, None, b"third"),
        ];
        let total: usize = records.iter().map(Vec::len).sum();
        // Start at every 8-byte position of a 512-byte ring (positions already wrapped
        // several times), so each record straddles the end in some run.
        assert!(total <= 512);
        for start in (0..512u64).step_by(8).map(|s| s + 3 * 512) {
            let (area, head) = ring_with(512, start, &records);
            let (tail, out) = walk_all(&area, start, head);
            assert_eq!(tail, head);
            assert_eq!(out, records, "start {start}");
            assert_eq!(tail - start, total as u64);
        }
    }

    #[test]
    fn a_partial_or_corrupt_ring_stops_safely() {
        let records = vec![sample_bytes(10, None, b"x")];
        let (area, head) = ring_with(128, 0, &records);
        // A head in the middle of a record (never published by the kernel, but be safe).
        let (tail, out) = walk_all(&area, 0, head - 8);
        assert_eq!((tail, out.len()), (head - 8, 0));
        // A zero-sized header would loop forever: the rest is skipped instead.
        let zeros = vec![0u8; 128];
        assert_eq!(walk_all(&zeros, 0, 64), (64, vec![]));
        // Nothing to read.
        assert_eq!(walk_all(&area, head, head), (head, vec![]));
    }
}
