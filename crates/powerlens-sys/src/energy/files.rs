//! What a meter's sysfs files show once it has delivered so much energy: a RAPL zone's
//! `energy_uj` counting up and wrapping at `max_energy_range_uj`, a battery's
//! `energy_now` (or `charge_now` at its `voltage_now`) falling with `power_now` and
//! `capacity` following. The one writer of meter files, shared by the fake meters of the
//! tests ([`crate::fixture`]) and the mock executor's fixture meter, so that both show
//! the readers of this crate files laid out and rounded as a kernel driver's.
//!
//! Energy is whole microjoules and power whole microwatts, and every value is computed in
//! integers, so that a test can work each file's value out by hand.

use std::path::Path;

use crate::{sysfs, SysError};

/// µJ in one µWh.
const UJ_PER_UWH: u128 = 3600;

/// The files of one meter, and their values before it delivered anything.
#[derive(Debug, Clone, PartialEq)]
pub enum MeterFiles {
    /// A RAPL zone: `energy_uj` counts up from `start_uj` and wraps to 0 at `range_uj`.
    Rapl { start_uj: u64, range_uj: u64 },
    /// A battery that reports energy: `energy_now` (µWh) falls from `start_uwh`, rounded
    /// to the µWh; `power_now` (µW) is the power when `power_now` is written; `capacity`
    /// the whole percent of `full_uwh` left, when given.
    BatteryByEnergy {
        start_uwh: u64,
        power_now: bool,
        capacity_of_uwh: Option<u64>,
    },
    /// A battery that reports charge: `charge_now` (µAh) falls from `start_uah` by the
    /// energy over `voltage_uv`, rounded to the µAh; `capacity` the whole percent of
    /// `capacity_of_uah` left, when given.
    BatteryByCharge {
        start_uah: u64,
        voltage_uv: u64,
        capacity_of_uah: Option<u64>,
    },
    /// One hwmon energy input (`energyK_input`, the meter's "directory" is the file):
    /// counts up in µJ from `start_uj`.
    HwmonEnergy { start_uj: u64 },
    /// One hwmon power file (`powerK_input`, or an ACPI meter's `powerK_average`): the
    /// power in µW.
    HwmonPower,
}

/// The meter of one hwmon input file, by its name.
fn hwmon_input(path: &Path) -> Result<Option<MeterFiles>, SysError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name.starts_with("energy") && name.ends_with("_input") {
        let start_uj = sysfs::read_u64(path)?;
        return Ok(Some(MeterFiles::HwmonEnergy { start_uj }));
    }
    let power = name.ends_with("_input") || name.ends_with("_average");
    Ok((name.starts_with("power") && power).then_some(MeterFiles::HwmonPower))
}

impl MeterFiles {
    /// The meter whose files are in `dir` (or, for one hwmon input, the file `dir` itself),
    /// with their values now: `energy_uj` and
    /// `max_energy_range_uj` (RAPL), else `energy_now` (a battery, with `power_now` and
    /// `capacity` written when the battery has them), else `charge_now` and `voltage_now`.
    pub fn of_dir(dir: &Path) -> Result<MeterFiles, SysError> {
        if dir.is_file() {
            if let Some(files) = hwmon_input(dir)? {
                return Ok(files);
            }
        }
        let read = |file: &str| sysfs::read_optional_u64(dir.join(file));
        let has = |file: &str| dir.join(file).exists();
        let capacity_of = |full: &str| -> Result<Option<u64>, SysError> {
            Ok(if has("capacity") { read(full)? } else { None })
        };
        if let (Some(start_uj), Some(range_uj)) = (read("energy_uj")?, read("max_energy_range_uj")?)
        {
            return Ok(MeterFiles::Rapl { start_uj, range_uj });
        }
        if let Some(start_uwh) = read("energy_now")? {
            return Ok(MeterFiles::BatteryByEnergy {
                start_uwh,
                power_now: has("power_now"),
                capacity_of_uwh: capacity_of("energy_full")?,
            });
        }
        if let (Some(start_uah), Some(voltage_uv)) = (read("charge_now")?, read("voltage_now")?) {
            return Ok(MeterFiles::BatteryByCharge {
                start_uah,
                voltage_uv,
                capacity_of_uah: capacity_of("charge_full")?,
            });
        }
        Err(SysError::NotFound {
            path: dir.join("energy_uj"),
        })
    }

