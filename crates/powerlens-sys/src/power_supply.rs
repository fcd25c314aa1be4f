//! Batteries as `class/power_supply` shows them: whether each is discharging, its full
//! capacity and the charge left. The battery *energy source* (`energy::battery_meter`) meters a
//! discharging battery; these readings are what battery-life figures need besides energy.
//!
//! Units as sysfs has them: energy in µWh, charge in µAh, voltage in µV, `capacity` in
//! whole percent.

use std::path::{Path, PathBuf};

use crate::{sysfs, Roots, SysError};

/// The status of a battery that gives energy: every other (`Charging`, `Full`,
/// `Not charging`, `Unknown`) means the machine runs from the mains, not from it.
pub const DISCHARGING: &str = "Discharging";

/// Where a battery's full capacity comes from.
pub const FROM_ENERGY_FULL: &str = "energy_full";
pub const FROM_CHARGE_FULL: &str = "charge_full × voltage_now";

/// Where the charge left comes from.
pub const CHARGE_FROM_ENERGY: &str = "energy_now / energy_full";
pub const CHARGE_FROM_CHARGE: &str = "charge_now / charge_full";
pub const CHARGE_FROM_CAPACITY: &str = "capacity";

/// One battery (`type` = `Battery`).
#[derive(Debug, Clone, PartialEq)]
pub struct Battery {
    /// The directory name, e.g. `BAT0`.
    pub name: String,
    pub dir: PathBuf,
    /// `status` as the kernel writes it (`Discharging`, `Charging`, `Full`, …).
    pub status: String,
}

impl Battery {
    pub fn is_discharging(&self) -> bool {
        self.status == DISCHARGING
    }
}

/// Every battery, by name; empty when there is none (no `class/power_supply`, only mains).
pub fn batteries(roots: &Roots) -> Result<Vec<Battery>, SysError> {
    let mut out = Vec::new();
    for dir in sysfs::list_dir(roots.sys("class/power_supply"))? {
        if sysfs::read_optional_string(dir.join("type"))?.as_deref() != Some("Battery") {
            continue;
        }
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let status = sysfs::read_optional_string(dir.join("status"))?.unwrap_or_default();
        out.push(Battery { name, dir, status });
    }
    Ok(out)
}

/// Why none of `batteries` gives energy: each one's status, for the reason of an
/// unavailable battery meter or battery figure. `None` when one is discharging, or when
/// there is no battery at all.
pub fn not_discharging(batteries: &[Battery]) -> Option<String> {
    if batteries.is_empty() || batteries.iter().any(Battery::is_discharging) {
        return None;
    }
    let states: Vec<String> = batteries
        .iter()
        .map(|b| match b.status.as_str() {
            "" => format!("{} has no status", b.name),
            s => format!("{} is {s:?}", b.name),
        })
        .collect();
    Some(states.join(", "))
}

/// A battery's full capacity in Wh and where it comes from: `energy_full`, else
/// `charge_full` × `voltage_now` (the voltage the charge-based energy meter uses too, so
/// that a full charge and the energy of a run are in the same units). `None` when it has
/// neither.
pub fn energy_full_wh(dir: &Path) -> Result<Option<(f64, &'static str)>, SysError> {
    if let Some(uwh) = sysfs::read_optional_u64(dir.join("energy_full"))? {
        return Ok(Some((uwh as f64 / 1e6, FROM_ENERGY_FULL)));
    }
    let charge = sysfs::read_optional_u64(dir.join("charge_full"))?;
    let voltage = sysfs::read_optional_u64(dir.join("voltage_now"))?;
    // µAh × µV = 1e-12 Wh.
    Ok(charge
        .zip(voltage)
        .map(|(uah, uv)| (uah as f64 * uv as f64 * 1e-12, FROM_CHARGE_FULL)))
}

/// The charge left in percent of full, and where it comes from: `energy_now` over
/// `energy_full` or `charge_now` over `charge_full` (the percentage the kernel's
/// `capacity` shows, at the gauge's resolution rather than in whole percent), else
/// `capacity` itself. `None` when the battery has none of them.
pub fn charge_pct(dir: &Path) -> Result<Option<(f64, &'static str)>, SysError> {
    let ratio = |now: &str, full: &str| -> Result<Option<f64>, SysError> {
        let now = sysfs::read_optional_u64(dir.join(now))?;
        let full = sysfs::read_optional_u64(dir.join(full))?;
        Ok(now
            .zip(full.filter(|&f| f > 0))
            .map(|(n, f)| 100.0 * n as f64 / f as f64))
    };
    if let Some(pct) = ratio("energy_now", "energy_full")? {
        return Ok(Some((pct, CHARGE_FROM_ENERGY)));
    }
    if let Some(pct) = ratio("charge_now", "charge_full")? {
        return Ok(Some((pct, CHARGE_FROM_CHARGE)));
    }
    Ok(sysfs::read_optional_u64(dir.join("capacity"))?.map(|p| (p as f64, CHARGE_FROM_CAPACITY)))
}

