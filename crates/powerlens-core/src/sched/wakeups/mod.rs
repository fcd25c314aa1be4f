//! Wake-up forensics: every idle exit classified by what ended it, grouped into causes
//! (`report`'s "Wake-up causes", JSON `wakeup_causes[]`).
//!
//! **Idle exit.** A CPU is idle while its idle task (tid 0) is current: from a switch to
//! tid 0 to the next switch away from it. The CPU leaves idle, and pays the exit's energy
//! and latency, each time an interrupt reaches it there, whether or not a thread runs
//! afterwards (a tick that wakes nobody costs as much as one that does). So an idle exit
//! is either
//! - the first interrupt context entered while the idle task is current, after the idle
//!   period began or after the previous exit's interrupts ended; interrupt contexts that
//!   start within [`MERGE_GAP_NS`] of the previous one's end are the same exit (a hardware
//!   interrupt runs its handler, then its softirqs, then the timers it found expired). When
//!   the CPU records `power:cpu_idle`, an idle-state entry ends the previous exit instead
//!   of the gap (perf delivers no `cpu_idle` records on VMs whose cpuidle driver is
//!   `none`, which is why the gap exists); or
//! - a switch from the idle task to a thread that no such interrupt explains: a remote
//!   wake-up that needed no interrupt (polling idle states: POLL, haltpoll), or one whose
//!   interrupt was not recorded.
//!
//! **Cause** of an exit, from its first interrupt context: a timer callback → `timer`
//! (grouped by the stack that armed it, else by callback and arming thread); a hardware
//! interrupt → `irq` with its name; a softirq with no traced hardware interrupt before it
//! → `irq` too, named `softirq:NAME` (softirqs run on the way out of a hardware interrupt
//! whose entry some kernels do not trace, e.g. the local APIC timer); an IPI → `ipi`, with
//! the thread on another CPU whose wake-up targeted this CPU during the idle period when
//! there is one. An exit without an interrupt → `thread`: the thread on another CPU that
//! woke a thread onto this CPU, with its stack (the `Stack` record after its wake-up); with
//! no such wake-up either → `ipi` (an unexplained remote wake-up, as the grid's `ipi`).
//!
//! **Sampled stacks** ([`WakeupAnalysis::with_sampled_stacks`]): an arming or wake-up
//! without a stack of its own is grouped by its thread's latest one in that role, as the
//! function grid charges its events (sample and hold, [`held`]); an exec releases them.
//!
//! A timer is charged to the thread that armed it (`armed_by_tid`) only while one thread
//! ever armed its address: kernel timers such as the tick are re-armed from whatever
//! context runs (the idle task, any thread's syscall exit) and belong to no thread; they
//! and timers armed before the recording are grouped per CPU. (Expiries before a second
//! thread's arming is seen stay with the first thread.)
//!
//! **Timers** are followed beyond idle exits: every expiry of a group counts in
//! `expiries`, because a timer's period does not depend on whether the CPU happened to be
//! idle (on a loaded machine few expiries are idle exits, on the deployment machine most
//! may be). The period is the median interval between successive expiries of a group; the
//! group is periodic with at least [`MIN_PERIODIC_SAMPLES`] intervals and an interquartile
//! range under [`PERIODIC_MAX_IQR`] of the median. See [`coalescing`] for when periodic
//! timers could be coalesced.
//!
//! Memory grows with CPUs, distinct causes and in-flight timers; each timer group keeps at
//! most [`MAX_EXPIRY_TIMES`] expiry times for its statistics.

use serde::{Deserialize, Serialize};

use super::event::{Event, EventKind, InterruptKind, KeyMap, Name, StackId, Tid, IDLE_TID};
use super::tid_table::TidTable;

mod coalescing;
mod held;

pub use coalescing::coalescing;

use held::Acting;

/// Interrupt contexts closer than this to the end of the previous one on the same CPU
/// belong to the same idle exit (handler, softirqs and expired timers of one interrupt
/// run back to back within microseconds; a CPU idle for less than this saves nothing).
pub const MERGE_GAP_NS: u64 = 20_000;

/// Intervals a timer group needs before it can be called periodic.
pub const MIN_PERIODIC_SAMPLES: usize = 5;

/// A group is periodic when (Q3 − Q1) / median of its intervals is below this.
pub const PERIODIC_MAX_IQR: f64 = 0.25;

