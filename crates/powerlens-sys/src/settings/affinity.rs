//! `cpus=LIST`: the CPUs the measured command may run on. powerlens does not pin itself;
//! the runner applies the list to the child (`sched_setaffinity` before exec).

use super::error::SettingsError;
use super::parse::format_cpu_list;
use super::select::select;
use super::Setting;
use crate::{topology, Roots};

/// The affinity of the `cpus=` setting, once every CPU of it is known to be online.
pub(crate) fn plan(roots: &Roots, settings: &[Setting]) -> Result<Option<Vec<u32>>, SettingsError> {
    let Some((label, cpus)) = select(settings, |s| match s {
        Setting::Cpus(cpus) => Some(cpus),
        _ => None,
    }) else {
        return Ok(None);
    };
    let online = topology::read_online(roots).map_err(|e| SettingsError::from_sys(&label, e))?;
    let offline: Vec<u32> = cpus
        .iter()
        .copied()
        .filter(|c| !online.contains(c))
        .collect();
    if !offline.is_empty() {
        return Err(SettingsError::InvalidValue {
            setting: label,
            reason: format!("CPU {} is not online", format_cpu_list(&offline)),
            valid: vec![format!("online CPUs {}", format_cpu_list(&online))],
        });
    }
    Ok(Some(cpus.clone()))
}

/// Makes `command` run on `cpus` only: the child calls `sched_setaffinity` between fork
/// and exec, so powerlens itself keeps every CPU. A CPU number the kernel's CPU set cannot
/// hold is an error here; one the kernel refuses makes `spawn` fail.
pub fn restrict_command_to(
    command: &mut std::process::Command,
    cpus: &[u32],
) -> Result<(), SettingsError> {
    use std::os::unix::process::CommandExt;

    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let capacity = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &cpu in cpus {
        if cpu as usize >= capacity {
            return Err(SettingsError::InvalidValue {
                setting: format!("cpus={}", format_cpu_list(cpus)),
                reason: format!("CPU {cpu} is beyond the {capacity} CPUs an affinity mask holds"),
                valid: vec![format!("0-{}", capacity - 1)],
            });
        }
        // SAFETY: `cpu` is below the set's capacity, checked above.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    // SAFETY: the closure runs in the forked child before exec and only makes one system
    // call on a set built beforehand: async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed_list(status: &str) -> String {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("a Cpus_allowed_list line")
            .trim()
            .to_string()
    }

    /// The oracle: the kernel's view of the child's affinity in /proc/PID/status.
    #[test]
    fn the_child_runs_on_the_given_cpus_and_powerlens_keeps_its_own() {
        let online = topology::read_online(&Roots::default()).unwrap();
        let last = *online.last().unwrap();
        let ours_before = allowed_list(&std::fs::read_to_string("/proc/self/status").unwrap());
        let mut command = std::process::Command::new("cat");
        command.arg("/proc/self/status");
        restrict_command_to(&mut command, &[last]).unwrap();
        let output = command.output().unwrap();
        assert!(output.status.success());
        assert_eq!(
            allowed_list(&String::from_utf8_lossy(&output.stdout)),
            last.to_string()
        );
        let ours_after = allowed_list(&std::fs::read_to_string("/proc/self/status").unwrap());
        assert_eq!(ours_after, ours_before);
    }

    #[test]
    fn cpus_beyond_the_mask_are_refused() {
        let mut command = std::process::Command::new("true");
        let err = restrict_command_to(&mut command, &[0, 100_000])
            .unwrap_err()
            .to_string();
        assert!(err.contains("CPU 100000"), "{err}");
    }
}