/// A battery's figures for `info`: full capacity, energy now (and percent of full) and the
/// rate (`power_now`), each where the battery gives it, e.g. "full 45.07 Wh, now 36.58 Wh
/// (81%), rate 5.00 W". `None` when it gives none.
pub fn figures(dir: &Path) -> Result<Option<String>, SysError> {
    let mut parts = Vec::new();
    if let Some((wh, _)) = energy_full_wh(dir)? {
        parts.push(format!("full {wh:.2} Wh"));
    }
    let now_uwh = sysfs::read_optional_u64(dir.join("energy_now"))?;
    match (now_uwh, charge_pct(dir)?) {
        (Some(uwh), Some((pct, _))) => {
            parts.push(format!("now {:.2} Wh ({pct:.0}%)", uwh as f64 / 1e6));
        }
        (None, Some((pct, _))) => parts.push(format!("now {pct:.0}%")),
        (Some(uwh), None) => parts.push(format!("now {:.2} Wh", uwh as f64 / 1e6)),
        (None, None) => {}
    }
    if let Some(uw) = sysfs::read_optional_u64(dir.join("power_now"))? {
        parts.push(format!("rate {:.2} W", uw as f64 / 1e6));
    }
    Ok((!parts.is_empty()).then(|| parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{BatterySpec, FixtureTree};

    #[test]
    fn lists_batteries_only_with_their_status() {
        let tree = FixtureTree::new();
        tree.write_sys("class/power_supply/AC/type", "Mains");
        let spec = |status: &str| BatterySpec {
            status: status.into(),
            ..Default::default()
        };
        tree.battery("BAT0", &spec("Charging"));
        tree.battery("BAT1", &spec("Full"));
        let list = batteries(&tree.roots()).unwrap();
        let names: Vec<&str> = list.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["BAT0", "BAT1"]);
        assert_eq!(
            not_discharging(&list).unwrap(),
            "BAT0 is \"Charging\", BAT1 is \"Full\""
        );
        tree.battery("BAT2", &spec("Discharging"));
        assert_eq!(not_discharging(&batteries(&tree.roots()).unwrap()), None);
        assert!(batteries(&FixtureTree::new().roots()).unwrap().is_empty());
        assert_eq!(not_discharging(&[]), None);
    }

    #[test]
    fn full_capacity_from_energy_or_charge_times_voltage() {
        let tree = FixtureTree::new();
        let by_energy = tree.battery(
            "BAT0",
            &BatterySpec {
                energy_full_uwh: Some(57_000_000),
                charge_full_uah: Some(1),
                voltage_now_uv: Some(1),
                ..Default::default()
            },
        );
        assert_eq!(
            energy_full_wh(&by_energy).unwrap(),
            Some((57.0, FROM_ENERGY_FULL))
        );
        // 4 Ah at 11.4 V = 45.6 Wh.
        let by_charge = tree.battery(
            "BAT1",
            &BatterySpec {
                charge_full_uah: Some(4_000_000),
                voltage_now_uv: Some(11_400_000),
                ..Default::default()
            },
        );
        let (wh, from) = energy_full_wh(&by_charge).unwrap().unwrap();
        assert!((wh - 45.6).abs() < 1e-9, "{wh}");
        assert_eq!(from, FROM_CHARGE_FULL);
        let neither = tree.battery(
            "BAT2",
            &BatterySpec {
                energy_now_uwh: Some(5),
                ..Default::default()
            },
        );
        assert_eq!(energy_full_wh(&neither).unwrap(), None);
    }

    #[test]
    fn charge_from_the_finest_reading() {
        let tree = FixtureTree::new();
        // 42.75 of 57 Wh = 75%, finer than the whole-percent capacity file says.
        let dir = tree.battery(
            "BAT0",
            &BatterySpec {
                energy_now_uwh: Some(42_750_000),
                energy_full_uwh: Some(57_000_000),
                capacity_pct: Some(74),
                ..Default::default()
            },
        );
        assert_eq!(charge_pct(&dir).unwrap(), Some((75.0, CHARGE_FROM_ENERGY)));
        let dir = tree.battery(
            "BAT1",
            &BatterySpec {
                charge_now_uah: Some(1_000_000),
                charge_full_uah: Some(4_000_000),
                ..Default::default()
            },
        );
        assert_eq!(charge_pct(&dir).unwrap(), Some((25.0, CHARGE_FROM_CHARGE)));
        let dir = tree.battery(
            "BAT2",
            &BatterySpec {
                capacity_pct: Some(61),
                ..Default::default()
            },
        );
        assert_eq!(
            charge_pct(&dir).unwrap(),
            Some((61.0, CHARGE_FROM_CAPACITY))
        );
        let dir = tree.battery("BAT3", &BatterySpec::default());
        assert_eq!(charge_pct(&dir).unwrap(), None);
    }
}
