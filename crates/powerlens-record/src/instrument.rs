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
//! - a thread spinning (cpu-clock samples), which reads the clock in a loop: each sample
//!   interrupts it, and the gap in its readings around the sample's time is what that
//!   sample cost it. A CPU-time difference, as for the tracepoints, would weigh a few
//!   samples' cost against the spin's own speed, which moves by more on a VM.
//!
//! Tracepoints with no load of their own (IRQ, idle, migration, process events) are plain
//! perf records like `sched_stat_runtime` and are costed as one (as a timer arming where
//! runtime records are collected in the kernel, and are no perf records).
//!
//! Collected in the kernel (BPF), a kind's programs are attached only for its traced runs,
//! so the bare runs pay nothing for them; the CPU-time updates, summed into the switch
//! records, are measured on top of the switches (the bare run collects switches alone);
//! and the kernel times each kind's program in a run of its own (BPF run-time statistics,
//! which cost too much to be on in the other runs). A kind costs at least its program's
//! run time per record: the program runs in the thread's context, and a CPU-time
//! difference that reads less (a wake-up's did, by half) is noise.
//!
//! What this measures is each event's direct cost. The indirect costs (caches the handlers
//! evict, the drainer's wake-ups, wake-ups that cross CPUs through the idle loop) are not
//! in it: on an unpinned ping-pong here the estimate was about half of the CPU time that
//! recording added (docs/RECORD.md, "The cost of tracing").

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use powerlens_core::sched::tracing_cost::{
    median_interval, EventCosts, StackedKind, CPU_SAMPLE, OTHER, RUNTIME, SWITCH, TIMER_ARM, WAKING,
};
use powerlens_sys::thread::{cpu_time_ns, current_cpu, pin_to_cpu};
use powerlens_sys::trace::in_kernel::Kind;
use powerlens_sys::trace::{monotonic_now_ns, Collected, Collector, CPU_CLOCK_EVENT};

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

