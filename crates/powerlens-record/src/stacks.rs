//! The recorder's side of call stacks: each stack record's kernel frames and unwound user
//! frames become (module, offset) frames while the process's mappings are known, and each
//! distinct stack gets an id once. The ids go into the event stream (a `Stack` event after
//! the event it belongs to); new modules and stacks go to the file with the next batch.

use std::collections::HashMap;

use powerlens_core::sched::event::StackId;
use powerlens_core::stacks::{encode_frames, FrameRef};
use powerlens_sys::symbolize::{perf_map, KERNEL_MODULE, UNKNOWN_MODULE};
use powerlens_sys::trace::{Callchain, MmapRecord, UserRegs};
use powerlens_sys::unwind::{UnwindStats, UserUnwinder};
use powerlens_sys::Roots;

/// The tracepoints whose records carry stacks: where a thread blocks or is preempted, who
/// wakes whom, who arms the timers that later end idle periods.
pub const STACK_EVENTS: [&str; 5] = [
    "sched/sched_switch",
    "sched/sched_waking",
    "sched/sched_wakeup",
    "timer/hrtimer_start",
    "timer/timer_start",
];

fn intern_module(
    modules: &mut HashMap<String, u32>,
    new: &mut Vec<(u32, String)>,
    path: &str,
) -> u32 {
    if let Some(&id) = modules.get(path) {
        return id;
    }
    let id = modules.len() as u32;
    modules.insert(path.to_string(), id);
    new.push((id, path.to_string()));
    id
}

/// Modules (id, path) and stacks (id, encoded frames) first seen since the last batch.
pub type NewEntries = (Vec<(u32, String)>, Vec<(StackId, Vec<u8>)>);

/// What one stack record holds.
pub struct RawStack<'a> {
    pub pid: u32,
    pub callchain: Callchain<'a>,
    pub user_regs: Option<UserRegs>,
    pub user_stack: &'a [u8],
}

pub struct StackRecorder {
    unwinder: UserUnwinder,
    modules: HashMap<String, u32>,
    stacks: HashMap<Vec<u8>, StackId>,
    /// By pid: the module of the process's JIT code, its perf map ([`perf_map`]).
    jit_modules: HashMap<u32, u32>,
    /// Created since the last [`StackRecorder::take_new`].
    new_modules: Vec<(u32, String)>,
    new_stacks: Vec<(StackId, Vec<u8>)>,
    // Scratch buffers, reused for every record.
    fp_user: Vec<u64>,
    user: Vec<u64>,
    frames: Vec<FrameRef>,
    blob: Vec<u8>,
}

impl StackRecorder {
    pub fn new(roots: &Roots) -> Self {
        let mut s = StackRecorder {
            unwinder: UserUnwinder::new(roots),
            modules: HashMap::new(),
            stacks: HashMap::new(),
            jit_modules: HashMap::new(),
            new_modules: Vec::new(),
            new_stacks: Vec::new(),
            fp_user: Vec::new(),
            user: Vec::new(),
            frames: Vec::new(),
            blob: Vec::new(),
        };
        s.module(KERNEL_MODULE);
        s.module(UNKNOWN_MODULE);
        s
    }

    fn module(&mut self, path: &str) -> u32 {
        intern_module(&mut self.modules, &mut self.new_modules, path)
    }

    pub fn mmap(&mut self, r: MmapRecord) {
        self.unwinder.add_mapping(r.pid, r.mapping, r.time_ns);
    }

    pub fn exec(&mut self, pid: u32, time_ns: u64) {
        self.unwinder.exec(pid, time_ns);
    }

    /// `pid`'s entry is done with (its process exited, or it is an exited thread whose
    /// clone made one): its mappings are dropped after the next drain.
    pub fn exit(&mut self, pid: u32, time_ns: u64) {
        self.unwinder.exit(pid, time_ns);
    }

    /// Called after each drain of all CPUs (see `UserUnwinder::forget_exited`).
    pub fn forget_exited(&mut self) {
        self.unwinder.forget_exited();
    }

