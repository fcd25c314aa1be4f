//! In-kernel collection (eBPF) of the scheduler's three busiest tracepoints: sched_switch,
//! sched_waking and sched_stat_runtime.
//!
//! Through perf, each hit of these writes a perf record from the traced thread's own
//! context, and their handlers were most of what tracing cost a switch-bound program.
//! Here BPF programs on the same tracepoints (`tp_btf`) write one compact record per
//! switch and per wake-up to a BPF ring buffer per CPU, and sum the scheduler's CPU-time updates
//! (a few per switch) in a per-CPU map instead of writing each: the sum goes out with the
//! thread's next switch. On this project's VMs that cost a pinned ping-pong about a quarter
//! of what the same three tracepoints cost it through perf (docs/COLLECTOR.md).
//!
//! The programs are in `powerlens.bpf.c`, compiled by clang into `powerlens.bpf.o`, which
//! is committed (scripts/build-bpf.sh rebuilds it; a test rebuilds and compares where
//! clang is installed), so building powerlens needs no BPF toolchain. The loader is aya
//! (pure Rust): it relocates the programs' field accesses (CO-RE) against the running
//! kernel's BTF (`/sys/kernel/btf/vmlinux`). Where any of this is missing — no BTF, no
//! BPF syscall, no permission — [`InKernel::open`] says why and the collector keeps its
//! perf rings for these tracepoints too.

mod attach;
pub mod program_time;
pub mod records;
mod syscall;

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use aya::maps::{Array, ArrayOfMaps, Map, MapData, PerCpuArray, PerCpuValues, RingBuf};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf, EbpfLoader};

use crate::trace::CopiedOut;

pub use program_time::ProgramTimes;
pub use records::Kind;

/// The compiled programs; aligned as aya's ELF reader needs.
static OBJECT: &[u8] = aya::include_bytes_aligned!("powerlens.bpf.o");

/// The BPF programs, the tracepoint each is attached to, the kinds that need it (the
/// CPU-time sums are written when their thread switches out, so collecting them needs
/// the switch program too), and the kind whose run time it is ([`InKernel::program_times`]:
/// folding the sums into switch records is the switch's work).
const PROGRAMS: [(&str, &str, &[Kind], Kind); 3] = [
    (
        "on_switch",
        "sched_switch",
        &[Kind::Switch, Kind::Runtime],
        Kind::Switch,
    ),
    ("on_waking", "sched_waking", &[Kind::Waking], Kind::Waking),
    (
        "on_runtime",
        "sched_stat_runtime",
        &[Kind::Runtime],
        Kind::Runtime,
    ),
];

/// A CPU's unwritten CPU time, as `struct runtime_sum` in the programs.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct RuntimeSum {
    tid: u32,
    pad: u32,
    ns: u64,
}

// SAFETY: plain integers, no padding: any bytes are a valid value.
unsafe impl aya::Pod for RuntimeSum {}

/// A CPU's stack pacing, as `struct stack_pace` in the programs (index 0: switches, 1:
/// wake-ups).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct StackPace {
    last_ns: [u64; 2],
    credit_ns: [u64; 2],
    since: [u64; 2],
    max_period: [u64; 2],
}

// SAFETY: plain integers, no padding: any bytes are a valid value.
unsafe impl aya::Pod for StackPace {}

/// The most user-stack bytes the programs copy per stack (their scratch buffer's room;
/// `MAX_STACK` in the programs).
pub const MAX_STACK_BYTES: u32 = 4096;
/// `config` indexes, as in the programs (a test checks both against their source).
const CONFIG_STACK_INTERVAL: u32 = 0;
const CONFIG_STACK_BYTES: u32 = 1;
/// A stack interval that never takes a stack.
pub const NO_STACKS: u64 = u64::MAX;

