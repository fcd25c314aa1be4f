//! The procfs readers on a fixture tree built from the input (see [`crate::tree`]):
//! `/proc/stat`, the processes and their threads (`status`, `stat`, `schedstat`), the
//! process tree of a pid, a thread's process, and `maps`. Checks: CPU times are finite
//! and not negative; a process tree lists each pid once and starts from its root.

use powerlens_sys::procfs::{self, maps, tasks};
use powerlens_sys::Roots;

use crate::tree;

pub const DICT: &[&str] = &[
    "== proc/",
    "/status",
    "/stat",
    "/schedstat",
    "/maps",
    "/task/",
    "Name:\t",
    "Tgid:\t",
    "PPid:\t",
    "voluntary_ctxt_switches:\t",
    "nonvoluntary_ctxt_switches:\t",
    "cpu  ",
    "cpu0 ",
    ") S ",
];

/// At most this many processes are read per input.
const MAX_PIDS: usize = 8;

pub fn run(input: &[u8]) {
    tree::with_roots(input, read_all);
}

fn read_all(roots: &Roots) {
    if let Ok(t) = procfs::read_cpu_times(roots) {
        assert!(
            t.busy_s.is_finite() && t.busy_s >= 0.0 && t.idle_s.is_finite() && t.idle_s >= 0.0,
            "{t:?}"
        );
    }
    let pids = tasks::process_ids(roots).unwrap_or_default();
    for &pid in pids.iter().take(MAX_PIDS) {
        let _ = tasks::read_threads(roots, pid);
        let _ = tasks::thread_group(roots, pid);
        let _ = maps::read_executable_maps(roots, pid);
        if let Ok(tree) = tasks::process_tree(roots, pid) {
            assert!(tree.contains(&pid), "the tree of {pid} misses it");
            assert!(
                tree.windows(2).all(|w| w[0] < w[1]),
                "a pid twice in a tree"
            );
        }
    }
}