/// Expiry times kept per timer group for period and alignment (the first ones).
pub const MAX_EXPIRY_TIMES: usize = 4096;

/// Timer addresses remembered at most (who armed each, and whether it is in flight); beyond
/// it the table is cleared and timers armed before that are attributed to their callback
/// only.
pub const MAX_ARMED_TIMERS: usize = 1 << 16;

/// A periodic timer faster than this is worth coalescing on its own (raise its slack or
/// period): 100 wake-ups per second or more.
pub const SHORT_PERIOD_US: f64 = 10_000.0;

/// Two timers' expiries are aligned when closer than this (or a quarter of the shorter
/// period, if smaller).
pub const ALIGNED_NS: u64 = 1_000_000;

/// One cause of idle exits (or, for timers, a periodic source of expiries).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WakeupCause {
    /// `timer`, `irq`, `ipi` or `thread`.
    pub kind: String,
    /// Idle exits caused.
    pub count: u64,
    /// Idle exits caused per second of recording.
    pub per_s: f64,
    /// The interrupt's name (`irq`; a softirq is `softirq:NAME`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub irq: Option<String>,
    /// The thread on another CPU whose wake-up caused the exit (`thread`, `ipi`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waker_tid: Option<Tid>,
    /// The thread that armed the timer (`timer`), when its arming was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub armed_by_tid: Option<Tid>,
    /// The command name of `waker_tid` or `armed_by_tid`, from the thread table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// Kernel address of the timer callback, hex (`timer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timer_function: Option<String>,
    /// The kernel's name of `timer_function` (`tick_nohz_handler`), from the recording's
    /// symbol cache: the kallsyms of the boot that recorded it ([`resolve_timer_functions`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_function_name: Option<String>,
    /// The waker's or arming stack in the recording's stack table.
    #[serde(skip)]
    pub stack_id: Option<StackId>,
    /// The innermost user function of `stack_id`, once resolved ([`resolve`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The frames of `stack_id`, innermost first, `function (module)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<Vec<String>>,
    /// Every expiry of the timer group, idle or not (`timer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiries: Option<u64>,
    /// Of `expiries`, those whose arming carried no stack of its own and are grouped by
    /// the arming thread's latest arming stack for the callback, or its first one when
    /// none came before (sample and hold); `timer` rows of recordings whose stacks were
    /// sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_expiries: Option<u64>,
    /// Of `count`, the idle exits whose wake-up carried no stack of its own and are
    /// grouped by the waker's latest (or first) waking stack (sample and hold); `thread`
    /// and `ipi` rows of recordings whose stacks were sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_idle_exits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiries_per_s: Option<f64>,
    /// Median interval between successive expiries (`timer`, ≥ 1 interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub periodic: Option<bool>,
    /// For periodic timers: whether they could be coalesced ([`coalescing`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalescible: Option<bool>,
    /// Why, in words that follow "coalescible": `with timer … (period …; N% of expiries
    /// aligned now)`, or `because its period is under 10 ms (…)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalesce_with: Option<String>,
}

impl WakeupCause {
    /// The thread this cause is charged to: the waker or the arming thread.
    pub fn tid(&self) -> Option<Tid> {
        self.waker_tid.or(self.armed_by_tid)
    }
}

/// Fills `function` and `stack` from `stack_id` with the recording's stack resolver:
/// `stack id → (innermost user function, frames innermost first as "function (module)")`.
pub fn resolve(
    causes: &mut [WakeupCause],
    resolver: &dyn Fn(StackId) -> Option<(String, Vec<String>)>,
) {
    for c in causes {
        if let Some((function, frames)) = c.stack_id.and_then(resolver) {
            c.function = Some(function);
            c.stack = Some(frames);
        }
    }
}

