//! The energy meter a command uses: the best source this machine can read, kept current in
//! the background, or — when none can be read — the power model over /proc/stat CPU time.

use std::path::Path;
use std::time::{Duration, Instant};

use powerlens_core::battery_life::{BatteryReport, ChargeSpan, Charged, Workload};
use powerlens_core::model::class::MachineFacts;
use powerlens_core::model::PowerModel;
use powerlens_core::provenance::Provenance;
use powerlens_core::run::{DomainEnergy, RunResult};
use powerlens_sys::energy::sampler::{choose_read_interval, SampledSource};
use powerlens_sys::energy::{battery_meter, discover, domain_names, Domain, SourceStatus};

use crate::battery_gauge::MeterBattery;
use crate::error::{Doing, RecordError};
use crate::exec::{Executor, System};
use crate::mock::{self, MockMachine};
use crate::mock_meter::FixtureMeter;
use powerlens_sys::{platform, procfs, Roots};

/// How to choose and read the meter.
#[derive(Debug, Clone, Default)]
pub struct MeterOptions {
    /// Parameters for the power model (`--power-model FILE`), used when no meter can be read.
    pub power_model: Option<std::path::PathBuf>,
    /// Background read interval forced by the user (`--meter-read-every`).
    pub sample_interval: Option<Duration>,
    /// The full charge of the battery for battery-life figures (`--battery-wh`), instead of
    /// the battery's own `energy_full`, or for a machine without one.
    pub battery_wh: Option<f64>,
}

enum Kind {
    Source(SampledSource),
    Model {
        model: PowerModel,
        roots: Roots,
    },
    /// The mock executor's meter: the scripted power over the mock clock, or the real
    /// source of a fixture sysfs read on it ([`crate::mock_meter`]).
    Mock {
        // Boxed: its state dwarfs the other kinds.
        machine: Box<MockMachine>,
        /// The fixture source's name, its domains and the interval it is read at (on the
        /// mock clock); `None` for the mock's own meter.
        fixture: Option<MockFixture>,
    },
}

/// A reading of the meter at one instant.
#[derive(Debug, Clone)]
pub struct Reading {
    pub at: Instant,
    /// Cumulative joules per domain (a source), or busy CPU-seconds so far (the model).
    values: Vec<f64>,
    /// The charge of the discharging battery, percent of full, when it can be read.
    pub charge_pct: Option<f64>,
}

/// What the mock's fixture meter is, for the figures and the lines that describe them.
struct MockFixture {
    name: String,
    domains: Vec<Domain>,
    interval: Duration,
    sysfs: std::path::PathBuf,
}

pub struct Meter {
    kind: Kind,
    /// The sysfs root, when it is not the machine's `/sys` (a fixture tree): a measurement
    /// read there is the fixture's, and says so wherever its provenance goes.
    fixture_sysfs: Option<std::path::PathBuf>,
    /// Every source considered, available or not, with reasons.
    pub statuses: Vec<SourceStatus>,
    /// Things the user should know about the meter (e.g. an unsafe read interval).
    pub warnings: Vec<String>,
    /// The battery behind battery-life figures; `None` without a battery or `--battery-wh`.
    pub battery: Option<MeterBattery>,
    /// Where `/proc/stat` is read for the machine's load beside each run.
    procfs: Roots,
}

impl Meter {
    pub fn open(roots: &Roots, options: &MeterOptions) -> Result<Meter, RecordError> {
        let (best, statuses) = discover::open_best(roots);
        let mut warnings = Vec::new();
        let kind = match best {
            Some(source) => {
                let (interval, warning) =
                    choose_read_interval(source.max_read_interval(), options.sample_interval);
                warnings.extend(warning);
                Kind::Source(SampledSource::start(source, interval))
            }
            None => Kind::Model {
                model: load_model(options.power_model.as_deref(), roots)?,
                roots: roots.clone(),
            },
        };
        let source = match &kind {
            Kind::Source(s) => Some(s.name()),
            _ => None,
        };
        let battery = battery_of(roots, options, source);
        Ok(Meter {
            kind,
            fixture_sysfs: (roots.sysfs != Roots::default().sysfs).then(|| roots.sysfs.clone()),
            statuses,
            warnings,
            battery,
            procfs: roots.clone(),
        })
    }

