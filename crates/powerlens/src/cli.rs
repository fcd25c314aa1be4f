//! The flag table: every command, flag and help text. Help, the man page and the shell
//! completions are all generated from these definitions.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::args::GlobalArgs;
use crate::cmd;

/// Application-centric CPU power and energy analyzer: how much energy a program costs to
/// retire its work, and why.
#[derive(Debug, Parser)]
#[command(
    name = "powerlens",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = "Start here: `powerlens info` (what this machine can measure), `powerlens demo`, \
then `powerlens run -- CMD`. Energy = power × time: powerlens compares the energy to retire \
the work, not average watts. Every figure says whether it is measured, estimated or unavailable."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What this machine offers: topology, idle and frequency control, energy sources, the
    /// power model for estimates, perf access.
    Info(cmd::info::InfoArgs),
    /// Measure the energy a command takes to retire its work, over repeated runs.
    Run(Box<cmd::run::RunArgs>),
    /// Measure built-in workloads and explain the result: the quickest way to see powerlens work.
    Demo(cmd::demo::DemoArgs),
    /// Record what the scheduler, idle loop, timers and interrupts did while a program ran.
    Record(Box<cmd::record::RecordArgs>),
    /// Why a recording cost what it cost: the per-process and per-thread power grid.
    Report(Box<cmd::report::ReportArgs>),
    /// Two recordings side by side: every system figure, matched rows, findings in four sections.
    Diff(Box<cmd::diff::DiffArgs>),
    /// Write a recording for Perfetto or the Firefox Profiler, or its events as JSON Lines or CSV.
    Export(Box<cmd::export::ExportArgs>),
    /// Compare configurations by the energy and time to retire the same work, with statistics.
    Compare(Box<cmd::compare::CompareArgs>),
    /// Run a command over every combination of parameter values: energy and time for each.
    Sweep(Box<cmd::sweep::SweepArgs>),
    /// List and show results saved by `run`.
    Runs(cmd::runs::RunsArgs),
    /// Built-in workloads that reproduce the case studies: spin, barrier, imbalanced, sleepy, pingpong, avx.
    Workload(cmd::workload::WorkloadArgs),
    /// Fit the power model on a machine with a meter, for machines without one.
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// Wide-vector (AVX2/AVX-512) frequency licenses: break-even, policy simulation, power score.
    #[command(long_about = cmd::dvfs::LONG_ABOUT)]
    Dvfs(cmd::dvfs::DvfsArgs),
    /// C-state wake latency per idle state against the declared exit latency (wult-style).
    #[command(long_about = cmd::wake::LONG_ABOUT)]
    Wake(cmd::wake::WakeArgs),
    /// Serve per-process energy, CPU time and wake-ups to Prometheus, continuously.
    Agent(Box<cmd::agent::AgentArgs>),
    /// A live view in the terminal: node power, per-process power, CPU and wake-ups, idle residency.
    Top(Box<cmd::top::TopArgs>),
    /// Put back system settings a killed powerlens left applied (compare/sweep --config).
    Restore(cmd::restore::RestoreArgs),
    /// Write shell completions to stdout.
    Completions(cmd::completions::CompletionsArgs),
    /// Write the man page (roff) to stdout.
    Man(cmd::completions::ManArgs),
}

/// Runs the command the arguments name.
pub fn execute(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Info(args) => cmd::info::execute(&cli.global, args),
        Command::Agent(args) => cmd::agent::execute(&cli.global, *args),
        Command::Top(args) => cmd::top::execute(&cli.global, *args),
        Command::Dvfs(args) => cmd::dvfs::execute(&cli.global, args),
        Command::Run(args) => cmd::run::execute(&cli.global, *args),
        Command::Record(args) => cmd::record::execute(&cli.global, *args),
        Command::Report(args) => cmd::report::execute(&cli.global, *args),
        Command::Export(args) => cmd::export::execute(&cli.global, *args),
        Command::Diff(args) => cmd::diff::execute(&cli.global, *args),
        Command::Compare(args) => cmd::compare::execute(&cli.global, *args),
        Command::Runs(args) => cmd::runs::execute(args),
        Command::Sweep(args) => cmd::sweep::execute(&cli.global, *args),
        Command::Demo(args) => cmd::demo::execute(&cli.global, args),
        Command::Calibrate(args) => cmd::calibrate::execute(&cli.global, args),
        Command::Restore(args) => cmd::restore::execute(&cli.global, args),
        Command::Completions(args) => cmd::completions::completions(args, Cli::command()),
        Command::Man(args) => cmd::completions::man(args, Cli::command()),
        Command::Workload(args) => cmd::workload::execute(args),
        Command::Wake(args) => cmd::wake::execute(&cli.global, args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Issue 29 point 9: the fixture roots sit under their own heading after a command's
    /// options, never between them.
    #[test]
    fn fixture_roots_are_under_a_testing_heading_after_the_commands_options() {
        let mut cli = Cli::command();
        // Global options reach the subcommands when the command is built, as at parsing.
        cli.build();
        for name in ["record", "report", "agent", "info", "run"] {
            let help = cli
                .find_subcommand_mut(name)
                .unwrap()
                .render_long_help()
                .to_string();
            let heading = help
                .find("Testing:")
                .unwrap_or_else(|| panic!("{name}: no Testing heading in\n{help}"));
            for flag in ["--sysfs-root", "--procfs-root"] {
                assert!(
                    help.find(flag).unwrap() > heading,
                    "{name}: {flag} before the heading in\n{help}"
                );
            }
            assert!(
                help.find("--help").unwrap() < heading,
                "{name}: its own options come first\n{help}"
            );
        }
    }

    /// Issue 29 point 9: `agent --help`'s `--web-config` prose wraps at the width of the
    /// other options' help: a line ends only where the next word would not fit.
    #[test]
    fn web_config_help_wraps_at_the_width_of_the_others() {
        let mut cli = Cli::command();
        cli.build();
        let help = cli
            .find_subcommand_mut("agent")
            .unwrap()
            .render_long_help()
            .to_string();
        let block = |flag: &str| -> Vec<String> {
            let lines: Vec<&str> = help.lines().collect();
            let start = lines
                .iter()
                .position(|l| l.trim_start().starts_with(flag))
                .unwrap();
            lines[start + 1..]
                .iter()
                .take_while(|l| !l.trim().is_empty())
                .map(|l| l.to_string())
                .collect()
        };
        // The width the other options wrap at: the longest line of their help.
        let width = ["--listen <ADDR>", "--idle-w <WATTS>"]
            .iter()
            .flat_map(|f| block(f))
            .map(|l| l.chars().count())
            .max()
            .unwrap();
        let prose = block("--web-config <FILE>");
        assert!(prose.len() >= 3, "{help}");
        for pair in prose.windows(2) {
            let (line, next) = (&pair[0], &pair[1]);
            let word = next.split_whitespace().next().unwrap();
            assert!(line.chars().count() <= width.max(100), "{line}");
            assert!(
                line.chars().count() + 1 + word.chars().count() > width.min(100) - 1,
                "{line:?} ends early: {word:?} would fit within {width}\n{help}"
            );
        }
    }
}
