//! A whole recording file: the bytes are written to a file and read as `report` reads a
//! recording — opened and checked against its content checksum, its metadata, thread
//! table, samples, stack and module tables and symbol cache read, every event replayed
//! through the scheduler, stack and wake-up analyses, and the report model built.
//! Errors are expected (most mutants are damaged files); panics, hangs and figures that
//! are not finite or are negative energies are not.

use powerlens_core::sched::report as model;
use powerlens_core::sched::wakeups::WakeupAnalysis;
use powerlens_core::stacks::attribution::StackAnalysis;
use powerlens_record::{context, meta, reduced, replay, sampler, symbols, MODE_REDUCED};
use powerlens_sys::Roots;

use super::scratch;

pub const DICT: &[&str] = &[
    "SQLite format 3\0",
    "meta",
    "chunks",
    "samples",
    "threads",
    "stacks",
    "modules",
    "symbols",
    "content_crc32",
    "symbols_crc32",
    "\"monotonic_ns\"",
    "\"model\"",
    "\"cpuidle\"",
    "\"states\"",
    "trace",
    "reduced",
];

pub fn run(input: &[u8]) {
    scratch::with_file("fuzz.rec", input, |path| {
        // Symbols come from the recording's cache, or from files that exist on no fixture
        // tree: an empty sysfs and procfs root keeps the kernel's symbols out of it.
        let roots_dir = path.with_file_name("roots");
        let _ = std::fs::create_dir_all(&roots_dir);
        let roots = Roots {
            sysfs: roots_dir.clone(),
            procfs: roots_dir,
        };
        if let Err(e) = read(path, &roots) {
            crate::verbose(|| format!("recording: {e:#}"));
        }
    });
}

fn read(path: &std::path::Path, roots: &Roots) -> anyhow::Result<()> {
    let (reader, _warning) = powerlens_record::open_recording(path)?;
    let mut ctx = context::read(&reader)?;
    let _ = reader.all_meta();
    for kind in [
        sampler::ENERGY,
        sampler::CPUIDLE,
        sampler::CPUFREQ,
        sampler::THREADS,
    ] {
        let _ = reader.samples(kind, |_, _| {});
    }
    let mode = reader.meta(meta::MODE)?;
    let summary = if mode.as_ref().and_then(|m| m.as_str()) == Some(MODE_REDUCED) {
        reduced::summary(&reader)?
    } else {
        // With its symbol cache intact, resolving reads the stacks, the modules and the
        // cache from the file. A damaged cache makes `report` symbolize every frame again
        // from the modules' ELF files — libLLVM, rustc, whatever ran while the seed was
        // recorded: up to a second per input, a hundred times the rest, spent in the ELF
        // reader rather than in powerlens's parsers. Those inputs skip the stacks.
        let resolved = match reader.symbols_intact() {
            Ok(true) => symbols::resolve(&reader, roots).ok().flatten(),
            _ => None,
        };
        let end_ns = reader
            .meta(meta::STOP)?
            .and_then(|s| s["monotonic_ns"].as_u64())
            .unwrap_or(0);
        let mut wakeups = WakeupAnalysis::new().group_stacks(
            resolved
                .as_ref()
                .map(|r| r.stacks.group_by_innermost_user())
                .unwrap_or_default(),
        );
        let mut last_ns = 0;
        let mut in_order = |t: u64| {
            assert!(
                t >= last_ns,
                "the replay went back in time ({t} after {last_ns})"
            );
            last_ns = t;
        };
        let summary = if resolved.is_some() {
            let mut analysis = StackAnalysis::new(ctx.analysis());
            let stats = replay::replay(
                &reader,
                |e, c| {
                    in_order(e.time_ns);
                    analysis.feed_in_context(e, c);
                    wakeups.feed_in_context(e, c);
                },
                |_| {},
            )?;
            let _ = stats.short_read(path);
            analysis.finish(end_ns).0
        } else {
            let mut analysis = ctx.analysis();
            replay::replay(
                &reader,
                |e, c| {
                    in_order(e.time_ns);
                    analysis.feed_in_context(e, c);
                    wakeups.feed_in_context(e, c);
                },
                |_| {},
            )?;
            analysis.finish(end_ns)
        };
        let causes = wakeups.finish(end_ns);
        drop(causes);
        summary
    };
    let busy_s = summary.threads.iter().map(|t| t.cpu_time_ns).sum::<u64>() as f64 / 1e9;
    let interval = (summary.start_ns, summary.end_ns);
    ctx.energy = context::energy(&reader, interval, busy_s)?;
    ctx.sysfs_idle = context::sysfs_idle(&reader, interval)?;
    let report = model::build(&summary, &ctx);
    check_energy(&report);
    Ok(())
}

/// No figure of energy is negative or not finite, whatever the file held.
fn check_energy(report: &model::RecordingReport) {
    let e = &report.energy;
    for (what, v) in [
        ("total_j", e.total_j),
        ("idle_j", e.idle_j),
        ("other_j", e.other_j),
        ("target_j", e.target_j),
        ("idle_power_w", e.idle_power_w),
    ] {
        if let Some(v) = v {
            assert!(v.is_finite() && v >= 0.0, "energy.{what} = {v}");
        }
    }
    for d in &report.system.energy_domains {
        assert!(
            d.energy_j.is_finite() && d.energy_j >= 0.0,
            "energy of domain {} = {}",
            d.name,
            d.energy_j
        );
    }
    for t in &report.threads {
        if let Some(v) = t.energy_j {
            assert!(
                v.is_finite() && v >= 0.0,
                "energy of thread {} = {v}",
                t.tid
            );
        }
    }
}