    /// Each file and its value once `used_uj` has been delivered, the power now `uw`.
    pub fn values(&self, used_uj: u64, uw: u64) -> Vec<(&'static str, u64)> {
        let used = u128::from(used_uj);
        let capacity = |now: u64, full: Option<u64>| {
            full.filter(|&f| f > 0)
                .map(|f| ("capacity", (u128::from(now) * 100 / u128::from(f)) as u64))
        };
        match *self {
            MeterFiles::Rapl { start_uj, range_uj } => {
                // A zone whose range reads 0 (unknown) counts on, as its firmware's does
                // until a wrap point nobody was told.
                let range = if range_uj == 0 {
                    u128::from(u64::MAX)
                } else {
                    u128::from(range_uj)
                };
                let raw = (u128::from(start_uj) + used) % range;
                vec![("energy_uj", raw as u64)]
            }
            MeterFiles::BatteryByEnergy {
                start_uwh,
                power_now,
                capacity_of_uwh,
            } => {
                let now = start_uwh.saturating_sub(rounded_div(used, UJ_PER_UWH));
                let mut files = vec![("energy_now", now)];
                files.extend(power_now.then_some(("power_now", uw)));
                files.extend(capacity(now, capacity_of_uwh));
                files
            }
            MeterFiles::BatteryByCharge {
                start_uah,
                voltage_uv,
                capacity_of_uah,
            } => {
                // 1 µAh at 1 µV is 3.6e-3 µJ: µAh = µJ × 10 000 / (36 × µV).
                let used_uah = rounded_div(used * 10_000, 36 * u128::from(voltage_uv.max(1)));
                let now = start_uah.saturating_sub(used_uah);
                let mut files = vec![("charge_now", now)];
                files.extend(capacity(now, capacity_of_uah));
                files
            }
            // "": the meter's path is the file itself.
            MeterFiles::HwmonEnergy { start_uj } => vec![("", start_uj.saturating_add(used_uj))],
            MeterFiles::HwmonPower => vec![("", uw)],
        }
    }

    /// Writes [`MeterFiles::values`] into `dir`, each through a temporary file renamed
    /// over it, so that a reader never sees half a number.
    pub fn write(&self, dir: &Path, used_uj: u64, uw: u64) -> Result<(), SysError> {
        for (file, value) in self.values(used_uj, uw) {
            let path = if file.is_empty() {
                dir.to_path_buf()
            } else {
                dir.join(file)
            };
            let tmp = path.with_extension("meter-tmp");
            std::fs::write(&tmp, format!("{value}\n"))
                .and_then(|()| std::fs::rename(&tmp, &path))
                .map_err(|source| SysError::Io { path, source })?;
        }
        Ok(())
    }
}

