//! Energy sources: RAPL powercap, the perf `power` PMU, batteries and hwmon sensors.
//!
//! Every source reports cumulative joules per domain since it was opened, corrected for
//! counter wrap-around, and says how often it must be read for that correction to hold.
//! Which source to use, and why the others are unavailable, is decided by [`discover`].

pub mod battery_meter;
pub mod discover;
pub mod files;
pub mod hwmon;
mod integrate;
pub mod perf_power;
pub mod powercap;
pub mod sampler;

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{Availability, SysError};

pub use discover::{discover, open_best};

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
    /// subzones already inside a package, never psys (which contains both). A battery is
    /// the whole system and comes from a source that has no packages, so it counts too.
    pub fn counts_in_total(self) -> bool {
        matches!(
            self,
            DomainKind::Package | DomainKind::Dram | DomainKind::Battery
        )
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

    /// Cumulative joules per domain, wrap-corrected: since the source was opened for a
    /// counter, since the first read for a power sensor integrated between reads.
    ///
    /// `at` is the instant of this read on the caller's clock (`Instant::now()` of a
    /// sampler thread, or the mock executor's clock): a power sensor is integrated over
    /// these instants, so a source reads no clock of its own and its figures follow the
    /// clock its readings are taken on. A read from before the previous one adds nothing.
    fn read_joules(&mut self, at: Instant) -> Result<Vec<f64>, SysError>;

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

/// Name of the power-model fallback in source lists: not a meter, always available, listed
/// last. The model itself is analysis (powerlens-core); only its name is shared here so that
/// every list and view recognises it the same way.
pub const POWER_MODEL_SOURCE: &str = "power-model";

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

impl SourceStatus {
    /// The status of a source that opened: `reason` says what it measures.
    pub fn available(source: &dyn EnergySource, reason: impl Into<String>) -> Self {
        SourceStatus {
            name: source.name().to_string(),
            available: true,
            reason: reason.into(),
            fix: None,
            domains: source.domains().to_vec(),
        }
    }

    /// The status of a source that could not be opened: the error becomes the reason, and
    /// its fix (permission, missing driver) the fix.
    pub fn unavailable(name: &str, err: &SysError) -> Self {
        let Availability { reason, fix, .. } = Availability::from_error(err);
        SourceStatus {
            name: name.to_string(),
            available: false,
            reason,
            fix,
            domains: Vec::new(),
        }
    }
}

/// The total energy of one reading: the domains that [`DomainKind::counts_in_total`]
/// (packages plus DRAM), so that subzones and psys are never counted twice.
pub fn total_joules(domains: &[Domain], joules: &[f64]) -> f64 {
    domains
        .iter()
        .zip(joules)
        .filter(|(domain, _)| domain.kind.counts_in_total())
        .map(|(_, j)| j)
        .sum()
}

/// The names of `domains`, comma-separated, for one-line summaries.
pub fn domain_names(domains: &[Domain]) -> String {
    let names: Vec<&str> = domains.iter().map(|d| d.name.as_str()).collect();
    names.join(", ")
}

/// A domain name and kind, for the sources' constructors.
pub(crate) fn domain(name: impl Into<String>, kind: DomainKind) -> Domain {
    Domain {
        name: name.into(),
        kind,
    }
}