    /// The mock executor and its meter ([`mock`]): runs are scripted, not executed, and
    /// every figure is labelled mocked. `setup` is a line of mock steps run once first
    /// (e.g. `idle 5W`).
    ///
    /// On a fixture sysfs (`roots` elsewhere than `/sys`) that holds a meter, the meter is
    /// that meter's source, read in the background every `sample_interval` (or the
    /// interval [`Meter::open`] would choose) of the mock clock, over files the script's
    /// `draw` steps write, and the battery figures are its battery's, as [`Meter::open`]
    /// makes them. Otherwise it is the mock's own, and `battery_wh` gives battery-life
    /// figures for that capacity (it has no battery gauge).
    pub fn mock(roots: &Roots, setup: &str, options: &MeterOptions) -> Result<Meter, RecordError> {
        let fixture_sysfs = (!is_this_machines_sysfs(roots)).then(|| roots.sysfs.clone());
        let (best, statuses) = match &fixture_sysfs {
            Some(_) => discover::open_best(roots),
            None => (None, Vec::new()),
        };
        let mut warnings = Vec::new();
        let (machine, fixture, battery) = match (best, fixture_sysfs) {
            (Some(source), Some(sysfs)) => {
                let (interval, warning) =
                    choose_read_interval(source.max_read_interval(), options.sample_interval);
                warnings.extend(warning);
                let fixture = MockFixture {
                    name: source.name().to_string(),
                    domains: source.domains().to_vec(),
                    interval,
                    sysfs: sysfs.clone(),
                };
                let battery = battery_of(roots, options, Some(&fixture.name));
                let meter = FixtureMeter::new(sysfs, source, interval);
                (MockMachine::reading(meter), Some(fixture), battery)
            }
            _ if options.sample_interval.is_some() => return Err(RecordError::MockReadsNoMeter),
            _ => (
                MockMachine::new(),
                None,
                options.battery_wh.map(MeterBattery::given),
            ),
        };
        if !setup.trim().is_empty() {
            machine.run_shell(setup, false)?;
        }
        Ok(Meter {
            kind: Kind::Mock {
                machine: Box::new(machine),
                fixture,
            },
            fixture_sysfs: None,
            statuses,
            warnings,
            battery,
            procfs: roots.clone(),
        })
    }

    /// What runs the commands this meter measures, and keeps the clock its readings are
    /// taken on: the mock for the mock meter, this machine for every other.
    pub fn executor(&self) -> &dyn Executor {
        match &self.kind {
            Kind::Mock { machine, .. } => machine.as_ref(),
            Kind::Source(_) | Kind::Model { .. } => &System,
        }
    }

    /// The whole machine's CPU time so far (`/proc/stat`, or the mock's): the runner reads
    /// it before and after each run to know what other processes used meanwhile.
    pub fn machine_cpu(&self) -> Result<procfs::CpuTimes, powerlens_sys::SysError> {
        match &self.kind {
            Kind::Mock { machine, .. } => Ok(machine.cpu_times()),
            Kind::Source(_) | Kind::Model { .. } => procfs::read_cpu_times(&self.procfs),
        }
    }

    /// The power model alone, whatever meter the machine has: what a long-running monitor
    /// falls back to when its meter stops answering.
    pub fn estimated(roots: &Roots, options: &MeterOptions) -> Result<Meter, RecordError> {
        Ok(Meter {
            kind: Kind::Model {
                model: load_model(options.power_model.as_deref(), roots)?,
                roots: roots.clone(),
            },
            fixture_sysfs: (roots.sysfs != Roots::default().sysfs).then(|| roots.sysfs.clone()),
            statuses: Vec::new(),
            warnings: Vec::new(),
            // Battery-life figures are the meter's that the monitor falls back from.
            battery: None,
            procfs: roots.clone(),
        })
    }

    pub fn read(&self) -> Result<Reading, RecordError> {
        let values = match &self.kind {
            Kind::Source(s) => s
                .read()
                .doing(|| format!("reading energy from {}", s.name()))?,
            Kind::Model { roots, .. } => vec![procfs::read_cpu_times(roots)?.busy_s],
            Kind::Mock { machine, fixture } => machine.read_meter().doing(|| {
                let name = fixture.as_ref().map_or("the mock's meter", |f| &f.name);
                format!("reading energy from {name} on the mock clock")
            })?,
        };
        Ok(Reading {
            at: self.executor().now(),
            values,
            charge_pct: self.battery.as_ref().and_then(MeterBattery::charge_pct),
        })
    }

    /// The battery's charge over the interval between two readings, when both read it.
    pub fn charge_between(&self, from: &Reading, to: &Reading) -> Option<ChargeSpan> {
        Some(ChargeSpan {
            start_pct: from.charge_pct?,
            end_pct: to.charge_pct?,
            seconds: to.at.duration_since(from.at).as_secs_f64(),
        })
    }

