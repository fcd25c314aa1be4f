use super::*;
use crate::sched::event::SwitchedOut;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

struct Stream {
    a: WakeupAnalysis,
    /// Every record fed, for feeding them again another way.
    fed: Vec<(Event, Option<Tid>)>,
    sampled: bool,
}

impl Stream {
    fn new() -> Self {
        Stream {
            a: WakeupAnalysis::new(),
            fed: Vec::new(),
            sampled: false,
        }
    }
    /// The stream of a recording whose stacks were sampled (sample and hold).
    fn sampled() -> Self {
        Stream {
            a: WakeupAnalysis::new().with_sampled_stacks(),
            fed: Vec::new(),
            sampled: true,
        }
    }
    fn ev(&mut self, t: u64, cpu: u32, ctx: Tid, kind: EventKind) -> &mut Self {
        let e = Event {
            time_ns: t,
            cpu,
            kind,
        };
        self.a.feed_in_context(&e, Some(ctx));
        self.fed.push((e, Some(ctx)));
        self
    }
    /// The causes of the same records fed as the decoder delivers them: each stack
    /// record folded into the event before it on its CPU, at its time and context.
    fn folded_causes(&self, end_ns: u64) -> Vec<WakeupCause> {
        let mut a = WakeupAnalysis::new();
        if self.sampled {
            a = a.with_sampled_stacks();
        }
        let mut records = self.fed.iter().peekable();
        while let Some((e, ctx)) = records.next() {
            let stack = match records.peek() {
                Some((next, next_ctx))
                    if !matches!(e.kind, EventKind::Stack { .. })
                        && (next.time_ns, next.cpu, *next_ctx) == (e.time_ns, e.cpu, *ctx) =>
                {
                    match next.kind {
                        EventKind::Stack { id } => {
                            records.next();
                            Some(id)
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            a.feed_with_stack(e, *ctx, stack);
        }
        a.finish(end_ns)
    }
    fn switch(&mut self, t: u64, cpu: u32, prev: Tid, next: Tid) -> &mut Self {
        let how = SwitchedOut::Blocked;
        self.ev(t, cpu, prev, EventKind::Switch { prev, how, next })
    }
    /// Thread (or idle task) `waker`, current on `cpu`, wakes `tid` onto `target_cpu`.
    fn wake(&mut self, t: u64, cpu: u32, waker: Tid, tid: Tid, target_cpu: u32) -> &mut Self {
        let new_thread = false;
        self.ev(
            t,
            cpu,
            waker,
            EventKind::Wakeup {
                tid,
                target_cpu,
                new_thread,
            },
        )
    }
    fn timer_fires(&mut self, t: u64, cpu: u32, timer: u64, function: u64) -> &mut Self {
        self.ev(
            t,
            cpu,
            IDLE_TID,
            EventKind::InterruptEnter(InterruptKind::Timer { timer, function }),
        )
        .ev(t + 2 * US, cpu, IDLE_TID, EventKind::InterruptExit)
    }
    /// Timer `timer` armed by thread `10 + cpu` on `cpu` (stack `cpu`) 100 µs before it
    /// fires there: a thread's periodic timer (its switches left out).
    fn armed_timer_fires(&mut self, t: u64, cpu: u32, timer: u64, function: u64) -> &mut Self {
        self.arm(t - 100 * US, cpu, 10 + cpu, timer, cpu)
            .timer_fires(t, cpu, timer, function)
    }
    fn arm(&mut self, t: u64, cpu: u32, tid: Tid, timer: u64, stack: StackId) -> &mut Self {
        self.ev(
            t,
            cpu,
            tid,
            EventKind::TimerArm {
                timer,
                function: 0xf00,
            },
        )
        .ev(t, cpu, tid, EventKind::Stack { id: stack })
    }
    /// [`Stream::periodic_sleeper_at`] with armings that carry a stack or none: timer
    /// `0x1000 + k` in period k, `stacks[k]` (`n` = `stacks.len()` periods).
    fn sleeps(&mut self, cpu: u32, tid: Tid, t0: u64, period: u64, stacks: &[Option<StackId>]) {
        for (k, stack) in stacks.iter().enumerate() {
            let t = t0 + k as u64 * period;
            let timer = 0x1000 + t / period;
            self.switch(t, cpu, IDLE_TID, tid);
            let arming = EventKind::TimerArm {
                timer,
                function: 0xf00,
            };
            self.ev(t + 40 * US, cpu, tid, arming);
            if let Some(id) = *stack {
                self.ev(t + 40 * US, cpu, tid, EventKind::Stack { id });
            }
            self.switch(t + 50 * US, cpu, tid, IDLE_TID)
                .timer_fires(t + period - 3 * US, cpu, timer, 0xf00)
                .wake(t + period - 2 * US, cpu, IDLE_TID, tid, cpu);
        }
    }
    /// A thread `tid` on `cpu` that sleeps on a timer armed with stack 7 and is woken by
    /// it every `period` for `n` periods, starting at `t0`, the CPU idle in between.
    fn periodic_sleeper(&mut self, cpu: u32, tid: Tid, t0: u64, period: u64, n: u64) {
        self.periodic_sleeper_at(cpu, tid, t0, period, n, &[7]);
    }
    /// [`Stream::periodic_sleeper`], arming its timer at `stacks[k % len]` in period k.
    fn periodic_sleeper_at(
        &mut self,
        cpu: u32,
        tid: Tid,
        t0: u64,
        period: u64,
        n: u64,
        stacks: &[StackId],
    ) {
        for k in 0..n {
            let t = t0 + k * period;
            // Runs 50 µs, arms its timer (a different address each time, like an
            // on-stack hrtimer_sleeper), sleeps.
            let stack = stacks[k as usize % stacks.len()];
            self.switch(t, cpu, IDLE_TID, tid)
                .arm(t + 40 * US, cpu, tid, 0x1000 + k, stack)
                .switch(t + 50 * US, cpu, tid, IDLE_TID)
                .timer_fires(t + period - 3 * US, cpu, 0x1000 + k, 0xf00)
                .wake(t + period - 2 * US, cpu, IDLE_TID, tid, cpu);
        }
    }
}

#[test]
fn periodic_timer_wakeups_are_one_timer_cause_with_its_period() {
    let mut s = Stream::new();
    // 1 ms period from 1 ms: 100 periods over 100 ms, each ending in a timer exit
    // (the first switch-in is the stream's first event: no idle before it).
    s.periodic_sleeper(0, 42, MS, MS, 100);
    let causes = s.a.finish(101 * MS);
    assert_eq!(causes.len(), 1, "{causes:#?}");
    let c = &causes[0];
    assert_eq!(c.kind, "timer");
    // Arms 0..99 expire at the start of periods 1..100: the last period's switch-in
    // is past the stream; every expiry is an exit.
    assert_eq!(c.count, 100);
    assert_eq!(c.expiries, Some(100));
    // 100 exits over 101 ms − 1 ms (the first event).
    assert!((c.per_s - 1000.0).abs() < 1e-6, "{}", c.per_s);
    assert_eq!(c.armed_by_tid, Some(42));
    assert_eq!(c.stack_id, Some(7));
    assert_eq!(c.timer_function.as_deref(), Some("0xf00"));
    assert_eq!(c.period_us, Some(1000.0));
    assert_eq!(c.periodic, Some(true));
    // Alone, 1 ms < 10 ms: coalescible by raising its slack.
    assert_eq!(c.coalescible, Some(true));
}

/// Stacks grouped after the events (as the report does, resolving the stacks while
/// they stream) give the causes grouping them as they came would: one timer cause for
/// a sleep loop whose arming stack alternates between two of one group, with the
/// counts added and the period of the merged expiries.
#[test]
fn stacks_grouped_at_the_end_merge_their_causes() {
    let run = |group: Option<Vec<StackId>>| {
        let mut s = Stream::new();
        s.periodic_sleeper_at(0, 42, MS, MS, 100, &[7, 8]);
        if let Some(group) = group {
            s.a.group_stacks(group);
        }
        s.a.finish(101 * MS)
    };
    // Apart: two causes of 50 exits each, every 2 ms.
    let apart = run(None);
    assert_eq!(apart.len(), 2, "{apart:#?}");
    for (c, stack) in apart.iter().zip([7, 8]) {
        assert_eq!((c.count, c.stack_id), (50, Some(stack)));
        assert_eq!(c.period_us, Some(2000.0));
    }
    // Stack 8 grouped under 7: one cause, every 1 ms, as one stack would give.
    let grouped = run(Some(vec![0, 1, 2, 3, 4, 5, 6, 7, 7]));
    assert_eq!(grouped.len(), 1, "{grouped:#?}");
    let c = &grouped[0];
    assert_eq!((c.count, c.expiries, c.stack_id), (100, Some(100), Some(7)));
    assert_eq!(c.period_us, Some(1000.0));
    let mut one_stack = Stream::new();
    one_stack.periodic_sleeper(0, 42, MS, MS, 100);
    assert_eq!(grouped, one_stack.a.finish(101 * MS));
}

/// The stack that keys a group is the recording's first with the same innermost user
/// function, whatever recorded it: a CPU-time sample taken in the sleep loop's libc
/// wrapper, before the loop armed its first timer, has no kernel frames and armed
/// nothing. The cause shows the stack that armed it (one CI run showed the sample's).
#[test]
fn a_grouped_cause_shows_a_stack_that_armed_it() {
    let mut s = Stream::new();
    s.periodic_sleeper_at(0, 42, MS, MS, 100, &[7, 8]);
    // Stacks 7 and 8 grouped under 3, which no timer arming carried.
    s.a.group_stacks(vec![0, 1, 2, 3, 4, 5, 6, 3, 3]);
    let causes = s.a.finish(101 * MS);
    assert_eq!(causes.len(), 1, "{causes:#?}");
    assert_eq!((causes[0].count, causes[0].stack_id), (100, Some(7)));
}

#[test]
fn merged_expiry_times_keep_the_first_ones_in_order() {
    assert_eq!(
        merge_sorted(&[1, 4, 9], &[2, 3, 10], 10),
        [1, 2, 3, 4, 9, 10]
    );
    assert_eq!(merge_sorted(&[1, 4, 9], &[2, 3, 10], 4), [1, 2, 3, 4]);
    assert_eq!(merge_sorted(&[], &[5], 4), [5]);
}

#[test]
fn an_irq_exit_is_named_and_its_softirq_is_the_same_exit() {
    let mut s = Stream::new();
    s.switch(0, 0, 5, IDLE_TID)
        .ev(
            MS,
            0,
            0,
            EventKind::InterruptEnter(InterruptKind::Irq("virtio0-input.0".into())),
        )
        .ev(MS + 5 * US, 0, 0, EventKind::InterruptExit)
        // The softirq of the same interrupt, 1 µs later: not a second exit.
        .ev(
            MS + 6 * US,
            0,
            0,
            EventKind::InterruptEnter(InterruptKind::SoftIrq("NET_RX".into())),
        )
        .ev(MS + 9 * US, 0, 0, EventKind::InterruptExit)
        .switch(MS + 12 * US, 0, IDLE_TID, 5);
    let causes = s.a.finish(2 * MS);
    assert_eq!(causes.len(), 1, "{causes:#?}");
    assert_eq!(causes[0].kind, "irq");
    assert_eq!(causes[0].irq.as_deref(), Some("virtio0-input.0"));
    assert_eq!(causes[0].count, 1);
    assert_eq!(causes[0].per_s, 500.0);
}

#[test]
fn a_remote_wakeup_without_interrupt_names_the_waker_and_its_stack() {
    // Thread 30 on cpu0 wakes thread 8 onto idle cpu1, from stack 3.
    let remote_wake = || {
        let mut s = Stream::new();
        s.switch(0, 1, 8, IDLE_TID)
            .switch(0, 0, IDLE_TID, 30)
            .wake(MS, 0, 30, 8, 1)
            .ev(MS, 0, 30, EventKind::Stack { id: 3 });
        s
    };
    // A polling idle state: no IPI.
    let mut s = remote_wake();
    s.switch(MS + 4 * US, 1, IDLE_TID, 8);
    let causes = s.a.finish(2 * MS);
    assert_eq!(causes.len(), 1, "{causes:#?}");
    let c = &causes[0];
    assert_eq!(c.kind, "thread");
    assert_eq!((c.waker_tid, c.stack_id, c.count), (Some(30), Some(3), 1));
    // The same with a reschedule IPI delivering it: kind ipi, still naming the waker.
    let mut s = remote_wake();
    s.ev(
        MS + 2 * US,
        1,
        0,
        EventKind::InterruptEnter(InterruptKind::Ipi),
    )
    .ev(MS + 3 * US, 1, 0, EventKind::InterruptExit)
    .switch(MS + 4 * US, 1, IDLE_TID, 8);
    let causes = s.a.finish(2 * MS);
    assert_eq!(causes.len(), 1, "{causes:#?}");
    assert_eq!(causes[0].kind, "ipi");
    assert_eq!(causes[0].waker_tid, Some(30));
    assert_eq!(causes[0].stack_id, Some(3));
}

/// The stack of a switch-out is recorded in the context of the thread that left (the
/// same perf sample as the switch): it must not make that thread current again. It
/// did, until the CPU's next event: a remote wake-up in between found the CPU busy,
/// and the idle exit it caused lost its waker (an anonymous IPI).
#[test]
fn a_switch_outs_stack_leaves_the_cpu_idle() {
    let mut s = Stream::new();
    s.switch(0, 0, IDLE_TID, 30)
        .switch(MS, 1, 8, IDLE_TID)
        .ev(MS, 1, 8, EventKind::Stack { id: 5 })
        .wake(MS + 10 * US, 0, 30, 8, 1)
        .ev(MS + 10 * US, 0, 30, EventKind::Stack { id: 3 })
        .ev(
            MS + 12 * US,
            1,
            0,
            EventKind::InterruptEnter(InterruptKind::Ipi),
        )
        .ev(MS + 13 * US, 1, 0, EventKind::InterruptExit)
        .switch(MS + 14 * US, 1, IDLE_TID, 8);
    let causes = s.a.finish(2 * MS);
    assert_eq!(causes.len(), 1, "{causes:#?}");
    assert_eq!(causes[0].kind, "ipi");
    assert_eq!(causes[0].waker_tid, Some(30));
    assert_eq!(causes[0].stack_id, Some(3));
}

#[test]
fn an_interrupt_in_idle_that_wakes_nobody_is_an_exit() {
    let mut s = Stream::new();
    s.switch(0, 0, 5, IDLE_TID);
    // Three ticks 4 ms apart, no thread runs: three exits. A busy CPU's tick is none.
    for k in 1..=3 {
        s.timer_fires(k * 4 * MS, 0, 0xaaa, 0xbbb);
    }
    let tick = InterruptKind::Timer {
        timer: 0xaaa,
        function: 0xbbb,
    };
    s.switch(13 * MS, 0, IDLE_TID, 5)
        .ev(14 * MS, 0, 5, EventKind::InterruptEnter(tick))
        .ev(14 * MS + 2 * US, 0, 5, EventKind::InterruptExit);
    let causes = s.a.finish(20 * MS);
    assert_eq!(causes.len(), 2, "{causes:#?}");
    assert_eq!(causes[0].kind, "timer");
    assert_eq!(causes[0].count, 3);
    assert_eq!(causes[0].expiries, Some(4));
    // The switch to 5 at 13 ms comes 1 ms after the last tick and no remote wake-up
    // targeted the CPU: an exit nothing recorded explains, counted as `ipi`.
    assert_eq!((causes[1].kind.as_str(), causes[1].count), ("ipi", 1));
}

#[test]
fn unaligned_periodic_timers_of_4_and_8_ms_are_coalescible() {
    let mut s = Stream::new();
    s.switch(0, 0, 1, IDLE_TID).switch(0, 1, 2, IDLE_TID);
    // Timer A on cpu0 every 4 ms from 4 ms; timer B on cpu1 every 8 ms from 2 ms: B's
    // expiries sit 2 ms from A's, never within 1 ms.
    let mut events = Vec::new();
    for k in 1..=50u64 {
        events.push((k * 4 * MS, 0u32, 0xa00 + k, 0xa));
    }
    for k in 0..25u64 {
        events.push((2 * MS + k * 8 * MS, 1u32, 0xb00 + k, 0xb));
    }
    events.sort();
    for (t, cpu, timer, f) in events {
        s.armed_timer_fires(t, cpu, timer, f);
    }
    let causes = s.a.finish(201 * MS);
    assert_eq!(causes.len(), 2, "{causes:#?}");
    let a = causes
        .iter()
        .find(|c| c.timer_function.as_deref() == Some("0xa"))
        .unwrap();
    let b = causes
        .iter()
        .find(|c| c.timer_function.as_deref() == Some("0xb"))
        .unwrap();
    assert_eq!((a.period_us, b.period_us), (Some(4000.0), Some(8000.0)));
    assert_eq!((a.periodic, b.periodic), (Some(true), Some(true)));
    assert_eq!((a.coalescible, b.coalescible), (Some(true), Some(true)));
    // Issue 17: the reason reads on after "coalescible".
    assert_eq!(
        b.coalesce_with.as_deref(),
        Some("with timer 0xa armed by tid 10 (period 4000 µs; 0% of expiries aligned now)")
    );
    assert_eq!((a.count, b.count), (50, 25));

    // Aligned (B 0.1 ms after every other A): not coalescible. Periods of 20 and
    // 40 ms, above the 10 ms of the single-timer rule, so only the pair rule speaks.
    let mut s = Stream::new();
    s.switch(0, 0, 1, IDLE_TID).switch(0, 1, 2, IDLE_TID);
    let mut events = Vec::new();
    for k in 1..=20u64 {
        events.push((k * 20 * MS, 0u32, 0xa00 + k, 0xa));
    }
    for k in 1..=10u64 {
        events.push((k * 40 * MS + 100 * US, 1u32, 0xb00 + k, 0xb));
    }
    events.sort();
    for (t, cpu, timer, f) in events {
        s.armed_timer_fires(t, cpu, timer, f);
    }
    let causes = s.a.finish(401 * MS);
    assert!(
        causes.iter().all(|c| c.coalescible == Some(false)),
        "{causes:#?}"
    );
}

#[test]
fn a_timer_rearmed_by_several_threads_belongs_to_none() {
    // The tick: one address, re-armed by whichever thread runs (and the idle task).
    let mut s = Stream::new();
    s.switch(0, 0, 1, IDLE_TID);
    for k in 1..=10u64 {
        let armer = if k % 2 == 0 { 42 } else { 43 };
        s.arm(k * 4 * MS - MS, 0, armer, 0x71c, 1).ev(
            k * 4 * MS - MS,
            0,
            IDLE_TID,
            EventKind::Stack { id: 1 },
        );
        s.timer_fires(k * 4 * MS, 0, 0x71c, 0xf00);
    }
    let causes = s.a.finish(41 * MS);
    // Its first expiry, before a second thread armed it, went to the first armer; the
    // 9 after it to no thread.
    assert_eq!(causes.len(), 2, "{causes:#?}");
    assert_eq!(
        (causes[1].armed_by_tid, causes[1].expiries),
        (Some(43), Some(1))
    );
    assert_eq!(causes[0].armed_by_tid, None);
    assert_eq!(causes[0].expiries, Some(9));
    assert_eq!(causes[0].period_us, Some(4000.0));
}

/// A stack folded into its event (as the decoder delivers it) charges what the stack
/// record right after the event charged: the arming stack of a timer, the waker's
/// stack of a remote wake-up; a second stack record after a folded one changes
/// nothing, as it did not as a record.
#[test]
fn folded_stacks_give_the_causes_of_stack_records() {
    let mut s = Stream::new();
    s.periodic_sleeper_at(0, 42, MS, MS, 20, &[7, 8]);
    // cpu1 idle; thread 50 on cpu0 wakes 51 onto it from stack 9, twice, then once
    // with two stack records after the wake-up.
    s.switch(0, 1, 3, IDLE_TID);
    for (k, stacks) in [(0u64, &[9][..]), (1, &[9]), (2, &[10, 11])] {
        let t = 30 * MS + k * 3 * MS;
        s.wake(t, 0, 50, 51, 1);
        for &id in stacks {
            s.ev(t, 0, 50, EventKind::Stack { id });
        }
        s.switch(t + 20 * US, 1, IDLE_TID, 51)
            .switch(t + MS, 1, 51, IDLE_TID);
    }
    let folded = s.folded_causes(40 * MS);
    let causes = s.a.finish(40 * MS);
    let threads: Vec<_> = causes.iter().filter(|c| c.kind == "thread").collect();
    assert_eq!(threads.len(), 2, "{causes:#?}");
    assert_eq!((threads[0].count, threads[0].stack_id), (2, Some(9)));
    assert_eq!((threads[1].count, threads[1].stack_id), (1, Some(10)));
    assert_eq!(causes, folded);
}

#[test]
fn irregular_timers_are_not_periodic() {
    let mut s = Stream::new();
    s.switch(0, 0, 1, IDLE_TID);
    let mut t = 0;
    for k in 0..20u64 {
        t += MS * (1 + (k * 7) % 5);
        s.timer_fires(t, 0, 0x100 + k, 0xc);
    }
    let causes = s.a.finish(t + MS);
    assert_eq!(causes[0].periodic, Some(false));
    assert_eq!(causes[0].coalescible, None);
}

#[test]
fn resolve_fills_function_and_stack() {
    let mut causes = vec![WakeupCause {
        kind: "thread".into(),
        count: 1,
        per_s: 1.0,
        waker_tid: Some(3),
        stack_id: Some(9),
        ..WakeupCause::default()
    }];
    resolve(&mut causes, &|id| {
        (id == 9).then(|| ("main".to_string(), vec!["main (app)".to_string()]))
    });
    assert_eq!(causes[0].function.as_deref(), Some("main"));
    let json = serde_json::to_value(&causes[0]).unwrap();
    assert!(json.get("stack_id").is_none());
    assert_eq!(json["stack"][0], "main (app)");
}

/// Issue 46: one sleep loop in two causes, a named one and a group of expiries without a
/// stack. Sampled stacks, thread 42 arms a timer 10 times, only armings 3 and 6 with a
/// stack (7). Hand-counted: arms 0–2 wait, unstacked, for the first stack, which takes
/// them (back-filled); 4, 5 and 7–9 are held from 3 and 6: all 10 expiries under stack 7,
/// 8 of them held. Without sampled stacks, 2 under stack 7 and 8 in a group without one.
#[test]
fn sampled_armings_without_a_stack_are_held_in_their_sleep_loops_cause() {
    let stacks = [
        None,
        None,
        None,
        Some(7),
        None,
        None,
        Some(7),
        None,
        None,
        None,
    ];
    let mut s = Stream::sampled();
    s.sleeps(0, 42, MS, MS, &stacks);
    let folded = s.folded_causes(12 * MS);
    let causes = s.a.finish(12 * MS);
    assert_eq!(causes.len(), 1, "{causes:#?}");
    let c = &causes[0];
    assert_eq!((c.kind.as_str(), c.armed_by_tid), ("timer", Some(42)));
    assert_eq!((c.stack_id, c.expiries, c.count), (Some(7), Some(10), 10));
    assert_eq!(c.held_expiries, Some(8));
    assert_eq!(c.period_us, Some(1000.0));
    assert_eq!(causes, folded);
    let json = serde_json::to_value(c).unwrap();
    assert_eq!(json["held_expiries"], 8);

    let mut every = Stream::new();
    every.sleeps(0, 42, MS, MS, &stacks);
    let split = every.a.finish(12 * MS);
    let by_stack: Vec<_> = split.iter().map(|c| (c.stack_id, c.expiries)).collect();
    assert_eq!(
        by_stack,
        [(None, Some(8)), (Some(7), Some(2))],
        "{split:#?}"
    );
    assert!(split.iter().all(|c| c.held_expiries.is_none()));
}

/// An exec releases what a thread held: thread 42's launcher arms 5 timers (stack 5 on
/// arming 1), then it execs and the new program arms 5 more (stack 8 on its arming 2,
/// the 8th). Hand-counted: stack 5 takes arms 0 (back-filled), 1, and 2–4 (held): 5
/// expiries, 4 held; stack 8 takes 5 and 6 (unstacked after the exec, back-filled by
/// the new program's first stack), 7, and 8–9 (held): 5, 4 held. Held across the exec,
/// stack 5 would take 5 and 6 too.
#[test]
fn an_exec_releases_the_arming_stacks_a_thread_held() {
    let mut s = Stream::sampled();
    s.sleeps(0, 42, MS, MS, &[None, Some(5), None, None, None]);
    let exec = EventKind::Exec {
        tid: 42,
        comm: "program".into(),
    };
    s.ev(6 * MS, 0, 42, exec);
    s.sleeps(0, 42, 6 * MS, MS, &[None, None, Some(8), None, None]);
    let folded = s.folded_causes(12 * MS);
    let causes = s.a.finish(12 * MS);
    let by_stack: Vec<_> = causes
        .iter()
        .map(|c| (c.stack_id, c.expiries, c.held_expiries))
        .collect();
    assert_eq!(
        by_stack,
        [(Some(5), Some(5), Some(4)), (Some(8), Some(5), Some(4))],
        "{causes:#?}"
    );
    assert_eq!(causes, folded);
}

/// The same for wake-ups: thread 50 on cpu0 wakes 51 onto idle cpu1 5 times, from stack
/// 9 only the 2nd time. All 5 idle exits go to its stack 9: the 1st back-filled, the
/// last 3 held.
#[test]
fn sampled_wakeups_without_a_stack_are_held_in_their_wakers_cause() {
    let mut s = Stream::sampled();
    s.switch(0, 1, 3, IDLE_TID);
    for k in 0..5u64 {
        let t = MS + k * 3 * MS;
        s.wake(t, 0, 50, 51, 1);
        if k == 1 {
            s.ev(t, 0, 50, EventKind::Stack { id: 9 });
        }
        s.switch(t + 20 * US, 1, IDLE_TID, 51)
            .switch(t + MS, 1, 51, IDLE_TID);
    }
    let folded = s.folded_causes(20 * MS);
    let causes = s.a.finish(20 * MS);
    assert_eq!(causes.len(), 1, "{causes:#?}");
    let c = &causes[0];
    assert_eq!((c.kind.as_str(), c.waker_tid), ("thread", Some(50)));
    assert_eq!(
        (c.stack_id, c.count, c.held_idle_exits),
        (Some(9), 5, Some(4))
    );
    assert_eq!(causes, folded);
}

/// Issue 51: the tick of a CPU that one program keeps busy (xz, gzip) is re-armed by the
/// interrupt that ran it, after its callback returned, in whatever thread the interrupt
/// came in: the kernel traces that restart as an arming in the program's context, with
/// the program's user stack. The program armed nothing. A restart by the timer's own
/// expiry is the kernel's: grouped by callback on its CPU, with no thread and no stack,
/// as the tick armed by the idle task is; the same for an arming inside an interrupt.
#[test]
fn a_timer_restarted_by_its_own_expiry_is_the_kernels_not_the_running_threads() {
    for folded in [false, true] {
        let mut s = Stream::new();
        s.switch(0, 1, IDLE_TID, 42);
        for k in 1..=50u64 {
            let t = k * 4 * MS;
            // The tick's expiry interrupts thread 42, then re-arms itself 1 µs after
            // its callback returned; its "arming stack" is 42's user code.
            s.ev(
                t,
                1,
                42,
                EventKind::InterruptEnter(InterruptKind::Timer {
                    timer: 0x71c,
                    function: 0xf00,
                }),
            )
            // Its callback arms another kernel timer inside (the scheduler's).
            .arm(t + US, 1, 42, 0x9b0, 9)
            .ev(t + 2 * US, 1, 42, EventKind::InterruptExit)
            .arm(t + 3 * US, 1, 42, 0x71c, 9);
            // An arming inside an interrupt context (a softirq's timer) is the kernel's
            // too.
            s.ev(
                t + 10 * US,
                1,
                42,
                EventKind::InterruptEnter(InterruptKind::SoftIrq(Name::new("TIMER"))),
            )
            .arm(t + 11 * US, 1, 42, 0x9a0, 9)
            .ev(t + 12 * US, 1, 42, EventKind::InterruptExit);
        }
        let causes = if folded {
            s.folded_causes(201 * MS)
        } else {
            s.a.finish(201 * MS)
        };
        let tick = causes
            .iter()
            .find(|c| c.timer_function.as_deref() == Some("0xf00"))
            .unwrap_or_else(|| panic!("no tick in {causes:#?}"));
        assert_eq!(tick.expiries, Some(50), "{causes:#?}");
        assert_eq!(
            (tick.armed_by_tid, tick.stack_id),
            (None, None),
            "folded {folded}: {causes:#?}"
        );
        assert_eq!(tick.period_us, Some(4000.0));
        // Periodic, but not the program's to coalesce.
        assert_eq!((tick.periodic, tick.coalescible), (Some(true), None));
    }
}
