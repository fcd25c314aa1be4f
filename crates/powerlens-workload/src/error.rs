//! The library's typed errors: what went wrong running a workload, and what went wrong
//! measuring a series of runs. Messages name no command-line flag; the CLI adds that
//! context where a flag is the fix.

use std::io;

use powerlens_record::RecordError;
use powerlens_sys::settings::SettingsError;

/// Why a built-in workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// Options the workload cannot run with: no threads, a zero duration, work longer than
    /// its period.
    #[error("{0}")]
    Invalid(String),
    /// The CPU lacks the instruction set asked for; the text names what it lacks and has.
    #[error("{0}")]
    Unsupported(String),
    /// More threads than a workload starts ([`crate::MAX_THREADS`]).
    #[error("{asked} threads asked for, {at_most} at most")]
    TooManyThreads { asked: usize, at_most: usize },
    #[error("cannot start thread {name}")]
    StartThread {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("a workload thread panicked")]
    ThreadPanicked,
    #[error("getrusage(RUSAGE_THREAD) failed in {name}")]
    ThreadUsage {
        name: String,
        #[source]
        source: io::Error,
    },
    /// A thread could not be pinned to the CPU asked for (offline, or outside the CPUs this
    /// process may use).
    #[error("{0} (see `nproc` and the CPUs this process may use: `taskset -p $$`)")]
    Pin(String),
}

/// Returns [`WorkloadError::Invalid`] with the formatted message unless the condition
/// holds: the options check every workload makes before it starts a thread.
macro_rules! invalid_unless {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err($crate::error::WorkloadError::Invalid(format!($($message)+)));
        }
    };
}
pub(crate) use invalid_unless;

/// Why a series of measured runs could not go on. (A run that fails or is interrupted
/// is not an error: it ends the series with a [`crate::runner::Stop`].)
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Reading the energy meter failed (the recorder's error, kept whole: its message and
    /// its chain of causes are shown unchanged).
    #[error(transparent)]
    Meter(RecordError),
    /// Starting or waiting for the command (or the prepare command) failed.
    #[error(transparent)]
    Exec(RecordError),
    /// A configuration's settings could not be applied before its run.
    #[error("applying configuration {config}")]
    Apply {
        config: String,
        #[source]
        source: SettingsError,
    },
    /// A configuration's settings could not all be restored after its run: the machine
    /// is left changed until they are restored.
    #[error("restoring the settings of configuration {config} failed: {}", errors.join("; "))]
    Restore { config: String, errors: Vec<String> },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line prints an error with its causes (`{:#}`, one line). An error of
    /// the recorder that the runner passes on must read exactly as it did before the
    /// runner had an error type of its own.
    #[test]
    fn errors_passed_on_keep_their_message_and_causes() {
        let made = || RecordError::While {
            doing: "reading energy from powercap".into(),
            source: Box::new(RecordError::Io(io::Error::other("the counter went away"))),
        };
        let passed_on = anyhow::Error::from(RunnerError::Meter(made()));
        assert_eq!(
            format!("{passed_on:#}"),
            "reading energy from powercap: the counter went away"
        );
        let alone = anyhow::Error::from(made());
        assert_eq!(format!("{passed_on:#}"), format!("{alone:#}"));
        assert_eq!(passed_on.chain().count(), alone.chain().count());
    }

    #[test]
    fn thread_errors_read_as_before() {
        // Refused before any thread starts.
        let names = crate::threads::numbered_names("t", crate::MAX_THREADS + 1);
        let too_many = crate::threads::run_threads(&names, |_| ()).unwrap_err();
        assert_eq!(too_many.to_string(), "4097 threads asked for, 4096 at most");
        let cannot_start = anyhow::Error::from(WorkloadError::StartThread {
            name: "spin-3".into(),
            source: io::Error::from_raw_os_error(libc::EAGAIN),
        });
        assert!(
            format!("{cannot_start:#}")
                .starts_with("cannot start thread spin-3: Resource temporarily unavailable"),
            "{cannot_start:#}"
        );
    }
}
