//! The grid itself: one row per thread, process or function with the columns chosen,
//! its totals, and the same rows as CSV.

use std::cmp::Ordering;

use powerlens_core::sched::report::{
    ProcessRow, RecordingReport, RowMetrics, ThreadRow, WakeupCounts,
};
use powerlens_core::stacks::grid::FunctionRow;

use super::columns::{find, selected, By, Column, GridOptions, Total, UnknownColumn};
use crate::names::NameFit;
use crate::table::{csv_field, sig, Table};

/// A cell.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Int(u64),
    Float(f64),
    Text(String),
    Missing,
}

impl Value {
    fn number(&self) -> Option<f64> {
        match self {
            Value::Int(n) => Some(*n as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    fn text(&self) -> String {
        match self {
            Value::Int(n) => n.to_string(),
            Value::Float(f) => sig(*f, 4),
            Value::Text(s) => s.clone(),
            // Blank, not "-", so number columns stay right-aligned; the sections below the
            // grid say why a figure is unavailable.
            Value::Missing => String::new(),
        }
    }

    fn csv(&self) -> String {
        match self {
            Value::Int(n) => n.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Text(s) => csv_field(s),
            Value::Missing => String::new(),
        }
    }
}

/// A grid row, as values by column key.
pub(super) struct Row {
    key: (bool, u32),
    values: Vec<(&'static str, Value)>,
}

impl Row {
    fn get(&self, key: &str) -> &Value {
        self.values
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .unwrap_or(&Value::Missing)
    }
}

pub(super) fn opt_f(v: Option<f64>) -> Value {
    v.map(Value::Float).unwrap_or(Value::Missing)
}

pub(super) fn opt_i(v: Option<u64>) -> Value {
    v.map(Value::Int).unwrap_or(Value::Missing)
}

/// The metric columns shared by thread and process rows, in the grid's order.
pub(super) fn common(
    cpu_time_s: f64,
    m: &RowMetrics,
    energy_j: Option<f64>,
) -> Vec<(&'static str, Value)> {
    let w = m.wakeups_received.as_ref();
    let wi = |f: fn(&WakeupCounts) -> u64| opt_i(w.map(f));
    vec![
        ("cpu_time_s", Value::Float(cpu_time_s)),
        ("user_time_s", opt_f(m.user_time_s)),
        ("system_time_s", opt_f(m.system_time_s)),
        ("on_cpu_s", opt_f(m.on_cpu_s)),
        ("sync_switches", Value::Int(m.sync_switches)),
        ("preempt_switches", Value::Int(m.preempt_switches)),
        ("wait_time_s", opt_f(m.wait_time_s)),
        ("inactive_time_s", opt_f(m.inactive_time_s)),
        ("migrations", opt_i(m.migrations)),
        ("wakeups_received_total", wi(WakeupCounts::total)),
        ("wakeups_thread", wi(|w| w.thread)),
        ("wakeups_timer", wi(|w| w.timer)),
        ("wakeups_irq", wi(|w| w.irq)),
        ("wakeups_softirq", wi(|w| w.softirq)),
        ("wakeups_ipi", wi(|w| w.ipi)),
        ("wakeups_caused", opt_i(m.wakeups_caused)),
        ("idle_wakeups", opt_i(m.idle_wakeups)),
        ("idle_time_s", opt_f(m.idle_time_s)),
        (
            "mean_idle_before_wakeup_us",
            opt_f(m.mean_idle_before_wakeup_us),
        ),
        ("frequency_mhz", opt_f(m.frequency_mhz)),
        ("energy_j", opt_f(energy_j)),
    ]
}

pub(super) fn thread_row(t: &ThreadRow) -> Row {
    let mut values = vec![
        ("tid", Value::Int(t.tid as u64)),
        (
            "pid",
            t.pid
                .map(|p| Value::Int(p as u64))
                .unwrap_or(Value::Missing),
        ),
        ("comm", Value::Text(t.comm.clone())),
    ];
    values.extend(common(t.cpu_time_s, &t.metrics, t.energy_j));
    Row {
        key: (false, t.tid),
        values,
    }
}

pub(super) fn process_row(p: &ProcessRow) -> Row {
    let mut values = vec![
        (
            "pid",
            p.pid
                .map(|p| Value::Int(p as u64))
                .unwrap_or(Value::Missing),
        ),
        ("comm", Value::Text(p.comm.clone())),
        ("threads", Value::Int(p.threads as u64)),
        ("effective_parallelism", opt_f(p.effective_parallelism)),
    ];
    values.extend(common(p.cpu_time_s, &p.metrics, p.energy_j));
    Row {
        key: (p.pid.is_none(), p.pid.unwrap_or(0)),
        values,
    }
}

pub(super) fn function_row(f: &FunctionRow, i: usize) -> Row {
    let idle_states = f
        .idle_states_after
        .iter()
        .map(|s| format!("{}:{}", s.name, sig(s.time_s, 3)))
        .collect::<Vec<_>>()
        .join(" ");
    Row {
        key: (false, i as u32),
        values: vec![
            ("function", Value::Text(f.function.clone())),
            ("module", Value::Text(short_module(&f.module).to_string())),
            ("cpu_time_s", Value::Float(f.cpu_time_s)),
            ("user_time_s", opt_f(f.user_time_s)),
            ("system_time_s", opt_f(f.system_time_s)),
            ("samples", Value::Int(f.samples)),
            ("sync_switches", Value::Int(f.sync_switches)),
            ("preempt_switches", Value::Int(f.preempt_switches)),
            ("wait_time_s", Value::Float(f.wait_time_s)),
            ("inactive_time_s", Value::Float(f.inactive_time_s)),
            ("wakeups_caused", Value::Int(f.wakeups_caused)),
            ("idle_wakeups", Value::Int(f.idle_wakeups)),
            (
                "mean_idle_before_wakeup_us",
                opt_f(f.mean_idle_before_wakeup_us),
            ),
            ("idle_after_s", Value::Float(f.idle_after_s)),
            ("idle_states_after", Value::Text(idle_states)),
            (
                "stack",
                Value::Text(f.stack.as_deref().unwrap_or_default().join(" <- ")),
            ),
            ("energy_j", opt_f(f.energy_j)),
        ],
    }
}

pub(super) fn short_module(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// All rows of the grid, sorted; and the sort key used.
pub(super) fn rows(
    report: &RecordingReport,
    opts: &GridOptions,
) -> Result<Vec<Row>, UnknownColumn> {
    let sort = find(
        opts.by,
        "--sort",
        opts.sort.as_deref().unwrap_or("cpu_time_s"),
    )?
    .key;
    let mut rows: Vec<Row> = match opts.by {
        By::Thread => report.threads.iter().map(thread_row).collect(),
        By::Process => report.processes.iter().map(process_row).collect(),
        By::Function | By::Stack => report
            .functions
            .iter()
            .enumerate()
            .map(|(i, f)| function_row(f, i))
            .collect(),
    };
    rows.sort_by(|a, b| {
        let (x, y) = (a.get(sort), b.get(sort));
        let primary = match (x, y) {
            (Value::Text(p), Value::Text(q)) => p.cmp(q),
            (Value::Missing, Value::Missing) => Ordering::Equal,
            (Value::Missing, _) => Ordering::Greater,
            (_, Value::Missing) => Ordering::Less,
            _ => {
                let (p, q) = (x.number().unwrap_or(0.0), y.number().unwrap_or(0.0));
                q.partial_cmp(&p).unwrap_or(Ordering::Equal)
            }
        };
        primary.then(a.key.cmp(&b.key))
    });
    Ok(rows)
}

pub(super) fn total(col: &Column, rows: &[Row]) -> Value {
    match col.total {
        Total::None => Value::Missing,
        Total::Sum => {
            let vals: Vec<&Value> = rows.iter().map(|r| r.get(col.key)).collect();
            if vals.iter().any(|v| matches!(v, Value::Float(_))) {
                if vals.iter().any(|v| matches!(v, Value::Missing)) {
                    return Value::Missing;
                }
                Value::Float(vals.iter().filter_map(|v| v.number()).sum())
            } else if vals.iter().all(|v| matches!(v, Value::Int(_))) {
                Value::Int(
                    vals.iter()
                        .map(|v| match v {
                            Value::Int(n) => *n,
                            _ => 0,
                        })
                        .sum(),
                )
            } else {
                Value::Missing
            }
        }
        Total::WeightedBy(weight) => {
            let (mut num, mut den) = (0.0, 0.0);
            for r in rows {
                if let (Some(v), Some(w)) = (r.get(col.key).number(), r.get(weight).number()) {
                    num += v * w;
                    den += w;
                }
            }
            if den > 0.0 {
                Value::Float(num / den)
            } else {
                Value::Missing
            }
        }
    }
}

/// The function view's default columns a terminal too narrow for them leaves out, least
/// telling first: with a name column of at least 40 characters, the default function grid
/// took about 170 columns, and every row of it wrapped on a 120-column terminal.
const FIT_LEAVE_OUT: &[&str] = &[
    "idle_after_s",
    "mean_idle_before_wakeup_us",
    "wakeups_caused",
    "inactive_time_s",
    "preempt_switches",
    "idle_wakeups",
    "wait_time_s",
    "sync_switches",
];

/// Default columns that only recordings with CPU-time stacks fill: left out of the text
/// grid when no row has them (a `--no-stacks` or reduced recording), unless `--show`n.
const ONLY_WHEN_KNOWN: &[&str] = &["user_time_s", "system_time_s"];

/// The grid alone: header, rows (sorted, cut to `top`) and a totals row over every row.
/// On a terminal, the function and stack views with their default columns leave out the
/// least telling ones until a line fits, and say which under the grid.
pub fn grid(report: &RecordingReport, opts: &GridOptions) -> Result<String, UnknownColumn> {
    let mut cols = selected(opts, false)?;
    let all = rows(report, opts)?;
    if opts.show.is_empty() {
        cols.retain(|c| {
            !ONLY_WHEN_KNOWN.contains(&c.key)
                || all.iter().any(|r| !matches!(r.get(c.key), Value::Missing))
        });
    }
    let shown = opts.top.unwrap_or(all.len()).min(all.len());
    let may_leave_out = matches!(opts.by, By::Function | By::Stack) && opts.show.is_empty();
    let mut left_out: Vec<&str> = Vec::new();
    loop {
        let text = render_grid(report, &cols, &all, shown, opts.names);
        let width = match opts.names {
            NameFit::Terminal(width) if may_leave_out => width,
            _ => return Ok(text),
        };
        let fits = text.lines().all(|l| l.chars().count() <= width);
        let next = FIT_LEAVE_OUT
            .iter()
            .find_map(|key| cols.iter().position(|c| c.key == *key));
        match next {
            Some(i) if !fits => left_out.push(cols.remove(i).key),
            _ if left_out.is_empty() => return Ok(text),
            _ => return Ok(text + &left_out_note(&left_out, width)),
        }
    }
}

/// Which columns the grid left out, wrapped to `width`.
fn left_out_note(keys: &[&str], width: usize) -> String {
    let mut lines = vec![format!(
        "left out to fit {width} columns (--show them, or widen the terminal):"
    )];
    for key in keys {
        let last = lines.last_mut().expect("one line at least");
        if last.chars().count() + 1 + key.len() + 1 > width {
            lines.push(String::new());
        }
        let last = lines.last_mut().expect("one line at least");
        if !last.is_empty() {
            last.push(' ');
        }
        last.push_str(key);
        last.push(',');
    }
    if let Some(last) = lines.last_mut() {
        last.pop();
    }
    lines.join("\n") + "\n"
}

/// The grid of `cols`, names fitted as `fit` says.
fn render_grid(
    report: &RecordingReport,
    cols: &[&'static Column],
    all: &[Row],
    shown: usize,
    fit: NameFit,
) -> String {
    let mut t = Table::new(cols.iter().map(|c| c.header));
    for r in &all[..shown] {
        t.row(cols.iter().map(|c| r.get(c.key).text()));
    }
    if let Some(totals) = totals_row(report, cols, all, shown) {
        t.row(totals);
    }
    let names: Vec<usize> = cols
        .iter()
        .enumerate()
        .filter(|(_, c)| c.key == "function" || c.key == "stack")
        .map(|(i, _)| i)
        .collect();
    t.render_fitting(&names, fit)
}

/// Notes under the grid: the rows whose wake-ups the trace did not all record, so that a
/// short `wake-ups` cell is not read as a thread that rarely woke (the CPU notes say why
/// the trace is incomplete). Empty when every wake-up was recorded or for function rows.
pub fn grid_notes(report: &RecordingReport, by: By) -> Vec<String> {
    const SHOWN: usize = 5;
    let short: Vec<String> = match by {
        By::Thread => report
            .threads
            .iter()
            .filter_map(|t| {
                let n = t.metrics.unrecorded_wakeups.filter(|&n| n > 0)?;
                Some(format!("tid {} ({}) {n}", t.tid, t.comm))
            })
            .collect(),
        By::Process => report
            .processes
            .iter()
            .filter_map(|p| {
                let n = p.metrics.unrecorded_wakeups.filter(|&n| n > 0)?;
                let pid = p.pid.map_or("?".to_string(), |p| p.to_string());
                Some(format!("pid {pid} ({}) {n}", p.comm))
            })
            .collect(),
        By::Function | By::Stack => Vec::new(),
    };
    if short.is_empty() {
        return Vec::new();
    }
    let more = short.len().saturating_sub(SHOWN);
    let mut list = short[..short.len().min(SHOWN)].join(", ");
    if more > 0 {
        list += &format!(" and {more} more rows");
    }
    vec![format!(
        "wake-ups not recorded: {list}. These rows ran again after blocking without their wake-up in the trace, so their `woken` cell is short by that many (the CPU notes say why the trace is incomplete; JSON: unrecorded_wakeups)"
    )]
}

/// The totals row under `cols` over every row (also those `--top` left out, which the
/// label says); `None` for inclusive function rows, which overlap (a caller holds its
/// callees' figures).
pub(super) fn totals_row(
    report: &RecordingReport,
    cols: &[&'static Column],
    all: &[Row],
    shown: usize,
) -> Option<Vec<String>> {
    if report.function_grouping.as_deref() == Some("function_inclusive") {
        return None;
    }
    let label = if shown < all.len() {
        format!("total, all {}", all.len())
    } else {
        "total".to_string()
    };
    let mut totals: Vec<String> = cols
        .iter()
        .map(|c| match total(c, all) {
            Value::Missing => String::new(),
            v => v.text(),
        })
        .collect();
    // The label goes in the name column, else the first column without a total.
    match cols
        .iter()
        .position(|c| c.key == "comm" || c.key == "function")
        .or_else(|| cols.iter().position(|c| c.total == Total::None))
    {
        Some(i) => totals[i] = label,
        None => totals.insert(0, label),
    }
    Some(totals)
}

/// The grid as cells for other views (the HTML report): its columns and, per row (sorted
/// and cut like the grid), each cell's text and its number (`None` for text and
/// unavailable cells).
#[allow(clippy::type_complexity)]
/// The grid as cells for a sortable table: each cell's text and, for numbers, its value.
pub struct GridCells {
    pub cols: Vec<&'static Column>,
    pub rows: Vec<Vec<(String, Option<f64>)>>,
    /// The totals row, as the text grid prints it; `None` where it has none.
    pub totals: Option<Vec<String>>,
}

pub fn grid_cells(
    report: &RecordingReport,
    opts: &GridOptions,
) -> Result<GridCells, UnknownColumn> {
    let cols = selected(opts, false)?;
    let all = rows(report, opts)?;
    let shown = opts.top.unwrap_or(all.len()).min(all.len());
    let cells = all[..shown]
        .iter()
        .map(|r| {
            cols.iter()
                .map(|c| {
                    let v = r.get(c.key);
                    let n = match &v {
                        Value::Int(n) => Some(*n as f64),
                        Value::Float(f) => Some(*f),
                        _ => None,
                    };
                    (v.text(), n)
                })
                .collect()
        })
        .collect();
    let totals = totals_row(report, &cols, &all, shown);
    Ok(GridCells {
        cols,
        rows: cells,
        totals,
    })
}

/// CSV: a header of column keys and one line per grid row (sorted, cut to `top`), every
/// column unless `show`/`hide` say otherwise; no totals line. Missing values are empty.
pub fn csv(report: &RecordingReport, opts: &GridOptions) -> Result<String, UnknownColumn> {
    let cols = selected(opts, true)?;
    let all = rows(report, opts)?;
    let shown = opts.top.unwrap_or(all.len()).min(all.len());
    let mut out = cols.iter().map(|c| c.key).collect::<Vec<_>>().join(",");
    out.push('\n');
    for r in &all[..shown] {
        out.push_str(
            &cols
                .iter()
                .map(|c| r.get(c.key).csv())
                .collect::<Vec<_>>()
                .join(","),
        );
        out.push('\n');
    }
    Ok(out)
}
