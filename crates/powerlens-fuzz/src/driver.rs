//! The fuzz loop: replays a target's corpus, then mutates its inputs until the time budget
//! is spent, keeping the mutants that reach new coverage (when the build is instrumented,
//! see [`crate::coverage`]). A panic, an input that runs longer than the time limit, or an
//! abort saves the input to the crash directory and ends the run with the command that
//! replays it.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::coverage::Coverage;
use crate::limits;
use crate::mutate::Mutator;
use crate::{corpus_dir, inputs_in, regressions_dir, Target};

/// How to fuzz one target.
#[derive(Debug, Clone)]
pub struct Options {
    pub budget: Duration,
    pub seed: u64,
    /// An input running longer than this is a hang.
    pub time_limit: Duration,
    /// Where a crashing input is saved.
    pub crash_dir: PathBuf,
    /// Where inputs that reached new coverage are saved (a working corpus that a long
    /// campaign can resume from), if anywhere.
    pub keep_dir: Option<PathBuf>,
    /// Status lines on stderr every this often (never when zero).
    pub status_every: Duration,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub inputs: u64,
    pub seconds: f64,
    pub corpus: usize,
    /// Edges covered (0 without instrumentation).
    pub covered: usize,
    pub edges: usize,
}

/// Why a run stopped before its budget.
#[derive(Debug)]
pub struct Crash {
    pub message: String,
    pub saved: PathBuf,
    /// The run up to the crash.
    pub stats: Stats,
}

/// The panic message of the last panic on this process, set by the hook [`quiet_panics`]
/// installs (the default hook would print a backtrace per caught panic).
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

/// Replaces the panic hook by one that records the message instead of printing it.
pub fn quiet_panics() {
    panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = format!("{payload}{location}");
        }
    }));
}

/// Runs `target` on `input`; the panic message if it panicked.
pub fn run_one(target: &Target, input: &[u8]) -> Result<(), String> {
    limits::set_current(input);
    let result = panic::catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    limits::clear_current();
    result.map_err(|_| {
        LAST_PANIC
            .lock()
            .map(|m| m.clone())
            .unwrap_or_else(|_| "a panic".into())
    })
}

/// A thread that ends the process when one input runs longer than the limit, after saving
/// it: a hang cannot be interrupted from inside.
struct Watchdog {
    started_ms: Arc<AtomicU64>,
    input: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    epoch: Instant,
}

