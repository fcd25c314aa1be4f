//! `powerlens wake`: C-state wake latency, in the spirit of wult and the waltr thesis,
//! without kernel modules: a pinned SCHED_FIFO thread sleeps to absolute launch times while
//! perf tracepoints on its CPU give the idle entry/exit and the timer's expiry. The math is
//! `powerlens_core::wake`, the views `powerlens_report::wake`; this module orchestrates.

mod choose;
mod measure;
mod report;
mod states;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use powerlens_core::wake::{
    match_measurements, state_report, Datapoint, Delivered, Dropped, Raw, WakeEvent, WakeResult,
};
use powerlens_sys::settings;
use powerlens_sys::topology;
use powerlens_sys::trace::{ensure_tracefs, Collector, CollectorOptions};

use crate::args::GlobalArgs;
use crate::{progress, units};
use powerlens_record::interrupt;

pub const LONG_ABOUT: &str = "\
C-state wake latency: how long a CPU takes to leave an idle state, measured against the
exit latency the kernel declares for it (cpuidle `latency`), in the spirit of wult.

A thread pinned to --cpu (SCHED_FIFO 95, timer slack 1 ns) sleeps until an absolute
CLOCK_MONOTONIC launch time LTime = now + LDist, LDist uniform in --ldist. Tracepoints on
that CPU give, per datapoint:
  WakeLatency = TAI - LTime    (power:cpu_idle exit)
  IntrLatency = TIntr - LTime  (timer:hrtimer_expire_entry of our timer)
  UserLatency = wake - LTime   (the thread's own clock read; what cyclictest measures)
  SilentTime  = LTime - TBI    (power:cpu_idle entry)
A datapoint another interrupt woke, or whose LTime is not inside the idle period, is
dropped and counted. The tool's own timing cost is measured at start and reported.

What a kernel does not deliver is reported unavailable with the reason, never a zero: a
virtual machine without a cpuidle driver emits no power:cpu_idle to perf, so only
UserLatency is measured there (see docs/WAKE.md).

--cstates NAME[,NAME...] or all measures one state at a time by disabling all others
(on every online CPU, through cpuidle `disable`); the settings are restored when it ends,
also on Ctrl-C or an error (a killed run: `powerlens restore`). Needs root.

Examples:
  sudo powerlens wake --cpu 1 --duration 10s
  sudo powerlens wake --cpu 1 --cstates all --datapoints 5000 -o wake-c-states
  sudo powerlens wake --ldist 50us,500us --json
  sudo powerlens wake --cpu 1 --ldist 1ms,1ms --no-trace    # as cyclictest -i 1000
  powerlens wake report wake-before wake-after --out plots";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WakeArgs {
    #[command(subcommand)]
    pub command: Option<WakeCommand>,

    #[command(flatten)]
    pub measure: MeasureArgs,
}

#[derive(Debug, Subcommand)]
pub enum WakeCommand {
    /// Compare saved results (-o directories): table, latency scatter and histogram (SVG).
    #[command(long_about = report::LONG_ABOUT)]
    Report(report::ReportArgs),
}

#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// The CPU to measure [default: the highest online CPU whose power:cpu_idle records reach
    /// perf in a 0.2 s probe, away from cpu0's housekeeping; the run's notes say which and
    /// why].
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,

    /// Datapoints per state [default: 1000, unless --duration].
    #[arg(long, value_name = "N", conflicts_with = "duration",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub datapoints: Option<u64>,

    /// Measure each state for this long instead (e.g. 10s, 1min).
    #[arg(long, value_name = "DURATION", value_parser = units::parse_positive_duration)]
    pub duration: Option<Duration>,

    /// The launch distance range MIN,MAX, drawn uniformly per datapoint (units required).
    #[arg(long, value_name = "MIN,MAX", default_value = "300us,8ms", value_parser = parse_ldist)]
    pub ldist: (Duration, Duration),

    /// Idle states to measure one at a time (names as `powerlens info` lists them, any
    /// case), or `all`. Without it: the states as configured, nothing changed.
    #[arg(long, value_name = "NAMES|all", value_delimiter = ',')]
    pub cstates: Option<Vec<String>>,

    /// Seed of the LDist draws (for repeatable series).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Trace nothing: UserLatency only, without the cost of tracepoints on the wake-up
    /// path (exactly what cyclictest measures). Wake/interrupt latency and silent time are
    /// then unavailable.
    #[arg(long)]
    pub no_trace: bool,

    /// Print JSON instead of text (keys in docs/WAKE.md).
    #[arg(long)]
    pub json: bool,

    /// Save the result to this directory: info.json and datapoints.csv (for `wake report`).
    #[arg(short = 'o', long = "output", value_name = "RESULT")]
    pub output: Option<PathBuf>,
}

