//! What perf lets this process do: `perf_event_paranoid`, where tracefs is, whether a
//! tracepoint (`sched/sched_switch`) and a hardware counter (cycles) can be opened.
//! The probes open a real event on the running kernel; the tracepoint id comes from the
//! tracefs below the sysfs root.

use std::path::PathBuf;

use crate::perf::{
    permission_fix, PerfCounter, PerfEventAttr, PERF_COUNT_HW_CPU_CYCLES, PERF_TYPE_HARDWARE,
    PERF_TYPE_TRACEPOINT,
};
use crate::{sysfs, Availability, Roots, SysError};

/// The tracepoint probed for scheduler tracing.
pub const PROBE_TRACEPOINT: &str = "sched/sched_switch";

pub const MOUNT_TRACEFS_FIX: &str = "mount -t tracefs nodev /sys/kernel/tracing";

/// `perf_event_paranoid` (procfs `sys/kernel/perf_event_paranoid`).
pub fn read_paranoid(roots: &Roots) -> Result<i64, SysError> {
    sysfs::read_i64(roots.proc("sys/kernel/perf_event_paranoid"))
}

/// The mounted tracefs below the sysfs root: `kernel/tracing`, else the older
/// `kernel/debug/tracing`. A directory counts only when it holds `events` (the mount point
/// exists even when nothing is mounted on it).
pub fn tracefs_dir(roots: &Roots) -> Option<PathBuf> {
    ["kernel/tracing", "kernel/debug/tracing"]
        .into_iter()
        .map(|dir| roots.sys(dir))
        .find(|dir| dir.join("events").is_dir())
}

/// Like [`tracefs_dir`], but an error that says how to mount tracefs when it is missing.
pub fn require_tracefs(roots: &Roots) -> Result<PathBuf, SysError> {
    tracefs_dir(roots).ok_or_else(|| SysError::Unavailable {
        what: "tracefs".to_string(),
        reason: format!(
            "tracefs is not mounted (no events in {} or {})",
            roots.sys("kernel/tracing").display(),
            roots.sys("kernel/debug/tracing").display()
        ),
        fix: Some(MOUNT_TRACEFS_FIX.to_string()),
    })
}

/// The id of a tracepoint such as `sched/sched_switch`, from tracefs.
pub fn tracepoint_id(roots: &Roots, event: &str) -> Result<u64, SysError> {
    let dir = require_tracefs(roots)?;
    sysfs::read_u64(dir.join("events").join(event).join("id"))
}

/// Whether [`PROBE_TRACEPOINT`] can be opened system-wide on CPU 0, as a recording does.
pub fn probe_tracepoints(roots: &Roots) -> Availability {
    let id = match tracepoint_id(roots, PROBE_TRACEPOINT) {
        Ok(id) => id,
        Err(e) => return Availability::from_error(&e),
    };
    let attr = PerfEventAttr::counting(PERF_TYPE_TRACEPOINT, id);
    match PerfCounter::open(&attr, -1, 0) {
        Ok(probe) => {
            // Closing waits for an RCU grace period: not on the caller's time.
            crate::perf::close_detached(vec![probe]);
            Availability::yes(format!("opened {PROBE_TRACEPOINT} (id {id}) on cpu0"))
        }
        Err(e) => refused(
            roots,
            &format!("{PROBE_TRACEPOINT} (id {id})"),
            NO_TRACEPOINT,
            e,
        ),
    }
}

