//! The perf `power` PMU (RAPL through perf): discovery from
//! `bus/event_source/devices/power/{type,cpumask,events/energy-*}` and counting with
//! `perf_event_open`, one counter per event on the first CPU of each package (the PMU's
//! cpumask). Counts are 64-bit and do not wrap; `count × scale` is joules. Used when
//! powercap is not readable: perf grants access by `perf_event_paranoid`/CAP_PERFMON
//! instead of file modes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::energy::{domain, domain_names, Domain, DomainKind, EnergySource};
use crate::perf::{permission_fix, PerfCounter, PerfEventAttr};
use crate::topology::Topology;
use crate::{perf_caps, sysfs, Roots, SysError};

pub const NAME: &str = "perf-power";

/// One `energy-*` event as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerEvent {
    /// e.g. `energy-pkg`.
    pub name: String,
    /// The `config` value (from `event=0x02`).
    pub config: u64,
    /// Joules per count (`.scale`, e.g. 2.3283064365386962890625e-10 = 2^-32).
    pub scale: f64,
    /// `.unit`, `Joules` for every energy event.
    pub unit: String,
}

/// The perf `power` PMU: its type number, the CPUs to open events on, and its events.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerPmu {
    pub pmu_type: u32,
    pub cpus: Vec<u32>,
    pub events: Vec<PowerEvent>,
    /// Events that were left out, and why.
    pub notes: Vec<String>,
}

fn pmu_dir(roots: &Roots) -> PathBuf {
    roots.sys("bus/event_source/devices/power")
}

/// Parses an event description such as `event=0x02` into a `config` value. The power PMU's
/// only format field is `event` (config:0-7).
fn parse_config(path: &Path, text: &str) -> Result<u64, SysError> {
    let bad = || SysError::Parse {
        path: path.to_path_buf(),
        expected: "an event description such as event=0x02",
        found: text.to_string(),
    };
    let value = text.trim().strip_prefix("event=").ok_or_else(bad)?;
    match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| bad()),
        None => value.parse().map_err(|_| bad()),
    }
}

/// Reads the PMU description. No PMU → `Unavailable`; corrupt files → errors naming them;
/// an event whose unit is not joules is left out and noted.
pub fn discover_pmu(roots: &Roots) -> Result<PowerPmu, SysError> {
    let dir = pmu_dir(roots);
    if !dir.is_dir() {
        return Err(SysError::Unavailable {
            what: NAME.to_string(),
            reason: "no perf power PMU (no RAPL exposed to perf: virtual machine, or a CPU without RAPL)".to_string(),
            fix: Some("on bare metal with Intel or AMD RAPL: a kernel with the perf rapl driver (CONFIG_PERF_EVENTS_INTEL_RAPL)".to_string()),
        });
    }
    let type_path = dir.join("type");
    let pmu_type = sysfs::read_u64(&type_path)? as u32;
    let mask_path = dir.join("cpumask");
    let mask = sysfs::read_string(&mask_path)?;
    let cpus = sysfs::parse_cpu_list(&mask)
        .filter(|c| !c.is_empty())
        .ok_or(SysError::Parse {
            path: mask_path,
            expected: "a non-empty CPU list",
            found: mask,
        })?;
    let events_dir = dir.join("events");
    let names: Vec<String> = sysfs::list_dir(&events_dir)?
        .into_iter()
        .filter_map(|path| Some(path.file_name()?.to_str()?.to_string()))
        .filter(|n| n.starts_with("energy-") && !n.contains('.'))
        .collect();
    let mut pmu = PowerPmu {
        pmu_type,
        cpus,
        events: Vec::new(),
        notes: Vec::new(),
    };
    for name in names {
        let path = events_dir.join(&name);
        let config = parse_config(&path, &sysfs::read_string(&path)?)?;
        let scale_path = events_dir.join(format!("{name}.scale"));
        let scale = match sysfs::read_optional_string(&scale_path)? {
            None => 1.0,
            Some(text) => text.trim().parse().map_err(|_| SysError::Parse {
                path: scale_path,
                expected: "a floating-point scale",
                found: text,
            })?,
        };
        let unit = sysfs::read_optional_string(events_dir.join(format!("{name}.unit")))?
            .unwrap_or_else(|| "Joules".to_string());
        if unit != "Joules" {
            pmu.notes
                .push(format!("{name}: unit {unit:?} is not Joules, left out"));
            continue;
        }
        pmu.events.push(PowerEvent {
            name,
            config,
            scale,
            unit,
        });
    }
    if pmu.events.is_empty() {
        return Err(SysError::Unavailable {
            what: NAME.to_string(),
            reason: format!(
                "the perf power PMU has no energy events in {}",
                events_dir.display()
            ),
            fix: None,
        });
    }
    Ok(pmu)
}

