//! One module per command; each turns its arguments into options and calls the libraries.

pub mod agent;
pub mod calibrate;
pub mod compare;
pub mod completions;
pub mod demo;
pub mod diff;
pub mod dvfs;
pub mod export;
pub mod info;
pub mod live;
pub mod record;
pub mod report;
pub mod restore;
pub mod run;
pub mod runs;
pub mod sweep;
pub mod top;
pub mod wake;
pub mod workload;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn execute(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Info(args) => info::execute(&cli.global, args),
        Command::Agent(args) => agent::execute(&cli.global, *args),
        Command::Top(args) => top::execute(&cli.global, *args),
        Command::Dvfs(args) => dvfs::execute(&cli.global, args),
        Command::Run(args) => run::execute(&cli.global, *args),
        Command::Record(args) => record::execute(&cli.global, *args),
        Command::Report(args) => report::execute(&cli.global, *args),
        Command::Export(args) => export::execute(&cli.global, *args),
        Command::Diff(args) => diff::execute(&cli.global, *args),
        Command::Compare(args) => compare::execute(&cli.global, *args),
        Command::Runs(args) => runs::execute(args),
        Command::Sweep(args) => sweep::execute(&cli.global, *args),
        Command::Demo(args) => demo::execute(&cli.global, args),
        Command::Calibrate(args) => calibrate::execute(&cli.global, args),
        Command::Restore(args) => restore::execute(&cli.global, args),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => completions::man(args),
        Command::Workload(args) => workload::execute(args),
        Command::Wake(args) => wake::execute(&cli.global, args),
    }
}