fn parse_ldist(text: &str) -> Result<(Duration, Duration), String> {
    let (lo, hi) = text
        .split_once(',')
        .ok_or_else(|| format!("'{text}' is not MIN,MAX: write e.g. 300us,8ms"))?;
    let (lo, hi) = (
        units::parse_positive_duration(lo)?,
        units::parse_positive_duration(hi)?,
    );
    if lo > hi {
        return Err(format!("'{text}': MIN is above MAX"));
    }
    if hi > Duration::from_secs(10) {
        return Err(format!(
            "'{text}': MAX above 10s makes a datapoint take too long"
        ));
    }
    Ok((lo, hi))
}

pub fn execute(global: &GlobalArgs, args: WakeArgs) -> anyhow::Result<ExitCode> {
    if let Some(WakeCommand::Report(r)) = args.command {
        return report::execute(r);
    }
    let args = args.measure;
    let roots = global.roots()?;
    let (cpu, chosen) = match args.cpu {
        Some(cpu) => (cpu, None),
        None => {
            let online = topology::read_online(&roots)?;
            anyhow::ensure!(!online.is_empty(), "no online CPU");
            if args.no_trace || states::require_root().is_err() {
                // UserLatency alone needs no idle records: the highest CPU, as ever.
                (*online.last().expect("checked above"), None)
            } else {
                // The probe reads the trace: tracefs first, while no thread exists
                // (unshare needs a single-threaded process). Without it, no probe; the
                // run's own tracefs check below says why.
                let delivered = ensure_tracefs(&roots)
                    .ok()
                    .and_then(|_| choose::probe_idle_records(&roots));
                let (cpu, why) = choose::choose(&online, delivered.as_ref());
                (cpu, Some(format!("--cpu not given, measuring {why}")))
            }
        }
    };
    states::check_cpu(&roots, cpu)?;
    let plan = states::plan(&roots, cpu, args.cstates.as_deref())?;
    states::require_root()?;
    states::check_settings(&roots, &plan)?;
    if let Some(dir) = &args.output {
        prepare_output(dir)?;
    }
    // Before any thread exists (unshare needs a single-threaded process).
    let mut notes = plan.notes.clone();
    notes.extend(chosen);
    let mut collector = if args.no_trace {
        None
    } else {
        if let Some(note) = ensure_tracefs(&roots)? {
            notes.push(note);
        }
        Some(Collector::open(
            &roots,
            &measure::EVENTS,
            CollectorOptions::default(),
        )?)
    };
    interrupt::install();
    let trace_unavailable: Vec<String> = collector
        .iter()
        .flat_map(|c| c.unavailable())
        .map(|u| format!("{}: {}", u.event, u.reason))
        .collect();
    // Locked memory: no page fault on the measuring thread's path (as cyclictest -m).
    // SAFETY: mlockall has no memory-safety preconditions.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        notes.push(format!(
            "memory not locked ({}): page faults may add latency",
            std::io::Error::last_os_error()
        ));
    }
    // Keep this thread (draining the trace, drawing the bar) off the measured CPU.
    let online = topology::read_online(&roots)?;
    if let Some(other) = online.iter().copied().find(|c| *c != cpu) {
        let _ = measure::pin_to(other);
    } else {
        notes.push(
            "only one CPU is online: draining the trace shares it with the measurement".into(),
        );
    }
    let limit = match (args.duration, args.datapoints) {
        (Some(d), _) => measure::Limit::Duration(d),
        (None, n) => measure::Limit::Datapoints(n.unwrap_or(1000)),
    };
    let options = measure::Options {
        cpu,
        ldist_min_ns: args.ldist.0.as_nanos() as u64,
        ldist_max_ns: args.ldist.1.as_nanos() as u64,
        limit,
        seed: args.seed,
    };
    let state_names = plan.state_names();
    let mut result = WakeResult {
        cpu,
        cpuidle_driver: plan.driver.clone(),
        ldist_min_ns: options.ldist_min_ns,
        ldist_max_ns: options.ldist_max_ns,
        self_overhead: Some(measure::self_overhead(cpu, collector.as_mut())?),
        trace_unavailable,
        lost_records: 0,
        notes,
        stopped_early: None,
        states: Vec::new(),
    };
    let mut rows: Vec<(Raw, Result<Datapoint, Dropped>)> = Vec::new();
    for target in &plan.targets {
        let applied = match &target.setting {
            Some(s) => Some(
                settings::apply(&roots, std::slice::from_ref(s))
                    .with_context(|| format!("selecting idle state `{}`", target.label))?,
            ),
            None => None,
        };
        let series = run_series(collector.as_mut(), options, &target.label);
        // Restore before anything else can fail; the guard would also do it on drop.
        if let Some(applied) = applied {
            if let Err(failures) = applied.restore() {
                let list: Vec<String> = failures.iter().map(|e| format!("  {e}")).collect();
                bail!(
                    "restoring the idle states after measuring `{}` failed (run `powerlens restore`):\n{}",
                    target.label,
                    list.join("\n")
                );
            }
        }
        let (measured, events) = series?;
        let raws = match_measurements(&measured.measurements, &events, &state_names, &target.label);
        let delivered = if collector.is_some() {
            Delivered::detect(&events, &raws)
        } else {
            Delivered::untraced()
        };
        for name in group_names(&raws) {
            let group: Vec<Raw> = raws.iter().filter(|r| r.cstate == name).cloned().collect();
            result.states.push(state_report(
                &name,
                plan.declared(&name),
                &group,
                &delivered,
                cpu,
            ));
        }
        rows.extend(raws.into_iter().map(|r| {
            let outcome = r.datapoint(&delivered);
            (r, outcome)
        }));
        if measured.interrupted {
            result.stopped_early = Some(format!(
                "interrupted (Ctrl-C) while measuring `{}`",
                target.label
            ));
            break;
        }
    }
    result.lost_records = collector.as_ref().map_or(0, Collector::total_lost);
    if let Some(dir) = &args.output {
        save(dir, &result, &rows)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", powerlens_report::wake::text(&result));
        if let Some(dir) = &args.output {
            println!("\nsaved to {} (info.json, datapoints.csv)", dir.display());
        }
    }
    Ok(interrupt::exit_code(result.stopped_early.as_deref()))
}

