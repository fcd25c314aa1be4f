//! Battery life: how long a full charge lasts at the measured power, how many runs of the
//! workload it retires, and the conventional figure of the Windows 7 vs Windows 8 power
//! study — the time of a 1% discharge × 100, timed on the battery's own gauge.
//!
//! The study's verdict is in work per charge: one system drains the battery in 1 h, the
//! other lasts 2 h 30 min but still needs 30 more minutes to finish the job. So the
//! figures here are per run (the work), and [`job_on_battery`] says whether a job of many
//! runs finishes on one charge. Pure arithmetic: no I/O.

use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;

/// The discharge, in percent of a full charge, the conventional figure needs: the study
/// times a 1% discharge.
pub const MIN_DISCHARGE_PCT: f64 = 1.0;

const J_PER_WH: f64 = 3600.0;

/// A full charge, and where its size comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    pub energy_full_wh: f64,
    /// `energy_full`, `charge_full × voltage_now`, or `--battery-wh`.
    pub energy_full_source: String,
    /// The batteries whose capacities it sums (e.g. `BAT0`); empty for `--battery-wh`
    /// on a machine without a discharging battery.
    pub batteries: Vec<String>,
}

/// The battery's charge, in percent of full, at the start and the end of one measured
/// interval (a run, a recording) of `seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChargeSpan {
    pub start_pct: f64,
    pub end_pct: f64,
    pub seconds: f64,
}

impl ChargeSpan {
    /// The discharge over the span, in percent of full (negative when it charged).
    pub fn discharged_pct(&self) -> f64 {
        self.start_pct - self.end_pct
    }
}

/// The gauge readings behind the conventional figure: every measured interval's span, in
/// the order measured, and what the percentage is read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Charges<'a> {
    pub spans: &'a [ChargeSpan],
    /// e.g. `energy_now / energy_full`, or `capacity`.
    pub source: &'a str,
    /// The percentage comes in whole percent (the `capacity` file): a drop of N points is
    /// known to about ±1 point.
    pub whole_percent: bool,
}

/// What one run of the workload costs: the input of the figures. For a recording, the
/// recording is the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    /// Mean energy to retire one run (all of it: the battery pays for idle too).
    pub energy_per_run_j: f64,
    /// Mean power over the runs.
    pub power_w: f64,
    /// Mean wall time of one run.
    pub time_per_run_s: f64,
}

/// The battery-life figures of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatteryLife {
    pub batteries: Vec<String>,
    pub energy_full_wh: f64,
    pub energy_full_source: String,
    /// The mean power the life is computed at.
    pub power_w: f64,
    pub energy_per_run_j: f64,
    pub time_per_run_s: f64,
    /// A full charge at `power_w`.
    pub life_h: f64,
    /// A full charge over `energy_per_run_j`.
    pub runs_per_charge: f64,
    /// The time of a 1% discharge × 100, over the measured charge range; `None` with
    /// `conventional_life_unavailable` saying why and how to get it.
    pub conventional_life_h: Option<f64>,
    pub conventional_life_unavailable: Option<String>,
    /// The charge at the start of the first measured interval and at the end of the last.
    pub charge_range_pct: Option<[f64; 2]>,
    /// The discharge summed over the measured intervals, in percent of full.
    pub discharged_pct: Option<f64>,
    /// What the charge was read from (`energy_now / energy_full`, `capacity`, …).
    pub charge_source: Option<String>,
    /// The energy behind `life_h` and `runs_per_charge`.
    pub provenance: Provenance,
    /// What a reader must know: the scope of the energy, the gauge's resolution.
    pub notes: Vec<String>,
    /// Whose energy a charge pays for: the command's own (`run` under the power model),
    /// or the whole machine's over the measured time (`record`, a meter). `None` in figures
    /// saved before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_charges: Option<Charged>,
}

