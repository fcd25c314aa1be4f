//! User-stack unwinding with DWARF CFI, for programs and libraries built without frame
//! pointers (Debian's glibc among them).
//!
//! The kernel's frame-pointer call chain loses frames wherever code keeps no frame
//! pointer: a libc leaf such as `clock_nanosleep` hides its caller (`short_sleeper` is
//! missing between `clock_nanosleep` and `main`), and code that uses rbp as a general
//! register ends the chain (`pthread_cond_wait` stops at `__futex_abstimed_wait_common`).
//! [`UserUnwinder`] unwinds the user registers and the copy of the top of the user stack
//! that stack records carry ([`crate::trace::CollectorOptions::stack_events`]) with the
//! `.eh_frame` of every module mapped there (framehop), then continues with the kernel's
//! frame-pointer chain where the copy ends.
//!
//! ```no_run
//! use powerlens_sys::trace::{Collected, Collector};
//! use powerlens_sys::unwind::UserUnwinder;
//! use powerlens_sys::Roots;
//! # fn f(collector: &mut Collector) {
//! let mut unwinder = UserUnwinder::new(&Roots::default());
//! let (mut fp, mut user) = (Vec::new(), Vec::new());
//! collector.drain_all(|c| match c {
//!     Collected::Mmap(m) => unwinder.add_mapping(m.pid, m.mapping, m.time_ns),
//!     Collected::Comm(c) if c.exec => unwinder.exec(c.pid, c.time_ns),
//!     Collected::Trace(r) => {
//!         r.callchain.user_ips(&mut fp);
//!         unwinder.user_frames(r.pid, r.user_regs, r.user_stack, &fp, &mut user);
//!         // user[0] is the instruction pointer, user[1..] return addresses.
//!     }
//!     _ => {}
//! });
//! # }
//! ```
//!
//! Address convention of the frames produced: the first is the exact instruction pointer,
//! every other is a *return address* (the instruction after the call), as in the kernel's
//! call chains; a symbolizer looks up `address - 1` for those to land inside the call.
//!
//! Order: the collector hands records over CPU by CPU, so a process's fork (on its
//! parent's CPU) can come after its exec and the new image's mappings (on its own CPU)
//! when the drain falls behind, as it does on a saturated machine. Every change therefore
//! carries its record's time, and a change older than the process's current image (its
//! latest fork, exec or `/proc` snapshot) is ignored instead of undoing it.

mod address_space;
mod module;
mod splice;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::Unwinder as _;

use crate::procfs::maps::{read_executable_maps, Mapping};
use crate::trace::{monotonic_now_ns, UserRegs};
use crate::Roots;

use address_space::AddressSpace;
use module::{ModuleSections, SectionBytes};

/// Frames per stack at most, past which a (corrupt or endlessly recursive) stack is cut.
pub const MAX_FRAMES: usize = 256;

/// How often at most the mappings of a process are re-read from `/proc` because a stack
/// of it points outside every known mapping (a mapping made before recording whose record
/// we never saw, or one whose MMAP2 record comes later in the drain).
const REFRESH_INTERVAL: Duration = Duration::from_millis(100);

/// framehop's rule cache is keyed by a global 16-bit count of module-list changes; it is
/// replaced before that count could wrap and make an old entry look current.
const CACHE_GENERATIONS: u32 = 30_000;

/// How the stacks went, for the recording's notes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnwindStats {
    /// Calls to [`UserUnwinder::user_frames`].
    pub stacks: u64,
    /// Unwound to the root of the stack within the copied bytes.
    pub complete: u64,
    /// Unwound to the end of the copy, then continued with the frame-pointer chain.
    pub spliced: u64,
    /// Returned the frame-pointer chain as it was: no registers or stack copy, or no
    /// mappings known for the process.
    pub fp_only: u64,
    /// Module files whose unwind information could not be read (deleted, unreadable, not
    /// ELF): frame pointers only in them.
    pub unreadable_modules: u64,
    /// Re-reads of `/proc/PID/maps` for addresses outside every known mapping.
    pub maps_refreshes: u64,
    /// Processes forgotten after they exited (see [`UserUnwinder::exit`]).
    pub processes_forgotten: u64,
}

