//! Names for a recording's JIT frames, from each process's perf map ([`perf_map`]), which
//! the runtime writes while it runs or at its exit: `record` reads the maps when the
//! command has exited, before the recording closes, and the names go to the recording's
//! symbol cache ([`crate::symbols`]), so that reports name the frames after the maps are
//! deleted. What could not be named is said once for all processes (a system-wide
//! recording meets many processes with JIT code and no map).

use std::path::Path;

use powerlens_sys::symbolize::perf_map::PerfMap;

/// Names JIT frames map by map, and keeps count of what it could not name.
#[derive(Default)]
pub struct JitNames {
    /// Maps that were not there, with their frames.
    no_map: Vec<(String, usize)>,
    /// Maps that did not cover every frame: (path, frames not covered, frames).
    not_covered: Vec<(String, usize, usize)>,
}

impl JitNames {
    /// The names of `addresses` from the perf map at `path`, `None` where it has none;
    /// `None` for all when there is no map.
    pub fn name(&mut self, path: &str, addresses: &[u64]) -> Option<Vec<Option<String>>> {
        let Some(map) = PerfMap::read(Path::new(path)) else {
            self.no_map.push((path.to_string(), addresses.len()));
            return None;
        };
        let named: Vec<Option<String>> = addresses.iter().map(|&a| map.lookup(a)).collect();
        let missing = named.iter().filter(|n| n.is_none()).count();
        if missing > 0 {
            self.not_covered
                .push((path.to_string(), missing, addresses.len()));
        }
        Some(named)
    }

    /// What the user should know: one line for the maps that were missing, one for those
    /// that left frames unnamed.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.no_map.is_empty() {
            let frames: usize = self.no_map.iter().map(|(_, n)| n).sum();
            out.push(format!(
                "{frames} frames of JIT code are not named: there is no perf map at {} (the runtime wrote none: record the command with --jit-names, the default, or start the runtime with its perf map option, see docs/RECORD.md, Managed runtimes; or the map was deleted, and the names found when the recording ended are kept)",
                listed(self.no_map.iter().map(|(p, _)| p.as_str()))
            ));
        }
        if !self.not_covered.is_empty() {
            let missing: usize = self.not_covered.iter().map(|(_, m, _)| m).sum();
            let frames: usize = self.not_covered.iter().map(|(_, _, n)| n).sum();
            out.push(format!(
                "{missing} of {frames} frames of JIT code are not in {} (code the runtime does not list, such as its own stubs, or code compiled after the map was read)",
                listed(self.not_covered.iter().map(|(p, _, _)| p.as_str()))
            ));
        }
        out
    }
}

/// Up to three paths, then how many more.
fn listed<'a>(paths: impl Iterator<Item = &'a str>) -> String {
    const SHOWN: usize = 3;
    let paths: Vec<&str> = paths.collect();
    let mut out = paths[..paths.len().min(SHOWN)].join(", ");
    if paths.len() > SHOWN {
        out += &format!(" and {} more", paths.len() - SHOWN);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five processes without maps and two whose maps miss frames: two lines, not seven.
    #[test]
    fn what_is_not_named_is_said_once_for_all_maps() {
        let dir = tempfile::tempdir().unwrap();
        let mut names = JitNames::default();
        for pid in 1..=5 {
            let path = dir.path().join(format!("perf-{pid}.map"));
            assert_eq!(names.name(path.to_str().unwrap(), &[0x10, 0x20]), None);
        }
        for pid in [6, 7] {
            let path = dir.path().join(format!("perf-{pid}.map"));
            std::fs::write(&path, "1000 10 JS:*f a.js:1:1\n").unwrap();
            assert_eq!(
                names.name(path.to_str().unwrap(), &[0x1008, 0x2000]),
                Some(vec![Some("f a.js:1:1".to_string()), None])
            );
        }
        let d = dir.path().display();
        assert_eq!(
            names.warnings(),
            [
                format!("10 frames of JIT code are not named: there is no perf map at {d}/perf-1.map, {d}/perf-2.map, {d}/perf-3.map and 2 more (the runtime wrote none: record the command with --jit-names, the default, or start the runtime with its perf map option, see docs/RECORD.md, Managed runtimes; or the map was deleted, and the names found when the recording ended are kept)"),
                format!("2 of 4 frames of JIT code are not in {d}/perf-6.map, {d}/perf-7.map (code the runtime does not list, such as its own stubs, or code compiled after the map was read)"),
            ]
        );
        assert!(JitNames::default().warnings().is_empty());
    }
}
