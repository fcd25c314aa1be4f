//! Size and speed of the recording's chunk codec on a synthetic scheduler stream
//! (switches, wake-ups, idle enter/exit, timer interrupts among a few hundred threads).
//!
//!     cargo run --release -p powerlens-core --example codec_throughput [EVENTS] [CHUNK_BYTES]
//!
//! Events are split per CPU and cut into chunks of about CHUNK_BYTES (64 KiB), as the
//! recorder does. Generation time is excluded; decoding reuses one output vector per
//! chunk, as `report` does.

use std::time::Instant;

use powerlens_core::codec::{decode_chunk, ChunkEncoder};
use powerlens_core::sched::event::{Event, EventKind, InterruptKind, SwitchedOut, IDLE_TID};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let chunk_bytes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(65_536);
    let per_cpu = stream(n, 2);
    let total: usize = per_cpu.iter().map(Vec::len).sum();
    let switches_wakeups = per_cpu
        .iter()
        .flatten()
        .filter(|e| matches!(e.kind, EventKind::Switch { .. } | EventKind::Wakeup { .. }))
        .count();
    println!(
        "{total} events on {} CPUs ({:.0}% switches and wake-ups), chunks of ~{chunk_bytes} bytes",
        per_cpu.len(),
        100.0 * switches_wakeups as f64 / total as f64
    );

    let mut chunks = Vec::new();
    let start = Instant::now();
    let mut enc = ChunkEncoder::new();
    for events in &per_cpu {
        for e in events {
            enc.push(e);
            if enc.encoded_bytes() >= chunk_bytes {
                chunks.push(enc.finish());
            }
        }
        if !enc.is_empty() {
            chunks.push(enc.finish());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes: usize = chunks.iter().map(Vec::len).sum();
    println!(
        "encode: {:.3} s, {:.1} M events/s; {} chunks, {bytes} bytes, {:.2} bytes/event",
        secs,
        total as f64 / secs / 1e6,
        chunks.len(),
        bytes as f64 / total as f64
    );

    let mut out = Vec::new();
    for run in 1..=3 {
        let start = Instant::now();
        let cpu_start = thread_cpu_ns();
        let mut decoded = 0usize;
        for c in &chunks {
            out.clear();
            decode_chunk(c, &mut out).expect("valid chunk");
            decoded += out.len();
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu_secs = thread_cpu_ns()
            .zip(cpu_start)
            .map(|(b, a)| (b - a) as f64 / 1e9);
        assert_eq!(decoded, total);
        println!(
            "decode run {run}: {:.3} s, {:.1} M events/s, {:.0} MB/s{}",
            secs,
            total as f64 / secs / 1e6,
            bytes as f64 / secs / 1e6,
            cpu_secs
                .map(|c| format!(" ({:.1} M events per CPU-second)", total as f64 / c / 1e6))
                .unwrap_or_default()
        );
    }

    // Only switches and wake-ups, the bulk of a context-switch-heavy recording.
    let mut enc = ChunkEncoder::new();
    let (mut sw_bytes, mut sw_events) = (0usize, 0usize);
    for e in per_cpu[0]
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Switch { .. } | EventKind::Wakeup { .. }))
    {
        enc.push(e);
        sw_events += 1;
        if enc.encoded_bytes() >= chunk_bytes {
            sw_bytes += enc.finish().len();
        }
    }
    sw_bytes += enc.finish().len();
    println!(
        "sched_switch/sched_wakeup only: {:.2} bytes/event",
        sw_bytes as f64 / sw_events as f64
    );
}

/// CPU time of this thread (ns), from /proc: robust when other builds share the CPUs.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Per-CPU event streams in the proportions of a ping-pong heavy workload.
fn stream(n: usize, cpus: usize) -> Vec<Vec<Event>> {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let threads = 300u64;
    let mut on_cpu = vec![IDLE_TID; cpus];
    let mut out: Vec<Vec<Event>> = (0..cpus)
        .map(|_| Vec::with_capacity(n / cpus + 1))
        .collect();
    let mut t = 5_000_000_000u64;
    let mut made = 0;
    while made < n {
        t += 1 + rnd(4000);
        let cpu = rnd(cpus as u64) as u32;
        let tid = 2_000 + rnd(threads) as u32;
        let kind = match rnd(16) {
            0 => EventKind::IdleEnter {
                state: rnd(3) as u32,
            },
            1 => EventKind::IdleExit,
            2 => EventKind::InterruptEnter(InterruptKind::Timer {
                timer: 0,
                function: 0,
            }),
            3 => EventKind::InterruptExit,
            4..=8 => EventKind::Wakeup {
                tid,
                target_cpu: if rnd(4) == 0 { cpu ^ 1 } else { cpu },
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
        out[cpu as usize].push(Event {
            time_ns: t,
            cpu,
            kind,
        });
        made += 1;
    }
    out
}
