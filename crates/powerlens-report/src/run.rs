//! Views of a `powerlens run` result: the terminal summary, per-run CSV and a Markdown table.

use powerlens_core::run::{RunResult, RunSummary};
use powerlens_core::stats::Summary;

use crate::table::{csv_field, sig, Table};

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

fn ci(s: &Summary) -> String {
    match s.ci95 {
        Some([lo, hi]) => format!("{} … {}", sig(lo, 4), sig(hi, 4)),
        None => "n/a (1 run)".into(),
    }
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
            out.push_str(&t.render());
        }
        None => out.push_str("runs:    none finished\n"),
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