/// The loaded programs, and their maps. Starts with every kind switched off and no
/// program attached; dropping it detaches the programs.
pub struct InKernel {
    /// Keeps the programs loaded (and the maps alive).
    ebpf: Ebpf,
    kinds: Vec<Kind>,
    /// The least time between two stacks of a kind on a CPU, as the recording asked
    /// (0: every event), when switches' and wake-ups' stacks are taken here.
    stack_interval_ns: Option<u64>,
    control: Array<MapData, u32>,
    /// The `control` map's descriptor again, for a [`ControlSwitch`] on another thread.
    control_fd: OwnedFd,
    config: Array<MapData, u64>,
    paces: PerCpuArray<MapData, StackPace>,
    sums: PerCpuArray<MapData, RuntimeSum>,
    lost: PerCpuArray<MapData, u64>,
    /// Each CPU's ring, by CPU number.
    rings: Vec<(u32, RingBuf<MapData>)>,
    /// An epoll of the rings, edge-triggered ([`InKernel::wake_fd`]).
    wakes: OwnedFd,
    /// Each ring's size, bytes.
    ring_bytes: usize,
    /// Runtime records made from the sums when collection stopped, for the next copy.
    leftover: Vec<u8>,
    /// The programs' attachments, shared with the window switches.
    attachments: attach::Shared,
    /// Holds the kernel's BPF run-time statistics on ([`InKernel::time_programs`]).
    timing: Option<OwnedFd>,
    /// The records read out so far, by kind ([`InKernel::program_times`]).
    read_out: ProgramTimes,
}

impl std::fmt::Debug for InKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InKernel")
            .field("kinds", &self.kinds)
            .finish_non_exhaustive()
    }
}

impl InKernel {
    /// Loads the programs of `kinds` with a ring for each of `cpus` of about `ring_bytes`
    /// (rounded up to a power of two pages), switched off and not yet attached (switching
    /// a kind on attaches its programs). The error says why in words a user can act on.
    pub fn open(kinds: &[Kind], cpus: &[u32], ring_bytes: usize) -> Result<InKernel, String> {
        Self::open_with_stacks(kinds, cpus, ring_bytes, None)
    }