/// Rounds of each kind's load, each a bare run and a traced run back to back (in turns
/// which goes first, so that a drift in the machine's speed cancels): each round gives
/// one cost per event, and the median round sets the figure. One disturbed run (another
/// process, the hypervisor) then moves one round, not the figure. The fastest bare run
/// against the fastest traced run of 3, as before, read from 0 to twice the median from one
/// calibration to the next on this project's VMs: a traced run's luck and a bare run's
/// luck do not cancel.
const ROUNDS: usize = 9;
/// Round trips of the ping-pong load per round.
const PINGPONG_ROUND_TRIPS: u32 = 600;
/// Timer re-arms per round.
const TIMER_ARMS: u32 = 1500;
/// How long the spinning load runs at a time: at the default 999 Hz, about 30 samples.
const SPIN_NS: u64 = 30_000_000;
/// Samples the spinning load waits for (it runs again while it has fewer, at a low
/// `--frequency`), and the longest it runs in all.
const SPIN_SAMPLES: usize = 25;
const SPIN_MAX_NS: u64 = 120_000_000;
/// A gap between two of the spinning load's clock readings shorter than this is the loop
/// itself (a reading takes tens of nanoseconds), not an interruption: no interrupt
/// returns so soon.
const GAP_MIN_NS: u64 = 300;

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
    let mut kinds: Vec<(&str, &str, LoadFn)> = vec![(RUNTIME, RUNTIME_EVENT, &pingpong)];
    kinds.retain(|(_, event, _)| has(event));
    kinds.extend(stacked);
    // Collected in the kernel with the switches, the CPU-time updates are summed into the
    // switch records: what they cost is measured on top of the switches (the bare run
    // collects switches alone), not as runtime records of their own, which a recording
    // writes only for a thread that does not switch.
    let in_kernel = collector.in_kernel_events();
    let runtime_baseline: &[&str] = if [RUNTIME_EVENT, SWITCH_EVENT]
        .iter()
        .all(|e| in_kernel.iter().any(|k| k == e))
    {
        &[SWITCH_EVENT]
    } else {
        &[]
    };
    let baseline = |event: &str| {
        if event == RUNTIME_EVENT {
            runtime_baseline
        } else {
            &[]
        }
    };
    // With sampled stacks, each kind is measured without its stack (its twin counts and
    // never samples) and then with a stack on every event: the report charges the
    // difference to each event that carried a stack.
    let sampled = collector
        .set_stack_sample_period(NO_STACKS)
        .unwrap_or(false);
    // Collected in the kernel: each kind's program run time per record, which a stack's
    // cost is floored at too.
    let mut programs = std::collections::BTreeMap::new();
    for &(kind, event, load) in &kinds {
        let base = baseline(event);
        if let Some(ns) = measure_into(&mut costs, collector, kind, event, base, cpu, load) {
            programs.insert(kind, ns);
        }
    }
    if collector.has_cpu_clock() {
        record_measure(
            &mut costs,
            CPU_SAMPLE,
            sample_cost(collector, cpu),
            "the median gap a sample left in a spinning thread's clock readings",
        );
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
            match measure_kind(collector, event, &[], cpu, load) {
                Ok(with) => {
                    // Collected in the kernel: at least what the stack added to the
                    // program's own run time.
                    let program = match (with.program_ns, programs.get(kind)) {
                        (Some(with), Some(&without)) => Some((with - without).max(0.0)),
                        _ => None,
                    };
                    let mut stack = (with.cost_ns - without).max(0.0);
                    if let Some(program) = program.filter(|&p| p > stack) {
                        let note = format!(
                            "; its stack's cost raised from {stack:.0} ns to what the stack added to its BPF program's run time, {program:.0} ns"
                        );
                        costs
                            .method
                            .entry(kind.to_string())
                            .or_default()
                            .push_str(&note);
                        stack = program;
                    }
                    costs.stack_cost_ns.insert(kind.to_string(), stack);
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
    // The other records have no load of their own: they are plain perf records, as a
    // runtime record is through perf; collected in the kernel, a runtime record is not,
    // and a timer arming is the nearest.
    let plain = if in_kernel.iter().any(|e| e == RUNTIME_EVENT) {
        TIMER_ARM
    } else {
        RUNTIME
    };
    for (kind, like) in [
        (TIMER_ARM, WAKING),
        (WAKING, SWITCH),
        (RUNTIME, SWITCH),
        (OTHER, plain),
        (OTHER, SWITCH),
    ] {
        if !costs.event_cost_ns.contains_key(kind) {
            if let Some(&ns) = costs.event_cost_ns.get(like) {
                costs.event_cost_ns.insert(kind.to_string(), ns);
                let why = match costs.method.remove(kind) {
                    Some(why) => why,
                    None => "a plain perf record, with no load of its own".to_string(),
                };
                costs
                    .method
                    .insert(kind.to_string(), format!("as {like} ({why})"));
            }
            if let Some(&interval) = costs.event_cost_interval_ns.get(like) {
                costs
                    .event_cost_interval_ns
                    .insert(kind.to_string(), interval);
            }
            // Only a stacked kind has a stack to cost: a plain record costed as a timer
            // arming takes the arming's cost, not its stack's.
            let stacked = STACKED_KINDS.iter().any(|&(k, _)| k.key() == kind);
            if let (true, Some(&ns)) = (stacked, costs.stack_cost_ns.get(like)) {
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

/// The scheduler's CPU-time updates, the runtime kind's tracepoint.
const RUNTIME_EVENT: &str = "sched/sched_stat_runtime";
/// The switches, which runtime records collected in the kernel are summed into.
const SWITCH_EVENT: &str = "sched/sched_switch";

/// A calibration load: runs one round pinned to a CPU.
type LoadFn<'a> = &'a dyn Fn(u32) -> Load;

/// A stack-sample period that never samples within a calibration's loads.
const NO_STACKS: u64 = 1 << 40;

/// Measures `kind` (`event` alone on `load`) into `costs`, or says why not. Collected in
/// the kernel, the kind costs at least what its program ran per record, by the kernel's
/// own timing: it ran in the thread's context, and a difference of two runs' CPU time
/// that reads less is noise. Returns that program time.
fn measure_into(
    costs: &mut EventCosts,
    collector: &mut Collector,
    kind: &str,
    event: &str,
    baseline: &[&str],
    cpu: u32,
    load: &dyn Fn(u32) -> Load,
) -> Option<f64> {
    let how = match baseline {
        [] => format!("{event} alone on its load"),
        _ => format!(
            "{event} on its load, on top of {} (summed into their records)",
            baseline.join(", ")
        ),
    };
    let measured = measure_kind(collector, event, baseline, cpu, load);
    let program_ns = measured.as_ref().ok().and_then(|m| m.program_ns);
    if let Some(interval) = measured.as_ref().ok().and_then(|m| m.interval_ns) {
        // Floored as the figure is (below).
        let floor = program_ns.unwrap_or(0.0);
        costs
            .event_cost_interval_ns
            .insert(kind.to_string(), interval.map(|end| end.max(floor)));
    }
    record_measure(costs, kind, measured.map(|m| (m.cost_ns, m.count)), &how);
    if let Some(program) = program_ns {
        if let Some(cost) = costs.event_cost_ns.get_mut(kind) {
            if *cost < program {
                let note = format!(
                    "; raised from {cost:.0} ns to its BPF program's own run time, {program:.0} ns a record (the kernel's BPF run-time statistics)"
                );
                *cost = program;
                costs
                    .method
                    .entry(kind.to_string())
                    .or_default()
                    .push_str(&note);
            }
        }
    }
    program_ns
}

/// Puts one kind's measured cost (per event, and over how many events) into `costs`,
/// with how it was measured, or why it was not.
fn record_measure(
    costs: &mut EventCosts,
    kind: &str,
    measured: Result<(f64, u64), String>,
    how: &str,
) {
    match measured {
        Ok((ns, count)) => {
            costs.event_cost_ns.insert(kind.to_string(), ns);
            costs
                .method
                .insert(kind.to_string(), format!("measured: {how}, {count} events"));
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

/// One kind measured on its load.
struct Measured {
    /// The median over rounds of the traced run's CPU time minus the bare run's, over the
    /// events it recorded.
    cost_ns: f64,
    /// A confidence interval of that median (the rounds' order statistics), where there
    /// were rounds enough.
    interval_ns: Option<[f64; 2]>,
    /// The events a traced round recorded (median).
    count: u64,
    /// Collected in the kernel, where the kernel times its programs: the kind's program
    /// run time per record it wrote (every thread's), over [`PROGRAM_ROUNDS`] runs.
    program_ns: Option<f64>,
}

/// Traced runs whose programs the kernel times, apart from the rounds that measure the
/// cost: the timing itself costs each run of a program about 50 ns here, which would be
/// in the cost. One is enough: the kernel's timing of a thousand runs moved by less than a
/// tenth from one calibration to the next here (a switch's program 154–170 ns), where
/// the rounds' CPU-time differences move by half.
const PROGRAM_ROUNDS: usize = 1;

/// The cost of one `event`, how many the traced rounds recorded, and its program's run
/// time where it is collected in the kernel. The bare run has `baseline` enabled (nothing,
/// or the events `event` is measured on top of), the traced run `baseline` and `event`.
fn measure_kind(
    collector: &mut Collector,
    event: &str,
    baseline: &[&str],
    cpu: u32,
    load: &dyn Fn(u32) -> Load,
) -> Result<Measured, String> {
    let mut per_event = Vec::with_capacity(ROUNDS);
    let mut counts = Vec::with_capacity(ROUNDS);
    let traced_events: Vec<&str> = baseline.iter().copied().chain([event]).collect();
    let bare_run = |collector: &mut Collector| -> Result<u64, String> {
        if baseline.is_empty() {
            Ok(load(cpu).cpu_ns)
        } else {
            Ok(traced_run(collector, baseline, event, cpu, load)?.cpu_ns)
        }
    };
    for round in 0..ROUNDS {
        let bare_first = round % 2 == 0;
        let mut bare = 0;
        if bare_first {
            bare = bare_run(collector)?;
        }
        let traced = traced_run(collector, &traced_events, event, cpu, load)?;
        if !bare_first {
            bare = bare_run(collector)?;
        }
        let n = traced.events;
        if n > 0 {
            per_event.push((traced.cpu_ns as f64 - bare as f64) / n as f64);
        }
        counts.push(n as f64);
    }
    if per_event.is_empty() {
        return Err(format!("the load recorded no {event} events"));
    }
    let program_ns = match Kind::for_tracepoint(event) {
        Some(kind) if collector.in_kernel_events().iter().any(|e| e == event) => {
            program_time(collector, &traced_events, kind, cpu, load)
        }
        _ => None,
    };
    // A cost below zero is noise, not a measurement: the event's cost is below what this
    // load can resolve.
    let cost_ns = median(&mut per_event).max(0.0);
    // `median` sorted the rounds, as `median_interval` needs them.
    let interval_ns = median_interval(&per_event).map(|(ends, _)| ends.map(|e| e.max(0.0)));
    Ok(Measured {
        cost_ns,
        interval_ns,
        count: median(&mut counts) as u64,
        program_ns,
    })
}

/// The run time of `kind`'s program per record it wrote, timed by the kernel over
/// [`PROGRAM_ROUNDS`] traced runs (their median); `None` where the kernel does not time
/// them.
fn program_time(
    collector: &mut Collector,
    events: &[&str],
    kind: Kind,
    cpu: u32,
    load: &dyn Fn(u32) -> Load,
) -> Option<f64> {
    if !collector.time_in_kernel_programs(true) {
        return None;
    }
    let mut per_record = Vec::with_capacity(PROGRAM_ROUNDS);
    for _ in 0..PROGRAM_ROUNDS {
        let Some(before) = collector.in_kernel_program_times() else {
            break;
        };
        if traced_run(collector, events, kind.tracepoint(), cpu, load).is_err() {
            break;
        }
        let Some(after) = collector.in_kernel_program_times() else {
            break;
        };
        let d = *after.since(&before).of(kind);
        if d.records > 0 && d.run_ns > 0 {
            per_record.push(d.run_ns as f64 / d.records as f64);
        }
    }
    collector.time_in_kernel_programs(false);
    (!per_record.is_empty()).then(|| median(&mut per_record))
}

/// One traced run of a load.
struct TracedRun {
    /// The load's CPU time.
    cpu_ns: u64,
    /// The events of `counted` its threads recorded.
    events: u64,
}

/// One run of `load` with `events` alone enabled, counting the load's `counted` events.
fn traced_run(
    collector: &mut Collector,
    events: &[&str],
    counted: &str,
    cpu: u32,
    load: &dyn Fn(u32) -> Load,
) -> Result<TracedRun, String> {
    if collector.enable_only(events).map_err(|e| e.to_string())? < events.len() {
        return Err(format!("{} is not recorded", events.join(", ")));
    }
    let run = load(cpu);
    collector.disable().map_err(|e| e.to_string())?;
    let mut n = 0u64;
    collector.drain_all(|c| {
        if let Collected::Trace(r) = &c {
            if r.format.full_name() == counted && run.tids.contains(&r.tid) {
                n += 1;
            }
        }
    });
    Ok(TracedRun {
        cpu_ns: run.cpu_ns,
        events: n,
    })
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

/// What one CPU-time sample costs the thread it interrupts: a thread spins reading the
/// clock with only the CPU-clock sampler on, and each of its samples falls in a gap of
/// those readings, as long as the sample kept the thread from running. The median gap over
/// the samples (a gap that also held a tick or the hypervisor is an outlier) and how many
/// samples there were. The load spins [`SPIN_NS`] at a time until it has
/// [`SPIN_SAMPLES`] samples or has spun [`SPIN_MAX_NS`] (a low `--frequency`).
fn sample_cost(collector: &mut Collector, cpu: u32) -> Result<(f64, u64), String> {
    let mut costs = Vec::new();
    let mut spun_ns = 0;
    while costs.len() < SPIN_SAMPLES && spun_ns < SPIN_MAX_NS {
        if collector
            .enable_only(&[CPU_CLOCK_EVENT])
            .map_err(|e| e.to_string())?
            == 0
        {
            return Err(format!("{CPU_CLOCK_EVENT} is not recorded"));
        }
        let spun = spin_with_gaps(cpu);
        collector.disable().map_err(|e| e.to_string())?;
        spun_ns += SPIN_NS;
        collector.drain_all(|c| {
            if let Collected::CpuSample(s) = &c {
                if s.tid == spun.tid {
                    if let Some(gap) = gap_around(&spun.gaps, s.time_ns) {
                        costs.push(gap as f64);
                    }
                }
            }
        });
    }
    if costs.is_empty() {
        return Err("the spinning load took no samples".to_string());
    }
    let n = costs.len() as u64;
    Ok((median(&mut costs), n))
}

/// The gaps a spinning thread saw in its clock readings, as (start, end) in
/// CLOCK_MONOTONIC nanoseconds, in order, and its tid.
struct Spun {
    tid: u32,
    gaps: Vec<(u64, u64)>,
}

/// Spins on `cpu` reading the clock for [`SPIN_NS`], noting each gap of at least
/// [`GAP_MIN_NS`] between two readings.
fn spin_with_gaps(cpu: u32) -> Spun {
    std::thread::spawn(move || {
        pin(cpu);
        // Ticks, samples and the hypervisor: a few hundred in 30 ms at most.
        let mut gaps = Vec::with_capacity(4096);
        let start = monotonic_now_ns();
        let mut last = start;
        while last - start < SPIN_NS {
            let now = monotonic_now_ns();
            if now - last >= GAP_MIN_NS && gaps.len() < gaps.capacity() {
                gaps.push((last, now));
            }
            last = now;
        }
        Spun {
            tid: gettid(),
            gaps,
        }
    })
    .join()
    .expect("the spinning load panicked")
}

/// The length of the gap in `gaps` (sorted, disjoint) that holds `time_ns`.
fn gap_around(gaps: &[(u64, u64)], time_ns: u64) -> Option<u64> {
    let after = gaps.partition_point(|&(start, _)| start <= time_ns);
    let &(start, end) = gaps.get(after.checked_sub(1)?)?;
    (time_ns <= end).then_some(end - start)
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
    use super::gap_around;

    #[test]
    fn median_takes_the_middle() {
        assert_eq!(super::median(&mut [3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn a_sample_is_charged_the_gap_that_holds_it() {
        let gaps = [(100, 150), (1_000, 26_000), (40_000, 40_400)];
        assert_eq!(gap_around(&gaps, 1_000), Some(25_000), "at the gap's start");
        assert_eq!(gap_around(&gaps, 12_345), Some(25_000));
        assert_eq!(gap_around(&gaps, 26_000), Some(25_000), "at the gap's end");
        assert_eq!(gap_around(&gaps, 40_100), Some(400));
        // Between gaps the thread was running its loop: the sample's time cannot be
        // there, and nothing is charged rather than a wrong gap.
        assert_eq!(gap_around(&gaps, 500), None);
        assert_eq!(gap_around(&gaps, 50), None, "before the first gap");
        assert_eq!(gap_around(&gaps, 50_000), None, "after the last");
        assert_eq!(gap_around(&[], 1), None);
    }
}
