//! The powerlens command line: turns arguments into plain option structs and orchestrates
//! the library crates. No analysis lives here.

mod cli;
mod cmd;
mod progress;
mod results;
mod runner;
mod units;
mod workload;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`powerlens man | head`), as Unix tools do, instead of
    // reporting a write error.
    // SAFETY: setting a signal disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = cli::Cli::parse();
    match cmd::execute(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("powerlens: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
