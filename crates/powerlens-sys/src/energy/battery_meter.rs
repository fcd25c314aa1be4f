//! Batteries (`class/power_supply/*` with `type` = `Battery`): the energy a discharging
//! battery gives, from `power_now` (µW) integrated between reads, or else from the fall of
//! `energy_now` (µWh) or of `charge_now` (µAh) × `voltage_now` (µV).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::energy::integrate::{PowerIntegrator, POWER_READ_INTERVAL};
use crate::energy::{domain, Domain, DomainKind, EnergySource};
use crate::{power_supply, sysfs, Roots, SysError};

pub const NAME: &str = "battery";

/// The fix for a battery that is charging or full: it measures nothing until it discharges.
pub const UNPLUG: &str = "unplug the charger to measure on battery";

/// Joules in one µWh.
const J_PER_UWH: f64 = 3.6e-3;

/// How the energy of one battery is measured.
#[derive(Debug)]
enum Method {
    /// `power_now`, integrated.
    Power(PowerIntegrator),
    /// `energy_now` at open, in joules; the energy used is the fall since.
    EnergyNow { start_j: f64 },
    /// `charge_now` × `voltage_now` at open, in joules.
    ChargeTimesVoltage { start_j: f64 },
}

#[derive(Debug)]
struct Battery {
    dir: PathBuf,
    method: Method,
    /// Full, now and rate, for `info` ([`power_supply::figures`]).
    figures: Option<String>,
}

/// The discharge energy of every discharging battery, one domain each (e.g. `BAT0`).
#[derive(Debug)]
pub struct BatterySource {
    domains: Vec<Domain>,
    batteries: Vec<Battery>,
}

fn power_w(dir: &Path) -> Result<Option<f64>, SysError> {
    Ok(sysfs::read_optional_u64(dir.join("power_now"))?.map(|uw| uw as f64 / 1e6))
}

fn energy_now_j(dir: &Path) -> Result<Option<f64>, SysError> {
    Ok(sysfs::read_optional_u64(dir.join("energy_now"))?.map(|uwh| uwh as f64 * J_PER_UWH))
}

fn charge_times_voltage_j(dir: &Path) -> Result<Option<f64>, SysError> {
    let charge = sysfs::read_optional_u64(dir.join("charge_now"))?;
    let voltage = sysfs::read_optional_u64(dir.join("voltage_now"))?;
    // µAh × µV = 1e-12 Wh = 3.6e-9 J.
    Ok(charge
        .zip(voltage)
        .map(|(uah, uv)| uah as f64 * uv as f64 * 3.6e-9))
}

/// How to measure the battery in `dir`, or `None` when it has none of the attributes.
fn method_of(dir: &Path) -> Result<Option<Method>, SysError> {
    if power_w(dir)?.is_some() {
        return Ok(Some(Method::Power(PowerIntegrator::new())));
    }
    if let Some(start_j) = energy_now_j(dir)? {
        return Ok(Some(Method::EnergyNow { start_j }));
    }
    Ok(charge_times_voltage_j(dir)?.map(|start_j| Method::ChargeTimesVoltage { start_j }))
}

impl BatterySource {
    /// Opens every discharging battery. No battery, or none discharging (on AC power), or
    /// none with a power/energy/charge attribute → `Unavailable` with the reason and fix.
    pub fn open(roots: &Roots) -> Result<Self, SysError> {
        let batteries = power_supply::batteries(roots)?;
        let mut source = BatterySource {
            domains: Vec::new(),
            batteries: Vec::new(),
        };
        let mut missing = Vec::new();
        let mut figures = Vec::new();
        for b in &batteries {
            if let Some(f) = power_supply::figures(&b.dir)? {
                figures.push(format!("{}: {f}", b.name));
            }
        }
        for b in batteries.iter().filter(|b| b.is_discharging()) {
            match method_of(&b.dir)? {
                Some(method) => {
                    source.domains.push(domain(&b.name, DomainKind::Battery));
                    source.batteries.push(Battery {
                        dir: b.dir.clone(),
                        method,
                        figures: power_supply::figures(&b.dir)?,
                    });
                }
                None => missing.push(format!(
                    "{} has no power_now, energy_now or charge_now with voltage_now",
                    b.name
                )),
            }
        }
        if !source.batteries.is_empty() {
            return Ok(source);
        }
        let (reason, fix) = if batteries.is_empty() {
            (
                format!(
                    "no battery in {}",
                    roots.sys("class/power_supply").display()
                ),
                None,
            )
        } else if let Some(states) = power_supply::not_discharging(&batteries) {
            let figures = if figures.is_empty() {
                String::new()
            } else {
                format!("; {}", figures.join("; "))
            };
            (
                format!("on AC power ({states}{figures}): a battery measures discharge only"),
                Some(UNPLUG.to_string()),
            )
        } else {
            (missing.join(", "), None)
        };
        Err(SysError::Unavailable {
            what: NAME.to_string(),
            reason,
            fix,
        })
    }

    /// A one-line description for `info`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .domains
            .iter()
            .zip(&self.batteries)
            .map(|(d, b)| {
                let how = match b.method {
                    Method::Power(_) => "power_now integrated",
                    Method::EnergyNow { .. } => "fall of energy_now",
                    Method::ChargeTimesVoltage { .. } => "fall of charge_now × voltage_now",
                };
                match &b.figures {
                    Some(f) => format!("{} ({how}; {f})", d.name),
                    None => format!("{} ({how})", d.name),
                }
            })
            .collect();
        format!("discharging: {}", parts.join(", "))
    }
}

