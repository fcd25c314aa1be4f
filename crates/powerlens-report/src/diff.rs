//! Views of `powerlens diff`: the text page (system figures, matched rows, the comparison
//! summary), an HTML page with the same and plots of both sides, JSON and CSV.

use powerlens_core::diff::{wakeups_received_by_cause, Diff, MetricDiff, RowDiff};
use serde::Serialize;
use serde_json::Value;

use crate::html::{hbars_svg, Bars, PALETTE};
use crate::names::NameFit;
use crate::page::Page;
use crate::table::{csv_field, sig, Table};

/// What the two recordings are, for the page's head and the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Sides {
    pub a: String,
    pub b: String,
    /// `process`, `thread` or `function`.
    pub by: &'static str,
}

/// The grid columns the text page shows per row (JSON and CSV have every column).
const ROW_COLUMNS: [&str; 6] = [
    "cpu_time_s",
    "sync_switches",
    "preempt_switches",
    "wait_time_s",
    "idle_wakeups",
    "energy_j",
];

/// Text figures that are sentences or lists: shown in JSON, left out of the table.
fn is_prose(m: &MetricDiff) -> bool {
    [&m.a, &m.b]
        .iter()
        .any(|v| matches!(v, Value::String(s) if s.len() > 40) || v.is_array())
}

/// "measured (rapl-powercap)", "estimated (server-vcpu-linear)", …: each side's energy.
fn energy_labels(diff: &Diff) -> [String; 2] {
    diff.energy_provenance.each_ref().map(|p| {
        p.as_ref()
            .map(|p| p.label())
            .unwrap_or_else(|| "unavailable (no energy section in the report)".into())
    })
}

/// How the text page is drawn.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions {
    /// Every system figure (`--all`): the tracing costs, idle-state constants and other
    /// internal figures below the headline. Always in JSON and CSV.
    pub all: bool,
    /// How wide row names may be (function names cut as `report` cuts them).
    pub fit: NameFit,
}

/// Display names of the headline figures ([`powerlens_core::diff::Headline`]).
fn headline_name(figure: &str) -> &str {
    match figure {
        "elapsed_s" => "elapsed s",
        "target_cpu_time_s" => "target CPU time s",
        "energy_j" => "energy J (machine)",
        "target_energy_j" => "energy J (target's share)",
        "target_sync_switches" => "switches to wait (target)",
        "target_preempt_switches" => "preemptions (target)",
        "target_idle_wakeups" => "idle wake-ups caused (target)",
        "target_wakeups_received" => "wake-ups received (target)",
        other => other,
    }
}

/// "1.50×", or empty without a ratio.
fn times(r: Option<f64>) -> String {
    r.map(|r| format!("{}×", sig(r, 3))).unwrap_or_default()
}

fn headline_table(diff: &Diff) -> Table {
    let mut t = Table::new(["figure", "A", "B", "B/A", "B − A"]);
    // Counts as whole numbers, not "152.0".
    let number = |x: f64| {
        if x.fract() == 0.0 && x.abs() < 1e15 {
            format!("{x:.0}")
        } else {
            sig(x, 4)
        }
    };
    let cell = |v: Option<f64>| v.map(number).unwrap_or_else(|| "n/a".into());
    for h in &diff.headline {
        t.row([
            headline_name(h.figure).to_string(),
            cell(h.a),
            cell(h.b),
            times(h.ratio_b_to_a),
            h.difference_b_minus_a.map(number).unwrap_or_default(),
        ]);
    }
    t
}

/// Every system figure, B relative to A as the headline is (JSON keeps `ratio` a / b).
fn system_table(diff: &Diff) -> Table {
    let mut t = Table::new(["metric", "A", "B", "B/A", "B − A"]);
    for m in diff.system.iter().filter(|m| !is_prose(m)) {
        if !m.a.is_number() && !m.b.is_number() && m.a == m.b && !m.a.is_null() {
            // Equal text (the same idle-state name, source or target) says nothing.
            continue;
        }
        let (x, y) = (m.a.as_f64(), m.b.as_f64());
        t.row([
            m.metric.clone(),
            value(&m.a),
            value(&m.b),
            times(
                x.zip(y)
                    .and_then(|(x, y)| powerlens_core::diff::ratio(y, x)),
            ),
            m.difference.map(|d| sig(-d, 4)).unwrap_or_default(),
        ]);
    }
    t
}

