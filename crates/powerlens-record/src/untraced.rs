//! The command's untraced runs before a recording (`--untraced-runs`): what the report
//! sets the recorded run against, to say what recording added, measured
//! (`powerlens_core::sched::untraced`).

use powerlens_core::sched::untraced::UntracedRun;

use crate::error::RecordError;
use crate::{exec, interrupt, RecordOptions, Target};

/// Runs the command `opts.untraced_runs` times, one after another, with the environment
/// the recorded run gets and its output hidden, and keeps what each took. Nothing is
/// traced yet: they run before the tracepoints are opened. Ctrl-C (or SIGTERM) stops
/// them, and the recording with them: the running command gets SIGINT, and no file is
/// made.
pub(crate) fn run(opts: &RecordOptions) -> Result<Vec<UntracedRun>, RecordError> {
    let Target::Command(argv) = &opts.target else {
        return Ok(Vec::new());
    };
    let n = opts.untraced_runs;
    if n > 0 {
        interrupt::install();
    }
    let mut runs = Vec::new();
    for k in 1..=n {
        (opts.tell_now)(&format!("running the command untraced, {k} of {n}"));
        let outcome = exec::run(argv, false, None, &opts.command_env)?;
        runs.push(UntracedRun {
            cpu_s: outcome.cpu_s,
            wall_s: outcome.wall.as_secs_f64(),
            exit: outcome.exit,
        });
        if interrupt::interrupted() {
            return Err(RecordError::InterruptedUntraced);
        }
    }
    Ok(runs)
}