/// Fills `timer_function_name` from the kernel's names of the timer callbacks
/// (`address → name`, the recording's symbol cache).
pub fn resolve_timer_functions(causes: &mut [WakeupCause], name: &dyn Fn(u64) -> Option<String>) {
    for c in causes {
        let address = c
            .timer_function
            .as_deref()
            .and_then(|hex| u64::from_str_radix(hex.trim_start_matches("0x"), 16).ok());
        if let Some(n) = address.and_then(name) {
            c.timer_function_name = Some(n);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// `cpu` only for timers armed by the idle task (per-CPU kernel timers: the tick).
    Timer {
        stack: Option<StackId>,
        function: u64,
        armed_by: Option<Tid>,
        cpu: Option<u32>,
    },
    Irq(Name),
    SoftIrq(Name),
    Ipi {
        waker: Option<Tid>,
        stack: Option<StackId>,
    },
    Thread {
        waker: Tid,
        stack: Option<StackId>,
    },
}

#[derive(Default)]
struct Group {
    count: u64,
    expiries: u64,
    /// Expiries (timers) or idle exits (the others) grouped here by a held stack.
    held: u64,
    times: Vec<u64>,
}

impl Group {
    /// Adds `g` to this group: its expiry times merged in time order (the first
    /// [`MAX_EXPIRY_TIMES`] of both are among each one's first ones).
    fn absorb(&mut self, g: Group) {
        self.count += g.count;
        self.expiries += g.expiries;
        self.held += g.held;
        self.times = merge_sorted(&self.times, &g.times, MAX_EXPIRY_TIMES);
    }
}

#[derive(Clone, Copy)]
struct Armed {
    tid: Option<Tid>,
    stack: Option<StackId>,
    /// `stack` is the arming thread's latest, not the arming's own.
    held: bool,
}

/// What the forensics know of one timer address: one table, so that an arming and an
/// expiry each look the address up once.
#[derive(Clone, Copy, Default)]
struct TimerInfo {
    /// The one thread that ever armed it, or `Some(None)` once a second one did (a kernel
    /// timer such as the tick, re-armed from whatever context runs).
    owner: Option<Option<Tid>>,
    /// Armed and not expired yet: by whom (its owner then) and at which stack.
    armed: Option<Armed>,
}

/// A wake-up from another CPU targeting an idle CPU, not yet explained by an exit.
#[derive(Clone, Copy)]
struct RemoteWake {
    waker: Option<Tid>,
    stack: Option<StackId>,
    /// `stack` is the waker's latest, not the wake-up's own.
    held: bool,
    seq: u64,
}

/// What the next `Stack` record on a CPU belongs to.
#[derive(Clone, Copy)]
enum Last {
    Other,
    /// A wake-up by `waker` (a thread), of a thread on another CPU when `remote`
    /// (its CPU and the wake-up's sequence number).
    Wakeup {
        waker: Option<Tid>,
        remote: Option<(u32, u64)>,
    },
    /// A timer arming, by thread `tid`, with callback `function`.
    Arm {
        timer: u64,
        tid: Option<Tid>,
        function: u64,
    },
}

#[derive(Clone, Copy)]
struct Exit {
    /// End of its latest interrupt context (or its start while one is open).
    last_ns: u64,
    /// An idle-state entry since: the next interrupt is a new exit.
    closed: bool,
}

struct Cpu {
    current: Option<Tid>,
    /// The cause group this CPU's last exit or expiry went to, and its index.
    last_group: Option<(Key, u32)>,
    /// Interrupt contexts open, innermost last: the group each timer expiry went to.
    depth: u32,
    /// The timer whose expiry this CPU ran last, until the next switch or arming, and
    /// when its latest interrupt context ended: a periodic kernel timer (the tick) is
    /// re-armed right after its callback returns, by the interrupt that ran it.
    expired: Option<u64>,
    interrupt_end_ns: u64,
    exit: Option<Exit>,
    remote: Option<RemoteWake>,
    saw_cpu_idle: bool,
    last: Last,
}

impl Default for Cpu {
    fn default() -> Self {
        Cpu {
            current: None,
            last_group: None,
            depth: 0,
            expired: None,
            interrupt_end_ns: 0,
            exit: None,
            remote: None,
            saw_cpu_idle: false,
            last: Last::Other,
        }
    }
}

/// The streaming analyser: feed every event with its context (as
/// [`super::analysis::SchedAnalysis::feed_in_context`]), then [`WakeupAnalysis::finish`].
#[derive(Default)]
pub struct WakeupAnalysis {
    cpus: Vec<Cpu>,
    timers: KeyMap<u64, TimerInfo>,
    /// The cause groups in first-seen order (for deterministic output), and each key's
    /// index there.
    groups: Vec<(Key, Group)>,
    group_index: KeyMap<Key, u32>,
    seq: u64,
    start_ns: Option<u64>,
    last_ns: u64,
    /// Stack id → the id its causes are grouped under (see [`WakeupAnalysis::group_stacks`]),
    /// applied when the analysis finishes.
    stack_group: Vec<StackId>,
    /// Timer callbacks left out (the recorder's own sampling timer), and their expiries.
    ignored_callbacks: Vec<u64>,
    ignored_expiries: u64,
    /// The recording's stacks are sampled: sample and hold, per thread ([`held`]).
    sampled: bool,
    holds: TidTable<held::ThreadHolds>,
}

impl WakeupAnalysis {
    pub fn new() -> Self {
        Self::default()
    }

    /// Groups causes by `group[stack]` instead of by exact stack: the report maps every
    /// stack to the first one with the same innermost user function, so that a sleep loop
    /// is one timer cause even when its kernel frames (or an unwound frame) vary between
    /// iterations. A grouped cause shows the stack of its first member, not
    /// `group[stack]`. Stacks beyond the table keep their own id. The grouping is applied
    /// when the analysis finishes, so it can be given after the events (the report
    /// resolves the recording's stacks while they stream): the causes are the same as if
    /// every stack had been grouped as it came.
    pub fn group_stacks(&mut self, group: Vec<StackId>) {
        self.stack_group = group;
    }

    /// Leaves out the expiries of timers with this callback: the recorder's own cpu-clock
    /// sampling timer (`perf_swevent_hrtimer`) wakes CPUs only because powerlens is
    /// measuring, and is not a cause the program can act on. Counted in
    /// [`WakeupAnalysis::ignored_expiries`].
    pub fn ignore_timer_callback(mut self, function: u64) -> Self {
        self.ignored_callbacks.push(function);
        self
    }

    /// Expiries of ignored timers seen so far.
    pub fn ignored_expiries(&self) -> u64 {
        self.ignored_expiries
    }

    /// The recording's stacks are sampled (one switch, wake-up or timer arming in N has
    /// one): group the others by sample and hold ([`held`]).
    pub fn with_sampled_stacks(mut self) -> Self {
        self.sampled = true;
        self
    }

    /// The key its causes are grouped under: `key` with its stack grouped.
    fn grouped(&self, key: Key) -> Key {
        let group = |stack: Option<StackId>| {
            stack.map(|id| self.stack_group.get(id as usize).copied().unwrap_or(id))
        };
        match key {
            Key::Timer {
                stack,
                function,
                armed_by,
                cpu,
            } => Key::Timer {
                stack: group(stack),
                function,
                armed_by,
                cpu,
            },
            Key::Ipi { waker, stack } => Key::Ipi {
                waker,
                stack: group(stack),
            },
            Key::Thread { waker, stack } => Key::Thread {
                waker,
                stack: group(stack),
            },
            key @ (Key::Irq(_) | Key::SoftIrq(_)) => key,
        }
    }

    /// The groups in first-seen order, their stacks grouped ([`WakeupAnalysis::group_stacks`]):
    /// groups whose keys become one add up, their expiry times merged in time order (the
    /// first [`MAX_EXPIRY_TIMES`] of the merged group are among each member's first ones).
    /// A merged group keeps its first member's key, stack included: the stack that names
    /// a group is any stack of the recording with the same innermost user function (a
    /// CPU-time sample's, a switch's), while the cause must show one that armed the timer
    /// or woke the thread.
    fn grouped_groups(&mut self) -> Vec<(Key, Group)> {
        let mut out: Vec<(Key, Group)> = Vec::with_capacity(self.groups.len());
        let mut index: KeyMap<Key, usize> = KeyMap::default();
        for (key, g) in std::mem::take(&mut self.groups) {
            match index.entry(self.grouped(key)) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(out.len());
                    out.push((key, g));
                }
                std::collections::hash_map::Entry::Occupied(o) => out[*o.get()].1.absorb(g),
            }
        }
        out
    }

    /// Called several times per event: the common case is one bounds check, the growth
    /// path is kept out of line.
    #[inline]
    fn cpu(&mut self, cpu: u32) -> &mut Cpu {
        let i = cpu as usize;
        if self.cpus.len() <= i {
            self.grow_cpus(i + 1);
        }
        &mut self.cpus[i]
    }

    #[cold]
    #[inline(never)]
    fn grow_cpus(&mut self, len: usize) {
        self.cpus.resize_with(len, Cpu::default);
    }

    /// The group of `key`, for an idle exit or timer expiry on `cpu`: this runs at every
    /// one, and a CPU's exits mostly repeat one cause (its tick, the thread that wakes its
    /// sleeper), so the CPU's last group is checked before the key is hashed.
    fn group(&mut self, cpu: u32, key: Key) -> &mut Group {
        let index = self.group_at(cpu, key);
        &mut self.groups[index as usize].1
    }

    /// [`WakeupAnalysis::group`]'s index.
    fn group_at(&mut self, cpu: u32, key: Key) -> u32 {
        match self.cpus[cpu as usize].last_group {
            Some((last, index)) if last == key => index,
            _ => {
                let index = self.group_of(key);
                self.cpus[cpu as usize].last_group = Some((key, index));
                index
            }
        }
    }

    /// The index of `key`'s group, created on first sight.
    fn group_of(&mut self, key: Key) -> u32 {
        let groups = &mut self.groups;
        *self.group_index.entry(key).or_insert_with(|| {
            groups.push((key, Group::default()));
            (groups.len() - 1) as u32
        })
    }

    /// Consumes one event recorded in the context of task `context` (the task current on
    /// the event's CPU, from the perf sample header), in time order.
    #[inline]
    pub fn feed_in_context(&mut self, e: &Event, context: Option<Tid>) {
        self.feed(e, context, None)
    }

    /// [`WakeupAnalysis::feed_in_context`] with the stack recorded with the event (the
    /// decoder folds a stack record into its event: the same as feeding the record right
    /// after it).
    #[inline]
    pub fn feed_with_stack(&mut self, e: &Event, context: Option<Tid>, stack: Option<StackId>) {
        self.feed(e, context, stack)
    }

    /// The event and its stack, if one was folded into it: a waker's or an arming stack is
    /// kept at once rather than through [`Last`], which only a stack record of its own
    /// (an unfolded one) goes through.
    #[inline(always)]
    fn feed(&mut self, e: &Event, context: Option<Tid>, stack: Option<StackId>) {
        let t = e.time_ns.max(self.last_ns);
        self.start_ns.get_or_insert(t);
        self.last_ns = t;
        let cpu = e.cpu;
        // The sample's context is the task current when the event fired: it corrects a
        // current task whose switch was lost. A switch fires in its `prev`'s context, and
        // so does the stack recorded with it.
        if let (Some(ctx), false) = (
            context,
            matches!(
                e.kind,
                EventKind::Switch { .. } | EventKind::Frequency { .. } | EventKind::Stack { .. }
            ),
        ) {
            let c = self.cpu(cpu);
            if c.current != Some(ctx) {
                c.current = Some(ctx);
                c.exit = None;
                c.remote = None;
            }
        }
        let last = std::mem::replace(&mut self.cpu(cpu).last, Last::Other);
        match &e.kind {
            EventKind::Switch { next, .. } => {
                let was_idle = self.cpu(cpu).current == Some(IDLE_TID);
                let c = self.cpu(cpu);
                c.depth = 0;
                c.expired = None;
                c.current = Some(*next);
                if *next == IDLE_TID {
                    c.exit = None;
                    c.remote = None;
                } else if was_idle {
                    self.thread_runs(cpu, t);
                }
            }
            EventKind::IdleEnter { .. } => {
                let c = self.cpu(cpu);
                c.saw_cpu_idle = true;
                if let Some(x) = &mut c.exit {
                    x.closed = true;
                }
            }
            EventKind::InterruptEnter(kind) => self.interrupt(cpu, t, kind),
            EventKind::InterruptExit => {
                let c = self.cpu(cpu);
                c.depth = c.depth.saturating_sub(1);
                c.interrupt_end_ns = t;
                if let Some(x) = &mut c.exit {
                    x.last_ns = t;
                }
            }
            EventKind::Wakeup { target_cpu, .. } => {
                let target = *target_cpu;
                let issuing = self.cpu(cpu);
                // The waker is the thread running the wake-up, unless an interrupt handler
                // or the idle task issued it.
                let waker = match (issuing.current, issuing.depth) {
                    (Some(tid), 0) if tid != IDLE_TID => Some(tid),
                    _ => None,
                };
                let (held_stack, held) = match (self.sampled, waker) {
                    (true, Some(w)) => self.hold(w, Acting::Waking, stack),
                    _ => (stack, false),
                };
                let mut remote = None;
                if target != cpu {
                    self.seq += 1;
                    let seq = self.seq;
                    remote = Some((target, seq));
                    self.cpu(target);
                    let tc = &mut self.cpus[target as usize];
                    if tc.current == Some(IDLE_TID) && tc.remote.is_none() {
                        tc.remote = Some(RemoteWake {
                            waker,
                            stack: held_stack,
                            held,
                            seq,
                        });
                    }
                }
                if stack.is_none() && (remote.is_some() || (self.sampled && waker.is_some())) {
                    self.cpu(cpu).last = Last::Wakeup { waker, remote };
                }
            }
            EventKind::TimerArm { timer, function } => {
                if self.timers.len() >= MAX_ARMED_TIMERS {
                    self.timers.clear();
                }
                let c = self.cpu(cpu);
                // Armed by the kernel in an interrupt, not by the thread it interrupted
                // (whose user stack the arming carries): inside an interrupt context, or
                // a timer restarted by its own expiry, right after it (HRTIMER_RESTART).
                // (Timers armed by its callback, inside, leave the expiry to its restart.)
                let in_interrupt = c.depth > 0
                    || (c.expired.take() == Some(*timer)
                        && t.saturating_sub(c.interrupt_end_ns) <= MERGE_GAP_NS);
                let tid = if in_interrupt { None } else { c.current };
                let stack = stack.filter(|_| !in_interrupt);
                if in_interrupt {
                    // Its stack record, if one follows, is the interrupted thread's.
                    c.last = Last::Other;
                } else if stack.is_none() {
                    c.last = Last::Arm {
                        timer: *timer,
                        tid,
                        function: *function,
                    };
                }
                // Not the idle task's: it is one tid on every CPU.
                let (stack, held) = match (self.sampled, tid) {
                    (true, Some(tid)) if tid != IDLE_TID => {
                        self.hold(tid, Acting::Arming(*function), stack)
                    }
                    _ => (stack, false),
                };
                let info = self.timers.entry(*timer).or_default();
                let owner = match info.owner {
                    Some(owner) if owner != tid => None,
                    Some(owner) => owner,
                    None => tid,
                };
                info.owner = Some(owner);
                info.armed = Some(Armed {
                    tid: owner,
                    stack,
                    held,
                });
            }
            EventKind::Exec { tid, .. } if self.sampled => {
                if let Some(holds) = self.holds.get_mut(*tid) {
                    holds.release();
                }
            }
            EventKind::Stack { id } => self.stack_of(last, *id),
            _ => {}
        }
    }

    /// A stack recorded with the event before it on its CPU, which left `last`.
    fn stack_of(&mut self, last: Last, id: StackId) {
        match last {
            Last::Wakeup { waker, remote } => {
                let (stack, held) = match (self.sampled, waker) {
                    (true, Some(w)) => self.hold(w, Acting::Waking, Some(id)),
                    _ => (Some(id), false),
                };
                let Some((target, seq)) = remote else {
                    return;
                };
                if let Some(r) = self
                    .cpus
                    .get_mut(target as usize)
                    .and_then(|c| c.remote.as_mut())
                    .filter(|r| r.seq == seq)
                {
                    (r.stack, r.held) = (stack, held);
                }
            }
            Last::Arm {
                timer,
                tid,
                function,
            } => {
                let (stack, held) = match (self.sampled, tid) {
                    (true, Some(tid)) if tid != IDLE_TID => {
                        self.hold(tid, Acting::Arming(function), Some(id))
                    }
                    _ => (Some(id), false),
                };
                if let Some(a) = self.timers.get_mut(&timer).and_then(|t| t.armed.as_mut()) {
                    (a.stack, a.held) = (stack, held);
                }
            }
            Last::Other => {}
        }
    }

    fn interrupt(&mut self, cpu: u32, t: u64, kind: &InterruptKind) {
        self.cpu(cpu).expired = match kind {
            InterruptKind::Timer { timer, .. } => Some(*timer),
            _ => None,
        };
        if let InterruptKind::Timer { function, .. } = kind {
            if self.ignored_callbacks.contains(function) {
                // Still an interrupt context, for the exit that closes it.
                self.ignored_expiries += 1;
                self.cpu(cpu).depth += 1;
                return;
            }
        }
        // Every timer expiry counts for its group, idle or not.
        let timer_key = match kind {
            InterruptKind::Timer { timer, function } => {
                let (armed, shared) = match self.timers.get_mut(timer) {
                    // A timer armed by more than one thread belongs to none of them.
                    Some(info) => (info.armed.take(), info.owner == Some(None)),
                    None => (None, false),
                };
                let armed_by = armed.and_then(|a| a.tid).filter(|_| !shared);
                let stack = armed.and_then(|a| a.stack);
                let key = Key::Timer {
                    stack,
                    function: *function,
                    armed_by,
                    // Kernel timers (no owner, or the idle task) are per CPU: the tick.
                    cpu: match armed_by {
                        None | Some(IDLE_TID) => Some(cpu),
                        Some(_) => None,
                    },
                };
                self.cpu(cpu);
                let index = self.group_at(cpu, key);
                let g = &mut self.groups[index as usize].1;
                g.expiries += 1;
                g.held += u64::from(armed.is_some_and(|a| a.held));
                if g.times.len() < MAX_EXPIRY_TIMES {
                    g.times.push(t);
                }
                match (self.sampled, stack, armed_by) {
                    (true, None, Some(tid)) if tid != IDLE_TID => {
                        self.went_unstacked(tid, Acting::Arming(*function), index);
                    }
                    _ => {}
                }
                Some(key)
            }
            _ => None,
        };
        let c = self.cpu(cpu);
        let depth = c.depth;
        c.depth += 1;
        if c.current != Some(IDLE_TID) || depth > 0 {
            if let Some(x) = &mut c.exit {
                x.last_ns = x.last_ns.max(t);
            }
            return;
        }
        let continues = match c.exit {
            Some(x) if c.saw_cpu_idle => !x.closed,
            Some(x) => t.saturating_sub(x.last_ns) <= MERGE_GAP_NS,
            None => false,
        };
        c.exit = Some(Exit {
            last_ns: t,
            closed: false,
        });
        if continues {
            return;
        }
        let remote = c.remote.take();
        let key = match kind {
            InterruptKind::Timer { .. } => timer_key.expect("a timer has its key"),
            InterruptKind::Irq(name) => Key::Irq(*name),
            InterruptKind::SoftIrq(name) => Key::SoftIrq(*name),
            InterruptKind::Ipi => {
                self.woken_by(cpu, remote, true);
                return;
            }
        };
        self.group(cpu, key).count += 1;
    }

    /// An idle exit of `cpu` for a wake-up from another CPU (an IPI, or none when the
    /// thread just ran), charged to its waker and its stack; `ipi` when no thread woke it.
    fn woken_by(&mut self, cpu: u32, remote: Option<RemoteWake>, ipi: bool) {
        let key = match remote {
            Some(RemoteWake {
                waker: Some(waker),
                stack,
                ..
            }) if !ipi => Key::Thread { waker, stack },
            Some(RemoteWake { waker, stack, .. }) if ipi => Key::Ipi { waker, stack },
            _ => Key::Ipi {
                waker: None,
                stack: None,
            },
        };
        let index = self.group_at(cpu, key);
        let g = &mut self.groups[index as usize].1;
        g.count += 1;
        g.held += u64::from(remote.is_some_and(|r| r.held));
        if let (
            true,
            Some(RemoteWake {
                waker: Some(waker),
                stack: None,
                ..
            }),
        ) = (self.sampled, remote)
        {
            self.went_unstacked(waker, Acting::Waking, index);
        }
    }

    /// A thread is switched in on an idle CPU: an exit of its own unless the interrupt
    /// that just ran explains it.
    fn thread_runs(&mut self, cpu: u32, t: u64) {
        let c = &mut self.cpus[cpu as usize];
        let explained = match c.exit {
            Some(x) if c.saw_cpu_idle => !x.closed,
            Some(x) => c.depth > 0 || t.saturating_sub(x.last_ns) <= MERGE_GAP_NS,
            None => false,
        };
        c.exit = None;
        let remote = c.remote.take();
        if explained {
            return;
        }
        self.woken_by(cpu, remote, false);
    }

    /// The causes, most idle exits first (then most expiries). Timer groups are listed
    /// when they caused an exit or expired often enough to have a period; per-second
    /// figures are over `end_ns` − the first event.
    pub fn finish(mut self, end_ns: u64) -> Vec<WakeupCause> {
        let start = self.start_ns.unwrap_or(end_ns);
        let elapsed_s = (end_ns.max(self.last_ns) - start) as f64 / 1e9;
        let rate = |n: u64| {
            if elapsed_s > 0.0 {
                n as f64 / elapsed_s
            } else {
                0.0
            }
        };
        let mut out: Vec<(WakeupCause, Vec<u64>)> = Vec::new();
        for (key, g) in self.grouped_groups() {
            let is_timer = matches!(key, Key::Timer { .. });
            if g.count == 0 && !(is_timer && g.expiries > MIN_PERIODIC_SAMPLES as u64) {
                continue;
            }
            let mut c = WakeupCause {
                count: g.count,
                per_s: rate(g.count),
                ..WakeupCause::default()
            };
            match key {
                Key::Timer {
                    stack,
                    function,
                    armed_by,
                    ..
                } => {
                    c.kind = "timer".into();
                    c.armed_by_tid = armed_by;
                    c.stack_id = stack;
                    c.timer_function = (function != 0).then(|| format!("{function:#x}"));
                    c.expiries = Some(g.expiries);
                    c.held_expiries = self.sampled.then_some(g.held);
                    c.expiries_per_s = Some(rate(g.expiries));
                    if let Some((median, periodic)) = period(&g.times) {
                        c.period_us = Some(median / 1e3);
                        c.periodic = Some(periodic);
                    }
                }
                Key::Irq(name) => {
                    c.kind = "irq".into();
                    c.irq = Some(name.to_string());
                }
                Key::SoftIrq(name) => {
                    c.kind = "irq".into();
                    c.irq = Some(format!("softirq:{name}"));
                }
                Key::Ipi { waker, stack } => {
                    c.kind = "ipi".into();
                    c.waker_tid = waker;
                    c.stack_id = stack;
                    c.held_idle_exits = self.sampled.then_some(g.held);
                }
                Key::Thread { waker, stack } => {
                    c.kind = "thread".into();
                    c.waker_tid = Some(waker);
                    c.stack_id = stack;
                    c.held_idle_exits = self.sampled.then_some(g.held);
                }
            }
            out.push((c, g.times));
        }
        coalescing(&mut out);
        let mut causes: Vec<WakeupCause> = out.into_iter().map(|(c, _)| c).collect();
        causes.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(b.expiries.unwrap_or(0).cmp(&a.expiries.unwrap_or(0)))
        });
        causes
    }
}

