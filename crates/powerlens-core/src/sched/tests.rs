//! Hand-computed expectations on small synthetic streams, and invariants on a long
//! pseudo-random one.

use super::analysis::{analyse, SchedSummary, ThreadStats};
use super::event::{Event, EventKind, InterruptKind, SwitchedOut, IDLE_TID};

const A: u32 = 101;
const B: u32 = 102;

fn ev(time_ns: u64, cpu: u32, kind: EventKind) -> Event {
    Event { time_ns, cpu, kind }
}

fn switch(t: u64, cpu: u32, prev: u32, how: SwitchedOut, next: u32) -> Event {
    ev(t, cpu, EventKind::Switch { prev, how, next })
}

fn wakeup(t: u64, cpu: u32, tid: u32) -> Event {
    ev(
        t,
        cpu,
        EventKind::Wakeup {
            tid,
            target_cpu: cpu,
            new_thread: false,
        },
    )
}

fn thread(s: &SchedSummary, tid: u32) -> &ThreadStats {
    s.threads.iter().find(|t| t.tid == tid).unwrap()
}

#[test]
fn states_switches_wait_and_inactive_by_hand() {
    use SwitchedOut::*;
    let events = [
        switch(0, 0, IDLE_TID, Preempted, A),  // A runs 0..10
        switch(10, 0, A, Blocked, IDLE_TID),   // A blocks: sync switch, waits 10..30
        wakeup(30, 0, A),                      // woken from the idle task: ipi_or_idle
        switch(35, 0, IDLE_TID, Preempted, A), // inactive 30..35, runs 35..50
        switch(50, 0, A, Preempted, B),        // preempted: runnable 50..70
        wakeup(60, 0, A),                      // redundant: A is runnable already
        switch(70, 0, B, Blocked, A),          // B ran 50..70; A runs 70..100
    ];
    let s = analyse(&events, 100);
    let a = thread(&s, A);
    assert_eq!(a.cpu_time_ns, 10 + 15 + 30);
    assert_eq!((a.sync_switches, a.preempt_switches), (1, 1));
    assert_eq!(a.wait_ns, 20);
    assert_eq!(a.inactive_ns, 5 + 20);
    assert_eq!(a.wakeups_received.ipi_or_idle, 1);
    assert_eq!(
        a.wakeups_received.total(),
        1,
        "the redundant wake-up is not counted"
    );
    let b = thread(&s, B);
    assert_eq!(b.cpu_time_ns, 20);
    assert_eq!(b.sync_switches, 1);
    assert_eq!(b.wait_ns, 30, "blocked from 70 to the end at 100");
    // Every nanosecond of the CPU belongs to a thread or the idle task.
    assert_eq!(
        a.cpu_time_ns + b.cpu_time_ns + s.cpus[0].idle_task_ns,
        s.elapsed_ns()
    );
}

#[test]
fn idle_wakeups_and_residency_by_hand() {
    use SwitchedOut::*;
    let events = [
        switch(0, 1, A, Blocked, IDLE_TID),
        ev(2, 1, EventKind::IdleEnter { state: 1 }),
        ev(22, 1, EventKind::IdleExit), // 20 ns in state 1
        ev(23, 1, EventKind::InterruptEnter(InterruptKind::Timer)),
        wakeup(24, 1, A), // timer wake-up
        ev(25, 1, EventKind::InterruptExit),
        switch(26, 1, IDLE_TID, Preempted, A), // A is first out of idle: idle wake-up
        switch(30, 1, A, Blocked, IDLE_TID),
        ev(31, 1, EventKind::IdleEnter { state: 0 }),
        ev(33, 1, EventKind::IdleExit),
        ev(34, 1, EventKind::IdleEnter { state: 1 }), // back to idle, no thread ran
        ev(40, 1, EventKind::IdleExit),
        switch(41, 1, IDLE_TID, Preempted, B), // B wakes from the second idle stretch: 2 + 6 ns
    ];
    let s = analyse(&events, 50);
    let cpu = &s.cpus[1];
    assert_eq!(cpu.idle[&1].entries, 2);
    assert_eq!(cpu.idle[&1].time_ns, 20 + 6);
    assert_eq!((cpu.idle[&0].entries, cpu.idle[&0].time_ns), (1, 2));
    assert_eq!(cpu.idle_wakeups, 2);
    let a = thread(&s, A);
    assert_eq!((a.idle_wakeups, a.idle_before_wakeups_ns), (1, 20));
    assert_eq!(a.wakeups_received.timer, 1);
    assert_eq!(a.wait_ns, 24 + (50 - 30), "blocked 0..24 and 30..end");
    let b = thread(&s, B);
    assert_eq!((b.idle_wakeups, b.idle_before_wakeups_ns), (1, 8));
}