/// Whose energy a figure charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Charged {
    /// The measured command's: the power model on its own CPU time (and the idle term).
    Command,
    /// The whole machine's over the measured time: every process's, and idle.
    Machine,
}

impl Charged {
    /// Whose energy `energy` is where the command's own CPU time is known (`run`,
    /// `compare`): the power model charges it; a meter reads the whole machine.
    pub fn of_runs(energy: &Provenance) -> Charged {
        match energy {
            Provenance::Estimated { .. } => Charged::Command,
            _ => Charged::Machine,
        }
    }
}

impl BatteryReport {
    /// The figures, saying whose energy they charge.
    pub fn charging(mut self, charged: Charged) -> BatteryReport {
        if let Some(life) = &mut self.life {
            life.battery_charges = Some(charged);
        }
        self
    }
}

/// The battery-life figures, or why there are none and the fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatteryReport {
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    #[serde(flatten)]
    pub life: Option<BatteryLife>,
}

impl BatteryReport {
    pub fn unavailable(reason: impl Into<String>, fix: Option<String>) -> BatteryReport {
        BatteryReport {
            available: false,
            reason: Some(reason.into()),
            fix,
            life: None,
        }
    }
}

/// Why a figure is missing, and how to get it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Missing {
    pub reason: String,
    pub fix: Option<String>,
}

/// What a measurement knows of the battery before it starts — the full charge, and how
/// the gauge is read — so that its figures can be made once the work is measured. Stored
/// with a recording (its `battery` metadata).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatterySetup {
    /// The full charge; `None` with `capacity_unavailable` saying why.
    pub capacity: Option<Capacity>,
    pub capacity_unavailable: Option<Missing>,
    /// What the charge is read from, when a discharging battery's gauge can be read;
    /// `None` with `charge_unavailable` saying why.
    pub charge_source: Option<String>,
    #[serde(default)]
    pub whole_percent: bool,
    pub charge_unavailable: Option<String>,
    /// Whether the energy is the battery's own discharge (it is the meter).
    #[serde(default)]
    pub whole_system: bool,
}

impl BatterySetup {
    /// The figures of `workload`, with the gauge's `spans` (in the order measured).
    pub fn report(
        &self,
        workload: &Workload,
        spans: &[ChargeSpan],
        energy: &Provenance,
    ) -> BatteryReport {
        let Some(capacity) = &self.capacity else {
            let missing = self.capacity_unavailable.clone().unwrap_or(Missing {
                reason: "the battery's full capacity is unknown".into(),
                fix: Some("give it with --battery-wh WH".into()),
            });
            return BatteryReport::unavailable(missing.reason, missing.fix);
        };
        let charges = match (&self.charge_source, &self.charge_unavailable) {
            (Some(source), _) => Ok(Charges {
                spans,
                source,
                whole_percent: self.whole_percent,
            }),
            (None, why) => Err(why
                .clone()
                .unwrap_or_else(|| "the battery's charge could not be read".into())),
        };
        figures(capacity, workload, charges, energy, self.whole_system)
    }

    /// The same battery with the full charge given by the user (`--battery-wh`).
    pub fn with_capacity_wh(mut self, energy_full_wh: f64) -> BatterySetup {
        let batteries = self
            .capacity
            .take()
            .map(|c| c.batteries)
            .unwrap_or_default();
        self.capacity = Some(given_capacity(energy_full_wh, batteries));
        self.capacity_unavailable = None;
        self
    }
}

/// Where a capacity given by the user comes from.
pub const GIVEN: &str = "--battery-wh";

/// A full charge of `energy_full_wh` given by the user, for `batteries` (the discharging
/// ones whose gauge is read, if any).
pub fn given_capacity(energy_full_wh: f64, batteries: Vec<String>) -> Capacity {
    Capacity {
        energy_full_wh,
        energy_full_source: GIVEN.into(),
        batteries,
    }
}

