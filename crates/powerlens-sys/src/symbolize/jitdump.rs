//! The jitdump format (`jit-PID.dump`: Node's `--perf-prof`, Java agents, .NET's
//! `DOTNET_PerfMapEnabled`), and lookups that name an address *at a time*.
//!
//! A perf map lists code, not when it lived: code a runtime moved (V8 compacts its code
//! space) or freed and whose addresses it reused is named by whatever the map lists last.
//! jitdump dates every piece of code: a `JIT_CODE_LOAD` record when the code appears, a
//! `JIT_CODE_MOVE` when it moves, `JIT_CODE_CLOSE` when the runtime stops. Code ends where a
//! later load covers its addresses (they were freed and reused), where it moves away, and
//! at the close. A sample's address is then named by the code live at the sample's time.
//!
//! Not used by `record` yet. Its frames are (module, offset) pairs shared by every sample
//! of a stack, so a name that depends on the time needs the frame looked up while the
//! sample's time is known: in the recorder, as the samples are drained. Tried: Node 20
//! buffers its jitdump writes (`--perf-prof`), so the file read during the recording
//! lacks most of the code the samples ran (1.44 s of 1.50 s stayed unnamed), and the
//! names would have to come at the end from per-sample times the stack table does not
//! keep. [`Jitdump::feed`] reads a growing file incrementally for that work.
//!
//! The format is perf's (tools/perf/Documentation/jitdump-specification.txt, version 1):
//! a 40-byte file header (`JiTD` magic in the writer's byte order, version, header size,
//! ELF machine, pad, pid, timestamp, flags), then records of a 16-byte header (id, total
//! size, timestamp) and a body. Timestamps are CLOCK_MONOTONIC nanoseconds, the clock of
//! powerlens's trace, unless flag bit 0 says they are the CPU's time-stamp counter.

use std::collections::HashMap;

/// `JiTD` as a little-endian u32, read in this machine's byte order.
const MAGIC: u32 = 0x4A69_5444;
const FILE_HEADER_BYTES: usize = 40;
const RECORD_HEADER_BYTES: usize = 16;
/// Flag bit 0: timestamps are the CPU's time-stamp counter, not CLOCK_MONOTONIC.
const FLAG_ARCH_TIMESTAMP: u64 = 1;

const JIT_CODE_LOAD: u32 = 0;
const JIT_CODE_MOVE: u32 = 1;
const JIT_CODE_CLOSE: u32 = 3;

/// Why a jitdump file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JitdumpError {
    #[error("not a jitdump file (it does not start with the JiTD magic)")]
    NotJitdump,
    #[error("the jitdump file was written on a machine of the other byte order; read it there")]
    OtherByteOrder,
    #[error("the jitdump file's header is cut short ({0} bytes)")]
    ShortHeader(usize),
    #[error("the jitdump file's timestamps are the CPU's time-stamp counter, not CLOCK_MONOTONIC: run the runtime with its monotonic-clock option (perf's `-k 1`)")]
    ArchTimestamps,
}

/// One piece of code for a while: `[start, start + size)` named `name` from `from_ns`
/// until `until_ns` (exclusive; `u64::MAX` while it lives).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSpan {
    /// The span's number in the order the file made them (a load, or a move, makes one):
    /// the same in every parse of a file that grew since, which only appends.
    pub id: u32,
    pub start: u64,
    pub size: u64,
    pub name: String,
    pub from_ns: u64,
    pub until_ns: u64,
}

impl CodeSpan {
    fn covers(&self, addr: u64, time_ns: u64) -> bool {
        addr >= self.start
            && addr - self.start < self.size
            && (self.from_ns..self.until_ns).contains(&time_ns)
    }

    fn overlaps(&self, start: u64, size: u64) -> bool {
        self.start < start.saturating_add(size) && start < self.start.saturating_add(self.size)
    }
}

/// A parsed jitdump: every piece of code with the time it was live.
#[derive(Debug, Clone, Default)]
pub struct Jitdump {
    pub pid: u32,
    /// By start address.
    spans: Vec<CodeSpan>,
    /// By span id: its index in `spans`.
    positions: Vec<u32>,
    widest: u64,
    /// Each code index's latest span id (moves name code by its index).
    live: HashMap<u64, u32>,
    /// Bytes of the file parsed: the header and every whole record so far.
    consumed: usize,
    /// Bytes at the end that did not make a whole record (a runtime killed mid-write, or
    /// one still writing).
    pub truncated_bytes: usize,
    /// Records of kinds not used here (debug info, unwinding info, unknown ids).
    pub skipped_records: usize,
}

impl Jitdump {
    /// Parses a whole file.
    pub fn parse(data: &[u8]) -> Result<Jitdump, JitdumpError> {
        let mut dump = Jitdump::header(data)?;
        dump.feed(&data[dump.consumed..]);
        Ok(dump)
    }