#[test]
fn wakeup_causes_and_wakers() {
    use SwitchedOut::*;
    let events = [
        switch(0, 0, IDLE_TID, Preempted, B),
        switch(0, 1, A, Blocked, IDLE_TID),
        wakeup(5, 0, A), // B, running on CPU 0, wakes A
        ev(
            6,
            0,
            EventKind::Migrate {
                tid: A,
                from: 1,
                to: 0,
            },
        ),
        switch(7, 1, IDLE_TID, Preempted, A),
        switch(9, 1, A, Blocked, IDLE_TID),
        ev(
            10,
            0,
            EventKind::InterruptEnter(InterruptKind::Irq("eth0".into())),
        ),
        wakeup(11, 0, A),
        ev(12, 0, EventKind::InterruptExit),
        switch(13, 1, IDLE_TID, Preempted, A),
        switch(14, 1, A, Blocked, IDLE_TID),
        ev(
            15,
            0,
            EventKind::InterruptEnter(InterruptKind::SoftIrq("NET_RX".into())),
        ),
        wakeup(16, 0, A),
    ];
    let s = analyse(&events, 20);
    let a = thread(&s, A);
    assert_eq!(a.wakeups_received.thread, 1);
    assert_eq!(a.wakeups_received.irq, 1);
    assert_eq!(a.wakeups_received.softirq, 1);
    assert_eq!(a.migrations, 1);
    assert_eq!(thread(&s, B).wakeups_caused, 1);
}

#[test]
fn exits_forks_and_execs() {
    use SwitchedOut::*;
    let events = [
        switch(0, 0, IDLE_TID, Preempted, A),
        ev(
            1,
            0,
            EventKind::Exec {
                tid: A,
                comm: "server".into(),
            },
        ),
        ev(
            2,
            0,
            EventKind::Fork {
                parent: A,
                child: B,
            },
        ),
        ev(
            2,
            0,
            EventKind::Wakeup {
                tid: B,
                target_cpu: 1,
                new_thread: true,
            },
        ),
        switch(4, 1, IDLE_TID, Preempted, B),
        ev(8, 1, EventKind::Exit { tid: B }),
        switch(8, 1, B, Exited, IDLE_TID),
    ];
    let s = analyse(&events, 10);
    let b = thread(&s, B);
    assert_eq!((b.parent, b.comm.as_deref()), (Some(A), Some("server")));
    assert_eq!(
        (b.sync_switches, b.preempt_switches),
        (0, 0),
        "an exit is neither"
    );
    assert_eq!((b.cpu_time_ns, b.inactive_ns), (4, 2));
    assert_eq!(
        b.wakeups_received.thread, 1,
        "woken as a new thread by its parent"
    );
}

/// A pseudo-random but valid schedule on 2 CPUs: whatever happens, every CPU-nanosecond
/// belongs to exactly one thread or the idle task, and a thread's running, runnable and
/// blocked times add up to the time since it was first seen (before that its state is
/// unknown, and unknown time is not guessed).
#[test]
fn time_is_conserved_on_a_long_random_stream() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let threads: Vec<u32> = (1..=6).collect();
    let mut on_cpu = [IDLE_TID, IDLE_TID];
    let mut blocked: Vec<u32> = Vec::new();
    let mut runnable: Vec<u32> = threads.clone();
    let mut events = Vec::new();
    let mut first_seen = std::collections::HashMap::new();
    let mut t = 0;
    for _ in 0..20_000 {
        t += 1 + next(50);
        let cpu = next(2) as usize;
        match next(3) {
            // Wake a blocked thread.
            0 if !blocked.is_empty() => {
                let tid = blocked.swap_remove(next(blocked.len() as u64) as usize);
                events.push(wakeup(t, cpu as u32, tid));
                runnable.push(tid);
            }
            // Switch: the current one blocks or is preempted; a runnable one (or idle) runs.
            _ => {
                let prev = on_cpu[cpu];
                let how = if prev != IDLE_TID && next(2) == 0 {
                    SwitchedOut::Blocked
                } else {
                    SwitchedOut::Preempted
                };
                let nxt = if runnable.is_empty() {
                    IDLE_TID
                } else {
                    runnable.swap_remove(next(runnable.len() as u64) as usize)
                };
                if prev == nxt {
                    continue;
                }
                match (prev, how) {
                    (IDLE_TID, _) => {}
                    (p, SwitchedOut::Blocked) => blocked.push(p),
                    (p, _) => runnable.push(p),
                }
                events.push(switch(t, cpu as u32, prev, how, nxt));
                first_seen.entry(nxt).or_insert(t);
                on_cpu[cpu] = nxt;
            }
        }
    }
    let s = analyse(&events, t + 100);
    let elapsed = s.elapsed_ns();
    let busy: u64 = s.threads.iter().map(|th| th.cpu_time_ns).sum();
    let idle: u64 = s.cpus.iter().map(|c| c.idle_task_ns).sum();
    // Both CPUs start with the idle task at the first event, so both span the whole recording.
    assert_eq!(busy + idle, 2 * elapsed);
    for th in &s.threads {
        let accounted = th.cpu_time_ns + th.wait_ns + th.inactive_ns;
        assert_eq!(accounted, s.end_ns - first_seen[&th.tid], "tid {}", th.tid);
    }
    assert!(s
        .threads
        .iter()
        .all(|th| th.sync_switches > 100 && th.preempt_switches > 100));
}