/// The figures of a saved result again, with a full charge given by the user
/// (`compare --battery-wh` on saved results): the life and the work per charge follow the
/// new charge; the conventional life, timed on the battery that was measured, stays.
/// Without figures in the result, they are made from `workload` alone.
pub fn with_given_capacity(
    saved: Option<&BatteryReport>,
    energy_full_wh: f64,
    workload: &Workload,
    energy: &Provenance,
) -> BatteryReport {
    if let Some(mut life) = saved.and_then(|r| r.life.clone()) {
        life.energy_full_wh = energy_full_wh;
        life.energy_full_source = GIVEN.into();
        life.life_h = energy_full_wh / life.power_w;
        life.runs_per_charge = energy_full_wh * J_PER_WH / life.energy_per_run_j;
        return BatteryReport {
            available: true,
            reason: None,
            fix: None,
            life: Some(life),
        };
    }
    figures(
        &given_capacity(energy_full_wh, Vec::new()),
        workload,
        Err("these figures hold no battery charge readings (measured without a discharging battery, or imported)".into()),
        energy,
        false,
    )
}

impl Workload {
    /// One run of a compared configuration: the means over its samples (`None` without).
    pub fn of_samples(samples: &[crate::compare::Sample]) -> Option<Workload> {
        let n = samples.len() as f64;
        let mean = |f: fn(&crate::compare::Sample) -> f64| samples.iter().map(f).sum::<f64>() / n;
        (!samples.is_empty()).then(|| Workload {
            energy_per_run_j: mean(|s| s.energy_j),
            power_w: mean(|s| s.power_w),
            time_per_run_s: mean(|s| s.wall_s),
        })
    }

    /// One run of a `run` result: the means over its runs.
    pub fn of_runs(summary: &crate::run::RunSummary) -> Workload {
        Workload {
            energy_per_run_j: summary.energy_j.mean,
            power_w: summary.power_w.mean,
            time_per_run_s: summary.wall_s.mean,
        }
    }
}

/// The figures of `workload` on a battery of `capacity`. `charges` are the gauge readings
/// (or why there are none); `whole_system` says whether the energy is the battery's own
/// discharge (the whole machine) rather than a meter of part of it or a model.
pub fn figures(
    capacity: &Capacity,
    workload: &Workload,
    charges: Result<Charges<'_>, String>,
    energy: &Provenance,
    whole_system: bool,
) -> BatteryReport {
    let Workload {
        energy_per_run_j,
        power_w,
        time_per_run_s,
    } = *workload;
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !positive(energy_per_run_j) || !positive(power_w) {
        return BatteryReport::unavailable(
            format!("the runs measured no energy ({energy_per_run_j} J): a full charge would last forever by this arithmetic"),
            Some("lengthen the workload so that the meter sees it".into()),
        );
    }
    let full_j = capacity.energy_full_wh * J_PER_WH;
    let mut notes = Vec::new();
    if let Provenance::Estimated { model, .. } = energy {
        notes.push(format!(
            "the energy is ESTIMATED by the power model '{model}', so life_h and runs_per_charge are estimates too: measure on the battery to know"
        ));
    } else if !whole_system {
        notes.push(format!(
            "the energy is {}, not the battery's own discharge: what it leaves out (display, disks, radios) drains the battery too, so a charge lasts less than life_h says",
            energy.label()
        ));
    }
    let mut life = BatteryLife {
        batteries: capacity.batteries.clone(),
        energy_full_wh: capacity.energy_full_wh,
        energy_full_source: capacity.energy_full_source.clone(),
        power_w,
        energy_per_run_j,
        time_per_run_s,
        life_h: capacity.energy_full_wh / power_w,
        runs_per_charge: full_j / energy_per_run_j,
        conventional_life_h: None,
        conventional_life_unavailable: None,
        charge_range_pct: None,
        discharged_pct: None,
        charge_source: None,
        provenance: energy.clone(),
        notes,
        battery_charges: None,
    };
    match charges {
        Ok(charges) => conventional(&mut life, &charges),
        Err(why) => life.conventional_life_unavailable = Some(why),
    }
    BatteryReport {
        available: true,
        reason: None,
        fix: None,
        life: Some(life),
    }
}

