//! Measuring a command repeatedly: warm-up, prepare, fixed windows, failures and Ctrl-C.
//! Shared by `run`, `demo` and `calibrate` (and the comparisons that build on them).

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use powerlens_core::run::{Baseline, Measurement};

use crate::meter::Meter;
use crate::{exec, interrupt};

/// How to measure a series of runs.
#[derive(Debug, Clone)]
pub struct SeriesOptions {
    pub runs: usize,
    pub warmup: usize,
    /// A shell command run before every run (and warm-up), not measured.
    pub prepare: Option<String>,
    /// Measure energy over this fixed window from the start of each run, idle tail included.
    pub window: Option<Duration>,
    pub ignore_failure: bool,
    pub show_output: bool,
}

/// The measurements of a series, and why it stopped early if it did.
#[derive(Debug)]
pub struct Series {
    pub measurements: Vec<Measurement>,
    pub stopped_early: Option<String>,
}

/// How one attempt ended.
enum Attempt {
    Done(Measurement),
    Stop(String),
}

/// Runs the warm-ups and then the measured runs, advancing `progress` once per run.
pub fn run_series(
    meter: &Meter,
    argv: &[String],
    opts: &SeriesOptions,
    progress: &ProgressBar,
) -> anyhow::Result<Series> {
    let mut all = run_interleaved(meter, &[argv.to_vec()], opts, progress)?;
    Ok(all.remove(0))
}

/// Runs several commands interleaved, round by round (A B A B …), so that drift of the
/// machine (temperature, background load) affects each of them alike. Warm-ups are
/// interleaved too. The first failure stops every series; each keeps the runs it finished.
pub fn run_interleaved(
    meter: &Meter,
    commands: &[Vec<String>],
    opts: &SeriesOptions,
    progress: &ProgressBar,
) -> anyhow::Result<Vec<Series>> {
    let mut series: Vec<Series> = commands
        .iter()
        .map(|_| Series {
            measurements: Vec::with_capacity(opts.runs),
            stopped_early: None,
        })
        .collect();
    let label = |i: usize| {
        if commands.len() > 1 {
            format!(" of command {}", i + 1)
        } else {
            String::new()
        }
    };
    let stop_all = |series: &mut Vec<Series>, why: String| {
        for s in series.iter_mut() {
            s.stopped_early = Some(why.clone());
        }
    };
    for round in 0..opts.warmup {
        for (i, argv) in commands.iter().enumerate() {
            progress.set_message(format!("warm-up {}/{}", round + 1, opts.warmup));
            if let Attempt::Stop(why) = attempt(meter, argv, opts)? {
                stop_all(&mut series, format!("warm-up{}: {why}", label(i)));
                return Ok(series);
            }
        }
    }
    for round in 0..opts.runs {
        for (i, argv) in commands.iter().enumerate() {
            match attempt(meter, argv, opts)? {
                Attempt::Done(m) => {
                    progress.set_message(format!("last {:.3} s", m.wall_s));
                    series[i].measurements.push(m);
                }
                Attempt::Stop(why) => {
                    stop_all(&mut series, format!("run {}{}: {why}", round + 1, label(i)));
                    return Ok(series);
                }
            }
            progress.inc(1);
        }
    }
    Ok(series)
}

fn attempt(meter: &Meter, argv: &[String], opts: &SeriesOptions) -> anyhow::Result<Attempt> {
    if let Some(prepare) = &opts.prepare {
        let status = exec::run_shell(prepare, opts.show_output)?;
        if !status.success() {
            return Ok(Attempt::Stop(format!(
                "the --prepare command failed ({}); rerun with --show-output to see why",
                status.describe()
            )));
        }
    }
    if interrupt::interrupted() {
        return Ok(Attempt::Stop("interrupted".into()));
    }
    let before = meter.read()?;
    let outcome = exec::run(argv, opts.show_output)?;
    if interrupt::interrupted() {
        // The command got the Ctrl-C too: this run is not a measurement of the workload.
        return Ok(Attempt::Stop("interrupted".into()));
    }
    if let Some(window) = opts.window {
        if outcome.wall > window {
            return Ok(Attempt::Stop(format!(
                "the command ran {:.3} s, longer than the --window of {:.3} s; raise --window so that every run ends inside it",
                outcome.wall.as_secs_f64(),
                window.as_secs_f64()
            )));
        }
        let end = before.at + window;
        if !interrupt::sleep(end.saturating_duration_since(Instant::now())) {
            return Ok(Attempt::Stop("interrupted".into()));
        }
    }
    let after = meter.read()?;
    if !outcome.exit.success() && !opts.ignore_failure {
        return Ok(Attempt::Stop(format!(
            "the command failed ({}); use --ignore-failure to measure it anyway, --show-output to see its output",
            outcome.exit.describe()
        )));
    }
    Ok(Attempt::Done(Measurement {
        wall_s: outcome.wall.as_secs_f64(),
        cpu_s: outcome.cpu_s,
        energy_interval_s: match opts.window {
            Some(w) => w.as_secs_f64(),
            None => after.at.duration_since(before.at).as_secs_f64(),
        },
        domains: meter.energy_between(&before, &after, Some(outcome.cpu_s)),
        exit: outcome.exit,
        provenance: meter.provenance(),
    }))
}

/// Average power of the machine left idle for `duration`; `None` when interrupted.
pub fn idle_power(meter: &Meter, duration: Duration) -> anyhow::Result<Option<f64>> {
    let before = meter.read()?;
    if !interrupt::sleep(duration) {
        return Ok(None);
    }
    let after = meter.read()?;
    let seconds = after.at.duration_since(before.at).as_secs_f64();
    let joules: f64 = meter
        .energy_between(&before, &after, None)
        .iter()
        .filter(|d| d.counts_in_total)
        .map(|d| d.joules)
        .sum();
    Ok(Some(joules / seconds))
}

/// Measures the idle baseline before the runs; `after_w` is filled in by [`finish_baseline`].
pub fn start_baseline(meter: &Meter, duration: Duration) -> anyhow::Result<Option<Baseline>> {
    let spinner = crate::progress::spinner(&format!(
        "measuring idle baseline for {:.1} s",
        duration.as_secs_f64()
    ));
    let before = idle_power(meter, duration)?;
    spinner.finish_and_clear();
    Ok(before.map(|w| Baseline {
        seconds: duration.as_secs_f64(),
        before_w: w,
        after_w: None,
        provenance: meter.provenance(),
    }))
}

/// Measures the idle baseline again after the runs, to detect drift.
pub fn finish_baseline(meter: &Meter, baseline: &mut Baseline) -> anyhow::Result<()> {
    let spinner = crate::progress::spinner("measuring idle baseline again");
    baseline.after_w = idle_power(meter, Duration::from_secs_f64(baseline.seconds))?;
    spinner.finish_and_clear();
    Ok(())
}
