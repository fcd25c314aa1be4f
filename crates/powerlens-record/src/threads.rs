//! Which process each thread belongs to, and its name, as a recording learns them.
//!
//! sched tracepoints name threads only: the process (thread group) of a thread comes from
//! the pid/tid header perf writes with every record, which describes the task current on
//! the CPU. Threads that exist before the recording are read from procfs at the start;
//! forks give each new thread its parent thread. Only changes since the last
//! [`ThreadTable::take_changed`] are handed out, so the recorder writes each once per flush.
//!
//! Facts apply by their record's time, not by the order the drain reads them: the drain
//! takes the rings CPU by CPU, so a child's exec on one CPU can be read before its fork on
//! its parent's, and the fork's name (the parent's) would otherwise overwrite the exec's
//! for as long as the child does not switch (a `powerlens agent` series labelled with
//! the name of the thread that spawned the program).

use std::collections::BTreeSet;
use std::time::Duration;

use powerlens_core::sched::event::TidMap;
use powerlens_store::recording::ThreadRow;
use powerlens_sys::trace::EXITED;
use powerlens_sys::{procfs, Roots};

/// How often a consumer that runs without end forgets the threads procfs no longer has
/// ([`ThreadTable::forget_vanished`], and the live session's process directory alike): a
/// look-up in procfs per thread known.
pub const SWEEP_VANISHED_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct ThreadTable {
    rows: TidMap<ThreadRow>,
    /// Per thread, the time of the records its name and its process come from.
    since: TidMap<Since>,
    changed: BTreeSet<u32>,
    /// The last (pid, tid) seen current on each CPU: most records repeat it, and the
    /// lookup is skipped for them.
    current: Vec<(u32, u32)>,
}

/// When a thread's facts were learned (CLOCK_MONOTONIC ns); 0 for procfs's, older than
/// any record.
#[derive(Debug, Default, Clone, Copy)]
struct Since {
    comm: u64,
    pid: u64,
}

impl ThreadTable {
    fn row(&mut self, tid: u32) -> &mut ThreadRow {
        self.rows.entry(tid).or_insert_with(|| ThreadRow {
            tid,
            pid: None,
            ppid: None,
            parent_tid: None,
            comm: String::new(),
        })
    }

    /// The task current on a CPU at `time_ns`, from a record's header. The idle task (0)
    /// and exited tasks (perf writes −1) say nothing.
    pub fn observe_current(&mut self, cpu: u32, pid: u32, tid: u32, time_ns: u64) {
        if tid == 0 || tid == EXITED || pid == EXITED {
            return;
        }
        let cpu = cpu as usize;
        if self.current.len() <= cpu {
            self.current.resize(cpu + 1, (0, 0));
        }
        if self.current[cpu] == (pid, tid) {
            return;
        }
        self.current[cpu] = (pid, tid);
        let since = self.since.entry(tid).or_default();
        if time_ns < since.pid {
            return;
        }
        since.pid = time_ns;
        let row = self.row(tid);
        if row.pid != Some(pid) {
            row.pid = Some(pid);
            self.changed.insert(tid);
        }
    }

    pub fn observe_comm(&mut self, tid: u32, comm: &str, time_ns: u64) {
        self.observe_comm_bytes(tid, comm.as_bytes(), time_ns);
    }

    /// A name as the kernel stores it (bytes, up to a NUL) at `time_ns`: compared before
    /// anything is allocated, since it rarely changes.
    pub fn observe_comm_bytes(&mut self, tid: u32, comm: &[u8], time_ns: u64) {
        let comm = &comm[..comm.iter().position(|&b| b == 0).unwrap_or(comm.len())];
        if tid == 0 || comm.is_empty() {
            return;
        }
        let since = self.since.entry(tid).or_default();
        if time_ns < since.comm {
            return;
        }
        since.comm = time_ns;
        let row = self.row(tid);
        if row.comm.as_bytes() != comm {
            row.comm = String::from_utf8_lossy(comm).into_owned();
            self.changed.insert(tid);
        }
    }

    pub fn observe_fork(&mut self, parent: u32, child: u32, time_ns: u64) {
        let since = self.since.entry(child).or_default();
        let newer_known = time_ns < since.pid;
        since.pid = since.pid.max(time_ns);
        let row = self.row(child);
        row.parent_tid = Some(parent);
        // A fork reuses nothing of an earlier thread with the same id — unless the
        // child's own later records were read first.
        if !newer_known {
            row.pid = None;
            row.ppid = None;
        }
        self.changed.insert(child);
    }

    /// Every thread procfs lists now, with its process and the process's parent.
    /// Processes that exit during the scan are skipped.
    pub fn scan_procfs(&mut self, roots: &Roots) {
        let Ok(pids) = procfs::tasks::process_ids(roots) else {
            return;
        };
        for pid in pids {
            let Ok(threads) = procfs::tasks::read_threads(roots, pid) else {
                continue;
            };
            for t in threads {
                let row = self.row(t.tid);
                row.pid = Some(t.pid);
                row.ppid = Some(t.ppid);
                row.comm = t.comm;
                self.changed.insert(t.tid);
            }
        }
    }

