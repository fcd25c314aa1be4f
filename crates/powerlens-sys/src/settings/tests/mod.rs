//! Settings against fixture trees: the oracle is the tree itself, compared byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::fixture::{FixtureTree, IdleStateSpec, PolicySpec};

mod live;

const STATES: [&str; 3] = ["POLL", "C1", "C6"];

/// Two CPUs with one intel_pstate policy each, three idle states, a turbo switch, and a
/// scratch directory for the journal and a stand-in PM QoS device.
struct Machine {
    tree: FixtureTree,
    scratch: tempfile::TempDir,
}

impl Machine {
    fn new() -> Self {
        let tree = FixtureTree::new();
        tree.online_cpus("0-1");
        tree.cpuidle_driver("intel_idle", "menu");
        for cpu in 0..2 {
            for (k, name) in STATES.iter().enumerate() {
                let spec = IdleStateSpec {
                    name: name.to_string(),
                    latency_us: k as u64 * 10,
                    ..IdleStateSpec::default()
                };
                tree.cpuidle_state(cpu, k as u32, &spec);
            }
            tree.cpufreq_policy(
                cpu,
                &PolicySpec {
                    cpus: cpu.to_string(),
                    driver: "intel_pstate".into(),
                    governor: "powersave".into(),
                    epp: Some("balance_performance".into()),
                    scaling_min_khz: 800_000,
                    scaling_max_khz: 4_200_000,
                    cpuinfo_min_khz: 400_000,
                    cpuinfo_max_khz: 4_700_000,
                    cur_khz: 1_000_000,
                },
            );
            let policy = format!("devices/system/cpu/cpufreq/policy{cpu}");
            tree.write_sys(
                format!("{policy}/scaling_available_governors"),
                "performance powersave",
            );
            tree.write_sys(
                format!("{policy}/energy_performance_available_preferences"),
                "default performance balance_performance balance_power power",
            );
        }
        tree.write_sys("devices/system/cpu/intel_pstate/no_turbo", 0);
        let scratch = tempfile::tempdir().unwrap();
        std::fs::write(scratch.path().join("cpu_dma_latency"), [0u8; 4]).unwrap();
        Machine { tree, scratch }
    }

    fn roots(&self) -> Roots {
        self.tree.roots()
    }

    fn options(&self) -> ApplyOptions {
        ApplyOptions {
            journal: self.scratch.path().join("run/powerlens/journal.json"),
            pm_qos_device: self.scratch.path().join("cpu_dma_latency"),
        }
    }

    fn sys(&self, relative: &str) -> PathBuf {
        self.tree.sys_path(relative)
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.sys(relative)).unwrap()
    }

    fn apply(&self, text: &str) -> Result<Applied, SettingsError> {
        apply_with(
            &self.roots(),
            &parse_settings(text).unwrap(),
            &self.options(),
        )
    }

    fn check(&self, text: &str) -> Result<(), SettingsError> {
        check_with(
            &self.roots(),
            &parse_settings(text).unwrap(),
            &self.options(),
        )
    }

    /// Every file of the sysfs tree and its bytes.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, files);
                } else {
                    files.insert(path.clone(), std::fs::read(&path).unwrap());
                }
            }
        }
        let mut files = BTreeMap::new();
        walk(&self.roots().sysfs, &mut files);
        files
    }
}

fn disable(cpu: u32, state: usize) -> String {
    format!("devices/system/cpu/cpu{cpu}/cpuidle/state{state}/disable")
}

const EVERYTHING: &str = "governor=performance,epp=performance,min_freq=1GHz,max_freq=2GHz,\
                          turbo=off,cstates=POLL,C1,pm_qos=20us,cpus=1";

