//! hwmon sensors (`class/hwmon/hwmonN`): cumulative energy inputs `energyK_input` (µJ),
//! preferred, or power inputs `powerK_input` (µW) integrated between reads, or else the
//! averages `powerK_average` (µW) an ACPI 4.0 power meter (`acpi_power_meter`) gives, in
//! `hwmonN/` or, on older kernels, `hwmonN/device/`. A device's power inputs are ignored
//! when it has energy inputs, which measure the same thing better.
//!
//! A chip's labels say what contains what: `amd_energy` and `zenergy` label a socket's
//! counter `EsocketN` and a core's `EcoreNNN`, and a socket contains its cores, so sockets
//! are packages and cores their parts (never added to the total twice). Other sensors'
//! scope is unknown (a socket, a core, a rail): each is its own `Sensor` domain.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::energy::integrate::{PowerIntegrator, POWER_READ_INTERVAL};
use crate::energy::{domain, domain_names, Domain, DomainKind, EnergySource};
use crate::{sysfs, Roots, SysError};

pub const NAME: &str = "hwmon";

/// The highest power one hwmon sensor may read: no machine fed from the wall draws more,
/// and firmware that has no reading reports all ones (0xFFFFFFFF mW is 4.3 GW).
pub const MAX_PLAUSIBLE_W: f64 = 10_000.0;

#[derive(Debug)]
enum Input {
    /// `energyK_input` and its value at open (µJ).
    Energy { path: PathBuf, first_uj: u64 },
    /// `powerK_input` or `powerK_average`, integrated.
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
    /// Sensors refused, and why.
    notes: Vec<String>,
    /// The longest averaging interval of a power meter read (`powerK_average_interval`).
    average_interval: Option<Duration>,
}

/// `device/label`, e.g. `amd_energy/Esocket0`, or `device/energy1` without a label.
fn domain_name(dir: &Path, device: &str, prefix: &str, k: u32) -> Result<String, SysError> {
    let label = sysfs::read_optional_string(dir.join(format!("{prefix}{k}_label")))?;
    Ok(format!(
        "{device}/{}",
        label.unwrap_or_else(|| format!("{prefix}{k}"))
    ))
}

/// What a sensor measures, by its chip's label: `Esocket*` a package, `Ecore*` a core of
/// one (amd_energy, zenergy); any other label, a sensor of unknown scope.
fn sensor_kind(label: &str) -> DomainKind {
    if label.starts_with("Esocket") {
        DomainKind::Package
    } else if label.starts_with("Ecore") {
        DomainKind::Core
    } else {
        DomainKind::Sensor
    }
}

/// A power reading in watts, refused when beyond [`MAX_PLAUSIBLE_W`].
fn read_watts(path: &Path) -> Result<f64, SysError> {
    let uw = sysfs::read_u64(path)?;
    let watts = uw as f64 / 1e6;
    if watts > MAX_PLAUSIBLE_W {
        return Err(SysError::Parse {
            path: path.to_path_buf(),
            expected:
                "a power in µW of at most 10 kW (firmware without a reading reports all ones)",
            found: uw.to_string(),
        });
    }
    Ok(watts)
}

/// The directory with a device's power inputs and which: `powerK_input` in `dir`, else the
/// averages `powerK_average` in `dir` or in `dir/device` (older acpi_power_meter).
fn power_inputs(dir: &Path) -> Result<(PathBuf, Vec<(u32, PathBuf)>), SysError> {
    let inputs = sysfs::numbered_entries(dir, "power", "_input")?;
    if !inputs.is_empty() {
        return Ok((dir.to_path_buf(), inputs));
    }
    for at in [dir.to_path_buf(), dir.join("device")] {
        if !at.is_dir() {
            continue;
        }
        let averages = sysfs::numbered_entries(&at, "power", "_average")?;
        if !averages.is_empty() {
            return Ok((at, averages));
        }
    }
    Ok((dir.to_path_buf(), Vec::new()))
}

impl HwmonSource {
    /// Opens every energy or power input. A power reading beyond [`MAX_PLAUSIBLE_W`] refuses
    /// that sensor with a note; none at all → `Unavailable`.
    pub fn open(roots: &Roots) -> Result<Self, SysError> {
        let class = roots.sys("class/hwmon");
        let devices = sysfs::list_dir(&class)?;
        let mut source = HwmonSource {
            domains: Vec::new(),
            inputs: Vec::new(),
            notes: Vec::new(),
            average_interval: None,
        };
        for dir in devices {
            source.open_device(&dir)?;
        }
        if source.inputs.is_empty() {
            let mut reason = format!("no hwmon energy or power sensor in {}", class.display());
            if !source.notes.is_empty() {
                reason.push_str(&format!(" ({})", source.notes.join("; ")));
            }
            return Err(SysError::Unavailable {
                what: NAME.to_string(),
                reason,
                fix: None,
            });
        }
        Ok(source)
    }

