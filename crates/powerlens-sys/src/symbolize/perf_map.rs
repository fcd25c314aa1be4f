//! Names for code that a JIT compiled at run time, from the process's perf map.
//!
//! JIT code lives in anonymous executable memory, which no file names. Runtimes that know
//! profilers write `/tmp/perf-PID.map`, one line per piece of code: `START SIZE name`,
//! START and SIZE in hex (Node's `--perf-basic-prof` and .NET's `DOTNET_PerfMapEnabled`
//! without `0x`, Java's `DumpPerfMapAtExit` and `jcmd PID Compiler.perfmap` with it;
//! Python 3.12's `-X perf` writes `py::func:/path/file.py`). The recorder files frames in
//! such memory under a module named after the map ([`module_path`]) with the address as
//! the offset, so that the frames are looked up here when the recording ends.

use std::path::Path;

/// The directory runtimes write their maps to: fixed by the convention (perf reads it),
/// not configurable in the runtimes.
const MAP_DIR: &str = "/tmp";

/// The module name under which the recorder files process `pid`'s JIT frames: the path
/// of its perf map.
pub fn module_path(pid: u32) -> String {
    format!("{MAP_DIR}/perf-{pid}.map")
}

/// Whether `module` is a perf map ([`module_path`], or the same file name elsewhere: a
/// map copied beside a recording, a test's fixture).
pub fn is_perf_map(module: &str) -> bool {
    let name = module.rsplit('/').next().unwrap_or(module);
    name.strip_prefix("perf-")
        .and_then(|rest| rest.strip_suffix(".map"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a mapping's path is anonymous memory where a JIT puts code: `//anon` (perf's
/// name for it), `[anon]`/`[anon:…]` (`/proc/PID/maps`, named with `PR_SET_VMA`), or
/// .NET's double-mapped code (`/memfd:doublemapper`).
pub fn is_jit_mapping(path: &str) -> bool {
    path.is_empty()
        || path == "//anon"
        || path.starts_with("[anon")
        || path.starts_with("/memfd:doublemapper")
}

/// One line of a perf map.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    start: u64,
    size: u64,
    name: String,
}

/// A parsed perf map, ready for lookups by address.
#[derive(Debug, Clone, Default)]
pub struct PerfMap {
    /// By start address; equal starts in file order.
    entries: Vec<Entry>,
    /// Each entry's line number, by the same index: a later line describes code written
    /// later over the same addresses (V8 reuses freed code space).
    lines: Vec<usize>,
    /// The largest size, which bounds how far back a lookup scans.
    widest: u64,
    /// Lines that were not `START SIZE name`.
    pub bad_lines: usize,
}

impl PerfMap {
    /// Parses a map's text. Lines that are not `START SIZE name` are counted, not fatal:
    /// a runtime killed while writing leaves half a line.
    pub fn parse(text: &str) -> PerfMap {
        let mut rows: Vec<(Entry, usize)> = Vec::new();
        let mut bad_lines = 0;
        for (line_no, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match parse_line(line) {
                Some(e) => rows.push((e, line_no)),
                None => bad_lines += 1,
            }
        }
        rows.sort_by_key(|(e, line)| (e.start, *line));
        let widest = rows.iter().map(|(e, _)| e.size).max().unwrap_or(0);
        let (entries, lines) = rows.into_iter().unzip();
        PerfMap {
            entries,
            lines,
            widest,
            bad_lines,
        }
    }

    /// Reads and parses the map at `path`; `None` when it cannot be read (the runtime
    /// wrote none, or it was deleted).
    pub fn read(path: &Path) -> Option<PerfMap> {
        let bytes = std::fs::read(path).ok()?;
        Some(PerfMap::parse(&String::from_utf8_lossy(&bytes)))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry's (start, size), by start.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.entries.iter().map(|e| (e.start, e.size))
    }

    /// The name of the code at `addr`, as people read it ([`readable_name`]); when pieces
    /// overlap, the one written last (the code that replaced the others).
    pub fn lookup(&self, addr: u64) -> Option<String> {
        let end = self.entries.partition_point(|e| e.start <= addr);
        let lowest = addr.saturating_sub(self.widest);
        (0..end)
            .rev()
            .take_while(|&i| self.entries[i].start >= lowest)
            .filter(|&i| addr - self.entries[i].start < self.entries[i].size)
            .max_by_key(|&i| self.lines[i])
            .map(|i| readable_name(&self.entries[i].name))
    }
}

fn parse_line(line: &str) -> Option<Entry> {
    let mut parts = line.trim_end().splitn(3, ' ');
    let start = hex(parts.next()?)?;
    let size = hex(parts.next()?)?;
    let name = parts.next()?.trim();
    // Code that would end past the address space is garbage, as a line that does not
    // parse is.
    start.checked_add(size)?;
    (!name.is_empty() && size > 0).then(|| Entry {
        start,
        size,
        name: name.to_string(),
    })
}

fn hex(s: &str) -> Option<u64> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(digits, 16).ok()
}

/// A map's name as a function row shows it. V8 prefixes JavaScript functions with their
/// kind and compiler tier (`JS:*fib file.js:1:26`: `~` interpreted, `^` baseline, `+`
/// Maglev, `*` TurboFan; `LazyCompile:` before Node 20): the tier is not the function, so
/// it is dropped and the tiers of one function make one row (`fib file.js:1:26`). Every
/// other name (Java's `long Hot.collatzSteps(long)`, V8's `Builtin:…`, Python's
/// `py::func:/path/file.py`) stays as the runtime wrote it.
pub fn readable_name(name: &str) -> String {
    for kind in ["JS:", "LazyCompile:", "Function:"] {
        if let Some(rest) = name.strip_prefix(kind) {
            let rest = rest.strip_prefix(['~', '^', '+', '*']).unwrap_or(rest);
            return rest.to_string();
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as Node 20 (`--perf-basic-prof`, no `0x`) and OpenJDK 17
    /// (`DumpPerfMapAtExit`, with `0x`) wrote them on this project's machine.
    const NODE: &str = "\
1b07ac98b1ee 2a JS:~fibonacciHotLoop /tmp/rt/hot.js:1:26
7f5d68005b80 100 JS:^fibonacciHotLoop /tmp/rt/hot.js:1:26
7f5d68006180 180 JS:*fibonacciHotLoop /tmp/rt/hot.js:1:26
18c4000 300 Builtin:DeoptimizationEntry_Eager
";
    const JAVA: &str = "\
0x00007f69bcec7620 0x00000000000000d8 long Hot.collatzSteps(long)
0x00007f69bc940b80 0x0000000000017de0 Interpreter
";

    #[test]
    fn node_and_java_maps_name_their_code() {
        let node = PerfMap::parse(NODE);
        assert_eq!(node.len(), 4);
        let fib = Some("fibonacciHotLoop /tmp/rt/hot.js:1:26".to_string());
        // Each tier's code, first and last byte; one past the end is not the function.
        assert_eq!(node.lookup(0x1b07ac98b1ee), fib);
        assert_eq!(node.lookup(0x7f5d68005b80 + 0xff), fib);
        assert_eq!(node.lookup(0x7f5d68006180 + 0x17f), fib);
        assert_eq!(node.lookup(0x7f5d68006180 + 0x180), None);
        assert_eq!(node.lookup(0x7f5d68005b7f), None);
        assert_eq!(
            node.lookup(0x18c4010).as_deref(),
            Some("Builtin:DeoptimizationEntry_Eager")
        );
        let java = PerfMap::parse(JAVA);
        assert_eq!(
            java.lookup(0x7f69bcec7620 + 0x10).as_deref(),
            Some("long Hot.collatzSteps(long)")
        );
        assert_eq!(
            java.lookup(0x7f69bc940b80 + 0x17ddf).as_deref(),
            Some("Interpreter")
        );
        assert_eq!(java.bad_lines, 0);
    }

    /// Python 3.12's `-X perf` trampolines, one per Python function.
    #[test]
    fn a_python_perf_trampoline_map_names_python_functions() {
        let map = PerfMap::parse(
            "7f3a1c000000 b py::<module>:/srv/app/main.py\n\
             7f3a1c00000b b py::handle_request:/srv/app/server.py\n\
             7f3a1c000016 b py::checksum:/srv/app/util.py\n",
        );
        assert_eq!(
            map.lookup(0x7f3a1c00000b + 5).as_deref(),
            Some("py::handle_request:/srv/app/server.py")
        );
        assert_eq!(
            map.lookup(0x7f3a1c000020).as_deref(),
            Some("py::checksum:/srv/app/util.py")
        );
    }

    /// Code space freed and reused: the later line is the code now there; a wide early
    /// entry still covers an address far past its start.
    #[test]
    fn the_code_written_last_wins_and_wide_entries_are_found() {
        let map = PerfMap::parse(
            "1000 10000 Stub:Wide\n\
             2000 100 JS:*old a.js:1:1\n\
             2000 80 JS:*new a.js:9:1\n\
             half a line\n\
             3000 zz broken\n\
             ffffffffffffff00 200 Stub:PastTheEnd\n",
        );
        assert_eq!(map.bad_lines, 3);
        assert_eq!(map.lookup(0x2010).as_deref(), Some("new a.js:9:1"));
        // Past the new code's end, the old entry (written before the new) still covers it,
        // but the wide stub was written before both, so the old one wins.
        assert_eq!(map.lookup(0x2090).as_deref(), Some("old a.js:1:1"));
        assert_eq!(map.lookup(0x9000).as_deref(), Some("Stub:Wide"));
        assert_eq!(map.lookup(0x11000), None);
    }

    #[test]
    fn modules_and_mappings_are_recognised() {
        assert_eq!(module_path(4242), "/tmp/perf-4242.map");
        assert!(is_perf_map("/tmp/perf-4242.map"));
        assert!(is_perf_map("perf-1.map"));
        for not in [
            "/tmp/perf-.map",
            "/tmp/perf-12a.map",
            "/usr/bin/perf",
            "/tmp/perf-1.map.bak",
        ] {
            assert!(!is_perf_map(not), "{not}");
        }
        for jit in [
            "//anon",
            "[anon]",
            "[anon:v8]",
            "",
            "/memfd:doublemapper (deleted)",
        ] {
            assert!(is_jit_mapping(jit), "{jit:?}");
        }
        for not in [
            "/usr/bin/node",
            "[vdso]",
            "[heap]",
            "/memfd:other (deleted)",
        ] {
            assert!(!is_jit_mapping(not), "{not}");
        }
    }
}
