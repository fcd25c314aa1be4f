//! Text views of `powerlens dvfs`: aligned tables whose headers carry units, each headed
//! by a line that says what the figures are. JSON is serde on the core's structs.

use std::fmt::Write;

use powerlens_core::dvfs::breakeven::BreakEvenTable;
use powerlens_core::dvfs::classify::Classification;
use powerlens_core::dvfs::counters::CounterStatus;
use powerlens_core::dvfs::measure::MeasureReport;
use powerlens_core::dvfs::simulate::Simulation;

use crate::table::{sig, Table};
use powerlens_core::stats::Summary;

fn us(value: f64) -> String {
    format!("{value:.1}")
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "inf".to_string(), |r| format!("{r:.2}x"))
}

/// The break-even table with the fixed timeout's worst-case ratio beside each time.
pub fn break_even_text(table: &BreakEvenTable) -> String {
    let c = &table.costs;
    let mut out = format!(
        "Break-even times, profile {} (estimated: t_BE = f_high * t_o / (f_high - f_low), t_o = t_down + t_up)\n\
         transition costs: down normal->avx2 {} us, normal->avx512 {} us, avx2->avx512 {} us; up {} us\n\n",
        table.profile, c.normal_to_avx2_us, c.normal_to_avx512_us, c.avx2_to_avx512_us, c.up_us
    );
    let timeout_header = format!("fixed {} us worst case", table.fixed_timeout_us);
    let mut t = Table::new([
        "cores",
        "swing",
        "f_high_GHz",
        "f_low_GHz",
        "t_o_us",
        "break_even_us",
        &timeout_header,
    ]);
    for r in &table.rows {
        t.row([
            r.cores.clone(),
            format!("{}<->{}", r.from, r.to),
            format!("{}", r.f_high_ghz),
            format!("{}", r.f_low_ghz),
            format!("{}", r.round_trip_cost_us),
            r.break_even_us.map_or_else(|| "never".to_string(), us),
            r.fixed_timeout_competitive_ratio
                .map_or_else(|| "-".to_string(), |x| format!("{x:.2}x oracle")),
        ]);
    }
    out.push_str(&t.render());
    let _ = write!(
        out,
        "\nA fixed timeout is at worst {:.0}x the oracle's overhead (the best a policy without\n\
         knowledge of the future can guarantee) only when it equals the break-even time;\n\
         the worst case of a timeout T is (T + t_BE) / min(T, t_BE).\n",
        table.optimal_competitive_ratio
    );
    out
}

/// One row per policy.
pub fn simulation_text(sim: &Simulation) -> String {
    let f = &sim.frequencies;
    let mut out = format!(
        "Simulated (estimated, powerlens dvfs phase model): profile {}, {} active cores ({}/{}/{} GHz), \
         {} phases, {} us of work at the normal frequency\n\n",
        sim.profile, sim.active_cores, f.normal_ghz, f.avx2_ghz, f.avx512_ghz, sim.phases, us(sim.work_us)
    );
    let mut t = Table::new([
        "policy",
        "total_us",
        "ideal_us",
        "overhead_us",
        "overhead",
        "transitions",
        "normal_us",
        "avx2_us",
        "avx512_us",
        "stall_us",
        "vs_oracle",
    ]);
    for r in &sim.rows {
        let share = if r.ideal_time_us > 0.0 {
            format!("{:.2}%", 100.0 * r.overhead_us / r.ideal_time_us)
        } else {
            "-".to_string()
        };
        t.row([
            r.policy.clone(),
            us(r.total_time_us),
            us(r.ideal_time_us),
            us(r.overhead_us),
            share,
            r.transitions.to_string(),
            us(r.time_normal_us),
            us(r.time_avx2_us),
            us(r.time_avx512_us),
            us(r.stall_us),
            ratio(r.overhead_ratio_to_oracle),
        ]);
    }
    out.push_str(&t.render());
    out
}