impl Watchdog {
    fn start(target: &'static str, limit: Duration, crash_dir: PathBuf) -> Watchdog {
        let dog = Watchdog {
            started_ms: Arc::new(AtomicU64::new(0)),
            input: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
            epoch: Instant::now(),
        };
        let (started, input, stop, epoch) = (
            dog.started_ms.clone(),
            dog.input.clone(),
            dog.stop.clone(),
            dog.epoch,
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let at = started.load(Ordering::Acquire);
                if at == 0 {
                    continue;
                }
                let running = epoch.elapsed().saturating_sub(Duration::from_millis(at));
                if running > limit {
                    let bytes = input.lock().map(|i| i.clone()).unwrap_or_default();
                    let saved = save(&crash_dir, "hang", &bytes);
                    eprintln!(
                        "\npowerlens-fuzz: {target}: an input ran over {:.1} s (a hang); saved to {}\nreplay: scripts/fuzz.sh --replay {target} {}",
                        limit.as_secs_f64(),
                        saved.display(),
                        saved.display()
                    );
                    // SAFETY: ends the process at once; the hung thread cannot be stopped.
                    unsafe { libc::_exit(3) };
                }
            }
        });
        dog
    }

    fn arm(&self, input: &[u8]) {
        if let Ok(mut i) = self.input.lock() {
            i.clear();
            i.extend_from_slice(input);
        }
        let now = self.epoch.elapsed().as_millis() as u64;
        self.started_ms.store(now.max(1), Ordering::Release);
    }

    fn disarm(&self) {
        self.started_ms.store(0, Ordering::Release);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Saves `bytes` as `KIND-CRC` in `dir` and returns the path.
pub fn save(dir: &Path, kind: &str, bytes: &[u8]) -> PathBuf {
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join(format!("{kind}-{:08x}", crc32fast::hash(bytes)));
    let _ = std::fs::write(&path, bytes);
    path
}

/// Fuzzes `target` for `opts.budget`; the first crash ends it.
pub fn fuzz(target: &'static Target, opts: &Options) -> Result<Stats, Crash> {
    quiet_panics();
    let _ = std::fs::create_dir_all(&opts.crash_dir);
    limits::save_on_abort(&opts.crash_dir.join(format!("abort-{}", target.name)));
    let dog = Watchdog::start(target.name, opts.time_limit, opts.crash_dir.clone());
    let mut coverage = Coverage::new();
    let start = Instant::now();
    let mut stats = Stats {
        edges: crate::coverage::edges(),
        ..Stats::default()
    };

    let mut corpus: Vec<Vec<u8>> = Vec::new();
    let mut sources = vec![corpus_dir(target.name), regressions_dir(target.name)];
    sources.extend(opts.keep_dir.clone());
    for dir in &sources {
        corpus.extend(inputs_in(dir).into_iter().map(|(_, bytes)| bytes));
    }
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let longest = corpus.iter().map(Vec::len).max().unwrap_or(0);
    let mut mutator = Mutator::new(opts.seed, target.dict, (longest * 2).max(4096));

    let execute = |input: &[u8], coverage: &mut Coverage, stats: &mut Stats| {
        coverage.reset();
        dog.arm(input);
        let result = run_one(target, input);
        dog.disarm();
        stats.inputs += 1;
        match result {
            Ok(()) => Ok(coverage.merge()),
            Err(message) => {
                let saved = save(&opts.crash_dir, "crash", input);
                Err(Crash {
                    message,
                    saved,
                    stats: Stats::default(),
                })
            }
        }
    };

    let with_stats = |mut crash: Crash, stats: &Stats, coverage: &Coverage| {
        crash.stats = Stats {
            seconds: start.elapsed().as_secs_f64(),
            covered: coverage.covered(),
            ..stats.clone()
        };
        crash
    };
    // The corpus first: every seed must pass, and sets the coverage to beat.
    for input in corpus.clone() {
        execute(&input, &mut coverage, &mut stats).map_err(|c| with_stats(c, &stats, &coverage))?;
    }
    let mut last_status = Instant::now();
    let mut input = Vec::new();
    while start.elapsed() < opts.budget {
        let base = mutator.rng.below(corpus.len());
        let other = mutator.rng.below(corpus.len());
        input.clear();
        input.extend_from_slice(&corpus[base]);
        mutator.mutate(&mut input, &corpus[other]);
        let new = execute(&input, &mut coverage, &mut stats)
            .map_err(|c| with_stats(c, &stats, &coverage))?;
        if new {
            if let Some(dir) = &opts.keep_dir {
                save(dir, "cov", &input);
            }
            corpus.push(input.clone());
        }
        if !opts.status_every.is_zero() && last_status.elapsed() >= opts.status_every {
            last_status = Instant::now();
            eprintln!(
                "powerlens-fuzz: {}: {} inputs in {:.0} s ({:.0}/s), corpus {}, edges {}/{}",
                target.name,
                stats.inputs,
                start.elapsed().as_secs_f64(),
                stats.inputs as f64 / start.elapsed().as_secs_f64(),
                corpus.len(),
                coverage.covered(),
                stats.edges
            );
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    stats.corpus = corpus.len();
    stats.covered = coverage.covered();
    Ok(stats)
}

/// Runs `target` once on `input` with the time limit; for replaying a saved crash and for
/// the corpus test.
pub fn replay(target: &'static Target, input: &[u8], time_limit: Duration) -> Result<(), String> {
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let name = target.name;
    std::thread::spawn(move || {
        let start = Instant::now();
        while !flag.load(Ordering::Relaxed) {
            if start.elapsed() > time_limit {
                eprintln!(
                    "powerlens-fuzz: {name}: an input ran over {:.0} s (a hang)",
                    time_limit.as_secs_f64()
                );
                // SAFETY: ends the process; the hung thread cannot be stopped.
                unsafe { libc::_exit(3) };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let result = run_one(target, input);
    done.store(true, Ordering::Relaxed);
    result
}
