//! Which idle states `powerlens wake` measures, and the settings that select each: checked
//! completely before anything changes, so that bad input leaves the machine as it was.
//! Selecting and restoring go through `powerlens_sys::settings` (`cstates=NAME`: only that
//! state enabled on every online CPU; journal and `powerlens restore` for a killed run).

use anyhow::bail;
use powerlens_sys::settings::{self, Setting};
use powerlens_sys::{cpuidle, topology, Roots, SysError};

/// The name of the one "state" a CPU without cpuidle states has.
pub const DEFAULT_IDLE: &str = "default-idle (no cpuidle driver)";

const NO_DRIVER_FIX: &str = "boot a kernel with a cpuidle driver: intel_idle or acpi_idle on bare \
     metal; in a KVM guest, the haltpoll driver (modprobe cpuidle-haltpoll, or boot with \
     cpuidle_haltpoll.force=1); or run without --cstates to measure the default idle";

/// One series to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The state's name, or a label when no single state is selected.
    pub label: String,
    /// The setting that leaves only this state enabled; `None`: change nothing.
    pub setting: Option<Setting>,
}

/// What the run measures and what the reader must know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `current_driver`, or `none`.
    pub driver: String,
    /// The CPU's cpuidle states (name, declared exit latency µs), in index order.
    pub states: Vec<(String, u64)>,
    pub targets: Vec<Target>,
    pub notes: Vec<String>,
}

impl Plan {
    /// The declared exit latency of a state by name.
    pub fn declared(&self, name: &str) -> Option<u64> {
        self.states
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, l)| *l)
    }

    pub fn state_names(&self) -> Vec<String> {
        self.states.iter().map(|(n, _)| n.clone()).collect()
    }
}

/// Checks that `cpu` exists and is online.
pub fn check_cpu(roots: &Roots, cpu: u32) -> anyhow::Result<()> {
    let online = topology::read_online(roots)?;
    let list = online
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if !roots.sys(format!("devices/system/cpu/cpu{cpu}")).is_dir() {
        bail!("--cpu {cpu}: this machine has no cpu{cpu} (online CPUs: {list}); fix: pick one of them");
    }
    if !online.contains(&cpu) {
        bail!(
            "--cpu {cpu}: cpu{cpu} is offline (online CPUs: {list}); fix: bring it online \
             (echo 1 > /sys/devices/system/cpu/cpu{cpu}/online) or pick an online CPU"
        );
    }
    Ok(())
}