    /// A new process `child` starts with a copy of `parent`'s address space. The times
    /// matter: records come CPU by CPU, so a fork may be drained after the child's exec.
    pub fn fork(&mut self, parent_pid: u32, child: u32, time_ns: u64) {
        if parent_pid != child {
            self.unwinder.fork(parent_pid, child, time_ns);
        }
    }

    /// The id of a record's stack; `None` when the record has no frames, or is the idle
    /// task's.
    pub fn intern(&mut self, raw: &RawStack<'_>) -> Option<StackId> {
        // The idle task's stacks are the idle loop's kernel frames (its switch-outs, the
        // tick timer it re-arms, wake-ups from interrupts it serves): a third of a
        // switch-bound recording's stacks, and nothing an application owns.
        if raw.pid == 0 || (raw.callchain.is_empty() && raw.user_regs.is_none()) {
            return None;
        }
        let kernel = self.module(KERNEL_MODULE);
        self.frames.clear();
        self.frames.extend(
            raw.callchain
                .frames()
                .filter(|f| !f.user)
                .map(|f| FrameRef {
                    module: kernel,
                    offset: f.ip,
                }),
        );
        raw.callchain.user_ips(&mut self.fp_user);
        self.unwinder.user_frames(
            raw.pid,
            raw.user_regs,
            raw.user_stack,
            &self.fp_user,
            &mut self.user,
        );
        // Sorted by address, not overlapping (the unwinder trims overlaps).
        let maps = self.unwinder.maps(raw.pid);
        for &addr in &self.user {
            let i = maps.partition_point(|m| m.end <= addr);
            let frame = match maps.get(i).filter(|m| m.contains(addr)) {
                // JIT code: filed under the process's perf map, by address (what the map
                // lists), so that the end of the recording names it from the map. One
                // `//anon` module for every process could not tell whose map to read.
                Some(m) if perf_map::is_jit_mapping(&m.path) => FrameRef {
                    module: *self.jit_modules.entry(raw.pid).or_insert_with(|| {
                        intern_module(
                            &mut self.modules,
                            &mut self.new_modules,
                            &perf_map::module_path(raw.pid),
                        )
                    }),
                    offset: addr,
                },
                Some(m) => FrameRef {
                    module: intern_module(&mut self.modules, &mut self.new_modules, &m.path),
                    offset: m.file_offset_of(addr),
                },
                None => FrameRef {
                    module: intern_module(&mut self.modules, &mut self.new_modules, UNKNOWN_MODULE),
                    offset: addr,
                },
            };
            self.frames.push(frame);
        }
        if self.frames.is_empty() {
            return None;
        }
        self.blob.clear();
        encode_frames(&self.frames, &mut self.blob);
        if let Some(&id) = self.stacks.get(&self.blob) {
            return Some(id);
        }
        let id = self.stacks.len() as StackId;
        self.stacks.insert(self.blob.clone(), id);
        self.new_stacks.push((id, self.blob.clone()));
        Some(id)
    }

    /// A kernel function's address that events carry (a timer callback): stored once as a
    /// one-frame kernel stack, so that the symbolization at the end of the recording names
    /// it from this boot's kallsyms, and reports find the name in the symbol cache
    /// (`record::symbols`). No event refers to that stack.
    pub fn kernel_function(&mut self, addr: u64) {
        if addr == 0 {
            return;
        }
        let kernel = self.module(KERNEL_MODULE);
        self.blob.clear();
        encode_frames(
            &[FrameRef {
                module: kernel,
                offset: addr,
            }],
            &mut self.blob,
        );
        if !self.stacks.contains_key(&self.blob) {
            let id = self.stacks.len() as StackId;
            self.stacks.insert(self.blob.clone(), id);
            self.new_stacks.push((id, self.blob.clone()));
        }
    }

    /// Modules and stacks first seen since the last call, for the file.
    pub fn take_new(&mut self) -> NewEntries {
        (
            std::mem::take(&mut self.new_modules),
            std::mem::take(&mut self.new_stacks),
        )
    }

    pub fn distinct_stacks(&self) -> usize {
        self.stacks.len()
    }

    pub fn unwind_stats(&self) -> UnwindStats {
        self.unwinder.stats()
    }
}
