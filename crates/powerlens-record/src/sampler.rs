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
/// A process's command line at its exec (`{"pid", "argv"}`), written by the drain.
pub const COMMANDS: &str = "commands";

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

#[cfg(test)]
mod tests {
    use powerlens_sys::fixture::{BatterySpec, FixtureTree};

    use super::*;
    use crate::meter::MeterOptions;

    fn config(tree: &FixtureTree, meter: Meter) -> SamplerConfig {
        SamplerConfig {
            roots: tree.roots(),
            cpus: Vec::new(),
            interval: Duration::from_millis(100),
            meter: Some(meter),
            threads: ThreadScope::Off,
        }
    }

    /// The data of the one energy sample `take` makes.
    fn energy(config: &SamplerConfig, first: &Reading) -> Value {
        let samples = take(config, Some(first));
        let mut energy = samples.into_iter().filter(|s| s.kind == ENERGY);
        let sample = energy.next().expect("an energy sample");
        assert!(energy.next().is_none());
        sample.data
    }

    /// A tick's energy sample on a battery, read on the mock clock: the battery meter's
    /// power_now integral since the first reading, its total, and the gauge's charge.
    #[test]
    fn an_energy_sample_on_a_battery_by_hand() {
        let tree = FixtureTree::new();
        tree.battery(
            "BAT0",
            &BatterySpec {
                status: "Discharging".into(),
                energy_now_uwh: Some(5_000_000),
                energy_full_uwh: Some(10_000_000),
                power_now_uw: Some(36_000_000),
                ..Default::default()
            },
        );
        let setup = "draw class/power_supply/BAT0 36W";
        let meter = Meter::mock(&tree.roots(), setup, &MeterOptions::default()).unwrap();
        let first = meter.read().unwrap();
        assert!(meter.executor().sleep(Duration::from_millis(2500)));
        let config = config(&tree, meter);
        // 36 W × 2.5 s = 90 J (a sum of 25 trapezoids of 0.1 s: to 1e-12), 25 000 µWh:
        // 4.975 Wh of 10 left, 49.75%.
        let data = energy(&config, &first);
        let close = |v: &Value, expected: f64| (v.as_f64().unwrap() - expected).abs() < 1e-12;
        assert!(close(&data["domains_j"]["BAT0"], 90.0), "{data}");
        assert!(close(&data["total_j"], 90.0), "{data}");
        assert_eq!(data["charge_pct"], 49.75);
    }

    /// A RAPL tick: packages and DRAM in the total, a core subzone and psys beside it.
    #[test]
    fn an_energy_sample_totals_packages_and_dram() {
        let tree = FixtureTree::new();
        tree.rapl_zone(0, "package-0", 0, 5_000_000);
        tree.rapl_subzone(0, 0, "core", 0, 5_000_000);
        tree.rapl_subzone(0, 1, "dram", 0, 5_000_000);
        tree.rapl_zone(1, "psys", 0, 5_000_000);
        let setup = [
            "draw class/powercap/intel-rapl:0 20W",
            "draw class/powercap/intel-rapl:0:0 12W",
            "draw class/powercap/intel-rapl:0:1 4W",
            "draw class/powercap/intel-rapl:1 40W",
        ]
        .join("; ");
        let meter = Meter::mock(&tree.roots(), &setup, &MeterOptions::default()).unwrap();
        let first = meter.read().unwrap();
        assert!(meter.executor().sleep(Duration::from_millis(500)));
        let config = config(&tree, meter);
        // Over 0.5 s, on 5 J counters read every 2.5 ms (5 J / 1 kW / 2): package 10 J
        // (two wraps), core 6 J (one), DRAM 2 J, psys 20 J (four); the total 10 + 2 = 12 J.
        let data = energy(&config, &first);
        assert_eq!(data["total_j"], 12.0);
        let domains = serde_json::json!({
            "package-0": 10.0, "package-0/core": 6.0, "package-0/dram": 2.0, "psys": 20.0
        });
        assert_eq!(data["domains_j"], domains);
        assert_eq!(data.get("charge_pct"), None, "no battery, no charge");
    }
}