    /// Fills in the process of threads no record's header named (they never ran while
    /// recorded) from procfs, for those that still exist.
    pub fn resolve_missing_pids(&mut self, roots: &Roots) {
        let missing: Vec<u32> = self
            .rows
            .values()
            .filter(|r| r.pid.is_none())
            .map(|r| r.tid)
            .collect();
        for tid in missing {
            if let Ok(pid) = procfs::tasks::thread_group(roots, tid) {
                self.row(tid).pid = Some(pid);
                self.changed.insert(tid);
            }
        }
    }

    /// The rows changed since the last call.
    pub fn take_changed(&mut self) -> Vec<ThreadRow> {
        let changed = std::mem::take(&mut self.changed);
        changed
            .into_iter()
            .filter_map(|tid| self.rows.get(&tid).cloned())
            .collect()
    }

    /// Forgets an exited thread (a recorder that runs without end forgets them after
    /// handing out their last changes, so that the table holds the live threads).
    pub fn forget(&mut self, tid: u32) {
        self.rows.remove(&tid);
        self.since.remove(&tid);
        self.changed.remove(&tid);
    }

    /// Forgets the threads procfs no longer has, once their last change is handed out,
    /// and returns how many: for a consumer that runs without end but does not see every
    /// exit (a live session tracing in windows misses those between two, and would keep
    /// every thread it ever saw). An id reused since is a new thread, learned again.
    pub fn forget_vanished(&mut self, roots: &Roots) -> usize {
        let gone: Vec<u32> = self
            .rows
            .keys()
            .copied()
            .filter(|&tid| !self.changed.contains(&tid))
            .filter(|&tid| !procfs::tasks::thread_exists(roots, tid))
            .collect();
        for &tid in &gone {
            self.forget(tid);
        }
        gone.len()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_processes_names_and_forks_and_hands_out_changes_once() {
        let mut t = ThreadTable::default();
        t.observe_current(0, 100, 101, 1);
        t.observe_comm(101, "worker", 1);
        t.observe_comm_bytes(101, b"worker\0\0\0", 2);
        t.observe_current(0, 0, 0, 3);
        t.observe_current(1, EXITED, EXITED, 3);
        t.observe_fork(101, 102, 4);
        let rows = t.take_changed();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].tid, rows[0].pid, rows[0].comm.as_str()),
            (101, Some(100), "worker")
        );
        assert_eq!((rows[1].tid, rows[1].parent_tid), (102, Some(101)));
        assert!(t.take_changed().is_empty(), "nothing changed since");
        t.observe_current(1, 100, 101, 5);
        assert!(t.take_changed().is_empty(), "the same fact is not a change");
        t.observe_current(0, 102, 102, 6);
        assert_eq!(t.take_changed()[0].pid, Some(102));
        t.forget(102);
        assert_eq!(t.len(), 1);
    }

    /// Threads that ended unseen (between two tracing windows) are forgotten once procfs
    /// no longer has them, and not before their last change is handed out.
    #[test]
    fn threads_gone_from_procfs_are_forgotten_after_their_last_change() {
        let tree = powerlens_sys::fixture::FixtureTree::new();
        tree.write_proc("100/stat", "100 (alive) S 1");
        let mut t = ThreadTable::default();
        for tid in [100, 101, 102] {
            t.observe_current(0, tid, tid, tid as u64);
        }
        let _ = t.take_changed();
        t.observe_comm(102, "renamed", 200);
        assert_eq!(t.forget_vanished(&tree.roots()), 1, "101 has ended");
        assert_eq!(t.len(), 2);
        let rows = t.take_changed();
        assert_eq!((rows.len(), rows[0].comm.as_str()), (1, "renamed"));
        assert_eq!(t.forget_vanished(&tree.roots()), 1, "102, once handed out");
        assert_eq!(t.len(), 1);
    }

    /// A child's exec read before its fork (another CPU's ring, drained first): the fork's
    /// older name and its reset of the process do not undo what the exec said.
    #[test]
    fn an_older_fork_read_late_does_not_undo_the_exec() {
        let mut t = ThreadTable::default();
        t.observe_current(1, 200, 200, 2_000);
        t.observe_comm(200, "powerlens", 2_000);
        t.observe_fork(50, 200, 1_000);
        t.observe_comm_bytes(200, b"the_test_thread", 1_000);
        let rows = t.take_changed();
        assert_eq!(
            (rows[0].comm.as_str(), rows[0].pid, rows[0].parent_tid),
            ("powerlens", Some(200), Some(50))
        );
        // In order, the fork comes first and the exec renames.
        let mut t = ThreadTable::default();
        t.observe_fork(50, 300, 1_000);
        t.observe_comm_bytes(300, b"the_test_thread", 1_000);
        t.observe_comm(300, "powerlens", 2_000);
        assert_eq!(t.take_changed()[0].comm, "powerlens");
    }
}