/// The domain an event measures when counted on a CPU of `package`. psys is platform-wide,
/// so only the first CPU's copy is a domain (`None` for the others).
pub fn event_domain(event: &str, package: u32, first_cpu: bool) -> Option<Domain> {
    let suffix = event.strip_prefix("energy-").unwrap_or(event);
    let pkg = format!("package-{package}");
    Some(match suffix {
        "pkg" => domain(pkg, DomainKind::Package),
        "cores" => domain(format!("{pkg}/core"), DomainKind::Core),
        "ram" => domain(format!("{pkg}/dram"), DomainKind::Dram),
        "gpu" => domain(format!("{pkg}/uncore"), DomainKind::Uncore),
        "psys" if first_cpu => domain("psys", DomainKind::Psys),
        "psys" => return None,
        other => domain(format!("{pkg}/{other}"), DomainKind::Sensor),
    })
}

struct Counter {
    counter: PerfCounter,
    first: u64,
    scale: f64,
}

/// Energy counters of the perf power PMU.
pub struct PerfPowerSource {
    domains: Vec<Domain>,
    counters: Vec<Counter>,
}

/// RAPL updates its counters about every millisecond; a PMU whose counters have not moved
/// after this many polls this far apart has nothing behind it.
const ADVANCE_POLLS: u32 = 10;
const ADVANCE_POLL: Duration = Duration::from_millis(2);

/// Whether any count read by `read` differs from `first`, polling up to `polls` times
/// `interval` apart (it returns at the first change).
fn counts_advance(
    first: &[u64],
    mut read: impl FnMut() -> Vec<u64>,
    polls: u32,
    interval: Duration,
) -> bool {
    (0..polls).any(|_| {
        std::thread::sleep(interval);
        read() != first
    })
}

impl PerfPowerSource {
    /// Discovers the PMU and opens its events. A refused open → `PermissionDenied` with the
    /// `perf_event_paranoid` fix, or `Unavailable` with the kernel's reason.
    pub fn open(roots: &Roots) -> Result<Self, SysError> {
        let pmu = discover_pmu(roots)?;
        let topology = Topology::read(roots).ok();
        let mut source = PerfPowerSource {
            domains: Vec::new(),
            counters: Vec::new(),
        };
        for (index, &cpu) in pmu.cpus.iter().enumerate() {
            let package = topology
                .as_ref()
                .and_then(|t| t.package_of(cpu))
                .unwrap_or(index as u32);
            for event in &pmu.events {
                let Some(domain) = event_domain(&event.name, package, index == 0) else {
                    continue;
                };
                let attr = PerfEventAttr::counting(pmu.pmu_type, event.config);
                let counter = PerfCounter::open(&attr, -1, cpu as i32)
                    .map_err(|e| open_error(roots, &event.name, cpu, e))?;
                let first = counter.read_count().map_err(|e| SysError::Io {
                    path: pmu_dir(roots).join("events").join(&event.name),
                    source: e,
                })?;
                source.domains.push(domain);
                source.counters.push(Counter {
                    counter,
                    first,
                    scale: event.scale,
                });
            }
        }
        let advanced = counts_advance(
            &source.counters.iter().map(|c| c.first).collect::<Vec<_>>(),
            || {
                source
                    .counters
                    .iter()
                    .map(|c| c.counter.read_count().unwrap_or(c.first))
                    .collect()
            },
            ADVANCE_POLLS,
            ADVANCE_POLL,
        );
        if !advanced {
            return Err(SysError::Unavailable {
                what: NAME.to_string(),
                reason: format!(
                    "the perf power PMU's counters ({}) did not advance in {} ms: the PMU is exposed (a virtual machine's, typically) with no energy behind it, and would read 0 J",
                    domain_names(&source.domains),
                    (ADVANCE_POLL * ADVANCE_POLLS).as_millis()
                ),
                fix: Some("measure on bare metal, or on a hypervisor that passes RAPL through; meanwhile the power model estimates".to_string()),
            });
        }
        Ok(source)
    }

    /// A one-line description for `info`.
    pub fn summary(&self) -> String {
        format!("perf power PMU events: {}", domain_names(&self.domains))
    }
}

fn open_error(roots: &Roots, event: &str, cpu: u32, err: std::io::Error) -> SysError {
    let path = pmu_dir(roots).join("events").join(event);
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => SysError::PermissionDenied {
            path,
            fix: permission_fix(perf_caps::read_paranoid(roots).ok()),
        },
        _ => SysError::Unavailable {
            what: NAME.to_string(),
            reason: format!("the kernel refused {event} on cpu{cpu}: {err}"),
            fix: None,
        },
    }
}

