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
//! The format is perf's (tools/perf/Documentation/jitdump-specification.txt, version 1):
//! a 40-byte file header (`JiTD` magic in the writer's byte order, version, header size,
//! ELF machine, pad, pid, timestamp, flags), then records of a 16-byte header (id, total
//! size, timestamp) and a body. Timestamps are CLOCK_MONOTONIC nanoseconds, the clock of
//! powerlens's trace, unless flag bit 0 says they are the CPU's time-stamp counter.

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

/// While parsing: each code index's latest span (moves name code by its index).
#[derive(Default)]
struct LiveCode {
    by_index: std::collections::HashMap<u64, usize>,
}

/// A parsed jitdump: every piece of code with the time it was live.
#[derive(Debug, Clone, Default)]
pub struct Jitdump {
    pub pid: u32,
    /// By start address.
    spans: Vec<CodeSpan>,
    widest: u64,
    /// Bytes at the end that did not make a whole record (a runtime killed mid-write).
    pub truncated_bytes: usize,
    /// Records of kinds not used here (debug info, unwinding info, unknown ids).
    pub skipped_records: usize,
}

impl Jitdump {
    pub fn parse(data: &[u8]) -> Result<Jitdump, JitdumpError> {
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(data.get(at..at + 4)?.try_into().ok()?))
        };
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(data.get(at..at + 8)?.try_into().ok()?))
        };
        match u32_at(0) {
            Some(MAGIC) => {}
            Some(m) if m == MAGIC.swap_bytes() => return Err(JitdumpError::OtherByteOrder),
            _ if data.len() < 4 => return Err(JitdumpError::ShortHeader(data.len())),
            _ => return Err(JitdumpError::NotJitdump),
        }
        let header_bytes = u32_at(8)
            .map(|n| n as usize)
            .filter(|&n| n >= FILE_HEADER_BYTES && n <= data.len())
            .ok_or(JitdumpError::ShortHeader(data.len()))?;
        let pid = u32_at(20).ok_or(JitdumpError::ShortHeader(data.len()))?;
        let flags = u64_at(32).ok_or(JitdumpError::ShortHeader(data.len()))?;
        if flags & FLAG_ARCH_TIMESTAMP != 0 {
            return Err(JitdumpError::ArchTimestamps);
        }
        let mut out = Jitdump {
            pid,
            ..Jitdump::default()
        };
        let mut live = LiveCode::default();
        let mut at = header_bytes;
        while at < data.len() {
            let (Some(id), Some(total), Some(time_ns)) =
                (u32_at(at), u32_at(at + 4), u64_at(at + 8))
            else {
                break;
            };
            let total = total as usize;
            if total < RECORD_HEADER_BYTES || at + total > data.len() {
                break;
            }
            let body = &data[at + RECORD_HEADER_BYTES..at + total];
            if !out.apply(id, time_ns, body, &mut live) {
                out.skipped_records += 1;
            }
            at += total;
        }
        out.truncated_bytes = data.len() - at;
        out.spans.sort_by_key(|s| (s.start, s.from_ns));
        out.widest = out.spans.iter().map(|s| s.size).max().unwrap_or(0);
        Ok(out)
    }

    /// Applies one record's `body` (after its header); false for a record not used (of
    /// another kind, cut short, or moving code this file never loaded).
    fn apply(&mut self, id: u32, time_ns: u64, body: &[u8], live: &mut LiveCode) -> bool {
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
                self.start_span(live, index, addr, size, name, time_ns);
                true
            }
            // pid u32, tid u32, vma, old_code_addr, new_code_addr, code_size, code_index.
            JIT_CODE_MOVE => {
                let (Some(new_addr), Some(size), Some(index)) = (field(24), field(32), field(40))
                else {
                    return false;
                };
                match live.by_index.get(&index).copied() {
                    Some(i) if self.spans[i].until_ns == u64::MAX => {
                        self.spans[i].until_ns = time_ns;
                        let name = self.spans[i].name.clone();
                        self.start_span(live, index, new_addr, size, name, time_ns);
                        true
                    }
                    // A move of code loaded before the file began: nothing to name.
                    _ => false,
                }
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
    fn start_span(
        &mut self,
        live: &mut LiveCode,
        index: u64,
        start: u64,
        size: u64,
        name: String,
        time_ns: u64,
    ) {
        self.end_overlapping(start, size, time_ns);
        self.spans.push(CodeSpan {
            start,
            size,
            name,
            from_ns: time_ns,
            until_ns: u64::MAX,
        });
        live.by_index.insert(index, self.spans.len() - 1);
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
        let end = self.spans.partition_point(|s| s.start <= addr);
        let lowest = addr.saturating_sub(self.widest);
        self.spans[..end]
            .iter()
            .rev()
            .take_while(|s| s.start >= lowest)
            .find(|s| s.covers(addr, time_ns))
            .map(|s| s.name.as_str())
    }
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
