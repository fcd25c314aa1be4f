//! Which process each thread belongs to, for a monitor that runs without end. Threads and
//! processes are forgotten once they are gone and their last interval is accounted, so the
//! directory holds the live ones only; every process gets a serial number of its own, so
//! that a pid reused by a new process never continues the old process's figures.

use std::collections::{HashMap, HashSet};

use crate::sched::event::{Tid, TidMap};

/// A process as the monitor names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessKey {
    pub pid: u32,
    /// In the order the directory first saw the processes, from 0.
    pub serial: u64,
}

/// What the monitor knows of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub key: ProcessKey,
    /// Its main thread's name; empty until the main thread is seen (a label that changed
    /// from a worker's name to the main thread's would split the process's series: the
    /// caller reads the name from procfs, or takes [`ProcessInfo::any_comm`]).
    pub comm: String,
    /// The name of some thread of it, for a process whose main thread was never seen.
    pub any_comm: String,
    /// Its cgroup v2 path, when it was read.
    pub cgroup: Option<String>,
    /// The process that started it, when known.
    pub parent: Option<u32>,
}

#[derive(Debug, Default)]
pub struct ProcessDirectory {
    thread_pid: TidMap<u32>,
    processes: HashMap<u32, ProcessInfo>,
    next_serial: u64,
    /// Threads and processes gone, forgotten at the next [`ProcessDirectory::forget_gone`].
    gone_threads: Vec<Tid>,
    gone_processes: Vec<u32>,
    /// Processes [`ProcessDirectory::forget_vanished_processes`] found gone at its latest
    /// call: forgotten at the next if they still are.
    vanished_once: HashSet<u32>,
}

impl ProcessDirectory {
    /// A thread's process and name, as the recorder learns them (`pid` unknown: the
    /// thread is taken as a process of its own until it is known), and the thread that
    /// forked it, when known: a main thread's forker is in its parent process.
    pub fn thread(&mut self, tid: Tid, pid: Option<u32>, comm: &str, forked_by: Option<Tid>) {
        let pid = pid.unwrap_or(tid);
        self.thread_pid.insert(tid, pid);
        let parent = forked_by
            .filter(|_| tid == pid)
            .map(|t| self.thread_pid.get(&t).copied().unwrap_or(t));
        let info = self.process_entry(pid);
        if parent.is_some() {
            info.parent = parent;
        }
        if comm.is_empty() {
            return;
        }
        if tid == pid && info.comm != comm {
            info.comm = comm.to_string();
        }
        if info.any_comm.is_empty() {
            info.any_comm = comm.to_string();
        }
    }

    fn process_entry(&mut self, pid: u32) -> &mut ProcessInfo {
        let next = &mut self.next_serial;
        self.processes.entry(pid).or_insert_with(|| {
            let key = ProcessKey { pid, serial: *next };
            *next += 1;
            ProcessInfo {
                key,
                comm: String::new(),
                any_comm: String::new(),
                cgroup: None,
                parent: None,
            }
        })
    }

    /// A process's name, read elsewhere (procfs) when its main thread was not seen.
    pub fn set_comm(&mut self, pid: u32, comm: &str) {
        self.process_entry(pid).comm = comm.to_string();
    }

    /// A process's cgroup v2 path.
    pub fn set_cgroup(&mut self, pid: u32, cgroup: String) {
        self.process_entry(pid).cgroup = Some(cgroup);
    }

    /// The process that started `pid`, when known.
    pub fn parent_of(&self, pid: u32) -> Option<u32> {
        self.processes.get(&pid)?.parent
    }

    /// A process's cgroup: its own, as `read` finds it (procfs, while the process lives),
    /// else its nearest ancestor's, known or read — a child starts in its parent's cgroup,
    /// and a short-lived child and its parent (`sh -c 'seq | gzip'`) have often both
    /// ended by the time anyone reads. Every process walked that had ended takes the
    /// cgroup found, so that its siblings stop at it. `None` only when no ancestor is
    /// known or readable.
    pub fn cgroup_by_ancestry(
        &mut self,
        pid: u32,
        mut read: impl FnMut(u32) -> Option<String>,
    ) -> Option<String> {
        // Deep enough for any real ancestry; a bound all the same, as parents form no
        // cycle only as long as pids are not reused within one walk.
        const MAX_DEPTH: usize = 64;
        let mut walked = Vec::new();
        let mut at = Some(pid);
        let found = loop {
            let Some(p) = at.filter(|p| walked.len() < MAX_DEPTH && !walked.contains(p)) else {
                break None;
            };
            if let Some(cg) = self.processes.get(&p).and_then(|i| i.cgroup.clone()) {
                break Some(cg);
            }
            if let Some(cg) = read(p) {
                self.set_cgroup(p, cg.clone());
                break Some(cg);
            }
            walked.push(p);
            at = self.parent_of(p);
        };
        if let Some(cg) = &found {
            for p in walked {
                if let Some(info) = self.processes.get_mut(&p) {
                    info.cgroup = Some(cg.clone());
                }
            }
        }
        found
    }

