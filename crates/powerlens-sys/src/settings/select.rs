//! Picking the settings of one kind out of a list: what the plan and each kind's own
//! module (affinity, cpufreq, PM QoS, turbo) share, kept apart so that neither depends on
//! the other.

use super::Setting;

/// The first setting `select` takes, with the setting as the user wrote it.
pub(crate) fn select<'a, T: 'a>(
    settings: &'a [Setting],
    select: impl Fn(&'a Setting) -> Option<T>,
) -> Option<(String, T)> {
    settings
        .iter()
        .find_map(|s| select(s).map(|value| (s.to_string(), value)))
}
