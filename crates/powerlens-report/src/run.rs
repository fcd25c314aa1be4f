//! Views of a `powerlens run` result: the terminal summary, per-run CSV and a Markdown table.

use powerlens_core::run::{RunResult, RunSummary};
use powerlens_core::stats::Summary;

use crate::page::Page;
use crate::svg::{self, Panel, Series, XAxis};
use crate::table::{csv_field, precise, sig, Table};

/// One summarized figure: label, unit and its summary.
fn figures(s: &RunSummary) -> Vec<(String, &'static str, &Summary)> {
    let mut rows = vec![
        ("wall time".to_string(), "s", &s.wall_s),
        ("CPU time".to_string(), "s", &s.cpu_s),
        ("energy".to_string(), "J", &s.energy_j),
        ("average power".to_string(), "W", &s.power_w),
        ("energy × delay".to_string(), "J·s", &s.edp_js),
    ];
    if let Some(above) = &s.energy_above_baseline_j {
        rows.push(("energy above idle".to_string(), "J", above));
    }
    if s.domains.len() > 1 {
        for (name, summary) in &s.domains {
            rows.push((format!("  {name}"), "J", summary));
        }
    }
    rows
}

/// A summary's 95% interval as `lo … hi`, the way every view prints one: the interval of a
/// positive figure is taken on the log scale, so it is not symmetric about the mean and a
/// `± half-width` would misplace both ends.
pub(crate) fn ci(s: &Summary) -> String {
    match s.ci95 {
        Some([lo, hi]) => format!("{} … {}", sig(lo, 4), sig(hi, 4)),
        None => "n/a (1 run)".into(),
    }
}

/// The summary: one row per figure, mean, spread and the 95% interval of the mean.
fn summary_table(s: &RunSummary) -> Table {
    let mut t = Table::new([
        "",
        "mean",
        "± stddev",
        "median",
        "min",
        "max",
        "95% CI of mean",
        "unit",
    ]);
    for (label, unit, f) in figures(s) {
        t.row([
            label,
            sig(f.mean, 4),
            format!("± {}", sig(f.stddev, 2)),
            sig(f.median, 4),
            sig(f.min, 4),
            sig(f.max, 4),
            ci(f),
            unit.to_string(),
        ]);
    }
    t
}

/// One row per run.
fn runs_table(result: &RunResult) -> Table {
    let mut t = Table::new([
        "run",
        "wall s",
        "CPU s",
        "energy J",
        "power W",
        "EDP J·s",
        "above idle J",
        "exit",
        "energy from",
    ]);
    for r in &result.runs {
        t.row([
            (r.index + 1).to_string(),
            precise(r.wall_s),
            precise(r.cpu_s),
            precise(r.energy_j),
            sig(r.power_w, 4),
            sig(r.edp_js, 4),
            r.energy_above_baseline_j
                .map(precise)
                .unwrap_or_else(|| "n/a".into()),
            r.exit.describe(),
            r.provenance.label(),
        ]);
    }
    t
}

