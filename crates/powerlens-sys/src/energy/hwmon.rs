//! hwmon sensors (`class/hwmon/hwmonN`): cumulative energy inputs `energyK_input` (µJ),
//! preferred, or power inputs `powerK_input` (µW) integrated between reads. A device's
//! power inputs are ignored when it has energy inputs, which measure the same thing better.
//! Their scope is unknown (a socket, a core, a rail), so each is its own `Sensor` domain.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::energy::integrate::{PowerIntegrator, POWER_READ_INTERVAL};
use crate::energy::{domain, domain_names, Domain, DomainKind, EnergySource};
use crate::{sysfs, Roots, SysError};

pub const NAME: &str = "hwmon";

#[derive(Debug)]
enum Input {
    /// `energyK_input` and its value at open (µJ).
    Energy { path: PathBuf, first_uj: u64 },
    /// `powerK_input`, integrated.
    Power {
        path: PathBuf,
        integrator: PowerIntegrator,
    },
}

/// Every energy (or else power) input of every hwmon device.
#[derive(Debug)]
pub struct HwmonSource {
    domains: Vec<Domain>,
    inputs: Vec<Input>,
}

/// `device/label`, e.g. `amd_energy/Esocket0`, or `device/energy1` without a label.
fn domain_name(dir: &Path, device: &str, prefix: &str, k: u32) -> Result<String, SysError> {
    let label = sysfs::read_optional_string(dir.join(format!("{prefix}{k}_label")))?;
    Ok(format!(
        "{device}/{}",
        label.unwrap_or_else(|| format!("{prefix}{k}"))
    ))
}

fn read_watts(path: &Path) -> Result<f64, SysError> {
    Ok(sysfs::read_u64(path)? as f64 / 1e6)
}

impl HwmonSource {
    /// Opens every energy or power input. None at all → `Unavailable`.
    pub fn open(roots: &Roots) -> Result<Self, SysError> {
        let class = roots.sys("class/hwmon");
        let devices = sysfs::list_dir(&class)?;
        let mut source = HwmonSource {
            domains: Vec::new(),
            inputs: Vec::new(),
        };
        for dir in devices {
            let fallback = dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let device = sysfs::read_optional_string(dir.join("name"))?.unwrap_or(fallback);
            let energy = sysfs::numbered_entries(&dir, "energy", "_input")?;
            let (prefix, inputs) = if energy.is_empty() {
                ("power", sysfs::numbered_entries(&dir, "power", "_input")?)
            } else {
                ("energy", energy)
            };
            for (k, path) in inputs {
                let input = if prefix == "energy" {
                    Input::Energy {
                        first_uj: sysfs::read_u64(&path)?,
                        path,
                    }
                } else {
                    // Read once so that a sensor that cannot be read is refused here.
                    read_watts(&path)?;
                    Input::Power {
                        integrator: PowerIntegrator::new(),
                        path,
                    }
                };
                let name = domain_name(&dir, &device, prefix, k)?;
                source.domains.push(domain(name, DomainKind::Sensor));
                source.inputs.push(input);
            }
        }
        if source.inputs.is_empty() {
            return Err(SysError::Unavailable {
                what: NAME.to_string(),
                reason: format!("no hwmon energy or power sensor in {}", class.display()),
                fix: None,
            });
        }
        Ok(source)
    }

    /// A one-line description for `info`.
    pub fn summary(&self) -> String {
        format!(
            "sensors of unknown scope, reported on their own: {}",
            domain_names(&self.domains)
        )
    }
}

impl EnergySource for HwmonSource {
    fn name(&self) -> &str {
        NAME
    }

    fn domains(&self) -> &[Domain] {
        &self.domains
    }

    fn read_joules(&mut self, at: Instant) -> Result<Vec<f64>, SysError> {
        self.inputs
            .iter_mut()
            .map(|input| match input {
                Input::Energy { path, first_uj } => {
                    // 64-bit µJ counters do not wrap in practice; a reset reads as no energy.
                    Ok(sysfs::read_u64(path)?.saturating_sub(*first_uj) as f64 / 1e6)
                }
                Input::Power { path, integrator } => Ok(integrator.update(read_watts(path)?, at)),
            })
            .collect()
    }

    fn max_read_interval(&self) -> Option<Duration> {
        self.inputs
            .iter()
            .any(|i| matches!(i, Input::Power { .. }))
            .then_some(POWER_READ_INTERVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{write_attr, FixtureTree};

    #[test]
    fn energy_inputs_preferred_over_power() {
        let tree = FixtureTree::new();
        let dir = tree.hwmon(0, "amd_energy");
        write_attr(&dir.join("energy1_input"), 1_000_000);
        write_attr(&dir.join("energy1_label"), "Esocket0");
        write_attr(&dir.join("energy2_input"), 0);
        write_attr(&dir.join("power1_input"), 5_000_000);
        tree.hwmon(1, "coretemp"); // no energy, no power: not a domain
        let mut source = HwmonSource::open(&tree.roots()).unwrap();
        let names: Vec<&str> = source.domains().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["amd_energy/Esocket0", "amd_energy/energy2"]);
        assert_eq!(source.max_read_interval(), None);
        write_attr(&dir.join("energy1_input"), 3_500_000);
        write_attr(&dir.join("energy2_input"), 250_000);
        assert_eq!(source.read_joules(Instant::now()).unwrap(), [2.5, 0.25]);
    }

    #[test]
    fn power_inputs_integrated() {
        let tree = FixtureTree::new();
        let dir = tree.hwmon(0, "ina3221");
        write_attr(&dir.join("power1_input"), 4_000_000);
        write_attr(&dir.join("power1_label"), "VDD_CPU");
        let mut source = HwmonSource::open(&tree.roots()).unwrap();
        assert_eq!(source.domains()[0].name, "ina3221/VDD_CPU");
        assert_eq!(source.max_read_interval(), Some(POWER_READ_INTERVAL));
        // Integrated over the caller's instants, from the first read: 4 W × 0.1 s = 0.4 J.
        let t0 = Instant::now();
        assert_eq!(source.read_joules(t0).unwrap(), [0.0]);
        let j = source.read_joules(t0 + Duration::from_millis(100)).unwrap()[0];
        assert!((j - 0.4).abs() < 1e-12, "{j}");
    }

    #[test]
    fn none_and_corrupt() {
        let tree = FixtureTree::new();
        assert!(matches!(
            HwmonSource::open(&tree.roots()),
            Err(SysError::Unavailable { .. })
        ));
        let dir = tree.hwmon(0, "x");
        write_attr(&dir.join("energy1_input"), "oops");
        let err = HwmonSource::open(&tree.roots()).unwrap_err().to_string();
        assert!(err.contains("hwmon0/energy1_input"), "{err}");
    }
}