/// The per-process state.
#[derive(Default)]
struct Process {
    space: AddressSpace,
    /// When the current image began (CLOCK_MONOTONIC ns): the latest fork, exec or
    /// `/proc` snapshot applied. Changes older than this are stale.
    image_ns: u64,
    /// Set by [`UserUnwinder::exit`]: the [`UserUnwinder::forget_exited`] round in which
    /// the exit was seen.
    exited_in_round: Option<u64>,
    /// framehop's view of `space`, built on first use after each change.
    unwinder: Option<UnwinderX86_64<SectionBytes>>,
    /// When `/proc/PID/maps` was last read for it.
    refreshed: Option<Instant>,
}

/// Unwinds the user stacks of many processes: their executable mappings (from `/proc`
/// snapshots, MMAP2 records, fork and exec), the unwind information of every module file
/// (read once on first use, shared by all processes that map it) and framehop's cache of
/// unwind rules. Meant to live in the recorder's drain thread: `user_frames` does not
/// allocate once its buffers have grown, except when it meets a new process or module.
pub struct UserUnwinder {
    roots: Roots,
    processes: HashMap<u32, Process>,
    /// Per module path; `None` for a file whose unwind information cannot be read.
    modules: HashMap<String, Option<Arc<ModuleSections>>>,
    cache: Box<CacheX86_64>,
    modules_added: u32,
    /// Calls to [`UserUnwinder::forget_exited`] so far.
    forget_rounds: u64,
    stats: UnwindStats,
}

