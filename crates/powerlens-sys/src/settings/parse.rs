//! The setting list of `--config NAME=SETTING[,SETTING…]` (the CLI has split off `NAME=`).
//!
//! Settings are separated by commas. A list-valued setting (`cstates=POLL,C1`,
//! `cpus=0-3,6`) takes the comma-separated items that follow it, up to the next item that
//! has an `=`: so `cstates=POLL,C1,turbo=off` is two settings.

use super::error::{SettingsError, VALID_SETTINGS};
use super::Setting;
use crate::sysfs;

/// Parses a setting list, e.g. `governor=powersave,max_freq=2GHz,cstates=POLL,C1`.
pub fn parse_settings(text: &str) -> Result<Vec<Setting>, SettingsError> {
    let mut settings: Vec<Setting> = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(SettingsError::syntax(
                text,
                format!("an empty setting (a doubled or trailing comma?); valid settings: {VALID_SETTINGS}"),
            ));
        }
        let Some((name, value)) = item.split_once('=') else {
            extend_list(settings.last_mut(), item)?;
            continue;
        };
        let setting = parse_one(item, name.trim(), value.trim())?;
        if let Some(earlier) = settings.iter().find(|s| s.key() == setting.key()) {
            return Err(SettingsError::syntax(
                item,
                format!("{} is already set by `{earlier}`", setting.key()),
            ));
        }
        settings.push(setting);
    }
    Ok(settings)
}

/// Adds an item without `=` to the list-valued setting before it.
fn extend_list(previous: Option<&mut Setting>, item: &str) -> Result<(), SettingsError> {
    match previous {
        Some(Setting::CStatesOnly(names)) => names.push(item.to_string()),
        Some(Setting::Cpus(cpus)) => {
            cpus.extend(parse_cpus(item, item)?);
            cpus.sort_unstable();
            cpus.dedup();
        }
        _ => {
            return Err(SettingsError::syntax(
                item,
                format!("not a NAME=VALUE setting (only cstates= and cpus= take comma-separated lists); valid settings: {VALID_SETTINGS}"),
            ))
        }
    }
    Ok(())
}

fn parse_one(item: &str, name: &str, value: &str) -> Result<Setting, SettingsError> {
    let bad = |expected: &str| SettingsError::syntax(item, format!("expected {expected}"));
    let nonempty = |what: &str| {
        if value.is_empty() {
            Err(bad(what))
        } else {
            Ok(value.to_string())
        }
    };
    let setting = match name {
        "governor" => Setting::Governor(nonempty("a governor name, e.g. governor=powersave")?),
        "epp" => Setting::Epp(nonempty("an EPP name, e.g. epp=balance_power")?),
        "min_freq" | "max_freq" => {
            let khz = parse_frequency_khz(value)
                .ok_or_else(|| bad("a frequency with a unit: GHz, MHz or kHz, e.g. 1.2GHz"))?;
            if name == "min_freq" {
                Setting::MinFreqKhz(khz)
            } else {
                Setting::MaxFreqKhz(khz)
            }
        }
        "turbo" => Setting::Turbo(parse_on_off(value).ok_or_else(|| bad("on or off"))?),
        "cstates" => {
            Setting::CStatesOnly(vec![nonempty("idle state names, e.g. cstates=POLL,C1")?])
        }
        "pm_qos" => Setting::PmQosUs(
            parse_latency_us(value)
                .ok_or_else(|| bad("a latency with a unit: us, ms or s, e.g. pm_qos=20us"))?,
        ),
        "cpus" => Setting::Cpus(parse_cpus(item, value)?),
        _ => match name.strip_prefix("cstate.") {
            Some(state) if !state.is_empty() => Setting::CState {
                name: state.to_string(),
                enabled: parse_on_off(value).ok_or_else(|| bad("on or off, e.g. cstate.C6=off"))?,
            },
            _ => {
                return Err(SettingsError::syntax(
                    item,
                    format!("unknown setting `{name}`; valid settings: {VALID_SETTINGS}"),
                ))
            }
        },
    };
    Ok(setting)
}

