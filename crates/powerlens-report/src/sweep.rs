//! Views of a sweep: the table with best markers and ratios, CSV, Markdown and the plot.

use powerlens_core::sweep::Sweep;

use crate::page::Page;
use crate::svg::{self, Panel, Series, XAxis};
use crate::table::{precise, sig, Table};

fn markers(r: &powerlens_core::sweep::SweepRow) -> String {
    match (r.best_energy, r.best_time) {
        (true, true) => "best energy, best time".into(),
        (true, false) => "best energy".into(),
        (false, true) => "best time".into(),
        _ => String::new(),
    }
}

/// One row per combination, with ratios to the reference and the best markers.
fn table(s: &Sweep) -> Table {
    let mut headers: Vec<String> = s.params.iter().map(|p| p.name.clone()).collect();
    headers.extend(
        [
            "runs",
            "W",
            "s",
            "J",
            "EDP J·s",
            "work/J",
            "time ×",
            "energy ×",
            "",
        ]
        .iter()
        .map(|h| h.to_string()),
    );
    let mut t = Table::new(headers);
    for r in &s.rows {
        let mut cells: Vec<String> = s.params.iter().map(|p| r.params[&p.name].clone()).collect();
        cells.extend([
            r.runs.to_string(),
            sig(r.power_w, 4),
            precise(r.wall_s),
            precise(r.energy_j),
            sig(r.edp_js, 4),
            sig(r.perf_per_watt, 4),
            format!("{:.3}", r.ratios["time"]),
            format!("{:.3}", r.ratios["energy"]),
            markers(r),
        ]);
        t.row(cells);
    }
    t
}

/// The reference combination, `NAME=V,…`.
fn reference(s: &Sweep) -> String {
    s.params
        .iter()
        .map(|p| format!("{}={}", p.name, s.reference[&p.name]))
        .collect::<Vec<_>>()
        .join(",")
}

/// `sweep --html`: the plot of energy and time against the first parameter, and the table
/// (sortable). `notes` (an early stop) are shown under the table.
pub fn html(s: &Sweep, provenance: &str, command: &str, notes: &[String]) -> String {
    let mut page = Page::new(&format!("powerlens sweep: {command}"));
    page.p(&format!(
        "Energy: {provenance}. Ratios (×) are to the reference {}.",
        reference(s)
    ));
    page.h2("Energy and time against the first parameter");
    page.svg(&plot(s));
    page.h2("Combinations (click a column to sort)");
    page.table(&table(s));
    for n in notes {
        page.note(n);
    }
    page.finish()
}

/// The terminal table.
pub fn text(s: &Sweep, provenance: &str) -> String {
    let mut out = format!("energy:    {provenance}\nreference: {}\n\n", reference(s));
    out.push_str(&table(s).render());
    out
}

/// One CSV line per combination.
pub fn csv(s: &Sweep) -> String {
    let mut out: String = s.params.iter().map(|p| format!("{},", p.name)).collect();
    out.push_str("runs,power_w,wall_s,energy_j,edp_js,perf_per_watt,time_ratio,energy_ratio,power_ratio,edp_ratio,best_energy,best_time\n");
    for r in &s.rows {
        for p in &s.params {
            out.push_str(&format!("{},", r.params[&p.name]));
        }
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}\n",
            r.runs,
            r.power_w,
            r.wall_s,
            r.energy_j,
            r.edp_js,
            r.perf_per_watt,
            r.ratios["time"],
            r.ratios["energy"],
            r.ratios["power"],
            r.ratios["edp"],
            r.best_energy,
            r.best_time
        ));
    }
    out
}

/// A Markdown table.
pub fn markdown(s: &Sweep) -> String {
    let names: Vec<&str> = s.params.iter().map(|p| p.name.as_str()).collect();
    let mut out = format!(
        "| {} | W | s | J | EDP J·s | time × | energy × | |\n",
        names.join(" | ")
    );
    out.push_str(&format!(
        "|{}--:|--:|--:|--:|--:|--:|:--|\n",
        "--:|".repeat(names.len())
    ));
    for r in &s.rows {
        let vals: Vec<&str> = s
            .params
            .iter()
            .map(|p| r.params[&p.name].as_str())
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {} |\n",
            vals.join(" | "),
            sig(r.power_w, 4),
            precise(r.wall_s),
            precise(r.energy_j),
            sig(r.edp_js, 4),
            r.ratios["time"],
            r.ratios["energy"],
            markers(r)
        ));
    }
    out
}

