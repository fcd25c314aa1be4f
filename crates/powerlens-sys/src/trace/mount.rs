//! Making tracefs available to this process without touching the host's mounts.
//!
//! `perf` mounts tracefs itself when it is missing; a recorder should not be less capable,
//! but neither should it leave a mount behind. So when tracefs is not mounted and we may
//! mount, this process moves into a mount namespace of its own (`unshare(CLONE_NEWNS)`),
//! makes every mount in it private (so nothing propagates back to the host) and mounts
//! tracefs there. The mount disappears with the process; the host never sees it.

use crate::perf_caps::{tracefs_dir, MOUNT_TRACEFS_FIX};
use crate::{Roots, SysError};

/// Ensures tracefs is reachable below the sysfs root. Returns `Some(note)` when it had to
/// mount it privately, `None` when it was there already.
///
/// Must be called before the process starts any thread: `unshare(CLONE_NEWNS)` fails in a
/// multi-threaded process. Only the real `/sys/kernel/tracing` is ever mounted on: a
/// fixture sysfs root whose `kernel/tracing` links to it (a fixture that fakes a meter but
/// traces live) takes the same private-mount path, so that it behaves on a machine where
/// tracefs is not mounted as the real root does; any other fixture root gets the usual
/// "not mounted" error.
pub fn ensure_tracefs(roots: &Roots) -> Result<Option<String>, SysError> {
    if tracefs_dir(roots).is_some() {
        return Ok(None);
    }
    let not_mounted = |reason: String| SysError::Unavailable {
        what: "tracefs".to_string(),
        reason,
        fix: Some(MOUNT_TRACEFS_FIX.to_string()),
    };
    if roots.sysfs != std::path::Path::new("/sys") && !links_to_the_real_tracefs(roots) {
        return Err(not_mounted(format!(
            "tracefs is not mounted below the sysfs root {}",
            roots.sysfs.display()
        )));
    }
    mount_privately().map_err(|e| {
        not_mounted(format!(
            "tracefs is not mounted, and mounting it in a private mount namespace failed: {e}"
        ))
    })?;
    if tracefs_dir(roots).is_none() {
        return Err(not_mounted(
            "tracefs was mounted privately but /sys/kernel/tracing/events is still missing"
                .to_string(),
        ));
    }
    Ok(Some(
        "tracefs was not mounted: powerlens mounted it in a private mount namespace for this process only (the host's mounts are untouched)"
            .to_string(),
    ))
}

/// Whether the fixture root's `kernel/tracing` is (a link to) the real tracefs mount point.
fn links_to_the_real_tracefs(roots: &Roots) -> bool {
    std::fs::canonicalize(roots.sys("kernel/tracing"))
        .ok()
        .as_deref()
        == Some(std::path::Path::new(REAL_TRACEFS))
}

const REAL_TRACEFS: &str = "/sys/kernel/tracing";

fn mount_privately() -> std::io::Result<()> {
    use std::ffi::CStr;
    fn check(rc: libc::c_int, what: &str) -> std::io::Result<()> {
        if rc == 0 {
            Ok(())
        } else {
            let e = std::io::Error::last_os_error();
            Err(std::io::Error::new(e.kind(), format!("{what}: {e}")))
        }
    }
    let root: &CStr = c"/";
    let none: &CStr = c"none";
    let target: &CStr = c"/sys/kernel/tracing";
    let fstype: &CStr = c"tracefs";
    // SAFETY: plain syscalls with valid NUL-terminated strings; no memory is shared.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS), "unshare(CLONE_NEWNS)")?;
        check(
            libc::mount(
                none.as_ptr(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ),
            "making / private",
        )?;
        check(
            libc::mount(
                none.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            ),
            "mount -t tracefs",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::FixtureTree;

    #[test]
    fn a_fixture_root_is_never_mounted_on() {
        let tree = FixtureTree::new();
        let e = ensure_tracefs(&tree.roots()).unwrap_err().to_string();
        assert!(e.contains("not mounted below the sysfs root"), "{e}");
        assert!(e.contains(MOUNT_TRACEFS_FIX), "{e}");
    }

    #[test]
    fn a_fixture_root_linking_elsewhere_is_not_the_real_tracefs() {
        let tree = FixtureTree::new();
        std::fs::create_dir_all(tree.sys_path("kernel")).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), tree.sys_path("kernel/tracing")).unwrap();
        assert!(!links_to_the_real_tracefs(&tree.roots()));
        let e = ensure_tracefs(&tree.roots()).unwrap_err().to_string();
        assert!(e.contains("not mounted below the sysfs root"), "{e}");
    }

    #[test]
    fn a_fixture_root_linking_to_the_real_tracefs_is_recognised() {
        let tree = FixtureTree::new();
        std::fs::create_dir_all(tree.sys_path("kernel")).unwrap();
        std::os::unix::fs::symlink(REAL_TRACEFS, tree.sys_path("kernel/tracing")).unwrap();
        assert!(links_to_the_real_tracefs(&tree.roots()));
    }

    #[test]
    fn a_mounted_tracefs_is_left_alone() {
        let tree = FixtureTree::new();
        tree.tracepoint("sched/sched_switch", 316);
        assert_eq!(ensure_tracefs(&tree.roots()).unwrap(), None);
    }
}
