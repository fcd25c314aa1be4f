//! The mock executor, clock and meter: a deterministic backend for the runner, as
//! hyperfine's debug mode is for its benchmarks. No process starts and no clock is read:
//! each "command" is a script of steps whose wall time, CPU time and power are given, the
//! clock moves by exactly those times, and the meter's energy is the exact integral of the
//! scripted power over the clock. `run`, `compare` and `sweep` select it (a hidden flag of
//! the command line) so that their statistics are tested against figures computed by
//! hand, whatever else loads the machine; every figure it produces is labelled
//! [`Provenance::Mocked`](powerlens_core::provenance::Provenance::Mocked).
//!
//! A command line is steps separated by `;` (the argv words, or the line of `sh -c LINE`):
//!
//! - `sleep SECS`: SECS of wall time at the machine's idle power, no CPU time;
//! - `spin SECS WATTSW`: SECS of wall time and of CPU time, the machine at WATTS;
//! - `idle WATTSW`: the machine's idle power from now on (0 W at the start);
//! - `exit CODE`, `kill SIGNAL`: the command ends so, the steps after it skipped;
//! - `true`, `false`: nothing, then exit 0 or 1;
//! - `draw DIR WATTSW`: the meter of a fixture sysfs in DIR (below its root, e.g.
//!   `class/powercap/intel-rapl:0`) draws WATTS from now on;
//! - `others CPUS`: other processes keep CPUS of the machine's [`MOCK_CPUS`] CPUs busy from
//!   now on (0 at the start): what the mock's `/proc/stat` ([`MockMachine::cpu_times`])
//!   counts beside the commands' own spinning.
//!
//! On a fixture sysfs tree that holds a meter (`POWERLENS_SYSFS_ROOT` elsewhere than
//! `/sys`), the mock's meter is that meter's real source, read on the mock clock over
//! files that `draw` steps drive ([`crate::mock_meter`]); the machine's own power (`idle`,
//! the watts of `spin`) reaches no file there, and is refused. On `/sys` the mock never
//! reads a meter of this machine.
//!
//! Any number may be a comma-separated list: the command line's Nth attempt (warm-ups and
//! `--prepare` lines counted, each line on its own count) takes the Nth value, and the
//! last value once the list runs out. `[PATH=TEXT] STEP` runs STEP only when the file PATH
//! holds TEXT, so that a command can depend on a setting applied around its run.
//! Seconds have at most 9 decimals and watts at most 6, so that time is whole nanoseconds
//! and energy whole femtojoules: sums are exact, with no rounding that depends on order.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use powerlens_core::run::ExitStatus;
use powerlens_sys::SysError;

use crate::error::RecordError;
use crate::exec::{Executor, Outcome};
use crate::interrupt;
use crate::mock_meter::FixtureMeter;

/// The names of the mock meter's domains: everything the machine drew (the total, as a
/// package is), and the energy drawn while spinning (a subzone, as a core is: zero in a run
/// that only sleeps).
pub const TOTAL_DOMAIN: &str = "mock";
pub const SPIN_DOMAIN: &str = "mock/spin";

/// The CPUs of the mock machine, for its `/proc/stat`.
pub const MOCK_CPUS: u32 = 2;

/// The mock machine: its clock, its meter and the attempt count of each command line.
pub struct MockMachine {
    /// The instant the mock clock starts at; only ever advanced by scripted durations.
    origin: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    now_ns: u64,
    idle_uw: u64,
    /// 1 µW for 1 ns is 1 fJ.
    total_fj: u128,
    spin_fj: u128,
    /// Busy CPU-nanoseconds of the whole machine (the commands' spinning and `others`).
    busy_ns: u128,
    /// CPUs other processes keep busy, in thousandths.
    others_mcpu: u64,
    attempts: HashMap<Vec<String>, usize>,
    /// The fixture's meter, when the mock reads one instead of its own.
    fixture: Option<FixtureMeter>,
}

impl State {
    /// Lets `ns` pass at `uw` microwatts (the fixture's meters at their own draws).
    fn advance(&mut self, origin: Instant, ns: u64, uw: u64) -> u128 {
        if let Some(fixture) = &mut self.fixture {
            fixture.advance(origin, self.now_ns, ns);
        }
        let fj = u128::from(ns) * u128::from(uw);
        self.busy_ns += u128::from(ns) * u128::from(self.others_mcpu) / 1000;
        self.now_ns += ns;
        self.total_fj += fj;
        fj
    }
}

/// A value, or one per attempt.
#[derive(Debug, Clone, PartialEq)]
struct PerAttempt<T>(Vec<T>);

