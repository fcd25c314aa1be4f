//! What to record and how ([`RecordOptions`]), how the recorder shows its long phases and
//! tells the user things on the way, and what it tells at the end ([`RecordSummary`]).

use std::path::PathBuf;
use std::time::Duration;

use powerlens_core::run::ExitStatus;

use crate::meter::MeterOptions;

/// What to record.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start this command and follow its process tree.
    Command(Vec<String>),
    /// An existing process and its descendants.
    Pid(u32),
    /// The whole system.
    All,
}

#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub output: PathBuf,
    pub target: Target,
    /// Stop after this long (required for `-a` and `-p` unless Ctrl-C is meant).
    pub duration: Option<Duration>,
    pub sample_interval: Duration,
    /// Measure idle power this long before recording (with a meter), for the idle row.
    pub baseline: Duration,
    pub buffer_pages: usize,
    /// Record the reduced procfs form even when tracing is possible.
    pub reduced: bool,
    pub show_output: bool,
    pub meter: MeterOptions,
    /// Call stacks on the stack events and cpu-clock samples at this rate (Hz); `None`
    /// for no stacks (`--no-stacks`).
    pub stacks_hz: Option<u32>,
    /// User-stack bytes copied per stack event (`--stack-bytes`).
    pub stack_bytes: u32,
    /// Kernel frames in the stacks of the stack events too (blocking, waking, timer
    /// arming), not only in CPU-time samples (`--kernel-stacks`): about twice those
    /// events' cost to the traced threads.
    pub kernel_stacks: bool,
    /// Stacks of the stack events to the thread's root (`--full-stacks`): the kernel also
    /// walks each one's frame-pointer chain, which continues where the copy of
    /// `stack_bytes` ends. By default user stacks are unwound from the copy alone: the
    /// walk cost 2–3× what the tracepoint and the copy cost together (docs/RECORD.md).
    pub full_stacks: bool,
    /// Sample the stacks of switches, wake-ups and timer arming, at most this many a
    /// second per CPU and event (`--stack-rate`), every one while they are rarer; `None`
    /// for a stack on every one (`--every-stack`).
    pub stack_samples_per_s: Option<u32>,
    /// Collect the scheduler's switches, wake-ups and CPU-time updates in the kernel (BPF)
    /// where it allows; `false` (`--perf-rings`) for perf rings throughout.
    pub in_kernel: bool,
    /// Variables set in the command's environment on top of powerlens's own: what makes
    /// managed runtimes write perf maps (`--jit-names`, [`jit_env`]).
    pub command_env: Vec<(String, String)>,
    /// Run the command this many times untraced before recording it, keeping each run's
    /// CPU time, so that the report can set what recording added, measured, beside the
    /// estimate (`--untraced-runs`); 0 for none. Only for a command.
    pub untraced_runs: u32,
    /// Shows a long phase under way (the idle baseline, symbolizing): a spinner in the
    /// CLI, [`no_phase`] for a caller with no terminal.
    pub show_phase: fn(&str) -> Phase,
    /// Tells the user something they need before the recording ends (that it will be
    /// reduced, that an existing file was moved aside): stderr in the CLI, [`tell_nobody`]
    /// for a caller that reads the summary's notes instead. The library prints nothing.
    pub tell_now: fn(&str),
}

/// A long phase of the recording under way, shown by [`RecordOptions::show_phase`] until
/// this is dropped.
pub struct Phase(Option<Box<dyn FnOnce()>>);

impl Phase {
    /// A phase whose display `end` clears.
    pub fn new(end: impl FnOnce() + 'static) -> Phase {
        Phase(Some(Box::new(end)))
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(end) = self.0.take() {
            end();
        }
    }
}

/// Shows nothing.
pub fn no_phase(_: &str) -> Phase {
    Phase(None)
}

/// Tells nothing (for [`RecordOptions::tell_now`]).
pub fn tell_nobody(_: &str) {}

impl std::fmt::Debug for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Phase")
    }
}

/// What the user is told at the end.
#[derive(Debug)]
pub struct RecordSummary {
    pub path: PathBuf,
    pub mode: &'static str,
    pub events: u64,
    /// Of `events`, the CPU-time samples (cpu-clock, with stacks).
    pub cpu_samples: u64,
    /// Meter, cpuidle and cpufreq readings.
    pub samples: u64,
    pub threads: usize,
    pub lost: u64,
    pub seconds: f64,
    pub exit: Option<ExitStatus>,
    /// Why recording stopped before the target ended (Ctrl-C, a write error).
    pub stopped_early: Option<String>,
    pub notes: Vec<String>,
}
