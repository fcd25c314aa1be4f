//! `powerlens dvfs`: wide-vector frequency licenses. Reads files and turns flags into
//! the core's types; the model lives in `powerlens_core::dvfs`, the tables in
//! `powerlens_report::dvfs`.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use clap::{Args, Subcommand, ValueEnum};
use powerlens_core::dvfs::breakeven::{break_even_table, HARDWARE_TIMEOUT_US};
use powerlens_core::dvfs::classify::{SamplesReader, SAMPLES_FORMAT};
use powerlens_core::dvfs::counters::{license_counter_status, CounterProbe};
use powerlens_core::dvfs::gen::{generate, Pattern};
use powerlens_core::dvfs::policy::Policy;
use powerlens_core::dvfs::profile::{Profile, ProfileError, BUILTIN_PROFILES};
use powerlens_core::dvfs::simulate::simulate_policies;
use powerlens_core::dvfs::trace::{Phase, TraceParser, TRACE_FORMAT};
use powerlens_core::dvfs::Level;
use powerlens_report::dvfs as view;
use serde::Serialize;

use crate::args::GlobalArgs;

mod measure;

/// The help of `powerlens dvfs --help` (set on the `Dvfs` command in `cli.rs`).
pub const LONG_ABOUT: &str = "\
Wide-vector (AVX2/AVX-512) frequency licenses: break-even times, policy simulation, power score.

Intel CPUs run under a frequency *license*: level 0 (normal), 1 (AVX2) or 2 (AVX-512).
Heavy vector code lowers the license, and with it the maximum frequency, within
microseconds; the CPU raises it again only after a fixed delay (measured at about
670 us). Scalar code that follows vector code runs slowly for nothing in between.

Changing the license stalls the core (here 17/24/17 us down, 10 us up), so upclocking
only pays off if the lower-level stretch lasts long enough: the *break-even time*
t_BE = f_high * (t_down + t_up) / (f_high - f_low). A timeout equal to t_BE is never
worse than twice the overhead of an oracle that knows the future; 670 us is, where
the frequency swing is large.

Examples:
  powerlens dvfs break-even --profile xeon-gold-6130
  powerlens dvfs gen --pattern random --phases 100000 --seed 7 --out trace.csv
  powerlens dvfs simulate trace.csv --profile xeon-gold-6130 --active-cores 10 \\
      --policy fixed:670us --policy fixed:breakeven --policy hint --policy oracle
  powerlens dvfs classify samples.csv

Every figure is estimated by the model in docs/DVFS.md, except `measure`, which times
real code.";

#[derive(Debug, Args)]
pub struct DvfsArgs {
    #[command(subcommand)]
    pub command: DvfsCommand,
}

