//! Running the powerlens binary from integration tests against a chosen sysfs root and
//! results database, so that no test reads the host's meters or writes the user's database.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The binary with `POWERLENS_SYSFS_ROOT` at `sysfs`, the real procfs, and `POWERLENS_DB`
/// at `db`.
pub fn command(sysfs: &Path, db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_powerlens"));
    c.env("POWERLENS_SYSFS_ROOT", sysfs)
        .env_remove("POWERLENS_PROCFS_ROOT")
        .env("POWERLENS_DB", db);
    c
}

/// Runs the binary to completion (see [`command`]).
pub fn powerlens(sysfs: &Path, db: &Path, args: &[&str]) -> Output {
    command(sysfs, db).args(args).output().unwrap()
}

/// The JSON on stdout; on failure, panics showing stdout and stderr.
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", String::from_utf8_lossy(&o.stdout), stderr(o)))
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args` (a powerlens command line) where tracefs is mounted: directly when the host
/// has it, else inside a private mount namespace that mounts it (the host is untouched).
pub fn with_tracefs(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = if Path::new("/sys/kernel/tracing/events").is_dir() {
        let mut c = Command::new(args[0]);
        c.args(&args[1..]);
        c
    } else {
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount -t tracefs nodev /sys/kernel/tracing && exec \"$@\"")
            .arg("sh")
            .args(args);
        c
    };
    c.env_remove("POWERLENS_SYSFS_ROOT")
        .env_remove("POWERLENS_PROCFS_ROOT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}
