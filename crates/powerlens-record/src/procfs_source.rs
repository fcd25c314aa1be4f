//! Every process's CPU time for a live session, from procfs and the kernel's exit
//! notifications (taskstats): what costs the watched processes nothing. `/proc/PID/stat`
//! gives the processes alive at each sample; the exit notifications give what a process
//! ran after its last sample and the whole life of one that began and ended between two.

use std::collections::{HashMap, HashSet};

use powerlens_core::monitor::{ProcessDirectory, ProcessInterval};
use powerlens_sys::taskstats::{ExitListener, ExitScope, TaskExit};
use powerlens_sys::{procfs, Roots};

/// Where exit notifications come from: the kernel's taskstats socket, or a script in tests.
pub(crate) trait ExitSource: Send {
    /// Every exit reported since the last call, in the order they came.
    fn drain(&mut self) -> Vec<TaskExit>;
}

impl ExitSource for ExitListener {
    fn drain(&mut self) -> Vec<TaskExit> {
        ExitListener::drain(self)
    }
}

/// A process's cgroup: read from procfs while it lives, else its nearest ancestor's (a
/// child starts in its parent's cgroup), else unknown. Learned cgroups stay in `directory`.
pub(crate) fn cgroup_by_ancestry(
    roots: &Roots,
    directory: &mut ProcessDirectory,
    pid: u32,
) -> Option<String> {
    directory.cgroup_by_ancestry(pid, |p| {
        procfs::process::read_cgroup(roots, p).ok().flatten()
    })
}

/// How many times one sample reads the exits again for a parent that ended unlisted (each
/// read can reveal a grandparent that did too: a shell's pipeline inside a shell).
const MAX_EXIT_REREADS: usize = 4;

#[derive(Default)]
pub(crate) struct ProcfsSource {
    /// CPU time per (pid, serial) at the last sample.
    last_cpu_ns: HashMap<(u32, u64), u64>,
    /// The kernel's exit notifications, where we may listen: what a process ran after
    /// its last sample, and the processes that lived between two samples.
    exits: Option<Box<dyn ExitSource>>,
    /// Whether the first sample (the baseline) was taken.
    sampled: bool,
    /// Exits of processes the last listing still showed: charged at the next sample.
    carried: HashMap<u32, TaskExit>,
}

impl ProcfsSource {
    /// A sampler that listens to exits where it may (`None`: why it cannot).
    pub(crate) fn open(cpus: &[u32]) -> (ProcfsSource, Option<String>) {
        match ExitListener::open(cpus) {
            Ok(l) => (ProcfsSource::with_exits(Box::new(l)), None),
            Err(e) => (ProcfsSource::default(), Some(e.to_string())),
        }
    }

    fn with_exits(exits: Box<dyn ExitSource>) -> ProcfsSource {
        ProcfsSource {
            exits: Some(exits),
            ..ProcfsSource::default()
        }
    }

    /// Every process's CPU time since the last sample (procfs's utime + stime). A process
    /// that ended since is charged up to its end, and one that lived between two samples
    /// its whole life, from the kernel's exit notifications; without them, a process that
    /// ended loses its last partial interval and a short-lived one is not seen.
    pub(crate) fn sample(
        &mut self,
        roots: &Roots,
        directory: &mut ProcessDirectory,
    ) -> Vec<ProcessInterval> {
        let mut seen = HashMap::new();
        let mut out = Vec::new();
        for pid in procfs::tasks::process_ids(roots).unwrap_or_default() {
            let Ok(stat) = procfs::process::read_process(roots, pid) else {
                continue;
            };
            // The parent too: the ancestry a child that ends unread takes its cgroup from.
            directory.thread(pid, Some(pid), &stat.comm, stat.ppid);
            let info = directory.process_of(pid).clone();
            let key = (pid, info.key.serial);
            // A process first seen now began since the last sample, and all it ran is in
            // this interval; at the first sample, what every process ran before is the
            // baseline.
            let before = match self.last_cpu_ns.get(&key) {
                Some(&before) => Some(before),
                None => self.sampled.then_some(0),
            };
            if let Some(before) = before {
                let runtime_ns = stat.cpu_time_ns.saturating_sub(before);
                if runtime_ns > 0 {
                    out.push(ProcessInterval::cpu_only(info, runtime_ns));
                }
            }
            seen.insert(key, stat.cpu_time_ns);
        }
        // The exits are read after the listing: a process not listed has ended before it,
        // or began after it, and in both cases its exit is among them when it has ended.
        // One listed that ended since is charged at the next sample, where it is no
        // longer listed.
        let listed: HashSet<u32> = seen.keys().map(|&(pid, _)| pid).collect();
        let mut ended = std::mem::take(&mut self.carried);
        self.read_exits(&mut ended);
        self.learn_unlisted_parents(roots, directory, &listed, &mut ended);
        let (carry, ended): (HashMap<u32, TaskExit>, HashMap<u32, TaskExit>) =
            ended.into_iter().partition(|(pid, _)| listed.contains(pid));
        self.carried = carry;
        // Processes no longer listed ended: charge what they ran since their last sample,
        // then forget them.
        for (&(pid, _), &before) in &self.last_cpu_ns {
            if listed.contains(&pid) {
                continue;
            }
            if let Some(end) = ended.get(&pid) {
                let runtime_ns = end.cpu_until_end_ns().saturating_sub(before);
                if runtime_ns > 0 {
                    out.push(ProcessInterval::cpu_only(
                        directory.process_of(pid).clone(),
                        runtime_ns,
                    ));
                }
            }
            directory.exited(pid);
        }
        // Processes that began and ended between two samples: their whole life.
        for (&pid, end) in &ended {
            let known = self.last_cpu_ns.keys().any(|&(p, _)| p == pid);
            if known {
                continue;
            }
            // Known even when it ran nothing: its children's cgroup comes through it.
            directory.thread(
                pid,
                Some(pid),
                &end.comm,
                (end.ppid > 0).then_some(end.ppid),
            );
            directory.exited(pid);
            let runtime_ns = end.cpu_until_end_ns();
            if runtime_ns == 0 {
                continue;
            }
            out.push(ProcessInterval::cpu_only(
                directory.process_of(pid).clone(),
                runtime_ns,
            ));
        }
        self.last_cpu_ns = seen;
        self.sampled = true;
        out
    }