/// Works out the targets for `--cstates` (`None`: measure as configured, change nothing;
/// `all`: every state of the CPU in turn; else the named states). Reads only.
pub fn plan(roots: &Roots, cpu: u32, cstates: Option<&[String]>) -> anyhow::Result<Plan> {
    let driver = match cpuidle::read_driver(roots) {
        Ok(d) => d.driver,
        Err(SysError::Unavailable { .. }) => "none".to_string(),
        Err(e) => return Err(e.into()),
    };
    let states: Vec<(String, u64)> = match cpuidle::read_states(roots, cpu) {
        Ok(states) => states.into_iter().map(|s| (s.name, s.latency_us)).collect(),
        Err(SysError::Unavailable { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut notes = Vec::new();
    let all = cstates.is_some_and(|c| c.len() == 1 && c[0].eq_ignore_ascii_case("all"));
    if states.is_empty() {
        if let Some(names) = cstates.filter(|_| !all) {
            bail!(
                "--cstates {}: cpu{cpu} has no cpuidle states to select (cpuidle driver: {driver}); \
                 available: none. Without a cpuidle driver the kernel idles in its default idle \
                 routine (x86: HLT), which declares no exit latency and cannot be disabled. \
                 Fix: {NO_DRIVER_FIX}",
                names.join(",")
            );
        }
        notes.push(format!(
            "cpu{cpu} has no cpuidle states (driver: {driver}): the measured state is the kernel's \
             default idle, `{DEFAULT_IDLE}`, which declares no exit latency{}",
            if all {
                "; --cstates all has nothing else to walk"
            } else {
                ""
            }
        ));
        return Ok(Plan {
            driver,
            states,
            targets: vec![Target {
                label: DEFAULT_IDLE.to_string(),
                setting: None,
            }],
            notes,
        });
    }
    let names: Vec<String> = states.iter().map(|(n, _)| n.clone()).collect();
    let targets = match cstates {
        None => {
            let enabled = cpuidle::read_states(roots, cpu)?
                .into_iter()
                .filter(|s| !s.disabled)
                .map(|s| s.name)
                .collect::<Vec<_>>();
            vec![Target {
                label: format!("as configured: {}", enabled.join("+")),
                setting: None,
            }]
        }
        Some(_) if all => names
            .iter()
            .map(|n| Target {
                label: n.clone(),
                setting: Some(Setting::CStatesOnly(vec![n.clone()])),
            })
            .collect(),
        Some(requested) => {
            let mut targets = Vec::new();
            for want in requested {
                let Some(name) = names.iter().find(|n| n.eq_ignore_ascii_case(want)) else {
                    bail!(
                        "--cstates {want}: cpu{cpu} has no idle state named `{want}`; available: {} \
                         (or `all`)",
                        names.join(", ")
                    );
                };
                targets.push(Target {
                    label: name.clone(),
                    setting: Some(Setting::CStatesOnly(vec![name.clone()])),
                });
            }
            targets
        }
    };
    Ok(Plan {
        driver,
        states,
        targets,
        notes,
    })
}

/// Checks that every target's setting can be applied (files writable, no journal of
/// unrestored settings in the way), before the first is applied.
pub fn check_settings(roots: &Roots, plan: &Plan) -> anyhow::Result<()> {
    for target in &plan.targets {
        if let Some(setting) = &target.setting {
            settings::check(roots, std::slice::from_ref(setting)).map_err(|e| {
                anyhow::anyhow!(
                    "cannot select idle state `{}` (by disabling the others): {e}",
                    target.label
                )
            })?;
        }
    }
    Ok(())
}

/// Refuses to run without root: system-wide tracepoints, SCHED_FIFO and cpuidle writes
/// all need it.
pub fn require_root() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "powerlens wake needs root: it opens tracepoints on every CPU (perf), runs its \
             measuring thread SCHED_FIFO and, with --cstates, writes cpuidle `disable` files. \
             Fix: sudo powerlens wake …"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_sys::fixture::{FixtureTree, IdleStateSpec};

    fn haltpoll() -> FixtureTree {
        let tree = FixtureTree::new();
        tree.online_cpus("0-1");
        tree.cpuidle_driver("haltpoll", "haltpoll");
        for cpu in 0..2 {
            for (k, (name, latency)) in [("POLL", 0), ("haltpoll idle", 1)].into_iter().enumerate()
            {
                let spec = IdleStateSpec {
                    name: name.into(),
                    latency_us: latency,
                    ..IdleStateSpec::default()
                };
                tree.cpuidle_state(cpu, k as u32, &spec);
            }
        }
        tree
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn all_walks_every_state_and_names_match_any_case() {
        let tree = haltpoll();
        let plan = plan(&tree.roots(), 1, Some(&names(&["all"]))).unwrap();
        assert_eq!(plan.driver, "haltpoll");
        let labels: Vec<&str> = plan.targets.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["POLL", "haltpoll idle"]);
        assert_eq!(
            plan.targets[1].setting,
            Some(Setting::CStatesOnly(names(&["haltpoll idle"])))
        );
        assert_eq!(plan.declared("haltpoll idle"), Some(1));
        let one = super::plan(&tree.roots(), 0, Some(&names(&["poll"]))).unwrap();
        assert_eq!(one.targets[0].label, "POLL");
        let none = super::plan(&tree.roots(), 0, None).unwrap();
        assert_eq!(none.targets[0].label, "as configured: POLL+haltpoll idle");
        assert_eq!(none.targets[0].setting, None);
    }

    #[test]
    fn unknown_state_lists_the_available_ones() {
        let tree = haltpoll();
        let e = plan(&tree.roots(), 0, Some(&names(&["POLL", "C6"])))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no idle state named `C6`") && e.contains("available: POLL, haltpoll idle"),
            "{e}"
        );
    }

    /// This VM's boot: no cpuidle driver, no per-CPU states.
    #[test]
    fn no_driver_measures_default_idle_and_refuses_names() {
        let tree = FixtureTree::new();
        tree.online_cpus("0-1");
        tree.cpuidle_driver("none", "menu");
        let p = plan(&tree.roots(), 1, None).unwrap();
        assert_eq!(p.targets.len(), 1);
        assert_eq!(p.targets[0].label, DEFAULT_IDLE);
        assert!(p.notes[0].contains("no cpuidle states (driver: none)"));
        let all = plan(&tree.roots(), 1, Some(&names(&["all"]))).unwrap();
        assert_eq!(all.targets[0].label, DEFAULT_IDLE);
        assert!(all.notes[0].contains("nothing else to walk"));
        let e = plan(&tree.roots(), 1, Some(&names(&["POLL"])))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("available: none") && e.contains("intel_idle"),
            "{e}"
        );
        // No cpuidle directory at all reads the same.
        let bare = FixtureTree::new();
        bare.online_cpus("0");
        assert_eq!(plan(&bare.roots(), 0, None).unwrap().driver, "none");
    }

    #[test]
    fn offline_and_missing_cpus() {
        let tree = haltpoll();
        tree.online_cpus("0");
        let e = check_cpu(&tree.roots(), 1).unwrap_err().to_string();
        assert!(
            e.contains("cpu1 is offline") && e.contains("online CPUs: 0"),
            "{e}"
        );
        let e = check_cpu(&tree.roots(), 7).unwrap_err().to_string();
        assert!(e.contains("no cpu7"), "{e}");
        check_cpu(&tree.roots(), 0).unwrap();
    }
}
