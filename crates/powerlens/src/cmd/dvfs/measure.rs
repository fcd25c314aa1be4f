//! `powerlens dvfs measure`: times the AVX kernels of `workload::avx` to measure the cost
//! of license changes and the upclock delay on this CPU. The timing loops live here; the
//! analysis (pairing, spike detection, spreads) in `powerlens_core::dvfs::measure`.

use std::time::{Duration, Instant};

use clap::Args;
use powerlens_core::dvfs::breakeven::SWINGS;
use powerlens_core::dvfs::counters::{cpu_model_name, runs_under_hypervisor};
use powerlens_core::dvfs::measure::{down_result, up_result, MeasureReport, Section};
use powerlens_core::dvfs::Level;
use powerlens_core::provenance::Provenance;

use crate::progress;
use powerlens_workload::avx::{run_kernel_for, run_kernel_iterations, Isa};

#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// Repetitions of each experiment (more give a tighter spread).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(2..))]
    pub repeats: u32,

    /// Length of the timed block of vector work for the down-transition cost.
    #[arg(long, default_value_t = 200, value_name = "US")]
    pub block_us: u64,

    /// How long to run code of one level before an experiment, so that the license has
    /// settled there (above the documented 2 ms upclock delay).
    #[arg(long, default_value_t = 3000, value_name = "US")]
    pub settle_us: u64,

    /// Length of each timed scalar section while watching for the upclock.
    #[arg(long, default_value_t = 5, value_name = "US")]
    pub section_us: u64,

    /// How long to watch for the upclock after vector code (the last third is taken as
    /// settled, so keep it well above the expected delay).
    #[arg(long, default_value_t = 3000, value_name = "US")]
    pub watch_us: u64,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn isa_of(level: Level) -> Isa {
    match level {
        Level::Normal => Isa::Scalar,
        Level::Avx2 => Isa::Avx2,
        Level::Avx512 => Isa::Avx512,
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Kernel iterations that take about `us` microseconds (measured after warming up).
fn iterations_for(isa: Isa, us: u64) -> u64 {
    const PROBE: Duration = Duration::from_millis(2);
    run_kernel_for(isa, PROBE);
    let done = run_kernel_for(isa, PROBE);
    (done as f64 * us as f64 / micros(PROBE)).ceil().max(1.0) as u64
}

fn time(run: impl FnOnce()) -> f64 {
    let start = Instant::now();
    run();
    micros(start.elapsed())
}

/// Keeps the thread on the CPU it runs on, so that every block runs on the core whose
/// license is being changed. Returns that CPU, or why it could not be pinned.
fn pin_to_current_cpu() -> Result<usize, String> {
    let cpu = powerlens_sys::thread::current_cpu()
        .map_err(|e| format!("sched_getcpu failed: {e}"))? as usize;
    powerlens_workload::pin_to_cpu(cpu).map_err(|e| format!("sched_setaffinity failed: {e}"))?;
    Ok(cpu)
}

/// Runs every experiment this CPU supports. `cpuinfo` is the text of /proc/cpuinfo.
pub fn run(args: &MeasureArgs, cpuinfo: &str) -> MeasureReport {
    let mut notes = Vec::new();
    if runs_under_hypervisor(cpuinfo) {
        notes.push(
            "this is a virtual machine: the host may hide or smear frequency changes, so costs near 0 and \
             invisible upclocks say little about the hardware"
                .to_string(),
        );
    }
    if !cpuinfo.contains("GenuineIntel") {
        notes.push(
            "not an Intel CPU: AVX frequency licenses are Intel's; other CPUs may show no change"
                .to_string(),
        );
    }
    let pinned = match pin_to_current_cpu() {
        Ok(cpu) => format!("pinned to CPU {cpu}"),
        Err(why) => {
            notes.push(format!(
                "not pinned to one CPU ({why}): migrations add noise"
            ));
            "not pinned".to_string()
        }
    };
    let mut skipped = Vec::new();
    let supported: Vec<Level> = Level::ALL
        .into_iter()
        .filter(|level| match isa_of(*level).check_supported() {
            Ok(()) => true,
            Err(why) => {
                skipped.push(why);
                false
            }
        })
        .collect();
    let settle = Duration::from_micros(args.settle_us);
    let repeats = args.repeats as usize;
    let swings: Vec<(Level, Level)> = SWINGS
        .into_iter()
        .filter(|(a, b)| supported.contains(a) && supported.contains(b))
        .collect();
    let vector: Vec<Level> = supported
        .iter()
        .copied()
        .filter(|l| *l != Level::Normal)
        .collect();
    let bar = progress::bar(
        ((swings.len() + vector.len()) * repeats) as u64,
        "dvfs measure",
    );

    let mut down = Vec::new();
    for (from, to) in swings {
        let (from_isa, to_isa) = (isa_of(from), isa_of(to));
        let block = iterations_for(to_isa, args.block_us);
        let (mut settled, mut changing) = (Vec::new(), Vec::new());
        for _ in 0..repeats {
            run_kernel_for(to_isa, settle);
            settled.push(time(|| run_kernel_iterations(to_isa, block)));
            run_kernel_for(from_isa, settle);
            changing.push(time(|| run_kernel_iterations(to_isa, block)));
            bar.inc(1);
        }
        down.extend(down_result(from, to, &settled, &changing));
    }

    let mut up = Vec::new();
    let section = iterations_for(Isa::Scalar, args.section_us);
    let watch = Duration::from_micros(args.watch_us);
    for from in vector {
        let mut series = Vec::with_capacity(repeats);
        for _ in 0..repeats {
            run_kernel_for(isa_of(from), settle);
            let vector_end = Instant::now();
            let mut sections = Vec::new();
            while vector_end.elapsed() < watch {
                let start = Instant::now();
                run_kernel_iterations(Isa::Scalar, section);
                sections.push(Section {
                    start_us: micros(start - vector_end),
                    duration_us: micros(start.elapsed()),
                });
            }
            series.push(sections);
            bar.inc(1);
        }
        up.push(up_result(from, &series));
    }
    bar.finish_and_clear();

    MeasureReport {
        provenance: Provenance::Measured {
            source: format!("CLOCK_MONOTONIC around the workload::avx kernels, {pinned}"),
        },
        cpu: cpu_model_name(cpuinfo).to_string(),
        notes,
        skipped,
        down,
        up,
    }
}
