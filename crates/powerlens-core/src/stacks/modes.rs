//! User and system CPU time from the stacks of cpu-clock samples. The kernel records its
//! own frames with every CPU-time sample, so a sample taken in the kernel (a system call,
//! a page fault) has a kernel frame innermost; one taken in user space has none.

use std::collections::HashMap;

use super::attribution::StackCharges;
use super::ResolvedStacks;
use crate::sched::event::{StackId, Tid};
use crate::sched::report::RecordingReport;

/// Whether a sample with this stack was taken in the kernel; `None` for a stack without
/// frames (a sample whose stack was not recorded).
pub fn in_kernel(stacks: &ResolvedStacks, id: StackId) -> Option<bool> {
    let innermost = stacks.frames(id).first()?;
    Some(stacks.function(*innermost).module.starts_with("[kernel"))
}

/// Sampled CPU time in user space and in the kernel, nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModeSplit {
    pub user_ns: u64,
    pub system_ns: u64,
}

impl ModeSplit {
    /// `cpu_time_s` split in the samples' proportions; `None` without samples.
    pub fn scaled(self, cpu_time_s: f64) -> Option<(f64, f64)> {
        let sampled = self.user_ns + self.system_ns;
        (sampled > 0).then(|| {
            let system = cpu_time_s * self.system_ns as f64 / sampled as f64;
            (cpu_time_s - system, system)
        })
    }
}

/// Each thread's sampled CPU time by mode (samples with a stack only).
pub fn per_thread(charges: &StackCharges, stacks: &ResolvedStacks) -> HashMap<Tid, ModeSplit> {
    let mut out: HashMap<Tid, ModeSplit> = HashMap::new();
    for ((tid, stack), m) in &charges.by_thread_stack {
        if m.cpu_ns == 0 {
            continue;
        }
        if let Some(kernel) = in_kernel(stacks, *stack) {
            let split = out.entry(*tid).or_default();
            match kernel {
                true => split.system_ns += m.cpu_ns,
                false => split.user_ns += m.cpu_ns,
            }
        }
    }
    out
}

/// Fills the thread and process rows' `user_time_s` and `system_time_s`: each thread's
/// CPU time split as its samples were, a process's the sums of its threads' splits.
pub fn split_rows(report: &mut RecordingReport, charges: &StackCharges, stacks: &ResolvedStacks) {
    let splits = per_thread(charges, stacks);
    let mut by_pid: HashMap<Option<u32>, (f64, f64)> = HashMap::new();
    for t in &mut report.threads {
        let Some((user, system)) = splits.get(&t.tid).and_then(|s| s.scaled(t.cpu_time_s)) else {
            continue;
        };
        (t.metrics.user_time_s, t.metrics.system_time_s) = (Some(user), Some(system));
        let sum = by_pid.entry(t.pid).or_default();
        sum.0 += user;
        sum.1 += system;
    }
    for p in &mut report.processes {
        if let Some((user, system)) = by_pid.get(&p.pid) {
            (p.metrics.user_time_s, p.metrics.system_time_s) = (Some(*user), Some(*system));
        }
    }
}