    /// Makes the parent of every process that ended unlisted known, so that its cgroup
    /// can be found through it. Such a parent may have begun after the listing too (a
    /// `sh -c 'seq | gzip'` that started, and whose `seq` ended, between the listing and
    /// the exits' read), and end before anyone reads its cgroup: it is read now while the
    /// parent lives. A parent already gone from /proc has ended, and the kernel sends a
    /// process's exit before it leaves /proc, so its exit (with its own parent) is
    /// waiting: the exits are read once more.
    fn learn_unlisted_parents(
        &mut self,
        roots: &Roots,
        directory: &mut ProcessDirectory,
        listed: &HashSet<u32>,
        ended: &mut HashMap<u32, TaskExit>,
    ) {
        for _ in 0..MAX_EXIT_REREADS {
            let mut unknown: Vec<u32> = ended
                .values()
                .map(|e| e.ppid)
                .filter(|&p| {
                    p > 0
                        && !listed.contains(&p)
                        && !ended.contains_key(&p)
                        && !directory.knows_ancestry(p)
                })
                .collect();
            unknown.sort_unstable();
            unknown.dedup();
            let mut gone = false;
            for pid in unknown {
                match procfs::process::read_process(roots, pid) {
                    Ok(stat) => {
                        directory.thread(pid, Some(pid), &stat.comm, stat.ppid);
                        // Now, while it lives; if it ends before its cgroup is read, its
                        // own parent (just learned) gives it.
                        cgroup_by_ancestry(roots, directory, pid);
                    }
                    Err(_) => gone = true,
                }
            }
            if !gone {
                return;
            }
            self.read_exits(ended);
        }
    }