/// `n / d` rounded to the nearest whole number (halves up), as a gauge rounds.
fn rounded_div(n: u128, d: u128) -> u64 {
    ((n + d / 2) / d) as u64
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::energy::battery_meter::BatterySource;
    use crate::energy::powercap::PowercapSource;
    use crate::energy::EnergySource;
    use crate::fixture::{BatterySpec, FixtureTree};
    use crate::power_supply;

    #[test]
    fn rapl_counter_read_back_across_wraps() {
        let tree = FixtureTree::new();
        // 10 J from 4 J: at 50 W, read every 2 ms for 0.6 s, it wraps three times.
        let zone = tree.rapl_zone(0, "package-0", 4_000_000, 10_000_000);
        let files = MeterFiles::of_dir(&zone).unwrap();
        assert_eq!(
            files,
            MeterFiles::Rapl {
                start_uj: 4_000_000,
                range_uj: 10_000_000
            }
        );
        // 4 J + 7 J = 11 J: 1 J past the wrap.
        assert_eq!(files.values(7_000_000, 0), [("energy_uj", 1_000_000)]);
        let mut source = PowercapSource::open(&tree.roots()).unwrap();
        let at = Instant::now();
        for step in 1..=300u64 {
            // 50 W × 2 ms = 100 000 µJ a step.
            files.write(&zone, step * 100_000, 50_000_000).unwrap();
            source.read_joules(at).unwrap();
        }
        // 300 steps of 0.1 J: 30 J, from a counter that went 4 → 10 → 0 three times → 4 J.
        assert_eq!(source.read_joules(at).unwrap(), [30.0]);
        assert_eq!(sysfs::read_u64(zone.join("energy_uj")).unwrap(), 4_000_000);
    }

    #[test]
    fn energy_battery_read_back_by_its_meter_and_gauge() {
        let tree = FixtureTree::new();
        let dir = tree.battery(
            "BAT0",
            &BatterySpec {
                status: "Discharging".into(),
                energy_now_uwh: Some(5_000_000),
                energy_full_uwh: Some(10_000_000),
                power_now_uw: Some(36_000_000),
                capacity_pct: Some(50),
                ..Default::default()
            },
        );
        let files = MeterFiles::of_dir(&dir).unwrap();
        // 36 W for 1 s: 36 J = 10 000 µWh, from 5 Wh of 10: 4.99 Wh, 49%.
        assert_eq!(
            files.values(36_000_000, 36_000_000),
            [
                ("energy_now", 4_990_000),
                ("power_now", 36_000_000),
                ("capacity", 49)
            ]
        );
        // 1 799 µJ is under half a µWh: no change; 1 800 µJ is half, rounded up.
        assert_eq!(files.values(1_799, 0)[0], ("energy_now", 5_000_000));
        assert_eq!(files.values(1_800, 0)[0], ("energy_now", 4_999_999));
        // An empty battery stays at 0.
        assert_eq!(files.values(u64::MAX, 0)[0], ("energy_now", 0));

        // Its meter integrates power_now over the reads' instants; its gauge reads
        // energy_now / energy_full.
        let mut source = BatterySource::open(&tree.roots()).unwrap();
        let t0 = Instant::now();
        assert_eq!(source.read_joules(t0).unwrap(), [0.0]);
        files.write(&dir, 36_000_000, 36_000_000).unwrap();
        assert_eq!(
            source.read_joules(t0 + Duration::from_secs(1)).unwrap(),
            [36.0]
        );
        let (pct, from) = power_supply::charge_pct(&dir).unwrap().unwrap();
        assert_eq!((pct, from), (49.9, power_supply::CHARGE_FROM_ENERGY));
        assert_eq!(sysfs::read_u64(dir.join("capacity")).unwrap(), 49);
    }

    #[test]
    fn charge_battery_read_back_by_its_meter() {
        let tree = FixtureTree::new();
        let dir = tree.battery(
            "BAT1",
            &BatterySpec {
                status: "Discharging".into(),
                charge_now_uah: Some(2_000_000),
                charge_full_uah: Some(4_000_000),
                voltage_now_uv: Some(12_000_000),
                capacity_pct: Some(50),
                ..Default::default()
            },
        );
        let files = MeterFiles::of_dir(&dir).unwrap();
        assert_eq!(
            files,
            MeterFiles::BatteryByCharge {
                start_uah: 2_000_000,
                voltage_uv: 12_000_000,
                capacity_of_uah: Some(4_000_000)
            }
        );
        // 12 W at 12 V is 1 A: 43.2 J in 3.6 s is 1 mAh, from 2 Ah of 4: 49%.
        assert_eq!(
            files.values(43_200_000, 12_000_000),
            [("charge_now", 1_999_000), ("capacity", 49)]
        );
        let mut source = BatterySource::open(&tree.roots()).unwrap();
        files.write(&dir, 43_200_000, 12_000_000).unwrap();
        // charge_now × voltage_now: 1 000 µAh × 12 V = 12 mWh = 43.2 J.
        let j = source.read_joules(Instant::now()).unwrap()[0];
        assert!((j - 43.2).abs() < 1e-9, "{j}");
        assert!(!dir.join("power_now").exists());
    }

    #[test]
    fn a_directory_without_meter_files_is_not_found() {
        let tree = FixtureTree::new();
        let dir = tree.write_sys("class/power_supply/AC/type", "Mains");
        let err = MeterFiles::of_dir(dir.parent().unwrap()).unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }
}