#[test]
fn apply_writes_every_setting_and_drop_restores_byte_for_byte() {
    let m = Machine::new();
    let before = m.snapshot();
    let applied = m.apply(EVERYTHING).unwrap();
    for cpu in 0..2 {
        let policy = format!("devices/system/cpu/cpufreq/policy{cpu}");
        assert_eq!(
            m.read(&format!("{policy}/scaling_governor")),
            "performance\n"
        );
        assert_eq!(
            m.read(&format!("{policy}/energy_performance_preference")),
            "performance\n"
        );
        assert_eq!(m.read(&format!("{policy}/scaling_min_freq")), "1000000\n");
        assert_eq!(m.read(&format!("{policy}/scaling_max_freq")), "2000000\n");
        assert_eq!(m.read(&disable(cpu, 0)), "0\n");
        assert_eq!(m.read(&disable(cpu, 1)), "0\n");
        assert_eq!(m.read(&disable(cpu, 2)), "1\n");
    }
    assert_eq!(m.read("devices/system/cpu/intel_pstate/no_turbo"), "1\n");
    assert_eq!(
        std::fs::read(&m.options().pm_qos_device).unwrap(),
        20i32.to_ne_bytes()
    );
    assert_eq!(applied.affinity(), Some(vec![1]));
    assert_eq!(applied.pm_qos_us(), Some(20));
    // 2 policies × 4 attributes, turbo, 2 CPUs × 3 states.
    assert_eq!(applied.changed_files(), 15);
    let journal = m.options().journal;
    assert_eq!(applied.journal(), Some(journal.as_path()));
    assert!(journal.is_file());

    drop(applied);
    assert_eq!(m.snapshot(), before);
    assert!(!journal.exists(), "the journal is removed after restoring");
}

#[test]
fn explicit_restore_reports_success_and_allows_the_next_configuration() {
    let m = Machine::new();
    let before = m.snapshot();
    m.apply("cstate.C6=off,turbo=off")
        .unwrap()
        .restore()
        .unwrap();
    assert_eq!(m.snapshot(), before);
    // compare alternates configurations: the next apply starts from the originals.
    let applied = m.apply("governor=performance").unwrap();
    assert_eq!(
        m.read("devices/system/cpu/cpufreq/policy1/scaling_governor"),
        "performance\n"
    );
    applied.restore().unwrap();
    assert_eq!(m.snapshot(), before);
}

#[test]
fn a_failed_third_write_undoes_the_first_two_and_names_the_third() {
    let m = Machine::new();
    let before = m.snapshot();
    let settings = parse_settings("governor=performance,turbo=off,cstates=POLL").unwrap();
    let options = m.options();
    let plan = plan::Plan::build(&m.roots(), &settings, &options).unwrap();
    // The two governors, then turbo.
    let third = m.sys("devices/system/cpu/intel_pstate/no_turbo");
    assert_eq!(plan.writes[2].path, third);
    // Root ignores file modes, so a directory stands in for an attribute that refuses.
    std::fs::remove_file(&third).unwrap();
    std::fs::create_dir(&third).unwrap();

    let err = applied::execute(&m.roots(), plan, &options).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, SettingsError::Write { .. })
            && text.contains("turbo=off")
            && text.contains(&third.display().to_string()),
        "{text}"
    );
    // Everything but the sabotaged file is as before, including both governors.
    let mut after = m.snapshot();
    let mut expected = before.clone();
    expected.remove(&third);
    after.retain(|path, _| !path.starts_with(&third));
    assert_eq!(after, expected);
    assert!(!options.journal.exists(), "nothing left to restore");
}

#[test]
fn the_journal_is_written_before_any_change() {
    let m = Machine::new();
    let before = m.snapshot();
    // A journal that cannot be written stops apply before the first write.
    let mut options = m.options();
    options.journal = m.sys("devices/system/cpu/online/journal.json");
    let err = apply_with(
        &m.roots(),
        &parse_settings("cstates=POLL").unwrap(),
        &options,
    )
    .unwrap_err();
    assert!(matches!(err, SettingsError::Journal { .. }), "{err}");
    assert_eq!(m.snapshot(), before);

    // And it holds the originals, not the new values.
    let applied = m.apply("cstates=POLL").unwrap();
    let journal: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(m.options().journal).unwrap()).unwrap();
    let originals = journal["originals"].as_array().unwrap();
    assert_eq!(originals.len(), 6);
    assert!(originals.iter().all(|o| o["value"] == "0\n"), "{journal}");
    assert_eq!(journal["pid"], std::process::id());
    drop(applied);
}