/// One row per process.
pub fn classification_text(classification: &Classification) -> String {
    let mut out = String::from(
        "Power score per process (estimated; 0 = normal, 1 = AVX2, 2 = AVX-512 frequency)\n\n",
    );
    let mut t = Table::new(["pid", "score", "samples", "updates"]);
    for r in &classification.rows {
        t.row([
            r.pid.to_string(),
            format!("{:.3}", r.score),
            r.samples.to_string(),
            r.updates.to_string(),
        ]);
    }
    out.push_str(&t.render());
    out
}

/// Whether license counters can be read here, and why not.
pub fn counter_status_text(status: &CounterStatus) -> String {
    let mut out = format!(
        "License-level counters on {}: {}\n",
        status.cpu,
        if status.available {
            "available"
        } else {
            "unavailable"
        }
    );
    for reason in &status.reasons {
        let _ = writeln!(out, "  reason: {reason}");
    }
    if let Some(fix) = &status.fix {
        let _ = writeln!(out, "  fix: {fix}");
    }
    for e in &status.events {
        let _ = writeln!(
            out,
            "  event {}: cpu/event={:#04x},umask={:#04x}/",
            e.name, e.event, e.umask
        );
    }
    out
}

/// `median (min … max …, sd …, n …)` of a summary, or `-` when there is none.
fn spread(summary: Option<&Summary>) -> String {
    summary.map_or_else(
        || "-".to_string(),
        |s| {
            format!(
                "{} (min {} max {}, sd {}, n {})",
                sig(s.median, 3),
                sig(s.min, 3),
                sig(s.max, 3),
                sig(s.stddev, 2),
                s.n
            )
        },
    )
}

/// The microbenchmark's costs and delays, each with its spread.
pub fn measure_text(report: &MeasureReport) -> String {
    let mut out = format!(
        "Measured on {} ({}): medians of repeated runs, with min, max and standard deviation\n",
        report.cpu,
        report.provenance.label()
    );
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for skipped in &report.skipped {
        let _ = writeln!(out, "skipped: {skipped}");
    }
    let mut t = Table::new([
        "license change",
        "settled block_us",
        "changing block_us",
        "cost_us",
    ]);
    for d in &report.down {
        t.row([
            format!("{} -> {}", d.from, d.to),
            spread(Some(&d.settled_us)),
            spread(Some(&d.changing_us)),
            spread(Some(&d.cost_us)),
        ]);
    }
    if !t.is_empty() {
        out.push_str("\nLowering the license (same block of work, settled vs right after lower-level code):\n");
        out.push_str(&t.render());
    }
    let mut t = Table::new([
        "after",
        "visible",
        "upclock delay_us",
        "spike cost_us",
        "slowdown before",
        "settled section_us",
    ]);
    for u in &report.up {
        t.row([
            u.from.to_string(),
            // Fewer than half the series showing it: noise, not a property of the CPU.
            if 2 * u.visible < u.series {
                format!("{}/{} (inconsistent)", u.visible, u.series)
            } else {
                format!("{}/{}", u.visible, u.series)
            },
            spread(u.delay_us.as_ref()),
            spread(u.cost_us.as_ref()),
            spread(u.slowdown.as_ref()),
            spread(u.section_us.as_ref()),
        ]);
    }
    if !t.is_empty() {
        out.push_str("\nRaising the license (short scalar sections after vector code; a spike followed by faster sections):\n");
        out.push_str(&t.render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::dvfs::breakeven::break_even_table;
    use powerlens_core::dvfs::profile::Profile;

    #[test]
    fn break_even_table_shows_times_and_ratios() {
        let table = break_even_table(&Profile::builtin("xeon-gold-6130").unwrap(), 670.0);
        let text = break_even_text(&table);
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("1-2 ") && l.contains("normal<->avx2"))
            .unwrap();
        assert!(
            row.contains("999.0") && row.contains("2.49x oracle"),
            "{row}"
        );
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("9-12") && l.contains("normal<->avx2"))
            .unwrap();
        assert!(
            row.contains("167.4") && row.contains("5.00x oracle"),
            "{row}"
        );
    }
}
