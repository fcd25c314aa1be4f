//! Two recordings side by side (`powerlens diff A B`), the way the Windows 7 vs Windows 8
//! power study compares two systems: every system figure with its ratio and difference,
//! the grid's rows matched across the recordings, and findings in the study's four
//! sections (idleness, scheduling, active work, energy).
//!
//! It works on the two reports as `report --json` writes them: the diff's `a` and `b`
//! are those very values, so a script comparing `diff --json` with the two reports finds
//! them equal. Pure: no I/O.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::advice::JudgedStates;
use crate::battery::{duration_text, wh_text};
use crate::provenance::Provenance;
use crate::sched::report::RecordingSpan;
use crate::verdict::estimated_qualifier;

/// One figure of both reports. `ratio` is a / b (1 when they are equal, also both zero;
/// `None` when b is zero and a is not, or the figure is not a number); `difference` is
/// a − b.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDiff {
    pub metric: String,
    pub a: Value,
    pub b: Value,
    pub ratio: Option<f64>,
    pub difference: Option<f64>,
}

/// One row of the grid in both recordings (`None` where it is only in the other).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowDiff {
    pub key: String,
    pub a: Option<Value>,
    pub b: Option<Value>,
    /// a − b per numeric column, for rows in both.
    pub difference: Map<String, Value>,
}

/// A finding in plain words, with the figures behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub section: &'static str,
    pub finding: String,
}

/// The study's sections, in its order.
pub const IDLENESS: &str = "idleness";
pub const SCHEDULING: &str = "scheduling";
pub const ACTIVE_WORK: &str = "active work";
pub const ENERGY: &str = "energy";

/// What the grid's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    Process,
    Thread,
    Function,
}

/// The whole comparison of report `a` with report `b` (their `report --json` objects).
/// Mean idle periods are judged against `target`'s deepest idle state when given (the
/// machine the code will run on), else against each recording's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub system: Vec<MetricDiff>,
    pub rows: Vec<RowDiff>,
    pub summary: Vec<Finding>,
    /// What the two recordings do not share, and why figures are missing.
    pub notes: Vec<String>,
    /// Where A's and B's energy comes from (measured, estimated or unavailable).
    pub energy_provenance: [Option<Provenance>; 2],
}

pub fn diff(a: &Value, b: &Value, rows: Rows, target: Option<&JudgedStates>) -> Diff {
    let system = system(a, b);
    let (a_rows, b_rows) = (row_list(a, rows), row_list(b, rows));
    let rows_diff = match_rows(&a_rows, &b_rows);
    let mut notes = Vec::new();
    let only = |side: &str, n: usize| {
        (n > 0).then(|| format!("{n} metrics are only in {side}'s report (a newer or reduced recording): shown with the other side null"))
    };
    let only_a = system
        .iter()
        .filter(|m| m.b.is_null() && !m.a.is_null())
        .count();
    let only_b = system
        .iter()
        .filter(|m| m.a.is_null() && !m.b.is_null())
        .count();
    notes.extend(only("A", only_a));
    notes.extend(only("B", only_b));
    let (x, y) = (&a["system"]["cpus"], &b["system"]["cpus"]);
    if x != y {
        notes.push(format!(
            "the recordings have {x} and {y} CPUs: different machines (or CPU sets), so per-CPU figures and utilization compare different things"
        ));
    }
    if rows == Rows::Function && (a_rows.is_empty() || b_rows.is_empty()) {
        notes.push("one of the recordings has no call stacks, so it has no function rows: record it again without --no-stacks".into());
    }
    let summary = findings(a, b, target);
    Diff {
        system,
        rows: rows_diff,
        summary,
        notes,
        energy_provenance: [energy_provenance(a), energy_provenance(b)],
    }
}

