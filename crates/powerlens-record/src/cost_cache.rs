//! The measured cost of tracing, kept for the rest of the boot.
//!
//! Measuring what each kind of event costs (`instrument::calibrate`) takes about 0.3 s,
//! which every `record` and agent start would pay: more than doubling `record -- true`.
//! What it measures is the kernel's path for each event on this machine, fixed for a boot
//! and a collector configuration. So the first measurement of a boot is kept in
//! `/run/powerlens/` (root's only: an unprivileged recorder cannot trace anyway) with the
//! boot's id and the configuration, and reused while both match; a new boot or another
//! configuration measures again and replaces it.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use powerlens_core::run::other_cpu_share;
use powerlens_core::sched::tracing_cost::EventCosts;
use powerlens_sys::procfs;
use powerlens_sys::trace::Collector;
use powerlens_sys::Roots;

use crate::instrument;

const CACHE_DIR: &str = "/run/powerlens";

/// Where the costs are kept: `POWERLENS_COST_CACHE_DIR` when set (a test run that must
/// not lean on what an earlier run of the boot measured, or a machine whose /run is
/// elsewhere), else [`CACHE_DIR`].
fn cache_dir() -> PathBuf {
    std::env::var_os("POWERLENS_COST_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(CACHE_DIR))
}

/// Raised whenever what the calibration measures changes, so that costs kept by an
/// earlier powerlens in this boot are measured again: 2 measures the stacked kinds with
/// and without their stacks (sampled stacks); 3 takes the median of paired rounds; 4 no
/// longer gives a plain record a stack cost; 5 times the in-kernel programs (their run
/// time per record, which each kind's cost is floored at); 6 adds each kind's confidence
/// interval.
const CALIBRATION_METHOD: u32 = 6;

#[derive(Serialize, Deserialize)]
struct Entry {
    boot_id: String,
    config: String,
    costs: EventCosts,
}

/// The costs for this collector: kept from earlier in this boot for the same
/// configuration (`stacks`, `extra`: what else shapes the cost, e.g. kernel frames), or
/// measured now and kept.
pub fn measured_or_kept(
    roots: &Roots,
    collector: &mut Collector,
    stacks: bool,
    extra: &str,
) -> EventCosts {
    let config = format!(
        "method={CALIBRATION_METHOD} events={:?} in_kernel={:?} stacks={stacks} user_stack_bytes={} sample_stack_bytes={} cpu_clock={} {extra}",
        collector.events().iter().map(|e| e.full_name()).collect::<Vec<_>>(),
        collector.in_kernel_events(),
        collector.user_stack_bytes(),
        collector.sample_stack_bytes(),
        collector.has_cpu_clock(),
    );
    let boot_id = std::fs::read_to_string(roots.proc("sys/kernel/random/boot_id"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let Some(boot_id) = boot_id else {
        return calibrate_and_watch(roots, collector, stacks);
    };
    let dir = cache_dir();
    let path = cache_file(&dir, &config);
    if let Some(mut costs) = read(&path, &boot_id, &config) {
        costs.kept_from_this_boot = true;
        return costs;
    }
    let costs = calibrate_and_watch(roots, collector, stacks);
    // Beside load the loads shared their CPU: this recording uses what was measured (and
    // says so), the next start in a quieter moment measures again.
    if !costs.measured_beside_load() {
        write(&dir, &path, &boot_id, &config, &costs);
    }
    costs
}

/// [`instrument::calibrate`], and the share of the CPUs other processes used meanwhile.
fn calibrate_and_watch(roots: &Roots, collector: &mut Collector, stacks: bool) -> EventCosts {
    let before = machine_and_own_cpu_s(roots);
    let started = std::time::Instant::now();
    let mut costs = instrument::calibrate(collector, stacks);
    let elapsed_s = started.elapsed().as_secs_f64();
    costs.calibration_other_cpu_share =
        before
            .zip(machine_and_own_cpu_s(roots))
            .map(|((busy0, own0, cpus), (busy1, own1, _))| {
                other_cpu_share(busy1 - busy0, own1 - own0, elapsed_s, cpus)
            });
    costs
}

/// Busy CPU-seconds of the whole machine, of this process, and the online CPUs.
fn machine_and_own_cpu_s(roots: &Roots) -> Option<(f64, f64, u32)> {
    let machine = procfs::read_cpu_times(roots).ok()?;
    let own = procfs::process::read_process(roots, std::process::id()).ok()?;
    Some((machine.busy_s, own.cpu_time_ns as f64 / 1e9, machine.cpus))
}

fn cache_file(dir: &Path, config: &str) -> PathBuf {
    let mut h = DefaultHasher::new();
    config.hash(&mut h);
    dir.join(format!("tracing-cost-{:016x}.json", h.finish()))
}

fn read(path: &Path, boot_id: &str, config: &str) -> Option<EventCosts> {
    let entry: Entry = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    (entry.boot_id == boot_id && entry.config == config).then_some(entry.costs)
}

/// Keeps the costs; any failure (not root, a read-only /run, a directory someone else
/// owns) only means the next start measures again.
fn write(dir: &Path, path: &Path, boot_id: &str, config: &str, costs: &EventCosts) {
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() && m.uid() == me => {}
        _ => return,
    }
    let entry = Entry {
        boot_id: boot_id.to_string(),
        config: config.to_string(),
        costs: costs.clone(),
    };
    let Ok(bytes) = serde_json::to_vec(&entry) else {
        return;
    };
    // Written aside and renamed, so that a reader never sees half a file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs(ns: f64) -> EventCosts {
        EventCosts {
            event_cost_ns: [("sched_switch".to_string(), ns)].into_iter().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_other_processes_share_is_the_machines_busy_time_less_ours() {
        // 2 CPUs for 0.5 s: 1 CPU-second in all. The machine was busy 0.9 s of it, this
        // process 0.3 s: the others 0.6 s, 60%.
        assert!((other_cpu_share(0.9, 0.3, 0.5, 2) - 0.6).abs() < 1e-12);
        // Ticks of 10 ms can make ours exceed the machine's: never below 0, nor above 1.
        assert_eq!(other_cpu_share(0.30, 0.31, 0.5, 2), 0.0);
        assert_eq!(other_cpu_share(5.0, 0.0, 0.5, 2), 1.0);
        assert_eq!(other_cpu_share(1.0, 0.0, 0.0, 2), 0.0);
        let beside = |share| EventCosts {
            calibration_other_cpu_share: Some(share),
            ..Default::default()
        };
        assert!(beside(0.6).measured_beside_load());
        assert!(!beside(0.1).measured_beside_load());
        assert!(!EventCosts::default().measured_beside_load());
    }

    #[test]
    fn kept_costs_are_reused_only_for_the_same_boot_and_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let path = cache_file(dir.path(), "A");
        assert_ne!(path, cache_file(dir.path(), "B"));
        assert!(read(&path, "boot-1", "A").is_none());
        write(dir.path(), &path, "boot-1", "A", &costs(1000.0));
        assert_eq!(read(&path, "boot-1", "A"), Some(costs(1000.0)));
        assert!(
            read(&path, "boot-2", "A").is_none(),
            "another boot measures again"
        );
        assert!(
            read(&path, "boot-1", "B").is_none(),
            "another configuration too"
        );
        // A damaged file is measured again, not trusted.
        std::fs::write(&path, b"{not json").unwrap();
        assert!(read(&path, "boot-1", "A").is_none());
    }
}
