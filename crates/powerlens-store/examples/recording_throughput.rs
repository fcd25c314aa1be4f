//! Writes a synthetic recording and reads it back the way `report` does (one chunk per
//! CPU in memory, decoded into a reused vector), printing throughput, file size per event
//! and the reader's peak memory.
//!
//!     cargo run --release -p powerlens-store --example recording_throughput -- write FILE [EVENTS]
//!     cargo run --release -p powerlens-store --example recording_throughput -- read FILE
//!
//! Run `read` on recordings of different lengths: its peak RSS (VmHWM) should not grow
//! with the number of events.

use std::path::Path;
use std::time::Instant;

use powerlens_core::codec::{decode_chunk, ChunkEncoder};
use powerlens_core::sched::event::{Event, EventKind, SwitchedOut, IDLE_TID};
use powerlens_store::{RecordingReader, RecordingWriter};

const CHUNK_BYTES: usize = 65_536;
const CPUS: u32 = 2;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", file] => write(Path::new(file), 10_000_000),
        ["write", file, n] => write(Path::new(file), n.parse().expect("EVENTS")),
        ["read", file] => read(Path::new(file)),
        _ => {
            eprintln!("usage: recording_throughput write FILE [EVENTS] | read FILE");
            std::process::exit(2);
        }
    }
}

fn write(path: &Path, n: u64) {
    let start = Instant::now();
    let mut w = RecordingWriter::create(path).expect("create");
    w.set_meta("command", &serde_json::json!(["synthetic"]))
        .unwrap();
    let mut enc: Vec<ChunkEncoder> = (0..CPUS).map(|_| ChunkEncoder::new()).collect();
    let mut on_cpu = vec![IDLE_TID; CPUS as usize];
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let mut t = 1_000_000_000u64;
    let mut last_flush = t;
    for _ in 0..n {
        t += 1 + rnd(4000);
        let cpu = rnd(CPUS as u64) as u32;
        let tid = 2_000 + rnd(300) as u32;
        let kind = if rnd(2) == 0 {
            EventKind::Wakeup {
                tid,
                target_cpu: cpu,
                new_thread: false,
            }
        } else {
            let prev = on_cpu[cpu as usize];
            on_cpu[cpu as usize] = tid;
            EventKind::Switch {
                prev,
                how: SwitchedOut::Blocked,
                next: tid,
            }
        };
        let e = &mut enc[cpu as usize];
        e.push(&Event {
            time_ns: t,
            cpu,
            kind,
        });
        if e.encoded_bytes() >= CHUNK_BYTES {
            let (first, last, count) = (e.first_ns().unwrap(), e.last_ns().unwrap(), e.len());
            w.append_chunk(cpu, first, last, count as u32, &e.finish())
                .unwrap();
        }
        // One flush per simulated second, as the recorder does.
        if t - last_flush >= 1_000_000_000 {
            w.flush().unwrap();
            last_flush = t;
        }
    }
    for (cpu, e) in enc.iter_mut().enumerate() {
        if !e.is_empty() {
            let (first, last, count) = (e.first_ns().unwrap(), e.last_ns().unwrap(), e.len());
            w.append_chunk(cpu as u32, first, last, count as u32, &e.finish())
                .unwrap();
        }
    }
    w.finish().unwrap();
    let secs = start.elapsed().as_secs_f64();
    let size = std::fs::metadata(path).unwrap().len();
    println!(
        "write: {n} events in {secs:.2} s ({:.1} M events/s, encoding included), {size} bytes, {:.2} bytes/event on disk",
        n as f64 / secs / 1e6,
        size as f64 / n as f64
    );
}

fn read(path: &Path) {
    let start = Instant::now();
    let r = RecordingReader::open(path).expect("open");
    let expected = r.event_count().unwrap();
    let mut cursors: Vec<_> = r.cpus().unwrap().into_iter().map(|c| r.chunks(c)).collect();
    let mut out: Vec<Event> = Vec::new();
    let mut total = 0u64;
    let mut switches = 0u64;
    // Round-robin over the CPUs, one chunk each: what a time-merging reader holds.
    loop {
        let mut any = false;
        for c in &mut cursors {
            if let Some(chunk) = c.next_chunk().unwrap() {
                any = true;
                out.clear();
                decode_chunk(&chunk.data, &mut out).unwrap();
                total += out.len() as u64;
                switches += out
                    .iter()
                    .filter(|e| matches!(e.kind, EventKind::Switch { .. }))
                    .count() as u64;
            }
        }
        if !any {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(total, expected);
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
        })
        .unwrap_or_else(|| "?".into());
    println!(
        "read+decode: {total} events ({switches} switches) in {secs:.2} s, {:.1} M events/s, peak RSS {hwm} kB",
        total as f64 / secs / 1e6
    );
}