/// Every figure of `system`, `energy` and `battery` (when a report has one), flattened to
/// dotted keys (`idle_states.POLL.target_residency_us`, `energy.target_j`,
/// `battery.runs_per_charge`), in A's order then B's.
pub fn system(a: &Value, b: &Value) -> Vec<MetricDiff> {
    let mut a_leaves = Vec::new();
    let mut b_leaves = Vec::new();
    for (section, prefix) in [
        ("system", ""),
        ("energy", "energy."),
        ("battery", "battery."),
    ] {
        // The battery section is there only when a recording has battery figures.
        for (report, leaves) in [(a, &mut a_leaves), (b, &mut b_leaves)] {
            if !report[section].is_null() {
                flatten(prefix, &report[section], leaves);
            }
        }
    }
    let mut out: Vec<MetricDiff> = a_leaves
        .iter()
        .map(|(key, x)| {
            let y = b_leaves
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or(Value::Null);
            metric(key, x.clone(), y)
        })
        .collect();
    for (key, y) in &b_leaves {
        if !a_leaves.iter().any(|(k, _)| k == key) {
            out.push(metric(key, Value::Null, y.clone()));
        }
    }
    out
}

fn metric(key: &str, a: Value, b: Value) -> MetricDiff {
    let (ratio, difference) = match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (ratio(x, y), Some(dust_to_zero(x - y, x, y))),
        _ => (None, None),
    };
    MetricDiff {
        metric: key.to_string(),
        a,
        b,
        ratio,
        difference,
    }
}

/// a / b; 1 when equal (both zero too); `None` when b alone is zero.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    if a == b {
        Some(1.0)
    } else if b == 0.0 {
        None
    } else {
        Some(a / b)
    }
}

/// A difference within rounding of its operands is zero, not 1e-17.
fn dust_to_zero(d: f64, a: f64, b: f64) -> f64 {
    if d.abs() <= 1e-12 * a.abs().max(b.abs()) {
        0.0
    } else {
        d
    }
}

/// The leaves of `v` under `prefix`: objects by key, arrays of objects by their `name`
/// (idle states, energy domains) or `cpu`, other arrays by index.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                flatten(&format!("{prefix}{k}."), x, out);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                let name = match (&x["name"], &x["cpu"]) {
                    (Value::String(s), _) => s.clone(),
                    (_, Value::Number(n)) => format!("cpu{n}"),
                    _ => i.to_string(),
                };
                flatten(&format!("{prefix}{name}."), x, out);
            }
        }
        leaf => out.push((prefix.trim_end_matches('.').to_string(), leaf.clone())),
    }
}

/// The report's rows of that kind, each with the key that matches it across recordings.
fn row_list(report: &Value, rows: Rows) -> Vec<(String, Value)> {
    let list = |k: &str| report[k].as_array().cloned().unwrap_or_default();
    let mut keyed: Vec<(String, Value)> = match rows {
        Rows::Process => list("processes")
            .into_iter()
            .map(|p| (text(&p["comm"]), p))
            .collect(),
        Rows::Thread => {
            // A thread is known by its process's command and its own name: pids and tids
            // differ between runs.
            let processes = list("processes");
            let command = |pid: &Value| {
                processes
                    .iter()
                    .find(|p| &p["pid"] == pid)
                    .map(|p| text(&p["comm"]))
                    .unwrap_or_else(|| "?".into())
            };
            let mut threads = list("threads");
            // Order of creation: tids grow as threads are created.
            threads.sort_by_key(|t| t["tid"].as_u64().unwrap_or(0));
            threads
                .into_iter()
                .map(|t| (format!("{} / {}", command(&t["pid"]), text(&t["comm"])), t))
                .collect()
        }
        Rows::Function => list("functions")
            .into_iter()
            .map(|f| {
                let module = text(&f["module"]);
                let name = text(&f["function"]);
                (
                    if module.is_empty() {
                        name
                    } else {
                        format!("{name} ({module})")
                    },
                    f,
                )
            })
            .collect(),
    };
    // The n-th row of one key is matched with the n-th of the other recording.
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (key, _) in &mut keyed {
        let n = match seen.iter_mut().find(|(k, _)| k == key) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                seen.push((key.clone(), 1));
                1
            }
        };
        if n > 1 {
            *key = format!("{key} #{n}");
        }
    }
    keyed
}