    /// As [`InKernel::open`]; with `stacks` (the least time between two stacks of a kind
    /// on a CPU, in ns, and the user-stack bytes to copy, at most [`MAX_STACK_BYTES`]),
    /// switches and wake-ups carry sampled stacks.
    pub fn open_with_stacks(
        kinds: &[Kind],
        cpus: &[u32],
        ring_bytes: usize,
        stacks: Option<(u64, u32)>,
    ) -> Result<InKernel, String> {
        let btf = Btf::from_sys_fs().map_err(|e| {
            format!("the kernel's BTF could not be read ({e}); it needs CONFIG_DEBUG_INFO_BTF")
        })?;
        let ring = ring_bytes.max(1 << 16).next_power_of_two().min(1 << 30) as u32;
        let slots = cpus.iter().max().map_or(1, |&c| c + 1);
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .map_max_entries("rings", slots)
            .load(OBJECT)
            .map_err(|e| format!("the BPF programs could not be loaded: {}", chain(&e)))?;
        let mut attachments = attach::Attachments::default();
        for &(program, tracepoint, needed_by, _) in &PROGRAMS {
            if !needed_by.iter().any(|k| kinds.contains(k)) {
                continue;
            }
            let fd = load(&mut ebpf, &btf, program, tracepoint)
                .map_err(|e| format!("the BPF program for {tracepoint}: {e}"))?;
            attachments.add(needed_by, tracepoint, fd);
        }
        let map = |ebpf: &mut Ebpf, name: &str| {
            ebpf.take_map(name)
                .ok_or_else(|| format!("the BPF object has no map {name}"))
        };
        let control = map(&mut ebpf, "control")?;
        let control_fd = match &control {
            Map::Array(data) => data.fd().as_fd().try_clone_to_owned(),
            _ => return Err("the BPF object's control map is not an array".into()),
        }
        .map_err(|e| format!("dup of the control map: {e}"))?;
        let control = Array::try_from(control).map_err(|e| chain(&e))?;
        let mut config: Array<MapData, u64> =
            Array::try_from(map(&mut ebpf, "config")?).map_err(|e| chain(&e))?;
        let paces = PerCpuArray::try_from(map(&mut ebpf, "stack_paces")?).map_err(|e| chain(&e))?;
        let (interval, bytes) =
            stacks.map_or((NO_STACKS, 0), |(ns, b)| (ns, b.min(MAX_STACK_BYTES)));
        config
            .set(CONFIG_STACK_INTERVAL, interval, 0)
            .map_err(|e| chain(&e))?;
        config
            .set(CONFIG_STACK_BYTES, u64::from(bytes), 0)
            .map_err(|e| chain(&e))?;
        let sums = PerCpuArray::try_from(map(&mut ebpf, "runtime_sums")?).map_err(|e| chain(&e))?;
        let lost = PerCpuArray::try_from(map(&mut ebpf, "lost")?).map_err(|e| chain(&e))?;
        let mut slots: ArrayOfMaps<MapData, RingBuf<MapData>> =
            ArrayOfMaps::try_from(map(&mut ebpf, "rings")?).map_err(|e| chain(&e))?;
        let mut rings = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let ring = new_ring(ring).map_err(|e| format!("a BPF ring for CPU {cpu}: {e}"))?;
            slots.set(cpu, &ring, 0).map_err(|e| chain(&e))?;
            rings.push((cpu, ring));
        }
        let wakes = edge_triggered(rings.iter().map(|(_, ring)| ring.as_raw_fd()))
            .map_err(|e| format!("an epoll of the BPF rings: {e}"))?;
        Ok(InKernel {
            ebpf,
            kinds: kinds.to_vec(),
            stack_interval_ns: stacks.map(|(ns, _)| ns),
            control,
            control_fd,
            config,
            paces,
            sums,
            lost,
            rings,
            wakes,
            ring_bytes: ring as usize,
            leftover: Vec::new(),
            attachments: std::sync::Arc::new(std::sync::Mutex::new(attachments)),
            timing: None,
            read_out: ProgramTimes::default(),
        })
    }

    /// Attaches the programs `kinds` need that are not attached yet.
    fn attach_for(&mut self, kinds: &[Kind]) -> Result<(), String> {
        let loaded: Vec<Kind> = kinds
            .iter()
            .copied()
            .filter(|k| self.kinds.contains(k))
            .collect();
        lock(&self.attachments).attach_for(&loaded)
    }

    /// Turns the kernel's timing of the programs (BPF run-time statistics) on or off;
    /// returns whether it is on. It is not free: two clock reads around each run, about
    /// 50 ns a run on this project's VMs, so it is on only while a cost is measured. It
    /// goes off when this is dropped, unless something else holds it on.
    pub fn time_programs(&mut self, on: bool) -> bool {
        if !on {
            self.timing = None;
        } else if self.timing.is_none() {
            self.timing = aya::sys::enable_stats(aya::sys::Stats::RunTime).ok();
        }
        self.timing.is_some()
    }

    /// The kinds loaded.
    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// Switches on each of `kinds` that was loaded (the others are left as they are),
    /// attaching the programs they need; the CPU-time sums start empty. Returns how many
    /// were switched on.
    pub fn enable(&mut self, kinds: &[Kind]) -> Result<usize, String> {
        self.attach_for(kinds)?;
        if kinds.contains(&Kind::Runtime) {
            self.clear_sums()?;
        }
        let mut on = 0;
        for kind in kinds {
            if self.kinds.contains(kind) {
                self.control
                    .set(kind.control_index(), 1, 0)
                    .map_err(|e| chain(&e))?;
                on += 1;
            }
        }
        Ok(on)
    }

    /// Starts a recording: every kind loaded switched on, the stacks taken as asked at
    /// open (after a calibration's [`InKernel::set_stack_interval`]), and their pacing
    /// counted afresh.
    pub fn start(&mut self) -> Result<(), String> {
        if let Some(ns) = self.stack_interval_ns {
            self.set_stack_interval(ns)?;
            let cpus = aya::util::nr_cpus().map_err(|(_, e)| e.to_string())?;
            let fresh = PerCpuValues::try_from(vec![StackPace::default(); cpus])
                .map_err(|e| e.to_string())?;
            self.paces.set(0, fresh, 0).map_err(|e| chain(&e))?;
        }
        let kinds = self.kinds.clone();
        self.enable(&kinds).map(|_| ())
    }

    /// Sets the least time between two stacks of a kind on a CPU (0: every event,
    /// [`NO_STACKS`]: none), until [`InKernel::start`]; `false` when stacks are not taken
    /// here.
    pub fn set_stack_interval(&mut self, ns: u64) -> Result<bool, String> {
        if self.stack_interval_ns.is_none() {
            return Ok(false);
        }
        self.config
            .set(CONFIG_STACK_INTERVAL, ns, 0)
            .map_err(|e| chain(&e))?;
        Ok(true)
    }

    /// The most events one sampled stack stood for since [`InKernel::start`], on any CPU
    /// (1: every event had its stack); `None` when stacks are not taken here.
    /// `None` too when every event takes its stack (`--every-stack`).
    pub fn max_stack_period(&self) -> Option<u64> {
        if self.stack_interval_ns? == 0 {
            return None;
        }
        let paces = self.paces.get(&0, 0).ok()?;
        Some(
            paces
                .iter()
                .flat_map(|p| p.max_period)
                .max()
                .unwrap_or(1)
                .max(1),
        )
    }

    /// Switches every kind off and detaches the programs; what the CPU-time sums still
    /// hold becomes runtime records (at `now_ns`) for the next [`InKernel::copy_out`], so
    /// that a thread running when collection stopped keeps its last stretch.
    pub fn disable(&mut self, now_ns: u64) -> Result<(), String> {
        let running = self.kinds.iter().any(|k| {
            self.control
                .get(&k.control_index(), 0)
                .is_ok_and(|on| on != 0)
        });
        for kind in &self.kinds {
            self.control
                .set(kind.control_index(), 0, 0)
                .map_err(|e| chain(&e))?;
        }
        if running && self.kinds.contains(&Kind::Runtime) {
            let sums = self.sums.get(&0, 0).map_err(|e| chain(&e))?;
            for (cpu, sum) in sums.iter().enumerate() {
                if sum.ns > 0 && sum.tid != 0 {
                    let r = records::runtime_record(now_ns, cpu as u32, sum.tid, sum.ns);
                    records::push_framed(&mut self.leftover, &r);
                }
            }
            self.clear_sums()?;
        }
        lock(&self.attachments).detach_all();
        Ok(())
    }

    fn clear_sums(&mut self) -> Result<(), String> {
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| e.to_string())?;
        let empty =
            PerCpuValues::try_from(vec![RuntimeSum::default(); cpus]).map_err(|e| e.to_string())?;
        self.sums.set(0, empty, 0).map_err(|e| chain(&e))
    }

    /// Appends every record the rings hold to `out`, each behind its length
    /// ([`records::framed`] reads them back), CPU after CPU, and frees the rings. Returns
    /// the bytes, and how full the fullest ring was. The runtime records made when
    /// collection stopped come last, after the events that came before them.
    pub fn copy_out(&mut self, out: &mut Vec<u8>) -> CopiedOut {
        let mut copied = CopiedOut::default();
        for (_, ring) in &mut self.rings {
            let before = out.len();
            while let Some(item) = ring.next() {
                self.read_out.count_record(&item);
                records::push_framed(out, &item);
            }
            // The framed copy is a little larger than the ring's records: the share an
            // upper bound.
            copied.add(CopiedOut::of_ring(out.len() - before, self.ring_bytes));
        }
        records::framed(&self.leftover, &mut 0, |r| self.read_out.count_record(r));
        copied.bytes += self.leftover.len();
        out.append(&mut self.leftover);
        copied
    }

    /// Each kind's program run time, as the kernel timed it while
    /// [`InKernel::time_programs`] was on, and the records read out of its kind, since the
    /// programs were loaded.
    pub fn program_times(&self) -> ProgramTimes {
        let mut times = self.read_out;
        for &(program, _, _, kind) in &PROGRAMS {
            let Some(info) = self.ebpf.program(program).and_then(|p| p.info().ok()) else {
                continue;
            };
            times.of_mut(kind).run_ns = info.run_time().as_nanos() as u64;
        }
        times
    }

    /// Records that found the ring full, per CPU (possible CPUs, in order).
    pub fn lost(&self) -> Vec<(u32, u64)> {
        self.lost
            .get(&0, 0)
            .map(|values| {
                values
                    .iter()
                    .enumerate()
                    .map(|(cpu, &n)| (cpu as u32, n))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A switch for every kind loaded, for another thread (a monitor that traces in
    /// windows): its own descriptor of the control map.
    pub fn control_switch(&self) -> Result<ControlSwitch, String> {
        Ok(ControlSwitch {
            fd: self
                .control_fd
                .try_clone()
                .map_err(|e| format!("dup of the control map: {e}"))?,
            kinds: self.kinds.clone(),
            attachments: self.attachments.clone(),
        })
    }

    /// A descriptor that reads ready when the programs asked for a wake-up (a ring went
    /// past half full) since [`InKernel::take_wakes`].
    ///
    /// A ring's own descriptor reads ready whenever the ring holds anything: the records
    /// that came while the last copy was made ended the next wait at once, so a reader
    /// copied twice per period beside an idle machine and about three times under a
    /// switch-heavy load, each copy a hand-off to the decoder and on to the recorder.
    pub fn wake_fd(&self) -> RawFd {
        self.wakes.as_raw_fd()
    }

    /// Takes the wake-ups [`InKernel::wake_fd`] holds, so that it waits for the next.
    pub fn take_wakes(&self) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: `events` is a live array of its stated length; a timeout of 0 never
        // blocks. Each call takes up to 8 rings' wake-ups; the loop ends when none is left.
        while unsafe { libc::epoll_wait(self.wakes.as_raw_fd(), events.as_mut_ptr(), 8, 0) } == 8 {}
    }
}

/// An epoll of `fds`, each registered edge-triggered: it reports a descriptor once per
/// wake-up of its waiters (for a BPF ring, a record submitted with a forced wake-up), not
/// for as long as it stays readable.
fn edge_triggered(fds: impl Iterator<Item = RawFd>) -> std::io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes flags only; a non-negative result is a new fd we own.
    let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epoll < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nothing else.
    let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
    for fd in fds {
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: fd as u64,
        };
        // SAFETY: both descriptors are open; `event` is a live struct the call reads.
        if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(epoll)
}

/// Switches the programs' kinds on and off from another thread than the collector's
/// ([`InKernel::control_switch`]).
#[derive(Debug)]
pub struct ControlSwitch {
    fd: OwnedFd,
    kinds: Vec<Kind>,
    attachments: attach::Shared,
}

impl ControlSwitch {
    /// Every kind loaded on (`true`: its programs attached first) or off (its programs
    /// detached after).
    pub fn set(&self, on: bool) -> std::io::Result<()> {
        if on {
            lock(&self.attachments)
                .attach_for(&self.kinds)
                .map_err(std::io::Error::other)?;
        }
        for kind in &self.kinds {
            syscall::update_u32(&self.fd, kind.control_index(), u32::from(on))?;
        }
        if !on {
            lock(&self.attachments).detach_all();
        }
        Ok(())
    }
}

/// The attachments, whatever a thread that panicked holding them left: they are a list of
/// descriptors, consistent at every step.
fn lock(shared: &attach::Shared) -> std::sync::MutexGuard<'_, attach::Attachments> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// A BPF ring buffer of `bytes` (a power of two pages), for one CPU.
fn new_ring(bytes: u32) -> Result<RingBuf<MapData>, String> {
    let def = aya_obj::Map::new_from_params(RINGBUF_MAP_TYPE, 0, 0, bytes, 0);
    let data = MapData::create(def, "powerlens_ring", None).map_err(|e| chain(&e))?;
    RingBuf::try_from(Map::RingBuf(data)).map_err(|e| chain(&e))
}

/// BPF_MAP_TYPE_RINGBUF.
const RINGBUF_MAP_TYPE: u32 = 27;

/// Loads `program` for `tracepoint` (the verifier checks it here) and returns its own
/// descriptor: it is attached when its kind is switched on ([`attach`]).
fn load(ebpf: &mut Ebpf, btf: &Btf, program: &str, tracepoint: &str) -> Result<OwnedFd, String> {
    let p: &mut BtfTracePoint = ebpf
        .program_mut(program)
        .ok_or_else(|| format!("the BPF object has no program {program}"))?
        .try_into()
        .map_err(|e| chain(&e))?;
    p.load(tracepoint, btf).map_err(|e| chain(&e))?;
    p.fd()
        .map_err(|e| chain(&e))?
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("dup of the program {program}: {e}"))
}

