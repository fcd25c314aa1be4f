//! The sysfs readers on a fixture tree built from the input (see [`crate::tree`]): CPU
//! topology and online list, the cpuidle driver and per-CPU states and counters, cpufreq
//! policies, the energy sources that read files (RAPL powercap, battery, hwmon; the perf
//! `power` PMU's sysfs description, not its counters), the tracefs event ids, and
//! `perf_event_paranoid`. Checks: energy read twice is finite and never negative.

use powerlens_sys::energy::battery_meter::BatterySource;
use powerlens_sys::energy::hwmon::HwmonSource;
use powerlens_sys::energy::perf_power;
use powerlens_sys::energy::powercap::PowercapSource;
use powerlens_sys::energy::EnergySource;
use powerlens_sys::topology::{self, Topology};
use powerlens_sys::{cpufreq, cpuidle, perf_caps, Roots};

use crate::tree;

pub const DICT: &[&str] = &[
    "== sys/devices/system/cpu/",
    "== sys/class/powercap/intel-rapl:0/",
    "== sys/class/power_supply/BAT0/",
    "== sys/class/hwmon/hwmon0/",
    "== sys/bus/event_source/devices/power/",
    "cpuidle/state0/",
    "cpufreq/policy0/",
    "energy_uj",
    "max_energy_range_uj",
    "energy_now",
    "power_now",
    "voltage_now",
    "Discharging",
    "energy1_input",
    "power1_input",
    "topology/physical_package_id",
    "online",
    "latency",
    "residency",
    "disable",
    "usage",
    "time",
    "scaling_cur_freq",
    "0-1",
    "event=0x02",
    "2.3283064365386962890625e-10",
    "Joules",
];

/// At most this many CPUs are read per input, so that `online` = `0-4000000000` costs
/// no more than a short list.
const MAX_CPUS: usize = 16;

pub fn run(input: &[u8]) {
    tree::with_roots(input, read_all);
}

fn read_all(roots: &Roots) {
    if let Ok(t) = Topology::read(roots) {
        let _ = (
            t.packages(),
            t.cores(),
            t.threads(),
            t.first_cpu_of_each_package(),
        );
    }
    let online = topology::read_online(roots).unwrap_or_default();
    let _ = cpuidle::read_driver(roots);
    for &cpu in online.iter().take(MAX_CPUS) {
        let _ = cpuidle::read_states(roots, cpu);
        let _ = cpuidle::read_counters(roots, cpu);
    }
    if let Ok(policies) = cpufreq::read_policies(roots) {
        for p in policies {
            let figures = [
                p.scaling_min_mhz(),
                p.scaling_max_mhz(),
                p.cpuinfo_min_mhz(),
                p.cpuinfo_max_mhz(),
                p.current_mhz().unwrap_or(0.0),
            ];
            assert!(
                figures.iter().all(|f| f.is_finite() && *f >= 0.0),
                "{figures:?}"
            );
        }
    }
    if let Ok(mut s) = PowercapSource::open(roots) {
        let _ = s.summary();
        read_twice(&mut s);
    }
    if let Ok(mut s) = BatterySource::open(roots) {
        let _ = s.summary();
        read_twice(&mut s);
    }
    if let Ok(mut s) = HwmonSource::open(roots) {
        let _ = s.summary();
        read_twice(&mut s);
    }
    let _ = perf_power::discover_pmu(roots);
    let _ = perf_caps::read_paranoid(roots);
    let _ = perf_caps::tracepoint_id(roots, perf_caps::PROBE_TRACEPOINT);
}

/// Cumulative joules since the source opened: finite, never negative, one per domain.
fn read_twice(source: &mut dyn EnergySource) {
    let _ = source.max_read_interval();
    for _ in 0..2 {
        if let Ok(joules) = source.read_joules(std::time::Instant::now()) {
            assert_eq!(
                joules.len(),
                source.domains().len(),
                "one reading per domain"
            );
            for (j, d) in joules.iter().zip(source.domains()) {
                assert!(j.is_finite() && *j >= 0.0, "{}: {} J", d.name, j);
            }
        }
    }
}
