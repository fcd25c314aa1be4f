//! `powerlens restore` end to end on a fixture tree: the settings a killed powerlens left
//! applied go back, and the journal goes away.

use std::path::Path;
use std::process::{Command, Output};

use powerlens_sys::fixture::{FixtureTree, IdleStateSpec};
use powerlens_sys::settings::{apply_with, journal, parse_settings, ApplyOptions};

fn restore(tree: &FixtureTree, journal: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .args(["restore", "--journal"])
        .arg(journal)
        .env("POWERLENS_SYSFS_ROOT", tree.sys_path(""))
        .env_remove("POWERLENS_PROCFS_ROOT")
        .output()
        .expect("run powerlens")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn restore_puts_back_what_a_killed_run_left_and_removes_the_journal() {
    let tree = FixtureTree::new();
    tree.online_cpus("0");
    tree.cpuidle_driver("intel_idle", "menu");
    for (k, name) in ["POLL", "C1", "C6"].into_iter().enumerate() {
        let spec = IdleStateSpec {
            name: name.into(),
            ..Default::default()
        };
        tree.cpuidle_state(0, k as u32, &spec);
    }
    let scratch = tempfile::tempdir().unwrap();
    let journal = scratch.path().join("journal.json");
    let options = ApplyOptions {
        journal: journal.clone(),
        pm_qos_device: scratch.path().join("unused"),
    };
    let c6 = tree.sys_path("devices/system/cpu/cpu0/cpuidle/state2/disable");
    let settings = parse_settings("cstates=POLL,C1").unwrap();
    // A run that never restores, as if SIGKILLed.
    std::mem::forget(apply_with(&tree.roots(), &settings, &options).unwrap());
    assert_eq!(std::fs::read_to_string(&c6).unwrap(), "1\n");

    // While the process that applied them lives, it restores them itself.
    let output = restore(&tree, &journal);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("still running"),
        "{}",
        text(&output.stderr)
    );

    // Now as the journal of a process that has ended.
    journal::orphan_for_test(&journal);

    let output = restore(&tree, &journal);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("restored 3 original values"),
        "{}",
        text(&output.stdout)
    );
    assert_eq!(std::fs::read_to_string(&c6).unwrap(), "0\n");
    assert!(!journal.exists());

    let output = restore(&tree, &journal);
    assert!(output.status.success());
    assert!(text(&output.stdout).contains("nothing to restore"));
}

#[test]
fn restore_help_says_when_it_is_needed() {
    let output = Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .args(["restore", "--help"])
        .output()
        .unwrap();
    let help = text(&output.stdout);
    assert!(
        help.contains("SIGKILL") && help.contains("journal"),
        "{help}"
    );
}
