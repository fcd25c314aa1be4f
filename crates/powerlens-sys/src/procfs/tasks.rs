//! Per-process and per-thread readers of procfs: which threads a process has, their CPU
//! time and their context-switch counts. The reduced recording (no tracing privileges)
//! samples these, and the tests use them as the kernel's own oracle.

use std::path::Path;

use crate::{sysfs, Roots, SysError};

/// What procfs says of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStat {
    pub pid: u32,
    pub tid: u32,
    /// The process's parent (`PPid` of status).
    pub ppid: u32,
    pub comm: String,
    /// Time on a CPU: `schedstat`'s run time (ns) when the kernel has it, else utime +
    /// stime from `stat` (clock ticks, so 10 ms resolution at USER_HZ 100).
    pub cpu_time_ns: u64,
    /// True when `cpu_time_ns` comes from `schedstat` (nanosecond resolution).
    pub cpu_time_precise: bool,
    /// Switches out while blocked (`voluntary_ctxt_switches`).
    pub voluntary_switches: u64,
    /// Switches out while runnable (`nonvoluntary_ctxt_switches`).
    pub nonvoluntary_switches: u64,
}

/// Thread ids of a process (`/proc/PID/task`), sorted.
pub fn thread_ids(roots: &Roots, pid: u32) -> Result<Vec<u32>, SysError> {
    numeric_entries(&roots.proc(format!("{pid}/task")))
}

/// Every process id in procfs, sorted.
pub fn process_ids(roots: &Roots) -> Result<Vec<u32>, SysError> {
    numeric_entries(&roots.procfs)
}