    /// Adds the processes that ended since the last read to `ended`, by pid: a
    /// multi-threaded one's total, or a single-threaded one's only thread.
    fn read_exits(&mut self, ended: &mut HashMap<u32, TaskExit>) {
        let Some(listener) = &mut self.exits else {
            return;
        };
        for exit in listener.drain() {
            match exit.scope {
                ExitScope::Process => {
                    // The last thread's record came first: keep its name and parent.
                    let (comm, ppid) = ended
                        .get(&exit.id)
                        .map(|e| (e.comm.clone(), e.ppid))
                        .unwrap_or_default();
                    ended.insert(exit.id, TaskExit { comm, ppid, ..exit });
                }
                // A process's main thread: its end, unless its total follows. Other threads'
                // time is in their process's total (and in /proc while it lives).
                ExitScope::Thread if exit.tgid.is_none_or(|tgid| tgid == exit.id) => {
                    ended.insert(exit.id, exit);
                }
                ExitScope::Thread => {
                    if let Some(tgid) = exit.tgid {
                        // The last thread of a process whose main thread ended before it:
                        // its name and parent name the process when its total comes. It
                        // stands for that total (a process's), with no CPU time of its own.
                        ended.entry(tgid).or_insert(TaskExit {
                            id: tgid,
                            cpu_ns: 0,
                            scope: ExitScope::Process,
                            ..exit
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use powerlens_sys::fixture::FixtureTree;

    use super::*;

    /// A scripted exit socket: each drain takes the next step, which may change the
    /// fixture's /proc (a process appearing or leaving as the kernel would) before its
    /// exits are read.
    type Step = Box<dyn FnOnce() -> Vec<TaskExit> + Send>;

    struct ScriptedExits(Arc<Mutex<VecDeque<Step>>>);

    impl ExitSource for ScriptedExits {
        fn drain(&mut self) -> Vec<TaskExit> {
            let step = self.0.lock().unwrap().pop_front();
            step.map(|f| f()).unwrap_or_default()
        }
    }

    /// `/proc/PID/{stat,cgroup}` of a live process with `ticks` of CPU time.
    fn alive(root: &std::path::Path, pid: u32, comm: &str, ppid: u32, cgroup: &str, ticks: u64) {
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let stat = format!(
            "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 100 0 0 0 {ticks} 0 0 0 20 0 1 0 100 1000 100"
        );
        std::fs::write(dir.join("stat"), stat).unwrap();
        std::fs::write(dir.join("cgroup"), format!("0::{cgroup}\n")).unwrap();
    }

    /// A single-threaded process's end, as taskstats reports it.
    fn exit(pid: u32, ppid: u32, comm: &str, cpu_ns: u64) -> TaskExit {
        TaskExit {
            id: pid,
            ppid,
            tgid: Some(pid),
            comm: comm.into(),
            cpu_ns,
            slices: 1,
            queued_ns: 0,
            elapsed_ns: cpu_ns,
            voluntary_switches: 1,
            scope: ExitScope::Thread,
        }
    }

    /// The churn of `agent_churn.rs`: a long-lived driver (100) runs `sh -c 'seq | gzip'`
    /// (101, 102) over and over. Sampled at the first interval (the baseline) with the
    /// driver alone, then with the steps given.
    fn second_sample(
        tree: &FixtureTree,
        steps: Vec<Step>,
    ) -> (ProcessDirectory, Vec<ProcessInterval>) {
        let proc_root = tree.proc_path("");
        alive(&proc_root, 100, "plchurn-sh", 1, "/churn.scope", 5);
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let mut sampler = ProcfsSource::with_exits(Box::new(ScriptedExits(script.clone())));
        let mut directory = ProcessDirectory::default();
        sampler.sample(&tree.roots(), &mut directory);
        script.lock().unwrap().extend(steps);
        let out = sampler.sample(&tree.roots(), &mut directory);
        (directory, out)
    }

    fn cgroup(tree: &FixtureTree, directory: &mut ProcessDirectory, pid: u32) -> Option<String> {
        cgroup_by_ancestry(&tree.roots(), directory, pid)
    }

    #[test]
    fn a_child_whose_parent_began_after_the_listing_finds_its_cgroup_through_it() {
        // The shell starts after the listing, and its `seq` ends before the exits are read;
        // the shell ends just after (before anyone asks for the child's cgroup).
        let tree = FixtureTree::new();
        let proc_root = tree.proc_path("");
        let shell_starts = proc_root.clone();
        let (mut directory, out) = second_sample(
            &tree,
            vec![Box::new(move || {
                alive(&shell_starts, 101, "plchurn-sh", 100, "/churn.scope", 0);
                vec![exit(102, 101, "plchurn-seq", 1_000_000)]
            })],
        );
        std::fs::remove_dir_all(proc_root.join("101")).unwrap();
        assert!(out
            .iter()
            .any(|p| p.info.key.pid == 102 && p.runtime_ns == 1_000_000));
        assert_eq!(
            cgroup(&tree, &mut directory, 102).as_deref(),
            Some("/churn.scope")
        );
    }

    #[test]
    fn a_parent_that_ended_unlisted_too_is_read_from_the_exits_that_follow() {
        // Shell and child both began after the listing and ended before the exits' read,
        // but the shell's exit came after the first read: it waits in the socket, since
        // it is sent before the shell leaves /proc.
        let tree = FixtureTree::new();
        let (mut directory, out) = second_sample(
            &tree,
            vec![
                Box::new(|| vec![exit(102, 101, "plchurn-seq", 1_000_000)]),
                Box::new(|| vec![exit(101, 100, "plchurn-sh", 300_000)]),
            ],
        );
        assert_eq!(
            cgroup(&tree, &mut directory, 102).as_deref(),
            Some("/churn.scope")
        );
        // The shell is charged its life in this interval, as a process that began and
        // ended between two samples.
        let shell = out
            .iter()
            .find(|p| p.info.key.pid == 101)
            .expect("the shell");
        assert_eq!(
            (shell.runtime_ns, shell.info.comm.as_str()),
            (300_000, "plchurn-sh")
        );
    }

    #[test]
    fn an_orphan_of_an_unknown_parent_stays_unknown_after_a_bounded_search() {
        // Its parent is neither listed, nor alive, nor among any exit: no cgroup to give,
        // and the exits are read a bounded number of times, not forever.
        let tree = FixtureTree::new();
        let reads = Arc::new(Mutex::new(0));
        let steps: Vec<Step> = (0..10)
            .map(|i| {
                let reads = reads.clone();
                Box::new(move || {
                    *reads.lock().unwrap() += 1;
                    if i == 0 {
                        vec![exit(102, 555, "plchurn-seq", 1_000_000)]
                    } else {
                        Vec::new()
                    }
                }) as Step
            })
            .collect();
        let (mut directory, _) = second_sample(&tree, steps);
        assert_eq!(cgroup(&tree, &mut directory, 102), None);
        assert_eq!(*reads.lock().unwrap(), 1 + MAX_EXIT_REREADS);
    }
}