impl<T: Copy> PerAttempt<T> {
    fn at(&self, attempt: usize) -> T {
        self.0[attempt.min(self.0.len() - 1)]
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Sleep(PerAttempt<u64>),
    Spin(PerAttempt<u64>, PerAttempt<u64>),
    Idle(PerAttempt<u64>),
    Exit(PerAttempt<i32>),
    Kill(PerAttempt<i32>),
    Draw(PathBuf, PerAttempt<u64>),
    Others(PerAttempt<u64>),
}

/// A step, and the file content it waits for when guarded.
#[derive(Debug, Clone, PartialEq)]
struct Guarded {
    guard: Option<(PathBuf, String)>,
    step: Step,
}

impl Default for MockMachine {
    fn default() -> Self {
        Self::new()
    }
}

impl MockMachine {
    /// A machine at 0 W idle, its clock at its origin.
    pub fn new() -> MockMachine {
        MockMachine {
            origin: Instant::now(),
            state: Mutex::new(State::default()),
        }
    }

    /// A machine whose meter is the fixture's (see [`crate::mock_meter`]), its clock at
    /// its origin: the source's first background read comes one interval later.
    pub(crate) fn reading(fixture: FixtureMeter) -> MockMachine {
        MockMachine {
            origin: Instant::now(),
            state: Mutex::new(State {
                fixture: Some(fixture),
                ..State::default()
            }),
        }
    }

    /// The energy drawn since the start, in joules: the total, and the part drawn spinning.
    pub fn joules(&self) -> [f64; 2] {
        let s = self.lock();
        [s.total_fj, s.spin_fj].map(|fj| fj as f64 / 1e15)
    }

    /// The meter's reading now: the fixture source's joules per domain, or the mock's own
    /// two ([`MockMachine::joules`]).
    pub fn read_meter(&self) -> Result<Vec<f64>, SysError> {
        let mut s = self.lock();
        let now_ns = s.now_ns;
        match &mut s.fixture {
            Some(fixture) => fixture.read(self.origin, now_ns),
            None => Ok([s.total_fj, s.spin_fj].map(|fj| fj as f64 / 1e15).to_vec()),
        }
    }

