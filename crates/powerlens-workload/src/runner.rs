//! Measuring a command repeatedly: warm-up, prepare, fixed windows, failures and Ctrl-C.
//! Shared by `run`, `demo`, `compare` and `sweep`.
//!
//! A run that fails or is interrupted ends its series with a typed [`Stop`], not an error:
//! the runs before it are kept. The words for a stop, and the flags that fix it, are the
//! caller's.

use std::time::Duration;

use powerlens_core::run::{Baseline, ExitStatus, Measurement, OtherLoad, RunResult};
use powerlens_sys::procfs::CpuTimes;
use powerlens_sys::settings::{self, Setting};
use powerlens_sys::{Roots, SysError};

use powerlens_record::exec::Outcome;
use powerlens_record::interrupt;
use powerlens_record::meter::Meter;

use crate::error::RunnerError;

/// Whoever shows a series' progress.
pub trait Progress {
    /// What the series is doing now: `warm-up 1/3`, or the last run's wall time.
    fn status(&self, text: String);
    /// One more measured run is done.
    fn run_done(&self);
}

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

/// A named system configuration (`NAME=SETTINGS`), applied around each of its runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub name: String,
    pub settings: Vec<Setting>,
    pub roots: Roots,
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
    pub stopped_early: Option<Stop>,
}

/// Where and why a series stopped before its last run.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub during: During,
    /// Which of several interleaved commands (counted from 1); `None` with one command.
    pub command: Option<usize>,
    pub reason: StopReason,
}

/// The attempt a series stopped in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum During {
    WarmUp,
    /// A measured run, counted from 1.
    Run(usize),
}

/// Why a series stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum StopReason {
    /// Ctrl-C, SIGTERM or SIGHUP: the user asked to stop.
    Interrupted,
    /// The command run before each run failed.
    PrepareFailed(ExitStatus),
    /// The command ran longer than the fixed energy window.
    Overran { ran: Duration, window: Duration },
    /// The command failed, and failed runs are not measured.
    CommandFailed(ExitStatus),
}

impl Stop {
    /// Where the series stopped, e.g. `warm-up`, `run 3`, `run 2 of command 1`.
    pub fn place(&self) -> String {
        let of_command = self
            .command
            .map(|n| format!(" of command {n}"))
            .unwrap_or_default();
        match self.during {
            During::WarmUp => format!("warm-up{of_command}"),
            During::Run(n) => format!("run {n}{of_command}"),
        }
    }
}

/// How one attempt ended.
enum Attempt {
    Done(Measurement),
    Stop(StopReason),
}

/// Runs the warm-ups and then the measured runs, advancing `progress` once per run.
pub fn run_series(
    meter: &Meter,
    argv: &[String],
    opts: &SeriesOptions,
    progress: &dyn Progress,
) -> Result<Series, RunnerError> {
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
    progress: &dyn Progress,
) -> Result<Vec<Series>, RunnerError> {
    let mut series: Vec<Series> = commands
        .iter()
        .map(|_| Series {
            measurements: Vec::with_capacity(opts.runs),
            stopped_early: None,
        })
        .collect();
    let stop_all = |series: &mut Vec<Series>, during: During, i: usize, reason: StopReason| {
        let stop = Stop {
            during,
            command: (commands.len() > 1).then_some(i + 1),
            reason,
        };
        for s in series.iter_mut() {
            s.stopped_early = Some(stop.clone());
        }
    };
    for round in 0..opts.warmup {
        for (i, job) in commands.iter().enumerate() {
            progress.status(format!("warm-up {}/{}", round + 1, opts.warmup));
            if let Attempt::Stop(why) = attempt(meter, job, opts)? {
                stop_all(&mut series, During::WarmUp, i, why);
                return Ok(series);
            }
        }
    }
    for round in 0..opts.runs {
        for (i, job) in commands.iter().enumerate() {
            match attempt(meter, job, opts)? {
                Attempt::Done(m) => {
                    progress.status(format!("last {:.3} s", m.wall_s));
                    series[i].measurements.push(m);
                }
                Attempt::Stop(why) => {
                    stop_all(&mut series, During::Run(round + 1), i, why);
                    return Ok(series);
                }
            }
            progress.run_done();
        }
    }
    Ok(series)
}

