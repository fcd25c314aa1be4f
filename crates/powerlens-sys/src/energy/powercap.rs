//! RAPL through the powercap class: `class/powercap/intel-rapl:N` zones (`package-N`,
//! `psys`) and their `intel-rapl:N:M` subzones (`core`, `uncore`, `dram`), each a
//! microjoule counter `energy_uj` that wraps at `max_energy_range_uj`.
//!
//! `intel-rapl-mmio:*` zones are ignored on purpose: on client Intel parts they expose the
//! same package domain as `intel-rapl:0` a second time (through MMIO instead of MSRs), so
//! adding them would double count.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::counter::WrapAccumulator;
use crate::energy::{domain, domain_names, safe_read_interval, Domain, DomainKind, EnergySource};
use crate::{sysfs, Roots, SysError};

pub const NAME: &str = "rapl-powercap";

/// The fix for an `energy_uj` only root may read.
pub const PERMISSION_FIX: &str = "energy_uj is readable by root only since CVE-2020-8694: run as root, or `sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj` (until reboot)";

const NO_DRIVER_REASON: &str =
    "no RAPL powercap driver (virtual machine, or intel_rapl_common not loaded)";
const NO_DRIVER_FIX: &str = "on bare metal: modprobe intel_rapl_msr";

/// One readable zone or subzone.
#[derive(Debug)]
struct Counter {
    energy_uj: PathBuf,
    accumulator: WrapAccumulator,
    /// `max_energy_range_uj` (0: unknown).
    range_uj: u64,
    /// `constraint_0_power_limit_uw`, where the zone has one.
    limit_uw: Option<u64>,
}

/// How a zone's counter wraps: its range and, at its power limit, how long one wrap takes.
fn wrap_text(name: &str, c: &Counter) -> String {
    if c.range_uj == 0 {
        return format!("{name} range unknown");
    }
    let kj = c.range_uj as f64 / 1e9;
    match c.limit_uw.filter(|&w| w > 0) {
        Some(uw) => {
            let minutes = c.range_uj as f64 / uw as f64 / 60.0;
            let watts = uw as f64 / 1e6;
            format!("{name} {kj:.1} kJ ({minutes:.1} min at its {watts:.0} W limit)")
        }
        None => format!("{name} {kj:.1} kJ (no power limit stated)"),
    }
}

/// RAPL energy counters of every zone and subzone with a readable `energy_uj`.
#[derive(Debug)]
pub struct PowercapSource {
    domains: Vec<Domain>,
    counters: Vec<Counter>,
    smallest_range_uj: u64,
    notes: Vec<String>,
}

/// `intel-rapl:N` → (N, None), `intel-rapl:N:M` → (N, Some(M)); anything else → None.
fn parse_zone_dir(name: &str) -> Option<(u32, Option<u32>)> {
    let rest = name.strip_prefix("intel-rapl:")?;
    match rest.split_once(':') {
        Some((zone, sub)) => Some((zone.parse().ok()?, Some(sub.parse().ok()?))),
        None => Some((rest.parse().ok()?, None)),
    }
}

/// The kind of a top-level zone by its `name`: `package-N` (also `package-N-die-M`),
/// `psys`, or `dram` on servers that expose DRAM as a zone of its own.
fn zone_kind(name: &str) -> DomainKind {
    match name {
        "psys" => DomainKind::Psys,
        "dram" => DomainKind::Dram,
        n if n.starts_with("package-") => DomainKind::Package,
        // Unknown zones are reported, never added to the total.
        _ => DomainKind::Sensor,
    }
}

/// The kind of a subzone by its `name`.
fn subzone_kind(name: &str) -> DomainKind {
    match name {
        "core" => DomainKind::Core,
        "uncore" => DomainKind::Uncore,
        "dram" => DomainKind::Dram,
        _ => DomainKind::Sensor,
    }
}

