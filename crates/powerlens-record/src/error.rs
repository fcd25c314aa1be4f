//! The recorder library's one error type. The other crates' errors pass through unchanged
//! (their text is what users see); [`RecordError::While`] says what was being done when
//! one failed, the way the command line shows a cause after its context
//! ("opening the recording r.rec: no recording at r.rec …"). No message names a command
//! line flag: the command line adds that advice where it knows the flag.

use std::path::PathBuf;

use powerlens_core::codec::CodecError;
use powerlens_core::model::ModelError;
use powerlens_store::StoreError;
use powerlens_sys::settings::SettingsError;
use powerlens_sys::SysError;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Sys(#[from] SysError),
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// What was being done when `source` failed.
    #[error("{doing}")]
    While {
        doing: String,
        #[source]
        source: Box<RecordError>,
    },
    #[error("no command given")]
    NoCommand,
    #[error(
        "command not found: {program:?} (is it installed and on PATH? shell syntax needs `sh -c '…'`)"
    )]
    CommandNotFound { program: String },
    #[error("cannot execute {program:?}: permission denied (is it executable? chmod +x)")]
    CommandNotExecutable { program: String },
    #[error("cannot start {program:?}: {cause}")]
    CommandStart {
        program: String,
        cause: std::io::Error,
    },
    #[error("waiting for the command (pid {pid}): {cause}")]
    Wait { pid: i32, cause: std::io::Error },
    #[error("wait4 returned no child")]
    NoChild,
    /// A command the mock executor has no script for ([`crate::mock`]).
    #[error("the mock executor cannot run {command:?}: {reason}")]
    MockCommand { command: String, reason: String },
    /// A background read interval given to the mock's own meter, which is not read.
    #[error("the mock executor reads no meter here, so there is no read interval to set: its own meter is the scripted power; a fixture sysfs tree holding a meter would be read")]
    MockReadsNoMeter,
    #[error(
        "interrupted during the command's untraced runs (--untraced-runs): nothing was recorded"
    )]
    InterruptedUntraced,
    #[error("no process with pid {pid} (is it still running? `ps -p {pid}`)")]
    NoSuchProcess { pid: u32 },
    #[error("{} exists and cannot be moved aside to {}", from.display(), to.display())]
    MoveAside {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// One of the library's threads panicked (`thread` names it).
    #[error("the {thread} panicked")]
    Panicked { thread: &'static str },
    #[error("the drain thread was already stopped")]
    DrainAlreadyStopped,
    #[error("the drain thread stopped (the tracepoints failed)")]
    DrainFailed,
    #[error("the decode thread stopped")]
    DecodeStopped,
    #[error("reopening the recording: {cause}")]
    Reopen { cause: StoreError },
    #[error("the recording {} holds no events: it stopped before its first commit (recordings commit every second), or nothing ran; record again", path.display())]
    NoEvents { path: PathBuf },
    #[error("the reduced recording {} holds no thread samples (it was stopped before the first sample)", path.display())]
    NoThreadSamples { path: PathBuf },
    #[error("all {damaged} call stacks of {} are damaged: record again, or report with a copy of the recording", path.display())]
    StacksDamaged { damaged: usize, path: PathBuf },
    #[error("the recording is damaged: an event of cpu{cpu} at {time_ns} ns names CPU {named}, more than any machine has (the events before it were read)")]
    CpuOutOfRange { cpu: u32, time_ns: u64, named: u32 },
}

impl RecordError {
    /// The message with its causes, each after a colon, as the command line prints an
    /// error: for the text the library keeps (notes, `stopped_early`).
    pub fn with_causes(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(e) = cause {
            text.push_str(": ");
            text.push_str(&e.to_string());
            cause = e.source();
        }
        text
    }
}

/// [`RecordError::While`] for any error the library meets: `.doing(|| format!(…))`.
pub(crate) trait Doing<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, RecordError>;
}

impl<T, E: Into<RecordError>> Doing<T> for Result<T, E> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, RecordError> {
        self.map_err(|e| RecordError::While {
            doing: what(),
            source: Box::new(e.into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure in context reads as the command line shows it (context, then each
    /// cause after a colon), and another crate's error passes through with its own text
    /// and causes.
    #[test]
    fn causes_follow_their_context() {
        let store = StoreError::NoRecording {
            path: "r.rec".into(),
        };
        let plain = store.to_string();
        let e: Result<(), _> = Err(store);
        let e = e
            .doing(|| "opening the recording r.rec".into())
            .unwrap_err();
        assert_eq!(
            e.with_causes(),
            format!("opening the recording r.rec: {plain}")
        );
        assert_eq!(
            format!("{:#}", anyhow::Error::from(e)),
            format!("opening the recording r.rec: {plain}")
        );
        let io = std::io::Error::other("disk on fire");
        let moved = RecordError::MoveAside {
            from: "a".into(),
            to: "a.old".into(),
            source: io,
        };
        assert_eq!(
            moved.with_causes(),
            "a exists and cannot be moved aside to a.old: disk on fire"
        );
    }
}