impl EnergySource for PerfPowerSource {
    fn name(&self) -> &str {
        NAME
    }

    fn domains(&self) -> &[Domain] {
        &self.domains
    }

    fn read_joules(&mut self, _at: Instant) -> Result<Vec<f64>, SysError> {
        self.counters
            .iter()
            .map(|c| {
                let count = c.counter.read_count().map_err(|e| SysError::Io {
                    path: PathBuf::from("perf power PMU counter"),
                    source: e,
                })?;
                Ok(count.wrapping_sub(c.first) as f64 * c.scale)
            })
            .collect()
    }

    fn max_read_interval(&self) -> Option<Duration> {
        // 64-bit perf counts of 2^-32 J units wrap after ~4 GJ: never in practice.
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{FixtureTree, PmuEventSpec};

    const SCALE: &str = "2.3283064365386962890625e-10";

    fn event<'a>(name: &'a str, config: &'a str, unit: Option<&'a str>) -> PmuEventSpec<'a> {
        PmuEventSpec {
            name,
            config,
            scale: Some(SCALE),
            unit,
        }
    }

    #[test]
    fn discovers_events_with_scale_and_unit() {
        let tree = FixtureTree::new();
        tree.perf_power_pmu(
            23,
            "0,8",
            &[
                event("energy-pkg", "event=0x02", Some("Joules")),
                event("energy-cores", "event=0x01", Some("Joules")),
                event("energy-ram", "event=0x03", None),
                event("energy-psys", "event=0x05", Some("Joules")),
                event("energy-odd", "event=0x09", Some("Watts")),
            ],
        );
        // Not energy events: ignored.
        tree.write_sys("bus/event_source/devices/power/events/other", "event=0x7");
        let pmu = discover_pmu(&tree.roots()).unwrap();
        assert_eq!(pmu.pmu_type, 23);
        assert_eq!(pmu.cpus, vec![0, 8]);
        let names: Vec<&str> = pmu.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            ["energy-cores", "energy-pkg", "energy-psys", "energy-ram"]
        );
        assert_eq!(pmu.events[1].config, 2);
        assert_eq!(pmu.events[1].scale, 2f64.powi(-32));
        assert_eq!(pmu.events[3].unit, "Joules");
        assert_eq!(pmu.notes.len(), 1);
        assert!(pmu.notes[0].contains("energy-odd"));
    }

    #[test]
    fn domains_per_package() {
        assert_eq!(
            event_domain("energy-pkg", 1, false),
            Some(domain("package-1", DomainKind::Package))
        );
        assert_eq!(
            event_domain("energy-ram", 0, true),
            Some(domain("package-0/dram", DomainKind::Dram))
        );
        assert_eq!(
            event_domain("energy-gpu", 0, true).unwrap().kind,
            DomainKind::Uncore
        );
        assert_eq!(
            event_domain("energy-psys", 0, true),
            Some(domain("psys", DomainKind::Psys))
        );
        assert_eq!(event_domain("energy-psys", 1, false), None);
    }

    #[test]
    fn corrupt_config_names_the_file() {
        let tree = FixtureTree::new();
        tree.perf_power_pmu(23, "0", &[event("energy-pkg", "umask=3", None)]);
        let err = discover_pmu(&tree.roots()).unwrap_err().to_string();
        assert!(
            err.contains("events/energy-pkg") && err.contains("umask=3"),
            "{err}"
        );
        assert_eq!(parse_config(Path::new("x"), "event=17").unwrap(), 17);
    }

    #[test]
    fn no_pmu_is_unavailable() {
        let tree = FixtureTree::new();
        assert!(matches!(
            PerfPowerSource::open(&tree.roots()),
            Err(SysError::Unavailable { .. })
        ));
    }

    #[test]
    fn counters_that_never_move_are_not_a_meter() {
        let mut reads = 0;
        let still = counts_advance(
            &[5, 7],
            || {
                reads += 1;
                vec![5, 7]
            },
            4,
            Duration::ZERO,
        );
        assert!(!still);
        assert_eq!(reads, 4, "polled every time before giving up");
        let mut reads = 0;
        let moving = counts_advance(
            &[5, 7],
            || {
                reads += 1;
                if reads < 3 {
                    vec![5, 7]
                } else {
                    vec![5, 9]
                }
            },
            10,
            Duration::ZERO,
        );
        assert!(moving);
        assert_eq!(reads, 3, "stops at the first change");
    }

    // Opening the events cannot be tested here: these machines have no power PMU, and a
    // fixture's PMU type number means nothing to the running kernel. `open` is exercised
    // on a fixture only up to discovery; `perf::tests` checks the syscall wrapper itself.
}