fn text(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

fn match_rows(a: &[(String, Value)], b: &[(String, Value)]) -> Vec<RowDiff> {
    let mut out: Vec<RowDiff> = a
        .iter()
        .map(|(key, x)| {
            let y = b.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
            let difference = y.as_ref().map(|y| row_difference(x, y)).unwrap_or_default();
            RowDiff {
                key: key.clone(),
                a: Some(x.clone()),
                b: y,
                difference,
            }
        })
        .collect();
    for (key, y) in b {
        if !a.iter().any(|(k, _)| k == key) {
            out.push(RowDiff {
                key: key.clone(),
                a: None,
                b: Some(y.clone()),
                difference: Map::new(),
            });
        }
    }
    out
}

/// a − b for each numeric column, ids aside.
fn row_difference(a: &Value, b: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(columns) = a.as_object() else {
        return out;
    };
    for (k, x) in columns {
        if matches!(k.as_str(), "tid" | "pid") {
            continue;
        }
        if let (Some(x), Some(y)) = (x.as_f64(), b[k].as_f64()) {
            out.insert(k.clone(), Value::from(dust_to_zero(x - y, x, y)));
        }
    }
    out
}

/// A number of the report's `system` (or, with a `energy.` prefix, `energy`) object.
fn number(report: &Value, key: &str) -> Option<f64> {
    match key.strip_prefix("energy.") {
        Some(k) => report["energy"][k].as_f64(),
        None => report["system"][key].as_f64(),
    }
}

/// "97×", "1.4×" or "the same".
fn times(r: f64) -> String {
    if (r - 1.0).abs() < 0.005 {
        "the same".into()
    } else if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.2}×")
    }
}

/// Which of the two has the larger figure, and by how much: ("A", "B", 3.2) when A's
/// is 3.2 times B's.
fn larger(a: f64, b: f64) -> Option<(&'static str, &'static str, f64)> {
    if a >= b {
        ratio(a, b).map(|r| ("A", "B", r))
    } else {
        ratio(b, a).map(|r| ("B", "A", r))
    }
}

/// The findings, in the study's four sections. Each names the figures it rests on; a
/// figure either report lacks gives no finding in place of a guess.
pub fn findings(a: &Value, b: &Value, target: Option<&JudgedStates>) -> Vec<Finding> {
    let mut out = Vec::new();
    idleness(a, b, target, &mut out);
    scheduling(a, b, &mut out);
    active_work(a, b, &mut out);
    energy(a, b, &mut out);
    out
}

fn idleness(a: &Value, b: &Value, target: Option<&JudgedStates>, out: &mut Vec<Finding>) {
    let push = |out: &mut Vec<Finding>, finding: String| {
        out.push(Finding {
            section: IDLENESS,
            finding,
        })
    };
    if let (Some(x), Some(y)) = (
        number(a, "idle_wakeups_per_s"),
        number(b, "idle_wakeups_per_s"),
    ) {
        push(
            out,
            match larger(x, y) {
                Some((_, _, r)) if (r - 1.0).abs() < 0.005 => {
                    format!("A and B wake the CPUs from idle as often ({x:.1}/s)")
                }
                Some((more, less, r)) => format!(
                    "{more} wakes the CPUs from idle {} as often as {less} ({x:.1}/s in A, {y:.1}/s in B)",
                    times(r)
                ),
                None => format!("A wakes the CPUs from idle {x:.1}/s, B never ({y:.1}/s)"),
            },
        );
    }
    // The deepest state worth reaching: the target machine's, else the recording's own.
    let deepest = |r: &Value| match target.and_then(|t| Some((t, t.deepest()?))) {
        Some((t, s)) => Some((
            format!("{} of the {}", s.name, t.source),
            s.target_residency_us as f64,
        )),
        None => r["system"]["idle_states"]
            .as_array()
            .and_then(|s| s.last())
            .and_then(|s| {
                let us = s["target_residency_us"].as_f64()?;
                Some((format!("{} of its own machine", text(&s["name"])), us))
            }),
    };
    for (side, report) in [("A", a), ("B", b)] {
        if let (Some(mean), Some((state, residency))) =
            (number(report, "mean_idle_per_wakeup_us"), deepest(report))
        {
            let verb = if mean >= residency {
                "reaches"
            } else {
                "is below"
            };
            push(
                out,
                format!(
                    "{side}'s mean idle before a wake-up, {}, {verb} the {} target residency of the deepest idle state, {state}",
                    micros(mean),
                    micros(residency)
                ),
            );
        }
    }
    if let (Some(x), Some(y)) = (
        number(a, "idleness_efficiency_pct"),
        number(b, "idleness_efficiency_pct"),
    ) {
        if (x - y).abs() >= 1.0 {
            push(
                out,
                format!("idleness efficiency (idle time spent in the deepest state) is {x:.0}% in A and {y:.0}% in B"),
            );
        }
    }
}