#[test]
fn restore_from_journal_after_a_simulated_crash() {
    let m = Machine::new();
    let before = m.snapshot();
    let journal = m.options().journal;
    std::mem::forget(
        m.apply("governor=performance,turbo=off,cstate.C1=off")
            .unwrap(),
    );
    assert_eq!(m.read(&disable(1, 1)), "1\n");

    // A second run refuses to record the crashed one's settings as originals.
    let err = m.apply("turbo=on").unwrap_err().to_string();
    assert!(err.contains("already"), "{err}");

    // 2 governors, turbo, C1 on 2 CPUs.
    assert_eq!(restore_from_journal(&m.roots(), &journal).unwrap(), 5);
    assert_eq!(m.snapshot(), before);
    assert!(!journal.exists());
    assert_eq!(restore_from_journal(&m.roots(), &journal).unwrap(), 0);
}

#[test]
fn a_journal_left_by_a_dead_process_blocks_apply_until_restored() {
    let m = Machine::new();
    let before = m.snapshot();
    let journal = m.options().journal;
    std::mem::forget(m.apply("turbo=off").unwrap());
    let dead_pid = journal::orphan_for_test(&journal);

    for err in [m.check("cstates=POLL"), m.apply("cstates=POLL").map(drop)] {
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains(&format!("pid {dead_pid}")) && err.contains("powerlens restore"),
            "{err}"
        );
    }
    assert_eq!(restore_from_journal(&m.roots(), &journal).unwrap(), 1);
    assert_eq!(m.snapshot(), before);
}

#[test]
fn restore_from_journal_refuses_another_root_and_paths_outside_it() {
    let m = Machine::new();
    let journal = m.options().journal;
    std::mem::forget(m.apply("turbo=off").unwrap());
    let other = FixtureTree::new();
    let errors = restore_from_journal(&other.roots(), &journal).unwrap_err();
    assert!(errors[0].to_string().contains("--sysfs-root"), "{errors:?}");

    let text = std::fs::read_to_string(&journal).unwrap();
    let outside = m.sys("../../etc/passwd");
    let tampered = text.replace(
        &m.sys("devices/system/cpu/intel_pstate/no_turbo")
            .display()
            .to_string(),
        &outside.display().to_string(),
    );
    std::fs::write(&journal, tampered).unwrap();
    let errors = restore_from_journal(&m.roots(), &journal).unwrap_err();
    assert!(
        errors[0].to_string().contains("not below the sysfs root"),
        "{errors:?}"
    );
    assert!(journal.exists(), "kept for a look by hand");
}

#[test]
fn check_refuses_what_the_machine_cannot_do() {
    let m = Machine::new();
    let cases = [
        ("governor=ondemand", "valid here: performance, powersave"),
        ("cstate.C9=off", "valid here: POLL, C1, C6"),
        (
            "cstates=POLL,C2",
            "no online CPU has an idle state named `C2`",
        ),
        (
            "epp=fast",
            "valid here: default, performance, balance_performance",
        ),
        ("epp=power", "under the performance governor"),
        ("min_freq=5GHz", "400MHz–4700MHz"),
        (
            "min_freq=3GHz,max_freq=2GHz",
            "minimum frequency is above the maximum",
        ),
        ("cpus=0-3", "CPU 2-3 is not online"),
        ("cstates=POLL,cstate.C1=on", "both set"),
    ];
    for (text, expected) in cases {
        // The performance governor is what makes epp=power impossible on intel_pstate.
        let text = if text == "epp=power" {
            "governor=performance,epp=power"
        } else {
            text
        };
        let err = m.check(text).unwrap_err().to_string();
        assert!(err.contains(expected), "{text}: {err}");
    }
    m.check(EVERYTHING).unwrap();
    m.check("epp=128,cstate.poll=off").unwrap();
}

