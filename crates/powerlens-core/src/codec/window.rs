//! The two ways the decoder reads an event's bytes: from the chunk, every read checked
//! against its end ([`super::Reader`]), or from a [`Window`] of bytes known to hold the
//! whole event, where reads need no such check. Almost every event of a chunk is read from
//! a window; the last few, near the chunk's end, the checked way.
//!
//! A window gives up on anything unusual — a bad tag, an index out of its table, a varint
//! of nine bytes or more — and the event is read again the checked way, which names the
//! error (or reads the long varint). So both ways decode the same bytes into the same
//! events and the same errors.

use super::{CodecError, STACK};
use crate::sched::event::StackId;

/// The bytes an event read from a window can span, its folded stack record included: the
/// tag, the time, CPU and context varints and up to three payload varints (a migration's
/// thread and two CPUs), then the stack record's tag, zero time delta and id, each varint
/// of at most eight bytes (a window leaves longer ones to the checked reader; a crafted
/// chunk can pad even a small value to eight). A varint is read as one 8-byte load from
/// where it starts, so these bytes are also the furthest any load reaches.
const MAX_EVENT_BYTES: usize = 1 + 6 * 8 + 2 + 8;

/// A window's length.
pub(super) const WINDOW: usize = 64;

const _: () = assert!(MAX_EVENT_BYTES <= WINDOW);

/// The bytes an event is read from, as the decoding of an event needs them.
pub(super) trait EventBytes {
    type Error;
    /// The error for `e`.
    fn error(&self, e: impl FnOnce() -> CodecError) -> Self::Error;
    /// Where the next byte is, in the chunk's body.
    fn pos(&self) -> usize;
    fn byte(&mut self) -> Result<u8, Self::Error>;
    /// An unsigned LEB128 varint.
    fn varint(&mut self) -> Result<u64, Self::Error>;
    /// The id of the stack record right after the event just read, consumed, when it is
    /// the stack recorded with that event: a stack record with no time delta and no CPU
    /// or context change (no flags), whose id names a stack (not [`super::ABSENT`]).
    fn folded_stack(&mut self) -> Result<Option<StackId>, Self::Error>;

    /// A varint that must fit 32 bits.
    #[inline(always)]
    fn varint_u32(&mut self) -> Result<u32, Self::Error> {
        let at = self.pos();
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| self.error(|| CodecError::Varint { at }))
    }

    /// A varint index into a chunk table, and the entry.
    #[inline(always)]
    fn index<'t, T>(&mut self, table: &'t [T], what: &'static str) -> Result<&'t T, Self::Error> {
        let at = self.pos();
        let i = self.varint()?;
        table.get(i as usize).ok_or_else(|| {
            self.error(|| CodecError::Index {
                what,
                index: i,
                len: table.len(),
                at,
            })
        })
    }
}

/// A window gave up on an event: read it again the checked way.
pub(super) struct Fallback;

/// [`WINDOW`] bytes of a chunk's body from an event's start.
pub(super) struct Window<'a> {
    bytes: &'a [u8; WINDOW],
    /// Where the window starts in the body, and the next byte in the window.
    start: usize,
    at: usize,
}