    /// The file header, before any record.
    fn header(data: &[u8]) -> Result<Jitdump, JitdumpError> {
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(data.get(at..at + 4)?.try_into().ok()?))
        };
        match u32_at(0) {
            Some(MAGIC) => {}
            Some(m) if m == MAGIC.swap_bytes() => return Err(JitdumpError::OtherByteOrder),
            _ if data.len() < 4 => return Err(JitdumpError::ShortHeader(data.len())),
            _ => return Err(JitdumpError::NotJitdump),
        }
        let short = JitdumpError::ShortHeader(data.len());
        let header_bytes = u32_at(8)
            .map(|n| n as usize)
            .filter(|&n| n >= FILE_HEADER_BYTES && n <= data.len())
            .ok_or(short.clone())?;
        let pid = u32_at(20).ok_or(short.clone())?;
        let flags = data
            .get(32..40)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
            .ok_or(short)?;
        if flags & FLAG_ARCH_TIMESTAMP != 0 {
            return Err(JitdumpError::ArchTimestamps);
        }
        Ok(Jitdump {
            pid,
            consumed: header_bytes,
            ..Jitdump::default()
        })
    }

    /// How many bytes of the file are parsed: the next [`Jitdump::feed`] takes the bytes
    /// from there.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Applies the whole records at the start of `more`, the file's bytes from
    /// [`Jitdump::consumed`] on: a runtime appends to its jitdump while it runs, and the
    /// recorder reads only what it added.
    pub fn feed(&mut self, more: &[u8]) {
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(more.get(at..at + 4)?.try_into().ok()?))
        };
        let mut at = 0;
        while at < more.len() {
            let (Some(id), Some(total)) = (u32_at(at), u32_at(at + 4)) else {
                break;
            };
            let total = total as usize;
            if total < RECORD_HEADER_BYTES || at + total > more.len() {
                break;
            }
            let time_ns = u64::from_ne_bytes(more[at + 8..at + 16].try_into().unwrap());
            let body = &more[at + RECORD_HEADER_BYTES..at + total];
            if !self.apply(id, time_ns, body) {
                self.skipped_records += 1;
            }
            at += total;
        }
        self.consumed += at;
        self.truncated_bytes = more.len() - at;
        if at > 0 {
            self.spans.sort_by_key(|s| (s.start, s.from_ns));
            for (i, s) in self.spans.iter().enumerate() {
                self.positions[s.id as usize] = i as u32;
            }
        }
    }

    /// Applies one record's `body` (after its header); false for a record not used (of
    /// another kind, cut short, or moving code this file never loaded).
    fn apply(&mut self, id: u32, time_ns: u64, body: &[u8]) -> bool {
        let field = |offset: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(
                body.get(offset..offset + 8)?.try_into().ok()?,
            ))
        };
        match id {
            // pid u32, tid u32, vma, code_addr, code_size, code_index, name\0, code.
            JIT_CODE_LOAD => {
                let (Some(addr), Some(size), Some(index)) = (field(16), field(24), field(32))
                else {
                    return false;
                };
                let name = &body[40.min(body.len())..];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                let name = String::from_utf8_lossy(name).into_owned();
                self.start_span(index, addr, size, name, time_ns);
                true
            }
            // pid u32, tid u32, vma, old_code_addr, new_code_addr, code_size, code_index.
            JIT_CODE_MOVE => {
                let (Some(new_addr), Some(size), Some(index)) = (field(24), field(32), field(40))
                else {
                    return false;
                };
                let Some(&span) = self.live.get(&index) else {
                    // A move of code loaded before the file began: nothing to name.
                    return false;
                };
                let old = &mut self.spans[self.positions[span as usize] as usize];
                if old.until_ns != u64::MAX {
                    return false;
                }
                old.until_ns = time_ns;
                let name = old.name.clone();
                self.start_span(index, new_addr, size, name, time_ns);
                true
            }
            JIT_CODE_CLOSE => {
                for s in &mut self.spans {
                    s.until_ns = s.until_ns.min(time_ns);
                }
                true
            }
            _ => false,
        }
    }

    /// Code `index` named `name` at `[start, start + size)` from `time_ns`, replacing the
    /// live code it overlaps.
    fn start_span(&mut self, index: u64, start: u64, size: u64, name: String, time_ns: u64) {
        self.end_overlapping(start, size, time_ns);
        let id = self.positions.len() as u32;
        self.positions.push(self.spans.len() as u32);
        self.spans.push(CodeSpan {
            id,
            start,
            size,
            name,
            from_ns: time_ns,
            until_ns: u64::MAX,
        });
        self.widest = self.widest.max(size);
        self.live.insert(index, id);
    }

    /// Ends, at `time_ns`, the live code that `[start, start + size)` now replaces.
    fn end_overlapping(&mut self, start: u64, size: u64, time_ns: u64) {
        for s in &mut self.spans {
            if s.until_ns == u64::MAX && s.overlaps(start, size) {
                s.until_ns = time_ns;
            }
        }
    }

    pub fn spans(&self) -> &[CodeSpan] {
        &self.spans
    }

    /// The name of the code at `addr` at `time_ns` (CLOCK_MONOTONIC), if any was live.
    pub fn lookup(&self, addr: u64, time_ns: u64) -> Option<&str> {
        self.code_at(addr, time_ns).map(|s| s.name.as_str())
    }

    /// The code at `addr` at `time_ns`, if any was live.
    pub fn code_at(&self, addr: u64, time_ns: u64) -> Option<&CodeSpan> {
        let end = self.spans.partition_point(|s| s.start <= addr);
        let lowest = addr.saturating_sub(self.widest);
        self.spans[..end]
            .iter()
            .rev()
            .take_while(|s| s.start >= lowest)
            .find(|s| s.covers(addr, time_ns))
    }

    /// The span numbered `id` ([`CodeSpan::id`]).
    pub fn by_id(&self, id: u32) -> Option<&CodeSpan> {
        let i = *self.positions.get(id as usize)?;
        self.spans.get(i as usize)
    }
}