/// The first `max` times of two ascending lists, merged in order.
fn merge_sorted(a: &[u64], b: &[u64], max: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity((a.len() + b.len()).min(max));
    let (mut i, mut j) = (0, 0);
    while out.len() < max && (i < a.len() || j < b.len()) {
        if j == b.len() || (i < a.len() && a[i] <= b[j]) {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out
}

/// Median interval (ns) of successive times and whether they are periodic.
fn period(times: &[u64]) -> Option<(f64, bool)> {
    let mut d: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    if d.is_empty() {
        return None;
    }
    d.sort_by(f64::total_cmp);
    let q = |p: f64| d[((d.len() - 1) as f64 * p).round() as usize];
    let median = crate::stats::median(&d);
    let periodic = d.len() >= MIN_PERIODIC_SAMPLES
        && median > 0.0
        && (q(0.75) - q(0.25)) / median < PERIODIC_MAX_IQR;
    Some((median, periodic))
}

/// A cause in a few words: `timer 0x… armed by tid N`, `irq NAME`, …
pub fn describe(c: &WakeupCause) -> String {
    let who = c
        .function
        .clone()
        .or_else(|| c.timer_function_name.clone())
        .or_else(|| c.timer_function.clone())
        .unwrap_or_else(|| "?".into());
    match c.kind.as_str() {
        "timer" => match c.armed_by_tid {
            Some(tid) => format!("timer {who} armed by tid {tid}"),
            None => format!("timer {who}"),
        },
        "irq" => format!("irq {}", c.irq.as_deref().unwrap_or("?")),
        kind => match c.waker_tid {
            Some(tid) => format!("{kind} from tid {tid}"),
            None => kind.to_string(),
        },
    }
}

#[cfg(test)]
mod tests;
