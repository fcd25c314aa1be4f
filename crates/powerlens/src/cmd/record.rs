//! `powerlens record`: a trace of what the scheduler, the idle loop, the timers and the
//! interrupts did while a program ran, plus energy/cpuidle/cpufreq samples, into one file
//! for `powerlens report`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::args::GlobalArgs;
use crate::cmd::run::{BatteryArgs, MeterArgs};
use crate::units::{parse_seconds, parse_seconds_or_zero};
use powerlens_record::{self as record, RecordOptions, Target};

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  powerlens record -- ./server --bench           # record a command and its children
  powerlens record -o build.rec -- make -j4
  powerlens record -p 1234 --duration 10         # an existing process for 10 s
  powerlens record -a --duration 5               # the whole system for 5 s
  powerlens report powerlens.rec                 # then: why did it cost what it cost

Collection is system-wide (every CPU: sched_switch, wake-ups, migrations, fork/exec/exit,
cpu_idle, cpu_frequency, IRQ, softirq, timer arming and expiry, IPI entries and exits); the
report focuses on the target's process tree and shows everything else as other processes.

Call stacks (kernel and user) are recorded where threads block or are preempted, where they
wake others, where timers are armed, and in CPU-time samples (-F, default 999 Hz). User
stacks are unwound with the binaries' DWARF unwind tables (.eh_frame), so programs and
libraries built without frame pointers (Debian's glibc) unwind too; the stacks are
symbolized at the end of the recording, while every binary still exists. --no-stacks
turns all of this off.

Needs root (or CAP_PERFMON with perf_event_paranoid ≤ 0) and tracefs; powerlens mounts
tracefs privately when it is missing. Without those privileges it records a REDUCED profile
from procfs (per-thread CPU time and context-switch counts) and says so.

The file is committed every second: after a crash or SIGKILL it holds everything up to the
last second. An existing output file is moved aside to FILE.old.")]
pub struct RecordArgs {
    /// The recording file to write.
    #[arg(short, long, value_name = "FILE", default_value = "powerlens.rec")]
    pub output: PathBuf,

    /// Record an existing process (and the processes it starts) instead of a command.
    #[arg(short, long, value_name = "PID", conflicts_with_all = ["all", "command"])]
    pub pid: Option<u32>,

    /// Record the whole system (every process is a target); use with --duration or Ctrl-C.
    #[arg(short, long, conflicts_with = "command")]
    pub all: bool,

    /// Stop recording after this many seconds (the command keeps running).
    #[arg(short, long, value_name = "SECS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,

    /// How often the recording stores a reading of energy, cpuidle counters and
    /// frequency (the meter's own counter reads are --meter-read-every).
    #[arg(long, value_name = "SECS", default_value = "0.1", value_parser = parse_seconds)]
    pub sample_every: Duration,

    /// With an energy meter: measure idle power this long before recording, for the
    /// report's idle (baseline) row. 0 skips it.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_seconds_or_zero)]
    pub baseline: Duration,

    /// Ring buffer pages per CPU (4 KiB each). Raise it when the summary reports lost records.
    #[arg(long, value_name = "PAGES", default_value_t = 1024)]
    pub buffer_pages: usize,

    /// Do not record call stacks (nor CPU-time samples): smaller files and less overhead,
    /// but no `report --by function|stack`, no stacks in wake-up causes.
    #[arg(long)]
    pub no_stacks: bool,

    /// CPU-time samples per second per CPU (the cpu-clock software event, with stacks):
    /// the resolution of per-function CPU time and energy.
    #[arg(short = 'F', long, value_name = "HZ", default_value_t = 999,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub frequency: u32,

    /// Bytes of each thread's user stack copied where it blocks, is preempted, wakes
    /// another or arms a timer, for unwinding code without frame pointers (CPU-time
    /// samples copy 4096). The kernel copies them at every such event, in the thread's own
    /// time: larger reaches more callers in code without frame pointers and costs more.
    #[arg(long, value_name = "BYTES", default_value_t = powerlens_sys::trace::DEFAULT_USER_STACK_BYTES,
          value_parser = clap::value_parser!(u32).range(8..=32768))]
    pub stack_bytes: u32,

    /// Kernel frames in the stacks where threads block, wake others or arm timers too
    /// (the kernel path of a wait: futex_wait, pipe_read, ep_poll…). CPU-time samples
    /// always have them. Off by default: unwinding the kernel stack at every switch and
    /// wake-up doubles what those stacks cost the traced threads (docs/RECORD.md).
    #[arg(long, conflicts_with = "no_stacks")]
    pub kernel_stacks: bool,

    /// Stacks where threads block, wake others or arm timers reach the thread's root: the
    /// kernel also walks each one's frame-pointer chain past the --stack-bytes copy. By
    /// default those stacks are unwound from the copy alone, and in deep programs end
    /// where it ends: the function grid needs only the innermost frames of your code, the
    /// outer callers in `report --tree` and `--by stack` need this. The walk costs 2–3× what the rest of those events
    /// cost the traced threads on a switch-bound load (docs/RECORD.md).
    #[arg(long, conflicts_with = "no_stacks")]
    pub full_stacks: bool,

    /// Stacks of switches, wake-ups and timer arming per second per CPU and event, at
    /// most: rarer events all get theirs; on a load that switches faster, one event in
    /// several gets its stack, as many as this rate (the per-function wait and switch columns then
    /// charge each thread's unsampled events to its latest sampled stack). The thread
    /// grid, wake-up counts and CPU time stay whole either way. At the default a stack
    /// costs the traced threads at most about 1% of a CPU per kind of event here.
    #[arg(long, value_name = "PER_S", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000),
          conflicts_with_all = ["no_stacks", "every_stack"])]
    pub stack_rate: u32,

    /// A stack on every switch, wake-up and timer arming, however many (the exact
    /// per-function split; on a switch-bound load the stacks then cost the traced
    /// threads more than the tracepoints themselves, docs/RECORD.md).
    #[arg(long, conflicts_with = "no_stacks")]
    pub every_stack: bool,

    /// Have the command's managed runtimes name their JIT code (the default): sets
    /// NODE_OPTIONS=--perf-basic-prof-only-functions, JAVA_TOOL_OPTIONS=-XX:+UnlockDiagnosticVMOptions
    /// -XX:+DumpPerfMapAtExit, DOTNET_PerfMapEnabled=1 and PYTHONPERFSUPPORT=1 in its
    /// environment, appending to what you set and never replacing it, and says so. The
    /// runtimes then write /tmp/perf-PID.map, which the end of the recording copies the
    /// names from (docs/RECORD.md, Managed runtimes).
    #[arg(long, default_value_t = true, overrides_with = "no_jit_names")]
    pub jit_names: bool,

    /// Leave the command's environment as it is (see --jit-names).
    #[arg(long, overrides_with = "jit_names")]
    pub no_jit_names: bool,

    /// Record only the reduced procfs profile, even when tracing is possible.
    #[arg(long)]
    pub reduced: bool,

    /// Collect every tracepoint through perf ring buffers. By default the scheduler's
    /// switches, wake-ups and CPU-time updates are collected in the kernel (BPF) where it
    /// allows (BTF, the bpf syscall): the same events, at a fraction of what perf records
    /// cost the traced threads (docs/RECORD.md, How events are collected). Switches and
    /// wake-ups whose stacks need the kernel's help (--kernel-stacks, --full-stacks) go
    /// through perf either way.
    #[arg(long, env = "POWERLENS_PERF_RINGS",
          value_parser = clap::builder::FalseyValueParser::new())]
    pub perf_rings: bool,

    /// Before recording, run the command this many times untraced (output hidden) and keep
    /// each run's CPU time (getrusage), so that the report sets what recording added,
    /// measured, beside its estimate of the tracing's cost (the `perturbation` line's
    /// `untraced` line), and its wall time beside theirs. The estimate holds what each
    /// traced event cost; this holds also what recording does beside the events
    /// (powerlens's own threads next to the command) and how the command answers that,
    /// which on work handed between processes across CPUs can be more (docs/RECORD.md,
    /// "The cost of tracing"). For a command that does the same work each run; 3–5 runs
    /// show their spread.
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with_all = ["pid", "all"],
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub untraced_runs: u32,

    /// Hide the command's output (it is shown by default).
    #[arg(long)]
    pub quiet_command: bool,

    #[command(flatten)]
    pub meter: MeterArgs,

    #[command(flatten)]
    pub battery: BatteryArgs,

    /// The command to record, and its arguments.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn execute(global: &GlobalArgs, args: RecordArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let target = match (args.pid, args.all, args.command.is_empty()) {
        (Some(pid), _, _) => Target::Pid(pid),
        (None, true, _) => Target::All,
        (None, false, false) => Target::Command(args.command.clone()),
        (None, false, true) => anyhow::bail!(
            "nothing to record: give a command after `--` (powerlens record -- CMD), a process with -p PID, or the whole system with -a --duration SECS"
        ),
    };
    // Only a command started here gets the environment: -p and -a processes run already.
    let command_env = match (&target, args.jit_names && !args.no_jit_names) {
        (Target::Command(_), true) => {
            let env = record::jit_env::jit_environment(|name| std::env::var(name).ok());
            eprintln!("powerlens: {}", env.told);
            env.set
        }
        _ => Vec::new(),
    };
    let options = RecordOptions {
        output: args.output.clone(),
        target,
        duration: args.duration,
        sample_interval: args.sample_every,
        baseline: args.baseline,
        buffer_pages: args.buffer_pages,
        reduced: args.reduced,
        show_output: !args.quiet_command,
        meter: args.meter.options_with(&args.battery),
        stacks_hz: (!args.no_stacks).then_some(args.frequency),
        stack_bytes: args.stack_bytes,
        kernel_stacks: args.kernel_stacks,
        full_stacks: args.full_stacks,
        stack_samples_per_s: (!args.every_stack).then_some(args.stack_rate),
        in_kernel: !args.perf_rings,
        command_env,
        untraced_runs: args.untraced_runs,
        show_phase: crate::progress::phase,
        tell_now: |message| eprintln!("powerlens: {message}"),
    };
    let summary = record::record(&roots, &options)?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    eprintln!(
        "recorded {} events{}{} and {} of {} threads{} over {:.2} s ({}) to {}",
        summary.events,
        if summary.mode == record::MODE_REDUCED {
            " (REDUCED: procfs samples only)"
        } else {
            ""
        },
        match summary.cpu_samples {
            0 => String::new(),
            n => format!(" ({n} of them CPU-time samples)"),
        },
        match summary.samples {
            // The sampler reads at start and stop at least: none means nothing to read.
            0 if summary.mode != record::MODE_REDUCED => {
                "no meter/idle-state samples (no energy meter, cpuidle or cpufreq counters to read)"
                    .to_string()
            }
            n => format!("{n} meter/idle-state samples"),
        },
        summary.threads,
        // A trace is of the whole machine; `report` picks the target's threads from it.
        if summary.mode == record::MODE_REDUCED {
            ""
        } else {
            " system-wide"
        },
        summary.seconds,
        if summary.lost == 0 {
            "no records lost".to_string()
        } else {
            format!("{} records LOST", summary.lost)
        },
        summary.path.display()
    );
    if let Some(exit) = &summary.exit {
        match (exit.code, exit.signal) {
            (Some(0), _) => {}
            (Some(code), _) => eprintln!("the command exited with code {code}"),
            (_, Some(sig)) => eprintln!("the command was killed by signal {sig}"),
            _ => {}
        }
    }
    if let Some(why) = &summary.stopped_early {
        eprintln!(
            "powerlens: recording stopped early: {why}; {} keeps everything written until then",
            summary.path.display()
        );
        return Ok(if powerlens_record::interrupt::interrupted() {
            ExitCode::from(130)
        } else {
            ExitCode::FAILURE
        });
    }
    eprintln!("next: powerlens report {}", summary.path.display());
    Ok(ExitCode::SUCCESS)
}
