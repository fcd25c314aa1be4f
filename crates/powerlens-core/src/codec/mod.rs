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

mod window;

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

static VALID_TAGS_V1: [bool; 256] = valid_tags(1);
static VALID_TAGS: [bool; 256] = valid_tags(CODEC_VERSION as u64);

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

mod decode;
mod encode;
#[cfg(test)]
mod tests;

pub use decode::*;
pub use encode::*;