pub fn text(diff: &Diff, sides: &Sides, opts: &TextOptions) -> String {
    let [ea, eb] = energy_labels(diff);
    let mut out = format!(
        "A = {}\nB = {}\nenergy: A {ea}, B {eb}\n\n",
        sides.a, sides.b
    );
    out += "Headline (B relative to A, as compare gives a candidate against its baseline: ratio B / A, difference B − A)\n";
    out += &headline_table(diff).render();
    for h in diff.headline.iter().filter(|h| !h.unavailable.is_empty()) {
        out += &format!(
            "  n/a {}: {}\n",
            headline_name(h.figure),
            h.unavailable.join("; ")
        );
    }
    if opts.all {
        out += "\nSystem (every figure of the reports' system, energy and battery sections)\n";
        out += &system_table(diff).render();
    } else {
        out += &format!(
            "({} more system figures with --all, and in --json)\n",
            diff.system.len()
        );
    }
    out += &format!(
        "\n{} (matched by {})\n",
        match sides.by {
            "process" => "Processes",
            "function" => "Functions",
            _ => "Threads",
        },
        match sides.by {
            "process" => "command",
            "function" => "symbol",
            _ => "process command / thread name, in order of creation",
        }
    );
    let mut headers = vec!["row".to_string(), "in".to_string()];
    for c in ROW_COLUMNS {
        headers.push(format!("{c} A"));
        headers.push("B".into());
    }
    let mut t = Table::new(headers);
    for r in &diff.rows {
        t.row(row_cells(r));
    }
    out += &t.render_fitting(&[0], opts.fit);
    out += "\nComparison summary\n";
    out += &summary_text(diff);
    out
}

/// The comparison summary, section by section, then the notes: the end of the text page,
/// and what `demo` prints of its closing diff.
pub fn summary_text(diff: &Diff) -> String {
    let mut out = String::new();
    let mut section = "";
    for f in &diff.summary {
        if f.section != section {
            section = f.section;
            out += &format!("  {section}:\n");
        }
        out += &format!("    - {}\n", f.finding);
    }
    for n in &diff.notes {
        out += &format!("note: {n}\n");
    }
    out
}

/// The HTML page: the summary first, then idle-state residency, wake-ups and energy per
/// domain of A and B as bars on one axis, the system figures and the matched rows as
/// sortable tables. `a` and `b` are the two reports (`report --json`).
pub fn html(diff: &Diff, sides: &Sides, a: &Value, b: &Value) -> String {
    let mut page = Page::new(&format!("powerlens diff: {} vs {}", sides.a, sides.b));
    let [ea, eb] = energy_labels(diff);
    page.key_values(&[
        ("A", sides.a.clone()),
        ("B", sides.b.clone()),
        ("energy of A", ea),
        ("energy of B", eb),
    ]);
    page.h2("Comparison summary");
    let mut sections: Vec<&str> = diff.summary.iter().map(|f| f.section).collect();
    sections.dedup();
    for section in sections {
        page.p(section);
        let items: Vec<Vec<String>> = diff
            .summary
            .iter()
            .filter(|f| f.section == section)
            .map(|f| vec![f.finding.clone()])
            .collect();
        page.list(&items);
    }
    for n in &diff.notes {
        page.note(n);
    }
    page.h2("Idle-state residency");
    match residency_bars(a, b) {
        Some(svg) => {
            page.svg(&svg);
            page.note("Seconds in each idle state, summed over the CPUs: the cpuidle sysfs counters over each recording.");
        }
        None => {
            page.unavailable("neither recording has idle-state residency (no cpuidle in sysfs)")
        }
    }
    page.h2("Wake-ups per second");
    page.svg(&wakeup_bars(a, b, Whose::Target));
    page.note("Wake-ups the target received per second of the recording, by cause: the sums of its threads' rows.");
    page.svg(&wakeup_bars(a, b, Whose::Machine));
    page.note("Wake-ups on the whole machine per second of the recording, by cause, every process's: the context of the target's.");
    page.h2("Energy per domain");
    match energy_bars(a, b) {
        Some(svg) => page.svg(&svg),
        None => page.unavailable(
            "no energy figure in at least one recording (see each report's energy provenance)",
        ),
    }
    page.h2("System figures (ratio = A / B, difference = A − B)");
    let mut t = Table::new(["metric", "A", "B", "A/B", "A − B"]);
    for m in diff.system.iter().filter(|m| !is_prose(m)) {
        t.row([
            m.metric.clone(),
            value(&m.a),
            value(&m.b),
            m.ratio.map(|r| sig(r, 3)).unwrap_or_default(),
            m.difference.map(|d| sig(d, 4)).unwrap_or_default(),
        ]);
    }
    page.table(&t);
    page.h2(&format!("Rows by {} (click a column to sort)", sides.by));
    page.table(&rows_table(diff));
    page.finish()
}