    /// The battery-life figures of a `run` result; `None` without a battery or
    /// `--battery-wh`.
    pub fn battery_report(&self, result: &RunResult) -> Option<BatteryReport> {
        let battery = self.battery.as_ref()?;
        Some(match &result.summary {
            Some(summary) => battery
                .setup
                .report(
                    &Workload::of_runs(summary),
                    &result.charges(),
                    &result.provenance,
                )
                .charging(Charged::of_runs(&result.provenance)),
            None => BatteryReport::unavailable("no run finished", None),
        })
    }

    /// Energy per domain between two readings. A meter measures the whole machine; the model
    /// estimates from CPU time, and charges `command_cpu_s` (the measured command's own CPU
    /// time, from its rusage) when given rather than every process's busy time in
    /// /proc/stat, so an estimate of a workload is not swamped by whatever else runs.
    pub fn energy_between(
        &self,
        from: &Reading,
        to: &Reading,
        command_cpu_s: Option<f64>,
    ) -> Vec<DomainEnergy> {
        match &self.kind {
            Kind::Source(s) => source_energy(s.domains(), from, to),
            Kind::Mock {
                fixture: Some(f), ..
            } => source_energy(&f.domains, from, to),
            Kind::Model { model, .. } => {
                let seconds = to.at.duration_since(from.at).as_secs_f64();
                let busy = command_cpu_s.unwrap_or(to.values[0] - from.values[0]);
                vec![DomainEnergy {
                    name: "system".into(),
                    joules: model.energy_j(seconds, busy),
                    counts_in_total: true,
                }]
            }
            Kind::Mock { fixture: None, .. } => {
                [(mock::TOTAL_DOMAIN, true), (mock::SPIN_DOMAIN, false)]
                    .iter()
                    .zip(from.values.iter().zip(&to.values))
                    .map(|((name, counts_in_total), (a, b))| DomainEnergy {
                        name: name.to_string(),
                        joules: b - a,
                        counts_in_total: *counts_in_total,
                    })
                    .collect()
            }
        }
    }

    /// Average total power (packages + DRAM, or the model's system figure) between two
    /// readings taken with nothing measured in between, e.g. an idle baseline.
    pub fn average_power_w(&self, from: &Reading, to: &Reading) -> f64 {
        let seconds = to.at.duration_since(from.at).as_secs_f64();
        let joules: f64 = self
            .energy_between(from, to, None)
            .iter()
            .filter(|d| d.counts_in_total)
            .map(|d| d.joules)
            .sum();
        joules / seconds
    }

    /// The power model, when no meter can be read and figures are estimates.
    pub fn model(&self) -> Option<&PowerModel> {
        match &self.kind {
            Kind::Model { model, .. } => Some(model),
            Kind::Source(_) | Kind::Mock { .. } => None,
        }
    }

    pub fn provenance(&self) -> Provenance {
        match &self.kind {
            Kind::Source(s) => Provenance::Measured {
                source: match &self.fixture_sysfs {
                    None => s.name().to_string(),
                    Some(root) => format!("{}, fixture sysfs {}", s.name(), root.display()),
                },
            },
            Kind::Model { model, .. } => model.provenance(),
            Kind::Mock { fixture, .. } => Provenance::Mocked {
                source: match fixture {
                    None => MOCK_SOURCE.into(),
                    Some(f) => format!(
                        "mock executor: every run scripted, {} read from the scripted fixture sysfs {}",
                        f.name,
                        f.sysfs.display()
                    ),
                },
            },
        }
    }

    /// The lines to show before measuring: what measures energy and, with a battery, what
    /// the battery figures rest on (or why there are none).
    pub fn introduction(&self) -> Vec<String> {
        std::iter::once(self.describe())
            .chain(self.battery.as_ref().map(|b| b.describe()))
            .collect()
    }

    /// One line for stderr: what measures energy, and why not something better — for a
    /// measured command (`run`, `compare`), whose own CPU time the power model charges.
    pub fn describe(&self) -> String {
        self.describe_charging(Charged::Command)
    }