impl EnergySource for BatterySource {
    fn name(&self) -> &str {
        NAME
    }

    fn domains(&self) -> &[Domain] {
        &self.domains
    }

    fn read_joules(&mut self, at: Instant) -> Result<Vec<f64>, SysError> {
        self.batteries
            .iter_mut()
            .map(|b| {
                let missing = |file: &str| SysError::NotFound {
                    path: b.dir.join(file),
                };
                Ok(match &mut b.method {
                    Method::Power(integrator) => {
                        let watts = power_w(&b.dir)?.ok_or_else(|| missing("power_now"))?;
                        integrator.update(watts, at)
                    }
                    Method::EnergyNow { start_j } => {
                        *start_j - energy_now_j(&b.dir)?.ok_or_else(|| missing("energy_now"))?
                    }
                    Method::ChargeTimesVoltage { start_j } => {
                        *start_j
                            - charge_times_voltage_j(&b.dir)?
                                .ok_or_else(|| missing("charge_now"))?
                    }
                })
            })
            .collect()
    }

    fn max_read_interval(&self) -> Option<Duration> {
        // Nothing wraps; only the power integral needs regular reads.
        self.batteries
            .iter()
            .any(|b| matches!(b.method, Method::Power(_)))
            .then_some(POWER_READ_INTERVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{write_attr, BatterySpec, FixtureTree};

    fn discharging() -> BatterySpec {
        BatterySpec {
            status: "Discharging".to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn by_energy_now() {
        let tree = FixtureTree::new();
        let spec = BatterySpec {
            energy_now_uwh: Some(50_000_000),
            ..discharging()
        };
        let dir = tree.battery("BAT0", &spec);
        tree.write_sys("class/power_supply/AC/type", "Mains");
        let mut source = BatterySource::open(&tree.roots()).unwrap();
        assert_eq!(source.domains(), &[domain("BAT0", DomainKind::Battery)]);
        assert_eq!(source.max_read_interval(), None);
        // 1 mWh = 3.6 J used.
        write_attr(&dir.join("energy_now"), 49_999_000);
        let j = source.read_joules(Instant::now()).unwrap()[0];
        assert!((j - 3.6).abs() < 1e-9, "{j}");
        assert!(source.summary().contains("energy_now"));
    }

    #[test]
    fn by_charge_times_voltage() {
        let tree = FixtureTree::new();
        let spec = BatterySpec {
            charge_now_uah: Some(3_000_000),
            voltage_now_uv: Some(12_000_000),
            ..discharging()
        };
        let dir = tree.battery("BAT1", &spec);
        let mut source = BatterySource::open(&tree.roots()).unwrap();
        // 1 mAh less at 12 V: 12 mWh = 43.2 J.
        write_attr(&dir.join("charge_now"), 2_999_000);
        let j = source.read_joules(Instant::now()).unwrap()[0];
        assert!((j - 43.2).abs() < 1e-9, "{j}");
    }

    #[test]
    fn by_power_now_integrated() {
        let tree = FixtureTree::new();
        let spec = BatterySpec {
            power_now_uw: Some(10_000_000),
            energy_now_uwh: Some(1),
            ..discharging()
        };
        let dir = tree.battery("BAT0", &spec);
        let mut source = BatterySource::open(&tree.roots()).unwrap();
        assert_eq!(source.max_read_interval(), Some(POWER_READ_INTERVAL));
        // The reads' instants are the caller's clock: the integral is over them alone.
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // The first read starts the count; 10 W for 100 ms is 1 J.
        assert_eq!(source.read_joules(t0).unwrap(), [0.0]);
        assert_eq!(source.read_joules(at(100)).unwrap(), [1.0]);
        // 10 W then 20 W: the trapezoid averages the two readings, 15 W × 0.1 s = 1.5 J.
        write_attr(&dir.join("power_now"), 20_000_000);
        let j = source.read_joules(at(200)).unwrap()[0];
        assert!((j - 2.5).abs() < 1e-12, "{j}");
        assert!(source.summary().contains("power_now integrated"));
    }

    #[test]
    fn on_ac_power_says_unplug() {
        let tree = FixtureTree::new();
        let spec = BatterySpec {
            status: "Charging".to_string(),
            energy_now_uwh: Some(1),
            ..Default::default()
        };
        tree.battery("BAT0", &spec);
        match BatterySource::open(&tree.roots()) {
            Err(SysError::Unavailable { reason, fix, .. }) => {
                assert!(
                    reason.contains("on AC power") && reason.contains("Charging"),
                    "{reason}"
                );
                assert!(fix.unwrap().contains("unplug"));
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    #[test]
    fn no_battery() {
        let tree = FixtureTree::new();
        match BatterySource::open(&tree.roots()) {
            Err(SysError::Unavailable { reason, .. }) => assert!(reason.contains("no battery")),
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    #[test]
    fn corrupt_value_names_the_file() {
        let tree = FixtureTree::new();
        let spec = BatterySpec {
            energy_now_uwh: Some(5),
            ..discharging()
        };
        let dir = tree.battery("BAT0", &spec);
        let mut source = BatterySource::open(&tree.roots()).unwrap();
        write_attr(&dir.join("energy_now"), "n/a");
        let err = source.read_joules(Instant::now()).unwrap_err().to_string();
        assert!(err.contains("BAT0/energy_now"), "{err}");
    }
}