/// `run --html`: the summary, energy and time per run as a plot, and the runs' table
/// (sortable), with every warning. The command line is escaped.
pub fn html(result: &RunResult) -> String {
    let command = shell_words(&result.command);
    let mut page = Page::new(&format!("powerlens run: {command}"));
    page.p(&format!("Energy: {}.", result.provenance.label()));
    if let Some(why) = result.provenance.chosen_because() {
        page.note(&format!("ESTIMATED: {why}."));
    }
    let text = text(result);
    let header: String = text
        .lines()
        .take_while(|l| !l.starts_with("runs:"))
        .map(|l| format!("{l}\n"))
        .collect();
    page.pre(&header);
    page.h2("Summary");
    match &result.summary {
        Some(s) => page.table(&summary_table(s)),
        None => page.unavailable("no run finished."),
    }
    page.h2("Energy and time per run");
    if result.runs.is_empty() {
        page.unavailable("no run finished.");
    } else {
        let per_run = |name: &str, f: fn(&powerlens_core::run::Run) -> f64| Series {
            name: name.to_string(),
            points: result
                .runs
                .iter()
                .map(|r| ((r.index + 1) as f64, f(r)))
                .collect(),
        };
        let mut energy = vec![per_run("energy", |r| r.energy_j)];
        if result
            .runs
            .iter()
            .all(|r| r.energy_above_baseline_j.is_some())
        {
            energy.push(per_run("above idle", |r| {
                r.energy_above_baseline_j.unwrap_or(0.0)
            }));
        }
        page.svg(&svg::render(
            &XAxis::Numeric {
                label: "run (in the order measured)".into(),
            },
            &[
                Panel {
                    title: "Energy per run".into(),
                    y_label: "energy [J]".into(),
                    series: energy,
                },
                Panel {
                    title: "Time per run".into(),
                    y_label: "wall time [s]".into(),
                    series: vec![
                        per_run("wall time", |r| r.wall_s),
                        per_run("CPU time", |r| r.cpu_s),
                    ],
                },
            ],
        ));
    }
    if let Some(battery) = &result.battery {
        crate::battery_view::html(&mut page, battery, crate::battery_view::Unit::Run);
    }
    page.h2("Runs (click a column to sort)");
    page.table(&runs_table(result));
    if let Some(why) = &result.stopped_early {
        page.note(&format!("Stopped early: {why}"));
    }
    for w in &result.warnings {
        page.note(&format!("Warning: {w}"));
    }
    page.finish()
}

/// The terminal view: what was measured, the summary table, and every warning.
pub fn text(result: &RunResult) -> String {
    let mut out = format!("command: {}\n", shell_words(&result.command));
    out.push_str(&format!("energy:  {}\n", result.provenance.label()));
    if let Some(w) = result.window_s {
        out.push_str(&format!(
            "window:  {} s per run, idle tail included\n",
            sig(w, 4)
        ));
    }
    if let Some(b) = &result.baseline {
        out.push_str(&format!(
            "idle:    {} W before{} ({} s each)\n",
            sig(b.before_w, 4),
            b.after_w
                .map(|a| format!(", {} W after", sig(a, 4)))
                .unwrap_or_default(),
            sig(b.seconds, 3)
        ));
    }
    match &result.summary {
        Some(s) => {
            out.push_str(&format!("runs:    {}\n\n", s.runs));
            out.push_str(&summary_table(s).render());
        }
        None => out.push_str("runs:    none finished\n"),
    }
    if let Some(battery) = &result.battery {
        out.push('\n');
        out.push_str(&crate::battery_view::text(
            battery,
            crate::battery_view::Unit::Run,
        ));
    }
    if let Some(why) = &result.stopped_early {
        out.push_str(&format!("\nstopped early: {why}\n"));
    }
    for w in &result.warnings {
        out.push_str(&format!("\nwarning: {w}"));
    }
    if !result.warnings.is_empty() {
        out.push('\n');
    }
    out
}

/// One CSV line per run, with one column per energy domain.
pub fn csv(result: &RunResult) -> String {
    let domains: Vec<&String> = result
        .runs
        .first()
        .map(|r| r.domains.keys().collect())
        .unwrap_or_default();
    let mut out = String::from("run,wall_s,cpu_s,energy_j,power_w,edp_js,energy_above_baseline_j,exit_code,signal,provenance");
    for d in &domains {
        out.push_str(&format!(",{}_j", csv_field(d)));
    }
    out.push('\n');
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let opt_i = |v: Option<i32>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in &result.runs {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{}",
            r.index + 1,
            r.wall_s,
            r.cpu_s,
            r.energy_j,
            r.power_w,
            r.edp_js,
            opt(r.energy_above_baseline_j),
            opt_i(r.exit.code),
            opt_i(r.exit.signal),
            csv_field(&r.provenance.label())
        ));
        for d in &domains {
            out.push_str(&format!(",{}", opt(r.domains.get(*d).copied())));
        }
        out.push('\n');
    }
    out
}

