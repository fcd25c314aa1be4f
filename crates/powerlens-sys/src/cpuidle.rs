//! cpuidle: the idle driver and governor, and the idle states (C-states) of each CPU with
//! their declared exit latency and target residency, plus their usage counters.

use std::path::PathBuf;

use serde::Serialize;

use crate::{sysfs, Roots, SysError};

/// The idle states of one CPU, in state order (`state0`, `state1`, …).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleState {
    /// e.g. `POLL`, `C1`, `haltpoll idle`.
    pub name: String,
    pub desc: String,
    /// Declared worst-case exit latency (`latency`, µs).
    pub latency_us: u64,
    /// Minimum idle time for the state to pay off (`residency`, µs).
    pub target_residency_us: u64,
    /// Whether the state is disabled (`disable`).
    pub disabled: bool,
}

/// Cumulative counters of one idle state, for periodic sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IdleCounters {
    /// Times the state was entered (`usage`).
    pub usage: u64,
    /// Time spent in the state (`time`, µs).
    pub time_us: u64,
}

/// The system-wide idle driver and governor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleDriver {
    pub driver: String,
    pub governor: String,
}

/// Why cpuidle is missing, and what brings it back.
const NO_CPUIDLE_REASON: &str =
    "no cpuidle in sysfs: the kernel was built without CONFIG_CPU_IDLE or booted with cpuidle.off=1 or idle=poll/halt";
const NO_CPUIDLE_FIX: &str =
    "boot without cpuidle.off=1 / idle=… on the kernel command line (a kernel with CONFIG_CPU_IDLE)";

fn cpuidle_dir(roots: &Roots) -> PathBuf {
    roots.sys("devices/system/cpu/cpuidle")
}

fn unavailable() -> SysError {
    SysError::Unavailable {
        what: "cpuidle".to_string(),
        reason: NO_CPUIDLE_REASON.to_string(),
        fix: Some(NO_CPUIDLE_FIX.to_string()),
    }
}

/// The idle driver and governor. The governor is in `current_governor`, or only
/// `current_governor_ro` on kernels without switchable governors.
pub fn read_driver(roots: &Roots) -> Result<IdleDriver, SysError> {
    let dir = cpuidle_dir(roots);
    if !dir.is_dir() {
        return Err(unavailable());
    }
    let driver = sysfs::read_string(dir.join("current_driver"))?;
    let governor = match sysfs::read_optional_string(dir.join("current_governor"))? {
        Some(g) => g,
        None => sysfs::read_string(dir.join("current_governor_ro"))?,
    };
    Ok(IdleDriver { driver, governor })
}

/// The `stateK` directories of one CPU in index order; empty when the CPU has none.
fn state_dirs(roots: &Roots, cpu: u32) -> Result<Vec<PathBuf>, SysError> {
    let dir = roots.sys(format!("devices/system/cpu/cpu{cpu}/cpuidle"));
    let states = sysfs::numbered_entries(dir, "state", "")?;
    Ok(states.into_iter().map(|(_, path)| path).collect())
}

/// The idle states of `cpu`. A CPU without a cpuidle directory has no states (empty);
/// a machine without cpuidle at all is an `Unavailable` error with the reason and the fix.
pub fn read_states(roots: &Roots, cpu: u32) -> Result<Vec<IdleState>, SysError> {
    if !cpuidle_dir(roots).is_dir() {
        return Err(unavailable());
    }
    state_dirs(roots, cpu)?
        .into_iter()
        .map(|dir| {
            Ok(IdleState {
                name: sysfs::read_string(dir.join("name"))?,
                desc: sysfs::read_optional_string(dir.join("desc"))?.unwrap_or_default(),
                latency_us: sysfs::read_u64(dir.join("latency"))?,
                target_residency_us: sysfs::read_u64(dir.join("residency"))?,
                disabled: sysfs::read_u64(dir.join("disable"))? != 0,
            })
        })
        .collect()
}

