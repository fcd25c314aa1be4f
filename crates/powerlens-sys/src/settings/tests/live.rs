//! Settings on this machine's real sysfs and PM QoS device. The oracle is what the kernel
//! shows afterwards. Each test holds the live cpuidle lock (they change the same files) and a
//! [`SysfsRescue`] that puts the idle states back even when an assertion fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::super::pm_qos::{read_limit_us, PmQosRequest};
use super::super::*;
use crate::topology;

const CHILD_JOURNAL_ENV: &str = "POWERLENS_TEST_SETTINGS_CHILD_JOURNAL";
const CHILD_READY: &str = "powerlens-test-child: settings applied";

/// Every `cpuN/cpuidle/stateK/disable` of the online CPUs and its content, written back on
/// drop: the safety net under the code being tested.
struct SysfsRescue {
    saved: Vec<(PathBuf, String)>,
}

impl SysfsRescue {
    fn save() -> Self {
        let roots = Roots::default();
        let mut saved = Vec::new();
        for cpu in topology::read_online(&roots).unwrap() {
            for k in 0.. {
                let path = roots.sys(format!(
                    "devices/system/cpu/cpu{cpu}/cpuidle/state{k}/disable"
                ));
                match std::fs::read_to_string(&path) {
                    Ok(text) => saved.push((path, text)),
                    Err(_) => break,
                }
            }
        }
        SysfsRescue { saved }
    }

    fn current(&self) -> Vec<(PathBuf, String)> {
        self.saved
            .iter()
            .map(|(path, _)| (path.clone(), std::fs::read_to_string(path).unwrap()))
            .collect()
    }
}

impl Drop for SysfsRescue {
    fn drop(&mut self) {
        for (path, text) in &self.saved {
            let _ = std::fs::write(path, text);
        }
    }
}

/// Why this machine cannot run the live tests, if it cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: cpuidle states and /dev/cpu_dma_latency need root".into());
    }
    let state1 = Path::new("/sys/devices/system/cpu/cpu0/cpuidle/state1/disable");
    if !state1.is_file() {
        return Some("cpu0 has no second cpuidle state to disable".into());
    }
    if !Path::new(PM_QOS_DEVICE).exists() {
        return Some(format!("{PM_QOS_DEVICE} does not exist"));
    }
    None
}

/// What a live test holds: the idle states to put back, the original contents to compare
/// with, a scratch directory for the journal, and the lock (released last).
struct Live {
    rescue: SysfsRescue,
    original: Vec<(PathBuf, String)>,
    scratch: tempfile::TempDir,
    _lock: std::sync::MutexGuard<'static, ()>,
}

impl Live {
    /// `None`, after saying why, on a machine that cannot run live tests.
    fn start() -> Option<Live> {
        if let Some(reason) = skip_reason() {
            crate::skip_test!("{reason}");
            return None;
        }
        let lock = crate::fixture::live_cpuidle_lock();
        let rescue = SysfsRescue::save();
        Some(Live {
            original: rescue.current(),
            rescue,
            scratch: tempfile::tempdir().unwrap(),
            _lock: lock,
        })
    }

    fn journal(&self) -> PathBuf {
        self.scratch.path().join("settings-journal.json")
    }

    fn options(&self) -> ApplyOptions {
        options_with_journal(self.journal())
    }

    fn assert_states_restored(&self) {
        assert_eq!(
            self.rescue.current(),
            self.original,
            "every disable file is back"
        );
    }
}

fn disable_values(state: usize) -> Vec<String> {
    let roots = Roots::default();
    topology::read_online(&roots)
        .unwrap()
        .into_iter()
        .map(|cpu| {
            let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{state}/disable");
            std::fs::read_to_string(path).unwrap().trim().to_string()
        })
        .collect()
}

fn options_with_journal(journal: PathBuf) -> ApplyOptions {
    ApplyOptions {
        journal,
        pm_qos_device: PathBuf::from(PM_QOS_DEVICE),
    }
}