fn rows_table(diff: &Diff) -> Table {
    let mut headers = vec!["row".to_string(), "in".to_string()];
    for c in ROW_COLUMNS {
        headers.push(format!("{c} A"));
        headers.push(format!("{c} B"));
    }
    let mut t = Table::new(headers);
    for r in &diff.rows {
        t.row(row_cells(r));
    }
    t
}

/// Per side, the seconds in each idle state over every CPU (sysfs counters), by state
/// name in A's order then B's.
fn residency_bars(a: &Value, b: &Value) -> Option<String> {
    let per_state = |r: &Value| {
        let mut out: Vec<(String, f64)> = Vec::new();
        for cpu in r["cpus"].as_array().into_iter().flatten() {
            for s in cpu["idle_states"].as_array().into_iter().flatten() {
                let (Some(name), Some(t)) = (s["name"].as_str(), s["sysfs_time_s"].as_f64()) else {
                    continue;
                };
                match out.iter_mut().find(|(n, _)| n == name) {
                    Some((_, sum)) => *sum += t,
                    None => out.push((name.to_string(), t)),
                }
            }
        }
        out
    };
    let (sa, sb) = (per_state(a), per_state(b));
    if sa.is_empty() && sb.is_empty() {
        return None;
    }
    Some(named_bars(
        &sa,
        &sb,
        "idle-state residency of A and B",
        "seconds in the state, all CPUs",
        "s",
    ))
}

