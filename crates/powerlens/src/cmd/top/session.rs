//! The measuring side of `top`: the live session closed interval by interval through the
//! monitor (the attribution the agent uses) into snapshots — on the caller's thread for
//! `--once`, or on a thread of its own for the live view, which sends each snapshot over a
//! channel so that keys are answered while an interval is measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use powerlens_core::monitor::{interval_residency, IdleStateTime, Monitor, MonitorConfig};
use powerlens_record::interrupt;
use powerlens_record::live::{LiveInterval, LiveOptions, LiveSession, Mode, Tracing};
use powerlens_sys::Roots;

use super::snapshot::{per_second, process_rows, Snapshot};
use super::view::SessionHeader;

/// A live session and what turns its intervals into snapshots.
pub struct Measurer {
    session: LiveSession,
    monitor: Monitor,
    /// The cpuidle counters at the start of the interval being measured.
    idle_before: Vec<IdleStateTime>,
    intervals: u64,
    wakeups_unavailable: Option<String>,
    wakeups_fix: Option<String>,
    /// Trace records lost up to the end of the previous interval.
    lost_before: u64,
    header: SessionHeader,
}

impl Measurer {
    pub fn start(roots: &Roots, options: &LiveOptions) -> anyhow::Result<Measurer> {
        let session = LiveSession::start(roots, options)?;
        let wakeups_unavailable = match session.mode() {
            // Top traces throughout; a session in windows still has (estimated) wake-ups.
            Mode::Trace | Mode::Windows { .. } => None,
            Mode::Reduced { reason } => Some(reason.clone()),
        };
        // Asked for, the reduced mode is no failure to fix with privileges.
        let wakeups_fix = wakeups_unavailable.as_ref().map(|_| {
            if options.tracing == Tracing::Off {
                "leave out --reduced to trace them (root or CAP_PERFMON)".to_string()
            } else {
                "run as root or with CAP_PERFMON for them".to_string()
            }
        });
        let header = SessionHeader {
            interval: options.interval,
            energy: session.describe_energy(),
        };
        Ok(Measurer {
            idle_before: session.idle_states(),
            session,
            // Only the interval report is shown: no process needs a series of its own.
            monitor: Monitor::new(MonitorConfig {
                top: 0,
                ..MonitorConfig::default()
            }),
            intervals: 0,
            wakeups_unavailable,
            wakeups_fix,
            lost_before: 0,
            header,
        })
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The next interval, when it ends; `None` when `stop` said so first.
    pub fn next(&mut self, stop: &dyn Fn() -> bool) -> anyhow::Result<Option<Snapshot>> {
        let Some(interval) = self.session.next_interval(stop)? else {
            return Ok(None);
        };
        crate::allocator::give_back_freed_memory();
        let LiveInterval {
            input,
            energy,
            lost_records,
            idle_states,
            notes,
        } = interval;
        let report = self.monitor.close_interval(input);
        let cpus = interval_residency(&self.idle_before, &idle_states, report.elapsed_s);
        self.idle_before = idle_states;
        self.intervals += 1;
        let traced = self.wakeups_unavailable.is_none();
        let per_s = |j: f64| per_second(j, report.elapsed_s);
        let lost_now = lost_records.saturating_sub(self.lost_before);
        self.lost_before = lost_records;
        Ok(Some(Snapshot {
            interval: self.intervals,
            elapsed_s: report.elapsed_s,
            node_power_w: per_s(report.node_j),
            idle_power_w: per_s(report.idle_j),
            energy,
            wakeups_unavailable: self.wakeups_unavailable.clone(),
            wakeups_fix: self.wakeups_fix.clone(),
            lost_records: traced.then_some(lost_records),
            lost_records_per_s: traced.then(|| per_s(lost_now as f64)),
            processes: process_rows(&report, traced),
            cpus_unavailable: cpus.is_empty().then(|| NO_CPUIDLE.to_string()),
            cpus,
            notes,
        }))
    }
}

/// Why a snapshot has no per-CPU residency.
pub const NO_CPUIDLE: &str =
    "no cpuidle states in sysfs: this kernel has no cpuidle driver for these CPUs";

/// What the measuring thread sends.
pub enum Message {
    Interval(Box<Snapshot>),
    /// The session failed (its error, one line); the thread has ended.
    Failed(String),
}

/// The measuring thread, started: its session's header and its snapshots.
pub struct Running {
    pub header: SessionHeader,
    pub snapshots: Receiver<Message>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    /// Starts the session on a thread of its own; its errors at the start are returned.
    pub fn spawn(roots: Roots, options: LiveOptions) -> anyhow::Result<Running> {
        let (started_tx, started_rx) = mpsc::channel();
        let (tx, snapshots) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("top-session".into())
            .spawn(move || {
                let mut measurer = match Measurer::start(&roots, &options) {
                    Ok(m) => m,
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        return;
                    }
                };
                if started_tx.send(Ok(measurer.header().clone())).is_err() {
                    return;
                }
                let stop = || stopped.load(Ordering::SeqCst) || interrupt::interrupted();
                loop {
                    let message = match measurer.next(&stop) {
                        Ok(Some(s)) => Message::Interval(Box::new(s)),
                        Ok(None) => return,
                        Err(e) => Message::Failed(format!("{e:#}")),
                    };
                    let failed = matches!(message, Message::Failed(_));
                    if tx.send(message).is_err() || failed {
                        return;
                    }
                }
            })
            .context("starting the measuring thread")?;
        let header = match started_rx.recv() {
            Ok(Ok(header)) => header,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => anyhow::bail!("the measuring thread stopped while starting the session"),
        };
        Ok(Running {
            header,
            snapshots,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Running {
    /// Stops the session (within its 50 ms stop check) and waits for its thread, which
    /// closes the tracepoints.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