    /// Whether the process is known with its cgroup or its parent: whether its
    /// descendants' cgroup can be found through it.
    pub fn knows_ancestry(&self, pid: u32) -> bool {
        self.processes
            .get(&pid)
            .is_some_and(|p| p.cgroup.is_some() || p.parent.is_some())
    }

    /// Whether the process's cgroup is still to be read.
    pub fn lacks_cgroup(&self, pid: u32) -> bool {
        self.processes.get(&pid).is_some_and(|p| p.cgroup.is_none())
    }

    /// The process of a thread (one of its own when nothing said which).
    pub fn process_of(&mut self, tid: Tid) -> &ProcessInfo {
        let pid = self.thread_pid.get(&tid).copied().unwrap_or(tid);
        self.process_entry(pid)
    }

    /// A thread exited; its process ended with it when it was the main thread. Both stay
    /// known until [`ProcessDirectory::forget_gone`], so that the interval they ended in
    /// is still charged to them.
    pub fn exited(&mut self, tid: Tid) {
        self.gone_threads.push(tid);
        if self.thread_pid.get(&tid).is_none_or(|&pid| pid == tid) {
            self.gone_processes.push(tid);
        }
    }

    /// Forgets what exited (call after the interval is accounted). Returns how many
    /// processes were forgotten.
    pub fn forget_gone(&mut self) -> usize {
        for tid in self.gone_threads.drain(..) {
            self.thread_pid.remove(&tid);
        }
        let mut forgotten = 0;
        for pid in self.gone_processes.drain(..) {
            forgotten += self.processes.remove(&pid).is_some() as usize;
        }
        // Threads of an ended process that were never seen to exit go with it.
        let processes = &self.processes;
        self.thread_pid.retain(|_, pid| processes.contains_key(pid));
        forgotten
    }

    /// Forgets the threads `vanished` says have ended, of processes that live on: a
    /// consumer that does not see every exit (tracing in windows, or records lost) would
    /// otherwise keep every thread a long-lived process ever had. Main threads are left
    /// to their process's exit. Returns how many were forgotten.
    pub fn forget_vanished_threads(&mut self, mut vanished: impl FnMut(Tid) -> bool) -> usize {
        let before = self.thread_pid.len();
        self.thread_pid
            .retain(|&tid, &mut pid| tid == pid || !vanished(tid));
        before - self.thread_pid.len()
    }

    /// Forgets, with their threads, the processes `vanished` says have ended at this call
    /// and at the one before (a sweep period apart): ended processes no exit removed. A
    /// consumer that does not see every exit keeps them otherwise: records lost, a thread
    /// charged before anything named its process (taken as a process of its own), a late
    /// batch's thread row naming a process already forgotten. Two sightings, so that an
    /// ancestor that has just ended still gives its cgroup to a child whose exit is read
    /// after it. Returns how many were forgotten.
    pub fn forget_vanished_processes(&mut self, mut vanished: impl FnMut(u32) -> bool) -> usize {
        let before = self.processes.len();
        let mut now_vanished = HashSet::new();
        let once = &self.vanished_once;
        self.processes.retain(|&pid, _| {
            if !vanished(pid) {
                return true;
            }
            now_vanished.insert(pid);
            !once.contains(&pid)
        });
        let processes = &self.processes;
        self.thread_pid.retain(|_, pid| processes.contains_key(pid));
        now_vanished.retain(|pid| processes.contains_key(pid));
        self.vanished_once = now_vanished;
        before - self.processes.len()
    }

