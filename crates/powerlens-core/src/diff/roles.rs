//! Which process is which across two recordings. Pids differ between runs, and names
//! collide: every `cc1` of a build is `cc1`. Paired by the order they started, a parallel
//! build's `cc1` for main.c (0.019 s) met the other's `cc1` for m0.c (1.38 s) (issue 51).
//! Where the recordings hold each process's command line (`commands` samples, recorded
//! since issue 51), a process is known by its name and its *role*: the words of its
//! command line that set it apart from the other processes of the same name in its
//! recording (`main.c` of `cc1 -quiet … main.c … -o /tmp/ccX.s`). Temporary files
//! (`/tmp/cc9GBCwr.s`) differ between any two runs and say nothing of the role.

use std::collections::{BTreeMap, BTreeSet};

/// A recording's command lines: process id → argv.
pub type Commands = BTreeMap<u64, Vec<String>>;

/// Whether a word names a temporary file, different in every run.
fn temporary(word: &str) -> bool {
    ["/tmp/", "/var/tmp/", "/dev/shm/"]
        .iter()
        .any(|dir| word.starts_with(dir) || word.contains(&format!("={dir}")))
}

/// The words of each process's command line (its program aside) that not every other
/// process of its name has, in order, each once; temporary files left out. Processes of
/// a name no other process has, or without a command line, get no role.
pub fn roles(processes: &[(u64, String)], commands: &Commands) -> BTreeMap<u64, String> {
    let words = |pid: &u64| -> Option<Vec<&str>> {
        let argv = commands.get(pid)?;
        Some(
            argv.iter()
                .skip(1)
                .map(String::as_str)
                .filter(|w| !temporary(w))
                .collect(),
        )
    };
    let mut out = BTreeMap::new();
    let names: BTreeSet<&String> = processes.iter().map(|(_, c)| c).collect();
    for name in names {
        let same: Vec<(u64, Vec<&str>)> = processes
            .iter()
            .filter(|(_, c)| c == name)
            .filter_map(|(pid, _)| Some((*pid, words(pid)?)))
            .collect();
        if same.len() < 2 {
            continue;
        }
        let shared: BTreeSet<&str> = same[0]
            .1
            .iter()
            .copied()
            .filter(|w| same.iter().all(|(_, ws)| ws.contains(w)))
            .collect();
        for (pid, ws) in &same {
            let mut seen = BTreeSet::new();
            let own: Vec<&str> = ws
                .iter()
                .copied()
                .filter(|w| !shared.contains(w) && seen.insert(*w))
                .collect();
            if !own.is_empty() {
                out.insert(*pid, own.join(" "));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn a_role_is_what_sets_a_process_apart_from_its_namesakes() {
        let procs: Vec<(u64, String)> =
            [(1, "make"), (2, "cc1"), (3, "cc1"), (4, "cc1"), (5, "as")]
                .map(|(p, c)| (p, c.to_string()))
                .to_vec();
        let cmds: Commands = [
            (1, "make -j2"),
            (
                2,
                "/usr/lib/gcc/cc1 -quiet big.c -dumpbase big.c -O2 -o /tmp/ccA.s",
            ),
            (
                3,
                "/usr/lib/gcc/cc1 -quiet main.c -dumpbase main.c -O2 -o /tmp/ccB.s",
            ),
            (5, "as --64 -o big.o /tmp/ccA.s"),
        ]
        .map(|(p, a)| (p, argv(a)))
        .into();
        let r = roles(&procs, &cmds);
        // The file each cc1 compiled, once; the temporary output left out.
        assert_eq!(r.get(&2).map(String::as_str), Some("big.c"));
        assert_eq!(r.get(&3).map(String::as_str), Some("main.c"));
        // Without a command line (4), or alone of its name (make, as): no role.
        assert_eq!((r.get(&4), r.get(&1), r.get(&5)), (None, None, None));
    }
}
