//! `powerlens-fuzz`: runs the fuzz targets. Usually started by `scripts/fuzz.sh`, which
//! builds it with coverage instrumentation.
//!
//! ```text
//! powerlens-fuzz --list
//! powerlens-fuzz run TARGET|all SECONDS [--seed N] [--time-limit S] [--keep DIR] [--log FILE]
//! powerlens-fuzz replay TARGET FILE…
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use powerlens_fuzz::driver::{self, Options};
use powerlens_fuzz::{limits::LimitedAlloc, target, Target, TARGETS};

#[global_allocator]
static ALLOC: LimitedAlloc = LimitedAlloc;

const USAGE: &str = "usage:
  powerlens-fuzz --list                      the targets and the parsers they reach
  powerlens-fuzz run TARGET|all SECONDS      fuzz for SECONDS (per target with `all`)
      [--seed N] [--time-limit S] [--keep DIR] [--log FILE] [--crash-dir DIR]
  powerlens-fuzz replay TARGET FILE...       run saved inputs once (a crash to reproduce)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--list") | Some("list") => {
            for t in TARGETS {
                println!("{:<16} {}", t.name, t.about);
            }
            ExitCode::SUCCESS
        }
        Some("run") => match run(&args[1..]) {
            Ok(code) => code,
            Err(e) => usage_error(&e),
        },
        Some("replay") => match replay(&args[1..]) {
            Ok(code) => code,
            Err(e) => usage_error(&e),
        },
        Some("-h") | Some("--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => usage_error("no command"),
    }
}

fn usage_error(problem: &str) -> ExitCode {
    eprintln!("powerlens-fuzz: error: {problem}\n{USAGE}");
    ExitCode::from(2)
}

fn targets_named(name: &str) -> Result<Vec<&'static Target>, String> {
    if name == "all" {
        return Ok(TARGETS.iter().collect());
    }
    target(name).map(|t| vec![t]).ok_or_else(|| {
        let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
        format!("no target {name:?}; the targets: {}", names.join(", "))
    })
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let [name, seconds, rest @ ..] = args else {
        return Err("run needs TARGET and SECONDS".into());
    };
    let targets = targets_named(name)?;
    let seconds: f64 = seconds
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| format!("SECONDS must be a number of seconds, not {seconds:?}"))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut seed = now;
    let mut time_limit = Duration::from_secs(10);
    let mut keep: Option<PathBuf> = None;
    let mut log: Option<PathBuf> = None;
    let mut crash_dir = PathBuf::from("target/fuzz/crashes");
    let mut rest = rest.iter();
    while let Some(flag) = rest.next() {
        let mut value = || {
            rest.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--seed" => seed = value()?.parse().map_err(|_| "--seed takes an integer")?,
            "--time-limit" => {
                let s: f64 = value()?.parse().map_err(|_| "--time-limit takes seconds")?;
                time_limit = Duration::from_secs_f64(s.max(0.1));
            }
            "--keep" => keep = Some(value()?.into()),
            "--log" => log = Some(value()?.into()),
            "--crash-dir" => crash_dir = value()?.into(),
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    eprintln!(
        "powerlens-fuzz: seed {seed}, {} edges instrumented{}",
        powerlens_fuzz::coverage::edges(),
        if powerlens_fuzz::coverage::edges() == 0 {
            " (not a coverage build: blind mutation of the corpus)"
        } else {
            ""
        }
    );
    let mut failed = false;
    for t in targets {
        let opts = Options {
            budget: Duration::from_secs_f64(seconds),
            seed,
            time_limit,
            crash_dir: crash_dir.join(t.name),
            keep_dir: keep.as_ref().map(|k| k.join(t.name)),
            status_every: Duration::from_secs(if seconds > 120.0 { 60 } else { 0 }),
        };
        let (outcome, stats) = match driver::fuzz(t, &opts) {
            Ok(stats) => ("ok".to_string(), stats),
            Err(crash) => {
                failed = true;
                eprintln!(
                    "powerlens-fuzz: {}: CRASH: {}\nsaved to {}\nreplay: scripts/fuzz.sh --replay {} {}",
                    t.name,
                    crash.message,
                    crash.saved.display(),
                    t.name,
                    crash.saved.display()
                );
                (format!("crash {}", crash.saved.display()), crash.stats)
            }
        };
        eprintln!(
            "powerlens-fuzz: {:<15} {:>9} inputs in {:>6.0} s ({:>6.0}/s), corpus {:>5}, edges {}/{}: {outcome}",
            t.name,
            stats.inputs,
            stats.seconds,
            stats.inputs as f64 / stats.seconds.max(1e-9),
            stats.corpus,
            stats.covered,
            stats.edges
        );
        if let Some(log) = &log {
            let line = format!(
                "{now}\t{}\t{seed}\t{:.0}\t{}\t{}\t{}\t{}\t{outcome}\n",
                t.name, stats.seconds, stats.inputs, stats.corpus, stats.covered, stats.edges
            );
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .and_then(|mut f| f.write_all(line.as_bytes()));
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn replay(args: &[String]) -> Result<ExitCode, String> {
    let [name, files @ ..] = args else {
        return Err("replay needs TARGET and FILE".into());
    };
    let [t] = targets_named(name)?[..] else {
        return Err("replay takes one target".into());
    };
    if files.is_empty() {
        return Err("replay needs a FILE".into());
    }
    driver::quiet_panics();
    let mut failed = false;
    for file in files {
        let bytes = std::fs::read(file).map_err(|e| format!("reading {file}: {e}"))?;
        match driver::replay(t, &bytes, Duration::from_secs(60)) {
            Ok(()) => eprintln!("{file}: ok"),
            Err(message) => {
                failed = true;
                eprintln!("{file}: PANIC: {message}");
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
