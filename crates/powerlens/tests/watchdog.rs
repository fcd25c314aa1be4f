//! The live tests' watchdog (tests/common): a test that hangs ends its test binary with
//! exit status 124, naming itself, and the processes it started are killed, instead of
//! holding CI until its 90-minute limit.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

/// Not run by itself (ignored): the test below runs it in a child test binary with a
/// one-second limit, as a hung live test.
#[test]
#[ignore = "run by a_hung_test_ends_its_binary_with_status_124"]
fn helper_hangs_on_purpose() {
    let _watchdog = common::watchdog(common::live_test_limit());
    let mut sleeper = Command::new("sleep").arg("600").spawn().unwrap();
    std::fs::write(
        std::env::var("SLEEPER_PID_FILE").unwrap(),
        sleeper.id().to_string(),
    )
    .unwrap();
    let _ = sleeper.wait();
}

#[test]
fn a_hung_test_ends_its_binary_with_status_124() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    let log = dir.path().join("stderr");
    let start = Instant::now();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_hangs_on_purpose",
            "--ignored",
            "--nocapture",
        ])
        .env("POWERLENS_TEST_LIMIT_S", "1")
        .env("SLEEPER_PID_FILE", &pid_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // This test bounds itself: were the watchdog broken, the child would sleep 600 s.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the watchdog did not end the hung test within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(124), "{err}");
    assert!(
        err.contains("helper_hangs_on_purpose: still running after 1s"),
        "{err}"
    );
    // The `sleep 600` it started is gone (killed, then reaped by init).
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let stat = format!("/proc/{}/stat", pid.trim());
    while Instant::now() < deadline {
        let alive = std::fs::read_to_string(&stat)
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false);
        if !alive {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the test's sleep {pid} still runs");
}