#[derive(Debug, Subcommand)]
pub enum DvfsCommand {
    /// Break-even time per active-core bucket and swing, beside the fixed 670 us timeout.
    #[command(long_about = "\
Break-even time per active-core bucket and swing (normal<->AVX2, normal<->AVX-512,
AVX2<->AVX-512): how long lower-level code must run at the low frequency before
upclocking and coming back down pays off. Beside it, the worst-case overhead of the
fixed hardware timeout relative to an oracle: (T + t_BE) / min(T, t_BE); 2x is optimal.

Example: powerlens dvfs break-even --profile xeon-gold-6130 --json")]
    BreakEven(BreakEvenArgs),
    /// Simulate upclocking policies on a `duration_us,level[,hint]` trace.
    #[command(long_about = "\
Simulate upclocking policies on a trace. Each CSV row `duration_us,level[,hint]` is a
phase: `duration_us` of work timed at the normal frequency, at license level 0/1/2;
hint = 1 marks a developer hint \"no heavy vector code follows\". Lines starting with #
and a `duration_us,...` header are skipped. TRACE may be - for standard input.

Policies: fixed:T (upclock T of wall time after code of the current level last ran;
fixed:670us is the hardware), fixed:breakeven (T = t_BE of the swing), hint (fixed:670us,
but upclock at once on hinted phases), oracle (knows the future). Without --policy all
four run. Each row gives total, ideal and overhead time and the overhead ratio to the
oracle.

Example: powerlens dvfs simulate trace.csv --profile xeon-gold-6130 --active-cores 10")]
    Simulate(SimulateArgs),
    /// Write a synthetic trace (periodic, random or adversarial), deterministic for a seed.
    #[command(long_about = "\
Write a synthetic trace, deterministic for a seed.
  periodic:    --vector-us at --level, then --scalar-us at level 0 (hinted with --hint)
  random:      levels drawn from --levels, durations log-uniform in [--min-us, --max-us];
               level-0 phases of at least --hint-min-us carry the hint
  adversarial: vector phases, then scalar stretches lasting --timeout-us + 1 us at the
               vector level's frequency (of --profile/--active-cores): the worst case
               of a fixed:T policy with that timeout

Example: powerlens dvfs gen --pattern adversarial --active-cores 10 --phases 1000 --out adv.csv")]
    Gen(GenArgs),
    /// Per-process power score from `time_us,pid,level` context-switch samples.
    #[command(long_about = "\
Per-process power score from context-switch samples. Each CSV row `time_us,pid,level`
says: at a context switch at time_us, process pid had been running since the previous
row, and level is the license sampled now. The first row only sets the starting level.
A new process starts at score 0; its score S becomes 0.2*L + 0.8*S when the run lasted
more than 1000 us, or when the level moved past both the previous level and S; else it
stays. A score near 1 means the process runs at AVX2 frequency, near 2 at AVX-512.

Example: powerlens dvfs classify samples.csv --json")]
    Classify(ClassifyArgs),
    /// Whether this CPU's license-level counters can be read, and why not.
    Counters(CountersArgs),
    /// Measure license-change costs and the upclock delay on this CPU with AVX kernels.
    #[command(long_about = "\
Measure license-change costs and the upclock delay on this CPU with the AVX kernels of
`powerlens workload avx` (scalar, AVX2 and AVX-512 multiply-adds), pinned to one CPU.

Lowering the license: the same block of vector work is timed with the core settled at its
level and right after long-running lower-level code; the difference is the cost.
Raising it: after vector code, short scalar sections are timed back to back; the section
where the license rises spikes (the stall) and the ones after run faster. Its start is
the upclock delay, its height the cost. Each figure is a median with min, max and
standard deviation over --repeats runs.

On a virtual machine it still runs and says that frequency changes may not be visible.
Kernels the CPU cannot run are skipped with the reason.

Example: powerlens dvfs measure --repeats 50")]
    Measure(measure::MeasureArgs),
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Built-in profile (xeon-gold-6130, i9-7940x) or the path of a TOML/JSON profile file.
    #[arg(long, default_value = "xeon-gold-6130", value_name = "NAME|FILE")]
    pub profile: String,