    /// [`Meter::describe`], saying whose busy CPUs the power model charges: the command's,
    /// or the machine's where there is no command (`agent`, `top`).
    pub fn describe_charging(&self, charged: Charged) -> String {
        match &self.kind {
            Kind::Source(s) => {
                let scope = if s.domains().iter().any(|d| d.kind.counts_in_total()) {
                    ""
                } else {
                    "; the total is the sum of these sensors, whose scope the kernel does not state"
                };
                format!(
                    "energy: measured by {} ({}), read every {} ms{scope}",
                    s.name(),
                    domain_names(s.domains()),
                    s.interval().as_millis()
                )
            }
            Kind::Model { model, .. } => {
                let reasons: Vec<String> = self
                    .statuses
                    .iter()
                    .filter(|s| !s.available)
                    .map(|s| format!("{}: {}", s.name, s.reason))
                    .collect();
                let chosen = model
                    .machine_class_reason
                    .as_ref()
                    .map(|why| format!("; chosen because {why}"))
                    .unwrap_or_default();
                let whose = match charged {
                    Charged::Command => "the command",
                    Charged::Machine => "the machine",
                };
                format!(
                    "energy: ESTIMATED by the power model {} ({:.2} W idle + {:.2} W per busy CPU of {whose}{chosen}) — no meter can be read{}",
                    model.name,
                    model.idle_w,
                    model.busy_cpu_w,
                    if reasons.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", reasons.join("; "))
                    }
                )
            }
            Kind::Mock { fixture: None, .. } => format!(
                "energy: MOCKED by the mock executor: no command runs and no meter is read, every run's times and power are scripted (domains {}, {})",
                mock::TOTAL_DOMAIN,
                mock::SPIN_DOMAIN
            ),
            Kind::Mock {
                fixture: Some(f), ..
            } => format!(
                "energy: MOCKED by the mock executor: no command runs; {} ({}) is read every {} ms of the mock clock from the fixture sysfs {}, whose meter files the script's `draw` steps write",
                f.name,
                domain_names(&f.domains),
                // Fractions too: a test works out what each read sees.
                f.interval.as_nanos() as f64 / 1e6,
                f.sysfs.display()
            ),
        }
    }
}

/// Whether `roots` reach this machine's own sysfs, by whatever path (a link to `/sys`
/// too): the mock never reads, nor writes, a meter there.
fn is_this_machines_sysfs(roots: &Roots) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    real(&roots.sysfs) == real(&Roots::default().sysfs)
}

/// The battery behind a meter's battery-life figures: this machine's (or the fixture's),
/// or `--battery-wh`'s. `source` names the meter's source, if it has one: a battery
/// source is the whole machine; any other meter (or the model) covers part of it.
fn battery_of(roots: &Roots, options: &MeterOptions, source: Option<&str>) -> Option<MeterBattery> {
    let whole_system = source == Some(battery_meter::NAME);
    // A battery that cannot be read costs its figures, not the measurement.
    MeterBattery::open(roots, options.battery_wh, whole_system)
        .unwrap_or_else(|e| Some(MeterBattery::unreadable(&e, options.battery_wh)))
}

/// Energy per domain of a source between two of its readings. A source with no
/// package-level domain (hwmon sensors) would otherwise total a silent 0 J: then its
/// sensors are the total, and `describe` says so.
fn source_energy(domains: &[Domain], from: &Reading, to: &Reading) -> Vec<DomainEnergy> {
    let any_total = domains.iter().any(|d| d.kind.counts_in_total());
    domains
        .iter()
        .zip(from.values.iter().zip(&to.values))
        .map(|(d, (a, b))| DomainEnergy {
            name: d.name.clone(),
            joules: (b - a).max(0.0),
            counts_in_total: d.kind.counts_in_total() || !any_total,
        })
        .collect()
}

/// The mock meter's provenance source.
const MOCK_SOURCE: &str = "mock executor: every run scripted, nothing measured";

/// The power model as an energy source in `info`: always available, never a measurement.
pub fn model_status(model: &PowerModel) -> SourceStatus {
    SourceStatus {
        name: powerlens_sys::energy::POWER_MODEL_SOURCE.into(),
        available: true,
        reason: format!(
            "estimates, not measurements, from /proc/stat CPU time: {:.2} W idle + {:.2} W per busy CPU ({}); used only when no meter above can be read",
            model.idle_w, model.busy_cpu_w, model.name
        ),
        fix: None,
        domains: Vec::new(),
    }
}

/// What the default power model is chosen from: this machine's CPU, chassis and
/// batteries, read below the roots.
pub fn machine_facts(roots: &Roots) -> MachineFacts {
    let p = platform::read(roots);
    MachineFacts {
        cpu_model: p.cpu_model,
        logical_cpus: p.logical_cpus,
        hypervisor: p.hypervisor,
        chassis_type: p.chassis_type,
        batteries: p.batteries,
    }
}

/// The power model: the file given (`--power-model`), else the default for this
/// machine's class.
pub fn load_model(path: Option<&Path>, roots: &Roots) -> Result<PowerModel, RecordError> {
    let Some(path) = path else {
        return Ok(PowerModel::for_machine(&machine_facts(roots)));
    };
    let text = std::fs::read_to_string(path)
        .doing(|| format!("reading the power model {}", path.display()))?;
    PowerModel::from_json(&text).doing(|| {
        format!(
            "in the power model {} (write one with `powerlens calibrate -o FILE`)",
            path.display()
        )
    })
}
