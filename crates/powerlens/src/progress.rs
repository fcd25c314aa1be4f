//! Progress on stderr: a bar for anything that runs longer than a second. Hidden when
//! stderr is not a terminal, so logs and pipes stay clean.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub fn bar(len: u64, prefix: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:30}] {pos}/{len} {elapsed_precise} {msg}",
        )
        .expect("valid progress template")
        .progress_chars("=> "),
    );
    pb.set_prefix(prefix.to_string());
    tick_when_shown(&pb);
    pb
}

/// A spinner for work of unknown length (a baseline, a calibration step).
pub fn spinner(message: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid progress template"),
    );
    pb.set_message(message.to_string());
    tick_when_shown(&pb);
    pb
}

/// Animates a bar that is drawn. Hidden (stderr not a terminal), it gets no ticker thread:
/// a tool that counts wake-ups should not add one every 120 ms that nobody sees.
fn tick_when_shown(pb: &ProgressBar) {
    if !pb.is_hidden() {
        pb.enable_steady_tick(Duration::from_millis(120));
    }
}

/// A spinner for a long phase of the recorder, cleared when the phase ends.
pub fn phase(message: &str) -> powerlens_record::Phase {
    let bar = spinner(message);
    powerlens_record::Phase::new(move || bar.finish_and_clear())
}

/// How a command shows a recording's analysis: its warnings and notes on stderr (named
/// after the recording when there are two, as `diff` has: "A (a.rec): "), its pass as a
/// bar.
pub struct AnalysisOnStderr {
    side: String,
    bar: Option<ProgressBar>,
}

impl AnalysisOnStderr {
    /// For a command that reads one recording.
    pub fn new() -> Self {
        Self::named(String::new())
    }

    /// For one of several recordings: `side` goes before each message.
    pub fn named(side: String) -> Self {
        AnalysisOnStderr { side, bar: None }
    }
}

impl powerlens_record::analyse::AnalyseObserver for AnalysisOnStderr {
    fn tell(&mut self, kind: &str, message: &str) {
        eprintln!("{kind}: {}{message}", self.side);
    }
    fn pass_started(&mut self, total: u64) {
        self.bar = Some(bar(total, "analysing"));
    }
    fn pass_at(&mut self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_position(done);
        }
    }
    fn pass_ended(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