/// Whether a hardware cycle counter can be opened for this process.
pub fn probe_hardware_counters(roots: &Roots) -> Availability {
    let attr = PerfEventAttr::counting(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
    match PerfCounter::open(&attr, 0, -1) {
        Ok(probe) => {
            crate::perf::close_detached(vec![probe]);
            Availability::yes("opened the cycles counter")
        }
        Err(e) => refused(roots, "the cycles counter", NO_HARDWARE_PMU, e),
    }
}

/// What the kernel lacks when it answers ENOENT/ENODEV/EOPNOTSUPP for an event.
pub(crate) struct Missing {
    pub(crate) reason: &'static str,
    pub(crate) fix: &'static str,
}

const NO_HARDWARE_PMU: Missing = Missing {
    reason: "no hardware PMU (virtual machine?)",
    fix: "run on bare metal, or enable the virtual PMU (e.g. QEMU/KVM -cpu host,pmu=on)",
};

pub(crate) const NO_TRACEPOINT: Missing = Missing {
    reason: "the kernel does not know this tracepoint",
    fix: "a kernel built with CONFIG_TRACEPOINTS and CONFIG_FTRACE",
};

/// Turns the errno of a refused open into a reason and a fix.
pub(crate) fn refused(
    roots: &Roots,
    what: &str,
    missing: Missing,
    err: std::io::Error,
) -> Availability {
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => Availability::no(
            format!("permission denied opening {what}"),
            Some(permission_fix(read_paranoid(roots).ok())),
        ),
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => Availability::no(
            format!("{} for {what}: {err}", missing.reason),
            Some(missing.fix.to_string()),
        ),
        _ => Availability::no(format!("the kernel refused {what}: {err}"), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::FixtureTree;

    #[test]
    fn paranoid_and_tracefs_location() {
        let tree = FixtureTree::new();
        tree.perf_event_paranoid(-1);
        let roots = tree.roots();
        assert_eq!(read_paranoid(&roots).unwrap(), -1);
        assert_eq!(tracefs_dir(&roots), None);
        // An empty mount point is not a tracefs.
        std::fs::create_dir_all(tree.sys_path("kernel/tracing")).unwrap();
        assert_eq!(tracefs_dir(&roots), None);
        tree.write_sys("kernel/debug/tracing/events/sched/sched_switch/id", 316);
        assert_eq!(
            tracefs_dir(&roots),
            Some(tree.sys_path("kernel/debug/tracing"))
        );
        tree.tracepoint(PROBE_TRACEPOINT, 372);
        assert_eq!(tracefs_dir(&roots), Some(tree.sys_path("kernel/tracing")));
        assert_eq!(tracepoint_id(&roots, PROBE_TRACEPOINT).unwrap(), 372);
    }

    #[test]
    fn unmounted_tracefs_says_mount_it() {
        let tree = FixtureTree::new();
        let cap = probe_tracepoints(&tree.roots());
        assert!(!cap.available);
        assert!(cap.reason.contains("not mounted"), "{}", cap.reason);
        assert_eq!(cap.fix.as_deref(), Some(MOUNT_TRACEFS_FIX));
    }

    #[test]
    fn errno_to_reason() {
        let tree = FixtureTree::new();
        tree.perf_event_paranoid(2);
        let roots = tree.roots();
        let eacces = refused(
            &roots,
            "x",
            NO_HARDWARE_PMU,
            std::io::Error::from_raw_os_error(libc::EACCES),
        );
        assert!(eacces.fix.unwrap().contains("perf_event_paranoid is 2"));
        let enoent = refused(
            &roots,
            "x",
            NO_HARDWARE_PMU,
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(
            enoent.reason.contains("no hardware PMU"),
            "{}",
            enoent.reason
        );
    }

    /// Live: as root with tracefs mounted, the tracepoint opens.
    #[test]
    #[ignore = "live: this kernel's perf and tracefs"]
    fn live_tracepoint() {
        let roots = Roots::default();
        let cap = probe_tracepoints(&roots);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root && tracefs_dir(&roots).is_some() {
            assert!(cap.available, "{cap:?}");
        } else {
            crate::skip_test!("not root or tracefs not mounted ({cap:?})");
            assert!(cap.available || !cap.reason.is_empty());
        }
    }

    /// Live: this project's VMs have no hardware PMU, and the reason says so.
    #[test]
    #[ignore = "live: this kernel's perf and tracefs"]
    fn live_hardware_counters_have_a_reason() {
        let cap = probe_hardware_counters(&Roots::default());
        if !cap.available {
            assert!(!cap.reason.is_empty() && cap.fix.is_some(), "{cap:?}");
        }
    }
}
