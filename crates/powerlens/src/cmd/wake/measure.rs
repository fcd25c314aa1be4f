//! The measuring thread of `powerlens wake`: pinned to the measured CPU, SCHED_FIFO, timer
//! slack 1 ns; it sleeps until absolute CLOCK_MONOTONIC launch times and notes when it
//! woke. The trace records of the same interval come from the collector, drained by the
//! calling thread; matching both is `powerlens_core::wake::match_measurements`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use powerlens_core::dvfs::gen::SplitMix64;
use powerlens_core::wake::{Distribution, Measurement, SelfOverhead, WakeEvent, WakeEventKind};
use powerlens_sys::trace::{monotonic_now_ns, TraceRecord};

use powerlens_record::interrupt;

/// The real-time priority of the measuring thread (cyclictest's usual `-p 95`).
pub const FIFO_PRIORITY: i32 = 95;

/// The tracepoints a wake measurement reads.
pub const EVENTS: [&str; 5] = [
    "power/cpu_idle",
    "timer/hrtimer_start",
    "timer/hrtimer_expire_entry",
    "irq/irq_handler_entry",
    "irq/softirq_entry",
];

/// When to stop.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    Datapoints(u64),
    Duration(Duration),
}

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub cpu: u32,
    pub ldist_min_ns: u64,
    pub ldist_max_ns: u64,
    pub limit: Limit,
    pub seed: u64,
}

/// What the thread hands back.
pub struct Measured {
    pub measurements: Vec<Measurement>,
    /// Set when Ctrl-C ended the series.
    pub interrupted: bool,
}

fn last_os_error(what: &str) -> String {
    format!("{what} failed: {}", std::io::Error::last_os_error())
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: u32) -> Result<(), String> {
    powerlens_workload::pin_to_cpu(cpu as usize)
        .map_err(|e| format!("sched_setaffinity(cpu{cpu}) failed: {e}"))
}

/// Pinned, SCHED_FIFO at [`FIFO_PRIORITY`], timer slack 1 ns: the thread wakes as soon as
/// the kernel can make it, and is not delayed by other runnable tasks.
fn prepare_thread(cpu: u32) -> Result<(), String> {
    pin_to(cpu)?;
    let param = libc::sched_param {
        sched_priority: FIFO_PRIORITY,
    };
    // SAFETY: plain syscalls on the calling thread with a valid sched_param.
    unsafe {
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
            return Err(last_os_error("sched_setscheduler(SCHED_FIFO)"));
        }
        if libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(last_os_error("prctl(PR_SET_TIMERSLACK, 1)"));
        }
    }
    Ok(())
}