/// The states the datapoints requested, in first-seen order.
fn group_names(raws: &[Raw]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in raws {
        if !names.contains(&r.cstate) {
            names.push(r.cstate.clone());
        }
    }
    names
}

/// One series: trace on, the measuring thread, draining meanwhile, trace off.
fn run_series(
    mut collector: Option<&mut Collector>,
    options: measure::Options,
    label: &str,
) -> anyhow::Result<(measure::Measured, Vec<WakeEvent>)> {
    let cpu = options.cpu;
    let mut events = Vec::new();
    let mut keep = |collector: &mut Collector| {
        collector.drain(|r| {
            if r.cpu == cpu {
                if let Some(e) = measure::convert(r) {
                    events.push(e);
                }
            }
        });
    };
    if let Some(collector) = collector.as_deref_mut() {
        // Whatever is left from before belongs to no datapoint.
        collector.drain(|_| {});
        collector.enable()?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let bar = match options.limit {
        measure::Limit::Datapoints(n) => progress::bar(n, &format!("wake {label}")),
        measure::Limit::Duration(d) => {
            progress::bar(d.as_secs().max(1), &format!("wake {label} [s]"))
        }
    };
    let started = std::time::Instant::now();
    let handle = measure::spawn(options, done.clone(), finished.clone());
    while !finished.load(Ordering::SeqCst) {
        match collector.as_deref_mut() {
            Some(collector) => {
                let _ = collector.wait(Duration::from_millis(100));
                keep(collector);
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
        match options.limit {
            measure::Limit::Datapoints(_) => bar.set_position(done.load(Ordering::Relaxed)),
            measure::Limit::Duration(_) => bar.set_position(started.elapsed().as_secs()),
        }
        bar.set_message(format!("{} datapoints", done.load(Ordering::Relaxed)));
    }
    let measured = handle
        .join()
        .map_err(|_| anyhow::anyhow!("the measuring thread panicked"));
    if let Some(collector) = collector {
        collector.disable()?;
        keep(collector);
    }
    bar.finish_and_clear();
    let measured = measured?.map_err(|e| anyhow::anyhow!("measuring thread on cpu{cpu}: {e}"))?;
    Ok((measured, events))
}

/// Creates the output directory, refusing one that holds something else.
fn prepare_output(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let foreign = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(Result::ok)
            .any(|e| {
                let name = e.file_name();
                name != "info.json" && name != "datapoints.csv"
            });
        if foreign {
            bail!(
                "-o {}: the directory holds other files; fix: give a new or empty directory",
                dir.display()
            );
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

fn save(
    dir: &Path,
    result: &WakeResult,
    rows: &[(Raw, Result<Datapoint, Dropped>)],
) -> anyhow::Result<()> {
    let info = dir.join("info.json");
    std::fs::write(&info, serde_json::to_string_pretty(result)? + "\n")
        .with_context(|| format!("writing {}", info.display()))?;
    let csv = dir.join("datapoints.csv");
    std::fs::write(&csv, powerlens_report::wake::datapoints_csv(rows))
        .with_context(|| format!("writing {}", csv.display()))?;
    Ok(())
}
