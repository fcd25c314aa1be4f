//! The instrument's own cost: what one traced event costs the thread that hits it.
//!
//! Tracepoint handlers, stack copies and CPU-clock samples run in the context of the thread
//! that hits them, so their CPU time lands in that thread's CPU time and energy. Before a
//! recording starts, each kind of event is measured on this machine, with the collector
//! as the recording opened it (same stack sizes, same rings): a small load runs bare and
//! then with that kind alone enabled, and the difference in the load's own CPU time
//! (CLOCK_THREAD_CPUTIME_ID) divided by the events recorded in its threads is the cost of
//! one event. The analysis multiplies these costs by the events recorded in each thread's
//! context (`tracing_cpu_s`).
//!
//! The loads, each a few milliseconds, pinned to the CPU the recorder runs on:
//! - a ping-pong of two threads on one CPU over pipes (switches, wake-ups, runtime
//!   updates);
//! - a thread re-arming a timerfd far in the future (hrtimer_start, no sleep);
//! - a thread spinning (cpu-clock samples).
//!
//! Tracepoints with no load of their own (IRQ, idle, migration, process events) are plain
//! records like `sched_stat_runtime` and are costed as one.
//!
//! What this measures is each event's direct cost. The indirect costs (caches the handlers
//! evict, the drainer's wake-ups, wake-ups that cross CPUs through the idle loop) are not
//! in it: on an unpinned ping-pong here the estimate was about half of the CPU time that
//! recording added (docs/RECORD.md, "The cost of tracing").

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use powerlens_core::sched::tracing_cost::{
    EventCosts, StackedKind, CPU_SAMPLE, OTHER as PLAIN, SWITCH, TIMER_ARM, WAKING,
};
use powerlens_sys::thread::{cpu_time_ns, current_cpu, pin_to_cpu};
use powerlens_sys::trace::{Collected, Collector, CPU_CLOCK_EVENT};

/// The calling thread's CPU time; 0 where the clock cannot be read (never on Linux), which
/// only spoils this calibration, not the recording.
fn thread_cpu_ns() -> u64 {
    cpu_time_ns().unwrap_or(0)
}

/// Pins the calling thread to `cpu`, so that a ping-pong's switches are between its own
/// threads and never through the idle task. A refusal leaves the load unpinned, which
/// only makes its figure noisier.
fn pin(cpu: u32) {
    let _ = pin_to_cpu(cpu as usize);
}

/// Rounds of each kind's load, bare and traced alternately; the fastest of each are
/// compared (other processes and the hypervisor only ever add CPU time to a round), so
/// that one disturbed round does not set the figure.
const ROUNDS: usize = 3;
/// Round trips of the ping-pong load per round.
const PINGPONG_ROUND_TRIPS: u32 = 600;
/// Timer re-arms per round.
const TIMER_ARMS: u32 = 1500;
/// CPU time the spinning load runs for per round: at the default 999 Hz, about 30 samples.
const SPIN_NS: u64 = 30_000_000;