/// A and B as two stacked bars of named parts (states, domains), the names of A then B's
/// own in the legend; a part one side lacks is 0 there.
fn named_bars(
    a: &[(String, f64)],
    b: &[(String, f64)],
    aria: &str,
    axis_label: &str,
    unit: &str,
) -> String {
    let mut names: Vec<&String> = a.iter().map(|(n, _)| n).collect();
    for (n, _) in b {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let row = |side: &[(String, f64)]| -> Vec<f64> {
        names
            .iter()
            .map(|n| side.iter().find(|(m, _)| m == *n).map_or(0.0, |(_, v)| *v))
            .collect()
    };
    hbars_svg(&Bars {
        aria,
        legend: names
            .iter()
            .zip(PALETTE.iter().cycle())
            .map(|(n, c)| (n.to_string(), *c))
            .collect(),
        rows: vec![("A".into(), row(a)), ("B".into(), row(b))],
        max: 0.0,
        axis_label,
        unit,
    })
}

/// Whose wake-ups a chart plots.
#[derive(Clone, Copy)]
enum Whose {
    /// The target's threads' (its rows').
    Target,
    /// Every process's on the machine (the `system` section's).
    Machine,
}

fn wakeup_bars(a: &Value, b: &Value, whose: Whose) -> String {
    const CAUSES: [&str; 5] = ["thread", "timer", "irq", "softirq", "ipi"];
    let count = |r: &Value, cause: &str| match whose {
        Whose::Target => wakeups_received_by_cause(r, cause),
        Whose::Machine => r["system"]["wakeups_received"][cause].as_f64(),
    };
    let rates = |r: &Value| -> Vec<f64> {
        let elapsed = r["system"]["elapsed_s"].as_f64().filter(|e| *e > 0.0);
        CAUSES
            .iter()
            .map(|c| match (count(r, c), elapsed) {
                (Some(n), Some(e)) => n / e,
                _ => 0.0,
            })
            .collect()
    };
    hbars_svg(&Bars {
        aria: match whose {
            Whose::Target => "wake-ups the target received per second in A and B, by cause",
            Whose::Machine => "wake-ups on the whole machine per second in A and B, by cause",
        },
        legend: CAUSES
            .iter()
            .zip(PALETTE)
            .map(|(c, color)| (c.to_string(), color))
            .collect(),
        rows: vec![("A".into(), rates(a)), ("B".into(), rates(b))],
        max: 0.0,
        axis_label: "wake-ups per second",
        unit: "/s",
    })
}

fn energy_bars(a: &Value, b: &Value) -> Option<String> {
    let domains = |r: &Value| -> Option<Vec<(String, f64)>> {
        let list = r["system"]["energy_domains"].as_array()?;
        let out: Vec<(String, f64)> = list
            .iter()
            .filter_map(|d| Some((d["name"].as_str()?.to_string(), d["energy_j"].as_f64()?)))
            .collect();
        (!out.is_empty()).then_some(out)
    };
    let (da, db) = (domains(a)?, domains(b)?);
    Some(named_bars(
        &da,
        &db,
        "energy per domain of A and B",
        "joules",
        "J",
    ))
}

fn row_cells(r: &RowDiff) -> Vec<String> {
    let side = match (&r.a, &r.b) {
        (Some(_), Some(_)) => "both",
        (Some(_), None) => "only A",
        _ => "only B",
    };
    let mut cells = vec![r.key.clone(), side.to_string()];
    for c in ROW_COLUMNS {
        for v in [&r.a, &r.b] {
            cells.push(v.as_ref().map(|v| value(&v[c])).unwrap_or_default());
        }
    }
    cells
}

fn value(v: &Value) -> String {
    match v {
        Value::Null => "n/a".into(),
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() => sig(x, 4),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn json(diff: &Diff, sides: &Sides) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        a: &'a str,
        b: &'a str,
        by: &'a str,
        #[serde(flatten)]
        diff: &'a Diff,
    }
    serde_json::to_string_pretty(&Out {
        a: &sides.a,
        b: &sides.b,
        by: sides.by,
        diff,
    })
    .expect("a diff serializes")
}

/// Two CSV tables one after the other, each with its header: the system figures, then
/// the rows with A, B and A − B of every numeric column.
pub fn csv(diff: &Diff) -> String {
    let mut out = String::from("metric,a,b,ratio,difference\n");
    for m in &diff.system {
        out += &[
            csv_field(&m.metric),
            csv_field(&plain(&m.a)),
            csv_field(&plain(&m.b)),
            m.ratio.map(|r| r.to_string()).unwrap_or_default(),
            m.difference.map(|d| d.to_string()).unwrap_or_default(),
        ]
        .join(",");
        out.push('\n');
    }
    let mut columns: Vec<String> = Vec::new();
    for r in &diff.rows {
        for side in [&r.a, &r.b].into_iter().flatten() {
            for (k, v) in side.as_object().into_iter().flatten() {
                // Ids differ between runs by nature: no difference to show.
                let id = matches!(k.as_str(), "pid" | "tid");
                if v.is_number() && !id && !columns.contains(k) {
                    columns.push(k.clone());
                }
            }
        }
    }
    out.push('\n');
    out += "row";
    for c in &columns {
        out += &format!(",{c}_a,{c}_b,{c}_difference");
    }
    out.push('\n');
    for r in &diff.rows {
        out += &csv_field(&r.key);
        for c in &columns {
            let get =
                |side: &Option<Value>| side.as_ref().map(|v| plain(&v[c])).unwrap_or_default();
            let d = r.difference.get(c).map(plain).unwrap_or_default();
            out += &format!(",{},{},{}", get(&r.a), get(&r.b), d);
        }
        out.push('\n');
    }
    out
}

fn plain(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::diff::{diff, Rows};
    use serde_json::json;

    fn report(wakeups: f64, cpu: f64) -> Value {
        json!({
            "system": {"elapsed_s": 1.0, "idle_wakeups_per_s": wakeups, "deepest_state": "C6",
                       "cpu_time_accounts": {"explanation": "a sentence long enough to be prose, not a figure"}},
            "energy": {"total_j": 2.0},
            "processes": [{"pid": 1, "comm": "app"}],
            "threads": [{"tid": 2, "pid": 1, "comm": "main", "cpu_time_s": cpu, "sync_switches": 3}]
        })
    }

    #[test]
    fn the_text_page_has_every_part_and_leaves_prose_to_json() {
        let d = diff(&report(100.0, 0.5), &report(10.0, 0.25), Rows::Thread, None);
        let sides = Sides {
            a: "a.rec".into(),
            b: "b.rec".into(),
            by: "thread",
        };
        // Issue 51 (7): without --all, the headline and no internal figure.
        let short = text(&d, &sides, &TextOptions::default());
        assert!(
            !short.contains("idle_wakeups_per_s"),
            "system figures behind --all: {short}"
        );
        assert!(
            short.contains("(5 more system figures with --all, and in --json)"),
            "{short}"
        );
        // The headline, B relative to A: target CPU 0.25 s against 0.5 s is 0.5×, −0.25 s.
        let cpu = short
            .lines()
            .find(|l| l.starts_with("target CPU time s"))
            .expect(&short);
        let cells: Vec<&str> = cpu.split_whitespace().collect();
        assert_eq!(
            cells[4..],
            ["0.5000", "0.2500", "0.500×", "-0.2500"],
            "{cpu}"
        );
        assert!(short.find("Headline").unwrap() < short.find("Threads").unwrap());
        let page = text(
            &d,
            &sides,
            &TextOptions {
                all: true,
                ..TextOptions::default()
            },
        );
        assert!(
            page.starts_with("A = a.rec\nB = b.rec\nenergy: A unavailable (no energy section in the report), B unavailable"),
            "{page}"
        );
        let line = page
            .lines()
            .find(|l| l.starts_with("idle_wakeups_per_s"))
            .unwrap();
        let cells: Vec<&str> = line.split_whitespace().collect();
        // B relative to A, as the headline: 10 / 100 = 0.1×, 10 − 100 = −90.
        assert_eq!(
            cells,
            ["idle_wakeups_per_s", "100.0", "10.00", "0.100×", "-90.00"]
        );
        assert!(!page.contains("deepest_state"), "equal text is left out");
        assert!(!page.contains("a sentence long"), "prose stays in JSON");
        let row = page.lines().find(|l| l.starts_with("app / main")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells[..8],
            ["app", "/", "main", "both", "0.5000", "0.2500", "3", "3"]
        );
        assert!(
            page.contains("Comparison summary\n  idleness:\n    - the whole machine's CPUs woke from idle 100.0/s"),
            "{page}"
        );
        let j: Value = serde_json::from_str(&json(&d, &sides)).unwrap();
        assert_eq!(j["by"], "thread");
        assert_eq!(j["rows"][0]["key"], "app / main");
        assert!(j["system"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["metric"] == "cpu_time_accounts.explanation"));
        let csv = csv(&d);
        assert!(
            csv.contains("\nidle_wakeups_per_s,100.0,10.0,10,90\n"),
            "{csv}"
        );
        assert!(
            csv.contains("\napp / main,0.5,0.25,0.25,3,3,0.0\n"),
            "{csv}"
        );
    }

    /// Issue 51 (7): function rows are cut in the middle as `report` cuts them
    /// ([`crate::names::elide_middle`]), not padded to a 200-character C++ name.
    #[test]
    fn function_rows_are_cut_as_report_cuts_them() {
        let long = format!(
            "ns::{}::method(int, char const*)",
            "Template<Very>".repeat(14)
        );
        let r = |cpu: f64| {
            json!({"system": {"elapsed_s": 1.0}, "energy": {"total_j": 1.0},
                   "functions": [{"function": long, "module": "app", "cpu_time_s": cpu}]})
        };
        let d = diff(&r(1.0), &r(2.0), Rows::Function, None);
        let sides = Sides {
            a: "a".into(),
            b: "b".into(),
            by: "function",
        };
        let opts = TextOptions {
            all: false,
            fit: NameFit::Cap(60),
        };
        let page = text(&d, &sides, &opts);
        let key = format!("{long} (app)");
        let cut = crate::names::elide_middle(&key, 60);
        assert!(key.chars().count() > 200 && cut.chars().count() == 60);
        assert!(page.lines().any(|l| l.starts_with(&cut)), "{page}");
        assert!(!page.contains(&key), "{page}");
        // JSON keeps it whole.
        let j: Value = serde_json::from_str(&json(&d, &sides)).unwrap();
        assert_eq!(j["rows"][0]["key"], key.as_str());
    }

    /// Issue 29, point 2: the chart labelled as the target's wake-ups plots its rows'
    /// (23/s), not the machine's (13,237/s), which has its own chart.
    #[test]
    fn the_targets_wakeup_chart_plots_the_targets_rows() {
        let mut r = report(100.0, 0.5);
        r["system"]["wakeups_received"] =
            json!({"thread": 0, "timer": 13237, "irq": 0, "softirq": 0, "ipi": 0});
        r["threads"][0]["wakeups_received"] =
            json!({"thread": 0, "timer": 23, "irq": 0, "softirq": 0, "ipi": 0});
        let d = diff(&r, &r, Rows::Thread, None);
        let sides = Sides {
            a: "a.rec".into(),
            b: "b.rec".into(),
            by: "thread",
        };
        let page = html(&d, &sides, &r, &r);
        let chart = |aria: &str| -> String {
            let start = page
                .find(&format!("aria-label=\"{aria}\""))
                .unwrap_or_else(|| panic!("{aria}"));
            page[start..][..page[start..].find("</svg>").unwrap()].to_string()
        };
        let target = chart("wake-ups the target received per second in A and B, by cause");
        assert!(target.contains("timer: 23.00 /s"), "{target}");
        assert!(!target.contains("13237"), "{target}");
        let machine = chart("wake-ups on the whole machine per second in A and B, by cause");
        assert!(machine.contains("timer: 13237 /s"), "{machine}");
    }
}