    /// Processes and threads known.
    pub fn len(&self) -> (usize, usize) {
        (self.processes.len(), self.thread_pid.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_map_to_their_process_and_a_reused_pid_is_a_new_process() {
        let mut d = ProcessDirectory::default();
        d.thread(1, Some(1), "init", None);
        d.thread(100, Some(100), "server", Some(1));
        d.thread(101, Some(100), "worker", Some(100));
        assert_eq!(d.parent_of(100), Some(1));
        d.set_cgroup(100, "/system.slice/server.service".into());
        let p = d.process_of(101).clone();
        assert_eq!(
            p.key,
            ProcessKey {
                pid: 100,
                serial: 1
            }
        );
        assert_eq!(p.comm, "server", "the main thread names the process");
        assert_eq!(p.cgroup.as_deref(), Some("/system.slice/server.service"));
        // The worker's own name does not rename the process.
        d.thread(101, Some(100), "worker2", None);
        assert_eq!(d.process_of(100).comm, "server");
        // A process seen through a worker only has no name of its own, yet.
        d.thread(201, Some(200), "worker", None);
        let p = d.process_of(200).clone();
        assert_eq!((p.comm.as_str(), p.any_comm.as_str()), ("", "worker"));
        // Main thread exits: still known until the interval is accounted.
        d.exited(100);
        assert_eq!(d.process_of(101).key.serial, 1);
        assert_eq!(d.forget_gone(), 1);
        assert_eq!(
            d.len(),
            (2, 2),
            "the worker went with its process; init and 200 stay"
        );
        // A new process with the same pid is another one.
        d.thread(100, Some(100), "server", None);
        assert_eq!(
            d.process_of(100).key,
            ProcessKey {
                pid: 100,
                serial: 3
            }
        );
        assert!(d.lacks_cgroup(100));
    }

    /// Issue 29: `sh -c 'seq 300000 | gzip'` run from a shell, read after `sh` and `gzip`
    /// both ended. The old walk stopped after one parent and left 9 of 10 `gzip`s
    /// `unknown`; the cgroup comes from the nearest ancestor that can say, and the
    /// ended parent keeps it for the next child. An orphan whose ancestry is unknown is
    /// `None`.
    #[test]
    fn an_ended_child_of_an_ended_parent_takes_the_nearest_known_cgroup() {
        let mut d = ProcessDirectory::default();
        d.thread(10, Some(10), "bash", None);
        d.thread(20, Some(20), "sh", Some(10));
        d.thread(21, Some(21), "seq", Some(20));
        d.thread(22, Some(22), "gzip", Some(20));
        let mut reads = Vec::new();
        // Only bash lives: procfs answers for it alone.
        let mut procfs = |p: u32| {
            reads.push(p);
            (p == 10).then(|| "/user.slice/session-1.scope".to_string())
        };
        assert_eq!(
            d.cgroup_by_ancestry(22, &mut procfs).as_deref(),
            Some("/user.slice/session-1.scope")
        );
        assert_eq!(reads, [22, 20, 10], "gzip, then sh, then bash");
        assert!(!d.lacks_cgroup(20), "the ended sh keeps what it was given");
        reads.clear();
        let mut procfs = |p: u32| {
            reads.push(p);
            None
        };
        assert_eq!(
            d.cgroup_by_ancestry(21, &mut procfs).as_deref(),
            Some("/user.slice/session-1.scope"),
            "seq stops at its parent"
        );
        assert_eq!(reads, [21]);
        d.thread(30, Some(30), "orphan", None);
        assert_eq!(d.cgroup_by_ancestry(30, |_| None), None);
        // A live child's own cgroup wins over its parent's (moved by systemd or runc).
        d.thread(23, Some(23), "unit", Some(20));
        assert_eq!(
            d.cgroup_by_ancestry(23, |_| Some("/system.slice/x.service".into()))
                .as_deref(),
            Some("/system.slice/x.service")
        );
    }

    #[test]
    fn threads_that_ended_unseen_are_forgotten_and_their_process_kept() {
        let mut d = ProcessDirectory::default();
        d.thread(100, Some(100), "server", None);
        for tid in [101, 102, 103] {
            d.thread(tid, Some(100), "worker", Some(100));
        }
        assert_eq!(d.forget_vanished_threads(|tid| tid == 100 || tid == 102), 1);
        assert_eq!(d.len(), (1, 3), "the main thread stays with its process");
        assert_eq!(d.process_of(101).key.pid, 100);
        assert_eq!(d.process_of(102).key.pid, 102, "forgotten: its own again");
    }

    /// A process gone without an exit seen (its threads with it) is forgotten at the
    /// second sweep that finds it gone, not the first; one that reappears (a pid in use
    /// again) starts over.
    #[test]
    fn processes_that_ended_unseen_are_forgotten_at_the_second_sweep() {
        let mut d = ProcessDirectory::default();
        d.thread(100, Some(100), "server", None);
        d.thread(101, Some(100), "worker", Some(100));
        d.thread(200, Some(200), "batch", None);
        d.thread(300, Some(300), "flaky", None);
        let mut gone = HashSet::from([100, 101, 300]);
        assert_eq!(d.forget_vanished_processes(|pid| gone.contains(&pid)), 0);
        assert_eq!(d.len(), (3, 4), "a first sighting forgets nothing");
        gone.remove(&300);
        assert_eq!(d.forget_vanished_processes(|pid| gone.contains(&pid)), 1);
        assert_eq!(d.len(), (2, 2), "the server and its worker went");
        assert_eq!(d.process_of(200).comm, "batch");
        assert_eq!(d.process_of(300).comm, "flaky");
        gone.insert(300);
        assert_eq!(d.forget_vanished_processes(|pid| gone.contains(&pid)), 0);
        assert_eq!(d.forget_vanished_processes(|pid| gone.contains(&pid)), 1);
        assert_eq!(d.len(), (1, 1));
    }

    #[test]
    fn a_thread_of_unknown_process_is_its_own() {
        let mut d = ProcessDirectory::default();
        assert_eq!(d.process_of(7).key.pid, 7);
        d.thread(8, None, "kworker/0:1", None);
        assert_eq!(d.process_of(8).comm, "kworker/0:1");
        d.set_comm(9, "from-procfs");
        assert_eq!(d.process_of(9).comm, "from-procfs");
    }
}
