//! Where `report`'s time goes on a real recording, stage by stage, each stage timed alone
//! (wall time and the CPU time of every thread of the process):
//!
//!     cargo run --release -p powerlens-record --example replay_throughput -- REC [ROUNDS [STAGE]]
//!
//! - `read`: every chunk of every CPU read from the file, on this thread;
//! - `decode`: every chunk of every CPU read and decoded on this thread, no merge;
//! - `replay`: the replay (decode thread: read, decode, merge) feeding an empty callback;
//! - `analyse`: the whole analysis `report` runs (`powerlens_record::analyse`), stacks on.
//!
//! Medians over ROUNDS (default 15). The stages share no state between rounds, so a
//! change to one of them shows up in its own line; docs/PERFORMANCE.md says how the
//! figures were used.

use std::path::Path;
use std::time::Instant;

use powerlens_core::codec::decode_chunk_in_context;
use powerlens_core::stacks::attribution::StackMetricsKept;
use powerlens_record::analyse::{analyse, AnalyseObserver, AnalyseOptions};
use powerlens_record::replay;
use powerlens_store::RecordingReader;
use powerlens_sys::Roots;

struct Quiet;

impl AnalyseObserver for Quiet {
    fn tell(&mut self, _kind: &str, _message: &str) {}
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first().map(Path::new) else {
        eprintln!("usage: replay_throughput REC [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(15);
    let only = args.get(2).map(String::as_str);
    let reader = RecordingReader::open(path).expect("a recording");
    let records = reader.event_count().expect("its chunk table");
    println!("{records} records in {}", path.display());
    let roots = Roots::default();
    let stages: [(&str, &dyn Fn()); 4] = [
        ("read", &|| read_all(&reader, |_| {})),
        ("decode", &|| decode_all(&reader)),
        ("replay", &|| {
            replay::replay(&reader, |_, _| {}, |_| {}).expect("a readable recording");
        }),
        ("analyse", &|| {
            let opts = AnalyseOptions {
                all_processes: false,
                grouping: None,
                stacks: true,
                stack_metrics: StackMetricsKept::Advice,
                roots: &roots,
                battery_wh: None,
                function_scope: Default::default(),
            };
            analyse(path, &opts, &mut Quiet).expect("an analysable recording");
        }),
    ];
    for (name, stage) in stages {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let mut wall = Vec::new();
        let mut cpu = Vec::new();
        for _ in 0..rounds {
            let cpu_before = process_cpu_ns();
            let start = Instant::now();
            stage();
            wall.push(start.elapsed().as_secs_f64() * 1e3);
            cpu.push((process_cpu_ns() - cpu_before) as f64 / 1e6);
        }
        let (w, c) = (median(&mut wall), median(&mut cpu));
        println!(
            "{name:8} wall {w:7.2} ms  CPU {c:7.2} ms  {:6.1} M records/s",
            records as f64 / w / 1e3
        );
    }
}

/// Reads every chunk, CPU after CPU, and hands each to `f`.
fn read_all(reader: &RecordingReader, mut f: impl FnMut(&[u8])) {
    for cpu in reader.cpus().expect("its CPUs") {
        let mut cursor = reader.chunks(cpu);
        while let Some(chunk) = cursor.next_chunk().expect("a readable chunk") {
            f(&chunk.data);
            cursor.recycle(chunk.data);
        }
    }
}

/// Reads and decodes every chunk, CPU after CPU, into reused vectors.
fn decode_all(reader: &RecordingReader) {
    let (mut events, mut contexts) = (Vec::new(), Vec::new());
    read_all(reader, |chunk| {
        events.clear();
        contexts.clear();
        decode_chunk_in_context(chunk, &mut events, &mut contexts).expect("a valid chunk");
    });
}

fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