/// Whether `path` names a jitdump file (`jit-PID.dump`), which runtimes map executable so
/// that profilers find it in the process's mappings.
pub fn is_jitdump(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.strip_prefix("jit-")
        .and_then(|rest| rest.strip_suffix(".dump"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_header(pid: u32, flags: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(MAGIC.to_ne_bytes());
        b.extend(1u32.to_ne_bytes()); // version
        b.extend((FILE_HEADER_BYTES as u32).to_ne_bytes());
        b.extend(62u32.to_ne_bytes()); // EM_X86_64
        b.extend(0u32.to_ne_bytes()); // pad
        b.extend(pid.to_ne_bytes());
        b.extend(5u64.to_ne_bytes()); // timestamp
        b.extend(flags.to_ne_bytes());
        assert_eq!(b.len(), FILE_HEADER_BYTES);
        b
    }

    fn record(out: &mut Vec<u8>, id: u32, time_ns: u64, body: &[u8]) {
        out.extend(id.to_ne_bytes());
        out.extend(((RECORD_HEADER_BYTES + body.len()) as u32).to_ne_bytes());
        out.extend(time_ns.to_ne_bytes());
        out.extend(body);
    }

    fn load(out: &mut Vec<u8>, time_ns: u64, addr: u64, size: u64, index: u64, name: &str) {
        let mut body = Vec::new();
        body.extend(7u32.to_ne_bytes()); // pid
        body.extend(8u32.to_ne_bytes()); // tid
        body.extend(addr.to_ne_bytes()); // vma
        body.extend(addr.to_ne_bytes()); // code_addr
        body.extend(size.to_ne_bytes());
        body.extend(index.to_ne_bytes());
        body.extend(name.as_bytes());
        body.push(0);
        body.extend(std::iter::repeat_n(0x90, size as usize)); // the code (nops)
        record(out, JIT_CODE_LOAD, time_ns, &body);
    }

    fn moved(out: &mut Vec<u8>, time_ns: u64, old: u64, new: u64, size: u64, index: u64) {
        let mut body = Vec::new();
        body.extend(7u32.to_ne_bytes());
        body.extend(8u32.to_ne_bytes());
        body.extend(new.to_ne_bytes()); // vma
        body.extend(old.to_ne_bytes());
        body.extend(new.to_ne_bytes());
        body.extend(size.to_ne_bytes());
        body.extend(index.to_ne_bytes());
        record(out, JIT_CODE_MOVE, time_ns, &body);
    }

    /// alpha is loaded at 0x1000 (t 100) and moved to 0x3000 (t 200); its old space is
    /// reused by gamma (t 300); beta lives at 0x2000 from t 150; the runtime closes at t 400.
    fn fixture() -> Vec<u8> {
        let mut b = file_header(7, 0);
        load(&mut b, 100, 0x1000, 0x100, 1, "JS:*alpha a.js:1:1");
        load(&mut b, 150, 0x2000, 0x80, 2, "JS:*beta a.js:5:1");
        moved(&mut b, 200, 0x1000, 0x3000, 0x100, 1);
        load(&mut b, 300, 0x1000, 0x40, 3, "JS:*gamma a.js:9:1");
        record(&mut b, 2, 310, &[0; 24]); // debug info: skipped
        record(&mut b, JIT_CODE_CLOSE, 400, &[]);
        b
    }

    #[test]
    fn each_sample_is_named_by_the_code_live_at_its_time() {
        let dump = Jitdump::parse(&fixture()).unwrap();
        assert_eq!(dump.pid, 7);
        assert_eq!((dump.truncated_bytes, dump.skipped_records), (0, 1));
        let cases: [(u64, u64, Option<&str>); 11] = [
            (0x1010, 50, None), // before any load
            (0x1010, 100, Some("JS:*alpha a.js:1:1")),
            (0x10ff, 199, Some("JS:*alpha a.js:1:1")),
            (0x1010, 200, None), // moved away: the old space holds nothing
            (0x3010, 199, None), // not there yet
            (0x3010, 250, Some("JS:*alpha a.js:1:1")),
            (0x1010, 300, Some("JS:*gamma a.js:9:1")), // freed, reused
            (0x1050, 350, None),                       // past gamma's 0x40 bytes
            (0x2000, 399, Some("JS:*beta a.js:5:1")),
            (0x2000, 400, None), // the runtime closed
            (0x3010, 500, None),
        ];
        for (addr, t, name) in cases {
            assert_eq!(dump.lookup(addr, t), name, "{addr:#x} at {t}");
        }
        assert_eq!(dump.spans().len(), 4);
        // Numbered in the file's order: alpha, beta, alpha moved, gamma.
        let names: Vec<_> = (0..4)
            .map(|id| dump.by_id(id).unwrap().name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "JS:*alpha a.js:1:1",
                "JS:*beta a.js:5:1",
                "JS:*alpha a.js:1:1",
                "JS:*gamma a.js:9:1"
            ]
        );
        assert_eq!(dump.code_at(0x3010, 250).unwrap().id, 2);
        assert_eq!(dump.by_id(4), None);
        // A file read while the runtime still wrote it (before the move) numbers the same.
        let mut early = file_header(7, 0);
        load(&mut early, 100, 0x1000, 0x100, 1, "JS:*alpha a.js:1:1");
        load(&mut early, 150, 0x2000, 0x80, 2, "JS:*beta a.js:5:1");
        let early = Jitdump::parse(&early).unwrap();
        assert_eq!(early.code_at(0x1010, 150).unwrap().id, 0);
        assert_eq!(early.code_at(0x2010, 150).unwrap().id, 1);
        assert!(is_jitdump("/srv/app/jit-4242.dump"));
        assert!(!is_jitdump("/srv/app/jit-.dump") && !is_jitdump("/tmp/perf-1.map"));
    }

    /// A file read while the runtime appends to it, in pieces that end anywhere (inside
    /// a record too), names the same code as the whole file parsed at once.
    #[test]
    fn a_growing_file_fed_in_pieces_reads_as_the_whole() {
        let data = fixture();
        let whole = Jitdump::parse(&data).unwrap();
        for cut in [
            FILE_HEADER_BYTES + 7,
            FILE_HEADER_BYTES + 300,
            data.len() - 20,
        ] {
            let mut dump = Jitdump::parse(&data[..cut]).unwrap();
            assert_eq!(dump.consumed() + dump.truncated_bytes, cut);
            let from = dump.consumed();
            dump.feed(&data[from..]);
            assert_eq!(dump.consumed(), data.len(), "cut at {cut}");
            assert_eq!(dump.spans(), whole.spans(), "cut at {cut}");
            for (addr, t) in [(0x1010, 150), (0x3010, 250), (0x1010, 350), (0x2000, 400)] {
                assert_eq!(dump.lookup(addr, t), whole.lookup(addr, t), "cut at {cut}");
            }
        }
    }

    #[test]
    fn a_record_cut_short_ends_the_file_and_bad_files_are_errors() {
        let mut data = fixture();
        let whole = data.len();
        // The close (16 bytes) gone and the debug-info record before it cut short.
        data.truncate(whole - 20);
        let dump = Jitdump::parse(&data).unwrap();
        assert!(dump.truncated_bytes > 0);
        // Without the close, beta lives on.
        assert_eq!(dump.lookup(0x2000, 10_000), Some("JS:*beta a.js:5:1"));
        assert_eq!(
            Jitdump::parse(b"perf map, not a dump").unwrap_err(),
            JitdumpError::NotJitdump
        );
        let mut swapped = fixture();
        swapped[..4].reverse();
        assert_eq!(
            Jitdump::parse(&swapped).unwrap_err(),
            JitdumpError::OtherByteOrder
        );
        assert_eq!(
            Jitdump::parse(&fixture()[..30]).unwrap_err(),
            JitdumpError::ShortHeader(30)
        );
        let mut tsc = file_header(7, FLAG_ARCH_TIMESTAMP);
        load(&mut tsc, 1, 0x1000, 1, 1, "x");
        assert_eq!(
            Jitdump::parse(&tsc).unwrap_err(),
            JitdumpError::ArchTimestamps
        );
    }
}
