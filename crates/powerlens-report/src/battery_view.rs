//! Views of battery-life figures: the lines `run` and `report` print under their summary,
//! and `compare`'s table of the configurations on battery.

use powerlens_core::battery_life::{
    duration_text, full_charge_text, wh_text, BatteryLife, BatteryReport, Charged, LabelBattery,
};

use crate::page::Page;
use crate::table::{sig, Table};

/// What the work is counted in: `run` (a run of the command) or `recording`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Run,
    Recording,
}

impl Unit {
    fn plural(self) -> &'static str {
        match self {
            Unit::Run => "runs",
            Unit::Recording => "recordings",
        }
    }

    fn each(self) -> &'static str {
        match self {
            Unit::Run => "each",
            Unit::Recording => "the recording",
        }
    }
}

fn capacity(life: &BatteryLife) -> String {
    full_charge_text(
        &life.batteries,
        life.energy_full_wh,
        &life.energy_full_source,
    )
}

fn conventional(life: &BatteryLife) -> String {
    match (
        life.conventional_life_h,
        &life.conventional_life_unavailable,
    ) {
        (Some(h), _) => format!(
            "{}, over {} ({})",
            duration_text(h),
            range(life),
            life.charge_source.as_deref().unwrap_or("the gauge")
        ),
        (None, why) => format!(
            "unavailable: {}",
            why.as_deref().unwrap_or("no charge readings")
        ),
    }
}

fn range(life: &BatteryLife) -> String {
    life.charge_range_pct
        .map(|[a, b]| format!("{a:.2}% → {b:.2}%"))
        .unwrap_or_else(|| "n/a".into())
}

/// The figures as lines of text (no prefix): the life at the mean power and the work per
/// charge, the conventional life, then the notes; or why there are none and the fix.
pub fn lines(report: &BatteryReport, unit: Unit) -> Vec<String> {
    let Some(life) = &report.life else {
        return vec![format!(
            "no battery-life figures: {}{}",
            report.reason.as_deref().unwrap_or("unknown reason"),
            report
                .fix
                .as_ref()
                .map(|f| format!(" (fix: {f})"))
                .unwrap_or_default()
        )];
    };
    let mut out = vec![
        format!(
            "{}; at {} W a charge lasts {} and retires {} {} ({} J {})",
            capacity(life),
            sig(life.power_w, 4),
            duration_text(life.life_h),
            sig(life.runs_per_charge, 4),
            unit.plural(),
            sig(life.energy_per_run_j, 4),
            unit.each()
        ),
        format!(
            "conventional life (time of a 1% discharge × 100): {}",
            conventional(life)
        ),
    ];
    if let Some(charged) = life.battery_charges {
        out.insert(1, format!("charges: {}", charged_text(charged, unit)));
    }
    out.extend(life.notes.iter().map(|n| format!("note: {n}")));
    out
}

/// Whose energy the figures charge, in words: `run`'s model charges the command, a
/// meter or a recording the whole machine over the time measured.
pub fn charged_text(charged: Charged, unit: Unit) -> &'static str {
    match (charged, unit) {
        (Charged::Command, _) => "the command's energy (the power model on its own CPU time, plus the idle term), not what else ran",
        (Charged::Machine, Unit::Run) => "the whole machine's energy over each run (the meter reads the machine: what else ran too)",
        (Charged::Machine, Unit::Recording) => "the whole machine's energy over the recording window (every process's, and idle), not the target's alone",
    }
}

/// `battery: …` lines for a terminal view, aligned under the first.
pub fn text(report: &BatteryReport, unit: Unit) -> String {
    lines(report, unit)
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{}{l}\n", if i == 0 { "battery: " } else { "         " }))
        .collect()
}

/// The figures as a section of an HTML page.
pub fn html(page: &mut Page, report: &BatteryReport, unit: Unit) {
    page.h2("Battery life");
    for l in lines(report, unit) {
        match l.strip_prefix("note: ") {
            Some(note) => page.note(note),
            None => page.p(&l),
        }
    }
}