    /// Override a transition cost in us, e.g. `--cost up_us=16`. Keys: normal_to_avx2_us,
    /// normal_to_avx512_us, avx2_to_avx512_us, up_us.
    #[arg(long = "cost", value_name = "KEY=US")]
    pub costs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct BreakEvenArgs {
    #[command(flatten)]
    pub profile: ProfileArgs,

    /// The fixed timeout to compare with, in us.
    #[arg(long, default_value_t = HARDWARE_TIMEOUT_US, value_name = "US")]
    pub timeout_us: f64,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The trace CSV (`duration_us,level[,hint]`), or - for standard input.
    pub trace: PathBuf,

    #[command(flatten)]
    pub profile: ProfileArgs,

    /// Number of active cores: selects the profile's frequency bucket.
    #[arg(long, value_name = "N")]
    pub active_cores: u32,

    /// A policy: fixed:T (e.g. fixed:670us, fixed:0.2ms), fixed:breakeven, hint, oracle.
    /// Repeat for several; default: fixed:670us, fixed:breakeven, hint, oracle.
    #[arg(long = "policy", value_name = "P")]
    pub policies: Vec<String>,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PatternName {
    Periodic,
    Random,
    Adversarial,
}

#[derive(Debug, Args)]
pub struct GenArgs {
    /// Which trace to generate.
    #[arg(long, value_enum)]
    pub pattern: PatternName,

    /// Number of phases (rows).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub phases: usize,

    /// Seed of the random pattern.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Write here instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// periodic/adversarial: duration of each vector phase.
    #[arg(long, default_value_t = 50.0, value_name = "US")]
    pub vector_us: f64,

    /// periodic: duration of each scalar phase.
    #[arg(long, default_value_t = 500.0, value_name = "US")]
    pub scalar_us: f64,

    /// periodic/adversarial: level of the vector phases (1 = AVX2, 2 = AVX-512).
    #[arg(long, default_value = "2", value_parser = parse_level)]
    pub level: Level,

    /// periodic: mark scalar phases with the hint.
    #[arg(long)]
    pub hint: bool,

    /// random: shortest phase.
    #[arg(long, default_value_t = 1.0, value_name = "US")]
    pub min_us: f64,

    /// random: longest phase.
    #[arg(long, default_value_t = 2000.0, value_name = "US")]
    pub max_us: f64,

    /// random: levels to draw from, e.g. 0,2.
    #[arg(long, default_value = "0,1,2", value_delimiter = ',', value_parser = parse_level)]
    pub levels: Vec<Level>,

    /// random: hint level-0 phases at least this long.
    #[arg(long, default_value_t = 1000.0, value_name = "US")]
    pub hint_min_us: f64,

    /// adversarial: the fixed timeout to defeat.
    #[arg(long, default_value_t = HARDWARE_TIMEOUT_US, value_name = "US")]
    pub timeout_us: f64,

    /// adversarial: profile whose frequencies set the scalar stretch length.
    #[command(flatten)]
    pub profile: ProfileArgs,

    /// adversarial: active cores selecting the profile's bucket.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub active_cores: u32,
}

#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// The samples CSV (`time_us,pid,level`), or - for standard input.
    pub samples: PathBuf,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CountersArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_level(text: &str) -> Result<Level, String> {
    Level::parse(text)
        .ok_or_else(|| format!("unknown level `{text}`: use 0 (normal), 1 (AVX2) or 2 (AVX-512)"))
}

pub fn execute(global: &GlobalArgs, args: DvfsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        DvfsCommand::BreakEven(a) => break_even(a),
        DvfsCommand::Simulate(a) => simulate(a),
        DvfsCommand::Gen(a) => gen(a),
        DvfsCommand::Classify(a) => classify(a),
        DvfsCommand::Counters(a) => counters(global, a),
        DvfsCommand::Measure(a) => measure_command(global, a),
    }?;
    Ok(ExitCode::SUCCESS)
}

/// A built-in profile by name, else a profile file, with cost overrides applied.
fn load_profile(args: &ProfileArgs) -> anyhow::Result<Profile> {
    let mut profile = if BUILTIN_PROFILES.contains(&args.profile.as_str()) {
        Profile::builtin(&args.profile)?
    } else if Path::new(&args.profile).is_file() {
        let text = std::fs::read_to_string(&args.profile)
            .with_context(|| format!("cannot read profile file {}", args.profile))?;
        Profile::parse(&text).with_context(|| format!("in profile file {}", args.profile))?
    } else {
        return Err(ProfileError::Unknown {
            name: args.profile.clone(),
        }
        .into());
    };
    for cost in &args.costs {
        profile.costs.set_from_str(cost)?;
    }
    profile.validate()?;
    Ok(profile)
}

fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

fn print_text(text: &str) -> anyhow::Result<()> {
    io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

fn break_even(args: BreakEvenArgs) -> anyhow::Result<()> {
    let profile = load_profile(&args.profile)?;
    let table = break_even_table(&profile, args.timeout_us);
    if args.json {
        print_json(&table)
    } else {
        print_text(&view::break_even_text(&table))
    }
}

/// How messages name an input: its path, or "standard input" for `-`.
fn input_name(path: &Path) -> String {
    if path == Path::new("-") {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}

/// A file, or standard input for `-`.
fn open_input(path: &Path) -> anyhow::Result<Box<dyn Read>> {
    if path == Path::new("-") {
        return Ok(Box::new(io::stdin().lock()));
    }
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(Box::new(file))
}

/// Calls `each` with every line of `input` (line ending included), reading 1 MiB chunks
/// and handing out lines in place: no copy or allocation per line, and UTF-8 is checked
/// once per chunk, because traces run to tens of millions of lines.
fn for_each_line(
    path: &Path,
    input: &mut dyn Read,
    mut each: impl FnMut(&str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            // A line longer than the buffer: make room for the rest of it.
            buf.resize(buf.len() * 2, 0);
        }
        let read = match input.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", input_name(path))),
        };
        filled += read;
        let at_end = read == 0;
        // Complete lines end at the last newline; at the end of input, everything counts.
        let complete = if at_end {
            filled
        } else {
            match buf[..filled].iter().rposition(|&b| b == b'\n') {
                Some(last) => last + 1,
                None => continue,
            }
        };
        let text = std::str::from_utf8(&buf[..complete])
            .map_err(|_| anyhow!("{}: not UTF-8 text; expected CSV", input_name(path)))?;
        for line in text.split_inclusive('\n') {
            each(line)?;
        }
        buf.copy_within(complete..filled, 0);
        filled -= complete;
        if at_end {
            return Ok(());
        }
    }
}

fn read_trace(path: &Path) -> anyhow::Result<Vec<Phase>> {
    let mut input = open_input(path)?;
    let mut parser = TraceParser::new();
    let mut phases = Vec::new();
    for_each_line(path, &mut *input, |line| {
        if let Some(phase) = parser
            .push_line(line)
            .map_err(|e| anyhow!("{}: {e} (format: {TRACE_FORMAT})", input_name(path)))?
        {
            phases.push(phase);
        }
        Ok(())
    })?;
    Ok(phases)
}

fn simulate(args: SimulateArgs) -> anyhow::Result<()> {
    let profile = load_profile(&args.profile)?;
    let policies: Vec<Policy> = if args.policies.is_empty() {
        vec![
            Policy::HARDWARE,
            Policy::FixedBreakEven,
            Policy::Hint,
            Policy::Oracle,
        ]
    } else {
        args.policies
            .iter()
            .map(|p| p.parse::<Policy>().map_err(|e| anyhow!("--policy: {e}")))
            .collect::<anyhow::Result<_>>()?
    };
    // Check the bucket before reading a large trace.
    profile
        .bucket(args.active_cores)
        .context("--active-cores")?;
    let trace = read_trace(&args.trace)?;
    let sim = simulate_policies(&profile, args.active_cores, &trace, &policies)?;
    if args.json {
        print_json(&sim)
    } else {
        print_text(&view::simulation_text(&sim))
    }
}

fn gen(args: GenArgs) -> anyhow::Result<()> {
    let positive = |name: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(anyhow!("--{name} must be a positive number of us, got {v}"))
        }
    };
    let pattern = match args.pattern {
        PatternName::Periodic => {
            positive("vector-us", args.vector_us)?;
            positive("scalar-us", args.scalar_us)?;
            Pattern::Periodic {
                vector_us: args.vector_us,
                scalar_us: args.scalar_us,
                level: args.level,
                hint: args.hint,
            }
        }
        PatternName::Random => {
            positive("min-us", args.min_us)?;
            positive("max-us", args.max_us)?;
            anyhow::ensure!(
                args.min_us <= args.max_us,
                "--min-us must not exceed --max-us"
            );
            Pattern::Random {
                min_us: args.min_us,
                max_us: args.max_us,
                levels: args.levels.clone(),
                hint_min_us: args.hint_min_us,
            }
        }
        PatternName::Adversarial => {
            positive("vector-us", args.vector_us)?;
            anyhow::ensure!(args.timeout_us >= 0.0, "--timeout-us must be >= 0");
            anyhow::ensure!(
                args.level != Level::Normal,
                "--level must be 1 or 2 for vector phases"
            );
            let ghz = load_profile(&args.profile)?
                .bucket(args.active_cores)?
                .ghz();
            Pattern::Adversarial {
                vector_us: args.vector_us,
                level: args.level,
                timeout_us: args.timeout_us,
                slowdown: ghz[0] / ghz[args.level.index()],
            }
        }
    };
    let sink: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        ),
        None => Box::new(io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    writeln!(out, "duration_us,level,hint")?;
    for phase in generate(&pattern, args.phases, args.seed) {
        writeln!(out, "{phase}")?;
    }
    out.flush()?;
    Ok(())
}