    fn open_device(&mut self, dir: &Path) -> Result<(), SysError> {
        let fallback = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let device = sysfs::read_optional_string(dir.join("name"))?.unwrap_or(fallback);
        let energy = sysfs::numbered_entries(dir, "energy", "_input")?;
        if !energy.is_empty() {
            for (k, path) in energy {
                let input = Input::Energy {
                    first_uj: sysfs::read_u64(&path)?,
                    path,
                };
                self.push(dir, &device, "energy", k, input)?;
            }
            return Ok(());
        }
        let (at, inputs) = power_inputs(dir)?;
        for (k, path) in inputs {
            // Read once so that a sensor that cannot be read, or reads nonsense, is refused here.
            match read_watts(&path) {
                Ok(_) => {}
                Err(e @ SysError::Parse { .. }) => {
                    self.notes.push(format!("refused: {e}"));
                    continue;
                }
                Err(e) => return Err(e),
            }
            let interval = at.join(format!("power{k}_average_interval"));
            if let Some(ms) = sysfs::read_optional_u64(&interval)? {
                let ms = Duration::from_millis(ms);
                self.average_interval = Some(self.average_interval.map_or(ms, |d| d.max(ms)));
            }
            let input = Input::Power {
                integrator: PowerIntegrator::new(),
                path,
            };
            self.push(&at, &device, "power", k, input)?;
        }
        Ok(())
    }

    fn push(
        &mut self,
        dir: &Path,
        device: &str,
        prefix: &str,
        k: u32,
        input: Input,
    ) -> Result<(), SysError> {
        let name = domain_name(dir, device, prefix, k)?;
        let kind = sensor_kind(name.rsplit('/').next().unwrap_or_default());
        self.domains.push(domain(name, kind));
        self.inputs.push(input);
        Ok(())
    }

    /// Sensors refused, and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// A one-line description for `info`.
    pub fn summary(&self) -> String {
        let (packages, others): (Vec<&Domain>, Vec<&Domain>) = self
            .domains
            .iter()
            .partition(|d| d.kind != DomainKind::Sensor);
        let mut parts = Vec::new();
        if !packages.is_empty() {
            let names: Vec<&str> = packages.iter().map(|d| d.name.as_str()).collect();
            parts.push(format!(
                "sockets and their cores by the chip's labels (sockets counted, cores inside them): {}",
                names.join(", ")
            ));
        }
        if !others.is_empty() {
            let names: Vec<Domain> = others.into_iter().cloned().collect();
            parts.push(format!(
                "sensors of unknown scope, reported on their own: {}",
                domain_names(&names)
            ));
        }
        if let Some(d) = self.average_interval {
            parts.push(format!(
                "power averaged by the meter over {} ms",
                d.as_millis()
            ));
        }
        parts.extend(self.notes.iter().cloned());
        parts.join("; ")
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
        // A meter that averages over longer than a second changes no faster than that.
        let interval = self
            .average_interval
            .map_or(POWER_READ_INTERVAL, |d| d.max(POWER_READ_INTERVAL));
        self.inputs
            .iter()
            .any(|i| matches!(i, Input::Power { .. }))
            .then_some(interval)
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

    /// Issue 47, defect 3: a socket's counter contains its cores'; only sockets count.
    #[test]
    fn amd_energy_sockets_count_and_their_cores_do_not() {
        for chip in ["amd_energy", "zenergy"] {
            let tree = FixtureTree::new();
            let dir = tree.hwmon(0, chip);
            write_attr(&dir.join("energy1_input"), 0);
            write_attr(&dir.join("energy1_label"), "Ecore000");
            write_attr(&dir.join("energy2_input"), 0);
            write_attr(&dir.join("energy2_label"), "Ecore001");
            write_attr(&dir.join("energy3_input"), 0);
            write_attr(&dir.join("energy3_label"), "Esocket0");
            let mut source = HwmonSource::open(&tree.roots()).unwrap();
            let kinds: Vec<DomainKind> = source.domains().iter().map(|d| d.kind).collect();
            use DomainKind::*;
            assert_eq!(kinds, [Core, Core, Package], "{chip}");
            // 47.50 J in the socket, 1.43 J of it in core 0: the total is the socket's.
            write_attr(&dir.join("energy1_input"), 1_430_000);
            write_attr(&dir.join("energy3_input"), 47_500_000);
            let joules = source.read_joules(Instant::now()).unwrap();
            let total = crate::energy::total_joules(source.domains(), &joules);
            assert!((total - 47.5).abs() < 1e-12, "{chip}: {total}");
            assert!(
                source.summary().contains("sockets counted"),
                "{}",
                source.summary()
            );
        }
    }

    /// Issue 47, defect 4: an ACPI power meter's average in `hwmonN/device/` is read, and a
    /// bogus all-ones reading is refused with the reason.
    #[test]
    fn acpi_power_meter_average_and_its_sanity_bound() {
        let tree = FixtureTree::new();
        let dir = tree.hwmon(0, "power_meter");
        let device = dir.join("device");
        write_attr(&device.join("power1_average"), 245_000_000);
        write_attr(&device.join("power1_average_interval"), 2000);
        let mut source = HwmonSource::open(&tree.roots()).unwrap();
        assert_eq!(source.domains()[0].name, "power_meter/power1");
        assert_eq!(source.domains()[0].kind, DomainKind::Sensor);
        assert_eq!(source.max_read_interval(), Some(Duration::from_secs(2)));
        assert!(source
            .summary()
            .contains("averaged by the meter over 2000 ms"));
        let t0 = Instant::now();
        source.read_joules(t0).unwrap();
        let j = source.read_joules(t0 + Duration::from_secs(2)).unwrap()[0];
        assert!((j - 490.0).abs() < 1e-9, "{j}");

        // 0xFFFFFFFF mW, as one firmware reports (lm-sensors#460): refused, with why.
        write_attr(&device.join("power1_average"), 4_294_967_295_000u64);
        let err = HwmonSource::open(&tree.roots()).unwrap_err().to_string();
        assert!(err.contains("refused") && err.contains("10 kW"), "{err}");
        assert!(err.contains("device/power1_average"), "{err}");
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
