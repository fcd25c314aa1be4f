//! `powerlens workload NAME`: command-line flags → the option structs of
//! [`powerlens_workload`] → run → one summary line on stderr, or JSON on stdout.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use crate::units::parse_positive_duration;
use powerlens_workload::{
    self as workload, avx, barrier, imbalanced, pingpong, sleepy, spin, Report, WorkCounts,
};

#[derive(Debug, Args)]
pub struct WorkloadArgs {
    #[command(subcommand)]
    pub workload: WorkloadCommand,
}

#[derive(Debug, Subcommand)]
pub enum WorkloadCommand {
    Spin(SpinArgs),
    Barrier(BarrierArgs),
    Imbalanced(ImbalancedArgs),
    Sleepy(SleepyArgs),
    Pingpong(PingpongArgs),
    Avx(AvxArgs),
}

/// What every workload prints when it ends.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Print a JSON object on stdout instead of the summary line: wall_s, work_units and per
    /// thread name, tid, cpu_s, voluntary_switches, involuntary_switches (getrusage).
    #[arg(long)]
    pub json: bool,

    /// Print nothing (the exit status still tells success).
    #[arg(long, short, conflicts_with = "json")]
    pub quiet: bool,
}

/// Busy loops on N threads for a fixed time: fully busy CPUs, no blocking.
///
/// Models the CPU-bound loads of the single- vs multi-threaded power study ("Maximizing
/// Power Savings on Mobile Platforms"): the same work on 1 or N CPUs, and the
/// load the power model is calibrated with. Each thread's CPU time ≈ the wall time and it
/// has almost no voluntary context switches.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: powerlens run -- powerlens workload spin --threads 2 --duration 1s"
)]
pub struct SpinArgs {
    /// Busy threads [default: every CPU this process may use].
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<u64>,

    /// How long to spin, with a unit: 2s, 500ms, 200us.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub duration: Duration,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// Parallel-for loops, each ended by a barrier where early threads block.
///
/// Models the OpenMP workload of "Power Battle: Windows 7 vs. Windows 8": a
/// series of `#pragma omp for` loops with implicit barriers. Each of K iterations splits W
/// compute units over the N threads (static schedule), then all wait at a barrier; waiting
/// threads block (passive wait), so each wait is a synchronization context switch and a
/// wake-up. Small W makes short waits and many wake-ups, the pattern the study found
/// inefficient. A compute unit is 1024 dependent integer multiply-xorshift rounds (about
/// 1.5 µs in a release build).
#[derive(Debug, Args)]
#[command(
    after_help = "Example: powerlens workload barrier --threads 2 --iterations 1000 --work 200 --json"
)]
pub struct BarrierArgs {
    /// Threads in the team [default: every CPU this process may use].
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<u64>,

    /// Parallel-for iterations, each ended by a barrier.
    #[arg(long, value_name = "K", default_value = "1000", value_parser = parse_count)]
    pub iterations: u64,

    /// Compute units per iteration, split over the threads (0: barriers only).
    #[arg(long, value_name = "W", default_value = "1000")]
    pub work: u64,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// One thread does most of the work; the others finish early and wait at the join.
///
/// Models the imbalanced threading model of "Maximizing Power Savings on Mobile Platforms"
/// ("Maximizing Power Savings on Mobile Platforms"): one heavy thread (there, physics) and light ones (rendering). The run lasts
/// as long as the heavy thread, the CPUs are unevenly busy, and a per-core frequency
/// governor may lower the frequency. Thread heavy-0 does SHARE of the work, light-1…
/// split the rest.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: powerlens workload imbalanced --threads 2 --share 0.8 --work 500000"
)]
pub struct ImbalancedArgs {
    /// Threads, one heavy and the others light [default: every CPU, at least 2].
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<u64>,

    /// The heavy thread's share of the work, above 0 and at most 1.
    #[arg(long, value_name = "F", default_value_t = imbalanced::DEFAULT_HEAVY_SHARE, value_parser = parse_share)]
    pub share: f64,

