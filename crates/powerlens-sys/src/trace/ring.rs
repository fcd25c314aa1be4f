//! One perf ring buffer, mmap'd from an event descriptor, handing out its records as
//! byte slices (decoded by [`crate::trace::records`]).
//!
//! Layout (linux/perf_event.h): one metadata page (`struct perf_event_mmap_page`) followed
//! by 2^n data pages. The kernel writes records at `data_head` and never past `data_tail`,
//! which we advance after reading; when the buffer is full it drops records and later
//! writes a `PERF_RECORD_LOST` saying how many. Records are 8-byte aligned and may wrap
//! around the end of the data area.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

// The record types lived here before they had their own module; these paths stay valid.
pub use crate::trace::records::{
    parse_record, Callchain, Frame, Record, Sample, PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER,
    SAMPLE_TYPE,
};

/// Offsets in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

const HEADER_LEN: usize = 8;

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

    /// Appends every byte written since the last call to `out`, in ring order and
    /// unwrapped, and frees the space at once: a reader that parses later, in another
    /// thread, holds the ring no longer than a copy takes. The bytes are whole records;
    /// walk them with [`records_in`]. Returns how many bytes were copied.
    pub fn copy_out(&mut self, out: &mut Vec<u8>) -> usize {
        // Acquire/Release as in `read`: the copy happens after the records are visible,
        // and before the kernel may reuse their space.
        let head = self.head().load(Ordering::Acquire);
        let tail = self.tail().load(Ordering::Relaxed);
        let len = head.wrapping_sub(tail);
        if len > self.data_size as u64 {
            // Impossible for a ring the kernel keeps: skip rather than read out of bounds.
            self.tail().store(head, Ordering::Release);
            return 0;
        }
        let len = len as usize;
        // Copied straight into spare capacity, not into zeroes `resize` wrote first: in a
        // debug build `resize` writes a byte at a time, and a copier that took ~10 ms per
        // MiB that way fell behind a ping-pong filling its ring at ~70 MB/s (the test
        // suite's recordings lost thousands of records).
        out.reserve(len);
        let at = (tail % self.data_size as u64) as usize;
        let spare = &mut out.spare_capacity_mut()[..len];
        // SAFETY: `data` points to `data_size` mapped bytes and `[tail, head)` is not
        // written by the kernel until data_tail moves; copy_wrapping stays within them and
        // writes all `len` bytes of `spare`, which `set_len` then counts as initialised.
        unsafe {
            copy_wrapping(
                self.data,
                self.data_size,
                at,
                spare.as_mut_ptr().cast(),
                len,
            );
            out.set_len(out.len() + len);
        }
        self.tail().store(head, Ordering::Release);
        len
    }
}

/// Passes each record of `bytes` (whole records, as [`Ring::copy_out`] copied them) to
/// `f`; a record with an impossible size ends the walk. Returns how many.
pub fn records_in(bytes: &[u8], f: impl FnMut(&[u8])) -> usize {
    if bytes.is_empty() {
        return 0;
    }
    let mut scratch = Vec::new();
    // SAFETY: `bytes` is a live slice nothing writes while we read it; a linear buffer is
    // a ring that never wraps.
    unsafe {
        walk(
            bytes.as_ptr(),
            bytes.len(),
            0,
            bytes.len() as u64,
            &mut scratch,
            f,
        )
        .1
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
        copy_wrapping(data, size, start, header.as_mut_ptr(), header.len());
        let len = u16::from_ne_bytes([header[6], header[7]]) as usize;
        if len < HEADER_LEN || len as u64 > head.wrapping_sub(tail) {
            return (head, count);
        }
        if start + len <= size {
            f(std::slice::from_raw_parts(data.add(start), len));
        } else {
            scratch.resize(len, 0);
            copy_wrapping(data, size, start, scratch.as_mut_ptr(), len);
            f(scratch);
        }
        tail = tail.wrapping_add(len as u64);
        count += 1;
    }
    (tail, count)
}

/// Copies `len` bytes to `out` starting at `start` of the `size` bytes at `data`,
/// continuing at 0 past the end. `out` must have room for `len` bytes.
unsafe fn copy_wrapping(data: *const u8, size: usize, start: usize, out: *mut u8, len: usize) {
    let first = len.min(size - start);
    std::ptr::copy_nonoverlapping(data.add(start), out, first);
    std::ptr::copy_nonoverlapping(data, out.add(first), len - first);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::records::tests::{lost_bytes, sample_bytes};

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

    /// Copied out, the records come back whole from the linear copy, wherever they
    /// wrapped in the ring.
    #[test]
    fn records_copied_out_walk_as_in_the_ring() {
        let records = vec![
            sample_bytes(10, None, b"first"),
            lost_bytes(3),
            sample_bytes(12, None, b"third, a little longer"),
        ];
        for start in (0..256u64).step_by(8).map(|s| s + 256) {
            let (area, head) = ring_with(256, start, &records);
            let mut copy = Vec::new();
            let at = (start % 256) as usize;
            copy.resize((head - start) as usize, 0);
            // SAFETY: `area` is a live 256-byte buffer; the copy stays within it.
            unsafe { copy_wrapping(area.as_ptr(), 256, at, copy.as_mut_ptr(), copy.len()) };
            let mut out = Vec::new();
            assert_eq!(records_in(&copy, |r| out.push(r.to_vec())), 3);
            assert_eq!(out, records, "start {start}");
        }
        assert_eq!(records_in(&[], |_| unreachable!()), 0);
    }
}