/// Energy and time against the first parameter; one line per combination of the others.
pub fn plot(s: &Sweep) -> String {
    let Some(first) = s.params.first() else {
        return svg::render(
            &XAxis::Numeric {
                label: String::new(),
            },
            &[],
        );
    };
    let numeric = first.values.iter().all(|v| v.parse::<f64>().is_ok());
    let x = if numeric {
        XAxis::Numeric {
            label: first.name.clone(),
        }
    } else {
        XAxis::Categories {
            label: first.name.clone(),
            names: first.values.clone(),
        }
    };
    let x_of = |v: &str| -> f64 {
        if numeric {
            v.parse().unwrap_or(f64::NAN)
        } else {
            first.values.iter().position(|w| w == v).unwrap_or(0) as f64
        }
    };
    let others = |r: &powerlens_core::sweep::SweepRow| -> String {
        let rest: Vec<String> = s.params[1..]
            .iter()
            .map(|p| format!("{}={}", p.name, r.params[&p.name]))
            .collect();
        if rest.is_empty() {
            "mean of runs".into()
        } else {
            rest.join(",")
        }
    };
    let mut groups: Vec<(String, Vec<&powerlens_core::sweep::SweepRow>)> = Vec::new();
    for r in &s.rows {
        let key = others(r);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, rows)) => rows.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    let series = |f: fn(&powerlens_core::sweep::SweepRow) -> f64| -> Vec<Series> {
        groups
            .iter()
            .map(|(name, rows)| Series {
                name: name.clone(),
                points: rows
                    .iter()
                    .map(|r| (x_of(&r.params[&first.name]), f(r)))
                    .collect(),
            })
            .collect()
    };
    svg::render(
        &x,
        &[
            Panel {
                title: "Energy to retire the work".into(),
                y_label: "energy per run [J]".into(),
                series: series(|r| r.energy_j),
            },
            Panel {
                title: "Time to retire the work".into(),
                y_label: "wall time per run [s]".into(),
                series: series(|r| r.wall_s),
            },
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::compare::Sample;
    use powerlens_core::sweep::{analyse, combinations, parse_param};

    fn sweep() -> Sweep {
        let p = [parse_param("threads=1,2,4").unwrap()];
        let combos = combinations(&p).unwrap();
        let s = |t: f64, e: f64| {
            vec![Sample {
                wall_s: t,
                energy_j: e,
                power_w: e / t,
                ..Sample::default()
            }]
        };
        analyse(
            &p,
            &combos,
            &[s(4.0, 40.0), s(2.0, 30.0), s(1.5, 33.0)],
            0,
            1.0,
        )
        .unwrap()
    }

    #[test]
    fn table_marks_best_rows() {
        let t = text(&sweep(), "estimated (x)");
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("      2") && l.ends_with("best energy")),
            "{t}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("      4") && l.ends_with("best time")),
            "{t}"
        );
        assert_eq!(csv(&sweep()).lines().count(), 4);
        assert!(
            markdown(&sweep()).contains("| 2 | 15.00 | 2 | 30 |"),
            "{}",
            markdown(&sweep())
        );
    }

    #[test]
    fn plot_has_both_panels_and_every_point() {
        let svg = plot(&sweep());
        assert!(svg.contains("energy per run [J]") && svg.contains("wall time per run [s]"));
        assert_eq!(svg.matches("<circle").count(), 6);
        let h = html(&sweep(), "estimated <m>", "spin --threads {threads}", &[]);
        assert!(
            h.contains("Energy: estimated &lt;m&gt;. Ratios (×) are to the reference threads=1.")
        );
        assert_eq!(h.matches("<circle").count(), 6);
        assert!(h.contains("<td class=\"n\" data-v=\"30\">30</td>"), "{h}");
        assert!(h.contains("<td>best energy</td>"));
    }
}