/// One run of a job: its configuration applied just around it and restored right after,
/// also when the run fails or is interrupted.
fn attempt(meter: &Meter, job: &Job<'_>, opts: &SeriesOptions) -> Result<Attempt, RunnerError> {
    let Some(config) = job.config else {
        return attempt_as_is(meter, &job.argv, opts, None);
    };
    let applied =
        settings::apply(&config.roots, &config.settings).map_err(|source| RunnerError::Apply {
            config: config.name.clone(),
            source,
        })?;
    let result = attempt_as_is(meter, &job.argv, opts, applied.affinity().as_deref());
    if let Err(errors) = applied.restore() {
        return Err(RunnerError::Restore {
            config: config.name.clone(),
            errors: errors.iter().map(|e| e.to_string()).collect(),
        });
    }
    result
}

/// One run measured: the seam where the meter's executor (this machine, or the mock that
/// tests select) runs the command and keeps the clock its readings and the window are on.
fn attempt_as_is(
    meter: &Meter,
    argv: &[String],
    opts: &SeriesOptions,
    cpus: Option<&[u32]>,
) -> Result<Attempt, RunnerError> {
    let exec = meter.executor();
    if let Some(prepare) = &opts.prepare {
        let status = exec
            .run_shell(prepare, opts.show_output)
            .map_err(RunnerError::Exec)?;
        if !status.success() {
            return Ok(Attempt::Stop(StopReason::PrepareFailed(status)));
        }
    }
    if interrupt::interrupted() {
        return Ok(Attempt::Stop(StopReason::Interrupted));
    }
    let before = meter.read().map_err(RunnerError::Meter)?;
    let machine_before = meter.machine_cpu();
    let outcome = exec
        .run(argv, opts.show_output, cpus)
        .map_err(RunnerError::Exec)?;
    let machine_after = meter.machine_cpu();
    if interrupt::interrupted() {
        // The command got the Ctrl-C too: this run is not a measurement of the workload.
        return Ok(Attempt::Stop(StopReason::Interrupted));
    }
    if let Some(window) = opts.window {
        if outcome.wall > window {
            return Ok(Attempt::Stop(StopReason::Overran {
                ran: outcome.wall,
                window,
            }));
        }
        let end = before.at + window;
        if !exec.sleep(end.saturating_duration_since(exec.now())) {
            return Ok(Attempt::Stop(StopReason::Interrupted));
        }
    }
    let after = meter.read().map_err(RunnerError::Meter)?;
    if !outcome.exit.success() && !opts.ignore_failure {
        return Ok(Attempt::Stop(StopReason::CommandFailed(outcome.exit)));
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
        other_load: other_load(machine_before, machine_after, &outcome),
    }))
}

/// What other processes used of the machine while the command ran: `/proc/stat` (read
/// just around the command, before any `--window` tail) less the command's own CPU time.
fn other_load(
    before: Result<CpuTimes, SysError>,
    after: Result<CpuTimes, SysError>,
    outcome: &Outcome,
) -> Result<OtherLoad, String> {
    let (b, a) = before
        .and_then(|b| Ok((b, after?)))
        .map_err(|e| format!("the machine's CPU time could not be read: {e}"))?;
    Ok(OtherLoad::of(
        a.busy_s - b.busy_s,
        outcome.cpu_s,
        outcome.wall.as_secs_f64(),
        a.cpus,
    ))
}

/// The result of one command's series, as `run` reports and saves it: with the idle
/// baseline when one was measured, and the battery-life figures when there is a battery.
/// `stopped_early` is the series' [`Stop`] in the caller's words.
pub fn result_of(
    meter: &Meter,
    argv: Vec<String>,
    window: Option<Duration>,
    baseline: Option<Baseline>,
    measurements: Vec<Measurement>,
    stopped_early: Option<String>,
) -> RunResult {
    let mut result = RunResult::new(
        argv,
        meter.provenance(),
        window.map(|w| w.as_secs_f64()),
        baseline,
        measurements,
        meter.warnings.clone(),
        stopped_early,
    );
    result.battery = meter.battery_report(&result);
    result
}

