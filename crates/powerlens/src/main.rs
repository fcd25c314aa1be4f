//! The powerlens command line: turns arguments into plain option structs and orchestrates
//! the library crates. No analysis lives here.

mod cli;
mod cmd;
mod duration;
mod workload;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::execute(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("powerlens: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
