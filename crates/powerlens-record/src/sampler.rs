//! The sampler thread of a recording: at a fixed interval it reads the energy meter, the
//! cpuidle usage/time counters and the current frequency of every CPU — and, in a reduced
//! recording, the CPU time and context-switch counts of the target's threads from procfs —
//! and sends them to the recorder, which writes them with the trace. Every sample carries
//! CLOCK_MONOTONIC nanoseconds, the clock of the trace records.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use powerlens_sys::trace::monotonic_now_ns;
use powerlens_sys::{cpufreq, cpuidle, procfs, Roots};

use crate::meter::{Meter, Reading};

/// Sample kinds, as stored (`samples.kind`); docs/FORMAT.md describes their data.
pub const ENERGY: &str = "energy";
pub const CPUIDLE: &str = "cpuidle";
pub const CPUFREQ: &str = "cpufreq";
pub const THREADS: &str = "threads";

/// One reading, ready to store.
#[derive(Debug)]
pub struct Sample {
    pub time_ns: u64,
    pub kind: &'static str,
    pub data: Value,
}

/// Which threads a reduced recording samples.
#[derive(Debug, Clone)]
pub enum ThreadScope {
    /// None: a full (traced) recording gets these from the trace.
    Off,
    /// The process tree under this pid; 0 until it is known (a command not yet started).
    Tree(Arc<AtomicU32>),
    /// Every process.
    All,
}

pub struct SamplerConfig {
    pub roots: Roots,
    pub cpus: Vec<u32>,
    pub interval: Duration,
    /// The meter when one can be read; `None` when energy is estimated from the trace.
    pub meter: Option<Meter>,
    pub threads: ThreadScope,
}

/// The running sampler. Dropping it without [`Sampler::stop`] stops it too.
pub struct Sampler {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
    pub samples: Receiver<Sample>,
}

impl Sampler {
    /// Starts sampling now (the first sample is taken at once).
    pub fn start(config: SamplerConfig) -> Sampler {
        let (tx, rx) = mpsc::channel();
        let (stop, stopped) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("powerlens-sampler".into())
            .spawn(move || run(config, &stopped, &tx))
            .expect("spawning the sampler thread");
        Sampler {
            stop: Some(stop),
            handle: Some(handle),
            samples: rx,
        }
    }

    /// Takes a last sample, stops the thread and returns the samples not yet received.
    pub fn stop(mut self) -> Vec<Sample> {
        self.halt();
        self.samples.try_iter().collect()
    }

    fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run(config: SamplerConfig, stop: &Receiver<()>, tx: &Sender<Sample>) {
    let first: Option<Reading> = config.meter.as_ref().and_then(|m| m.read().ok());
    let mut next = Instant::now();
    loop {
        // Sleep a whole interval (a stop message or hang-up wakes it at once): waking
        // more often would only add scheduler events to the trace being recorded.
        let last = match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => false,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
        };
        for sample in take(&config, first.as_ref()) {
            if tx.send(sample).is_err() {
                return;
            }
        }
        if last {
            return;
        }
        next += config.interval;
    }
}

/// Everything one tick reads; sources that fail are skipped (the recording's metadata says
/// which are unavailable and why, from the checks made before recording).
fn take(config: &SamplerConfig, first: Option<&Reading>) -> Vec<Sample> {
    let time_ns = monotonic_now_ns();
    let mut out = Vec::new();
    if let (Some(meter), Some(first)) = (&config.meter, first) {
        if let Ok(now) = meter.read() {
            let domains = meter.energy_between(first, &now, None);
            let total: f64 = domains
                .iter()
                .filter(|d| d.counts_in_total)
                .map(|d| d.joules)
                .sum();
            let per_domain: serde_json::Map<String, Value> = domains
                .iter()
                .map(|d| (d.name.clone(), json!(d.joules)))
                .collect();
            let mut data = json!({ "total_j": total, "domains_j": per_domain });
            if let Some(pct) = now.charge_pct {
                data["charge_pct"] = json!(pct);
            }
            out.push(Sample {
                time_ns,
                kind: ENERGY,
                data,
            });
        }
    }
    let idle: Vec<Value> = config
        .cpus
        .iter()
        .filter_map(|&cpu| {
            let counters = cpuidle::read_counters(&config.roots, cpu).ok()?;
            (!counters.is_empty()).then(|| {
                json!({
                    "cpu": cpu,
                    "states": counters.iter().map(|c| json!([c.usage, c.time_us])).collect::<Vec<_>>(),
                })
            })
        })
        .collect();
    if !idle.is_empty() {
        out.push(Sample {
            time_ns,
            kind: CPUIDLE,
            data: Value::Array(idle),
        });
    }
    if let Ok(policies) = cpufreq::read_policies(&config.roots) {
        let freq: Vec<Value> = policies
            .iter()
            .filter_map(|p| Some((p, p.current_khz?)))
            .flat_map(|(p, khz)| p.cpus.iter().map(move |&cpu| json!([cpu, khz])))
            .collect();
        if !freq.is_empty() {
            out.push(Sample {
                time_ns,
                kind: CPUFREQ,
                data: Value::Array(freq),
            });
        }
    }
    if let Some(threads) = thread_sample(&config.roots, &config.threads) {
        out.push(Sample {
            time_ns,
            kind: THREADS,
            data: threads,
        });
    }
    out
}

/// `[[tid, pid, comm, cpu_time_ns, voluntary, nonvoluntary], …]` for the scope's threads.
fn thread_sample(roots: &Roots, scope: &ThreadScope) -> Option<Value> {
    let pids = match scope {
        ThreadScope::Off => return None,
        ThreadScope::Tree(root) => match root.load(Ordering::SeqCst) {
            0 => return None,
            pid => procfs::tasks::process_tree(roots, pid).ok()?,
        },
        ThreadScope::All => procfs::tasks::process_ids(roots).ok()?,
    };
    let rows: Vec<Value> = pids
        .into_iter()
        .filter_map(|pid| procfs::tasks::read_threads(roots, pid).ok())
        .flatten()
        .map(|t| {
            json!([
                t.tid,
                t.pid,
                t.comm,
                t.cpu_time_ns,
                t.voluntary_switches,
                t.nonvoluntary_switches
            ])
        })
        .collect();
    Some(Value::Array(rows))
}