/// Reads one thread of a process.
pub fn read_thread(roots: &Roots, pid: u32, tid: u32) -> Result<ThreadStat, SysError> {
    let dir = roots.proc(format!("{pid}/task/{tid}"));
    let status_path = dir.join("status");
    let status = sysfs::read_string(&status_path)?;
    let field = |name: &str| -> Result<u64, SysError> {
        status_field(&status, name).ok_or_else(|| SysError::Parse {
            path: status_path.clone(),
            expected: "a status file with Name, PPid and the ctxt_switches counters",
            found: format!("no numeric {name} line"),
        })
    };
    let (cpu_time_ns, cpu_time_precise) = match read_schedstat_run_ns(&dir.join("schedstat")) {
        Some(ns) => (ns, true),
        None => (read_stat_cpu_ns(&dir.join("stat"))?, false),
    };
    Ok(ThreadStat {
        pid,
        tid,
        ppid: field("PPid")? as u32,
        comm: status
            .lines()
            .find_map(|l| l.strip_prefix("Name:"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        cpu_time_ns,
        cpu_time_precise,
        voluntary_switches: field("voluntary_ctxt_switches")?,
        nonvoluntary_switches: field("nonvoluntary_ctxt_switches")?,
    })
}

/// Whether a thread (or process) of this id exists, ended but not yet reaped included:
/// procfs resolves `/proc/TID` for any thread, though it lists processes only.
pub fn thread_exists(roots: &Roots, tid: u32) -> bool {
    roots.proc(tid.to_string()).exists()
}

/// The process (thread group) of any thread id: `Tgid` of `/proc/TID/status`, which
/// procfs resolves for threads as well as processes.
pub fn thread_group(roots: &Roots, tid: u32) -> Result<u32, SysError> {
    let path = roots.proc(format!("{tid}/status"));
    let status = sysfs::read_string(&path)?;
    status_field(&status, "Tgid")
        .map(|v| v as u32)
        .ok_or_else(|| SysError::Parse {
            path,
            expected: "a status file with a Tgid line",
            found: status.lines().next().unwrap_or_default().to_string(),
        })
}

/// Reads every thread of a process. Threads that exit between the listing and the read
/// are skipped (they are gone, not an error).
pub fn read_threads(roots: &Roots, pid: u32) -> Result<Vec<ThreadStat>, SysError> {
    let mut out = Vec::new();
    for tid in thread_ids(roots, pid)? {
        match read_thread(roots, pid, tid) {
            Ok(t) => out.push(t),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The process ids of `root` and all its descendants, from each process's `PPid`.
/// Processes that vanish during the scan are skipped. Each process is taken once, so that
/// parents read in a cycle (a reused pid read mid-reparenting, a damaged or fixture tree)
/// cannot make the walk endless: it was, and grew without bound.
pub fn process_tree(roots: &Roots, root: u32) -> Result<Vec<u32>, SysError> {
    let mut parents = Vec::new();
    for pid in process_ids(roots)? {
        let path = roots.proc(format!("{pid}/status"));
        match sysfs::read_string(&path) {
            Ok(text) => {
                if let Some(ppid) = status_field(&text, "PPid") {
                    parents.push((pid, ppid as u32));
                }
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let mut tree = vec![root];
    let mut seen = std::collections::HashSet::from([root]);
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for &(pid, ppid) in &parents {
            if ppid == parent && seen.insert(pid) {
                tree.push(pid);
            }
        }
        i += 1;
    }
    tree.sort_unstable();
    Ok(tree)
}

fn numeric_entries(dir: &Path) -> Result<Vec<u32>, SysError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| SysError::from_io(dir, e, "run as root or as the owner of the process"))?;
    let mut ids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// `Name:\tvalue` lines of a status file.
fn status_field(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

/// First field of `schedstat`: nanoseconds on a CPU. `None` when the kernel lacks
/// schedstats (the file is missing or malformed), so the caller falls back to `stat`.
fn read_schedstat_run_ns(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// utime + stime of a `stat` file, in ns. The comm field may hold spaces and parentheses,
/// so fields are counted after the last ')'. Times that do not fit in u64 nanoseconds (585
/// years; only a damaged file has them) are a parse error: they overflowed (fuzzing).
fn read_stat_cpu_ns(path: &Path) -> Result<u64, SysError> {
    let text = sysfs::read_string(path)?;
    parse_stat_cpu_ticks(&text)
        .and_then(|ticks| ticks.checked_mul(1_000_000_000))
        .map(|ns| ns / super::user_hz() as u64)
        .ok_or_else(|| SysError::Parse {
            path: path.to_path_buf(),
            expected: "a stat line with utime and stime",
            found: text.chars().take(80).collect(),
        })
}

pub(crate) fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let after_comm = &text[text.rfind(')')? + 1..];
    // After the comm: state(3) ppid(4) … utime(14) stime(15) → indexes 11 and 12 here.
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    utime.checked_add(stime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::FixtureTree;

    fn status(name: &str, ppid: u32, vol: u64, nonvol: u64) -> String {
        format!(
            "Name:\t{name}\nState:\tS (sleeping)\nTgid:\t10\nPPid:\t{ppid}\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t{nonvol}\n"
        )
    }

    #[test]
    fn reads_threads_with_schedstat_or_stat_ticks() {
        let tree = FixtureTree::new();
        tree.write_proc("10/task/10/status", status("server", 1, 7, 2));
        tree.write_proc("10/task/10/schedstat", "123456789 5000 9\n");
        tree.write_proc("10/task/11/status", status("work er)", 1, 40, 3));
        // No schedstat: utime 150 + stime 50 ticks.
        tree.write_proc(
            "10/task/11/stat",
            "11 (work er)) S 1 10 10 0 -1 4194560 0 0 0 0 150 50 0 0 20 0 2 0 1 0 0\n",
        );
        let threads = read_threads(&tree.roots(), 10).unwrap();
        assert_eq!(threads.len(), 2);
        let main = &threads[0];
        assert_eq!((main.tid, main.ppid, main.comm.as_str()), (10, 1, "server"));
        assert_eq!((main.cpu_time_ns, main.cpu_time_precise), (123456789, true));
        assert_eq!(
            (main.voluntary_switches, main.nonvoluntary_switches),
            (7, 2)
        );
        let worker = &threads[1];
        assert_eq!(worker.comm, "work er)");
        let hz = crate::procfs::user_hz() as u64;
        assert_eq!(worker.cpu_time_ns, 200 * 1_000_000_000 / hz);
        assert!(!worker.cpu_time_precise);
    }

    /// Regression (fuzz/regressions/procfs/stat-ticks-overflow): utime + stime, and the
    /// ticks in nanoseconds, overflowed u64.
    #[test]
    fn ticks_beyond_u64_nanoseconds_are_a_parse_error() {
        let tree = FixtureTree::new();
        tree.write_proc("10/task/10/status", status("x", 1, 0, 0));
        for (utime, stime) in [(u64::MAX, 1), (u64::MAX / 1000, 0)] {
            tree.write_proc(
                "10/task/10/stat",
                format!("10 (x) S 1 10 10 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 1 0 0\n"),
            );
            let e = read_thread(&tree.roots(), 10, 10).unwrap_err().to_string();
            assert!(e.contains("10/task/10/stat") && e.contains("utime"), "{e}");
        }
    }

    #[test]
    fn a_malformed_status_names_the_file() {
        let tree = FixtureTree::new();
        tree.write_proc("10/task/10/status", "Name:\tx\n");
        tree.write_proc("10/task/10/schedstat", "1 2 3\n");
        let e = read_thread(&tree.roots(), 10, 10).unwrap_err().to_string();
        assert!(e.contains("10/task/10/status") && e.contains("PPid"), "{e}");
    }

    #[test]
    fn process_tree_follows_ppid() {
        let tree = FixtureTree::new();
        for (pid, ppid) in [(1, 0), (10, 1), (11, 10), (12, 11), (13, 1)] {
            tree.write_proc(format!("{pid}/status"), status("p", ppid, 0, 0));
        }
        assert_eq!(process_tree(&tree.roots(), 10).unwrap(), vec![10, 11, 12]);
    }

    /// Regression (fuzz/regressions/procfs/ppid-cycle): parents in a cycle made the walk
    /// endless (found while writing the procfs fuzz target, whose time limit reports it).
    #[test]
    fn parents_in_a_cycle_end_the_walk() {
        let tree = FixtureTree::new();
        for (pid, ppid) in [(10, 11), (11, 10), (12, 11), (13, 13)] {
            tree.write_proc(format!("{pid}/status"), status("p", ppid, 0, 0));
        }
        assert_eq!(process_tree(&tree.roots(), 10).unwrap(), vec![10, 11, 12]);
        assert_eq!(process_tree(&tree.roots(), 13).unwrap(), vec![13]);
    }

    #[test]
    fn thread_group_reads_tgid_for_any_thread() {
        let tree = FixtureTree::new();
        tree.write_proc("11/status", status("worker", 1, 0, 0));
        assert_eq!(thread_group(&tree.roots(), 11).unwrap(), 10);
        tree.write_proc("12/status", "Name:\tx\n");
        let e = thread_group(&tree.roots(), 12).unwrap_err().to_string();
        assert!(e.contains("Tgid"), "{e}");
        // Live: this test's thread (not the main thread) resolves to this process.
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() } as u32;
        assert_eq!(
            thread_group(&Roots::default(), me).unwrap(),
            std::process::id()
        );
    }

    #[test]
    #[ignore = "live: the real kernel's counts"]
    fn live_counts_match_getrusage_for_this_thread() {
        // The kernel's two views of the same counter must agree: procfs for this thread
        // and getrusage(RUSAGE_THREAD). Opening and reading the status file can itself
        // block (a voluntary switch, seen once in CI: procfs 6, getrusage before it 5),
        // so getrusage brackets the read: before <= procfs <= after.
        for _ in 0..5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let voluntary_now = || {
            // SAFETY: getrusage only writes into the struct we pass.
            let usage = unsafe {
                let mut u: libc::rusage = std::mem::zeroed();
                libc::getrusage(libc::RUSAGE_THREAD, &mut u);
                u
            };
            usage.ru_nvcsw as u64
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let before = voluntary_now();
        let t = read_thread(&Roots::default(), std::process::id(), tid).unwrap();
        let after = voluntary_now();
        assert!(before >= 5, "five sleeps, {before} voluntary switches");
        assert!(
            (before..=after).contains(&t.voluntary_switches),
            "procfs {} outside getrusage's {before}..={after}",
            t.voluntary_switches
        );
        assert!(t.cpu_time_ns > 0);
    }
}
