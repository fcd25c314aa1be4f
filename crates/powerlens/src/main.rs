//! The powerlens command line: turns arguments into plain option structs and orchestrates
//! the library crates. No analysis lives here.

mod allocator;
mod args;
mod cli;
mod cmd;
mod progress;
mod results;
mod series;
mod units;

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
    match cli::execute(cli) {
        Ok(code) => code,
        Err(err) => {
            // One line, whatever the causes embed (SQLite quotes multi-line statements and
            // schemas in its messages): scripts and logs read the error as one record.
            let text = format!("{err:#}");
            let text: Vec<&str> = text.split_whitespace().collect();
            eprintln!("powerlens: error: {}", text.join(" "));
            ExitCode::from(2)
        }
    }
}
