//! Running the measured command: exec directly (no shell), wait with wait4 to get the
//! command's own resource usage, and turn spawn failures into errors that name the fix.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use powerlens_core::run::ExitStatus;

use crate::error::RecordError;
use crate::interrupt;

/// What runs the measured commands and keeps the clock they are timed by: this machine
/// ([`System`]), or the mock ([`crate::mock::MockMachine`]) whose runs are scripted. A
/// meter comes with its executor ([`crate::meter::Meter::executor`]), so that a mock
/// reading never times a real process, nor a real meter a scripted one.
pub trait Executor {
    /// Runs `argv` to completion (see [`run`]).
    fn run(
        &self,
        argv: &[String],
        show_output: bool,
        cpus: Option<&[u32]>,
    ) -> Result<Outcome, RecordError>;
    /// Runs a shell command line (`--prepare`; see [`run_shell`]).
    fn run_shell(&self, line: &str, show_output: bool) -> Result<ExitStatus, RecordError>;
    /// The time now on this executor's clock.
    fn now(&self) -> Instant;
    /// Lets `duration` pass; false when an interrupt ([`interrupt`]) came first.
    fn sleep(&self, duration: Duration) -> bool;
}

/// This machine: commands are executed, times are the monotonic clock's.
pub struct System;

impl Executor for System {
    fn run(
        &self,
        argv: &[String],
        show_output: bool,
        cpus: Option<&[u32]>,
    ) -> Result<Outcome, RecordError> {
        run(argv, show_output, cpus, &[])
    }

    fn run_shell(&self, line: &str, show_output: bool) -> Result<ExitStatus, RecordError> {
        run_shell(line, show_output)
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, duration: Duration) -> bool {
        interrupt::sleep(duration)
    }
}

/// What one execution of the command took.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub wall: Duration,
    /// User + system CPU seconds of the command and its waited-for descendants.
    pub cpu_s: f64,
    pub exit: ExitStatus,
}

