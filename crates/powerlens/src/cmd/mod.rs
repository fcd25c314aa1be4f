//! One module per command; each turns its arguments into options and calls the libraries.

pub mod dvfs;
pub mod info;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn execute(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Info(args) => info::execute(&cli.global, args),
        Command::Dvfs(args) => dvfs::execute(&cli.global, args),
    }
}