    /// The mock's `/proc/stat`: busy and idle CPU-seconds of its [`MOCK_CPUS`] CPUs since
    /// its clock started, exactly as scripted.
    pub fn cpu_times(&self) -> powerlens_sys::procfs::CpuTimes {
        let s = self.lock();
        let capacity_ns = u128::from(s.now_ns) * u128::from(MOCK_CPUS);
        powerlens_sys::procfs::CpuTimes {
            busy_s: s.busy_ns as f64 / 1e9,
            idle_s: capacity_ns.saturating_sub(s.busy_ns) as f64 / 1e9,
            cpus: MOCK_CPUS,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Executor for MockMachine {
    fn run(
        &self,
        argv: &[String],
        _show_output: bool,
        _cpus: Option<&[u32]>,
    ) -> Result<Outcome, RecordError> {
        let words = command_words(argv);
        let refused = |reason| RecordError::MockCommand {
            command: words.join(" "),
            reason,
        };
        let steps = parse(&words).map_err(refused)?;
        let mut s = self.lock();
        let attempt = {
            let count = s.attempts.entry(argv.to_vec()).or_insert(0);
            *count += 1;
            *count - 1
        };
        let (start_ns, mut cpu_ns) = (s.now_ns, 0u64);
        let mut exit = ExitStatus {
            code: Some(0),
            signal: None,
        };
        for Guarded { guard, step } in &steps {
            if let Some((path, text)) = guard {
                let holds = std::fs::read_to_string(path).is_ok_and(|t| t.trim() == text);
                if !holds {
                    continue;
                }
            }
            let own_power = match step {
                Step::Spin(_, watts) | Step::Idle(watts) => watts.at(attempt),
                _ => 0,
            };
            if own_power > 0 && s.fixture.is_some() {
                return Err(refused(
                    "the mock reads the fixture's meter here, whose files only `draw DIR WATTSW` steps drive: give the power with `draw`, and spin at 0W".into(),
                ));
            }
            match step {
                Step::Sleep(secs) => {
                    let idle = s.idle_uw;
                    s.advance(self.origin, secs.at(attempt), idle);
                }
                Step::Spin(secs, watts) => {
                    let ns = secs.at(attempt);
                    let fj = s.advance(self.origin, ns, watts.at(attempt));
                    s.spin_fj += fj;
                    s.busy_ns += u128::from(ns);
                    cpu_ns += ns;
                }
                Step::Idle(watts) => s.idle_uw = watts.at(attempt),
                Step::Others(mcpu) => s.others_mcpu = mcpu.at(attempt),
                Step::Draw(dir, watts) => {
                    let uw = watts.at(attempt);
                    let fixture = s.fixture.as_mut().ok_or_else(|| {
                        refused(format!(
                            "draw {}: there is no fixture meter to draw on (a sysfs root other than /sys, holding a meter)",
                            dir.display()
                        ))
                    })?;
                    fixture.draw(dir, uw).map_err(refused)?;
                }
                Step::Exit(code) => {
                    exit.code = Some(code.at(attempt));
                    break;
                }
                Step::Kill(signal) => {
                    exit = ExitStatus {
                        code: None,
                        signal: Some(signal.at(attempt)),
                    };
                    break;
                }
            }
        }
        Ok(Outcome {
            wall: Duration::from_nanos(s.now_ns - start_ns),
            cpu_s: Duration::from_nanos(cpu_ns).as_secs_f64(),
            exit,
        })
    }

    fn run_shell(&self, line: &str, show_output: bool) -> Result<ExitStatus, RecordError> {
        let argv = ["sh".to_string(), "-c".to_string(), line.to_string()];
        Ok(self.run(&argv, show_output, None)?.exit)
    }

    fn now(&self) -> Instant {
        self.origin + Duration::from_nanos(self.lock().now_ns)
    }

    /// The clock moves on at once, at the idle power; a real interrupt still ends the wait.
    fn sleep(&self, duration: Duration) -> bool {
        let mut s = self.lock();
        let idle = s.idle_uw;
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        s.advance(self.origin, ns, idle);
        !interrupt::interrupted()
    }
}

/// The words of a command: the line of `sh -c LINE` (as `compare` runs each command), or
/// the argv itself.
fn command_words(argv: &[String]) -> Vec<String> {
    match argv {
        [sh, c, line, ..] if sh == "sh" && c == "-c" => line
            .replace(';', " ; ")
            .split_whitespace()
            .map(str::to_string)
            .collect(),
        _ => argv.to_vec(),
    }
}

/// The steps of a command, or why it is not one the mock runs.
fn parse(words: &[String]) -> Result<Vec<Guarded>, String> {
    let mut steps = Vec::new();
    for step in words.split(|w| w == ";").filter(|s| !s.is_empty()) {
        let (guard, step) = match step[0].strip_prefix('[').and_then(|g| g.strip_suffix(']')) {
            Some(g) => {
                let (path, text) = g
                    .split_once('=')
                    .ok_or_else(|| format!("guard {:?}: expected [PATH=TEXT]", step[0]))?;
                (Some((PathBuf::from(path), text.to_string())), &step[1..])
            }
            None => (None, step),
        };
        steps.push(Guarded {
            guard,
            step: parse_step(step)?,
        });
    }
    Ok(steps)
}

fn parse_step(words: &[String]) -> Result<Step, String> {
    let args: Vec<&str> = words.iter().skip(1).map(String::as_str).collect();
    let verb = words.first().map(String::as_str).unwrap_or_default();
    let step = match (verb, args.as_slice()) {
        ("sleep", [secs]) => Step::Sleep(seconds(secs)?),
        ("spin", [secs, watts]) => Step::Spin(seconds(secs)?, power(watts)?),
        ("idle", [watts]) => Step::Idle(power(watts)?),
        ("exit", [code]) => Step::Exit(list(code, |c| c.parse().ok(), "an exit code")?),
        ("kill", [signal]) => Step::Kill(list(signal, |c| c.parse().ok(), "a signal number")?),
        ("draw", [dir, watts]) => Step::Draw(PathBuf::from(dir), power(watts)?),
        ("others", [cpus]) => Step::Others(list(
            cpus,
            |v| fixed_point(v, 3).filter(|m| *m <= u64::from(MOCK_CPUS) * 1000),
            "a number of CPUs from 0 to 2, at most 3 decimals",
        )?),
        ("true", []) => Step::Exit(PerAttempt(vec![0])),
        ("false", []) => Step::Exit(PerAttempt(vec![1])),
        _ => {
            return Err(format!(
                "{:?} is not a step of the mock executor (`sleep SECS`, `spin SECS WATTSW`, `idle WATTSW`, `exit CODE`, `kill SIGNAL`, `true`, `false`, `draw DIR WATTSW`, `others CPUS`, separated by `;`)",
                words.join(" ")
            ))
        }
    };
    Ok(step)
}

/// Seconds, as whole nanoseconds: `0.6`, `0.6s`, `1,0.5`.
fn seconds(text: &str) -> Result<PerAttempt<u64>, String> {
    list(
        text,
        |v| fixed_point(v.strip_suffix('s').unwrap_or(v), 9),
        "seconds",
    )
}

/// Watts, as whole microwatts: `30W`, `12.5W,15W`.
fn power(text: &str) -> Result<PerAttempt<u64>, String> {
    list(
        text,
        |v| fixed_point(v.strip_suffix('W')?, 6),
        "watts (e.g. 30W)",
    )
}

fn list<T>(
    text: &str,
    value: impl Fn(&str) -> Option<T>,
    what: &str,
) -> Result<PerAttempt<T>, String> {
    text.split(',')
        .map(|v| value(v).ok_or_else(|| format!("{v:?} in {text:?} is not {what}")))
        .collect::<Result<Vec<T>, String>>()
        .map(PerAttempt)
}

/// A non-negative decimal with at most `decimals` places, as a whole number of
/// 10^-decimals: exactly, with no binary rounding on the way.
fn fixed_point(text: &str, decimals: u32) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty()
        || !digits(whole)
        || !digits(fraction)
        || fraction.len() > decimals as usize
    {
        return None;
    }
    let scale = 10u64.pow(decimals);
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let fraction: u64 = format!("{fraction:0<width$}", width = decimals as usize)
        .parse()
        .ok()?;
    whole.checked_mul(scale)?.checked_add(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), line.into()]
    }