/// Sleeps until `ltime_ns` on CLOCK_MONOTONIC. `false` when a signal cut the sleep short.
fn sleep_until(ltime_ns: u64) -> bool {
    let ts = libc::timespec {
        tv_sec: (ltime_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ltime_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; no remaining-time output with TIMER_ABSTIME.
    let rc = unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
    rc == 0
}

/// The clock read cost and the expired-sleep floor on the calling thread.
fn characterize() -> (Distribution, Distribution) {
    const PAIRS: usize = 20_000;
    const SLEEPS: usize = 2_000;
    let pairs = (0..PAIRS).map(|_| {
        let a = monotonic_now_ns();
        let b = monotonic_now_ns();
        (b - a) as f64
    });
    let timestamp_ns = Distribution::of(pairs.collect::<Vec<_>>()).expect("pairs measured");
    let sleeps: Vec<f64> = (0..SLEEPS)
        .filter_map(|_| {
            let ltime = monotonic_now_ns();
            sleep_until(ltime).then(|| (monotonic_now_ns() - ltime) as f64)
        })
        .collect();
    let expired_sleep_ns = Distribution::of(sleeps).unwrap_or(Distribution {
        count: 0,
        min: 0.0,
        median: 0.0,
        mean: 0.0,
        std: 0.0,
        p99: 0.0,
        p99_9: 0.0,
        p99_99: 0.0,
        max: 0.0,
    });
    (timestamp_ns, expired_sleep_ns)
}

/// Characterizes the self overhead on a pinned SCHED_FIFO thread on `cpu`, as the
/// measuring thread would see it (with whatever tracing is enabled now): the clock read
/// cost and the expired-sleep floor.
fn characterize_on(cpu: u32) -> Result<(Distribution, Distribution), String> {
    std::thread::Builder::new()
        .name("pl-wake-cal".into())
        .spawn(move || {
            prepare_thread(cpu)?;
            Ok(characterize())
        })
        .expect("spawn the characterizing thread")
        .join()
        .map_err(|_| "the characterizing thread panicked".to_string())?
}

/// The self overhead (see [`SelfOverhead`]): characterized with the collector's
/// tracepoints off, then on (without a collector: off only).
pub fn self_overhead(
    cpu: u32,
    collector: Option<&mut powerlens_sys::trace::Collector>,
) -> anyhow::Result<SelfOverhead> {
    let (timestamp_ns, expired_sleep_ns) = characterize_on(cpu).map_err(anyhow::Error::msg)?;
    let traced = match collector {
        Some(collector) => {
            collector.enable()?;
            let traced = characterize_on(cpu);
            collector.disable()?;
            Some(traced.map_err(anyhow::Error::msg)?.1)
        }
        None => None,
    };
    let cost = traced
        .as_ref()
        .map(|t| powerlens_core::wake::trace_cost_ns(&expired_sleep_ns, t));
    Ok(SelfOverhead {
        trace_cost_ns: cost.as_ref().and_then(|c| c.as_ref().ok().copied()),
        trace_cost_unavailable: cost.and_then(Result::err),
        timestamp_ns,
        expired_sleep_ns,
        expired_sleep_traced_ns: traced,
    })
}

/// Runs one series on a new thread; `done` counts datapoints for the progress bar and
/// `finished` tells the caller (which drains the trace meanwhile) when it is over.
pub fn spawn(
    options: Options,
    done: Arc<AtomicU64>,
    finished: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<Measured, String>> {
    std::thread::Builder::new()
        .name("pl-wake".into())
        .spawn(move || {
            let result = run(options, &done);
            finished.store(true, Ordering::SeqCst);
            result
        })
        .expect("spawn the measuring thread")
}

fn run(options: Options, done: &AtomicU64) -> Result<Measured, String> {
    prepare_thread(options.cpu)?;
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let mut rng = SplitMix64::new(options.seed);
    let span = options.ldist_max_ns - options.ldist_min_ns;
    let start = monotonic_now_ns();
    let deadline = match options.limit {
        Limit::Duration(d) => Some(start + d.as_nanos() as u64),
        Limit::Datapoints(_) => None,
    };
    let mut measurements = Vec::new();
    loop {
        if interrupt::interrupted() {
            break;
        }
        match (options.limit, deadline) {
            (Limit::Datapoints(n), _) if measurements.len() as u64 >= n => break,
            (_, Some(end)) if monotonic_now_ns() >= end => break,
            _ => {}
        }
        let ldist = options.ldist_min_ns + (rng.next_f64() * span as f64) as u64;
        let armed = monotonic_now_ns();
        let ltime = armed + ldist;
        if !sleep_until(ltime) {
            continue;
        }
        let user_wake = monotonic_now_ns();
        measurements.push(Measurement {
            armed_ns: armed,
            ltime_ns: ltime,
            ldist_ns: ldist,
            user_wake_ns: user_wake,
            tid,
        });
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Measured {
        measurements,
        interrupted: interrupt::interrupted(),
    })
}

/// A trace record of the measured CPU as matching needs it; `None` for other records.
pub fn convert(record: &TraceRecord<'_>) -> Option<WakeEvent> {
    let d = record.decoded();
    let kind = match record.format.name.as_str() {
        "cpu_idle" => match d.u64("state")? as u32 {
            u32::MAX => WakeEventKind::IdleExit,
            state => WakeEventKind::IdleEnter { state },
        },
        "hrtimer_start" => WakeEventKind::HrtimerStart {
            hrtimer: d.u64("hrtimer")?,
            softexpires_ns: d.i64("softexpires")? as u64,
            tid: record.tid,
        },
        "hrtimer_expire_entry" => WakeEventKind::HrtimerExpire {
            hrtimer: d.u64("hrtimer")?,
            now_ns: d.i64("now")? as u64,
        },
        "irq_handler_entry" => WakeEventKind::Irq {
            irq: d.i64("irq")? as i32,
        },
        "softirq_entry" => WakeEventKind::SoftIrq {
            vec: d.u64("vec")? as u32,
        },
        _ => return None,
    };
    Some(WakeEvent {
        time_ns: record.time_ns,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_sys::trace::{Callchain, EventFormat};

    const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
";

    /// A format file as 6.18's tracefs writes it.
    fn format(system: &str, name: &str, fields: &str) -> EventFormat {
        let text = format!("name: {name}\nID: 1\nformat:\n{COMMON}\n{fields}\nprint fmt: \"\"\n");
        EventFormat::parse(system, &text).unwrap()
    }

    fn record<'a>(format: &'a EventFormat, raw: &'a [u8]) -> TraceRecord<'a> {
        TraceRecord {
            cpu: 1,
            time_ns: 5_000,
            pid: 77,
            tid: 78,
            event: 0,
            format,
            raw,
            callchain: Callchain::default(),
            user_regs: None,
            user_stack: &[],
        }
    }

    fn payload(fields: &[&[u8]]) -> Vec<u8> {
        let mut raw = vec![0u8; 8];
        for f in fields {
            raw.extend_from_slice(f);
        }
        raw
    }

    /// The field names and types the kernel's format files give, decoded by name.
    #[test]
    fn converts_the_kernels_records() {
        let idle = format(
            "power",
            "cpu_idle",
            "\tfield:u32 state;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:u32 cpu_id;\toffset:12;\tsize:4;\tsigned:0;",
        );
        let enter = payload(&[&2u32.to_ne_bytes(), &1u32.to_ne_bytes()]);
        let exit = payload(&[&u32::MAX.to_ne_bytes(), &1u32.to_ne_bytes()]);
        assert_eq!(
            convert(&record(&idle, &enter)).unwrap().kind,
            WakeEventKind::IdleEnter { state: 2 }
        );
        assert_eq!(
            convert(&record(&idle, &exit)).unwrap().kind,
            WakeEventKind::IdleExit
        );

        let start = format(
            "timer",
            "hrtimer_start",
            "\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;
\tfield:s64 expires;\toffset:24;\tsize:8;\tsigned:1;
\tfield:s64 softexpires;\toffset:32;\tsize:8;\tsigned:1;
\tfield:enum hrtimer_mode mode;\toffset:40;\tsize:4;\tsigned:0;
\tfield:bool was_armed;\toffset:44;\tsize:1;\tsigned:0;",
        );
        let raw = payload(&[
            &0xffff_c900_050e_bc70u64.to_ne_bytes(),
            &0xffff_ffff_8100_0000u64.to_ne_bytes(),
            &412_734_895_210i64.to_ne_bytes(),
            &412_734_895_209i64.to_ne_bytes(),
            &1u32.to_ne_bytes(),
            &[0, 0, 0, 0],
        ]);
        let e = convert(&record(&start, &raw)).unwrap();
        assert_eq!(e.time_ns, 5_000);
        assert_eq!(
            e.kind,
            WakeEventKind::HrtimerStart {
                hrtimer: 0xffff_c900_050e_bc70,
                softexpires_ns: 412_734_895_209,
                tid: 78,
            }
        );

        let expire = format(
            "timer",
            "hrtimer_expire_entry",
            "\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;
\tfield:s64 now;\toffset:16;\tsize:8;\tsigned:1;
\tfield:void * function;\toffset:24;\tsize:8;\tsigned:0;",
        );
        let raw = payload(&[
            &0xffff_c900_050e_bc70u64.to_ne_bytes(),
            &412_734_896_000i64.to_ne_bytes(),
            &0u64.to_ne_bytes(),
        ]);
        assert_eq!(
            convert(&record(&expire, &raw)).unwrap().kind,
            WakeEventKind::HrtimerExpire {
                hrtimer: 0xffff_c900_050e_bc70,
                now_ns: 412_734_896_000,
            }
        );

        let softirq = format(
            "irq",
            "softirq_entry",
            "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;",
        );
        let raw = payload(&[&7u32.to_ne_bytes()]);
        assert_eq!(
            convert(&record(&softirq, &raw)).unwrap().kind,
            WakeEventKind::SoftIrq { vec: 7 }
        );
        let other = format(
            "sched",
            "sched_switch",
            "\tfield:int x;\toffset:8;\tsize:4;\tsigned:1;",
        );
        assert!(convert(&record(&other, &raw)).is_none());
    }
}