impl<'a> Window<'a> {
    /// The window at `pos` of `body`, when the body holds a whole one there.
    #[inline(always)]
    pub(super) fn at(body: &'a [u8], pos: usize) -> Option<Window<'a>> {
        let bytes = body.get(pos..pos.checked_add(WINDOW)?)?.try_into().ok()?;
        Some(Window {
            bytes,
            start: pos,
            at: 0,
        })
    }

    /// The little-endian word of the eight bytes from `at`.
    #[inline(always)]
    fn word(&self, at: usize) -> u64 {
        let bytes: [u8; 8] = self.bytes[at..at + 8].try_into().expect("eight bytes");
        u64::from_le_bytes(bytes)
    }

    /// The varint at `at` and its length, when it takes at most eight bytes.
    #[inline(always)]
    fn varint_at(&self, at: usize) -> Option<(u64, usize)> {
        let b0 = self.bytes[at];
        if b0 < 0x80 {
            return Some((b0 as u64, 1));
        }
        let word = self.word(at);
        // Two bytes: a time delta under 16 µs, a thread index past 127.
        if word & 0x8000 == 0 {
            return Some(((word & 0x7f) | ((word >> 1) & 0x3f80), 2));
        }
        // Three: a time delta under 2 ms.
        if word & 0x80_0000 == 0 {
            return Some((
                (word & 0x7f) | ((word >> 1) & 0x3f80) | ((word >> 2) & 0x1f_c000),
                3,
            ));
        }
        // A byte with its high bit clear ends the varint.
        let ends = !word & 0x8080_8080_8080_8080;
        if ends == 0 {
            return None;
        }
        let len = (ends.trailing_zeros() / 8 + 1) as usize;
        let bits = word & (u64::MAX >> (64 - 8 * len)) & 0x7f7f_7f7f_7f7f_7f7f;
        // The 7-bit groups gathered pairwise: into 14-bit, 28-bit, then 56-bit lanes.
        let bits = (bits & 0x007f_007f_007f_007f) | ((bits >> 1) & 0x3f80_3f80_3f80_3f80);
        let bits = (bits & 0x0000_3fff_0000_3fff) | ((bits >> 2) & 0x0fff_c000_0fff_c000);
        let bits = (bits & 0x0000_0000_0fff_ffff) | ((bits >> 4) & 0x00ff_ffff_f000_0000);
        Some((bits, len))
    }
}

impl EventBytes for Window<'_> {
    type Error = Fallback;

    #[inline(always)]
    fn error(&self, _: impl FnOnce() -> CodecError) -> Fallback {
        Fallback
    }

    #[inline(always)]
    fn pos(&self) -> usize {
        self.start + self.at
    }

    #[inline(always)]
    fn byte(&mut self) -> Result<u8, Fallback> {
        let b = self.bytes[self.at];
        self.at += 1;
        Ok(b)
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64, Fallback> {
        let (v, len) = self.varint_at(self.at).ok_or(Fallback)?;
        self.at += len;
        Ok(v)
    }

    #[inline(always)]
    fn folded_stack(&mut self) -> Result<Option<StackId>, Fallback> {
        if self.bytes[self.at..self.at + 2] != [STACK, 0] {
            return Ok(None);
        }
        // A long id is left to the checked reader, which decides whether it folds.
        let (id, len) = self.varint_at(self.at + 2).ok_or(Fallback)?;
        match u32::try_from(id) {
            Ok(stack) if stack != super::ABSENT => {
                self.at += 2 + len;
                Ok(Some(stack))
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every varint of up to eight bytes reads as the checked reader reads it, with its
    /// length; longer ones are left to the checked reader.
    #[test]
    fn window_varints_read_as_the_checked_reader_reads_them() {
        let mut values: Vec<u64> = vec![0, 1, 127, 128, 16_383, 16_384, (1 << 56) - 1, 1 << 56];
        values.extend((0..64).map(|b| 1u64 << b));
        values.extend((0..64).map(|b| (1u64 << b) - 1));
        values.push(!0xffff_ffff_8123_4560u64);
        values.push(!0xffff_8881_0abc_def0u64);
        values.push(u64::MAX);
        for v in values {
            let mut bytes = Vec::new();
            super::super::put_varint(&mut bytes, v);
            let len = bytes.len();
            bytes.resize(WINDOW, 0xAA);
            let w = Window::at(&bytes, 0).expect("a whole window");
            match w.varint_at(0) {
                Some(read) => assert_eq!(read, (v, len), "{v:#x}"),
                None => assert!(len > 8, "{v:#x} takes {len} bytes"),
            }
        }
    }

    #[test]
    fn a_window_needs_its_whole_length() {
        let body = [0u8; WINDOW + 3];
        assert!(Window::at(&body, 3).is_some());
        assert!(Window::at(&body, 4).is_none());
        assert!(Window::at(&body, usize::MAX).is_none());
    }
}
