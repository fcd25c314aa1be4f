//! Measuring a command repeatedly: warm-up, prepare, fixed windows, failures and Ctrl-C.
//! Shared by `run`, `demo` and `calibrate` (and the comparisons that build on them).

use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::ProgressBar;
use powerlens_core::run::{Baseline, Measurement, RunResult};
use powerlens_sys::settings::{self, Setting};
use powerlens_sys::Roots;

use powerlens_record::meter::Meter;
use powerlens_record::{exec, interrupt};

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

/// A named system configuration (`--config NAME=SETTINGS`), applied around each of its runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub name: String,
    pub settings: Vec<Setting>,
    pub roots: Roots,
}

impl Config {
    /// Parses `NAME=SETTING[,SETTING…]`.
    pub fn parse(text: &str, roots: &Roots) -> anyhow::Result<Config> {
        let (name, rest) = text
            .split_once('=')
            .filter(|(n, r)| !n.trim().is_empty() && !r.trim().is_empty())
            .with_context(|| format!("--config {text:?}: expected NAME=SETTING[,SETTING…], e.g. save=governor=powersave,turbo=off"))?;
        let settings =
            settings::parse_settings(rest).with_context(|| format!("--config {name}"))?;
        Ok(Config {
            name: name.trim().to_string(),
            settings,
            roots: roots.clone(),
        })
    }

    /// Checks that this machine can apply every setting, before anything runs.
    pub fn check(&self) -> anyhow::Result<()> {
        settings::check(&self.roots, &self.settings)
            .with_context(|| format!("--config {}", self.name))
    }
}

/// One command to measure, under a configuration or as the machine is.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    pub argv: Vec<String>,
    pub config: Option<&'a Config>,
}

impl Job<'_> {
    /// A job with no configuration.
    pub fn plain(argv: Vec<String>) -> Job<'static> {
        Job { argv, config: None }
    }
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
    let mut all = run_interleaved(meter, &[Job::plain(argv.to_vec())], opts, progress)?;
    Ok(all.remove(0))
}

/// Runs several commands interleaved, round by round (A B A B …), so that drift of the
/// machine (temperature, background load) affects each of them alike. Warm-ups are
/// interleaved too. The first failure stops every series; each keeps the runs it finished.
pub fn run_interleaved(
    meter: &Meter,
    commands: &[Job<'_>],
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
        for (i, job) in commands.iter().enumerate() {
            progress.set_message(format!("warm-up {}/{}", round + 1, opts.warmup));
            if let Attempt::Stop(why) = attempt(meter, job, opts)? {
                stop_all(&mut series, format!("warm-up{}: {why}", label(i)));
                return Ok(series);
            }
        }
    }
    for round in 0..opts.runs {
        for (i, job) in commands.iter().enumerate() {
            match attempt(meter, job, opts)? {
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

/// One run of a job: its configuration applied just around it and restored right after,
/// also when the run fails or is interrupted.
fn attempt(meter: &Meter, job: &Job<'_>, opts: &SeriesOptions) -> anyhow::Result<Attempt> {
    let Some(config) = job.config else {
        return attempt_as_is(meter, &job.argv, opts, None);
    };
    let applied = settings::apply(&config.roots, &config.settings)
        .with_context(|| format!("applying --config {}", config.name))?;
    let result = attempt_as_is(meter, &job.argv, opts, applied.affinity().as_deref());
    if let Err(errors) = applied.restore() {
        let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        anyhow::bail!(
            "restoring the settings of --config {} failed: {}; run `powerlens restore`",
            config.name,
            list.join("; ")
        );
    }
    result
}

fn attempt_as_is(
    meter: &Meter,
    argv: &[String],
    opts: &SeriesOptions,
    cpus: Option<&[u32]>,
) -> anyhow::Result<Attempt> {
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
    let outcome = exec::run(argv, opts.show_output, cpus)?;
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
        charge: meter.charge_between(&before, &after),
    }))
}

/// The result of one command's series, as `run` reports and saves it: with the idle
/// baseline when one was measured, and the battery-life figures when there is a battery.
pub fn result_of(
    meter: &Meter,
    argv: Vec<String>,
    window: Option<Duration>,
    baseline: Option<Baseline>,
    series: Series,
) -> RunResult {
    let mut result = RunResult::new(
        argv,
        meter.provenance(),
        window.map(|w| w.as_secs_f64()),
        baseline,
        series.measurements,
        meter.warnings.clone(),
        series.stopped_early,
    );
    result.battery = meter.battery_report(&result);
    result
}

/// Average power of the machine left idle for `duration`; `None` when interrupted.
pub fn idle_power(meter: &Meter, duration: Duration) -> anyhow::Result<Option<f64>> {
    let before = meter.read()?;
    if !interrupt::sleep(duration) {
        return Ok(None);
    }
    let after = meter.read()?;
    Ok(Some(meter.average_power_w(&before, &after)))
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