impl std::fmt::Debug for UserUnwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserUnwinder")
            .field("processes", &self.processes.len())
            .field("modules", &self.modules.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl UserUnwinder {
    /// An unwinder that reads `/proc/PID/maps` (and `/proc/PID/map_files` for deleted
    /// files) under `roots.procfs`.
    pub fn new(roots: &Roots) -> Self {
        UserUnwinder {
            roots: roots.clone(),
            processes: HashMap::new(),
            modules: HashMap::new(),
            cache: Box::new(CacheX86_64::new()),
            modules_added: 0,
            forget_rounds: 0,
            stats: UnwindStats::default(),
        }
    }

    /// Counts so far.
    pub fn stats(&self) -> UnwindStats {
        self.stats
    }

    /// Takes `pid`'s executable mappings from `/proc/PID/maps` now (replacing what was
    /// known). Not required: a process is read on its first stack when nothing is known
    /// of it, but by then a short-lived one may be gone.
    ///
    /// A process that has exited but is not reaped yet still has its `/proc` entry, with
    /// no mappings: that is an error here, not its image. Taken as one, it replaced what
    /// the records had said about the process, as of now, so every record of its life
    /// drained after that (all of a short program's, when the drain was behind) found no
    /// mappings and was unwound from frame pointers under the unknown module.
    pub fn snapshot(&mut self, pid: u32) -> Result<(), crate::SysError> {
        let maps = read_executable_maps(&self.roots, pid)?;
        if maps.is_empty() {
            return Err(crate::SysError::Unavailable {
                what: format!("the mappings of process {pid}"),
                reason: "it has exited (its /proc maps are empty)".into(),
                fix: None,
            });
        }
        self.set_maps(pid, maps, monotonic_now_ns());
        self.process(pid).refreshed = Some(Instant::now());
        Ok(())
    }

    /// Sets `pid`'s executable mappings as they were at `seen_ns` (e.g. a `/proc`
    /// snapshot): records older than that change nothing.
    pub fn set_maps(&mut self, pid: u32, maps: Vec<Mapping>, seen_ns: u64) {
        let process = self.process(pid);
        process.space = AddressSpace::from_maps(maps, seen_ns);
        process.image_ns = seen_ns;
        process.unwinder = None;
    }

    /// A new executable mapping of `pid` made at `time_ns` (an
    /// [`crate::trace::MmapRecord`]). For a process not seen before, its current `/proc`
    /// mappings are read first, when it still exists. A mapping older than the process's
    /// current image belonged to the image an exec replaced (or is in a snapshot already).
    pub fn add_mapping(&mut self, pid: u32, mapping: Mapping, time_ns: u64) {
        if !self.processes.contains_key(&pid) {
            let _ = self.snapshot(pid);
        }
        let process = self.process(pid);
        if time_ns < process.image_ns {
            return;
        }
        process.space.insert(mapping, time_ns);
        process.unwinder = None;
    }

    /// `child` was forked from `parent` at `time_ns` (sched_process_fork): it starts with
    /// the parent's mappings, plus any of its own made after the fork that were drained
    /// first. Ignored when the child's image is newer (its exec was drained first). With
    /// the parent unknown the child starts empty (read from `/proc` on first use), not with
    /// the mappings of an earlier process that had its pid.
    pub fn fork(&mut self, parent: u32, child: u32, time_ns: u64) {
        let inherited = self.processes.get(&parent).map(|p| p.space.clone());
        let process = self.process(child);
        if time_ns < process.image_ns {
            return;
        }
        let mut space = inherited.unwrap_or_default();
        for (mapping, mapped_ns) in process.space.since(time_ns) {
            space.insert(mapping.clone(), mapped_ns);
        }
        process.space = space;
        process.image_ns = time_ns;
        process.exited_in_round = None; // a reused pid
        process.unwinder = None;
        process.refreshed = None; // a new image: /proc may be read for it at once
    }

    /// `pid` called exec at `time_ns`: the old image's mappings are gone; the new image's
    /// come as MMAP2 records (those drained before the exec are kept).
    pub fn exec(&mut self, pid: u32, time_ns: u64) {
        let process = self.process(pid);
        if time_ns < process.image_ns {
            return;
        }
        process.space.retain_since(time_ns);
        process.image_ns = time_ns;
        process.unwinder = None;
        process.refreshed = None;
    }

    /// The entry for `pid` is done with at `time_ns`: the whole process exited (its last
    /// thread; sched_process_exit with `group_dead`), or `pid` is a thread that exited and
    /// the entry was made by [`UserUnwinder::fork`], which cannot tell a thread's clone from
    /// a new process. It is forgotten by the second [`UserUnwinder::forget_exited`] after
    /// this, not now: records of other threads on CPUs drained later may still need it.
    /// Ignored when older than the entry's current image (a reused pid).
    pub fn exit(&mut self, pid: u32, time_ns: u64) {
        let round = self.forget_rounds;
        if let Some(process) = self.processes.get_mut(&pid) {
            if time_ns >= process.image_ns {
                process.exited_in_round = Some(round);
            }
        }
    }

    /// Forgets the processes whose exit was seen before the previous call. Call it after
    /// each drain of all CPUs: everything recorded before an exit has been drained by the
    /// end of the drain after the one that saw the exit.
    pub fn forget_exited(&mut self) {
        let round = self.forget_rounds;
        let before = self.processes.len();
        self.processes
            // Exits seen during the drain that just ended wait one more round.
            .retain(|_, p| p.exited_in_round.is_none_or(|seen| seen >= round));
        self.stats.processes_forgotten += (before - self.processes.len()) as u64;
        self.forget_rounds += 1;
    }

    /// The executable mappings known for `pid`, in address order.
    pub fn maps(&self, pid: u32) -> &[Mapping] {
        self.processes.get(&pid).map_or(&[], |p| p.space.maps())
    }

    fn process(&mut self, pid: u32) -> &mut Process {
        self.processes.entry(pid).or_default()
    }

    /// The user call stack of a record of process `pid`, innermost first, into `out`
    /// (cleared first): unwound from `regs` through `stack` (the copy of the user stack
    /// from `regs.sp` up) with DWARF CFI where modules have it and frame pointers where
    /// they do not; where the copy ends before the stack's root, continued with the
    /// kernel's frame-pointer chain `fp_chain_user` after the deepest frame both share
    /// (see `splice`). Without registers or stack bytes, or when nothing is known of the
    /// process, `out` is `fp_chain_user` unchanged.
    ///
    /// `out[0]` is the instruction pointer, the rest are return addresses (see the module
    /// documentation).
    pub fn user_frames(
        &mut self,
        pid: u32,
        regs: Option<UserRegs>,
        stack: &[u8],
        fp_chain_user: &[u64],
        out: &mut Vec<u64>,
    ) {
        out.clear();
        self.stats.stacks += 1;
        let Some(regs) = regs.filter(|r| r.ip != 0 && !stack.is_empty()) else {
            self.stats.fp_only += 1;
            out.extend_from_slice(fp_chain_user);
            return;
        };
        self.refresh_if_unknown(pid, regs.ip);
        let built = self.build_unwinder(pid);
        let Some(unwinder) = built
            .then(|| self.processes.get(&pid)?.unwinder.as_ref())
            .flatten()
        else {
            self.stats.fp_only += 1;
            out.extend_from_slice(fp_chain_user);
            return;
        };
        let mut read_stack = |addr: u64| {
            let at = usize::try_from(addr.checked_sub(regs.sp).ok_or(())?).map_err(|_| ())?;
            let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(bytes.try_into().unwrap()))
        };
        let mut frames = unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            &mut self.cache,
            &mut read_stack,
        );
        // Ok(None): framehop found the root; an error: usually a read past the copy.
        let complete = loop {
            match frames.next() {
                Ok(Some(frame)) if out.len() < MAX_FRAMES => out.push(frame.address()),
                Ok(Some(_)) => break true,
                Ok(None) => break true,
                Err(_) => break false,
            }
        };
        if complete {
            self.stats.complete += 1;
        } else if splice::splice_fp_chain(out, fp_chain_user) {
            self.stats.spliced += 1;
            out.truncate(MAX_FRAMES);
        }
    }

    /// Re-reads the mappings of `pid` when `ip` lies outside all of them (or none are
    /// known), at most every [`REFRESH_INTERVAL`].
    fn refresh_if_unknown(&mut self, pid: u32, ip: u64) {
        let known = self.processes.get(&pid);
        if known.is_some_and(|p| p.space.covers(ip))
            || known
                .and_then(|p| p.refreshed)
                .is_some_and(|at| at.elapsed() < REFRESH_INTERVAL)
        {
            return;
        }
        self.stats.maps_refreshes += 1;
        if self.snapshot(pid).is_err() {
            // Gone: do not try again before the interval.
            self.process(pid).refreshed = Some(Instant::now());
        }
    }

    /// Builds framehop's unwinder for `pid` from its mappings unless it is built; false
    /// when no mapping is known.
    fn build_unwinder(&mut self, pid: u32) -> bool {
        let Some(process) = self.processes.get(&pid) else {
            return false;
        };
        if process.space.maps().is_empty() {
            return false;
        }
        if process.unwinder.is_none() {
            let maps = process.space.maps().to_vec();
            let mut unwinder = UnwinderX86_64::new();
            for mapping in &maps {
                if let Some(sections) = self.module_sections(pid, mapping) {
                    unwinder.add_module(sections.module(mapping));
                    self.modules_added += 1;
                }
            }
            if self.modules_added >= CACHE_GENERATIONS {
                *self.cache = CacheX86_64::new();
                self.modules_added = 0;
            }
            self.process(pid).unwinder = Some(unwinder);
        }
        true
    }

    /// The unwind information of the file mapped by `mapping`, read on first use.
    fn module_sections(&mut self, pid: u32, mapping: &Mapping) -> Option<Arc<ModuleSections>> {
        if let Some(known) = self.modules.get(&mapping.path) {
            return known.clone();
        }
        let loaded = match mapping.path.as_str() {
            "[vdso]" => module::own_vdso().and_then(|image| ModuleSections::parse(&image)),
            path if path.starts_with('/') => {
                ModuleSections::read_file(path.as_ref()).or_else(|first| {
                    // Deleted or replaced since it was mapped, or in another mount
                    // namespace: the process's own handle on the mapping still reads it.
                    let handle = self.roots.proc(format!(
                        "{pid}/map_files/{:x}-{:x}",
                        mapping.start, mapping.end
                    ));
                    ModuleSections::read_file(&handle).map_err(|_| first)
                })
            }
            other => Err(format!("{other} has no file")),
        };
        let sections = loaded.ok().map(Arc::new);
        if sections.is_none() {
            self.stats.unreadable_modules += 1;
        }
        self.modules.insert(mapping.path.clone(), sections.clone());
        sections
    }
}