/// The usage counters of every idle state of `cpu`, in state order. Cheap: two small
/// reads per state, for periodic sampling.
pub fn read_counters(roots: &Roots, cpu: u32) -> Result<Vec<IdleCounters>, SysError> {
    state_dirs(roots, cpu)?
        .into_iter()
        .map(|dir| {
            Ok(IdleCounters {
                usage: sysfs::read_u64(dir.join("usage"))?,
                time_us: sysfs::read_u64(dir.join("time"))?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{FixtureTree, IdleStateSpec};
    use crate::topology;

    fn state(name: &str, latency_us: u64, residency_us: u64, usage: u64) -> IdleStateSpec {
        IdleStateSpec {
            name: name.to_string(),
            desc: format!("{name} state"),
            latency_us,
            residency_us,
            disabled: name == "C6",
            usage,
            time_us: usage * 10,
        }
    }

    #[test]
    fn states_in_index_order_with_counters() {
        let tree = FixtureTree::new();
        tree.cpuidle_driver("intel_idle", "menu");
        // Eleven states, so that "state10" must sort after "state2".
        for k in 0..11 {
            let name = if k == 10 {
                "C6".to_string()
            } else {
                format!("C{k}")
            };
            tree.cpuidle_state(0, k, &state(&name, k as u64 * 10, k as u64 * 30, k as u64));
        }
        let roots = tree.roots();
        let driver = read_driver(&roots).unwrap();
        assert_eq!(driver.driver, "intel_idle");
        assert_eq!(driver.governor, "menu");
        let states = read_states(&roots, 0).unwrap();
        assert_eq!(states.len(), 11);
        assert_eq!(states[10].name, "C6");
        assert_eq!(states[10].latency_us, 100);
        assert_eq!(states[10].target_residency_us, 300);
        assert!(states[10].disabled && !states[2].disabled);
        assert_eq!(states[2].desc, "C2 state");
        let counters = read_counters(&roots, 0).unwrap();
        assert_eq!(
            counters[10],
            IdleCounters {
                usage: 10,
                time_us: 100
            }
        );
        assert!(read_states(&roots, 1).unwrap().is_empty());
    }

    #[test]
    fn read_only_governor() {
        let tree = FixtureTree::new();
        tree.write_sys("devices/system/cpu/cpuidle/current_driver", "acpi_idle");
        tree.write_sys("devices/system/cpu/cpuidle/current_governor_ro", "menu");
        assert_eq!(read_driver(&tree.roots()).unwrap().governor, "menu");
    }

    #[test]
    fn no_cpuidle_says_why_and_how() {
        let tree = FixtureTree::new();
        let err = read_driver(&tree.roots()).unwrap_err();
        match &err {
            SysError::Unavailable { reason, fix, .. } => {
                assert!(reason.contains("cpuidle.off=1"), "{reason}");
                assert!(fix.is_some());
            }
            other => panic!("expected Unavailable, got {other}"),
        }
        assert!(matches!(
            read_states(&tree.roots(), 0),
            Err(SysError::Unavailable { .. })
        ));
    }

    #[test]
    fn corrupt_latency_names_the_file() {
        let tree = FixtureTree::new();
        tree.cpuidle_driver("intel_idle", "menu");
        tree.cpuidle_state(0, 0, &state("POLL", 0, 0, 0));
        tree.write_sys("devices/system/cpu/cpu0/cpuidle/state0/latency", "fast");
        let err = read_states(&tree.roots(), 0).unwrap_err().to_string();
        assert!(
            err.contains("state0/latency") && err.contains("fast"),
            "{err}"
        );
    }

    /// The live oracle: what the reader returns is what sysfs holds, on every online CPU.
    #[test]
    #[ignore = "live: this machine's cpuidle"]
    fn live_states_match_sysfs() {
        // The settings tests disable states for a moment; not while this compares.
        let _lock = crate::fixture::live_cpuidle_lock();
        let roots = Roots::default();
        if !cpuidle_dir(&roots).is_dir() {
            crate::skip_test!("this machine has no cpuidle in sysfs");
            return;
        }
        let read = |path: String| std::fs::read_to_string(path).unwrap().trim().to_string();
        for cpu in topology::read_online(&roots).unwrap() {
            let states = read_states(&roots, cpu).unwrap();
            // As many states as stateK directories: none with the `none` driver.
            let dirs = std::fs::read_dir(format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle"))
                .map(|d| {
                    d.filter_map(Result::ok)
                        .filter(|e| e.file_name().to_string_lossy().starts_with("state"))
                        .count()
                })
                .unwrap_or(0);
            assert_eq!(states.len(), dirs, "cpu{cpu}");
            if states.is_empty() {
                eprintln!("cpu{cpu}: the cpuidle driver registered no states");
                continue;
            }
            for (k, s) in states.iter().enumerate() {
                let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{k}");
                assert_eq!(s.name, read(format!("{dir}/name")));
                assert_eq!(s.desc, read(format!("{dir}/desc")));
                assert_eq!(s.latency_us.to_string(), read(format!("{dir}/latency")));
                assert_eq!(
                    s.target_residency_us.to_string(),
                    read(format!("{dir}/residency"))
                );
                assert_eq!(s.disabled, read(format!("{dir}/disable")) != "0");
            }
            // Counters only grow, so the reader's value lies between two direct reads.
            let dir = format!(
                "/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{}",
                states.len() - 1
            );
            let before: u64 = read(format!("{dir}/usage")).parse().unwrap();
            let counters = read_counters(&roots, cpu).unwrap();
            let after: u64 = read(format!("{dir}/usage")).parse().unwrap();
            let usage = counters.last().unwrap().usage;
            assert!(
                before <= usage && usage <= after,
                "{before} <= {usage} <= {after}"
            );
        }
        let driver = read_driver(&roots).unwrap();
        assert_eq!(
            driver.driver,
            read("/sys/devices/system/cpu/cpuidle/current_driver".into())
        );
    }

    /// This project's machines are KVM guests with the haltpoll driver: POLL then haltpoll.
    #[test]
    #[ignore = "live: this machine's cpuidle"]
    fn live_haltpoll_machine_has_poll_and_haltpoll() {
        let roots = Roots::default();
        match read_driver(&roots) {
            Ok(d) if d.driver == "haltpoll" => {
                for cpu in topology::read_online(&roots).unwrap() {
                    let names: Vec<String> = read_states(&roots, cpu)
                        .unwrap()
                        .into_iter()
                        .map(|s| s.name)
                        .collect();
                    assert_eq!(names, ["POLL", "haltpoll idle"], "cpu{cpu}");
                }
            }
            other => crate::skip_test!("cpuidle driver is {other:?}, not haltpoll"),
        }
    }
}