/// Fills the conventional figure from the gauge: the summed time of the intervals over
/// their summed discharge, × 100 — when that discharge reaches [`MIN_DISCHARGE_PCT`].
fn conventional(life: &mut BatteryLife, charges: &Charges<'_>) {
    let (Some(first), Some(last)) = (charges.spans.first(), charges.spans.last()) else {
        life.conventional_life_unavailable =
            Some("no charge was read from the battery's gauge".into());
        return;
    };
    let discharged: f64 = charges.spans.iter().map(ChargeSpan::discharged_pct).sum();
    let seconds: f64 = charges.spans.iter().map(|s| s.seconds).sum();
    let range = [first.start_pct, last.end_pct];
    life.charge_range_pct = Some(range);
    life.discharged_pct = Some(discharged);
    life.charge_source = Some(charges.source.to_string());
    let [from, to] = range;
    if discharged < 0.0 {
        life.conventional_life_unavailable = Some(format!(
            "the charge rose by {:.2}% ({from:.2}% → {to:.2}%): the battery was charging, so there is no discharge to time; unplug the charger",
            -discharged
        ));
    } else if discharged < MIN_DISCHARGE_PCT {
        life.conventional_life_unavailable = Some(format!(
            "the measurement discharged {discharged:.2}% of the battery ({from:.2}% → {to:.2}%, by {}), less than the {MIN_DISCHARGE_PCT}% the conventional method times: measure for longer (more --runs, a longer command or a longer recording)",
            charges.source
        ));
    } else {
        life.conventional_life_h = Some(seconds / discharged * 100.0 / 3600.0);
        if charges.whole_percent {
            life.notes.push(format!(
                "the charge is read from {} in whole percent: the discharge of {discharged:.0} points is known to about ±1 point, so conventional_life_h is uncertain by about {:.0}%",
                charges.source,
                100.0 / discharged
            ));
        }
    }
}

/// A job of many runs on one charge: whether it finishes, or when the battery runs out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct JobOnBattery {
    /// The job, in runs.
    pub runs: f64,
    /// The time the job takes, runs × time per run.
    pub time_h: f64,
    /// The charges it drains (above 1: the battery runs out before the job is done).
    pub charges: f64,
    pub finishes: bool,
    /// When the battery runs out, from the start of the job; `None` when it finishes.
    pub runs_out_after_h: Option<f64>,
    /// The time the job still needs when the battery runs out.
    pub short_by_h: Option<f64>,
}

/// A job of `runs` runs, run back to back on a full charge.
pub fn job_on_battery(life: &BatteryLife, runs: f64) -> JobOnBattery {
    let time_h = runs * life.time_per_run_s / 3600.0;
    let charges = runs / life.runs_per_charge;
    let finishes = charges <= 1.0;
    let runs_out_after_h = (!finishes).then(|| life.runs_per_charge * life.time_per_run_s / 3600.0);
    JobOnBattery {
        runs,
        time_h,
        charges,
        finishes,
        runs_out_after_h,
        short_by_h: runs_out_after_h.map(|after| time_h - after),
    }
}

/// The battery figures of one compared configuration, and its job when one was given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelBattery {
    pub label: String,
    #[serde(flatten)]
    pub report: BatteryReport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobOnBattery>,
}

impl LabelBattery {
    /// The figures of `label`, with its job of `job_runs` runs when given.
    pub fn new(label: &str, report: BatteryReport, job_runs: Option<f64>) -> LabelBattery {
        let job = job_runs
            .zip(report.life.as_ref())
            .map(|(runs, life)| job_on_battery(life, runs));
        LabelBattery {
            label: label.to_string(),
            report,
            job,
        }
    }
}