fn parse_on_off(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

fn parse_cpus(item: &str, text: &str) -> Result<Vec<u32>, SettingsError> {
    match sysfs::parse_cpu_list(text) {
        Some(cpus) if !cpus.is_empty() => Ok(cpus),
        _ => Err(SettingsError::syntax(
            item,
            "expected a CPU list such as cpus=0-3,6 (CPU numbers up to 65535)",
        )),
    }
}

/// Splits `1.2GHz` into 1.2 and the multiplier of the unit that matched (case-insensitive).
fn number_with_unit(text: &str, units: &[(&str, f64)]) -> Option<f64> {
    let lower = text.trim().to_lowercase();
    units.iter().find_map(|(unit, scale)| {
        let number: f64 = lower.strip_suffix(unit)?.trim().parse().ok()?;
        (number.is_finite() && number >= 0.0).then_some(number * scale)
    })
}

/// `1.2GHz`, `2000MHz`, `800000kHz` → kHz, the unit of cpufreq sysfs. A bare number is
/// refused: kHz and MHz are both common, and a wrong guess is off by 1000.
pub(crate) fn parse_frequency_khz(text: &str) -> Option<u64> {
    let khz = number_with_unit(text, &[("ghz", 1e6), ("mhz", 1e3), ("khz", 1.0)])?.round();
    (khz >= 1.0 && khz <= u64::MAX as f64).then_some(khz as u64)
}

/// `20us`, `20µs`, `1.5ms`, `0` → µs, the unit of `/dev/cpu_dma_latency`, at most
/// `i32::MAX` (the device takes an s32).
pub(crate) fn parse_latency_us(text: &str) -> Option<u32> {
    if text.trim() == "0" {
        return Some(0);
    }
    let us = number_with_unit(text, &[("us", 1.0), ("µs", 1.0), ("ms", 1e3), ("s", 1e6)])?;
    let us = us.round();
    (us <= i32::MAX as f64).then_some(us as u32)
}

/// kHz in the largest unit that keeps it whole: 1200000 → `1200MHz`, 2000000 → `2GHz`.
pub(crate) fn format_khz(khz: u64) -> String {
    match khz {
        k if k % 1_000_000 == 0 => format!("{}GHz", k / 1_000_000),
        k if k % 1000 == 0 => format!("{}MHz", k / 1000),
        k => format!("{k}kHz"),
    }
}

/// CPU numbers (ascending) as a kernel CPU list: `[0,1,2,3,6]` → `0-3,6`.
pub(crate) fn format_cpu_list(cpus: &[u32]) -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &cpu in cpus {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == cpu => *end = cpu,
            _ => ranges.push((cpu, cpu)),
        }
    }
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_parses_and_prints_back() {
        let text = "governor=powersave,epp=balance_power,min_freq=1.2GHz,max_freq=2000MHz,\
                    turbo=off,cstate.C6=off,cstates=POLL,C1,pm_qos=20us,cpus=0-3,6";
        let settings = parse_settings(text).unwrap();
        assert_eq!(
            settings,
            vec![
                Setting::Governor("powersave".into()),
                Setting::Epp("balance_power".into()),
                Setting::MinFreqKhz(1_200_000),
                Setting::MaxFreqKhz(2_000_000),
                Setting::Turbo(false),
                Setting::CState {
                    name: "C6".into(),
                    enabled: false
                },
                Setting::CStatesOnly(vec!["POLL".into(), "C1".into()]),
                Setting::PmQosUs(20),
                Setting::Cpus(vec![0, 1, 2, 3, 6]),
            ]
        );
        let printed = super::super::settings_text(&settings);
        assert_eq!(
            printed,
            "governor=powersave,epp=balance_power,min_freq=1200MHz,max_freq=2GHz,turbo=off,\
             cstate.C6=off,cstates=POLL,C1,pm_qos=20us,cpus=0-3,6"
        );
        assert_eq!(parse_settings(&printed).unwrap(), settings);
    }

    #[test]
    fn names_with_spaces_and_units_in_any_case() {
        let settings =
            parse_settings("cstate.haltpoll idle=OFF, pm_qos=1.5ms ,max_freq=800000khz").unwrap();
        assert_eq!(
            settings,
            vec![
                Setting::CState {
                    name: "haltpoll idle".into(),
                    enabled: false
                },
                Setting::PmQosUs(1500),
                Setting::MaxFreqKhz(800_000),
            ]
        );
        assert_eq!(parse_latency_us("0"), Some(0));
        assert_eq!(parse_latency_us("20µs"), Some(20));
        assert_eq!(parse_latency_us("3000s"), None, "beyond an s32 of µs");
    }

    #[test]
    fn errors_name_the_token_and_the_valid_forms() {
        let cases = [
            (
                "governor=powersave,fan=max",
                "`fan=max`",
                "valid settings: governor=NAME",
            ),
            ("turbo=maybe", "`turbo=maybe`", "on or off"),
            ("max_freq=2000", "`max_freq=2000`", "GHz, MHz or kHz"),
            ("pm_qos=fast", "`pm_qos=fast`", "us, ms or s"),
            ("cpus=3-1", "`cpus=3-1`", "CPU list"),
            ("cpus=0,x", "`x`", "CPU list"),
            ("governor=powersave,C1", "`C1`", "only cstates= and cpus="),
            (
                "turbo=on,,epp=power",
                "`turbo=on,,epp=power`",
                "empty setting",
            ),
            (
                "turbo=on,turbo=off",
                "`turbo=off`",
                "already set by `turbo=on`",
            ),
            ("cstate.=off", "`cstate.=off`", "unknown setting"),
            ("governor=", "`governor=`", "governor name"),
        ];
        for (text, token, hint) in cases {
            let err = parse_settings(text).unwrap_err().to_string();
            assert!(err.contains(token) && err.contains(hint), "{text}: {err}");
        }
    }

    #[test]
    fn frequencies_and_cpu_lists_print_compactly() {
        assert_eq!(format_khz(2_000_000), "2GHz");
        assert_eq!(format_khz(1_234_567), "1234567kHz");
        assert_eq!(format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(parse_frequency_khz("0GHz"), None);
    }
}
