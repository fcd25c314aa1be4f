//! Throughput of the streaming scheduler analysis on a synthetic context-switch-heavy
//! stream (issue 4 asks for at least 5 million events per second on a 2-core machine).
//!
//!     cargo run --release -p powerlens-core --example sched_throughput [EVENTS] [THREADS]
//!
//! Generation time is excluded: the stream is built first, then analysed three times
//! plainly and three times with a thread table (4 threads per process: per-process
//! parallelism tracking, as `powerlens report` runs it).

use std::time::Instant;

use std::collections::HashMap;

use powerlens_core::sched::analysis::{analyse, SchedAnalysis};
use powerlens_core::sched::event::{Event, EventKind, SwitchedOut, IDLE_TID};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let threads: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let events = stream(n, threads);
    println!("{} events, {threads} threads, 2 CPUs", events.len());
    for run in 1..=3 {
        let start = Instant::now();
        let summary = analyse(&events, events.last().map(|e| e.time_ns).unwrap_or(0));
        let secs = start.elapsed().as_secs_f64();
        println!(
            "run {run}: {:.3} s, {:.1} M events/s ({} threads in the summary)",
            secs,
            events.len() as f64 / secs / 1e6,
            summary.threads.len()
        );
    }
    let groups: HashMap<u32, u32> = (1..=threads).map(|t| (t, 1000 + (t - 1) / 4)).collect();
    for run in 1..=3 {
        let start = Instant::now();
        let mut a = SchedAnalysis::with_thread_groups(groups.clone());
        for e in &events {
            a.feed(e);
        }
        let summary = a.finish(events.last().map(|e| e.time_ns).unwrap_or(0));
        let secs = start.elapsed().as_secs_f64();
        println!(
            "with thread table, run {run}: {:.3} s, {:.1} M events/s ({} processes)",
            secs,
            events.len() as f64 / secs / 1e6,
            summary.processes.len()
        );
    }
}

/// Wake-ups and switches in the proportions of a ping-pong heavy workload, plus idle
/// enter/exit pairs.
fn stream(n: usize, threads: u32) -> Vec<Event> {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let mut on_cpu = [IDLE_TID; 2];
    let mut events = Vec::with_capacity(n);
    let mut t = 0u64;
    while events.len() < n {
        t += 1 + rnd(2000);
        let cpu = rnd(2) as u32;
        let tid = 1 + rnd(threads as u64) as u32;
        let kind = match rnd(8) {
            0 => EventKind::IdleEnter {
                state: rnd(2) as u32,
            },
            1 => EventKind::IdleExit,
            2 | 3 => EventKind::Wakeup {
                tid,
                target_cpu: cpu,
                new_thread: false,
            },
            _ => {
                let prev = on_cpu[cpu as usize];
                let next = if rnd(5) == 0 { IDLE_TID } else { tid };
                if prev == next {
                    continue;
                }
                on_cpu[cpu as usize] = next;
                let how = if rnd(2) == 0 {
                    SwitchedOut::Blocked
                } else {
                    SwitchedOut::Preempted
                };
                EventKind::Switch { prev, how, next }
            }
        };
        events.push(Event {
            time_ns: t,
            cpu,
            kind,
        });
    }
    events
}