/// Runs `argv` to completion, with `env` set on top of powerlens's environment. Output
/// goes to /dev/null unless `show_output`; `cpus` restricts the command (not powerlens) to
/// those CPUs. An interrupt while it runs is passed on to it
/// ([`wait_forwarding_interrupt`]).
pub fn run(
    argv: &[String],
    show_output: bool,
    cpus: Option<&[u32]>,
    env: &[(String, String)],
) -> Result<Outcome, RecordError> {
    let (program, args) = argv.split_first().ok_or(RecordError::NoCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    if let Some(cpus) = cpus {
        powerlens_sys::settings::restrict_command_to(&mut cmd, cpus)?;
    }
    if !show_output {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
    }
    let start = Instant::now();
    let child = cmd.spawn().map_err(|e| spawn_error(program, e))?;
    let (exit, cpu_s) = wait_forwarding_interrupt(child.id())?;
    Ok(Outcome {
        wall: start.elapsed(),
        cpu_s,
        exit,
    })
}

/// Starts `argv` and returns its pid without waiting; the caller polls [`try_wait`]. Its
/// output goes where powerlens's goes unless hidden. The command inherits Ctrl-C and
/// powerlens's environment, with `env` set on top.
pub fn spawn(
    argv: &[String],
    show_output: bool,
    env: &[(String, String)],
) -> Result<u32, RecordError> {
    let (program, args) = argv.split_first().ok_or(RecordError::NoCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    if !show_output {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    }
    let child = cmd.spawn().map_err(|e| spawn_error(program, e))?;
    Ok(child.id())
}

/// How a command started with [`spawn`] ended and the CPU time it used, or `None` while
/// it still runs.
pub fn try_wait(pid: u32) -> Result<Option<(ExitStatus, f64)>, RecordError> {
    wait4(pid as libc::pid_t, libc::WNOHANG)
}

/// Waits for a command to end: how it ended and the CPU time it used. It sleeps until the
/// command ends or a signal comes (a pidfd polled without a timeout: no periodic wake-up
/// beside the command); on Ctrl-C, SIGTERM or SIGHUP ([`interrupt`]) it sends the command
/// SIGINT, as a recording does (a signal sent to powerlens alone did not reach it), and
/// waits for it to end.
fn wait_forwarding_interrupt(pid: u32) -> Result<(ExitStatus, f64), RecordError> {
    if let Some(pidfd) = pidfd_open(pid) {
        let mut forwarded = false;
        sleep_until_exit(&pidfd, || {
            if interrupt::interrupted() && !forwarded {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
                forwarded = true;
            }
        });
    }
    // Without a pidfd (kernels before 5.3) this blocks in wait4 until the command ends.
    wait4(pid as libc::pid_t, 0)?.ok_or(RecordError::NoChild)
}

/// When a command started with [`spawn`] exited, on the monotonic clock, as a thread that
/// sleeps on its pidfd saw it: the recorder's loop notices the exit only at its next pass,
/// up to 50 ms late, which would be in the recorded run's wall time.
pub struct ExitWatch(Option<std::thread::JoinHandle<u64>>);

impl ExitWatch {
    /// Watches `pid`, which must be a child not yet waited for (so that its pid is not
    /// reused before the pidfd holds it). Without a pidfd (kernels before 5.3) nothing is
    /// watched.
    pub fn start(pid: u32) -> ExitWatch {
        let watcher = pidfd_open(pid).and_then(|pidfd| {
            std::thread::Builder::new()
                .name("powerlens-exit".into())
                .spawn(move || {
                    sleep_until_exit(&pidfd, || {});
                    powerlens_sys::trace::monotonic_now_ns()
                })
                .ok()
        });
        ExitWatch(watcher)
    }

    /// The time the command exited. Call it once the command has exited ([`try_wait`]
    /// said so): before that, it waits for the exit.
    pub fn exited_ns(self) -> Option<u64> {
        self.0?.join().ok()
    }
}

/// A pidfd for `pid`, or `None` where the kernel has none (before 5.3).
pub fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: pidfd_open returned a descriptor that nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether the process behind `pidfd` has exited (its pidfd reads ready), without waiting.
pub fn has_exited(pidfd: &OwnedFd) -> bool {
    powerlens_sys::nudge::readable(pidfd.as_fd(), Some(Duration::ZERO))
}

/// Sleeps until the process behind `pidfd` exits (its pidfd reads ready), calling
/// `on_signal` each time a signal wakes the sleep first; returns early only on an error
/// the poll cannot go on from.
fn sleep_until_exit(pidfd: &OwnedFd, mut on_signal: impl FnMut()) {
    loop {
        let mut ready = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; poll is never restarted after a signal handler.
        let r = unsafe { libc::poll(&mut ready, 1, -1) };
        if r > 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
        on_signal();
    }
}

/// Runs a shell command line (`--prepare`), output hidden unless `show_output`.
pub fn run_shell(line: &str, show_output: bool) -> Result<ExitStatus, RecordError> {
    Ok(run(
        &["sh".into(), "-c".into(), line.into()],
        show_output,
        None,
        &[],
    )?
    .exit)
}

fn spawn_error(program: &str, cause: std::io::Error) -> RecordError {
    let program = program.to_string();
    match cause.kind() {
        std::io::ErrorKind::NotFound => RecordError::CommandNotFound { program },
        std::io::ErrorKind::PermissionDenied => RecordError::CommandNotExecutable { program },
        _ => RecordError::CommandStart { program, cause },
    }
}

/// Waits for `pid` and returns how it ended and the CPU time it (and the descendants it
/// waited for) used, from the kernel's rusage for exactly this child.
fn wait4(pid: libc::pid_t, flags: libc::c_int) -> Result<Option<(ExitStatus, f64)>, RecordError> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; wait4 writes it and the status.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to local storage.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if r == pid {
            break;
        }
        if r == 0 {
            // WNOHANG and the child still runs.
            return Ok(None);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(RecordError::Wait { pid, cause: err });
        }
    }
    let exit = if libc::WIFEXITED(status) {
        ExitStatus {
            code: Some(libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else if libc::WIFSIGNALED(status) {
        ExitStatus {
            code: None,
            signal: Some(libc::WTERMSIG(status)),
        }
    } else {
        ExitStatus {
            code: None,
            signal: None,
        }
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Some((exit, secs(usage.ru_utime) + secs(usage.ru_stime))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn exit_codes_signals_and_cpu_time() {
        let ok = run(&argv(&["true"]), false, None, &[]).unwrap();
        assert!(ok.exit.success());
        let fail = run(&argv(&["sh", "-c", "exit 3"]), false, None, &[]).unwrap();
        assert_eq!(fail.exit.code, Some(3));
        let killed = run(&argv(&["sh", "-c", "kill -9 $$"]), false, None, &[]).unwrap();
        assert_eq!(killed.exit.signal, Some(9));
        // A fixed amount of shell arithmetic: CPU time is spent, whatever else loads the
        // machine, and it can never exceed the wall time of one thread.
        let busy = run(
            &argv(&[
                "sh",
                "-c",
                "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
            ]),
            false,
            None,
            &[],
        )
        .unwrap();
        assert!(
            busy.cpu_s > 0.02 && busy.cpu_s <= busy.wall.as_secs_f64() + 0.01,
            "{busy:?}"
        );
        let sleep = run(&argv(&["sleep", "0.2"]), false, None, &[]).unwrap();
        assert!(
            sleep.cpu_s < 0.05 && sleep.wall >= Duration::from_millis(200),
            "{sleep:?}"
        );
    }

    #[test]
    #[ignore = "live: the real scheduler's timing"]
    fn the_exit_watch_holds_when_the_command_exited_not_when_it_was_noticed() {
        let started = powerlens_sys::trace::monotonic_now_ns();
        let pid = spawn(&argv(&["sleep", "0.1"]), false, &[]).unwrap();
        let watch = ExitWatch::start(pid);
        // Noticed late on purpose: the loop that polls try_wait may be that late.
        std::thread::sleep(Duration::from_millis(600));
        let noticed = powerlens_sys::trace::monotonic_now_ns();
        let (exit, _) = try_wait(pid).unwrap().expect("sleep 0.1 has ended");
        assert!(exit.success());
        let exited = watch.exited_ns().expect("this kernel has pidfds (5.3+)");
        let wall_s = (exited - started) as f64 / 1e9;
        // At least the sleep, and well before it was noticed (0.6 s or more after the
        // start): 0.4 s of slack for a slow start on a loaded machine.
        assert!((0.1..0.5).contains(&wall_s), "{wall_s} s");
        assert!(exited < noticed);
    }

    #[test]
    fn the_environment_given_is_the_commands_on_top_of_powerlenss() {
        let env = [("POWERLENS_EXEC_TEST".to_string(), "set".to_string())];
        let check = argv(&[
            "sh",
            "-c",
            r#"test "$POWERLENS_EXEC_TEST" = set && test -n "$PATH""#,
        ]);
        assert!(run(&check, false, None, &env).unwrap().exit.success());
        assert!(!run(&check, false, None, &[]).unwrap().exit.success());
    }

    #[test]
    fn affinity_applies_to_the_command_only() {
        // The kernel's own view of the child's allowed CPUs is the oracle.
        let check = argv(&[
            "sh",
            "-c",
            "grep -Eq 'Cpus_allowed_list:[[:space:]]*0$' /proc/self/status",
        ]);
        assert!(run(&check, false, Some(&[0]), &[]).unwrap().exit.success());
        let ours = std::fs::read_to_string("/proc/self/status").unwrap();
        let allowed = ours
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .unwrap();
        if std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            > 1
        {
            assert!(
                !allowed.trim_end().ends_with(":\t0"),
                "powerlens itself stays unrestricted: {allowed}"
            );
            assert!(
                !run(&check, false, None, &[]).unwrap().exit.success(),
                "unrestricted child sees every CPU"
            );
        }
    }

    #[test]
    fn missing_command_names_the_fix() {
        let err = run(&argv(&["definitely-not-a-command-xyz"]), false, None, &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("command not found") && err.contains("PATH"),
            "{err}"
        );
    }
}