/// An error and its causes, as one line: aya's errors keep the kernel's reason (the
/// verifier's, EPERM) in their sources. A verifier's log is cut to the line that says
/// what it refused.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    short_verifier_log(&s)
}

fn short_verifier_log(s: &str) -> String {
    const LOG: &str = "Verifier output:";
    let Some(at) = s.find(LOG) else {
        return s.to_string();
    };
    let log = &s[at + LOG.len()..];
    let refused = log
        .lines()
        .take_while(|l| !l.starts_with("verification time"))
        .filter(|l| !l.trim().is_empty())
        .last()
        .unwrap_or("");
    format!("{}the verifier refused it: {}", &s[..at], refused.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings the recorder writes into the programs' `config` map, and the stack
    /// room it caps them at, are the programs' own (`powerlens.bpf.c`): an index off by one
    /// would set the stack interval from the byte count.
    #[test]
    fn the_config_slots_and_stack_room_are_the_programs() {
        use records::tests::c_constant;
        assert_eq!(
            u64::from(CONFIG_STACK_INTERVAL),
            c_constant("CONFIG_STACK_INTERVAL")
        );
        assert_eq!(
            u64::from(CONFIG_STACK_BYTES),
            c_constant("CONFIG_STACK_BYTES")
        );
        assert_eq!(u64::from(MAX_STACK_BYTES), c_constant("MAX_STACK"));
    }

    /// A thread pinned to `cpu` that sleeps `n` times once `start` has run (after it is on
    /// `cpu`): each sleep is a switch there. Its tid.
    fn switches_on(cpu: usize, n: usize, start: impl FnOnce()) -> u32 {
        let (pinned_tx, pinned) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            crate::thread::pin_to_cpu(cpu).unwrap();
            // Off the CPU it started on before anything is traced.
            std::thread::sleep(std::time::Duration::from_millis(1));
            pinned_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            for _ in 0..n {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() as u32 }
        });
        pinned.recv().unwrap();
        start();
        go.send(()).unwrap();
        thread.join().unwrap()
    }

    /// Programs are attached only while a kind they serve is on, by the collector or its
    /// window switch, and never twice: a switched-off tracepoint costs its hits nothing.
    /// The switches of a sleeping thread are read back only while attached.
    #[test]
    #[ignore = "live: BPF on the real kernel (root)"]
    fn live_programs_are_attached_only_while_their_kinds_are_on() {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            crate::skip_test!("no BTF");
            return;
        }
        let all = [Kind::Switch, Kind::Waking, Kind::Runtime];
        let mut k = InKernel::open(&all, &[0, 1], 1 << 20).unwrap();
        let attached = |k: &InKernel| lock(&k.attachments).attached();
        assert_eq!(attached(&k), 0, "loaded, not attached");
        k.enable(&[Kind::Waking]).unwrap();
        assert_eq!(attached(&k), 1);
        k.enable(&[Kind::Runtime]).unwrap();
        assert_eq!(
            attached(&k),
            3,
            "the CPU-time sums need the switch program too"
        );
        k.disable(0).unwrap();
        assert_eq!(attached(&k), 0);
        let switch = k.control_switch().unwrap();
        let switches = |k: &mut InKernel| {
            let tid = switches_on(0, 20, || {});
            let mut out = Vec::new();
            k.copy_out(&mut out);
            let mut n = 0;
            records::framed(&out, &mut 0, |bytes| {
                let r = records::read(bytes).unwrap();
                if r.kind == Kind::Switch && r.tid == tid {
                    n += 1;
                }
            });
            n
        };
        assert_eq!(switches(&mut k), 0, "nothing attached, nothing written");
        switch.set(true).unwrap();
        switch.set(true).unwrap();
        assert_eq!(attached(&k), 3, "attached once");
        assert!(switches(&mut k) >= 20);
        switch.set(false).unwrap();
        assert_eq!(attached(&k), 0);
    }

    /// Each CPU writes to its own ring: the switches of a thread pinned to CPU 1 are read
    /// back as CPU 1's records, and a CPU given no ring (as one brought online after the
    /// start) counts its records lost instead of writing them elsewhere. Skips, saying
    /// so, on a kernel without BTF or a machine with one CPU.
    #[test]
    #[ignore = "live: BPF on the real kernel (root)"]
    fn live_each_cpu_writes_to_its_own_ring() {
        let online = crate::topology::read_online(&crate::Roots::from_env().unwrap()).unwrap();
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() || !online.contains(&1) {
            crate::skip_test!("needs BTF and a CPU 1 (online: {online:?})");
            return;
        }
        let count = |cpus: &[u32]| {
            let mut k = InKernel::open(&[Kind::Switch], cpus, 1 << 20).unwrap();
            let tid = switches_on(1, 50, || k.start().unwrap());
            k.disable(0).unwrap();
            let mut out = Vec::new();
            k.copy_out(&mut out);
            let (mut on_1, mut of_tid_elsewhere, mut torn) = (0u64, 0u64, 0u64);
            records::framed(&out, &mut torn, |bytes| {
                let r = records::read(bytes).unwrap();
                let prev = i32::from_le_bytes(r.payload[16..20].try_into().unwrap()) as u32;
                match (r.cpu, prev == tid) {
                    (1, true) => on_1 += 1,
                    (_, true) => of_tid_elsewhere += 1,
                    _ => {}
                }
            });
            let lost_1 = k.lost().iter().find(|(c, _)| *c == 1).map_or(0, |l| l.1);
            (on_1, of_tid_elsewhere, lost_1)
        };
        let (on_1, elsewhere, lost) = count(&online);
        assert!(on_1 >= 50, "{on_1} switch-outs of the thread on CPU 1");
        assert_eq!((elsewhere, lost), (0, 0));
        let others: Vec<u32> = online.iter().copied().filter(|&c| c != 1).collect();
        let (on_1, elsewhere, lost) = count(&others);
        assert_eq!((on_1, elsewhere), (0, 0), "CPU 1 has no ring");
        assert!(lost >= 50, "{lost} records counted lost on CPU 1");
    }

    #[test]
    fn a_verifiers_log_is_cut_to_its_refusal() {
        let s = "the BPF_PROG_LOAD syscall returned Permission denied (os error 13). Verifier output: 0: R1=ctx()\n395: (85) call bpf_probe_read_user#112\nR2 min value is negative\nverification time 2181 usec\nprocessed 402 insns";
        let s = s.replace("\\n", "\n");
        assert_eq!(
            super::short_verifier_log(&s),
            "the BPF_PROG_LOAD syscall returned Permission denied (os error 13). the verifier refused it: R2 min value is negative"
        );
        assert_eq!(super::short_verifier_log("no BTF"), "no BTF");
    }
}