/// A duration in hours as people say it: `2 h 05 min`, `45 min`, `12 s`.
pub fn duration_text(hours: f64) -> String {
    if !hours.is_finite() {
        return format!("{hours} h");
    }
    let total_s = (hours * 3600.0).round() as u64;
    match (total_s / 3600, total_s % 3600 / 60, total_s % 60) {
        (0, 0, s) => format!("{s} s"),
        (0, m, _) => format!("{m} min"),
        (h, m, _) => format!("{h} h {m:02} min"),
    }
}

/// A full charge as the views say it: `BAT0 + BAT1 57.4 Wh full (energy_full)`.
pub fn full_charge_text(batteries: &[String], energy_full_wh: f64, source: &str) -> String {
    let names = match batteries {
        [] => String::new(),
        names => format!("{} ", names.join(" + ")),
    };
    format!("{names}{} Wh full ({source})", wh_text(energy_full_wh))
}

/// Watt-hours to the milliwatt-hour, trailing zeros trimmed: `57`, `45.6`, `0.556`.
pub fn wh_text(wh: f64) -> String {
    format!("{}", (wh * 1000.0).round() / 1000.0)
}

/// A count of runs: whole above 10, two decimals below.
fn runs_text(runs: f64) -> String {
    if runs >= 10.0 {
        format!("{runs:.0}")
    } else {
        format!("{runs:.2}")
    }
}

