//! `--config NAME=SETTINGS` values and the settings journal `powerlens restore` reads.
//!
//! A parsed setting list prints back (its canonical text) to the same settings: the text
//! the journal and the results record is the configuration that was applied. Accepted
//! settings are then checked against a fixture machine, as `compare`/`sweep` check
//! them before running anything (which writes nothing).
//!
//! A journal is restored onto a fixture sysfs tree (input: the journal's JSON in which
//! `@SYSFS@` stands for the tree's root, since the journal must name the root it was
//! written for). Checks: a restore that succeeds wrote every recorded original value back
//! (the first value recorded for a file wins, as values are restored last-applied first)
//! and removed the journal; a journal naming a file outside the root is refused.

use std::path::{Component, Path, PathBuf};

use powerlens_sys::fixture::{FixtureTree, IdleStateSpec, PolicySpec};
use powerlens_sys::settings::{self, parse_settings, restore_from_journal, ApplyOptions};
use powerlens_sys::Roots;

use super::scratch;

pub const CONFIG_DICT: &[&str] = &[
    "governor=",
    "epp=",
    "min_freq=",
    "max_freq=",
    "turbo=",
    "cstate.",
    "cstates=",
    "pm_qos=",
    "cpus=",
    "GHz",
    "MHz",
    "kHz",
    "us",
    "ms",
    "µs",
    "on",
    "off",
    "powersave",
    "POLL",
];

pub const JOURNAL_DICT: &[&str] = &[
    "\"format\": ",
    "\"powerlens settings journal v1\"",
    "\"pid\": ",
    "\"start_time\": ",
    "\"sysfs_root\": ",
    "\"originals\": [",
    "\"setting\": ",
    "\"path\": ",
    "\"value\": ",
    "@SYSFS@",
    "@SYSFS@/devices/system/cpu/cpufreq/policy0/scaling_governor",
    "/../",
];

thread_local! {
    /// A fixture machine with two cpufreq policies and two idle states, built once.
    static MACHINE: FixtureTree = {
        let tree = FixtureTree::new();
        tree.online_cpus("0-1");
        for cpu in 0..2 {
            tree.cpufreq_policy(cpu, &PolicySpec {
                cpus: cpu.to_string(),
                driver: "acpi-cpufreq".into(),
                governor: "schedutil".into(),
                epp: None,
                scaling_min_khz: 800_000,
                scaling_max_khz: 3_000_000,
                cpuinfo_min_khz: 800_000,
                cpuinfo_max_khz: 3_000_000,
                cur_khz: 2_000_000,
            });
            for (i, name) in ["POLL", "C1"].iter().enumerate() {
                tree.cpuidle_state(cpu, i as u32, &IdleStateSpec {
                    name: name.to_string(),
                    desc: name.to_string(),
                    latency_us: i as u64 * 2,
                    residency_us: i as u64 * 4,
                    ..Default::default()
                });
            }
        }
        tree
    };
}

pub fn config(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let Ok(parsed) = parse_settings(&text) else {
        return;
    };
    assert!(!parsed.is_empty(), "an accepted empty configuration");
    let canonical = settings::settings_text(&parsed);
    let again = parse_settings(&canonical)
        .unwrap_or_else(|e| panic!("the canonical text {canonical:?} does not parse: {e}"));
    assert_eq!(
        again, parsed,
        "{text:?} printed as {canonical:?} reads back differently"
    );
    scratch::with_dir(|dir| {
        MACHINE.with(|tree| {
            let options = ApplyOptions {
                journal: dir.join("journal.json"),
                pm_qos_device: dir.join("cpu_dma_latency"),
            };
            let _ = settings::check_with(&tree.roots(), &parsed, &options);
        })
    });
}

pub fn journal(input: &[u8]) {
    crate::tree::with_tree(b"", |root| {
        let sys = root.join("sys");
        let text = String::from_utf8_lossy(input).replace("@SYSFS@", &sys.to_string_lossy());
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            let _ = restore(&sys, root, &text);
            return;
        };
        // The files the journal names, made to exist (with other content) when they are
        // below the root, so that restoring can write them.
        let originals = json["originals"].as_array().cloned().unwrap_or_default();
        let mut expected: Vec<(PathBuf, String)> = Vec::new();
        let mut outside = false;
        for o in &originals {
            let (Some(path), Some(value)) = (o["path"].as_str(), o["value"].as_str()) else {
                continue;
            };
            let path = PathBuf::from(path);
            if !inside(&sys, &path) {
                outside = true;
                continue;
            }
            if let Some(parent) = path.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            if path.is_dir() || std::fs::write(&path, "changed\n").is_err() {
                continue;
            }
            if !expected.iter().any(|(p, _)| *p == path) {
                expected.push((path, value.to_string()));
            }
        }
        let journal_path = root.join("journal.json");
        if let Ok(n) = restore(&sys, root, &text) {
            assert!(
                !outside,
                "a journal naming a file outside the root was restored"
            );
            assert_eq!(n, originals.len(), "restored count");
            assert!(!journal_path.exists(), "the journal stays after a restore");
            for (path, value) in expected {
                let now = std::fs::read_to_string(&path).unwrap_or_default();
                assert_eq!(now, value, "{} not restored", path.display());
            }
        }
    });
}

fn restore(sys: &Path, root: &Path, text: &str) -> Result<usize, ()> {
    let _ = std::fs::create_dir_all(sys);
    let journal = root.join("journal.json");
    std::fs::write(&journal, text).expect("writing the journal");
    let roots = Roots {
        sysfs: sys.to_path_buf(),
        procfs: root.join("proc"),
    };
    restore_from_journal(&roots, &journal).map_err(|_| ())
}

/// Whether `path` is lexically below `root` (this fixture tree has no symbolic links).
fn inside(root: &Path, path: &Path) -> bool {
    path.starts_with(root)
        && path
            .strip_prefix(root)
            .map(|rest| rest.components().all(|c| matches!(c, Component::Normal(_))))
            .unwrap_or(false)
}