#[cfg(test)]
mod live_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::FixtureTree;

    fn mapping(start: u64, path: &str) -> Mapping {
        Mapping {
            start,
            end: start + 0x1000,
            file_offset: 0,
            path: path.to_string(),
        }
    }

    #[test]
    fn without_registers_or_mappings_the_fp_chain_is_returned_as_is() {
        let tree = FixtureTree::new();
        let mut u = UserUnwinder::new(&tree.roots());
        let fp = [0x40_1000, 0x40_2000];
        let mut out = vec![1, 2, 3];
        u.user_frames(7, None, &[0; 64], &fp, &mut out);
        assert_eq!(out, fp);
        // Registers but a process that /proc does not know.
        let regs = UserRegs {
            ip: 0x40_1000,
            sp: 0x7ff0_0000,
            bp: 0,
        };
        u.user_frames(7, Some(regs), &[0; 64], &fp, &mut out);
        assert_eq!(out, fp);
        assert_eq!(u.stats().fp_only, 2);
        assert_eq!(u.stats().maps_refreshes, 1);
        // Within the refresh interval /proc is not read again.
        u.user_frames(7, Some(regs), &[0; 64], &fp, &mut out);
        assert_eq!(u.stats().maps_refreshes, 1);
    }

    /// An exited process not yet reaped reads as an empty `/proc/PID/maps`. A stack of its
    /// old image drained after its exec (a record from another CPU) makes the unwinder
    /// re-read it; the empty file must not replace the new image its records described.
    #[test]
    fn an_exited_process_keeps_the_mappings_its_records_gave() {
        let tree = FixtureTree::new();
        tree.write_proc("11/maps", "");
        let mut u = UserUnwinder::new(&tree.roots());
        u.exec(11, 300);
        u.add_mapping(11, mapping(0x5000, "/bin/program"), 310);
        // A stack of the image before the exec.
        let regs = UserRegs {
            ip: 0x2000,
            sp: 0x7ff0_0000,
            bp: 0,
        };
        let mut out = Vec::new();
        u.user_frames(11, Some(regs), &[0; 64], &[0x2000], &mut out);
        assert_eq!(u.stats().maps_refreshes, 1, "it was re-read");
        assert_eq!(u.maps(11), [mapping(0x5000, "/bin/program")]);
        // Nor does it make an unknown process a known one without mappings.
        tree.write_proc("12/maps", "");
        assert!(u.snapshot(12).is_err());
        assert!(u.maps(12).is_empty());
    }

    #[test]
    fn fork_copies_exec_clears_exit_forgets() {
        let tree = FixtureTree::new();
        let mut u = UserUnwinder::new(&tree.roots());
        u.set_maps(10, vec![mapping(0x1000, "/bin/a")], 100);
        // A new process not in /proc: it starts from the record alone.
        u.add_mapping(10, mapping(0x3000, "/lib/b.so"), 110);
        u.fork(10, 11, 120);
        u.fork(99, 12, 120);
        assert_eq!(u.maps(11), u.maps(10));
        assert_eq!(u.maps(11).len(), 2);
        assert!(u.maps(12).is_empty(), "unknown parent: nothing to inherit");
        u.exec(11, 130);
        assert!(u.maps(11).is_empty());
        u.add_mapping(11, mapping(0x9000, "/bin/c"), 140);
        assert_eq!(u.maps(11), [mapping(0x9000, "/bin/c")]);
        // Exit: kept through the drain that saw it and the next, then forgotten.
        u.exit(10, 150);
        u.forget_exited();
        assert_eq!(u.maps(10).len(), 2, "records of other CPUs may still come");
        u.forget_exited();
        assert!(u.maps(10).is_empty());
        assert_eq!(u.stats().processes_forgotten, 1);
        // A pid reused by a fork after its exit is not forgotten.
        u.exit(11, 150);
        u.fork(12, 11, 160);
        u.forget_exited();
        u.forget_exited();
        assert_eq!(u.stats().processes_forgotten, 1, "11 was reused");
    }

    /// The order a saturated machine produced (the drain took the child's CPU first): the
    /// child's exec and new mappings, then the fork on the parent's CPU, then a mapping of
    /// the old image drained last. The child keeps its new image; before this, the late
    /// fork replaced it with the parent's and the program's stacks came out unknown.
    #[test]
    fn changes_drained_out_of_order_apply_by_their_time() {
        let tree = FixtureTree::new();
        let mut u = UserUnwinder::new(&tree.roots());
        u.set_maps(10, vec![mapping(0x1000, "/bin/recorder")], 100);
        u.exec(11, 300);
        u.add_mapping(11, mapping(0x5000, "/bin/program"), 310);
        u.add_mapping(11, mapping(0x7000, "/lib/libc.so"), 320);
        u.fork(10, 11, 200);
        u.add_mapping(11, mapping(0x2000, "/bin/taskset"), 250);
        let new_image = [
            mapping(0x5000, "/bin/program"),
            mapping(0x7000, "/lib/libc.so"),
        ];
        assert_eq!(u.maps(11), new_image);
        // An exec drained after a mapping of its new image keeps that mapping.
        u.add_mapping(12, mapping(0x9000, "/bin/next"), 510);
        u.exec(12, 500);
        assert_eq!(u.maps(12), [mapping(0x9000, "/bin/next")]);
        // A fork drained after the child's own later mapping (no exec) adds the parent's.
        u.add_mapping(13, mapping(0x6000, "/lib/plugin.so"), 610);
        u.fork(10, 13, 600);
        assert_eq!(
            u.maps(13),
            [
                mapping(0x1000, "/bin/recorder"),
                mapping(0x6000, "/lib/plugin.so")
            ]
        );
        // A reused pid: the new fork is newer than the old process's image and replaces it.
        u.fork(10, 11, 700);
        assert_eq!(u.maps(11), [mapping(0x1000, "/bin/recorder")]);
    }

    #[test]
    fn unreadable_modules_fall_back_to_frame_pointers() {
        let tree = FixtureTree::new();
        let mut u = UserUnwinder::new(&tree.roots());
        u.set_maps(5, vec![mapping(0x40_0000, "/nonexistent/prog")], 0);
        // A frame-pointer stack: [bp] = caller's bp, [bp + 8] = return address.
        let sp = 0x7ff0_0000u64;
        let mut stack = vec![0u8; 48];
        stack[16..24].copy_from_slice(&(sp + 48).to_ne_bytes());
        stack[24..32].copy_from_slice(&0x40_0500u64.to_ne_bytes());
        let regs = UserRegs {
            ip: 0x40_0100,
            sp,
            bp: sp + 16,
        };
        let mut out = Vec::new();
        u.user_frames(
            5,
            Some(regs),
            &stack,
            &[0x40_0100, 0x40_0500, 0x40_0900],
            &mut out,
        );
        assert_eq!(u.stats().unreadable_modules, 1);
        // framehop's own frame-pointer walk, then the copy ends ([sp + 48] is past it) and
        // the kernel's chain continues.
        assert_eq!(out, [0x40_0100, 0x40_0500, 0x40_0900]);
        assert_eq!(u.stats().spliced, 1);
    }
}
