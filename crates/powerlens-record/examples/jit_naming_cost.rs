//! What naming a recording's JIT frames adds to the end of `record`: for each perf-map
//! module of the recording (`/tmp/perf-PID.map`, still on disk: the runtimes leave their
//! maps), the map read and parsed and every distinct JIT frame of the stacks looked up,
//! as the symbolization at the end of the recording does:
//!
//!     cargo run --release -p powerlens-record --example jit_naming_cost -- REC [ROUNDS]
//!
//! Prints the maps' lines, the frames, and the median time over ROUNDS (default 15).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use powerlens_core::stacks::{decode_frames, lookups};
use powerlens_store::recording::RecordingReader;
use powerlens_sys::symbolize::perf_map::{is_perf_map, PerfMap};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(rec) = args.first() else {
        anyhow::bail!("usage: jit_naming_cost REC [ROUNDS]");
    };
    let rounds: usize = args.get(1).map_or(Ok(15), |r| r.parse())?;
    let reader = RecordingReader::open(Path::new(rec))?;
    let maps: BTreeMap<u32, String> = reader
        .modules()?
        .into_iter()
        .filter(|(_, path)| is_perf_map(path))
        .collect();
    let mut frames: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    reader.stacks(|_, bytes| {
        if let Ok(stack) = decode_frames(bytes) {
            for f in lookups(&stack).filter(|f| maps.contains_key(&f.module)) {
                frames.entry(f.module).or_default().insert(f.offset);
            }
        }
    })?;
    let mut times = Vec::with_capacity(rounds);
    let (mut lines, mut named) = (0, 0);
    for _ in 0..rounds {
        let start = Instant::now();
        (lines, named) = (0, 0);
        for (module, addresses) in &frames {
            let Some(map) = PerfMap::read(Path::new(&maps[module])) else {
                anyhow::bail!("{} is gone: record again and keep the map", maps[module]);
            };
            lines += map.len();
            named += addresses
                .iter()
                .filter(|&&a| map.lookup(a).is_some())
                .count();
        }
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let frames_total: usize = frames.values().map(BTreeSet::len).sum();
    println!(
        "{} maps, {lines} lines, {frames_total} distinct JIT frames ({named} named): median {:.3} ms over {rounds} rounds (min {:.3}, max {:.3})",
        frames.len(),
        times[rounds / 2] * 1e3,
        times[0] * 1e3,
        times[rounds - 1] * 1e3
    );
    Ok(())
}
