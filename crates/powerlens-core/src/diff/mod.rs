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
use crate::battery_life::{duration_text, wh_text};
use crate::figures::seconds;
use crate::provenance::Provenance;
use crate::sched::report::RecordingSpan;
use crate::verdict::estimated_qualifier;

mod headline;
mod notes;
mod roles;
pub use roles::Commands;
mod target;
pub use headline::{headline, Headline};
pub use target::wakeups_received_by_cause;
use target::{thread_sum, Target};

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
    /// Elapsed time, CPU, energy, switches and wake-ups, B relative to A: what the text
    /// view shows first.
    pub headline: Vec<Headline>,
    pub system: Vec<MetricDiff>,
    pub rows: Vec<RowDiff>,
    pub summary: Vec<Finding>,
    /// What the two recordings do not share, and why figures are missing.
    pub notes: Vec<String>,
    /// Where A's and B's energy comes from (measured, estimated or unavailable).
    pub energy_provenance: [Option<Provenance>; 2],
}

pub fn diff(a: &Value, b: &Value, rows: Rows, target: Option<&JudgedStates>) -> Diff {
    diff_with_commands(a, b, rows, target, [&Commands::new(), &Commands::new()])
}

/// [`diff`], with each recording's command lines (`commands` samples; empty for a
/// recording made before they were recorded): processes of one name are then matched by
/// their role ([`roles`]), not by the order they started.
pub fn diff_with_commands(
    a: &Value,
    b: &Value,
    rows: Rows,
    target: Option<&JudgedStates>,
    commands: [&Commands; 2],
) -> Diff {
    let (a_leaves, b_leaves) = (leaves(a), leaves(b));
    let system = paired(&a_leaves, &b_leaves);
    let (a_rows, b_rows) = (
        row_list(a, rows, commands[0]),
        row_list(b, rows, commands[1]),
    );
    let rows_diff = match_rows(&a_rows, &b_rows);
    let side = |name, report, leaves| notes::Side {
        name,
        report,
        leaves,
    };
    let (sa, sb) = (side("A", a, &a_leaves), side("B", b, &b_leaves));
    let mut notes = notes::one_sided(&sa, &sb);
    notes.extend(notes::one_sided(&sb, &sa));
    notes.extend([&sa, &sb].into_iter().filter_map(notes::lost_records));
    let (x, y) = (&a["system"]["cpus"], &b["system"]["cpus"]);
    if x != y {
        notes.push(format!(
            "the recordings have {x} and {y} CPUs: different machines (or CPU sets), so per-CPU figures and utilization compare different things"
        ));
    }
    notes.extend(far_apart(&rows_diff));
    if rows == Rows::Function && (a_rows.is_empty() || b_rows.is_empty()) {
        notes.push("one of the recordings has no call stacks, so it has no function rows: record it again without --no-stacks".into());
    }
    let summary = findings(a, b, target);
    Diff {
        headline: headline(a, b),
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
    paired(&leaves(a), &leaves(b))
}

/// A's figures with B's of the same key, then B's own.
fn paired(a_leaves: &[(String, Value)], b_leaves: &[(String, Value)]) -> Vec<MetricDiff> {
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
    for (key, y) in b_leaves {
        if !a_leaves.iter().any(|(k, _)| k == key) {
            out.push(metric(key, Value::Null, y.clone()));
        }
    }
    out
}

/// A report's figures of `system`, `energy` and `battery` as (dotted key, value).
fn leaves(report: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (section, prefix) in [
        ("system", ""),
        ("energy", "energy."),
        ("battery", "battery."),
    ] {
        // The battery section is there only when a recording has battery figures.
        if !report[section].is_null() {
            flatten(prefix, &report[section], &mut out);
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
            // Examples (`switch_interval_examples`: "tid 68", …) illustrate a figure;
            // they are not figures to compare.
            for (k, x) in m.iter().filter(|(k, _)| !k.ends_with("_examples")) {
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

/// One row of a report with the key that matches it across recordings, and the key it
/// falls back to (its name alone) when the other recording has no row of that key.
struct Keyed {
    key: String,
    base: String,
    value: Value,
}

/// The report's rows of that kind, each with the key that matches it across recordings.
fn row_list(report: &Value, rows: Rows, commands: &Commands) -> Vec<Keyed> {
    let list = |k: &str| report[k].as_array().cloned().unwrap_or_default();
    let processes = list("processes");
    let named: Vec<(u64, String)> = processes
        .iter()
        .filter_map(|p| Some((p["pid"].as_u64()?, text(&p["comm"]))))
        .collect();
    let roles = roles::roles(&named, commands);
    // A process by its name and, where namesakes collide, its role: `cc1 [main.c]`.
    let process = |pid: &Value| -> (String, String) {
        let comm = processes
            .iter()
            .find(|p| &p["pid"] == pid)
            .map(|p| text(&p["comm"]))
            .unwrap_or_else(|| "?".into());
        match pid.as_u64().and_then(|p| roles.get(&p)) {
            Some(role) => (format!("{comm} [{role}]"), comm),
            None => (comm.clone(), comm),
        }
    };
    let mut keyed: Vec<(String, String, Value)> = match rows {
        Rows::Process => processes
            .iter()
            .map(|p| {
                let (key, base) = process(&p["pid"]);
                (key, base, p.clone())
            })
            .collect(),
        Rows::Thread => {
            // A thread is known by its process and its own name: pids and tids differ
            // between runs.
            let mut threads = list("threads");
            // Order of creation: tids grow as threads are created.
            threads.sort_by_key(|t| t["tid"].as_u64().unwrap_or(0));
            threads
                .into_iter()
                .map(|t| {
                    let (key, base) = process(&t["pid"]);
                    let name = text(&t["comm"]);
                    (format!("{key} / {name}"), format!("{base} / {name}"), t)
                })
                .collect()
        }
        Rows::Function => list("functions")
            .into_iter()
            .map(|f| {
                let module = text(&f["module"]);
                let name = text(&f["function"]);
                let key = if module.is_empty() {
                    name
                } else {
                    format!("{name} ({module})")
                };
                (key.clone(), key, f)
            })
            .collect(),
    };
    // The n-th row of one key is matched with the n-th of the other recording.
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (key, _, _) in &mut keyed {
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
        .into_iter()
        .map(|(key, base, value)| Keyed { key, base, value })
        .collect()
}

fn text(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

/// Rows of the same key, then, among the rows left, rows of the same name in order (a
/// process whose command line one recording lacks), then the rows of one side only.
fn match_rows(a: &[Keyed], b: &[Keyed]) -> Vec<RowDiff> {
    let mut partner: Vec<Option<usize>> = a
        .iter()
        .map(|x| b.iter().position(|y| y.key == x.key))
        .collect();
    for i in 0..a.len() {
        if partner[i].is_none() {
            partner[i] = (0..b.len()).find(|&j| {
                b[j].base == a[i].base
                    && !partner.contains(&Some(j))
                    && !a.iter().any(|x| x.key == b[j].key)
            });
        }
    }
    let mut out: Vec<RowDiff> = a
        .iter()
        .zip(&partner)
        .map(|(x, j)| {
            let y = j.map(|j| b[j].value.clone());
            let difference = y
                .as_ref()
                .map(|y| row_difference(&x.value, y))
                .unwrap_or_default();
            RowDiff {
                key: x.key.clone(),
                a: Some(x.value.clone()),
                b: y,
                difference,
            }
        })
        .collect();
    for (j, y) in b.iter().enumerate() {
        if !partner.contains(&Some(j)) {
            out.push(RowDiff {
                key: y.key.clone(),
                a: None,
                b: Some(y.value.clone()),
                difference: Map::new(),
            });
        }
    }
    out
}

/// Matched rows whose CPU time differs more than tenfold (both at least 1 ms): likely not
/// the same work, whatever their names say.
fn far_apart(rows: &[RowDiff]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            let cpu = |v: &Option<Value>| v.as_ref()?["cpu_time_s"].as_f64();
            let (x, y) = (cpu(&r.a)?, cpu(&r.b)?);
            let (lo, hi) = (x.min(y), x.max(y));
            (lo >= 0.001 && hi > 10.0 * lo).then(|| {
                format!(
                    "the matched rows {:?} differ more than tenfold in CPU time ({} in A, {} in B): they may not have done the same work",
                    r.key,
                    seconds(x),
                    seconds(y)
                )
            })
        })
        .collect()
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
    let (ta, tb) = (Target::of(a), Target::of(b));
    let machine = (
        number(a, "idle_wakeups_per_s"),
        number(b, "idle_wakeups_per_s"),
    );
    if let Some(finding) = target_wakeups(&ta, &tb, machine) {
        push(out, finding);
    } else if let (Some(x), Some(y)) = machine {
        // No wake-up figure of the target's own (a reduced recording): the machine's,
        // said to be the machine's.
        push(out, format!("the whole machine's CPUs woke from idle {x:.1}/s in A and {y:.1}/s in B (the target's own idle wake-ups are unknown)"));
    } else {
        push(out, "idle wake-ups are unknown in at least one recording (a reduced recording has no scheduler trace): no finding on them".into());
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
    for (side, report, t) in [("A", a, &ta), ("B", b, &tb)] {
        // The idle the target's own wake-ups ended; the machine's when it ended none.
        let (mean, whose) = match t.mean_idle_before_wakeup_us() {
            Some(mean) => (Some(mean), format!("{side}'s target woke them")),
            None => (
                number(report, "mean_idle_per_wakeup_us"),
                format!("a wake-up on {side}'s machine (its target woke no idle CPU)"),
            ),
        };
        if let (Some(mean), Some((state, residency))) = (mean, deepest(report)) {
            let verb = if mean >= residency {
                "reaches"
            } else {
                "is below"
            };
            push(
                out,
                format!(
                    "the CPUs idled {} on average before {whose}, which {verb} the {} target residency of the deepest idle state, {state}",
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
                format!("the whole machine's idleness efficiency (idle time spent in the deepest state) is {x:.0}% in A and {y:.0}% in B"),
            );
        }
    }
}

/// Fewer idle wake-ups than this on both sides together compare nothing: a CPU that
/// happened to be idle once or twice.
const FEW_IDLE_WAKEUPS: f64 = 20.0;

/// Which target wakes the CPUs from idle more, on its threads' own idle wake-ups, with
/// the wake-ups it received and the machine's rate as context; `None` when the rows
/// have no wake-up figures.
fn target_wakeups(ta: &Target, tb: &Target, machine: (Option<f64>, Option<f64>)) -> Option<String> {
    let (x, y) = (ta.idle_wakeups?, tb.idle_wakeups?);
    let (xr, yr) = (ta.idle_wakeups_per_s()?, tb.idle_wakeups_per_s()?);
    let mut finding = if x + y < FEW_IDLE_WAKEUPS {
        // The CPUs were kept busy by other work, so a handful of idle wake-ups is noise:
        // the count of wake-ups received still says which target asks for the CPUs more.
        let few = format!("too few found a CPU idle to compare idle wake-ups ({x:.0} in A, {y:.0} in B): other work kept the CPUs busy");
        match (ta.wakeups_received, tb.wakeups_received) {
            (Some(wa), Some(wb)) => match larger(wa, wb) {
                Some((more, less, r)) if (r - 1.0).abs() >= 0.005 => format!(
                    "{more}'s target is woken {} as often as {less}'s ({wa:.0} wake-ups received in A, {wb:.0} in B), but {few}",
                    times(r)
                ),
                _ => format!("both targets are woken about as often ({wa:.0} and {wb:.0} wake-ups received), and {few}"),
            },
            _ => format!("of the targets' wake-ups, {few}"),
        }
    } else {
        let counts = format!(
            "its threads caused {x:.0} idle wake-ups in A ({xr:.1}/s) and {y:.0} in B ({yr:.1}/s)"
        );
        let received = match (ta.wakeups_received, tb.wakeups_received) {
            (Some(wa), Some(wb)) => format!(" of the {wa:.0} and {wb:.0} wake-ups they received"),
            _ => String::new(),
        };
        match larger(xr, yr) {
            Some((_, _, r)) if (r - 1.0).abs() < 0.005 => {
                format!("A's and B's targets wake the CPUs from idle as often: {counts}{received}")
            }
            Some((more, less, r)) => format!(
                "{more}'s target wakes the CPUs from idle {} as often as {less}'s: {counts}{received}",
                times(r)
            ),
            None => {
                let (more, less) = if xr > yr { ("A", "B") } else { ("B", "A") };
                format!("{more}'s target wakes the CPUs from idle, {less}'s never: {counts}{received}")
            }
        }
    };
    if let (Some(sa), Some(sb)) = machine {
        finding += &format!("; the whole machine: {sa:.1}/s in A and {sb:.1}/s in B");
        // Who makes the machine's difference: the target's share of it, or the rest.
        let (machine_gap, target_gap) = (sa - sb, xr - yr);
        let others = machine_gap - target_gap;
        if others.abs() > target_gap.abs() && machine_gap.abs() >= 0.05 {
            finding += &format!(
                ", where other processes make {:.1}/s of the difference against the target's {:.1}/s",
                others.abs(),
                target_gap.abs()
            );
        }
    }
    Some(finding)
}

fn micros(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn scheduling(a: &Value, b: &Value, out: &mut Vec<Finding>) {
    if a["threads"].as_array().is_none() || b["threads"].as_array().is_none() {
        return;
    }
    let sum = |r: &Value, column: &str| thread_sum(r, column).unwrap_or(0.0);
    let sums = |r: &Value| (sum(r, "sync_switches"), sum(r, "preempt_switches"));
    let ((sa, pa), (sb, pb)) = (sums(a), sums(b));
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
    // Wait and inactive time need the scheduler trace: a reduced recording has none,
    // which is no 0 s.
    let times = |r: &Value| {
        Some((
            thread_sum(r, "wait_time_s")?,
            thread_sum(r, "inactive_time_s")?,
        ))
    };
    let finding = match (times(a), times(b)) {
        (Some((wa, ia)), Some((wb, ib))) => format!(
            "they wait {} and stay runnable but not running (inactive) {} in A, against {} and {} in B",
            seconds(wa),
            seconds(ia),
            seconds(wb),
            seconds(ib)
        ),
        _ => "wait and inactive time are unknown in at least one recording (a reduced recording has no scheduler trace): no finding on them".into(),
    };
    out.push(Finding {
        section: SCHEDULING,
        finding,
    });
}

fn active_work(a: &Value, b: &Value, out: &mut Vec<Finding>) {
    let push = |out: &mut Vec<Finding>, finding: String| {
        out.push(Finding {
            section: ACTIVE_WORK,
            finding,
        })
    };
    if let (Some(x), Some(y)) = (Target::of(a).cpu_time_s, Target::of(b).cpu_time_s) {
        push(
            out,
            match larger(x, y) {
                Some((more, less, r)) if (r - 1.0).abs() >= 0.005 => format!(
                    "{more}'s target uses {} the CPU time of {less}'s ({} in A, {} in B)",
                    times(r),
                    seconds(x),
                    seconds(y)
                ),
                _ => format!(
                    "the targets use about the same CPU time ({} in A, {} in B)",
                    seconds(x),
                    seconds(y)
                ),
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
    if let (Some((ca, x)), Some((cb, y))) = (busiest_process(a), busiest_process(b)) {
        // The same parallelism on both sides (two single-threaded programs) tells nothing.
        if (x - y).abs() >= 0.05 {
            push(
                out,
                format!("the process that did most of the target's work keeps {x:.2} CPUs busy on average while it runs in A ({ca}) and {y:.2} in B ({cb})"),
            );
        }
    }
}

/// The target process with the most CPU time, and its effective parallelism: the one that
/// did the work, not a shell that started it.
fn busiest_process(report: &Value) -> Option<(String, f64)> {
    let p = report["processes"].as_array()?.iter().max_by(|p, q| {
        let cpu = |r: &Value| r["cpu_time_s"].as_f64().unwrap_or(0.0);
        cpu(p).total_cmp(&cpu(q))
    })?;
    Some((text(&p["comm"]), p["effective_parallelism"].as_f64()?))
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
    let spans = not_whole_runs(a, b);
    let machine = format!(
        "E = P × t = {pa:.2} W × {ta:.3} s = {ea:.3} J in A, {pb:.2} W × {tb:.3} s = {eb:.3} J in B"
    );
    let mut finding = match (spans.as_ref(), tja.zip(tjb)) {
        // The work is the target's: its share of the energy decides, the machine's total
        // (other processes' work included) is context.
        (None, Some((x, y))) => format!(
            "{}: the target's share of the energy is {x:.3} J in A and {y:.3} J in B; the whole machine: {machine}",
            less_energy(x, y, "A's and B's targets retire their work", |w| format!("{w}'s target retires its work"))
        ),
        (None, None) => format!(
            "{}: {machine}",
            less_energy(ea, eb, "A and B retire their work", |w| format!("{w} retires its work"))
        ),
        // A window's energy grows with the window, not with the work done in it: only the
        // power compares.
        (Some(_), _) => {
            let (lower, less) = lower_side(pa, pb);
            let verdict = if less < 0.5 {
                "A and B draw the same power to within 0.5%".to_string()
            } else {
                format!("{lower} draws {less:.0}% less power")
            };
            let mut f = format!(
                "{verdict}: P = E / t = {ea:.3} J / {ta:.3} s = {pa:.2} W in A, {eb:.3} J / {tb:.3} s = {pb:.2} W in B"
            );
            if let (Some(x), Some(y)) = (tja, tjb) {
                f += &format!(" (the target's share: {x:.3} J and {y:.3} J)");
            }
            f
        }
    };
    if let Some(others) = others_dominate(a, b) {
        finding += "; ";
        finding += &others;
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

/// "{who} with the same energy to within 0.5%", or "{winner} with N% less energy": a
/// difference below 0.5% (a recording against itself) is no win.
fn less_energy(a: f64, b: f64, both: &str, winner: impl Fn(&str) -> String) -> String {
    let (which, saving) = lower_side(a, b);
    if saving < 0.5 {
        format!("{both} with the same energy to within 0.5%")
    } else {
        format!("{} with {saving:.0}% less energy", winner(which))
    }
}

/// When other processes' energy (`energy.other_j`) differs between A and B more than the
/// target's share does, the machine's totals compare that other work: how much of the gap
/// it makes, and what to do about it.
fn others_dominate(a: &Value, b: &Value) -> Option<String> {
    let figure = |r: &Value, k: &str| number(r, k);
    let d = |k: &str| Some(figure(a, k)? - figure(b, k)?);
    let (others, target, gap) = (
        d("energy.other_j")?,
        d("energy.target_j")?,
        d("energy.total_j")?,
    );
    if others.abs() <= target.abs() || gap == 0.0 {
        return None;
    }
    let share = if others.signum() == gap.signum() && others.abs() <= gap.abs() {
        format!(
            "{:.3} J of the machine's {:.3} J gap is other processes' work",
            others.abs(),
            gap.abs()
        )
    } else {
        format!(
            "other processes' work differs by {:.3} J between A and B, more than the machine's {:.3} J gap",
            others.abs(),
            gap.abs()
        )
    };
    Some(format!(
        "{share} (the target's share differs by {:.3} J): record with less beside it, or compare the target's share",
        target.abs()
    ))
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
    // A recording's battery figures charge the whole machine over its window: say so,
    // since `run`'s charge the command alone.
    let whose = |r: &Value| r["battery"]["battery_charges"].as_str().map(str::to_string);
    let charge = match (whose(a), whose(b)) {
        (Some(x), Some(y)) if x == "machine" && y == "machine" => {
            format!("{charge}, paying for the whole machine's energy over each recording window,")
        }
        _ => charge,
    };
    // Runs per charge count recordings' worth of energy: work only for whole runs.
    Some(match not_whole_runs(a, b) {
        None => format!(
            "on battery, {charge} retires A's recorded work {ra:.0} times and B's {rb:.0} times, and {lasts}"
        ),
        Some(_) => format!("on battery, {charge} {lasts}"),
    })
}

#[cfg(test)]
mod tests;