/// Measures the cost of each kind of event the collector records. The collector must be
/// open and disabled; it is left disabled, its rings drained of the loads' records.
/// `stacks`: whether it was opened with call stacks.
pub fn calibrate(collector: &mut Collector, stacks: bool) -> EventCosts {
    let started = Instant::now();
    // The loads run where the recorder does.
    let cpu = current_cpu().unwrap_or(0);
    let mut costs = EventCosts {
        stacks,
        ..Default::default()
    };
    let names: Vec<String> = collector.events().iter().map(|e| e.full_name()).collect();
    let has = |n: &str| names.iter().any(|x| x == n);
    // Each stacked kind is measured on the first of its tracepoints the collector has.
    let stacked = STACKED_KINDS.iter().filter_map(|&(kind, events)| {
        let event = *events.iter().find(|e| has(e))?;
        let kind = kind.key();
        let load: LoadFn = if kind == TIMER_ARM {
            &timer_arms
        } else {
            &pingpong
        };
        Some((kind, event, load))
    });
    let mut kinds: Vec<(&str, &str, LoadFn)> = vec![(PLAIN, "sched/sched_stat_runtime", &pingpong)];
    kinds.retain(|(_, event, _)| has(event));
    kinds.extend(stacked);
    if collector.has_cpu_clock() {
        kinds.push((CPU_SAMPLE, CPU_CLOCK_EVENT, &spin));
    }
    // With sampled stacks, each kind is measured without its stack (its twin counts and
    // never samples) and then with a stack on every event: the report charges the
    // difference to each event that carried a stack.
    let sampled = collector
        .set_stack_sample_period(NO_STACKS)
        .unwrap_or(false);
    for &(kind, event, load) in &kinds {
        measure_into(&mut costs, collector, kind, event, cpu, load);
    }
    if sampled {
        let _ = collector.set_stack_sample_period(1);
        for &(kind, event, load) in &kinds {
            let Some(&without) = costs.event_cost_ns.get(kind) else {
                continue;
            };
            if !STACKED_KINDS.iter().any(|&(k, _)| k.key() == kind) {
                continue;
            }
            match measure_kind(collector, event, cpu, load) {
                Ok((with, _)) => {
                    costs
                        .stack_cost_ns
                        .insert(kind.to_string(), (with - without).max(0.0));
                }
                Err(why) => {
                    // The estimate then leaves this kind's stacks out: said where its
                    // figure is.
                    let method = costs.method.entry(kind.to_string()).or_default();
                    method.push_str(&format!(
                        "; the cost of its stack not measured ({why}): its sampled stacks are left out"
                    ));
                }
            }
        }
    }
    // A kind whose load could not run is costed as the nearest kind that was measured.
    for (kind, like) in [(TIMER_ARM, WAKING), (WAKING, SWITCH), (PLAIN, SWITCH)] {
        if !costs.event_cost_ns.contains_key(kind) {
            if let Some(&ns) = costs.event_cost_ns.get(like) {
                costs.event_cost_ns.insert(kind.to_string(), ns);
                let why = costs.method.remove(kind).unwrap_or_default();
                costs
                    .method
                    .insert(kind.to_string(), format!("as {like} ({why})"));
            }
            if let Some(&ns) = costs.stack_cost_ns.get(like) {
                costs.stack_cost_ns.insert(kind.to_string(), ns);
            }
        }
    }
    costs.calibration_s = started.elapsed().as_secs_f64();
    costs
}

/// The kinds whose stacks may be sampled (and then cost apart, `stack_cost_ns`), and
/// their tracepoints: the first one a recording has is the one measured.
const STACKED_KINDS: [(StackedKind, &[&str]); 3] = [
    (StackedKind::Switch, &["sched/sched_switch"]),
    (
        StackedKind::Waking,
        &["sched/sched_waking", "sched/sched_wakeup"],
    ),
    (
        StackedKind::TimerArm,
        &["timer/hrtimer_start", "timer/timer_start"],
    ),
];

/// A calibration load: runs one round pinned to a CPU.
type LoadFn<'a> = &'a dyn Fn(u32) -> Load;

/// A stack-sample period that never samples within a calibration's loads.
const NO_STACKS: u64 = 1 << 40;

/// Measures `kind` (`event` alone on `load`) into `costs`, or says why not.
fn measure_into(
    costs: &mut EventCosts,
    collector: &mut Collector,
    kind: &str,
    event: &str,
    cpu: u32,
    load: &dyn Fn(u32) -> Load,
) {
    match measure_kind(collector, event, cpu, load) {
        Ok((ns, count)) => {
            costs.event_cost_ns.insert(kind.to_string(), ns);
            costs.method.insert(
                kind.to_string(),
                format!("measured: {event} alone on its load, {count} events"),
            );
        }
        Err(why) => {
            costs
                .method
                .insert(kind.to_string(), format!("not measured: {why}"));
        }
    }
}

/// What one round of a load did: the CPU time its threads used and their tids.
struct Load {
    cpu_ns: u64,
    tids: Vec<u32>,
}