/// The work-per-charge sentence of a candidate against the baseline, for compare's
/// verdict: how many runs (and units of `work`) each retires per charge, and — for a job
/// given in runs, or when one of them cannot finish even one run — whether each finishes
/// it or runs out before. `None` when either side has no figures.
pub fn per_charge_sentence(
    baseline: &LabelBattery,
    candidate: &LabelBattery,
    work: f64,
) -> Option<String> {
    let (b, c) = (
        baseline.report.life.as_ref()?,
        candidate.report.life.as_ref()?,
    );
    let units = |life: &BatteryLife| {
        if work == 1.0 {
            String::new()
        } else {
            format!(
                " ({} units of work)",
                runs_text(life.runs_per_charge * work)
            )
        }
    };
    let change = c.runs_per_charge / b.runs_per_charge - 1.0;
    let relative = if change.abs() < crate::verdict::NEGLIGIBLE {
        "as many".to_string()
    } else {
        format!(
            "{:.1}% {}",
            change.abs() * 100.0,
            if change > 0.0 { "more" } else { "fewer" }
        )
    };
    let charge = |life: &BatteryLife| {
        full_charge_text(
            &life.batteries,
            life.energy_full_wh,
            &life.energy_full_source,
        )
    };
    let capacity = if charge(b) == charge(c) {
        format!("per charge of {}", charge(b))
    } else {
        format!("per charge of {} and of {}", charge(b), charge(c))
    };
    let mut s = format!(
        "On battery, {capacity}: {} retires {} runs{}, {} {}{}: {relative}.",
        baseline.label,
        runs_text(b.runs_per_charge),
        units(b),
        candidate.label,
        runs_text(c.runs_per_charge),
        units(c),
    );
    let jobs = [(baseline, b), (candidate, c)];
    let given = baseline.job.zip(candidate.job);
    if let Some((jb, jc)) = given {
        s += &format!(
            " For the job of {} runs: {}; {}.",
            runs_text(jb.runs),
            job_clause(&baseline.label, &jb),
            job_clause(&candidate.label, &jc)
        );
    } else {
        for (side, life) in jobs {
            if life.runs_per_charge < 1.0 {
                let job = job_on_battery(life, 1.0);
                s += &format!(
                    " {} for one run.",
                    capitalize(&job_clause(&side.label, &job))
                );
            }
        }
    }
    Some(s)
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// `A finishes it in 1 h 00 min on 98% of a charge` or `B runs out of battery after
/// 2 h 30 min, 30 min before finishing it (3 h 00 min)`.
fn job_clause(label: &str, job: &JobOnBattery) -> String {
    match (job.runs_out_after_h, job.short_by_h) {
        (Some(after), Some(short)) => format!(
            "{label} runs out of battery after {}, {} before finishing it ({})",
            duration_text(after),
            duration_text(short),
            duration_text(job.time_h)
        ),
        _ => format!(
            "{label} finishes it in {} on {:.0}% of a charge",
            duration_text(job.time_h),
            job.charges * 100.0
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured() -> Provenance {
        Provenance::Measured {
            source: "battery".into(),
        }
    }

    fn capacity(wh: f64) -> Capacity {
        Capacity {
            energy_full_wh: wh,
            energy_full_source: "energy_full".into(),
            batteries: vec!["BAT0".into()],
        }
    }

    fn span(start: f64, end: f64, seconds: f64) -> ChargeSpan {
        ChargeSpan {
            start_pct: start,
            end_pct: end,
            seconds,
        }
    }

    /// A run of 2 s at 10 W: 20 J.
    fn two_second_run() -> Workload {
        Workload {
            energy_per_run_j: 20.0,
            power_w: 10.0,
            time_per_run_s: 2.0,
        }
    }

    fn charges(spans: &[ChargeSpan]) -> Result<Charges<'_>, String> {
        Ok(Charges {
            spans,
            source: "energy_now / energy_full",
            whole_percent: false,
        })
    }

    #[test]
    fn life_and_runs_per_charge_by_hand() {
        // 50 Wh at 10 W: 5 h. A run of 2 s at 10 W is 20 J; 50 Wh = 180 000 J: 9000 runs.
        let work = two_second_run();
        let spans = [span(90.0, 89.6, 30.0), span(89.6, 89.1, 36.0)];
        let r = figures(&capacity(50.0), &work, charges(&spans), &measured(), true);
        assert!(r.available && r.reason.is_none());
        let life = r.life.unwrap();
        assert_eq!(life.life_h, 5.0);
        assert_eq!(life.runs_per_charge, 9000.0);
        // 66 s for 0.9%: below 1%, no conventional figure, and the fix says measure longer.
        assert_eq!(life.conventional_life_h, None);
        let why = life.conventional_life_unavailable.unwrap();
        assert!(
            why.contains("discharged 0.90%") && why.contains("more --runs"),
            "{why}"
        );
        assert_eq!(life.charge_range_pct, Some([90.0, 89.1]));
        assert!(
            life.notes.is_empty(),
            "the battery's own discharge: whole system"
        );
    }

    #[test]
    fn conventional_life_is_time_of_one_percent_times_100() {
        let work = two_second_run();
        // 0.8% in 150 s and 0.7% in 120 s: 1.5% in 270 s, so 1% in 180 s: 18 000 s = 5 h.
        let spans = [span(85.0, 84.2, 150.0), span(84.2, 83.5, 120.0)];
        let life = figures(&capacity(50.0), &work, charges(&spans), &measured(), true)
            .life
            .unwrap();
        let h = life.conventional_life_h.unwrap();
        assert!((h - 5.0).abs() < 1e-12, "{h}");
        assert!((life.discharged_pct.unwrap() - 1.5).abs() < 1e-12);
        assert_eq!(
            life.charge_source.as_deref(),
            Some("energy_now / energy_full")
        );
        assert_eq!(life.conventional_life_unavailable, None);
        // Whole-percent readings: 2 points, known to ±1.
        let whole = Charges {
            spans: &[span(80.0, 78.0, 360.0)],
            source: "capacity",
            whole_percent: true,
        };
        let life = figures(&capacity(50.0), &work, Ok(whole), &measured(), true)
            .life
            .unwrap();
        assert!((life.conventional_life_h.unwrap() - 5.0).abs() < 1e-12);
        assert!(
            life.notes[0].contains("±1 point") && life.notes[0].contains("50%"),
            "{:?}",
            life.notes
        );
    }

    #[test]
    fn what_is_missing_says_why() {
        let work = two_second_run();
        // Charging during the runs.
        let life = figures(
            &capacity(50.0),
            &work,
            charges(&[span(50.0, 51.5, 60.0)]),
            &measured(),
            true,
        )
        .life
        .unwrap();
        assert!(life
            .conventional_life_unavailable
            .unwrap()
            .contains("unplug"));
        // No gauge: the caller's reason.
        let life = figures(
            &capacity(50.0),
            &work,
            Err("no discharging battery".into()),
            &measured(),
            false,
        )
        .life
        .unwrap();
        assert_eq!(
            life.conventional_life_unavailable.as_deref(),
            Some("no discharging battery")
        );
        assert!(
            life.notes[0].contains("measured (battery)") && life.notes[0].contains("lasts less")
        );
        // No energy: no figures at all.
        let zero = Workload {
            energy_per_run_j: 0.0,
            ..work
        };
        let r = figures(&capacity(50.0), &zero, charges(&[]), &measured(), true);
        assert!(!r.available && r.life.is_none());
        assert!(r.reason.unwrap().contains("no energy"));
    }

    #[test]
    fn json_is_flat_and_reads_back() {
        let work = two_second_run();
        let r = figures(
            &capacity(50.0),
            &work,
            charges(&[span(90.0, 88.0, 72.0)]),
            &measured(),
            true,
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["available"], true);
        assert_eq!(v["life_h"], 5.0);
        assert_eq!(v["conventional_life_h"], 1.0);
        assert_eq!(v["charge_range_pct"], serde_json::json!([90.0, 88.0]));
        assert!(v.get("reason").is_none());
        let back: BatteryReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        let off = BatteryReport::unavailable("BAT0 is \"Charging\"", Some("unplug".into()));
        let v = serde_json::to_value(&off).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"available": false, "reason": "BAT0 is \"Charging\"", "fix": "unplug"})
        );
        assert_eq!(serde_json::from_value::<BatteryReport>(v).unwrap(), off);
    }

    #[test]
    fn the_studys_video_job() {
        // The study: encoding takes 1 h on Win8 and drains the battery; Win7's battery
        // lasts 2 h 30 min, but the job runs 3 h there. One run = the whole encode.
        let life = |hours_per_run: f64, life_h: f64| {
            let power_w = 50.0 / life_h;
            let work = Workload {
                energy_per_run_j: power_w * hours_per_run * 3600.0,
                power_w,
                time_per_run_s: hours_per_run * 3600.0,
            };
            let r = figures(&capacity(50.0), &work, Err("n/a".into()), &measured(), true);
            LabelBattery::new("", r, Some(1.0))
        };
        let mut win8 = life(1.0, 1.0);
        win8.label = "Win8".into();
        let mut win7 = life(3.0, 2.5);
        win7.label = "Win7".into();
        let j7 = win7.job.unwrap();
        assert!(!j7.finishes);
        assert!((j7.runs_out_after_h.unwrap() - 2.5).abs() < 1e-9);
        assert!((j7.short_by_h.unwrap() - 0.5).abs() < 1e-9);
        let j8 = win8.job.unwrap();
        assert!(j8.finishes && (j8.charges - 1.0).abs() < 1e-9);
        let s = per_charge_sentence(&win8, &win7, 1.0).unwrap();
        assert_eq!(
            s,
            "On battery, per charge of BAT0 50 Wh full (energy_full): Win8 retires 1.00 runs, Win7 0.83: 16.7% fewer. \
For the job of 1.00 runs: Win8 finishes it in 1 h 00 min on 100% of a charge; \
Win7 runs out of battery after 2 h 30 min, 30 min before finishing it (3 h 00 min)."
        );
    }

    #[test]
    fn work_per_charge_sentence() {
        let side = |label: &str, energy_per_run_j: f64| {
            let work = Workload {
                energy_per_run_j,
                power_w: 10.0,
                time_per_run_s: energy_per_run_j / 10.0,
            };
            let r = figures(&capacity(57.0), &work, Err("n/a".into()), &measured(), true);
            LabelBattery::new(label, r, None)
        };
        // 57 Wh = 205 200 J: 410.4 runs of 500 J, 376.7 of 544.8 J.
        let (a, b) = (side("A", 500.0), side("B", 544.8));
        let s = per_charge_sentence(&a, &b, 100.0).unwrap();
        assert_eq!(
            s,
            "On battery, per charge of BAT0 57 Wh full (energy_full): A retires 410 runs (41040 units of work), B 377 (37665 units of work): 8.2% fewer."
        );
        // Without a job, a run longer than a charge is still called out.
        let huge = side("C", 300_000.0);
        let s = per_charge_sentence(&a, &huge, 1.0).unwrap();
        assert!(s.ends_with("C runs out of battery after 5 h 42 min, 2 h 38 min before finishing it (8 h 20 min) for one run."), "{s}");
        let none = LabelBattery::new("D", BatteryReport::unavailable("x", None), None);
        assert_eq!(per_charge_sentence(&a, &none, 1.0), None);
    }

    #[test]
    fn a_given_capacity_rescales_life_and_work_but_keeps_the_gauge() {
        let work = two_second_run();
        let spans = [span(85.0, 83.5, 270.0)];
        let saved = figures(&capacity(50.0), &work, charges(&spans), &measured(), true);
        // 25 Wh at 10 W: 2.5 h; 90 000 J / 20 J = 4500 runs. The gauge's 5 h stays.
        let r = with_given_capacity(Some(&saved), 25.0, &work, &measured());
        let life = r.life.unwrap();
        assert_eq!((life.life_h, life.runs_per_charge), (2.5, 4500.0));
        assert_eq!(life.energy_full_source, "--battery-wh");
        assert!((life.conventional_life_h.unwrap() - 5.0).abs() < 1e-12);
        // No saved figures: made from the workload, without a gauge.
        let life = with_given_capacity(None, 25.0, &work, &measured())
            .life
            .unwrap();
        assert_eq!(life.runs_per_charge, 4500.0);
        assert!(life
            .conventional_life_unavailable
            .unwrap()
            .contains("no battery charge readings"));
    }

    #[test]
    fn durations_as_people_say_them() {
        assert_eq!(duration_text(2.5), "2 h 30 min");
        assert_eq!(duration_text(0.75), "45 min");
        assert_eq!(duration_text(12.0 / 3600.0), "12 s");
        assert_eq!(duration_text(1.0 + 5.0 / 60.0), "1 h 05 min");
    }

    /// Issue 29, point 8: figures say whose energy they charge — `run`'s power model the
    /// command's, a meter or a recording the machine's — in JSON as `battery_charges`.
    #[test]
    fn figures_say_whose_energy_they_charge() {
        let work = Workload {
            energy_per_run_j: 3.0,
            power_w: 3.0,
            time_per_run_s: 1.0,
        };
        let model = Provenance::estimated("m", "p");
        let measured = measured();
        assert_eq!(Charged::of_runs(&model), Charged::Command);
        assert_eq!(Charged::of_runs(&measured), Charged::Machine);
        let r = figures(&capacity(50.0), &work, Err("n/a".into()), &model, false)
            .charging(Charged::Command);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["battery_charges"], "command", "{v}");
        let r = figures(&capacity(50.0), &work, Err("n/a".into()), &measured, true)
            .charging(Charged::Machine);
        assert_eq!(
            serde_json::to_value(&r).unwrap()["battery_charges"],
            "machine"
        );
        // Unavailable figures charge nothing, and say nothing of it.
        let none = BatteryReport::unavailable("r", None).charging(Charged::Machine);
        assert!(serde_json::to_value(&none)
            .unwrap()
            .get("battery_charges")
            .is_none());
    }
}