/// A Markdown summary table that pastes into an issue or a pull request.
pub fn markdown(result: &RunResult) -> String {
    let mut out = format!(
        "`{}` — energy {}\n\n| figure | mean | ± stddev | min | max | 95% CI | unit |\n|:--|--:|--:|--:|--:|--:|:--|\n",
        shell_words(&result.command),
        result.provenance.label()
    );
    if let Some(s) = &result.summary {
        for (label, unit, f) in figures(s) {
            out.push_str(&format!(
                "| {} | {} | ± {} | {} | {} | {} | {} |\n",
                label.trim(),
                sig(f.mean, 4),
                sig(f.stddev, 2),
                sig(f.min, 4),
                sig(f.max, 4),
                ci(f),
                unit
            ));
        }
    }
    if let Some(battery) = &result.battery {
        out.push('\n');
        for line in crate::battery_view::lines(battery, crate::battery_view::Unit::Run) {
            out.push_str(&format!("- battery: {line}\n"));
        }
    }
    out
}

/// The command as a user would type it (arguments with spaces quoted).
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty()
                || a.contains(|c: char| c.is_whitespace() || "'\"$`\\*?;&|<>()".contains(c))
            {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::provenance::Provenance;
    use powerlens_core::run::{DomainEnergy, ExitStatus, Measurement};

    fn result() -> RunResult {
        let m = |wall: f64, pkg: f64| Measurement {
            wall_s: wall,
            cpu_s: wall,
            energy_interval_s: wall,
            domains: vec![
                DomainEnergy {
                    name: "package-0".into(),
                    joules: pkg,
                    counts_in_total: true,
                },
                DomainEnergy {
                    name: "package-0/core".into(),
                    joules: pkg / 2.0,
                    counts_in_total: false,
                },
            ],
            exit: ExitStatus {
                code: Some(0),
                signal: None,
            },
            provenance: Provenance::Measured {
                source: "rapl-powercap".into(),
            },
            charge: None,
            other_load: Err("not measured in this test".into()),
        };
        RunResult::new(
            vec!["sh".into(), "-c".into(), "make -j4".into()],
            Provenance::Measured {
                source: "rapl-powercap".into(),
            },
            None,
            None,
            vec![m(1.0, 20.0), m(1.2, 24.0)],
            vec![],
            None,
        )
    }

    #[test]
    fn text_view_names_the_source_and_figures() {
        let t = text(&result());
        assert!(t.contains("command: sh -c 'make -j4'"), "{t}");
        assert!(t.contains("measured (rapl-powercap)"));
        assert!(
            t.lines()
                .any(|l| l.starts_with("energy ") && l.contains("22.00")),
            "{t}"
        );
        assert!(t.contains("  package-0/core"));
    }

    #[test]
    fn html_plots_every_run_and_escapes_the_command() {
        let mut r = result();
        r.command = vec!["echo".into(), "<i>pwn</i>".into()];
        let h = html(&r);
        assert!(!h.contains("<i>"), "{h}");
        // Quoted as a shell would need it, then escaped.
        assert!(
            h.contains("<title>powerlens run: echo &#39;&lt;i&gt;pwn&lt;/i&gt;&#39;</title>"),
            "{h}"
        );
        // Energy per run (2 points), wall and CPU time per run (2 each).
        assert_eq!(h.matches("<circle").count(), 6, "{h}");
        assert!(h.contains(">energy [J]</text>") && h.contains(">wall time [s]</text>"));
        assert!(h.contains("<td class=\"n\" data-v=\"24\">24</td>"), "{h}");
    }

    #[test]
    fn csv_has_a_column_per_domain() {
        let c = csv(&result());
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].ends_with("package-0_j,package-0/core_j"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with("1,1,1,20,20,20,,0,,measured (rapl-powercap),20,10"),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn markdown_table() {
        let md = markdown(&result());
        assert!(md.contains("| energy | 22.00 |"), "{md}");
    }
}