/// The cost of one `event` and how many the traced rounds recorded: the fastest traced
/// round's CPU time minus the fastest bare round's, over the median count.
fn measure_kind(
    collector: &mut Collector,
    event: &str,
    cpu: u32,
    load: &dyn Fn(u32) -> Load,
) -> Result<(f64, u64), String> {
    let mut bare = Vec::new();
    let mut traced = Vec::new();
    let mut counts = Vec::new();
    for _ in 0..ROUNDS {
        bare.push(load(cpu).cpu_ns);
        if collector.enable_only(&[event]).map_err(|e| e.to_string())? == 0 {
            return Err(format!("{event} is not recorded"));
        }
        let run = load(cpu);
        collector.disable().map_err(|e| e.to_string())?;
        let mut n = 0u64;
        collector.drain_all(|c| {
            let tid = match &c {
                Collected::Trace(r) if r.format.full_name() == event => r.tid,
                Collected::CpuSample(s) if event == CPU_CLOCK_EVENT => s.tid,
                _ => return,
            };
            if run.tids.contains(&tid) {
                n += 1;
            }
        });
        traced.push(run.cpu_ns);
        counts.push(n);
    }
    let count = median(&mut counts.iter().map(|&c| c as f64).collect::<Vec<_>>());
    if count < 1.0 {
        return Err(format!("the load recorded no {event} events"));
    }
    let fastest = |v: &[u64]| v.iter().copied().min().unwrap_or(0) as f64;
    let extra = fastest(&traced) - fastest(&bare);
    // A cost below zero is noise, not a measurement: the event's cost is below what this
    // load can resolve.
    Ok((extra.max(0.0) / count, count as u64))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Two threads on one CPU passing a byte back and forth over two pipes: every round trip
/// is two blocking switches, two wake-ups and their runtime updates, all in the load's
/// threads.
fn pingpong(cpu: u32) -> Load {
    let (a_read, a_write) = pipe();
    let (b_read, b_write) = pipe();
    // Both sides on threads of their own (pinning the recorder's thread would pin the
    // command it starts next), both on one CPU: across two CPUs the load's own CPU time
    // varied by several times from round to round on this project's VMs, more than the
    // events cost.
    let partner = std::thread::spawn(move || player(cpu, a_read, b_write, false));
    let own = std::thread::spawn(move || player(cpu, b_read, a_write, true));
    let (ours, own_tid) = own.join().expect("the ping-pong thread panicked");
    let (theirs, partner_tid) = partner.join().expect("the ping-pong partner panicked");
    Load {
        cpu_ns: ours + theirs,
        tids: vec![own_tid, partner_tid],
    }
}

/// One side of the ping-pong, pinned to `cpu`: writes then reads (`serves`) or reads then
/// writes, [`PINGPONG_ROUND_TRIPS`] times; its CPU time and tid.
fn player(cpu: u32, read: OwnedFd, write: OwnedFd, serves: bool) -> (u64, u32) {
    pin(cpu);
    let start = thread_cpu_ns();
    for _ in 0..PINGPONG_ROUND_TRIPS {
        if serves {
            write_byte(&write);
            read_byte(&read);
        } else {
            read_byte(&read);
            write_byte(&write);
        }
    }
    (thread_cpu_ns() - start, gettid())
}

/// A thread re-arming a timer an hour away: each `timerfd_settime` starts an hrtimer in
/// the thread's context, and nothing ever sleeps or expires.
fn timer_arms(cpu: u32) -> Load {
    std::thread::spawn(move || {
        pin(cpu);
        // SAFETY: timerfd_create has no memory preconditions; the fd is owned below.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Load {
                cpu_ns: 0,
                tids: Vec::new(),
            };
        }
        // SAFETY: fd is a new descriptor owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let later = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: 3600,
                tv_nsec: 0,
            },
        };
        let start = thread_cpu_ns();
        for _ in 0..TIMER_ARMS {
            // SAFETY: valid fd and itimerspec; the old value is not asked for.
            unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &later, std::ptr::null_mut()) };
        }
        Load {
            cpu_ns: thread_cpu_ns() - start,
            tids: vec![gettid()],
        }
    })
    .join()
    .expect("the timer load panicked")
}

/// A thread spinning for a fixed amount of work (as much as [`SPIN_NS`] of CPU time bare).
fn spin(cpu: u32) -> Load {
    std::thread::spawn(move || {
        pin(cpu);
        let start = thread_cpu_ns();
        spin_for(spin_iterations());
        Load {
            cpu_ns: thread_cpu_ns() - start,
            tids: vec![gettid()],
        }
    })
    .join()
    .expect("the spinning load panicked")
}

/// The spinning load's work: `iterations` steps of a generator the compiler cannot skip.
fn spin_for(iterations: u64) {
    let mut x = 0u64;
    for i in 0..iterations {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// Iterations of the spin loop that take about [`SPIN_NS`] here, found once.
fn spin_iterations() -> u64 {
    static ITERATIONS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ITERATIONS.get_or_init(|| {
        let probe = 1_000_000u64;
        let start = thread_cpu_ns();
        spin_for(probe);
        let took = (thread_cpu_ns() - start).max(1);
        probe * SPIN_NS / took
    })
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array, which are owned below.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn read_byte(fd: &OwnedFd) {
    let mut b = [0u8; 1];
    // SAFETY: reads one byte into a local buffer.
    unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
}

fn write_byte(fd: &OwnedFd) {
    // SAFETY: writes one byte from a local buffer.
    unsafe { libc::write(fd.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_takes_the_middle() {
        assert_eq!(super::median(&mut [3.0, 1.0, 2.0]), 2.0);
    }
}
