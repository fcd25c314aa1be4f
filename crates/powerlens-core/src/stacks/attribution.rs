//! Per-stack attribution: the scheduler analysis' per-thread charges, split by the call
//! stack each thread was at. A layer on [`SchedAnalysis`]: it never re-derives thread
//! states, it learns each charge through [`ThreadCharges`] and adds only what the stacks
//! say — where a thread blocked or was preempted (the stack after its switch-out), who
//! woke whom from where (the stack after a wake-up), where CPU time went (cpu-clock
//! samples), and how long the CPU stayed idle after a thread blocked.
//!
//! Attribution rules (VTune's): a thread's wait and inactive time, and its idle wake-ups,
//! go to the stack at which it last left the CPU — where it blocked or was preempted, which
//! is also where it resumes. CPU time goes to the stacks of its samples.
//!
//! Sampled stacks ([`StackAnalysis::with_sampled_stacks`]: one switch or wake-up in N
//! carries its stack, on switch-bound loads): a switch or wake-up without one is charged
//! to the thread's latest sampled stack in that role (sample and hold), and what a thread
//! did before its first sampled stack goes to that first one. A thread that always
//! blocks at one place is then charged exactly as with every stack; one that blocks at
//! several is split in the proportion its samples saw.

use serde::{Deserialize, Serialize};

use super::hold::{Charge, HeldStack};
use super::NO_STACK;
use crate::sched::analysis::{SchedAnalysis, SchedSummary, ThreadCharges};
use crate::sched::event::{Event, EventKind, KeyMap, StackId, SwitchedOut, Tid, IDLE_TID};
use crate::sched::tid_table::TidTable;

/// Which per-stack metrics an analysis keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StackMetricsKept {
    /// Every one: the function grid, the stack tree and folded stacks show any.
    #[default]
    All,
    /// What the advice cites and the thread grid's report shows beside it: CPU time,
    /// samples, synchronization and preemption switches, wait and idle wake-ups. The idle
    /// time after blocking (and its states), inactive time and wake-ups caused are not
    /// followed, and stay zero: a report that shows no function grid skips their work.
    Advice,
}

/// What one thread did at one stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackMetrics {
    /// CPU time from cpu-clock samples (Σ their periods), and the number of samples.
    pub cpu_ns: u64,
    pub samples: u64,
    pub sync_switches: u64,
    pub preempt_switches: u64,
    pub wait_ns: u64,
    pub inactive_ns: u64,
    pub idle_wakeups: u64,
    pub idle_before_wakeups_ns: u64,
    /// Idle time of the CPU right after the thread blocked here and left it idle, until
    /// something ran on that CPU again.
    pub idle_after_ns: u64,
    /// Threads this one woke from here.
    pub wakeups_caused: u64,
}

impl StackMetrics {
    /// Moves out the metrics charged in `role`: where the thread left the CPU (switches,
    /// wait, inactive and idle time) or where it woke others; CPU-time samples stay.
    fn take_role(&mut self, role: Role) -> StackMetrics {
        match role {
            Role::Parked => StackMetrics {
                sync_switches: std::mem::take(&mut self.sync_switches),
                preempt_switches: std::mem::take(&mut self.preempt_switches),
                wait_ns: std::mem::take(&mut self.wait_ns),
                inactive_ns: std::mem::take(&mut self.inactive_ns),
                idle_wakeups: std::mem::take(&mut self.idle_wakeups),
                idle_before_wakeups_ns: std::mem::take(&mut self.idle_before_wakeups_ns),
                idle_after_ns: std::mem::take(&mut self.idle_after_ns),
                ..StackMetrics::default()
            },
            Role::Woke => StackMetrics {
                wakeups_caused: std::mem::take(&mut self.wakeups_caused),
                ..StackMetrics::default()
            },
            Role::Sampled => StackMetrics::default(),
        }
    }

    pub fn add(&mut self, o: &StackMetrics) {
        self.cpu_ns += o.cpu_ns;
        self.samples += o.samples;
        self.sync_switches += o.sync_switches;
        self.preempt_switches += o.preempt_switches;
        self.wait_ns += o.wait_ns;
        self.inactive_ns += o.inactive_ns;
        self.idle_wakeups += o.idle_wakeups;
        self.idle_before_wakeups_ns += o.idle_before_wakeups_ns;
        self.idle_after_ns += o.idle_after_ns;
        self.wakeups_caused += o.wakeups_caused;
    }
}

/// The result: metrics per (thread, stack), and the idle states the CPU was in after a
/// thread blocked at a stack (`(tid, stack, state) → ns`, from `power:cpu_idle`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StackCharges {
    pub by_thread_stack: KeyMap<(Tid, StackId), StackMetrics>,
    pub idle_states_after: KeyMap<(Tid, StackId, u32), u64>,
    /// Stack events seen; zero means the recording has no stacks.
    pub stacks_seen: u64,
    /// CPU-time samples seen.
    pub samples_seen: u64,
}

