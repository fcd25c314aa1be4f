//! `cstate.NAME=on|off` and `cstates=NAME[,NAME…]`: cpuidle states, through
//! `cpuN/cpuidle/stateK/disable` of every online CPU. Names match case-insensitively.

use super::error::SettingsError;
use super::write::FileWrite;
use super::Setting;
use crate::{cpuidle, topology, Roots};

/// The idle state names of each online CPU, in state order.
struct IdleStates {
    per_cpu: Vec<(u32, Vec<String>)>,
}

impl IdleStates {
    fn read(roots: &Roots, label: &str) -> Result<Self, SettingsError> {
        let from_sys = |e| SettingsError::from_sys(label, e);
        let per_cpu = topology::read_online(roots)
            .map_err(from_sys)?
            .into_iter()
            .map(|cpu| {
                let states = cpuidle::read_states(roots, cpu).map_err(from_sys)?;
                Ok((cpu, states.into_iter().map(|s| s.name).collect()))
            })
            .collect::<Result<Vec<_>, SettingsError>>()?;
        Ok(IdleStates { per_cpu })
    }

    /// Every name some online CPU has, in first-seen order: what an error lists.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for name in self.per_cpu.iter().flat_map(|(_, states)| states) {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }

    fn require(&self, label: &str, name: &str) -> Result<(), SettingsError> {
        let names = self.names();
        if names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return Ok(());
        }
        let reason = if names.is_empty() {
            "the online CPUs have no cpuidle states".to_string()
        } else {
            format!("no online CPU has an idle state named `{name}`")
        };
        Err(SettingsError::InvalidValue {
            setting: label.to_string(),
            reason,
            valid: names,
        })
    }

    /// A `disable` write for every state of every online CPU that `disable` has an
    /// opinion on (`Some(true)`: disable it).
    fn writes(
        &self,
        roots: &Roots,
        label: &str,
        disable: impl Fn(&str) -> Option<bool>,
    ) -> Vec<FileWrite> {
        let mut writes = Vec::new();
        for (cpu, states) in &self.per_cpu {
            // cpuidle numbers the states 0, 1, 2… without gaps, so the index is the K of stateK.
            for (k, name) in states.iter().enumerate() {
                if let Some(off) = disable(name) {
                    writes.push(FileWrite {
                        setting: label.to_string(),
                        path: roots.sys(format!(
                            "devices/system/cpu/cpu{cpu}/cpuidle/state{k}/disable"
                        )),
                        value: u8::from(off).to_string(),
                    });
                }
            }
        }
        writes
    }
}

pub(crate) fn plan(roots: &Roots, settings: &[Setting]) -> Result<Vec<FileWrite>, SettingsError> {
    // Read once, and only when an idle-state setting is present.
    let mut states: Option<IdleStates> = None;
    let mut writes = Vec::new();
    for setting in settings {
        type Disable<'a> = Box<dyn Fn(&str) -> Option<bool> + 'a>;
        let (required, disable): (&[String], Disable) = match setting {
            Setting::CState { name, enabled } => (
                std::slice::from_ref(name),
                Box::new(move |state: &str| state.eq_ignore_ascii_case(name).then_some(!enabled)),
            ),
            Setting::CStatesOnly(allowed) => (
                allowed,
                Box::new(move |state: &str| {
                    Some(!allowed.iter().any(|a| a.eq_ignore_ascii_case(state)))
                }),
            ),
            _ => continue,
        };
        let label = setting.to_string();
        let states = match &mut states {
            Some(states) => states,
            unread => unread.insert(IdleStates::read(roots, &label)?),
        };
        for name in required {
            states.require(&label, name)?;
        }
        writes.extend(states.writes(roots, &label, disable));
    }
    Ok(writes)
}