    /// Compute units for all threads together (a unit is about 1.5 µs in a release build).
    #[arg(long, value_name = "W", default_value = "1000000", value_parser = parse_count)]
    pub work: u64,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// A thread that wakes every PERIOD, works briefly and sleeps again.
///
/// Models short vs long sleeps: the short waits "not efficient" for idle states in
/// "Power Battle: Windows 7 vs. Windows 8" and race-to-idle in "Maximizing Power Savings on Mobile Platforms". The CPU
/// idles for about one period between bursts, so the period decides which C-states pay off
/// and how many wake-ups per second the program causes. Wake-ups follow absolute deadlines,
/// one per period, DURATION / PERIOD periods in all; a period whose deadline passed during
/// a late wake-up is skipped and counted (`missed_periods` in --json).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  powerlens workload sleepy --period 200us --duration 1s\n  powerlens workload sleepy --period 0.1s --duration 2s --work 50us"
)]
pub struct SleepyArgs {
    /// Time between wake-ups, with a unit: 200us, 1ms, 0.1s.
    #[arg(long, value_name = "TIME", default_value = "1ms", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub period: Duration,

    /// How long to run, with a unit; at least one period.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub duration: Duration,

    /// Compute time after each wake-up, with a unit; shorter than the period (the default
    /// is a short burst, like a timer callback).
    #[arg(long, value_name = "TIME", default_value = "20us", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub work: Duration,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// Two threads (ping, pong) hand a token back and forth.
///
/// The pure synchronization load: each handoff is a wake-up caused by the other thread and
/// a blocking wait (a voluntary context switch) by the passer, as in the synchronization
/// functions of the VTune grid in "Power Battle: Windows 7 vs. Windows 8". K
/// round trips are 2 × K handoffs; each thread waits K times.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  powerlens workload pingpong --iterations 10000 --json\n  powerlens workload pingpong --iterations 12000 --pin 0,1 --spinner 1   # pong shares cpu1 with a busy thread"
)]
pub struct PingpongArgs {
    /// Round trips of the token (ping → pong → ping).
    #[arg(long, value_name = "K", default_value = "10000", value_parser = parse_count)]
    pub iterations: u64,

    /// Pin ping to CPU A and pong to CPU B (they may be the same CPU).
    #[arg(long, value_name = "A,B", value_parser = parse_cpu_pair)]
    pub pin: Option<[usize; 2]>,

    /// Add a third thread, `spinner`, that computes on this CPU until the handoffs end: with
    /// --pin, the player on that CPU preempts it at every handoff.
    #[arg(long, value_name = "CPU")]
    pub spinner: Option<usize>,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// `A,B` for --pin: two CPU numbers.
fn parse_cpu_pair(s: &str) -> Result<[usize; 2], String> {
    let parse = |part: &str| {
        part.trim()
            .parse::<usize>()
            .map_err(|_| format!("{part:?} is not a CPU number: give two, e.g. --pin 0,1"))
    };
    match s.split_once(',') {
        Some((a, b)) => Ok([parse(a)?, parse(b)?]),
        None => Err(format!("{s:?}: give ping's CPU and pong's, e.g. --pin 0,1")),
    }
}

/// Phases of AVX2/AVX-512 code alternating with phases of scalar code.
///
/// Models the heterogeneous workloads of "Dim Silicon and the Case for Improved DVFS
/// Policies": wide vector code lowers the core's frequency (license) and the
/// CPU restores it only ~670 µs after the last wide instruction, slowing the scalar code
/// that follows. Each thread alternates U µs of the ISA's multiply-add kernel with U µs of
/// the scalar kernel (with --isa scalar, both phases are scalar: the baseline). The ISA is
/// checked at run time; a CPU without it gets an error naming what it lacks and has.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  powerlens workload avx --isa avx512 --phase-us 500 --duration 2s\n  powerlens workload avx --isa scalar --phase-us 500 --duration 2s"
)]
pub struct AvxArgs {
    /// Instruction set of the vector phases.
    #[arg(long, value_enum)]
    pub isa: IsaArg,

    /// Length of each vector phase and each scalar phase, in microseconds (the default is
    /// near the ~670 µs license timeout measured in the dim-silicon study).
    #[arg(long, value_name = "U", default_value = "1000", value_parser = parse_count)]
    pub phase_us: u64,

    /// How long to run, with a unit: 2s, 500ms.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub duration: Duration,

    /// Threads, each alternating phases on its own.
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_threads)]
    pub threads: u64,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum IsaArg {
    /// 512-bit FMA (needs AVX-512F)
    Avx512,
    /// 256-bit FMA (needs AVX2 and FMA)
    Avx2,
    /// scalar multiply-add, no vector width
    Scalar,
}

impl From<IsaArg> for avx::Isa {
    fn from(arg: IsaArg) -> avx::Isa {
        match arg {
            IsaArg::Avx512 => avx::Isa::Avx512,
            IsaArg::Avx2 => avx::Isa::Avx2,
            IsaArg::Scalar => avx::Isa::Scalar,
        }
    }
}