fn classify(args: ClassifyArgs) -> anyhow::Result<()> {
    let path = &args.samples;
    let mut reader = SamplesReader::new();
    for_each_line(path, &mut *open_input(path)?, |line| {
        reader
            .push_line(line)
            .map_err(|e| anyhow!("{}: {e} (format: {SAMPLES_FORMAT})", input_name(path)))
    })?;
    let classification = reader.finish();
    if args.json {
        print_json(&classification)
    } else {
        print_text(&view::classification_text(&classification))
    }
}

fn measure_command(global: &GlobalArgs, args: measure::MeasureArgs) -> anyhow::Result<()> {
    let cpuinfo = powerlens_sys::sysfs::read_string(global.roots()?.proc("cpuinfo"))?;
    let report = measure::run(&args, &cpuinfo);
    if args.json {
        print_json(&report)
    } else {
        print_text(&view::measure_text(&report))
    }
}

fn counters(global: &GlobalArgs, args: CountersArgs) -> anyhow::Result<()> {
    let roots = global.roots()?;
    let cpuinfo = powerlens_sys::sysfs::read_string(roots.proc("cpuinfo"))?;
    let status = license_counter_status(&CounterProbe {
        cpuinfo: &cpuinfo,
        core_pmu: roots.sys("bus/event_source/devices/cpu").is_dir(),
    });
    if args.json {
        print_json(&status)
    } else {
        print_text(&view::counter_status_text(&status))
    }
}