/// One row per compared configuration: its charge, life, work per charge, the
/// conventional life and, with a job, whether it finishes on one charge.
pub fn table(labels: &[LabelBattery]) -> Table {
    let mut t = Table::new([
        "label",
        "full Wh",
        "power W",
        "life",
        "runs/charge",
        "conventional life",
        "charge range",
        "job on one charge",
    ]);
    for l in labels {
        let Some(life) = &l.report.life else {
            t.row([
                l.label.clone(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                l.report.reason.clone().unwrap_or_default(),
            ]);
            continue;
        };
        t.row([
            l.label.clone(),
            wh_text(life.energy_full_wh),
            sig(life.power_w, 4),
            duration_text(life.life_h),
            sig(life.runs_per_charge, 4),
            life.conventional_life_h
                .map(duration_text)
                .unwrap_or_else(|| "n/a".into()),
            range(life),
            match l.job {
                None => "n/a (no --job)".into(),
                Some(j) if j.finishes => format!(
                    "finishes in {} ({:.0}% of a charge)",
                    duration_text(j.time_h),
                    j.charges * 100.0
                ),
                Some(j) => format!(
                    "runs out after {}, {} short",
                    duration_text(j.runs_out_after_h.unwrap_or(0.0)),
                    duration_text(j.short_by_h.unwrap_or(0.0))
                ),
            },
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::battery_life::{figures, Capacity, ChargeSpan, Charges, Workload};
    use powerlens_core::provenance::Provenance;

    fn report(spans: &[ChargeSpan]) -> BatteryReport {
        figures(
            &Capacity {
                energy_full_wh: 57.0,
                energy_full_source: "energy_full".into(),
                batteries: vec!["BAT0".into()],
            },
            &Workload {
                energy_per_run_j: 100.0,
                power_w: 10.0,
                time_per_run_s: 10.0,
            },
            Ok(Charges {
                spans,
                source: "energy_now / energy_full",
                whole_percent: false,
            }),
            &Provenance::Measured {
                source: "battery".into(),
            },
            true,
        )
    }

    #[test]
    fn text_says_life_work_per_charge_and_the_conventional_figure() {
        // 57 Wh at 10 W: 5 h 42 min; 205 200 J / 100 J = 2052 runs. 1.2% in 246.24 s:
        // 1% in 205.2 s, × 100 = 5 h 42 min.
        let t = text(
            &report(&[ChargeSpan {
                start_pct: 80.0,
                end_pct: 78.8,
                seconds: 246.24,
            }]),
            Unit::Run,
        );
        assert_eq!(
            t,
            "battery: BAT0 57 Wh full (energy_full); at 10.00 W a charge lasts 5 h 42 min and retires 2052 runs (100.0 J each)\n         conventional life (time of a 1% discharge × 100): 5 h 42 min, over 80.00% → 78.80% (energy_now / energy_full)\n"
        );
        let t = text(&report(&[]), Unit::Recording);
        assert!(t.contains("recordings (100.0 J the recording)"), "{t}");
        assert!(
            t.contains("conventional life (time of a 1% discharge × 100): unavailable: no charge"),
            "{t}"
        );
        // Issue 29, point 8: whose energy the charge pays for, on its own line.
        let t = text(&report(&[]).charging(Charged::Machine), Unit::Recording);
        assert!(
            t.contains("\n         charges: the whole machine's energy over the recording window (every process's, and idle), not the target's alone\n"),
            "{t}"
        );
        let t = text(&report(&[]).charging(Charged::Command), Unit::Run);
        assert!(
            t.contains("charges: the command's energy (the power model on its own CPU time, plus the idle term)"),
            "{t}"
        );
        let off = BatteryReport::unavailable("BAT0 is \"Charging\"", Some("unplug".into()));
        assert_eq!(
            text(&off, Unit::Run),
            "battery: no battery-life figures: BAT0 is \"Charging\" (fix: unplug)\n"
        );
    }

    #[test]
    fn compare_table_row_per_label() {
        let rows = [
            LabelBattery::new("A", report(&[]), Some(3000.0)),
            LabelBattery::new(
                "B",
                BatteryReport::unavailable("no run finished", None),
                None,
            ),
        ];
        let t = table(&rows).render();
        // 3000 runs of 10 s take 8 h 20 min and 1.46 charges: out after 2052 runs, 5 h 42 min.
        assert!(
            t.contains("runs out after 5 h 42 min, 2 h 38 min short"),
            "{t}"
        );
        assert!(t.contains("no run finished"), "{t}");
    }
}