/// The event whose stack is expected next on a CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pending {
    None,
    Switch {
        prev: Tid,
        how: SwitchedOut,
    },
    /// A wake-up the scheduler analysis has not (yet) counted as one.
    Waking,
    Woke {
        waker: Tid,
    },
    Sample {
        tid: Tid,
        period_ns: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct CpuState {
    pending: Pending,
    /// The thread that blocked and left this CPU idle, and where.
    blocker: Option<(Tid, StackId)>,
    /// Start of the idle-task period, and of the `cpu_idle` state in progress.
    idle_since: Option<u64>,
    state_since: Option<(u32, u64)>,
}

impl Default for CpuState {
    fn default() -> Self {
        CpuState {
            pending: Pending::None,
            blocker: None,
            idle_since: None,
            state_since: None,
        }
    }
}

/// The layer. Use through [`StackAnalysis`].
#[derive(Debug, Default)]
pub struct StackAttribution {
    /// Everything but `by_thread_stack`, which is built from `metrics` at the end.
    charges: StackCharges,
    /// The metrics per (thread, stack), in first-seen order, and each key's index there:
    /// wait, inactive time and idle wake-ups go to a thread's parked stack several times
    /// per context switch, and through `parked` they reach it without hashing the pair.
    metrics: Vec<((Tid, StackId), StackMetrics)>,
    slots: KeyMap<(Tid, StackId), u32>,
    /// Per thread, the slots it was last charged at, in each role.
    recent: TidTable<RecentSlots>,
    cpus: Vec<CpuState>,
    kept: StackMetricsKept,
    /// Stacks are sampled: sample and hold (module documentation).
    sampled: bool,
}

/// A thread's most recent slots in `metrics`. A thread mostly blocks, wakes others and is
/// sampled at the same few stacks over and over: the slot charged last time is checked
/// first, and the (thread, stack) pair is hashed only when the stack changed.
#[derive(Debug, Clone, Copy)]
struct RecentSlots {
    /// Where the thread last left a CPU ([`NONE`] before that): its wait, inactive time
    /// and idle wake-ups go there, several charges per context switch.
    parked: u32,
    woke: u32,
    sampled: u32,
    /// With sampled stacks, its latest stack where it left a CPU and where it woke others
    /// (sample and hold, [`super::hold`]).
    held_parked: HeldStack,
    held_woke: HeldStack,
}

/// No slot yet.
const NONE: u32 = u32::MAX;

impl Default for RecentSlots {
    fn default() -> Self {
        RecentSlots {
            parked: NONE,
            woke: NONE,
            sampled: NONE,
            held_parked: HeldStack::default(),
            held_woke: HeldStack::default(),
        }
    }
}

/// Which of a thread's [`RecentSlots`].
#[derive(Clone, Copy)]
enum Role {
    Parked,
    Woke,
    Sampled,
}

impl StackAttribution {
    /// The index of (tid, stack)'s metrics, created on first sight.
    fn slot(&mut self, tid: Tid, stack: StackId) -> u32 {
        let metrics = &mut self.metrics;
        *self.slots.entry((tid, stack)).or_insert_with(|| {
            metrics.push(((tid, stack), StackMetrics::default()));
            (metrics.len() - 1) as u32
        })
    }

    /// The slot of (tid, stack), through the thread's recent slot in `role`, which it
    /// becomes.
    #[inline]
    fn recent_slot(&mut self, tid: Tid, stack: StackId, role: Role) -> u32 {
        let recent = self.recent.get_or_insert_with(tid, RecentSlots::default);
        let cached = match role {
            Role::Parked => &mut recent.parked,
            Role::Woke => &mut recent.woke,
            Role::Sampled => &mut recent.sampled,
        };
        if let Some(((t, s), _)) = self.metrics.get(*cached as usize) {
            if (*t, *s) == (tid, stack) {
                return *cached;
            }
        }
        let metrics = &mut self.metrics;
        let slot = *self.slots.entry((tid, stack)).or_insert_with(|| {
            metrics.push(((tid, stack), StackMetrics::default()));
            (metrics.len() - 1) as u32
        });
        *cached = slot;
        slot
    }

    fn metrics(&mut self, tid: Tid, stack: StackId) -> &mut StackMetrics {
        let slot = self.slot(tid, stack);
        &mut self.metrics[slot as usize].1
    }

    /// The metrics of the stack where `tid` last left a CPU ([`NO_STACK`] before that).
    #[inline]
    fn parked_metrics(&mut self, tid: Tid) -> &mut StackMetrics {
        let parked = self
            .recent
            .get_or_insert_with(tid, RecentSlots::default)
            .parked;
        let slot = match parked {
            NONE => self.recent_slot(tid, NO_STACK, Role::Parked),
            slot => slot,
        };
        &mut self.metrics[slot as usize].1
    }

    fn cpu(&mut self, cpu: u32) -> &mut CpuState {
        let i = cpu as usize;
        if self.cpus.len() <= i {
            self.cpus.resize(i + 1, CpuState::default());
        }
        &mut self.cpus[i]
    }

    /// The stack an event of `tid` in `role` is charged to: its own, or with sampled
    /// stacks and none of its own, the thread's latest in that role (sample and hold,
    /// [`super::hold`]). The first stack a thread gets in a role also takes what was
    /// charged before it without one.
    fn held_stack(&mut self, tid: Tid, stack: StackId, role: Role) -> StackId {
        if !self.sampled {
            return stack;
        }
        let recent = self.recent.get_or_insert_with(tid, RecentSlots::default);
        let held = match role {
            Role::Parked => &mut recent.held_parked,
            Role::Woke => &mut recent.held_woke,
            Role::Sampled => return stack,
        };
        let charge = held.charge(stack);
        if let Charge::Own { first: true, .. } = charge {
            self.back_fill(tid, stack, role);
        }
        charge.stack()
    }

    /// `tid`'s first stack in `role` takes what the thread was charged in that role
    /// without one (its slot without a stack also holds the other roles').
    fn back_fill(&mut self, tid: Tid, stack: StackId, role: Role) {
        let Some(&unstacked) = self.slots.get(&(tid, NO_STACK)) else {
            return;
        };
        let before = self.metrics[unstacked as usize].1.take_role(role);
        self.metrics(tid, stack).add(&before);
        if matches!(role, Role::Parked) {
            // And the idle states that followed its blocking.
            let states = &mut self.charges.idle_states_after;
            let moved: Vec<(u32, u64)> = states
                .iter()
                .filter(|((t, s, _), _)| *t == tid && *s == NO_STACK)
                .map(|((_, _, state), ns)| (*state, *ns))
                .collect();
            for (state, ns) in moved {
                states.remove(&(tid, NO_STACK, state));
                *states.entry((tid, stack, state)).or_default() += ns;
            }
        }
    }

    /// `tid` replaced its program (exec): the stacks it held belong to the old one, so
    /// its next switches and wake-ups without a stack wait, unstacked, for its first
    /// stack in the new program, which takes them (as a thread's first stack does).
    fn release_held_stacks(&mut self, tid: Tid) {
        let unstacked = self.slot(tid, NO_STACK);
        let recent = self.recent.get_or_insert_with(tid, RecentSlots::default);
        recent.parked = unstacked;
        recent.woke = unstacked;
        recent.held_parked.release();
        recent.held_woke.release();
    }

    /// Charges what a pending event left, at `stack` (or [`NO_STACK`] when none came).
    fn settle(&mut self, cpu: u32, stack: StackId) {
        let pending = std::mem::replace(&mut self.cpu(cpu).pending, Pending::None);
        match pending {
            Pending::Switch { prev, how } => {
                let stack = self.held_stack(prev, stack, Role::Parked);
                let slot = self.recent_slot(prev, stack, Role::Parked);
                let m = &mut self.metrics[slot as usize].1;
                match how {
                    SwitchedOut::Blocked => m.sync_switches += 1,
                    SwitchedOut::Preempted => m.preempt_switches += 1,
                    SwitchedOut::Exited => {}
                }
                let c = self.cpu(cpu);
                if let Some((tid, s)) = &mut c.blocker {
                    if *tid == prev {
                        *s = stack;
                    }
                }
            }
            Pending::Woke { waker } => {
                let stack = self.held_stack(waker, stack, Role::Woke);
                let slot = self.recent_slot(waker, stack, Role::Woke);
                self.metrics[slot as usize].1.wakeups_caused += 1;
            }
            Pending::Sample { tid, period_ns } => {
                let slot = self.recent_slot(tid, stack, Role::Sampled);
                let m = &mut self.metrics[slot as usize].1;
                m.cpu_ns += period_ns;
                m.samples += 1;
            }
            Pending::Waking | Pending::None => {}
        }
    }

    /// The stack recorded with the event just seen on `cpu`.
    fn stack_recorded(&mut self, cpu: u32, id: StackId) {
        self.charges.stacks_seen += 1;
        self.settle(cpu, id);
    }

    /// Sees an event before the scheduler analysis does.
    fn observe(&mut self, e: &Event) {
        let (cpu, t) = (e.cpu, e.time_ns);
        if let EventKind::Stack { id } = e.kind {
            self.stack_recorded(cpu, id);
            return;
        }
        // Any other event: the stack of the previous one did not come.
        if self.cpu(cpu).pending != Pending::None {
            self.settle(cpu, NO_STACK);
        }
        let idle_after = self.kept == StackMetricsKept::All;
        match e.kind {
            EventKind::Switch { prev, how, next } => {
                self.cpu(cpu).pending = Pending::Switch { prev, how };
                if !idle_after {
                    return;
                }
                if prev == IDLE_TID {
                    self.end_idle(cpu, t);
                }
                if next == IDLE_TID {
                    let c = self.cpu(cpu);
                    c.idle_since = Some(t);
                    c.blocker = (prev != IDLE_TID && how == SwitchedOut::Blocked)
                        .then_some((prev, NO_STACK));
                }
            }
            EventKind::Wakeup { .. } => self.cpu(cpu).pending = Pending::Waking,
            EventKind::Exec { tid, .. } if self.sampled => self.release_held_stacks(tid),
            EventKind::CpuSample { tid, period_ns } => {
                self.charges.samples_seen += 1;
                self.cpu(cpu).pending = Pending::Sample { tid, period_ns };
            }
            EventKind::IdleEnter { .. } | EventKind::IdleExit if !idle_after => {}
            EventKind::IdleEnter { state } => {
                self.close_state(cpu, t);
                self.cpu(cpu).state_since = Some((state, t));
            }
            EventKind::IdleExit => self.close_state(cpu, t),
            _ => {}
        }
    }

    /// Ends the `cpu_idle` state in progress, charging it to the thread that blocked.
    fn close_state(&mut self, cpu: u32, t: u64) {
        let c = self.cpu(cpu);
        let (Some((state, since)), Some((tid, stack))) = (c.state_since.take(), c.blocker) else {
            return;
        };
        *self
            .charges
            .idle_states_after
            .entry((tid, stack, state))
            .or_default() += t.saturating_sub(since);
    }

    /// The idle-task period of `cpu` ends at `t`.
    fn end_idle(&mut self, cpu: u32, t: u64) {
        self.close_state(cpu, t);
        let c = self.cpu(cpu);
        let (since, blocker) = (c.idle_since.take(), c.blocker.take());
        if let (Some(since), Some((tid, stack))) = (since, blocker) {
            self.metrics(tid, stack).idle_after_ns += t.saturating_sub(since);
        }
    }

    fn finish(mut self, end_ns: u64) -> StackCharges {
        for cpu in 0..self.cpus.len() as u32 {
            self.settle(cpu, NO_STACK);
            self.end_idle(cpu, end_ns);
        }
        // With sampled stacks, a thread's slot without a stack was emptied into its first
        // stack: no row for it.
        let sampled = self.sampled;
        self.charges.by_thread_stack = self
            .metrics
            .into_iter()
            .filter(|(_, m)| !sampled || *m != StackMetrics::default())
            .collect();
        self.charges
    }
}

impl ThreadCharges for StackAttribution {
    fn wait(&mut self, tid: Tid, ns: u64) {
        self.parked_metrics(tid).wait_ns += ns;
    }

    fn inactive(&mut self, tid: Tid, ns: u64) {
        if self.kept == StackMetricsKept::All {
            self.parked_metrics(tid).inactive_ns += ns;
        }
    }

    fn idle_wakeup(&mut self, tid: Tid, idle_ns: u64) {
        let m = self.parked_metrics(tid);
        m.idle_wakeups += 1;
        m.idle_before_wakeups_ns += idle_ns;
    }

    fn woke(&mut self, cpu: u32, waker: Tid) {
        if self.kept == StackMetricsKept::Advice {
            return;
        }
        let c = self.cpu(cpu);
        if c.pending == Pending::Waking {
            c.pending = Pending::Woke { waker };
        }
    }
}

/// The scheduler analysis with per-stack attribution layered on it.
pub struct StackAnalysis {
    sched: SchedAnalysis<StackAttribution>,
}

impl StackAnalysis {
    /// Layers stacks on `sched` (configured with thread groups and idle thresholds),
    /// keeping every metric.
    pub fn new(sched: SchedAnalysis) -> Self {
        Self::keeping(sched, StackMetricsKept::All)
    }

    /// Layers stacks on `sched`, keeping the metrics `kept` says.
    pub fn keeping(sched: SchedAnalysis, kept: StackMetricsKept) -> Self {
        StackAnalysis {
            sched: sched.with_charges(StackAttribution {
                kept,
                ..StackAttribution::default()
            }),
        }
    }

    /// One event, with its context (see [`SchedAnalysis::feed_in_context`]); its stack
    /// may come as the next event on its CPU, an [`EventKind::Stack`].
    #[inline]
    pub fn feed_in_context(&mut self, e: &Event, context: Option<Tid>) {
        self.feed_with_stack(e, context, None);
    }

    /// One event, with its context and the stack recorded with it (the decoder folds a
    /// stack record into its event: the same as feeding the record right after it).
    #[inline]
    pub fn feed_with_stack(&mut self, e: &Event, context: Option<Tid>, stack: Option<StackId>) {
        self.sched.charges_mut().observe(e);
        // A stack record has the time, CPU and context of the event before it on its CPU
        // (the same perf sample): it changes nothing the scheduler analysis tracks.
        if !matches!(e.kind, EventKind::Stack { .. }) {
            self.sched.feed_in_context(e, context);
        }
        if let Some(id) = stack {
            self.sched.charges_mut().stack_recorded(e.cpu, id);
        }
    }

    /// The recording's stacks are sampled (one switch or wake-up in N has one): charge
    /// the others by sample and hold (module documentation).
    pub fn with_sampled_stacks(mut self) -> Self {
        self.sched.charges_mut().sampled = true;
        self
    }

    pub fn finish(self, end_ns: u64) -> (SchedSummary, StackCharges) {
        let (summary, layer) = self.sched.finish_with_charges(end_ns);
        let end = summary.end_ns;
        (summary, layer.finish(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::event::{EventKind::*, SwitchedOut::*};

    fn ev(t: u64, cpu: u32, kind: EventKind) -> Event {
        Event {
            time_ns: t,
            cpu,
            kind,
        }
    }

    fn run(events: &[(Event, Option<Tid>)], end: u64) -> (SchedSummary, StackCharges) {
        let mut a = StackAnalysis::new(SchedAnalysis::new());
        for (e, ctx) in events {
            a.feed_in_context(e, *ctx);
        }
        a.finish(end)
    }

    /// Sampled stacks (sample and hold): a ping-pong of threads 10 and 11, 8 rounds; 10's
    /// switch-outs carry a stack only in rounds 2 (stack 1) and 5 (stack 2), 11's
    /// wake-ups of 10 only in round 4 (stack 7), 11's switch-outs never. Hand-counted:
    /// stack 1 takes 10's switches of rounds 0–4 (0–1 before any stack, back-filled; 3–4
    /// held), stack 2 rounds 5–7; stack 7 all 8 wake-ups; 11 keeps its 8 switches
    /// unstacked. Every wait of 10 lands on one of its two stacks and they add up to the
    /// thread's. Without sampling the same stream leaves the unstacked ones unstacked.
    /// (10's own wake-ups of 11 never have a stack, in either mode.)
    #[test]
    fn sampled_stacks_are_held_until_the_next_sample_and_back_filled_before_the_first() {
        let switch = |prev, next| Switch {
            prev,
            how: Blocked,
            next,
        };
        let wakeup = |tid| Wakeup {
            tid,
            target_cpu: 0,
            new_thread: false,
        };
        let mut events = Vec::new();
        for i in 0..8u64 {
            let t = 10_000 + i * 1_000;
            events.push((ev(t, 0, switch(10, 11)), Some(10)));
            if i == 2 || i == 5 {
                let id = if i == 2 { 1 } else { 2 };
                events.push((ev(t, 0, Stack { id }), Some(10)));
            }
            events.push((ev(t + 500, 0, wakeup(10)), Some(11)));
            if i == 4 {
                events.push((ev(t + 500, 0, Stack { id: 7 }), Some(11)));
            }
            events.push((ev(t + 600, 0, switch(11, 10)), Some(11)));
            events.push((ev(t + 900, 0, wakeup(11)), Some(10)));
        }
        let analyse = |sampled: bool| {
            let mut a = StackAnalysis::new(SchedAnalysis::new());
            if sampled {
                a = a.with_sampled_stacks();
            }
            for (e, ctx) in &events {
                a.feed_in_context(e, *ctx);
            }
            a.finish(20_000)
        };
        let (summary, charges) = analyse(true);
        let at = |tid: Tid, stack: StackId| charges.by_thread_stack.get(&(tid, stack)).copied();
        assert_eq!(at(10, 1).unwrap().sync_switches, 5);
        assert_eq!(at(10, 2).unwrap().sync_switches, 3);
        // Its switches and waits before the first sample went to it; its wake-ups of 11
        // never had a stack and stay unstacked.
        let unstacked = at(10, NO_STACK).unwrap_or_default();
        assert_eq!((unstacked.sync_switches, unstacked.wait_ns), (0, 0));
        assert_eq!(at(11, 7).unwrap().wakeups_caused, 8);
        assert_eq!(at(11, NO_STACK).unwrap().sync_switches, 8);
        let waited = at(10, 1).unwrap().wait_ns + at(10, 2).unwrap().wait_ns;
        let thread = summary.threads.iter().find(|t| t.tid == 10).unwrap();
        assert!(waited > 0);
        assert_eq!(waited, thread.wait_ns);

        let (_, exact) = analyse(false);
        let at = |tid: Tid, stack: StackId| exact.by_thread_stack.get(&(tid, stack)).copied();
        assert_eq!(at(10, 1).unwrap().sync_switches, 1);
        assert_eq!(at(10, 2).unwrap().sync_switches, 1);
        assert_eq!(at(10, NO_STACK).unwrap().sync_switches, 6);
        assert_eq!(at(11, 7).unwrap().wakeups_caused, 1);
    }

    /// Sampled stacks across an exec: thread 10 ping-pongs with 11 for 6 rounds; its
    /// switch-out carries a stack in round 1 (stack 1, its launcher's) and round 4
    /// (stack 2, the new program's), and it execs between rounds 2 and 3. Hand-counted:
    /// stack 1 takes rounds 0–2 (0 back-filled, 2 held), stack 2 rounds 3–5 (3 before
    /// the new program's first stack, back-filled; 5 held). Held across the exec, stack 1
    /// would take round 3 too.
    #[test]
    fn an_exec_releases_the_stacks_a_thread_held() {
        let switch = |prev, next| Switch {
            prev,
            how: Blocked,
            next,
        };
        let mut events = Vec::new();
        for i in 0..6u64 {
            let t = 10_000 + i * 1_000;
            if i == 3 {
                let exec = Exec {
                    tid: 10,
                    comm: "program".into(),
                };
                events.push((ev(t - 50, 0, exec), Some(10)));
            }
            events.push((ev(t, 0, switch(10, 11)), Some(10)));
            if i == 1 || i == 4 {
                let id = if i == 1 { 1 } else { 2 };
                events.push((ev(t, 0, Stack { id }), Some(10)));
            }
            let wakeup = Wakeup {
                tid: 10,
                target_cpu: 0,
                new_thread: false,
            };
            events.push((ev(t + 500, 0, wakeup), Some(11)));
            events.push((ev(t + 600, 0, switch(11, 10)), Some(11)));
        }
        let mut a = StackAnalysis::new(SchedAnalysis::new()).with_sampled_stacks();
        for (e, ctx) in &events {
            a.feed_in_context(e, *ctx);
        }
        let (summary, charges) = a.finish(20_000);
        let at = |stack: StackId| charges.by_thread_stack.get(&(10, stack)).copied();
        assert_eq!(at(1).unwrap().sync_switches, 3);
        assert_eq!(at(2).unwrap().sync_switches, 3);
        assert_eq!(at(NO_STACK).unwrap_or_default(), StackMetrics::default());
        let thread = summary.threads.iter().find(|t| t.tid == 10).unwrap();
        assert_eq!(
            at(1).unwrap().wait_ns + at(2).unwrap().wait_ns,
            thread.wait_ns
        );
        assert!(thread.wait_ns > 0);
    }

    /// Threads that block, wake others and are sampled at alternating stacks: every
    /// charge lands on the stack of its own event, not on the one the thread was charged
    /// at the time before (the layer remembers each thread's last slot per role).
    #[test]
    fn alternating_stacks_are_charged_where_they_happened() {
        let mut events = Vec::new();
        for i in 0..6u64 {
            let t = 10_000 + i * 1_000;
            let switch = |prev, next| Switch {
                prev,
                how: Blocked,
                next,
            };
            events.extend([
                (ev(t, 0, switch(10, 11)), Some(10)),
                (
                    ev(
                        t,
                        0,
                        Stack {
                            id: 1 + (i % 2) as u32,
                        },
                    ),
                    Some(10),
                ),
                (
                    ev(
                        t + 100,
                        0,
                        Wakeup {
                            tid: 10,
                            target_cpu: 1,
                            new_thread: false,
                        },
                    ),
                    Some(11),
                ),
                (
                    ev(
                        t + 100,
                        0,
                        Stack {
                            id: 7 + (i % 3) as u32,
                        },
                    ),
                    Some(11),
                ),
                (
                    ev(
                        t + 200,
                        0,
                        CpuSample {
                            tid: 11,
                            period_ns: 100,
                        },
                    ),
                    Some(11),
                ),
                (
                    ev(
                        t + 200,
                        0,
                        Stack {
                            id: 20 + (i % 2) as u32,
                        },
                    ),
                    Some(11),
                ),
                (ev(t + 500, 0, switch(11, 10)), Some(11)),
                (ev(t + 500, 0, Stack { id: 30 }), Some(11)),
            ]);
        }
        let (_, charges) = run(&events, 20_000);
        let m = |tid, s| charges.by_thread_stack[&(tid, s)];
        for stack in [1, 2] {
            assert_eq!(m(10, stack).sync_switches, 3, "stack {stack}");
            assert_eq!(m(10, stack).wait_ns, 300, "woken 100 ns after each block");
        }
        for stack in [7, 8, 9] {
            assert_eq!(m(11, stack).wakeups_caused, 2, "stack {stack}");
        }
        for stack in [20, 21] {
            assert_eq!((m(11, stack).samples, m(11, stack).cpu_ns), (3, 300));
        }
        assert_eq!(m(11, 30).sync_switches, 6);
        assert_eq!(charges.stacks_seen, 24);
    }

    /// Thread 10 blocks at stack 1 (cpu0 idles), a timer wakes it, it is sampled at
    /// stack 2 and preempted at stack 3 by thread 11.
    fn switch_out_events() -> Vec<(Event, Option<Tid>)> {
        let timer = InterruptEnter(crate::sched::event::InterruptKind::Timer {
            timer: 1,
            function: 2,
        });
        vec![
            (
                ev(
                    1_000,
                    0,
                    Switch {
                        prev: 10,
                        how: Blocked,
                        next: 0,
                    },
                ),
                Some(10),
            ),
            (ev(1_000, 0, Stack { id: 1 }), Some(10)),
            (ev(5_000, 0, timer), Some(0)),
            (
                ev(
                    5_100,
                    0,
                    Wakeup {
                        tid: 10,
                        target_cpu: 0,
                        new_thread: false,
                    },
                ),
                Some(0),
            ),
            (ev(5_200, 0, InterruptExit), Some(0)),
            (
                ev(
                    5_300,
                    0,
                    Switch {
                        prev: 0,
                        how: Preempted,
                        next: 10,
                    },
                ),
                Some(0),
            ),
            (
                ev(
                    6_000,
                    0,
                    CpuSample {
                        tid: 10,
                        period_ns: 1_000,
                    },
                ),
                Some(10),
            ),
            (ev(6_000, 0, Stack { id: 2 }), Some(10)),
            (
                ev(
                    7_000,
                    0,
                    Switch {
                        prev: 10,
                        how: Preempted,
                        next: 11,
                    },
                ),
                Some(10),
            ),
            (ev(7_000, 0, Stack { id: 3 }), Some(10)),
        ]
    }

    /// Thread 10 sleeps at stack 1 (CPU goes idle), is woken by a timer with nothing in
    /// between: its wait, its idle wake-up and the idle that followed go to stack 1; it
    /// then runs, is sampled at stack 2 and preempted at stack 3 by thread 11, which wakes
    /// nobody. Every figure hand-computed.
    #[test]
    fn charges_follow_the_switch_out_stack() {
        let events = switch_out_events();
        let (summary, charges) = run(&events, 9_000);
        let m = |s| charges.by_thread_stack[&(10, s)];
        assert_eq!(m(1).sync_switches, 1);
        assert_eq!(m(1).wait_ns, 4_100, "blocked 1000 → woken 5100");
        assert_eq!(m(1).inactive_ns, 200, "woken 5100 → ran 5300");
        assert_eq!(m(1).idle_wakeups, 1);
        assert_eq!(m(1).idle_after_ns, 4_300, "idle 1000 → 5300");
        assert_eq!(m(2).cpu_ns, 1_000);
        assert_eq!(m(2).samples, 1);
        assert_eq!(m(3).preempt_switches, 1);
        assert_eq!(m(3).inactive_ns, 2_000, "preempted 7000 → end 9000");
        // The layer agrees with the thread totals.
        let t10 = summary.threads.iter().find(|t| t.tid == 10).unwrap();
        let total: StackMetrics = charges
            .by_thread_stack
            .iter()
            .filter(|((tid, _), _)| *tid == 10)
            .fold(StackMetrics::default(), |mut acc, (_, m)| {
                acc.add(m);
                acc
            });
        assert_eq!(total.wait_ns, t10.wait_ns);
        assert_eq!(total.inactive_ns, t10.inactive_ns);
        assert_eq!(total.idle_wakeups, t10.idle_wakeups);
        assert_eq!(total.sync_switches, t10.sync_switches);
        assert_eq!(total.preempt_switches, t10.preempt_switches);
        assert_eq!(charges.stacks_seen, 3);
        assert_eq!(charges.samples_seen, 1);
    }

    /// Keeping the advice's metrics gives the same CPU time, switches, wait and idle
    /// wake-ups per stack as keeping all, and leaves the others at zero.
    #[test]
    fn advice_metrics_are_the_full_ones_without_the_rest() {
        let run_keeping = |kept| {
            let mut a = StackAnalysis::keeping(SchedAnalysis::new(), kept);
            for (e, ctx) in switch_out_events() {
                a.feed_in_context(&e, ctx);
            }
            a.finish(9_000).1
        };
        let (all, advice) = (
            run_keeping(StackMetricsKept::All),
            run_keeping(StackMetricsKept::Advice),
        );
        assert_eq!(all.by_thread_stack.len(), advice.by_thread_stack.len());
        for (key, full) in &all.by_thread_stack {
            let kept = advice.by_thread_stack[key];
            let advised = StackMetrics {
                inactive_ns: 0,
                idle_after_ns: 0,
                wakeups_caused: 0,
                ..*full
            };
            assert_eq!(kept, advised, "{key:?}");
        }
        // What the advice does not keep was there to drop.
        assert!(all.by_thread_stack[&(10, 1)].idle_after_ns > 0);
        assert!(all.by_thread_stack[&(10, 3)].inactive_ns > 0);
    }

    /// A thread whose switch-in was lost (cpu1 on this project's VMs) after a recorded
    /// wake-up: its run is the scheduler's account, and the time before it stays runnable
    /// at the stack where it blocked. Thread 10 blocks at stack 1 (100), is woken at 300,
    /// its switch-in is lost, the scheduler charges it 50 ns before it blocks at stack 2
    /// (500) until the end (1,000). So it ran 450–500: runnable 300–450 (150 ns at stack
    /// 1), blocked 200 ns at stack 1 and 500 at stack 2; grids agree, and the switch
    /// intervals and the scheduler give the same 100 + 50 ns of CPU time. (Before the
    /// runtime placed the switch-in, it was inferred at the wake-up, 300: 200 ns of CPU,
    /// and the 150 ns error was moved into the blocked time.)
    #[test]
    fn a_lost_switch_in_runs_the_schedulers_account_after_runnable_time_at_its_stack() {
        let switch = |prev, next| Switch {
            prev,
            how: Blocked,
            next,
        };
        let events = vec![
            (ev(0, 1, switch(0, 10)), Some(0)),
            (ev(100, 1, Runtime { tid: 10, ns: 100 }), Some(10)),
            (ev(100, 1, switch(10, 0)), Some(10)),
            (ev(100, 1, Stack { id: 1 }), Some(10)),
            (ev(250, 0, switch(0, 30)), Some(0)),
            (
                ev(
                    300,
                    0,
                    Wakeup {
                        tid: 10,
                        target_cpu: 1,
                        new_thread: false,
                    },
                ),
                Some(30),
            ),
            (ev(500, 1, Runtime { tid: 10, ns: 50 }), Some(10)),
            (ev(500, 1, switch(10, 0)), Some(10)),
            (ev(500, 1, Stack { id: 2 }), Some(10)),
        ];
        let (summary, charges) = run(&events, 1_000);
        let t10 = summary.threads.iter().find(|t| t.tid == 10).unwrap();
        assert_eq!(t10.inferred_switch_ins, 1);
        assert_eq!((t10.on_cpu_ns, t10.cpu_time_ns), (150, 150));
        assert_eq!((t10.wait_ns, t10.inactive_ns), (700, 150));
        let at = |stack| &charges.by_thread_stack[&(10, stack)];
        assert_eq!((at(1).wait_ns, at(2).wait_ns), (200, 500));
        assert_eq!((at(1).inactive_ns, at(2).inactive_ns), (150, 0));
    }

    /// A waker's stack gets the wake-up it caused; a switch without a stack goes to
    /// NO_STACK; the idle states after a block go to the blocking stack.
    #[test]
    fn wakers_and_missing_stacks() {
        let events = vec![
            (
                ev(
                    100,
                    1,
                    Switch {
                        prev: 20,
                        how: Blocked,
                        next: 0,
                    },
                ),
                Some(20),
            ),
            // No stack for that switch.
            (ev(200, 1, IdleEnter { state: 1 }), Some(0)),
            (ev(900, 1, IdleExit), Some(0)),
            (
                ev(
                    1_000,
                    0,
                    Wakeup {
                        tid: 20,
                        target_cpu: 1,
                        new_thread: false,
                    },
                ),
                Some(30),
            ),
            (ev(1_000, 0, Stack { id: 5 }), Some(30)),
            (
                ev(
                    1_200,
                    1,
                    Switch {
                        prev: 0,
                        how: Preempted,
                        next: 20,
                    },
                ),
                Some(0),
            ),
        ];
        let (_, charges) = run(&events, 2_000);
        assert_eq!(charges.by_thread_stack[&(30, 5)].wakeups_caused, 1);
        let parked = charges.by_thread_stack[&(20, NO_STACK)];
        assert_eq!(parked.sync_switches, 1);
        assert_eq!(parked.wait_ns, 900);
        assert_eq!(parked.idle_after_ns, 1_100);
        assert_eq!(charges.idle_states_after[&(20, NO_STACK, 1)], 700);
    }
}
