//! A whole recording file: the bytes are written to a file and read by the function
//! `report` reads recordings with (`powerlens_record::analyse`): opened and checked
//! against its content checksum, its metadata, thread table, samples, stack and module
//! tables and symbol cache read, every event replayed through the scheduler, stack and
//! wake-up analyses, and the report model built with its function rows.
//! Errors are expected (most mutants are damaged files); panics, hangs and figures that
//! are not finite or are negative energies are not.

use powerlens_core::sched::report as model;
use powerlens_core::stacks::attribution::StackMetricsKept;
use powerlens_core::stacks::grid::Grouping;
use powerlens_record::analyse::{analyse, AnalyseObserver, AnalyseOptions};
use powerlens_record::{replay, sampler};
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
    // The tables `report` reads only in part, read whole.
    let reader = powerlens_store::recording::RecordingReader::open(path)?;
    let _ = reader.all_meta();
    for kind in [
        sampler::ENERGY,
        sampler::CPUIDLE,
        sampler::CPUFREQ,
        sampler::THREADS,
    ] {
        let _ = reader.samples(kind, |_, _| {});
    }
    // With its symbol cache intact, resolving reads the stacks, the modules and the cache
    // from the file. A damaged cache makes `report` symbolize every frame again from the
    // modules' ELF files — libLLVM, rustc, whatever ran while the seed was recorded: up to
    // a second per input, a hundred times the rest, spent in the ELF reader rather than in
    // powerlens's parsers. Those inputs skip the stacks.
    let stacks = matches!(reader.symbols_intact(), Ok(true));
    // Whatever the chunks hold, the replay delivers time in order (the analyses rely on it).
    let mut last_ns = 0;
    let _ = replay::replay(
        &reader,
        |e, _| {
            assert!(
                e.time_ns >= last_ns,
                "the replay went back in time ({} after {last_ns})",
                e.time_ns
            );
            last_ns = e.time_ns;
        },
        |_| {},
    );
    drop(reader);
    let options = AnalyseOptions {
        all_processes: false,
        grouping: Some(Grouping::Function),
        stacks,
        stack_metrics: StackMetricsKept::All,
        roots,
        battery_wh: None,
        function_scope: Default::default(),
    };
    let analysed = analyse(path, &options, &mut Quiet)?;
    check_energy(&analysed.report);
    Ok(())
}

/// The analysis' warnings and notes, shown only with the fuzzer's verbose output.
struct Quiet;

impl AnalyseObserver for Quiet {
    fn tell(&mut self, kind: &str, message: &str) {
        crate::verbose(|| format!("recording: {kind}: {message}"));
    }
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