fn micros(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// Σ of a numeric column over the report's thread rows.
fn thread_sum(report: &Value, column: &str) -> f64 {
    report["threads"]
        .as_array()
        .map(|t| t.iter().filter_map(|r| r[column].as_f64()).sum())
        .unwrap_or(0.0)
}

fn scheduling(a: &Value, b: &Value, out: &mut Vec<Finding>) {
    if a["threads"].as_array().is_none() || b["threads"].as_array().is_none() {
        return;
    }
    let sums = |r: &Value| {
        (
            thread_sum(r, "sync_switches"),
            thread_sum(r, "preempt_switches"),
            thread_sum(r, "wait_time_s"),
            thread_sum(r, "inactive_time_s"),
        )
    };
    let ((sa, pa, wa, ia), (sb, pb, wb, ib)) = (sums(a), sums(b));
    let share = |p: f64, s: f64| {
        if p + s > 0.0 {
            100.0 * p / (p + s)
        } else {
            0.0
        }
    };
    out.push(Finding {
        section: SCHEDULING,
        finding: format!(
            "the target's threads switch out {:.0} times in A ({:.0} to wait: synchronization, {:.0} preempted: {:.0}%) and {:.0} in B ({:.0} and {:.0}: {:.0}% preemptions)",
            sa + pa,
            sa,
            pa,
            share(pa, sa),
            sb + pb,
            sb,
            pb,
            share(pb, sb)
        ),
    });
    out.push(Finding {
        section: SCHEDULING,
        finding: format!(
            "they wait {wa:.3} s and stay runnable but not running (inactive) {ia:.3} s in A, against {wb:.3} s and {ib:.3} s in B"
        ),
    });
}

fn active_work(a: &Value, b: &Value, out: &mut Vec<Finding>) {
    let push = |out: &mut Vec<Finding>, finding: String| {
        out.push(Finding {
            section: ACTIVE_WORK,
            finding,
        })
    };
    let cpu = |r: &Value| thread_sum(r, "cpu_time_s");
    if a["threads"].is_array() && b["threads"].is_array() {
        let (x, y) = (cpu(a), cpu(b));
        push(
            out,
            match larger(x, y) {
                Some((more, less, r)) if (r - 1.0).abs() >= 0.005 => format!(
                    "{more}'s target uses {} the CPU time of {less}'s ({x:.3} s in A, {y:.3} s in B)",
                    times(r)
                ),
                _ => format!("the targets use about the same CPU time ({x:.3} s in A, {y:.3} s in B)"),
            },
        );
    }
    match (
        number(a, "running_frequency_mhz"),
        number(b, "running_frequency_mhz"),
    ) {
        (Some(x), Some(y)) => push(
            out,
            format!("the CPUs ran at {x:.0} MHz on average in A and {y:.0} MHz in B"),
        ),
        _ => push(
            out,
            "frequency is unknown in at least one recording (no cpufreq, no power:cpu_frequency events): no finding on frequency".into(),
        ),
    }
    let parallelism = |r: &Value| {
        r["processes"]
            .as_array()
            .and_then(|p| p.first())
            .and_then(|p| Some((text(&p["comm"]), p["effective_parallelism"].as_f64()?)))
    };
    if let (Some((ca, x)), Some((cb, y))) = (parallelism(a), parallelism(b)) {
        push(
            out,
            format!("the first process keeps {x:.2} CPUs busy on average while it runs in A ({ca}) and {y:.2} in B ({cb})"),
        );
    }
}

/// A report's energy provenance.
fn energy_provenance(report: &Value) -> Option<Provenance> {
    serde_json::from_value(report["energy"]["provenance"].clone()).ok()
}

/// Which side's figure is the lower ("A" on a tie), and by how many percent of the higher.
fn lower_side(a: f64, b: f64) -> (&'static str, f64) {
    let less = if a.max(b) > 0.0 {
        100.0 * (a - b).abs() / a.max(b)
    } else {
        0.0
    };
    (if a <= b { "A" } else { "B" }, less)
}

fn energy(a: &Value, b: &Value, out: &mut Vec<Finding>) {
    let figures = |r: &Value| {
        Some((
            number(r, "energy.total_j")?,
            number(r, "elapsed_s")?,
            number(r, "energy.target_j"),
        ))
    };
    let (Some((ea, ta, tja)), Some((eb, tb, tjb))) = (figures(a), figures(b)) else {
        out.push(Finding {
            section: ENERGY,
            finding: "energy is unavailable in at least one recording: no finding on energy (see each report's energy provenance)".into(),
        });
        return;
    };
    let power = |e: f64, t: f64| if t > 0.0 { e / t } else { 0.0 };
    let (pa, pb) = (power(ea, ta), power(eb, tb));
    let (which, saving) = lower_side(ea, eb);
    let spans = not_whole_runs(a, b);
    let mut finding = match spans {
        None => format!(
            "{which} retires its work with {saving:.0}% less energy: E = P × t = {pa:.2} W × {ta:.3} s = {ea:.3} J in A, {pb:.2} W × {tb:.3} s = {eb:.3} J in B"
        ),
        // A window's energy grows with the window, not with the work done in it: only the
        // power compares.
        Some(_) => {
            let (lower, less) = lower_side(pa, pb);
            let verdict = if less < 0.5 {
                "A and B draw the same power to within 0.5%".to_string()
            } else {
                format!("{lower} draws {less:.0}% less power")
            };
            format!(
                "{verdict}: P = E / t = {ea:.3} J / {ta:.3} s = {pa:.2} W in A, {eb:.3} J / {tb:.3} s = {pb:.2} W in B"
            )
        }
    };
    if let (Some(x), Some(y)) = (tja, tjb) {
        finding += &format!(" (the target's share: {x:.3} J and {y:.3} J)");
    }
    if let Some(spans) = spans {
        finding += &format!(". These energies are not the energy to retire the same work: {spans}; record each as `powerlens record -- CMD` to compare that");
    }
    if let Some(q) = [energy_provenance(a), energy_provenance(b)]
        .iter()
        .flatten()
        .find_map(estimated_qualifier)
    {
        finding += ".";
        finding += &q;
    }
    out.push(Finding {
        section: ENERGY,
        finding,
    });
    if let Some(f) = battery_finding(a, b) {
        out.push(Finding {
            section: ENERGY,
            finding: f,
        });
    }
}

/// Why the two recordings' energies are not energies to retire a piece of work — which
/// side is not one whole run of a command, and what it is instead — or `None` when both are
/// whole runs.
fn not_whole_runs(a: &Value, b: &Value) -> Option<String> {
    let span = |r: &Value| {
        serde_json::from_value::<RecordingSpan>(r["system"]["recording_span"].clone()).ok()
    };
    let reasons: Vec<String> = [("A", span(a)), ("B", span(b))]
        .into_iter()
        .filter(|(_, s)| *s != Some(RecordingSpan::WholeRun))
        .map(|(side, s)| match s {
            Some(s) => format!("{side} is {}", s.describe()),
            None => format!("{side}'s recording does not say what it covers"),
        })
        .collect();
    (!reasons.is_empty()).then(|| reasons.join(", "))
}

/// On battery: how many times a charge retires each recording's work, and how long it
/// lasts at each one's power — when both reports have battery figures.
fn battery_finding(a: &Value, b: &Value) -> Option<String> {
    let figures = |r: &Value| {
        Some((
            r["battery"]["runs_per_charge"].as_f64()?,
            r["battery"]["life_h"].as_f64()?,
            r["battery"]["energy_full_wh"].as_f64()?,
        ))
    };
    let ((ra, la, wa), (rb, lb, wb)) = (figures(a)?, figures(b)?);
    let charge = if wa == wb {
        format!("a charge of {} Wh", wh_text(wa))
    } else {
        format!(
            "a charge ({} Wh in A, {} Wh in B)",
            wh_text(wa),
            wh_text(wb)
        )
    };
    let lasts = format!(
        "lasts {} at A's power and {} at B's",
        duration_text(la),
        duration_text(lb)
    );
    // Runs per charge count recordings' worth of energy: work only for whole runs.
    Some(match not_whole_runs(a, b) {
        None => format!(
            "on battery, {charge} retires A's recorded work {ra:.0} times and B's {rb:.0} times, and {lasts}"
        ),
        Some(_) => format!("on battery, {charge} {lasts}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(wakeups_per_s: f64, mean_idle_us: f64, cpu: f64, energy_j: f64) -> Value {
        json!({
            "system": {
                "target": "pid 1", "recording_span": "whole_run", "cpus": 2, "elapsed_s": 1.0,
                "idle_wakeups_per_s": wakeups_per_s,
                "mean_idle_per_wakeup_us": mean_idle_us,
                "idleness_efficiency_pct": 100.0,
                "running_frequency_mhz": null,
                "idle_states": [
                    {"index": 0, "name": "POLL", "target_residency_us": 0},
                    {"index": 1, "name": "C6", "target_residency_us": 600}
                ],
                "energy_domains": [{"name": "package", "energy_j": energy_j}]
            },
            "energy": {
                "provenance": {"kind": "measured", "source": "rapl-powercap"},
                "total_j": energy_j, "target_j": energy_j / 2.0
            },
            "processes": [{"pid": 7, "comm": "app", "effective_parallelism": 1.0, "cpu_time_s": cpu}],
            "threads": [
                {"tid": 9, "pid": 7, "comm": "worker", "cpu_time_s": cpu / 2.0, "sync_switches": 10, "preempt_switches": 0, "wait_time_s": 0.5, "inactive_time_s": 0.0},
                {"tid": 8, "pid": 7, "comm": "worker", "cpu_time_s": cpu / 2.0, "sync_switches": 5, "preempt_switches": 1, "wait_time_s": 0.25, "inactive_time_s": 0.01}
            ]
        })
    }

    #[test]
    fn a_report_against_itself_is_all_ones_and_zeros() {
        let r = report(100.0, 900.0, 0.5, 3.0);
        let d = diff(&r, &r, Rows::Thread, None);
        assert!(d.system.len() > 10);
        for m in &d.system {
            assert_eq!(m.a, m.b, "{}", m.metric);
            if m.a.is_number() {
                assert_eq!(m.ratio, Some(1.0), "{}", m.metric);
                assert_eq!(m.difference, Some(0.0), "{}", m.metric);
            }
        }
        assert!(d.notes.is_empty(), "{:?}", d.notes);
        assert!(d.rows.iter().all(|r| r.a.is_some() && r.b.is_some()));
    }

    #[test]
    fn battery_figures_are_compared_when_a_report_has_them() {
        let (mut a, mut b) = (
            report(1050.0, 900.0, 0.5, 3.0),
            report(10.5, 95_000.0, 0.25, 1.5),
        );
        let d = diff(&a, &b, Rows::Thread, None);
        assert!(!d.system.iter().any(|m| m.metric.starts_with("battery")));
        assert!(!d.summary.iter().any(|f| f.finding.contains("on battery")));
        // 50 Wh = 180 000 J: 60 000 recordings of 3 J, 120 000 of 1.5 J; 3 W and 1.5 W
        // over the 1 s recordings: 16 h 40 min and 33 h 20 min.
        a["battery"] = json!({"available": true, "energy_full_wh": 50.0, "runs_per_charge": 60000.0, "life_h": 50.0 / 3.0});
        b["battery"] = json!({"available": true, "energy_full_wh": 50.0, "runs_per_charge": 120000.0, "life_h": 50.0 / 1.5});
        let d = diff(&a, &b, Rows::Thread, None);
        let m = d
            .system
            .iter()
            .find(|m| m.metric == "battery.runs_per_charge")
            .unwrap();
        assert_eq!((m.ratio, m.difference), (Some(0.5), Some(-60000.0)));
        let f = d
            .summary
            .iter()
            .find(|f| f.finding.contains("on battery"))
            .unwrap();
        assert_eq!(f.section, ENERGY);
        assert_eq!(
            f.finding,
            "on battery, a charge of 50 Wh retires A's recorded work 60000 times and B's 120000 times, and lasts 16 h 40 min at A's power and 33 h 20 min at B's"
        );
    }

    #[test]
    fn figures_are_the_reports_own_with_hand_computed_ratios() {
        let (a, b) = (
            report(1050.0, 900.0, 0.5, 3.0),
            report(10.5, 95_000.0, 0.25, 1.5),
        );
        let d = diff(&a, &b, Rows::Thread, None);
        let m = |k: &str| d.system.iter().find(|m| m.metric == k).unwrap().clone();
        let w = m("idle_wakeups_per_s");
        assert_eq!((w.a, w.b), (json!(1050.0), json!(10.5)));
        assert_eq!(w.ratio, Some(100.0));
        assert_eq!(w.difference, Some(1039.5));
        assert_eq!(m("idle_states.C6.target_residency_us").ratio, Some(1.0));
        assert_eq!(m("energy_domains.package.energy_j").ratio, Some(2.0));
        assert_eq!(m("energy.target_j").difference, Some(0.75));
        // Text figures compare as equal or not, without a ratio.
        assert_eq!(m("target").ratio, None);
        let sections: Vec<&str> = d.summary.iter().map(|f| f.section).collect();
        for s in [IDLENESS, SCHEDULING, ACTIVE_WORK, ENERGY] {
            assert!(sections.contains(&s), "{s}: {:?}", d.summary);
        }
        let said = |s: &str| d.summary.iter().any(|f| f.finding.contains(s));
        assert!(
            said("A wakes the CPUs from idle 100× as often as B"),
            "{:?}",
            d.summary
        );
        assert!(said(
            "A's mean idle before a wake-up, 900 µs, reaches the 600 µs target residency of the deepest idle state, C6 of its own machine"
        ));
        assert!(said("B's mean idle before a wake-up, 95.0 ms, reaches"));
        assert!(said(
            "B retires its work with 50% less energy: E = P × t = 3.00 W × 1.000 s = 3.000 J in A"
        ));
        assert!(
            !said("ESTIMATED"),
            "measured energy is not called estimated"
        );
        // Judged against a target machine instead: its deepest state decides.
        let target = JudgedStates {
            source: "target client".into(),
            states: vec![crate::sched::report::IdleStateInfo {
                index: 3,
                name: "C10".into(),
                latency_us: 100,
                target_residency_us: 5_000,
            }],
        };
        let d = diff(&a, &b, Rows::Thread, Some(&target));
        let expected = "A's mean idle before a wake-up, 900 µs, is below the 5.0 ms target residency of the deepest idle state, C10 of the target client";
        assert!(
            d.summary.iter().any(|f| f.finding == expected),
            "{:?}",
            d.summary
        );
    }

    /// Two system-wide windows of 10 s and 20 s at 3 W and 1.5 W: B's total energy is the
    /// same 30 J, and "retires its work with 0% less energy" would be a finding about the
    /// windows' lengths. The power compares; the energies are said not to be work's.
    #[test]
    fn windows_compare_by_power_not_by_energy_to_retire_work() {
        let (mut a, mut b) = (
            report(100.0, 900.0, 0.5, 30.0),
            report(100.0, 900.0, 0.5, 30.0),
        );
        a["system"]["recording_span"] = json!("window");
        a["system"]["elapsed_s"] = json!(10.0);
        b["system"]["elapsed_s"] = json!(20.0);
        let d = diff(&a, &b, Rows::Thread, None);
        let energy: Vec<&str> = d
            .summary
            .iter()
            .filter(|f| f.section == ENERGY)
            .map(|f| f.finding.as_str())
            .collect();
        assert_eq!(
            energy,
            ["B draws 50% less power: P = E / t = 30.000 J / 10.000 s = 3.00 W in A, 30.000 J / 20.000 s = 1.50 W in B (the target's share: 15.000 J and 15.000 J). These energies are not the energy to retire the same work: A is a window of time (system-wide or attached to a process), not a run of a command; record each as `powerlens record -- CMD` to compare that"]
        );
        b["system"]["elapsed_s"] = json!(10.0);
        let d = diff(&a, &b, Rows::Thread, None);
        assert!(d.summary.iter().any(|f| f.finding.starts_with(
            "A and B draw the same power to within 0.5%: P = E / t = 30.000 J / 10.000 s = 3.00 W in A"
        )), "{:?}", d.summary);
        // On battery, a window's charge is a time, not a number of runs.
        for r in [&mut a, &mut b] {
            r["battery"] = json!({"available": true, "energy_full_wh": 50.0, "runs_per_charge": 6000.0, "life_h": 50.0 / 3.0});
        }
        let d = diff(&a, &b, Rows::Thread, None);
        assert!(
            d.summary.iter().any(|f| f.finding
                == "on battery, a charge of 50 Wh lasts 16 h 40 min at A's power and 16 h 40 min at B's"),
            "{:?}",
            d.summary
        );
        // A recording that does not say what it covers is not taken for a whole run either.
        a["system"]["recording_span"] = Value::Null;
        b["system"]["recording_span"] = json!("cut_short");
        let d = diff(&a, &b, Rows::Thread, None);
        assert!(d.summary.iter().any(|f| f.finding.ends_with(
            "A's recording does not say what it covers, B is part of a run of the command (it ended before the command did); record each as `powerlens record -- CMD` to compare that"
        )), "{:?}", d.summary);
        assert!(!d
            .summary
            .iter()
            .any(|f| f.finding.contains("retires its work")));
    }

    #[test]
    fn threads_match_by_command_name_and_order_and_the_rest_is_one_sided() {
        let a = report(1.0, 1.0, 0.5, 1.0);
        let mut b = a.clone();
        b["threads"][0]["comm"] = json!("other");
        let d = diff(&a, &b, Rows::Thread, None);
        let keys: Vec<(&str, bool, bool)> = d
            .rows
            .iter()
            .map(|r| (r.key.as_str(), r.a.is_some(), r.b.is_some()))
            .collect();
        // Sorted by tid: tid 8 is the first "worker", tid 9 the second.
        assert_eq!(
            keys,
            [
                ("app / worker", true, true),
                ("app / worker #2", true, false),
                ("app / other", false, true)
            ]
        );
        let first = &d.rows[0];
        assert_eq!(first.difference["sync_switches"], json!(0.0));
        assert!(!first.difference.contains_key("tid"));
    }

    #[test]
    fn estimated_energy_says_so_and_missing_energy_gives_no_guess() {
        let mut a = report(1.0, 1.0, 0.5, 2.0);
        a["energy"]["provenance"] =
            json!({"kind": "estimated", "model": "default-linear", "parameters": "p"});
        let b = report(1.0, 1.0, 0.5, 1.0);
        let d = diff(&a, &b, Rows::Process, None);
        let energy: Vec<&Finding> = d.summary.iter().filter(|f| f.section == ENERGY).collect();
        assert!(
            energy[0].finding.contains("ESTIMATED, not measured"),
            "{energy:?}"
        );
        let mut none = b.clone();
        none["energy"] = json!({"provenance": {"kind": "unavailable", "reason": "r", "fix": null}});
        let d = diff(&a, &none, Rows::Process, None);
        let energy: Vec<&Finding> = d.summary.iter().filter(|f| f.section == ENERGY).collect();
        assert!(energy[0].finding.contains("unavailable"), "{energy:?}");
        assert!(
            d.notes.iter().any(|n| n.contains("only in A")),
            "{:?}",
            d.notes
        );
    }
}
