//! Executable memory mappings of a process: where each module's code sits in its address
//! space. The recorder keeps them (from `/proc/PID/maps` at start and perf's MMAP2 records
//! afterwards) so that user-space addresses can be unwound and symbolized after the
//! process is gone.

use serde::{Deserialize, Serialize};

use crate::{Roots, SysError};

/// One executable mapping: `[start, end)` in the process maps `path` from `file_offset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// Offset in the file of the byte mapped at `start` (the `pgoff` of mmap).
    pub file_offset: u64,
    /// The file, or a pseudo name in brackets (`[vdso]`, `[anon:…]`) for mappings without
    /// one.
    pub path: String,
}

impl Mapping {
    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }

    /// The file offset of `addr`, which must be inside the mapping.
    pub fn file_offset_of(&self, addr: u64) -> u64 {
        addr - self.start + self.file_offset
    }
}

/// The executable mappings of `pid` now (`/proc/PID/maps`, lines with `x` permission),
/// in address order.
pub fn read_executable_maps(roots: &Roots, pid: u32) -> Result<Vec<Mapping>, SysError> {
    let path = roots.proc(format!("{pid}/maps"));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        SysError::from_io(
            &path,
            e,
            "run as root or as the process's owner (ptrace access)",
        )
    })?;
    Ok(parse_executable_maps(&text))
}

/// Parses the text of a `/proc/PID/maps` file, keeping executable mappings. Lines that do
/// not parse are skipped: the kernel's format is stable, a garbled line is not worth
/// losing the others for.
pub fn parse_executable_maps(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = text.lines().filter_map(parse_line).collect();
    out.sort_by_key(|m| m.start);
    out
}

fn parse_line(line: &str) -> Option<Mapping> {
    // 7f12a000-7f12b000 r-xp 00002000 08:01 1234   /usr/lib/x86_64-linux-gnu/libc.so.6
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim();
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let (start, end) = (
        u64::from_str_radix(start, 16).ok()?,
        u64::from_str_radix(end, 16).ok()?,
    );
    let file_offset = u64::from_str_radix(offset, 16).ok()?;
    // Every address of the mapping has a file offset ([`Mapping::file_offset_of`]): a line
    // where that overflows is garbage, not a mapping (fuzzing found one, which panicked).
    file_offset.checked_add(end.saturating_sub(start))?;
    Some(Mapping {
        start,
        end,
        file_offset,
        path: if path.is_empty() {
            "[anon]".to_string()
        } else {
            path.to_string()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_executable_lines_with_their_offsets() {
        let text = "\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 42 /tmp/t
55d0c0001000-55d0c0002000 r-xp 00001000 08:01 42 /tmp/t
7f0000000000-7f0000020000 r-xp 00026000 08:01 7  /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                  [vdso]
7ffe00000000-7ffe00001000 rw-p 00000000 00:00 0                  [stack]
garbage
";
        let maps = parse_executable_maps(text);
        assert_eq!(maps.len(), 3);
        assert_eq!(maps[0].path, "/tmp/t");
        assert_eq!(maps[0].file_offset_of(0x55d0c0001010), 0x1010);
        assert_eq!(maps[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(maps[2].path, "[vdso]");
        assert!(maps[2].contains(0x7ffd00000fff) && !maps[2].contains(0x7ffd00002000));
    }

    /// Regression (fuzz/regressions/maps/offset-overflow): a line whose file offset plus
    /// its length overflows; `file_offset_of` of its last address panicked.
    #[test]
    fn a_mapping_whose_offsets_overflow_is_skipped() {
        let text = "\
7f0000000000-7f0000020000 r-xp ffffffffffff0000 08:01 7  /lib/x
7f0000020000-7f0000030000 r-xp 00001000 08:01 7  /lib/y
";
        let maps = parse_executable_maps(text);
        assert_eq!(maps.len(), 1, "{maps:?}");
        assert_eq!(maps[0].file_offset_of(0x7f000002ffff), 0x10fff);
    }

    #[test]
    fn reads_this_process() {
        let maps = read_executable_maps(&Roots::default(), std::process::id()).unwrap();
        let here = keeps_executable_lines_with_their_offsets as *const () as u64;
        let own = maps
            .iter()
            .find(|m| m.contains(here))
            .expect("own code mapped");
        assert!(own.path.contains("powerlens_sys"), "{}", own.path);
    }
}