/// A count of 1 or more (threads, iterations, units).
fn parse_count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("must be 1 or more".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{text}' is not a whole number: give 1 or more")),
    }
}

/// A thread count from 1 to [`workload::MAX_THREADS`].
fn parse_threads(text: &str) -> Result<u64, String> {
    let threads = parse_count(text)?;
    if threads > workload::MAX_THREADS as u64 {
        return Err(format!("at most {} threads", workload::MAX_THREADS));
    }
    Ok(threads)
}

/// A share in (0, 1].
fn parse_share(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(format!(
            "'{text}' is not a share: give a number above 0 and at most 1, e.g. 0.8"
        )),
    }
}

/// The thread count asked for, or every CPU this process may use (up to the cap).
fn threads_or_all_cpus(threads: Option<u64>) -> usize {
    threads.map_or_else(
        || workload::available_cpus().min(workload::MAX_THREADS),
        |n| n as usize,
    )
}

pub fn execute(args: WorkloadArgs) -> anyhow::Result<ExitCode> {
    match args.workload {
        WorkloadCommand::Spin(a) => {
            let options = spin::SpinOptions {
                threads: threads_or_all_cpus(a.threads),
                duration: a.duration,
            };
            emit(&spin::run(options)?, &a.output)
        }
        WorkloadCommand::Barrier(a) => {
            let options = barrier::BarrierOptions {
                threads: threads_or_all_cpus(a.threads),
                iterations: a.iterations,
                work: a.work,
            };
            emit(&barrier::run(options)?, &a.output)
        }
        WorkloadCommand::Imbalanced(a) => {
            if a.threads == Some(1) {
                anyhow::bail!("--threads 1: imbalanced needs one heavy and at least one light thread; give --threads 2 or more");
            }
            let options = imbalanced::ImbalancedOptions {
                threads: threads_or_all_cpus(a.threads).max(2),
                work: a.work,
                heavy_share: a.share,
            };
            emit(&imbalanced::run(options)?, &a.output)
        }
        WorkloadCommand::Sleepy(a) => {
            if a.work >= a.period {
                anyhow::bail!(
                    "--work {:?} is not shorter than --period {:?}: the thread would never sleep; give a shorter --work or a longer --period",
                    a.work,
                    a.period
                );
            }
            if a.duration < a.period {
                anyhow::bail!(
                    "--duration {:?} is shorter than one --period {:?}: give a longer --duration",
                    a.duration,
                    a.period
                );
            }
            let options = sleepy::SleepyOptions {
                period: a.period,
                duration: a.duration,
                work: a.work,
            };
            emit(&sleepy::run(options)?, &a.output)
        }
        WorkloadCommand::Pingpong(a) => {
            let options = pingpong::PingpongOptions {
                iterations: a.iterations,
                pin: a.pin,
                spinner: a.spinner,
            };
            emit(&pingpong::run(options)?, &a.output)
        }
        WorkloadCommand::Avx(a) => {
            let isa = avx::Isa::from(a.isa);
            isa.check_supported()
                .map_err(|reason| anyhow::anyhow!("--isa {isa}: {reason}"))?;
            let options = avx::AvxOptions {
                isa,
                threads: a.threads as usize,
                phase: Duration::from_micros(a.phase_us),
                duration: a.duration,
            };
            emit(&avx::run(options)?, &a.output)
        }
    }
}

/// Prints the report: JSON on stdout, or the summary line on stderr unless quiet.
fn emit<O: Serialize, T: Serialize + WorkCounts>(
    report: &Report<O, T>,
    output: &OutputArgs,
) -> anyhow::Result<ExitCode> {
    if output.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else if !output.quiet {
        eprintln!("{}", report.summary_line());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_shares_reject_with_the_fix() {
        assert_eq!(parse_count("3"), Ok(3));
        assert_eq!(parse_threads("4096"), Ok(4096));
        assert!(parse_threads("4097").unwrap_err().contains("at most 4096"));
        assert!(parse_count("0").unwrap_err().contains("1 or more"));
        assert!(parse_count("-2")
            .unwrap_err()
            .contains("not a whole number"));
        assert_eq!(parse_share("0.8"), Ok(0.8));
        assert_eq!(parse_share("1"), Ok(1.0));
        for bad in ["0", "1.5", "-0.2", "NaN", "x"] {
            assert!(
                parse_share(bad)
                    .unwrap_err()
                    .contains("above 0 and at most 1"),
                "{bad}"
            );
        }
    }
}