impl PowercapSource {
    /// Opens every zone and subzone. A zone without `energy_uj` or `max_energy_range_uj`
    /// is skipped and noted ([`PowercapSource::notes`]); an unreadable or corrupt one is an
    /// error naming the file; no zones at all is `Unavailable` with the reason and the fix.
    pub fn open(roots: &Roots) -> Result<Self, SysError> {
        let class = roots.sys("class/powercap");
        let unavailable = |reason: String| SysError::Unavailable {
            what: NAME.to_string(),
            reason,
            fix: Some(NO_DRIVER_FIX.to_string()),
        };
        if !class.is_dir() {
            return Err(unavailable(NO_DRIVER_REASON.to_string()));
        }
        let mut zones: Vec<((u32, Option<u32>), PathBuf)> = sysfs::list_dir(&class)?
            .into_iter()
            .filter_map(|path| Some((parse_zone_dir(path.file_name()?.to_str()?)?, path)))
            .collect();
        // Zones before their subzones: (N, None) sorts before (N, Some(M)).
        zones.sort();
        if zones.is_empty() {
            return Err(unavailable(format!(
                "{} has no intel-rapl zones: {NO_DRIVER_REASON}",
                class.display()
            )));
        }

        let mut source = PowercapSource {
            domains: Vec::new(),
            counters: Vec::new(),
            smallest_range_uj: u64::MAX,
            notes: Vec::new(),
        };
        let mut zone_names: BTreeMap<u32, String> = BTreeMap::new();
        for ((zone, sub), dir) in zones {
            if dir.is_symlink() && !dir.exists() {
                // The class links to the zone's device; a link to nothing is no zone.
                let target = std::fs::read_link(&dir).unwrap_or_default();
                source.notes.push(format!(
                    "{} links to {}, which does not exist: skipped",
                    dir.display(),
                    target.display()
                ));
                continue;
            }
            let Some(name) = sysfs::read_optional_string(dir.join("name"))? else {
                source.note_skipped(&dir, "name");
                continue;
            };
            let (domain_name, kind) = match sub {
                None => {
                    zone_names.insert(zone, name.clone());
                    (name.clone(), zone_kind(&name))
                }
                Some(_) => {
                    let parent = zone_names
                        .get(&zone)
                        .cloned()
                        .unwrap_or_else(|| format!("intel-rapl:{zone}"));
                    (format!("{parent}/{name}"), subzone_kind(&name))
                }
            };
            let energy_path = dir.join("energy_uj");
            let first = match sysfs::read_u64_with_fix(&energy_path, PERMISSION_FIX) {
                Ok(value) => value,
                Err(e) if e.is_not_found() => {
                    source.note_skipped(&dir, "energy_uj");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let range_path = dir.join("max_energy_range_uj");
            let range = match sysfs::read_u64(&range_path) {
                // Some firmware reports 0: the counter still counts, its wrap point is
                // unknown. Keep the zone, leave the read interval to the other zones.
                Ok(0) => {
                    source.notes.push(format!(
                        "{}: max_energy_range_uj is 0, its wrap range is unknown: a wrap between two reads would be undercounted",
                        dir.display()
                    ));
                    0
                }
                Ok(range) => range,
                Err(e) if e.is_not_found() => {
                    source.note_skipped(&dir, "max_energy_range_uj");
                    continue;
                }
                Err(e) => return Err(e),
            };
            if range > 0 {
                source.smallest_range_uj = source.smallest_range_uj.min(range);
            }
            source.domains.push(domain(domain_name, kind));
            let limit_uw = sysfs::read_optional_u64(dir.join("constraint_0_power_limit_uw"))?;
            source.counters.push(Counter {
                energy_uj: energy_path,
                accumulator: WrapAccumulator::new(first, range),
                range_uj: range,
                limit_uw,
            });
        }
        if source.counters.is_empty() {
            // The zones exist, so the driver is loaded: loading it again fixes nothing.
            return Err(SysError::Unavailable {
                what: NAME.to_string(),
                reason: format!("no readable RAPL zone: {}", source.notes.join("; ")),
                fix: None,
            });
        }
        Ok(source)
    }

    fn note_skipped(&mut self, dir: &std::path::Path, missing: &str) {
        self.notes
            .push(format!("{}: no {missing}, skipped", dir.display()));
    }

    /// Zones that were skipped, and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// A one-line description for `info`: the domains, and skipped zones if any.
    pub fn summary(&self) -> String {
        let mut text = format!("RAPL energy counters: {}", domain_names(&self.domains));
        let wraps: Vec<String> = self
            .domains
            .iter()
            .zip(&self.counters)
            .map(|(d, c)| wrap_text(&d.name, c))
            .collect();
        text.push_str(&format!("; wrap at {}", wraps.join(", ")));
        if !self.notes.is_empty() {
            text.push_str(&format!(" ({})", self.notes.join("; ")));
        }
        text
    }
}

impl EnergySource for PowercapSource {
    fn name(&self) -> &str {
        NAME
    }

    fn domains(&self) -> &[Domain] {
        &self.domains
    }

    fn read_joules(&mut self, _at: Instant) -> Result<Vec<f64>, SysError> {
        self.counters
            .iter_mut()
            .map(|c| {
                let raw = sysfs::read_u64_with_fix(&c.energy_uj, PERMISSION_FIX)?;
                Ok(c.accumulator.update(raw) as f64 / 1e6)
            })
            .collect()
    }

    fn max_read_interval(&self) -> Option<Duration> {
        Some(safe_read_interval(self.smallest_range_uj as f64 / 1e6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::total_joules;
    use crate::fixture::{make_unreadable, write_attr, FixtureTree};

    const RANGE: u64 = 262_143_328_850; // a real package range, ~262 kJ

    /// Two packages with core, uncore and dram subzones, and psys.
    fn server(tree: &FixtureTree) {
        tree.rapl_zone(0, "package-0", 1_000, RANGE);
        tree.rapl_subzone(0, 0, "core", 2_000, RANGE);
        tree.rapl_subzone(0, 1, "uncore", 3_000, RANGE);
        tree.rapl_subzone(0, 2, "dram", 4_000, 65_712_999_613);
        tree.rapl_zone(1, "package-1", 5_000, RANGE);
        tree.rapl_subzone(1, 0, "dram", 6_000, 65_712_999_613);
        tree.rapl_zone(2, "psys", 7_000, RANGE);
        // Neither the control type directory nor MMIO zones are domains.
        tree.write_sys("class/powercap/intel-rapl/enabled", 1);
        tree.write_sys("class/powercap/intel-rapl-mmio:0/name", "package-0");
        tree.write_sys("class/powercap/intel-rapl-mmio:0/energy_uj", 1);
        tree.write_sys(
            "class/powercap/intel-rapl-mmio:0/max_energy_range_uj",
            RANGE,
        );
    }

    fn advance(tree: &FixtureTree, dir: &str, value: u64) {
        tree.write_sys(format!("class/powercap/{dir}/energy_uj"), value);
    }

    #[test]
    fn zones_subzones_and_total_without_double_counting() {
        let tree = FixtureTree::new();
        server(&tree);
        let mut source = PowercapSource::open(&tree.roots()).unwrap();
        let names: Vec<&str> = source.domains().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "package-0",
                "package-0/core",
                "package-0/uncore",
                "package-0/dram",
                "package-1",
                "package-1/dram",
                "psys"
            ]
        );
        let kinds: Vec<DomainKind> = source.domains().iter().map(|d| d.kind).collect();
        use DomainKind::*;
        assert_eq!(kinds, [Package, Core, Uncore, Dram, Package, Dram, Psys]);
        // Each counter advances by a distinct amount (µJ): 10, 20, … 70 J.
        for (dir, start, joules) in [
            ("intel-rapl:0", 1_000, 10),
            ("intel-rapl:0:0", 2_000, 20),
            ("intel-rapl:0:1", 3_000, 30),
            ("intel-rapl:0:2", 4_000, 40),
            ("intel-rapl:1", 5_000, 50),
            ("intel-rapl:1:0", 6_000, 60),
            ("intel-rapl:2", 7_000, 70),
        ] {
            advance(&tree, dir, start + joules * 1_000_000);
        }
        let joules = source.read_joules(Instant::now()).unwrap();
        assert_eq!(joules, [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]);
        // Packages (10 + 50) plus DRAM (40 + 60); not core, uncore or psys.
        assert_eq!(total_joules(source.domains(), &joules), 160.0);
        assert!(source.notes().is_empty());
        // The DRAM range is the smallest: 65.7 kJ at 1 kW wraps in 65.7 s; half of it.
        let interval = source.max_read_interval().unwrap().as_secs_f64();
        assert!((interval - 32.856).abs() < 0.001, "{interval}");
    }

    #[test]
    fn wraps_several_times_at_the_safe_interval() {
        let tree = FixtureTree::new();
        let range = 5_000_000; // 5 J
        tree.rapl_zone(0, "package-0", 4_000_000, range);
        let mut source = PowercapSource::open(&tree.roots()).unwrap();
        let interval = source.max_read_interval().unwrap().as_secs_f64();
        // At the highest plausible power the counter advances this much per safe interval.
        let step_uj = (interval * 1000.0 * 1e6).round() as u64;
        assert_eq!(step_uj, range / 2);
        let (mut truth, mut raw) = (0u64, 4_000_000u64);
        for _ in 0..25 {
            truth += step_uj;
            raw = (raw + step_uj) % range;
            advance(&tree, "intel-rapl:0", raw);
            let joules = source.read_joules(Instant::now()).unwrap()[0];
            assert_eq!((joules * 1e6).round() as u64, truth);
        }
        // 25 half-ranges: the counter wrapped 12 times.
        assert_eq!(truth, 62_500_000);
    }

    #[test]
    fn unreadable_energy_says_cve_and_fix() {
        let tree = FixtureTree::new();
        let zone = tree.rapl_zone(0, "package-0", 0, RANGE);
        if let Err(reason) = make_unreadable(&zone.join("energy_uj")) {
            crate::skip_test!("{reason}");
            return;
        }
        match PowercapSource::open(&tree.roots()) {
            Err(SysError::PermissionDenied { path, fix }) => {
                assert!(
                    path.ends_with("intel-rapl:0/energy_uj"),
                    "{}",
                    path.display()
                );
                assert!(
                    fix.contains("CVE-2020-8694") && fix.contains("chmod o+r"),
                    "{fix}"
                );
            }
            other => panic!("expected PermissionDenied, got {other:?}"),
        }
    }

    #[test]
    fn zone_without_energy_is_skipped_and_noted() {
        let tree = FixtureTree::new();
        tree.rapl_zone(0, "package-0", 0, RANGE);
        let dram = tree.rapl_subzone(0, 0, "dram", 0, RANGE);
        std::fs::remove_file(dram.join("energy_uj")).unwrap();
        let source = PowercapSource::open(&tree.roots()).unwrap();
        assert_eq!(source.domains().len(), 1);
        assert_eq!(source.notes().len(), 1);
        assert!(
            source.notes()[0].contains("intel-rapl:0:0: no energy_uj"),
            "{:?}",
            source.notes()
        );
        assert!(source.summary().contains("skipped"));
    }

    #[test]
    fn domain_that_disappears_is_an_error_naming_it() {
        let tree = FixtureTree::new();
        let zone = tree.rapl_zone(0, "package-0", 0, RANGE);
        let mut source = PowercapSource::open(&tree.roots()).unwrap();
        std::fs::remove_file(zone.join("energy_uj")).unwrap();
        let err = source.read_joules(Instant::now()).unwrap_err();
        assert!(err.is_not_found() && err.to_string().contains("intel-rapl:0/energy_uj"));
    }

    #[test]
    fn corrupt_value_names_the_file() {
        let tree = FixtureTree::new();
        let zone = tree.rapl_zone(0, "package-0", 0, RANGE);
        write_attr(&zone.join("max_energy_range_uj"), "lots");
        let err = PowercapSource::open(&tree.roots()).unwrap_err().to_string();
        assert!(
            err.contains("intel-rapl:0/max_energy_range_uj") && err.contains("lots"),
            "{err}"
        );
        write_attr(&zone.join("max_energy_range_uj"), RANGE);
        let mut source = PowercapSource::open(&tree.roots()).unwrap();
        write_attr(&zone.join("energy_uj"), "-1");
        let err = source.read_joules(Instant::now()).unwrap_err().to_string();
        assert!(err.contains("intel-rapl:0/energy_uj"), "{err}");
    }

    #[test]
    fn no_powercap_says_why_and_how() {
        let tree = FixtureTree::new();
        match PowercapSource::open(&tree.roots()) {
            Err(SysError::Unavailable { reason, fix, .. }) => {
                assert!(reason.contains("no RAPL powercap driver"), "{reason}");
                assert!(fix.unwrap().contains("modprobe intel_rapl_msr"));
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
        // The class exists but holds only a control type: still unavailable.
        tree.write_sys("class/powercap/intel-rapl/enabled", 0);
        assert!(matches!(
            PowercapSource::open(&tree.roots()),
            Err(SysError::Unavailable { .. })
        ));
    }
}