#[test]
fn check_refuses_cpufreq_settings_without_cpufreq() {
    // A virtual machine: cpuidle but no cpufreq, no turbo switch, no PM QoS device here.
    let tree = FixtureTree::new();
    tree.online_cpus("0");
    tree.cpuidle_driver("haltpoll", "haltpoll");
    let options = ApplyOptions {
        journal: tree.sys_path("journal.json"),
        pm_qos_device: tree.sys_path("no-such-device"),
    };
    for text in [
        "governor=powersave",
        "epp=balance_power",
        "max_freq=2GHz",
        "turbo=off",
    ] {
        let err = check_with(&tree.roots(), &parse_settings(text).unwrap(), &options)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("{text} cannot be applied: no cpufreq"))
                && err.contains("virtual machine"),
            "{err}"
        );
    }
    let err = check_with(
        &tree.roots(),
        &parse_settings("pm_qos=20us").unwrap(),
        &options,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("no-such-device does not exist"), "{err}");
}

#[test]
fn turbo_uses_the_switch_the_driver_offers() {
    let m = Machine::new();
    std::fs::remove_file(m.sys("devices/system/cpu/intel_pstate/no_turbo")).unwrap();
    let err = m.check("turbo=on").unwrap_err().to_string();
    assert!(err.contains("intel_pstate has no turbo switch"), "{err}");
    // acpi-cpufreq: cpufreq/boost, not inverted.
    m.tree.write_sys("devices/system/cpu/cpufreq/boost", 1);
    let applied = m.apply("turbo=off").unwrap();
    assert_eq!(m.read("devices/system/cpu/cpufreq/boost"), "0\n");
    drop(applied);
    assert_eq!(m.read("devices/system/cpu/cpufreq/boost"), "1\n");
}

#[test]
fn raising_the_minimum_above_the_maximum_writes_the_maximum_first() {
    let m = Machine::new();
    m.tree.write_sys(
        "devices/system/cpu/cpufreq/policy0/scaling_max_freq",
        1_000_000,
    );
    let settings = parse_settings("min_freq=3GHz,max_freq=4GHz").unwrap();
    let plan = plan::Plan::build(&m.roots(), &settings, &m.options()).unwrap();
    let files: Vec<String> = plan
        .writes
        .iter()
        .map(|w| w.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // policy0's maximum (1 GHz) is below the new minimum; policy1's (4.2 GHz) is not.
    assert_eq!(
        files,
        [
            "scaling_max_freq",
            "scaling_min_freq",
            "scaling_min_freq",
            "scaling_max_freq"
        ]
    );
}

#[test]
fn a_failed_restore_is_reported_restores_the_rest_and_keeps_the_journal() {
    let m = Machine::new();
    let journal = m.options().journal;
    let applied = m.apply("governor=performance,turbo=off").unwrap();
    // Something else replaces an attribute while the configuration runs.
    let no_turbo = m.sys("devices/system/cpu/intel_pstate/no_turbo");
    std::fs::remove_file(&no_turbo).unwrap();
    std::fs::create_dir(&no_turbo).unwrap();

    let errors = applied.restore().unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let text = errors[0].to_string();
    assert!(
        text.contains("turbo=off") && text.contains(&no_turbo.display().to_string()),
        "{text}"
    );
    for cpu in 0..2 {
        let governor = format!("devices/system/cpu/cpufreq/policy{cpu}/scaling_governor");
        assert_eq!(m.read(&governor), "powersave\n");
    }
    assert!(journal.exists(), "kept for `powerlens restore`");
}
