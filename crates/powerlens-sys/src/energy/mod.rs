//! Energy sources: RAPL powercap, the perf `power` PMU, batteries and hwmon sensors.
//!
//! Every source reports cumulative joules per domain since it was opened, corrected for
//! counter wrap-around, and says how often it must be read for that correction to hold.
//! Which source to use, and why the others are unavailable, is decided by [`discover`].

pub mod discover;
pub mod sampler;

use std::time::Duration;

use serde::Serialize;

use crate::SysError;

/// What a domain measures, so that totals never count a subzone twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DomainKind {
    /// A whole CPU package (RAPL `package-N`, perf `energy-pkg`).
    Package,
    /// The cores of a package (RAPL `core`, perf `energy-cores`): part of the package.
    Core,
    /// The uncore/graphics of a package (RAPL `uncore`, perf `energy-gpu`): part of the package.
    Uncore,
    /// DRAM attached to a package: outside the package, added to the total.
    Dram,
    /// The whole platform (RAPL `psys`): includes packages, so never added to them.
    Psys,
    /// A battery's discharge: the whole system.
    Battery,
    /// An hwmon power or energy sensor: scope unknown, reported on its own.
    Sensor,
}

impl DomainKind {
    /// Whether this domain is summed into `energy_j`: packages plus DRAM, never the
    /// subzones already inside a package, never psys (which contains both).
    pub fn counts_in_total(self) -> bool {
        matches!(self, DomainKind::Package | DomainKind::Dram)
    }
}

/// One measured domain of a source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Domain {
    /// Stable name used in JSON and the database, e.g. `package-0`, `package-0/core`, `dram-0`, `psys`.
    pub name: String,
    pub kind: DomainKind,
}

/// A readable energy source.
pub trait EnergySource: Send {
    /// Short name of the source, e.g. `rapl-powercap`, `perf-power`, `battery`, `hwmon`.
    fn name(&self) -> &str;

    /// The domains this source measures, in the order [`EnergySource::read_joules`] returns them.
    fn domains(&self) -> &[Domain];

    /// Cumulative joules per domain since the source was opened, wrap-corrected.
    fn read_joules(&mut self) -> Result<Vec<f64>, SysError>;

    /// The longest interval between reads for which wrap correction still holds at the highest
    /// plausible power (`None`: the counter cannot wrap).
    fn max_read_interval(&self) -> Option<Duration>;
}

/// The highest power (watts) a single RAPL-style domain is assumed to draw when choosing a
/// read interval. No shipping CPU package draws near 1 kW; assuming it keeps the interval
/// safe with a wide margin.
pub const HIGHEST_PLAUSIBLE_POWER_W: f64 = 1000.0;

/// The read interval that cannot miss a wrap: half the time the counter takes to wrap at
/// [`HIGHEST_PLAUSIBLE_POWER_W`] (half, so that scheduling jitter of the sampler cannot
/// stretch an interval past a full period).
pub fn safe_read_interval(range_joules: f64) -> Duration {
    Duration::from_secs_f64((range_joules / HIGHEST_PLAUSIBLE_POWER_W / 2.0).max(1e-4))
}

/// Availability of one energy source on this machine, as `info` and `run` report it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceStatus {
    /// e.g. `rapl-powercap`, `perf-power`, `battery`, `hwmon`, `power-model`.
    pub name: String,
    pub available: bool,
    /// Why it is (un)available, e.g. "no /sys/class/powercap: no RAPL driver (virtual machine?)".
    pub reason: String,
    /// How to make it available, when something can be done.
    pub fix: Option<String>,
    /// The domains it offers (empty when unavailable).
    pub domains: Vec<Domain>,
}