/// Average power of the machine left idle for `duration`; `None` when interrupted.
pub fn idle_power(meter: &Meter, duration: Duration) -> Result<Option<f64>, RunnerError> {
    let before = meter.read().map_err(RunnerError::Meter)?;
    if !meter.executor().sleep(duration) {
        return Ok(None);
    }
    let after = meter.read().map_err(RunnerError::Meter)?;
    Ok(Some(meter.average_power_w(&before, &after)))
}

/// Measures the idle baseline before the runs; `after_w` is filled in by [`finish_baseline`].
pub fn start_baseline(meter: &Meter, duration: Duration) -> Result<Option<Baseline>, RunnerError> {
    let before = idle_power(meter, duration)?;
    Ok(before.map(|w| Baseline {
        seconds: duration.as_secs_f64(),
        before_w: w,
        after_w: None,
        provenance: meter.provenance(),
    }))
}

/// Measures the idle baseline again after the runs, to detect drift.
pub fn finish_baseline(meter: &Meter, baseline: &mut Baseline) -> Result<(), RunnerError> {
    baseline.after_w = idle_power(meter, Duration::from_secs_f64(baseline.seconds))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use powerlens_record::meter::MeterOptions;

    use super::*;

    /// Remembers what the runner reported, in order.
    #[derive(Default)]
    struct Log(RefCell<Vec<String>>);

    impl Progress for Log {
        fn status(&self, text: String) {
            self.0.borrow_mut().push(text);
        }

        fn run_done(&self) {
            self.0.borrow_mut().push("done".into());
        }
    }

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    fn options(runs: usize, warmup: usize, prepare: Option<&str>) -> SeriesOptions {
        SeriesOptions {
            runs,
            warmup,
            prepare: prepare.map(str::to_string),
            window: None,
            ignore_failure: false,
            show_output: false,
        }
    }

    /// The power model over the machine's own /proc/stat: every machine can read it.
    fn meter() -> Meter {
        Meter::estimated(&Roots::default(), &MeterOptions::default()).unwrap()
    }

    #[test]
    fn a_failed_run_stops_every_series_and_says_where() {
        let jobs = [
            Job::plain(argv(&["true"])),
            Job::plain(argv(&["sh", "-c", "exit 3"])),
        ];
        let log = Log::default();
        let series = run_interleaved(&meter(), &jobs, &options(3, 0, None), &log).unwrap();
        // Round 1: the first command is measured, the second fails and ends both series.
        assert_eq!(series[0].measurements.len(), 1);
        assert!(series[1].measurements.is_empty());
        let expected = Stop {
            during: During::Run(1),
            command: Some(2),
            reason: StopReason::CommandFailed(ExitStatus {
                code: Some(3),
                signal: None,
            }),
        };
        for s in &series {
            assert_eq!(s.stopped_early.as_ref(), Some(&expected));
        }
        assert_eq!(expected.place(), "run 1 of command 2");
        let log = log.0.into_inner();
        assert_eq!(log.len(), 2, "one status and one step for the run: {log:?}");
        assert!(log[0].starts_with("last ") && log[1] == "done", "{log:?}");
    }

    #[test]
    fn a_failed_prepare_stops_in_the_warm_up() {
        let log = Log::default();
        let series = run_series(
            &meter(),
            &argv(&["true"]),
            &options(2, 1, Some("exit 1")),
            &log,
        )
        .unwrap();
        assert!(series.measurements.is_empty());
        let stop = series.stopped_early.unwrap();
        assert_eq!(stop.place(), "warm-up");
        assert_eq!(
            stop.reason,
            StopReason::PrepareFailed(ExitStatus {
                code: Some(1),
                signal: None,
            })
        );
        assert_eq!(log.0.into_inner(), ["warm-up 1/1"]);
    }

    #[test]
    fn a_finished_series_has_every_run_and_no_stop() {
        let series = run_series(
            &meter(),
            &argv(&["true"]),
            &options(2, 1, None),
            &Log::default(),
        )
        .unwrap();
        assert_eq!(series.measurements.len(), 2);
        assert!(series.stopped_early.is_none());
        assert!(series.measurements.iter().all(|m| m.exit.success()));
    }
}