    /// Runs `argv` on `m`, with the options the mock ignores.
    fn run(m: &MockMachine, argv: &[String]) -> Result<Outcome, RecordError> {
        m.run(argv, false, None)
    }

    #[test]
    fn fixed_point_is_exact_and_refuses_what_it_cannot_hold() {
        assert_eq!(fixed_point("0.6", 9), Some(600_000_000));
        assert_eq!(fixed_point("2", 9), Some(2_000_000_000));
        assert_eq!(fixed_point(".25", 6), Some(250_000));
        for bad in ["", ".", "-1", "1e3", "0.1234567", "x"] {
            assert_eq!(fixed_point(bad, 6), None, "{bad:?}");
        }
    }

    #[test]
    fn steps_move_the_clock_and_the_meter_by_exactly_their_figures() {
        let m = MockMachine::new();
        let t0 = m.now();
        assert!(run(&m, &argv("idle 5W")).is_ok_and(|o| o.wall.is_zero()));
        let o = run(&m, &argv("spin 0.3 30W; sleep 0.2")).unwrap();
        assert_eq!(o.wall, Duration::from_millis(500));
        assert_eq!(o.cpu_s, 0.3);
        assert!(o.exit.success());
        // 30 W × 0.3 s + 5 W × 0.2 s = 10 J, of which 9 J spinning.
        assert_eq!(m.joules(), [10.0, 9.0]);
        assert!(m.sleep(Duration::from_secs(2)));
        assert_eq!(m.joules(), [20.0, 9.0]);
        assert_eq!(m.now() - t0, Duration::from_millis(2500));
    }

    #[test]
    fn lists_give_one_value_per_attempt_of_each_line_then_the_last() {
        let m = MockMachine::new();
        let walls: Vec<Duration> = (0..4)
            .map(|_| run(&m, &argv("sleep 1,2")).unwrap().wall)
            .collect();
        assert_eq!(walls, [1, 2, 2, 2].map(Duration::from_secs));
        // Another line keeps its own count.
        assert_eq!(
            run(&m, &argv("sleep 3,4")).unwrap().wall,
            Duration::from_secs(3)
        );
        let exits: Vec<ExitStatus> = (0..3)
            .map(|_| run(&m, &argv("sleep 1; exit 0,3; sleep 5")).unwrap().exit)
            .collect();
        assert_eq!(exits[0].code, Some(0));
        assert_eq!(exits[1].code, Some(3));
        let killed = run(&m, &argv("kill 9")).unwrap().exit;
        assert_eq!((killed.code, killed.signal), (None, Some(9)));
        // An argv, as `run` gives it, is a line too.
        let words = ["sleep".to_string(), "0.25".to_string()];
        assert_eq!(run(&m, &words).unwrap().wall, Duration::from_millis(250));
    }

    #[test]
    fn a_guarded_step_runs_only_when_its_file_holds_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("governor");
        std::fs::write(&file, "powersave\n").unwrap();
        let line = format!(
            "[{0}=powersave] sleep 2; [{0}=performance] sleep 1",
            file.display()
        );
        let m = MockMachine::new();
        assert_eq!(run(&m, &argv(&line)).unwrap().wall, Duration::from_secs(2));
        std::fs::write(&file, "performance\n").unwrap();
        assert_eq!(run(&m, &argv(&line)).unwrap().wall, Duration::from_secs(1));
    }

    #[test]
    fn what_the_mock_cannot_run_is_an_error_that_lists_its_steps() {
        let m = MockMachine::new();
        for (line, expected) in [
            (
                "make -j4",
                "\"make -j4\" is not a step of the mock executor",
            ),
            ("spin 0.5 30", "\"30\" in \"30\" is not watts"),
            ("sleep -1", "is not seconds"),
            ("[nofile] sleep 1", "expected [PATH=TEXT]"),
        ] {
            let err = run(&m, &argv(line)).unwrap_err().to_string();
            assert!(err.contains(expected), "{line}: {err}");
            assert!(err.contains(line), "{line}: {err}");
        }
    }
}
