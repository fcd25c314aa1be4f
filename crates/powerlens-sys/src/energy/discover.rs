//! Which energy source to use: every source is tried in order of preference and reported
//! available or not, with the reason and the fix.

use crate::energy::battery_meter::{self, BatterySource};
use crate::energy::hwmon::{self, HwmonSource};
use crate::energy::perf_power::{self, PerfPowerSource};
use crate::energy::powercap::{self, PowercapSource};
use crate::energy::{EnergySource, SourceStatus};
use crate::{Roots, SysError};

/// A source tried: its status, and the open source when it is available.
type Tried = (SourceStatus, Option<Box<dyn EnergySource>>);

fn tried<S: EnergySource + 'static>(
    name: &str,
    opened: Result<S, SysError>,
    summary: fn(&S) -> String,
) -> Tried {
    match opened {
        Ok(source) => {
            let status = SourceStatus::available(&source, summary(&source));
            (status, Some(Box::new(source)))
        }
        Err(err) => (SourceStatus::unavailable(name, &err), None),
    }
}

/// Opens every source, in order of preference: RAPL powercap, the perf power PMU (for when
/// powercap is root-only), a discharging battery, hwmon sensors.
fn try_all(roots: &Roots) -> Vec<Tried> {
    vec![
        tried(
            powercap::NAME,
            PowercapSource::open(roots),
            PowercapSource::summary,
        ),
        tried(
            perf_power::NAME,
            PerfPowerSource::open(roots),
            PerfPowerSource::summary,
        ),
        tried(
            battery_meter::NAME,
            BatterySource::open(roots),
            BatterySource::summary,
        ),
        tried(hwmon::NAME, HwmonSource::open(roots), HwmonSource::summary),
    ]
}

/// The status of every source, in order of preference.
pub fn discover(roots: &Roots) -> Vec<SourceStatus> {
    try_all(roots)
        .into_iter()
        .map(|(status, _)| status)
        .collect()
}

/// The most preferred available source (if any), and the status of every source.
pub fn open_best(roots: &Roots) -> (Option<Box<dyn EnergySource>>, Vec<SourceStatus>) {
    let mut best = None;
    let mut statuses = Vec::new();
    for (status, source) in try_all(roots) {
        if best.is_none() {
            best = source;
        }
        statuses.push(status);
    }
    (best, statuses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{make_unreadable, write_attr, BatterySpec, FixtureTree};

    fn names(statuses: &[SourceStatus]) -> Vec<&str> {
        statuses.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn nothing_available_says_why_for_each() {
        let tree = FixtureTree::new();
        let (best, statuses) = open_best(&tree.roots());
        assert!(best.is_none());
        assert_eq!(
            names(&statuses),
            ["rapl-powercap", "perf-power", "battery", "hwmon"]
        );
        for s in &statuses {
            assert!(
                !s.available && !s.reason.is_empty() && s.domains.is_empty(),
                "{s:?}"
            );
        }
        assert!(statuses[0].fix.as_deref().unwrap().contains("modprobe"));
    }

    #[test]
    fn powercap_preferred_over_battery() {
        let tree = FixtureTree::new();
        tree.rapl_zone(0, "package-0", 0, 1_000_000);
        let spec = BatterySpec {
            status: "Discharging".into(),
            energy_now_uwh: Some(9),
            ..Default::default()
        };
        tree.battery("BAT0", &spec);
        let (best, statuses) = open_best(&tree.roots());
        assert_eq!(best.unwrap().name(), "rapl-powercap");
        assert!(statuses[0].available && statuses[2].available);
        assert_eq!(statuses[0].domains[0].name, "package-0");
        assert!(
            statuses[0].reason.contains("package-0"),
            "{}",
            statuses[0].reason
        );
    }

    #[test]
    fn unreadable_powercap_falls_back_and_keeps_the_fix() {
        let tree = FixtureTree::new();
        let zone = tree.rapl_zone(0, "package-0", 0, 1_000_000);
        let hwmon = tree.hwmon(0, "amd_energy");
        write_attr(&hwmon.join("energy1_input"), 5);
        if let Err(reason) = make_unreadable(&zone.join("energy_uj")) {
            crate::skip_test!("{reason}");
            return;
        }
        let (best, statuses) = open_best(&tree.roots());
        assert_eq!(best.unwrap().name(), "hwmon");
        let powercap = &statuses[0];
        assert!(!powercap.available);
        assert!(
            powercap.reason.contains("permission denied"),
            "{}",
            powercap.reason
        );
        assert!(powercap.fix.as_deref().unwrap().contains("CVE-2020-8694"));
        assert_eq!(discover(&tree.roots()), statuses);
    }

    #[test]
    fn live_machine_reports_every_source() {
        let statuses = discover(&Roots::default());
        assert_eq!(statuses.len(), 4);
        for s in statuses.iter().filter(|s| !s.available) {
            assert!(!s.reason.is_empty(), "{s:?}");
        }
    }
}