#[test]
#[ignore = "live: this machine's cpuidle and PM QoS (root)"]
fn live_cstates_and_pm_qos_are_in_force_while_held_and_gone_after() {
    let Some(live) = Live::start() else { return };
    let limit_before = read_limit_us(Path::new(PM_QOS_DEVICE)).unwrap();
    let options = live.options();
    let settings = parse_settings("cstates=POLL,pm_qos=7us").unwrap();

    check_with(&Roots::default(), &settings, &options).unwrap();
    let applied = apply_with(&Roots::default(), &settings, &options).unwrap();
    let online = disable_values(0).len();
    assert_eq!(disable_values(0), vec!["0"; online], "POLL stays enabled");
    assert_eq!(disable_values(1), vec!["1"; online], "state1 is disabled");
    // The device reads the aggregate: the smallest request, ours unless another is smaller.
    let held = read_limit_us(Path::new(PM_QOS_DEVICE)).unwrap();
    assert!(held <= 7, "limit while held: {held} µs");
    assert!(options.journal.is_file());

    applied.restore().unwrap();
    live.assert_states_restored();
    assert_eq!(
        read_limit_us(Path::new(PM_QOS_DEVICE)).unwrap(),
        limit_before,
        "the request ends when the device closes"
    );
    assert!(!options.journal.exists());
}

#[test]
#[ignore = "live: this machine's cpuidle and PM QoS (root)"]
fn live_pm_qos_request_is_a_binary_s32() {
    let Some(_live) = Live::start() else { return };
    let device = Path::new(PM_QOS_DEVICE);
    let before = read_limit_us(device).unwrap();
    {
        let request = PmQosRequest::hold("pm_qos=3us", device, 3).unwrap();
        assert_eq!(request.latency_us(), 3);
        assert!(read_limit_us(device).unwrap() <= 3);
    }
    assert_eq!(read_limit_us(device).unwrap(), before);
}

/// The child of the SIGKILL test: applies `cstates=POLL` with the journal its parent
/// names, says so, and waits to be killed. Does nothing when run on its own.
#[test]
#[ignore = "run by live_sigkill_leaves_the_journal_and_restore_puts_the_states_back"]
fn helper_child_applies_and_waits() {
    let Some(journal) = std::env::var_os(CHILD_JOURNAL_ENV) else {
        return;
    };
    let options = options_with_journal(PathBuf::from(journal));
    let settings = parse_settings("cstates=POLL").unwrap();
    let _applied = apply_with(&Roots::default(), &settings, &options).unwrap();
    println!("{CHILD_READY}");
    // Killed long before this; if not, the guard restores on the way out.
    std::thread::sleep(Duration::from_secs(30));
}

#[test]
#[ignore = "live: this machine's cpuidle and PM QoS (root)"]
fn live_sigkill_leaves_the_journal_and_restore_puts_the_states_back() {
    let Some(live) = Live::start() else { return };
    let journal = live.journal();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "settings::tests::live::helper_child_applies_and_waits",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_JOURNAL_ENV, &journal)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let ready = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|line| line.contains(CHILD_READY));
    // SIGKILL: no destructor runs, nothing is restored by the child.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        ready,
        "the child did not apply the settings (see its stderr above)"
    );

    assert_eq!(disable_values(1), vec!["1"; disable_values(1).len()]);
    assert!(journal.is_file(), "the killed child leaves its journal");

    let restored = restore_from_journal(&Roots::default(), &journal).unwrap();
    assert_eq!(
        restored,
        live.rescue.saved.len(),
        "every state of every CPU"
    );
    live.assert_states_restored();
    assert!(!journal.exists());
}

const CHILD_CHECK_ENV: &str = "POWERLENS_TEST_SETTINGS_CHILD_CHECK";

/// The child of the non-root test: prints what `check` says about each setting list.
#[test]
#[ignore = "run by live_check_tells_a_non_root_user_to_use_sudo"]
fn helper_child_checks() {
    let Some(lists) = std::env::var_os(CHILD_CHECK_ENV) else {
        return;
    };
    for text in lists.to_string_lossy().split(';') {
        let result = check(&Roots::default(), &parse_settings(text).unwrap());
        println!("check {text}: {:?}", result.map_err(|e| e.to_string()));
    }
}

#[test]
#[ignore = "live: this machine's cpuidle and PM QoS (root)"]
fn live_check_tells_a_non_root_user_to_use_sudo() {
    if let Some(reason) = skip_reason() {
        crate::skip_test!("{reason}");
        return;
    }
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "settings::tests::live::helper_child_checks",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_CHECK_ENV, "cstates=POLL;pm_qos=20us")
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => {
            crate::skip_test!("cannot run setpriv to drop root: {e}");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = |setting: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("check {setting}:")))
            .unwrap_or_else(|| panic!("no line for {setting}: {stdout}"))
            .to_string()
    };
    let cstates = line("cstates=POLL");
    assert!(
        cstates.contains("cpuidle/state0/disable is not writable by this user")
            && cstates.contains("sudo"),
        "{cstates}"
    );
    let pm_qos = line("pm_qos=20us");
    assert!(
        pm_qos.contains(&format!("{PM_QOS_DEVICE} is not writable by this user")),
        "{pm_qos}"
    );
}
