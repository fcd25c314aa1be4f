//! The command line's side of measuring a series of runs (the runner of
//! `powerlens-workload`): progress on the bar, spinners around the idle baseline, and the
//! words for a stopped series and for the runner's errors, with the flags that fix them.
//! Shared by `run`, `demo`, `compare` and `sweep`.

use std::time::Duration;

use indicatif::ProgressBar;
use powerlens_core::run::{Baseline, RunResult};
use powerlens_record::meter::Meter;
use powerlens_workload::runner::{self, Progress, Stop, StopReason};
use powerlens_workload::RunnerError;

pub use powerlens_workload::runner::{Job, SeriesOptions};

/// The measurements of a series, and why it stopped early if it did, in words.
#[derive(Debug)]
pub struct Series {
    pub measurements: Vec<powerlens_core::run::Measurement>,
    pub stopped_early: Option<String>,
}

/// The progress bar: the runner's status as its message, one step a run.
struct Bar<'a>(&'a ProgressBar);

impl Progress for Bar<'_> {
    fn status(&self, text: String) {
        self.0.set_message(text);
    }

    fn run_done(&self) {
        self.0.inc(1);
    }
}

/// Runs the warm-ups and then the measured runs, advancing `progress` once per run.
pub fn run_series(
    meter: &Meter,
    argv: &[String],
    opts: &SeriesOptions,
    progress: &ProgressBar,
) -> anyhow::Result<Series> {
    let series = runner::run_series(meter, argv, opts, &Bar(progress)).map_err(with_flags)?;
    Ok(in_words(series))
}

/// Runs several commands interleaved, round by round (see [`runner::run_interleaved`]).
pub fn run_interleaved(
    meter: &Meter,
    commands: &[Job<'_>],
    opts: &SeriesOptions,
    progress: &ProgressBar,
) -> anyhow::Result<Vec<Series>> {
    let all = runner::run_interleaved(meter, commands, opts, &Bar(progress)).map_err(with_flags)?;
    Ok(all.into_iter().map(in_words).collect())
}

/// The result of one command's series, as `run` reports and saves it.
pub fn result_of(
    meter: &Meter,
    argv: Vec<String>,
    window: Option<Duration>,
    baseline: Option<Baseline>,
    series: Series,
) -> RunResult {
    runner::result_of(
        meter,
        argv,
        window,
        baseline,
        series.measurements,
        series.stopped_early,
    )
}

/// Measures the idle baseline before the runs, under a spinner.
pub fn start_baseline(meter: &Meter, duration: Duration) -> anyhow::Result<Option<Baseline>> {
    let spinner = crate::progress::spinner(&format!(
        "measuring idle baseline for {:.1} s",
        duration.as_secs_f64()
    ));
    let baseline = runner::start_baseline(meter, duration)?;
    spinner.finish_and_clear();
    Ok(baseline)
}

/// Measures the idle baseline again after the runs, under a spinner.
pub fn finish_baseline(meter: &Meter, baseline: &mut Baseline) -> anyhow::Result<()> {
    let spinner = crate::progress::spinner("measuring idle baseline again");
    runner::finish_baseline(meter, baseline)?;
    spinner.finish_and_clear();
    Ok(())
}

fn in_words(series: runner::Series) -> Series {
    Series {
        measurements: series.measurements,
        stopped_early: series.stopped_early.as_ref().map(describe),
    }
}

/// A stop as `run` prints and saves it (`stopped_early`), naming the flag that fixes it.
fn describe(stop: &Stop) -> String {
    let why = match &stop.reason {
        StopReason::Interrupted => "interrupted".to_string(),
        StopReason::PrepareFailed(status) => format!(
            "the --prepare command failed ({}); rerun with --show-output to see why",
            status.describe()
        ),
        StopReason::Overran { ran, window } => format!(
            "the command ran {:.3} s, longer than the --window of {:.3} s; raise --window so that every run ends inside it",
            ran.as_secs_f64(),
            window.as_secs_f64()
        ),
        StopReason::CommandFailed(status) => format!(
            "the command failed ({}); use --ignore-failure to measure it anyway, --show-output to see its output",
            status.describe()
        ),
    };
    format!("{}: {why}", stop.place())
}

/// The runner's error, with the `--config` flag and the `restore` command where they are
/// the context or the fix.
fn with_flags(error: RunnerError) -> anyhow::Error {
    match error {
        RunnerError::Apply { config, source } => {
            anyhow::Error::new(source).context(format!("applying --config {config}"))
        }
        RunnerError::Restore { config, errors } => anyhow::anyhow!(
            "restoring the settings of --config {config} failed: {}; run `powerlens restore`",
            errors.join("; ")
        ),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::run::ExitStatus;
    use powerlens_sys::settings::SettingsError;
    use powerlens_workload::runner::During;

    /// The runner's errors name no flag; the CLI gives them the `--config` of before.
    #[test]
    fn configuration_errors_name_the_flag() {
        let apply = with_flags(RunnerError::Apply {
            config: "save".into(),
            source: SettingsError::Conflict {
                first: "turbo=off".into(),
                second: "turbo=on".into(),
                path: "/sys/devices/system/cpu/intel_pstate/no_turbo".into(),
            },
        });
        assert_eq!(
            format!("{apply:#}"),
            "applying --config save: turbo=off and turbo=on both set /sys/devices/system/cpu/intel_pstate/no_turbo: keep one of them"
        );
        let restore = with_flags(RunnerError::Restore {
            config: "save".into(),
            errors: vec!["turbo: gone".into(), "governor: gone".into()],
        });
        assert_eq!(
            format!("{restore:#}"),
            "restoring the settings of --config save failed: turbo: gone; governor: gone; run `powerlens restore`"
        );
    }

    #[test]
    fn stops_name_the_place_and_the_flag_that_fixes_them() {
        let failed = ExitStatus {
            code: Some(3),
            signal: None,
        };
        let stop = |during, command, reason| {
            describe(&Stop {
                during,
                command,
                reason,
            })
        };
        assert_eq!(
            stop(During::WarmUp, Some(2), StopReason::Interrupted),
            "warm-up of command 2: interrupted"
        );
        assert_eq!(
            stop(During::Run(1), None, StopReason::PrepareFailed(failed)),
            "run 1: the --prepare command failed (exit code 3); rerun with --show-output to see why"
        );
        assert_eq!(
            stop(
                During::Run(4),
                Some(1),
                StopReason::Overran {
                    ran: Duration::from_millis(300),
                    window: Duration::from_millis(100),
                }
            ),
            "run 4 of command 1: the command ran 0.300 s, longer than the --window of 0.100 s; raise --window so that every run ends inside it"
        );
        assert_eq!(
            stop(During::Run(2), None, StopReason::CommandFailed(failed)),
            "run 2: the command failed (exit code 3); use --ignore-failure to measure it anyway, --show-output to see its output"
        );
    }
}
