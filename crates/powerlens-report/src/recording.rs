//! Views of a recording's report (`powerlens report`): the terminal grid by thread or by
//! process with the system section above it and the energy split below it, JSON (the
//! report model serialized: the contract of docs/REPORT.md) and CSV (one line per grid
//! row).
//!
//! Grid columns are named by the same keys as the JSON fields; `--sort`, `--show`,
//! `--hide` take those keys and [`list_columns`] describes them.

use std::cmp::Ordering;
use std::fmt::{self, Write};

use powerlens_core::sched::report::{
    CpuReport, ProcessRow, RecordingReport, ThreadRow, WakeupCounts,
};
use powerlens_core::stacks::grid::FunctionRow;

use crate::names::NameFit;
use crate::table::{csv_field, sig, Table, NOT_AVAILABLE};

/// Grid rows: one per thread, process, function or call stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum By {
    #[default]
    Thread,
    Process,
    /// `report.functions`, grouped by function (innermost user frame or inclusive).
    Function,
    /// `report.functions`, one row per call stack.
    Stack,
}

impl By {
    pub fn name(self) -> &'static str {
        match self {
            By::Thread => "thread",
            By::Process => "process",
            By::Function => "function",
            By::Stack => "stack",
        }
    }

    /// This grid's bit in [`Column::grids`].
    fn bit(self) -> u8 {
        match self {
            By::Thread => THREAD,
            By::Process => PROCESS,
            By::Function | By::Stack => FUNCTION,
        }
    }
}

/// What the grid shows: the CLI turns `--by/--sort/--top/--show/--hide` into this.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GridOptions {
    pub by: By,
    /// Column key to sort by, descending (text columns ascending). Default `cpu_time_s`.
    pub sort: Option<String>,
    /// Keep the first N rows after sorting; the totals row still covers every row.
    pub top: Option<usize>,
    /// Only these columns, in this order (`all` = every column). Empty = the defaults.
    pub show: Vec<String>,
    /// Remove these columns.
    pub hide: Vec<String>,
    /// How wide the text view's names (function, stack, wake-up cause) may be; the
    /// command line fits them to the terminal. JSON, CSV and HTML keep them whole.
    pub names: NameFit,
}

/// A column name the grid does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownColumn {
    /// The option that named it (`--sort`, `--show`, `--hide`).
    pub option: &'static str,
    pub name: String,
    pub by: By,
    pub valid: Vec<&'static str>,
}

impl fmt::Display for UnknownColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: unknown column '{}' for the {} grid; valid columns: {} (see --list)",
            self.option,
            self.name,
            self.by.name(),
            self.valid.join(", ")
        )
    }
}

impl std::error::Error for UnknownColumn {}

// Which grids a column belongs to: a set of these bits.
const THREAD: u8 = 1;
const PROCESS: u8 = 2;
const FUNCTION: u8 = 4;
const BOTH: u8 = THREAD | PROCESS;
const ALL: u8 = THREAD | PROCESS | FUNCTION;

/// One grid column.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The key for `--sort/--show/--hide`, the JSON field and the CSV header.
    pub key: &'static str,
    /// The terminal header.
    pub header: &'static str,
    /// One line for `--list`.
    pub description: &'static str,
    /// Shown without `--show`.
    pub default: bool,
    /// Summed in the totals row.
    total: Total,
    grids: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Total {
    None,
    Sum,
    /// A mean weighted by another column's value.
    WeightedBy(&'static str),
}

const fn col(
    key: &'static str,
    header: &'static str,
    description: &'static str,
    default: bool,
    total: Total,
    grids: u8,
) -> Column {
    Column {
        key,
        header,
        description,
        default,
        total,
        grids,
    }
}

/// Every column, in grid order.
const COLUMNS: &[Column] = &[
    col(
        "function",
        "function",
        "the function: innermost frame of the program's own code (--inclusive: anywhere on the stack); module+offset when unresolved",
        true,
        Total::None,
        FUNCTION,
    ),
    col(
        "module",
        "module",
        "the executable or library of the function",
        true,
        Total::None,
        FUNCTION,
    ),
    col("tid", "tid", "thread id", true, Total::None, THREAD),
    col(
        "pid",
        "pid",
        "process id (from the recording's thread table; '-' when unknown)",
        true,
        Total::None,
        BOTH,
    ),
    col(
        "comm",
        "command",
        "thread or process name",
        true,
        Total::None,
        BOTH,
    ),
    col(
        "threads",
        "threads",
        "threads of the process seen in the trace",
        true,
        Total::Sum,
        PROCESS,
    ),
    col(
        "cpu_time_s",
        "CPU s",
        "time running on a CPU: the scheduler's own account (sched_stat_runtime), as getrusage and ps show it",
        true,
        Total::Sum,
        ALL,
    ),
    col(
        "on_cpu_s",
        "on-CPU s",
        "time between its recorded switch-in and switch-out events, what timelines and CPU busy time are made of; may differ from CPU s (see docs/REPORT.md)",
        false,
        Total::Sum,
        BOTH,
    ),
    col(
        "sync_switches",
        "sync sw",
        "synchronization context switches: switched out blocked (sleep, lock, I/O)",
        true,
        Total::Sum,
        ALL,
    ),
    col(
        "preempt_switches",
        "preempt sw",
        "preemption context switches: switched out while still runnable",
        true,
        Total::Sum,
        ALL,
    ),
    col(
        "wait_time_s",
        "wait s",
        "wait time: blocked, from a synchronization switch-out to the wake-up",
        true,
        Total::Sum,
        ALL,
    ),
    col(
        "inactive_time_s",
        "inactive s",
        "inactive time: runnable but not running (after a wake-up or a preemption)",
        true,
        Total::Sum,
        ALL,
    ),
    col(
        "migrations",
        "migr",
        "moves from one CPU to another",
        true,
        Total::Sum,
        BOTH,
    ),
    col(
        "wakeups_received_total",
        "woken",
        "wake-ups received, all causes",
        true,
        Total::Sum,
        BOTH,
    ),
    col(
        "wakeups_thread",
        "by thread",
        "wake-ups received from another thread",
        false,
        Total::Sum,
        BOTH,
    ),
    col(
        "wakeups_timer",
        "by timer",
        "wake-ups received from a timer callback",
        false,
        Total::Sum,
        BOTH,
    ),
    col(
        "wakeups_irq",
        "by irq",
        "wake-ups received from a hardware interrupt handler",
        false,
        Total::Sum,
        BOTH,
    ),
    col(
        "wakeups_softirq",
        "by softirq",
        "wake-ups received from a softirq",
        false,
        Total::Sum,
        BOTH,
    ),
    col(
        "wakeups_ipi",
        "by ipi",
        "wake-ups received from an IPI or a CPU's idle task (remote, no thread behind it)",
        false,
        Total::Sum,
        BOTH,
    ),
    col(
        "wakeups_caused",
        "woke others",
        "wake-ups this thread issued to other threads",
        true,
        Total::Sum,
        ALL,
    ),
    col(
        "idle_wakeups",
        "idle wake-ups",
        "times it ran first on a CPU that had just left idle",
        true,
        Total::Sum,
        ALL,
    ),
    col(
        "idle_time_s",
        "idle s",
        "idle time of the CPUs before those idle wake-ups (VTune's Idle Time)",
        false,
        Total::Sum,
        BOTH,
    ),
    col(
        "mean_idle_before_wakeup_us",
        "idle before µs",
        "mean idle duration of the CPU before those idle wake-ups",
        true,
        Total::WeightedBy("idle_wakeups"),
        ALL,
    ),
    col(
        "frequency_mhz",
        "MHz",
        "mean CPU frequency while it ran (power:cpu_frequency records only)",
        false,
        Total::WeightedBy("cpu_time_s"),
        BOTH,
    ),
    col(
        "samples",
        "samples",
        "cpu-clock samples behind the CPU time",
        false,
        Total::Sum,
        FUNCTION,
    ),
    col(
        "idle_after_s",
        "idle after s",
        "idle time of the CPU right after a thread blocked here and left it idle",
        true,
        Total::Sum,
        FUNCTION,
    ),
    col(
        "idle_states_after",
        "idle states after",
        "of that idle time, per power:cpu_idle state (NAME:seconds)",
        false,
        Total::None,
        FUNCTION,
    ),
    col(
        "stack",
        "stack",
        "the call stack, innermost first (--by stack)",
        true,
        Total::None,
        FUNCTION,
    ),
    col(
        "effective_parallelism",
        "parallelism",
        "mean number of its threads running while at least one runs",
        true,
        Total::None,
        PROCESS,
    ),
    col(
        "energy_j",
        "energy J",
        "energy attributed (see the method below the grid)",
        true,
        Total::Sum,
        ALL,
    ),
];

/// The columns of a grid, in grid order.
pub fn columns(by: By) -> Vec<&'static Column> {
    COLUMNS
        .iter()
        .filter(|c| c.grids & by.bit() != 0)
        .filter(|c| c.key != "stack" || by == By::Stack)
        .collect()
}

/// The `--list` text: every column of the grid with its description, defaults marked.
pub fn list_columns(by: By) -> String {
    let mut t = Table::new(["column", "header", "default", "description"]);
    for c in columns(by) {
        t.row([
            c.key,
            c.header,
            if c.default { "shown" } else { "hidden" },
            c.description,
        ]);
    }
    format!(
        "columns of the {} grid (--sort/--show/--hide take the column key or the header):\n{}",
        by.name(),
        t.render()
    )
}

/// A cell.
#[derive(Debug, Clone, PartialEq)]
enum Value {
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
struct Row {
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

fn opt_f(v: Option<f64>) -> Value {
    v.map(Value::Float).unwrap_or(Value::Missing)
}

/// The metric columns shared by thread and process rows.
struct Metrics<'a> {
    cpu_time_s: f64,
    on_cpu_s: Option<f64>,
    sync: u64,
    preempt: u64,
    wait: Option<f64>,
    inactive: Option<f64>,
    migrations: Option<u64>,
    wakeups: Option<&'a WakeupCounts>,
    caused: Option<u64>,
    idle_wakeups: Option<u64>,
    idle_time: Option<f64>,
    idle_before: Option<f64>,
    freq: Option<f64>,
    energy: Option<f64>,
}

fn opt_i(v: Option<u64>) -> Value {
    v.map(Value::Int).unwrap_or(Value::Missing)
}

fn common(m: Metrics) -> Vec<(&'static str, Value)> {
    let w = m.wakeups;
    let wi = |f: fn(&WakeupCounts) -> u64| opt_i(w.map(f));
    vec![
        ("cpu_time_s", Value::Float(m.cpu_time_s)),
        ("on_cpu_s", opt_f(m.on_cpu_s)),
        ("sync_switches", Value::Int(m.sync)),
        ("preempt_switches", Value::Int(m.preempt)),
        ("wait_time_s", opt_f(m.wait)),
        ("inactive_time_s", opt_f(m.inactive)),
        ("migrations", opt_i(m.migrations)),
        ("wakeups_received_total", wi(WakeupCounts::total)),
        ("wakeups_thread", wi(|w| w.thread)),
        ("wakeups_timer", wi(|w| w.timer)),
        ("wakeups_irq", wi(|w| w.irq)),
        ("wakeups_softirq", wi(|w| w.softirq)),
        ("wakeups_ipi", wi(|w| w.ipi)),
        ("wakeups_caused", opt_i(m.caused)),
        ("idle_wakeups", opt_i(m.idle_wakeups)),
        ("idle_time_s", opt_f(m.idle_time)),
        ("mean_idle_before_wakeup_us", opt_f(m.idle_before)),
        ("frequency_mhz", opt_f(m.freq)),
        ("energy_j", opt_f(m.energy)),
    ]
}

fn thread_row(t: &ThreadRow) -> Row {
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
    values.extend(common(Metrics {
        cpu_time_s: t.cpu_time_s,
        on_cpu_s: t.on_cpu_s,
        sync: t.sync_switches,
        preempt: t.preempt_switches,
        wait: t.wait_time_s,
        inactive: t.inactive_time_s,
        migrations: t.migrations,
        wakeups: t.wakeups_received.as_ref(),
        caused: t.wakeups_caused,
        idle_wakeups: t.idle_wakeups,
        idle_time: t.idle_time_s,
        idle_before: t.mean_idle_before_wakeup_us,
        freq: t.frequency_mhz,
        energy: t.energy_j,
    }));
    Row {
        key: (false, t.tid),
        values,
    }
}

fn process_row(p: &ProcessRow) -> Row {
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
    values.extend(common(Metrics {
        cpu_time_s: p.cpu_time_s,
        on_cpu_s: p.on_cpu_s,
        sync: p.sync_switches,
        preempt: p.preempt_switches,
        wait: p.wait_time_s,
        inactive: p.inactive_time_s,
        migrations: p.migrations,
        wakeups: p.wakeups_received.as_ref(),
        caused: p.wakeups_caused,
        idle_wakeups: p.idle_wakeups,
        idle_time: p.idle_time_s,
        idle_before: p.mean_idle_before_wakeup_us,
        freq: p.frequency_mhz,
        energy: p.energy_j,
    }));
    Row {
        key: (p.pid.is_none(), p.pid.unwrap_or(0)),
        values,
    }
}

fn function_row(f: &FunctionRow, i: usize) -> Row {
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

fn short_module(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A column by its key, or by the header the text grid shows (`CPU s`, any case): a user
/// copies what they see.
fn find(by: By, option: &'static str, name: &str) -> Result<&'static Column, UnknownColumn> {
    let cols = columns(by);
    cols.iter()
        .find(|c| c.key == name)
        .or_else(|| {
            cols.iter()
                .find(|c| c.header.eq_ignore_ascii_case(name.trim()))
        })
        .copied()
        .ok_or_else(|| UnknownColumn {
            option,
            name: name.to_string(),
            by,
            valid: cols.iter().map(|c| c.key).collect(),
        })
}

/// The columns the options select; `all_by_default` for CSV.
fn selected(
    opts: &GridOptions,
    all_by_default: bool,
) -> Result<Vec<&'static Column>, UnknownColumn> {
    let mut cols: Vec<&'static Column> = if opts.show.is_empty() {
        columns(opts.by)
            .into_iter()
            .filter(|c| all_by_default || c.default)
            .collect()
    } else if opts.show.iter().any(|s| s == "all") {
        columns(opts.by)
    } else {
        opts.show
            .iter()
            .map(|s| find(opts.by, "--show", s))
            .collect::<Result<_, _>>()?
    };
    for h in &opts.hide {
        let c = find(opts.by, "--hide", h)?;
        cols.retain(|k| k.key != c.key);
    }
    Ok(cols)
}

/// All rows of the grid, sorted; and the sort key used.
fn rows(report: &RecordingReport, opts: &GridOptions) -> Result<Vec<Row>, UnknownColumn> {
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

fn total(col: &Column, rows: &[Row]) -> Value {
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

/// The grid alone: header, rows (sorted, cut to `top`) and a totals row over every row.
pub fn grid(report: &RecordingReport, opts: &GridOptions) -> Result<String, UnknownColumn> {
    let cols = selected(opts, false)?;
    let all = rows(report, opts)?;
    let shown = opts.top.unwrap_or(all.len()).min(all.len());
    let mut t = Table::new(cols.iter().map(|c| c.header));
    for r in &all[..shown] {
        t.row(cols.iter().map(|c| r.get(c.key).text()));
    }
    if let Some(totals) = totals_row(report, &cols, &all, shown) {
        t.row(totals);
    }
    let names: Vec<usize> = cols
        .iter()
        .enumerate()
        .filter(|(_, c)| c.key == "function" || c.key == "stack")
        .map(|(i, _)| i)
        .collect();
    Ok(t.render_fitting(&names, opts.names))
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
                let n = t.unrecorded_wakeups.filter(|&n| n > 0)?;
                Some(format!("tid {} ({}) {n}", t.tid, t.comm))
            })
            .collect(),
        By::Process => report
            .processes
            .iter()
            .filter_map(|p| {
                let n = p.unrecorded_wakeups.filter(|&n| n > 0)?;
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
fn totals_row(
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

/// JSON: the whole report model, pretty-printed (docs/REPORT.md lists the fields).
pub fn json(report: &RecordingReport) -> String {
    serde_json::to_string_pretty(report).expect("the report model serializes")
}

fn opt(v: Option<f64>, digits: usize, unit: &str) -> String {
    match v {
        Some(v) => format!("{}{unit}", sig(v, digits)),
        None => "unavailable".into(),
    }
}

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

/// The system section above the grid, as (label, value) pairs: the text view aligns
/// them, the HTML page puts them in a table whose cells wrap.
pub fn system_items(report: &RecordingReport) -> Vec<(&'static str, String)> {
    let s = &report.system;
    let mut out = Vec::new();
    let line = |out: &mut Vec<(&'static str, String)>, label: &'static str, value: String| {
        out.push((label, value));
    };
    line(&mut out, "target", s.target.clone());
    if let Some(span) = s.recording_span {
        line(&mut out, "span", span.describe().to_string());
    }
    line(
        &mut out,
        "elapsed",
        if s.cpus == 0 {
            format!("{} s", sig(s.elapsed_s, 4))
        } else {
            format!("{} s on {} CPUs", sig(s.elapsed_s, 4), s.cpus)
        },
    );
    line(
        &mut out,
        "utilization",
        match s.utilization_pct {
            Some(u) => format!(
                "{} (busy {} s, idle {} s of CPU time{})",
                pct(u),
                sig(s.busy_s, 4),
                sig(s.idle_s, 4),
                if s.unknown_s > 0.0 {
                    format!(", unknown {} s", sig(s.unknown_s, 4))
                } else {
                    String::new()
                }
            ),
            None => "unavailable (no scheduler events)".into(),
        },
    );
    if let Some(a) = &s.cpu_time_accounts {
        line(&mut out, "threads' CPU time", a.explanation.clone());
    }
    if let Some(p) = &s.perturbation {
        let whole = s
            .tracing_cpu_s
            .map(|t| format!(" (on all CPUs, every process: {} s)", sig(t, 3)))
            .unwrap_or_default();
        let line_text = if p.slowed {
            format!("WARNING: {}{whole}", p.text)
        } else {
            format!("{}{whole}", p.text)
        };
        line(&mut out, "perturbation", line_text);
    }
    line(
        &mut out,
        "idle wake-ups",
        match (s.idle_wakeups, s.idle_wakeups_per_s) {
            (Some(n), Some(rate)) => format!(
                "{n} ({} per s), mean idle before a wake-up {}",
                sig(rate, 4),
                opt(s.mean_idle_per_wakeup_us, 4, " µs")
            ),
            _ => "unavailable (no scheduler trace)".into(),
        },
    );
    if !s.idle_states.is_empty() {
        let states: Vec<String> = s
            .idle_states
            .iter()
            .map(|t| {
                let mut notes = Vec::new();
                match t.mean_idle_reaches_target {
                    Some(true) => notes.push("mean reaches it".to_string()),
                    Some(false) => notes.push("mean does NOT reach it".to_string()),
                    None => {}
                }
                if let Some(p) = t.wakeups_reaching_target_pct {
                    notes.push(format!("{} of idle periods do", pct(p)));
                }
                if notes.is_empty() {
                    format!("{} {} µs", t.name, t.target_residency_us)
                } else {
                    format!(
                        "{} {} µs ({})",
                        t.name,
                        t.target_residency_us,
                        notes.join(", ")
                    )
                }
            })
            .collect();
        line(&mut out, "target residency", states.join(", "));
    }
    line(
        &mut out,
        "idleness efficiency",
        match (
            s.idleness_efficiency_pct,
            &s.deepest_state,
            &s.idleness_efficiency_source,
        ) {
            (Some(e), Some(d), Some(src)) => {
                format!("{} of idle-state time in {d} (deepest; from {src})", pct(e))
            }
            _ => "unavailable".into(),
        },
    );
    line(
        &mut out,
        "frequency",
        match (s.frequency_mhz, &s.frequency_source) {
            (Some(f), Some(src)) => format!(
                "{} MHz mean ({src}){}",
                sig(f, 4),
                s.running_frequency_mhz
                    .map(|r| format!(", {} MHz while threads ran", sig(r, 4)))
                    .unwrap_or_default()
            ),
            _ => match report.unavailable.iter().find(|u| u.figure == "frequency") {
                Some(u) => format!("unavailable: {}", u.reason),
                None => "unavailable".into(),
            },
        },
    );
    let mut energy = match &report.energy.total_j {
        Some(j) => format!("{} J {}", sig(*j, 4), s.energy_provenance.label()),
        None => s.energy_provenance.label(),
    };
    if s.energy_domains.len() > 1 {
        let d: Vec<String> = s
            .energy_domains
            .iter()
            .map(|d| format!("{} {} J", d.name, sig(d.energy_j, 4)))
            .collect();
        let _ = write!(energy, "; {}", d.join(", "));
    }
    line(&mut out, "energy", energy);
    line(
        &mut out,
        "wake-ups by cause",
        match (&s.wakeups_received, s.migrations) {
            (Some(w), Some(m)) => {
                let mut line = format!(
                    "thread {}, timer {}, irq {}, softirq {}, ipi/idle {}; migrations {m}",
                    w.thread, w.timer, w.irq, w.softirq, w.ipi
                );
                if s.unrecorded_wakeups > 0 {
                    line += &format!(
                        "; {} more not recorded, causes unknown (the CPU notes below say why)",
                        s.unrecorded_wakeups
                    );
                }
                line
            }
            _ => "unavailable (no scheduler trace)".into(),
        },
    );
    // "cpu0 12, cpu1 3": a per-CPU count, for the CPUs where it is not zero.
    let per_cpu = |count: fn(&CpuReport) -> u64| -> String {
        let parts: Vec<String> = report
            .cpus
            .iter()
            .filter(|c| count(c) > 0)
            .map(|c| format!("cpu{} {}", c.cpu, count(c)))
            .collect();
        parts.join(", ")
    };
    if s.lost_records > 0 {
        line(
            &mut out,
            "lost records",
            format!("{} ({})", s.lost_records, per_cpu(|c| c.lost_records)),
        );
    }
    if s.inferred_switch_ins > 0 {
        let per = per_cpu(|c| c.inferred_switch_ins);
        line(
            &mut out,
            "inferred switch-ins",
            format!(
                "{} switch-ins inferred (kernel did not record them): {per}",
                s.inferred_switch_ins,
            ),
        );
    }
    for e in &s.unavailable_events {
        line(
            &mut out,
            "event not recorded",
            format!("{}: {}", e.event, e.reason),
        );
    }
    out
}

/// The system section above the grid.
pub fn system(report: &RecordingReport) -> String {
    let mut out = String::new();
    for (label, value) in system_items(report) {
        let _ = writeln!(out, "{label:<22} {value}");
    }
    out
}

/// The per-CPU figures: the CPU table and the idle-residency table, each with the notes
/// that say why a cell reads n/a. The text view prints them in order; the HTML page
/// makes tables and paragraphs of them.
pub struct CpuTables {
    pub cpus: Table,
    pub cpu_notes: Vec<String>,
    /// Empty when no CPU has idle states.
    pub residency: Table,
    pub residency_notes: Vec<String>,
}

/// The heading of the idle-residency table.
pub const RESIDENCY_HEADING: &str =
    "idle residency (trace: power:cpu_idle; sysfs: cpuidle usage/time deltas)";

/// `None` for a reduced recording, which has no per-CPU figures.
pub fn cpu_tables(report: &RecordingReport) -> Option<CpuTables> {
    if report.cpus.is_empty() {
        return None;
    }
    let mut t = Table::new([
        "cpu",
        "util",
        "busy s",
        "idle s",
        "idle wake-ups",
        "idle before µs",
        "MHz",
        "inferred",
        "lost",
    ]);
    // An unavailable figure reads "n/a", with the reason under the table: never a blank
    // a user could take for zero or for a rendering fault.
    let na = || NOT_AVAILABLE.to_string();
    for c in &report.cpus {
        t.row([
            c.cpu.to_string(),
            c.utilization_pct.map(pct).unwrap_or_else(na),
            sig(c.busy_s, 4),
            sig(c.idle_s, 4),
            c.idle_wakeups.map(|n| n.to_string()).unwrap_or_else(na),
            c.mean_idle_per_wakeup_us
                .map(|v| sig(v, 4))
                .unwrap_or_else(na),
            c.frequency_mhz.map(|v| sig(v, 4)).unwrap_or_else(na),
            c.inferred_switch_ins.to_string(),
            c.lost_records.to_string(),
        ]);
    }
    let mut cpu_notes = Vec::new();
    if report.cpus.iter().any(|c| c.frequency_mhz.is_none()) {
        let reason = report
            .unavailable
            .iter()
            .find(|u| u.figure == "frequency")
            .map(|u| u.reason.as_str())
            .unwrap_or("no frequency records for these CPUs");
        cpu_notes.push(format!("MHz {NOT_AVAILABLE}: {reason}"));
    }
    for c in &report.cpus {
        if let Some(reason) = &c.wakeups_trace_incomplete {
            cpu_notes.push(format!("cpu{} wake-ups: {reason}", c.cpu));
        }
    }
    if report
        .cpus
        .iter()
        .any(|c| c.mean_idle_per_wakeup_us.is_none())
    {
        cpu_notes.push(format!(
            "idle before µs {NOT_AVAILABLE}: no idle wake-up on that CPU in the recording"
        ));
    }
    let mut r = Table::new([
        "cpu",
        "state",
        "entries",
        "time s",
        "sysfs entries",
        "sysfs time s",
        "time diff",
    ]);
    for c in &report.cpus {
        for s in &c.idle_states {
            r.row([
                c.cpu.to_string(),
                s.name.clone(),
                s.entries.map(|v| v.to_string()).unwrap_or_else(na),
                s.time_s.map(|v| sig(v, 4)).unwrap_or_else(na),
                s.sysfs_entries.map(|v| v.to_string()).unwrap_or_else(na),
                s.sysfs_time_s.map(|v| sig(v, 4)).unwrap_or_else(na),
                s.time_difference_pct.map(pct).unwrap_or_else(na),
            ]);
        }
    }
    let mut residency_notes = Vec::new();
    if !r.is_empty() {
        for c in &report.cpus {
            if let Some(reason) = &c.idle_trace_unavailable {
                residency_notes.push(format!("cpu{} trace {NOT_AVAILABLE}: {reason}", c.cpu));
            }
        }
        if let Some(u) = report
            .unavailable
            .iter()
            .find(|u| u.figure == "idle residency from cpuidle sysfs")
        {
            residency_notes.push(format!("sysfs {NOT_AVAILABLE}: {}", u.reason));
        }
    }
    Some(CpuTables {
        cpus: t,
        cpu_notes,
        residency: r,
        residency_notes,
    })
}

/// Per-CPU utilization and idle residency, trace and sysfs side by side.
pub fn cpus(report: &RecordingReport) -> String {
    // A reduced recording has no per-CPU figures: no table rather than an empty one.
    let Some(t) = cpu_tables(report) else {
        return String::new();
    };
    let mut out = t.cpus.render();
    for note in &t.cpu_notes {
        let _ = writeln!(out, "  {note}");
    }
    if !t.residency.is_empty() {
        let _ = writeln!(out, "\n{RESIDENCY_HEADING}");
        out.push_str(&t.residency.render());
        for note in &t.residency_notes {
            let _ = writeln!(out, "  {note}");
        }
    }
    out
}

/// Thread balance of multi-threaded processes.
pub fn balance(report: &RecordingReport) -> String {
    let mut out = String::new();
    for b in &report.balance {
        let _ = writeln!(
            out,
            "{} (pid {}): {} threads, busy max {} s / mean {} s = imbalance {}, effective parallelism {}",
            b.comm,
            b.pid,
            b.threads.len(),
            sig(b.max_busy_s, 4),
            sig(b.mean_busy_s, 4),
            b.imbalance.map(|i| sig(i, 3)).unwrap_or_else(|| "-".into()),
            b.effective_parallelism
                .map(|p| sig(p, 3))
                .unwrap_or_else(|| "unavailable".into()),
        );
        let total: f64 = b.parallelism.iter().map(|p| p.time_s).sum();
        if total > 0.0 {
            let bins: Vec<String> = b
                .parallelism
                .iter()
                .map(|p| format!("{}: {}", p.threads_running, pct(p.time_s / total * 100.0)))
                .collect();
            let _ = writeln!(out, "  time with N threads running  {}", bins.join("  "));
        }
    }
    out
}

/// The energy split and its method, below the grid.
pub fn energy(report: &RecordingReport) -> String {
    let e = &report.energy;
    let mut out = String::new();
    if let (Some(total), Some(idle), Some(other), Some(target)) =
        (e.total_j, e.idle_j, e.other_j, e.target_j)
    {
        let _ = writeln!(
            out,
            "energy: total {} J = idle/baseline {} J + other processes {} J + rows above {} J  [{}]",
            sig(total, 4),
            sig(idle, 4),
            sig(other, 4),
            sig(target, 4),
            e.provenance.label()
        );
    }
    let _ = writeln!(out, "method: {}", e.method);
    if let Some(why) = e.provenance.chosen_because() {
        let _ = writeln!(out, "model: {why}");
    }
    out
}

/// Wake-up causes shown in the text view (JSON has them all).
pub const WAKEUP_CAUSES_SHOWN: usize = 10;

/// The top wake-up causes: idle exits per second by cause, and the period of timers.
pub fn wakeup_causes(report: &RecordingReport, names: NameFit) -> String {
    let Some((t, more)) = wakeup_causes_table(report) else {
        return String::new();
    };
    // The cause column names functions.
    let cause: Vec<usize> = t
        .headers()
        .iter()
        .position(|h| h == "cause")
        .into_iter()
        .collect();
    let mut out = t.render_fitting(&cause, names);
    if more > 0 {
        let _ = writeln!(out, "({more} more in --json)");
    }
    out
}

/// The wake-up causes shown (the first [`WAKEUP_CAUSES_SHOWN`]) and how many more there
/// are; `None` without any.
pub fn wakeup_causes_table(report: &RecordingReport) -> Option<(Table, usize)> {
    if report.wakeup_causes.is_empty() {
        return None;
    }
    let mut t = Table::new([
        "kind",
        "idle exits",
        "per s",
        "cause",
        "thread",
        "expiries/s",
        "period µs",
        "periodic",
        "coalescible",
    ]);
    let yes_no = |b: Option<bool>| match b {
        Some(true) => "yes".to_string(),
        Some(false) => "no".to_string(),
        None => String::new(),
    };
    for c in report.wakeup_causes.iter().take(WAKEUP_CAUSES_SHOWN) {
        let cause = match (&c.function, &c.irq, &c.timer_function) {
            (Some(f), _, _) => f.clone(),
            (None, Some(irq), _) => irq.clone(),
            (None, None, Some(addr)) => match &c.timer_function_name {
                Some(name) => format!("{name} (kernel)"),
                None => format!("{addr} (kernel, unnamed)"),
            },
            _ => String::new(),
        };
        let thread = match (c.tid(), &c.comm) {
            // The kernel's per-CPU idle task (swapper) has tid 0 and no name to look up.
            (Some(0), _) => "idle task (0)".to_string(),
            (Some(tid), Some(comm)) => format!("{comm} ({tid})"),
            (Some(tid), None) => tid.to_string(),
            _ => String::new(),
        };
        t.row([
            c.kind.clone(),
            c.count.to_string(),
            sig(c.per_s, 4),
            cause,
            thread,
            c.expiries_per_s.map(|v| sig(v, 4)).unwrap_or_default(),
            c.period_us.map(|v| sig(v, 4)).unwrap_or_default(),
            yes_no(c.periodic),
            yes_no(c.coalescible),
        ]);
    }
    let more = report
        .wakeup_causes
        .len()
        .saturating_sub(WAKEUP_CAUSES_SHOWN);
    Some((t, more))
}

/// The advice, each with its evidence and suggestion, and what it was judged against.
pub fn advice(report: &RecordingReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "judged against: {}", advice_judged_against(report));
    if report.advice.is_empty() {
        let _ = writeln!(out, "no rule fired");
    }
    for a in &report.advice {
        let _ = writeln!(out, "[{}] {}", a.rule, a.evidence);
        let _ = writeln!(out, "  → {}", a.suggestion);
    }
    out
}

/// The idle states the advice was judged against, or why none.
pub fn advice_judged_against(report: &RecordingReport) -> &str {
    report
        .advice_judged_against
        .as_deref()
        .unwrap_or("no idle states (this machine declares none; give --target server, client or a file) — short-sleeps not judged")
}

/// Everything that could not be computed, with the reason and the fix.
pub fn unavailable(report: &RecordingReport) -> String {
    let mut out = String::new();
    for u in &report.unavailable {
        let _ = writeln!(out, "unavailable: {}: {}", u.figure, u.reason);
        if let Some(fix) = &u.fix {
            let _ = writeln!(out, "  fix: {fix}");
        }
    }
    out
}

/// The terminal view: system, CPUs, the grid with its totals row, thread balance, the
/// energy split with its method, and what is unavailable.
pub fn text(report: &RecordingReport, opts: &GridOptions) -> Result<String, UnknownColumn> {
    let grid = grid(report, opts)?;
    let mut out = system(report);
    out.push('\n');
    out.push_str(&cpus(report));
    out.push_str(&format!("\nby {}\n", opts.by.name()));
    out.push_str(&grid);
    for note in grid_notes(report, opts.by) {
        out.push_str(&format!("note: {note}\n"));
    }
    let b = balance(report);
    if !b.is_empty() {
        out.push_str("\nthread balance\n");
        out.push_str(&b);
    }
    let w = wakeup_causes(report, opts.names);
    if !w.is_empty() {
        out.push_str("\nwake-up causes (idle exits; timers also by expiries)\n");
        out.push_str(&w);
    }
    out.push('\n');
    out.push_str(&energy(report));
    if let Some(battery) = &report.battery {
        out.push_str(&crate::battery::text(
            battery,
            crate::battery::Unit::Recording,
        ));
    }
    if !report.cpus.is_empty() {
        out.push_str("\nadvice\n");
        out.push_str(&advice(report));
    }
    let u = unavailable(report);
    if !u.is_empty() {
        out.push('\n');
        out.push_str(&u);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::provenance::Provenance;
    use powerlens_core::sched::event::{Event, EventKind, InterruptKind, SwitchedOut, IDLE_TID};
    use powerlens_core::sched::report::{
        build, EnergyInput, IdleStateInfo, RecordingContext, SysfsIdle, ThreadInfo,
    };

    const MS: u64 = 1_000_000;

    fn switch(t: u64, cpu: u32, prev: u32, how: SwitchedOut, next: u32) -> Event {
        Event {
            time_ns: t * MS,
            cpu,
            kind: EventKind::Switch { prev, how, next },
        }
    }

    fn ev(t: u64, cpu: u32, kind: EventKind) -> Event {
        Event {
            time_ns: t * MS,
            cpu,
            kind,
        }
    }

    fn wakeup(t: u64, cpu: u32, tid: u32) -> Event {
        ev(
            t,
            cpu,
            EventKind::Wakeup {
                tid,
                target_cpu: cpu,
                new_thread: false,
            },
        )
    }

    /// Process 100 (solver: 100, 101) and process 200 (logger: 200) on 2 CPUs, 100 ms.
    /// cpu0: 100 runs 0..60, preempted by 200 (60..70), 100 again 70..80, then idle.
    /// cpu1: idle until 101 is woken by 100 at 10 (switch at 12), 101 runs 12..50, blocks;
    /// a timer wakes 200 at 90 on cpu1, which runs 90..100. The switch-in of 101 is lost.
    fn stream() -> Vec<Event> {
        use SwitchedOut::*;
        vec![
            switch(0, 0, IDLE_TID, Preempted, 100),
            switch(0, 1, 200, Blocked, IDLE_TID),
            wakeup(10, 0, 101),
            // (lost: switch idle → 101 on cpu1 at 12)
            switch(50, 1, 101, Blocked, IDLE_TID),
            wakeup(59, 0, 200),
            switch(60, 0, 100, Preempted, 200),
            switch(70, 0, 200, Blocked, 100),
            switch(80, 0, 100, Blocked, IDLE_TID),
            ev(
                89,
                1,
                EventKind::InterruptEnter(InterruptKind::Timer {
                    timer: 0,
                    function: 0,
                }),
            ),
            wakeup(89, 1, 200),
            ev(89, 1, EventKind::InterruptExit),
            switch(90, 1, IDLE_TID, Preempted, 200),
        ]
    }

    fn context(energy: bool) -> RecordingContext {
        let info = |tid, pid, comm: &str| ThreadInfo {
            tid,
            pid,
            comm: comm.into(),
        };
        let sysfs = |cpu, index, entries, ms: u64| SysfsIdle {
            cpu,
            index,
            entries,
            time_ns: ms * MS,
        };
        RecordingContext {
            threads: vec![
                info(100, 100, "solver"),
                info(101, 100, "solver-w1"),
                info(200, 200, "logger"),
            ],
            target_pids: Some([100].into_iter().collect()),
            idle_states: Ok(vec![
                IdleStateInfo {
                    index: 0,
                    name: "POLL".into(),
                    latency_us: 0,
                    target_residency_us: 0,
                },
                IdleStateInfo {
                    index: 1,
                    name: "C1".into(),
                    latency_us: 2,
                    target_residency_us: 20_000,
                },
            ]),
            sysfs_idle: Ok(vec![
                sysfs(0, 0, 2, 5),
                sysfs(0, 1, 1, 15),
                sysfs(1, 0, 3, 10),
                sysfs(1, 1, 2, 50),
            ]),
            energy: if energy {
                Ok(EnergyInput {
                    total_j: 3.0,
                    domains: vec![("package-0".into(), 3.0), ("package-0/core".into(), 2.0)],
                    provenance: Provenance::Measured {
                        source: "fake-meter".into(),
                    },
                    idle_power_w: 10.0,
                })
            } else {
                Err(Provenance::Unavailable {
                    reason: "no energy source on this machine".into(),
                    fix: Some("powerlens record --meter CMD".into()),
                })
            },
            frequency_samples: Vec::new(),
            lost_records: vec![(0, 0), (1, 2)],
            unavailable_events: Vec::new(),
            span: None,
            tracing_cost: Err("not measured in this fixture".into()),
        }
    }

    fn report(energy: bool) -> RecordingReport {
        let ctx = context(energy);
        let mut a = ctx.analysis();
        for e in stream() {
            a.feed(&e);
        }
        build(&a.finish(100 * MS), &ctx)
    }

    fn opts(
        by: By,
        sort: Option<&str>,
        top: Option<usize>,
        show: &[&str],
        hide: &[&str],
    ) -> GridOptions {
        GridOptions {
            by,
            sort: sort.map(str::to_string),
            top,
            show: show.iter().map(|s| s.to_string()).collect(),
            hide: hide.iter().map(|s| s.to_string()).collect(),
            names: NameFit::Full,
        }
    }

    /// The recording's measured cost per event with the fixture stream: the target
    /// (pid 100) has 3 switches (100 at 60 and 80 ms, 101 at 50 ms) and 2 wake-ups (100's,
    /// at 10 and 59 ms) in its threads' context; the other events are the logger's or the
    /// idle task's.
    fn traced_report(switch_ns: f64, waking_ns: f64) -> RecordingReport {
        use powerlens_core::sched::tracing_cost::{EventCosts, SWITCH, WAKING};
        let mut ctx = context(true);
        ctx.tracing_cost = Ok(EventCosts {
            event_cost_ns: [
                (SWITCH.to_string(), switch_ns),
                (WAKING.to_string(), waking_ns),
            ]
            .into_iter()
            .collect(),
            stacks: true,
            ..Default::default()
        });
        let mut a = ctx.analysis();
        for e in stream() {
            a.feed(&e);
        }
        build(&a.finish(100 * MS), &ctx)
    }

    /// Issue 28: the perturbation line, past the 10% threshold and below it, in text, JSON
    /// and HTML, with the target's tracing time computed by hand from the stream.
    #[test]
    fn the_perturbation_line_warns_past_its_threshold_in_text_json_and_html() {
        // 3 × 10 ms + 2 × 5 ms of the target's CPU time: past 10% of it.
        let heavy = traced_report(10e6, 5e6);
        let p = heavy.system.perturbation.as_ref().unwrap();
        assert!((p.tracing_cpu_s - 0.040).abs() < 1e-12, "{p:?}");
        assert!(p.slowed, "{p:?}");
        let text = system(&heavy);
        assert!(
            text.contains("WARNING: tracing cost the target an estimated 0.040 s of its"),
            "{text}"
        );
        assert!(
            text.contains("describe a run slowed by the tracing"),
            "{text}"
        );
        assert!(text.contains("--no-stacks"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&json(&heavy)).unwrap();
        assert_eq!(v["system"]["perturbation"]["slowed"], true);
        assert_eq!(v["system"]["tracing_event_cost_ns"]["sched_switch"], 10e6);
        // The whole recording: also the logger's 2 switches (0 and 70 ms) and the idle
        // task's 2 switches and wake-up.
        let whole = v["system"]["tracing_cpu_s"].as_f64().unwrap();
        assert!(
            (whole - (7.0 * 10e6 + 3.0 * 5e6) / 1e9).abs() < 1e-12,
            "{whole}"
        );
        let rows = v["threads"].as_array().unwrap();
        let row = |tid: u64| rows.iter().find(|r| r["tid"] == tid).unwrap();
        assert!((row(100)["tracing_cpu_s"].as_f64().unwrap() - 0.030).abs() < 1e-12);
        assert!((row(101)["tracing_cpu_s"].as_f64().unwrap() - 0.010).abs() < 1e-12);
        // Its energy is the row's energy in the proportion of its CPU time.
        let r100 = row(100);
        let share = r100["tracing_cpu_s"].as_f64().unwrap() / r100["cpu_time_s"].as_f64().unwrap();
        let expected = r100["energy_j"].as_f64().unwrap() * share;
        assert!((r100["tracing_energy_j"].as_f64().unwrap() - expected).abs() < 1e-12);
        assert!(v["system"]["tracing_provenance"]
            .as_str()
            .unwrap()
            .starts_with("estimated: "));
        let timeline = crate::html::TimelineBuilder::new(0, 100 * MS, &[], 10).finish();
        let html = crate::html::page(&crate::html::HtmlInput {
            title: "t",
            report: &heavy,
            grid: &opts(By::Thread, None, None, &[], &[]),
            counters: &[],
            counters_missing: "no meter",
            timeline: &timeline,
            frequency_samples: &[],
        })
        .unwrap();
        assert!(
            html.contains("Perturbation — WARNING: tracing cost the target an estimated 0.040 s"),
            "{html}"
        );

        // 3 × 10 µs: well under 10%: said, without a warning.
        let light = traced_report(10e3, 0.0);
        let p = light.system.perturbation.as_ref().unwrap();
        assert!(!p.slowed, "{p:?}");
        let text = system(&light);
        assert!(
            text.contains("tracing cost the target an estimated 0.000 s"),
            "{text}"
        );
        assert!(!text.contains("WARNING"), "{text}");

        // A recording without measured costs says the figure is unavailable, not zero.
        let old = report(true);
        assert!(old.system.perturbation.is_none());
        assert!(old
            .unavailable
            .iter()
            .any(|u| u.figure.starts_with("tracing cost")));
    }

    /// Issue 17 point 1: an estimate by the model chosen for the machine's class says which
    /// model, for which class and why, in the energy section (text and the HTML page's
    /// paragraphs) and in the JSON provenance.
    #[test]
    fn an_estimate_names_its_machine_class_and_why() {
        let model = powerlens_core::model::PowerModel::for_machine(
            &powerlens_core::model::class::MachineFacts {
                cpu_model: Some("AMD EPYC 7B13 64-Core Processor".into()),
                logical_cpus: 128,
                ..Default::default()
            },
        );
        let mut ctx = context(false);
        ctx.energy = Ok(EnergyInput {
            total_j: model.energy_j(0.1, 0.11),
            domains: vec![("system".into(), model.energy_j(0.1, 0.11))],
            provenance: model.provenance(),
            idle_power_w: model.idle_w,
        });
        let mut a = ctx.analysis();
        for e in stream() {
            a.feed(&e);
        }
        let r = build(&a.finish(100 * MS), &ctx);
        let text = energy(&r);
        assert!(
            text.contains("[estimated (server-vcpu-linear)]")
                && text.contains("model: server-vcpu-linear is the power model for a server machine, chosen because AMD EPYC 7B13 64-Core Processor is a server part (EPYC)\n"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
        let p = &v["energy"]["provenance"];
        assert_eq!(p["machine_class"], "server", "{p}");
        assert_eq!(
            p["machine_class_reason"],
            "AMD EPYC 7B13 64-Core Processor is a server part (EPYC)"
        );
        // A measured figure has no model to explain.
        assert!(!energy(&report(true)).contains("model:"));
    }

    #[test]
    fn default_thread_grid_snapshot() {
        let g = grid(&report(true), &GridOptions::default()).unwrap();
        assert_eq!(
            g,
            "\
tid  pid  command      CPU s  sync sw  preempt sw   wait s  inactive s  migr  woken  woke others  idle wake-ups  idle before µs  energy J
100  100  solver     0.07000        1           1  0.02000     0.01000     0      0            2              1               0     1.077
101  100  solver-w1  0.04000        1           0  0.05000           0     0      1            0              1           10000    0.6154
          total       0.1100        2           1  0.07000     0.01000     0      1            2              2            5000     1.692
"
        );
    }

    #[test]
    fn sort_top_and_show() {
        let r = report(true);
        let g = grid(
            &r,
            &opts(
                By::Thread,
                Some("wait_time_s"),
                Some(1),
                &["tid", "comm", "cpu_time_s", "wait_time_s", "energy_j"],
                &[],
            ),
        )
        .unwrap();
        assert_eq!(
            g,
            "\
tid  command         CPU s   wait s  energy J
101  solver-w1     0.04000  0.05000    0.6154
     total, all 2   0.1100  0.07000     1.692
"
        );
        // Text columns sort ascending, numbers descending.
        let by_comm = grid(&r, &opts(By::Thread, Some("comm"), None, &["comm"], &[])).unwrap();
        assert_eq!(by_comm, "command\nsolver\nsolver-w1\ntotal\n");
        let by_cpu = grid(&r, &opts(By::Thread, None, None, &["tid"], &[])).unwrap();
        assert_eq!(by_cpu, "tid\n100\n101\ntotal\n");
        let all = grid(&r, &opts(By::Thread, None, None, &["all"], &["pid"])).unwrap();
        assert!(all.starts_with("tid  command"), "{all}");
        assert!(all.contains("by timer") && all.contains("MHz"), "{all}");
    }

    #[test]
    fn process_grid_with_hidden_columns() {
        let g = grid(
            &report(true),
            &opts(
                By::Process,
                None,
                None,
                &[],
                &[
                    "sync_switches",
                    "preempt_switches",
                    "wait_time_s",
                    "inactive_time_s",
                    "migrations",
                    "wakeups_received_total",
                    "wakeups_caused",
                ],
            ),
        )
        .unwrap();
        assert_eq!(
            g,
            "\
pid  command  threads   CPU s  idle wake-ups  idle before µs  parallelism  energy J
100  solver         2  0.1100              2            5000        1.571     1.692
     total          2  0.1100              2            5000                  1.692
"
        );
    }

    #[test]
    fn unknown_columns_list_the_valid_ones() {
        let r = report(true);
        let e = grid(&r, &opts(By::Thread, Some("energy"), None, &[], &[])).unwrap_err();
        assert_eq!((e.option, e.name.as_str()), ("--sort", "energy"));
        let msg = e.to_string();
        assert!(
            msg.starts_with("--sort: unknown column 'energy' for the thread grid; valid columns: tid, pid, comm, cpu_time_s,"),
            "{msg}"
        );
        assert!(msg.contains("energy_j (see --list)"), "{msg}");
        // A process-only column in the thread grid, and the reverse.
        let e = grid(&r, &opts(By::Thread, None, None, &["threads"], &[])).unwrap_err();
        assert_eq!(e.option, "--show");
        let e = csv(&r, &opts(By::Process, None, None, &[], &["tid"])).unwrap_err();
        assert_eq!(e.option, "--hide");
        assert!(!e.valid.contains(&"tid") && e.valid.contains(&"effective_parallelism"));
    }

    /// Issue 17 point 9: the text headers ("CPU s", "sync sw") are accepted as well as
    /// the keys, and `--list` shows both.
    #[test]
    fn columns_by_their_header_too() {
        let r = report(true);
        let by_header = grid(
            &r,
            &opts(By::Thread, Some("wait s"), None, &["tid", "CPU S"], &[]),
        );
        let by_key = grid(
            &r,
            &opts(
                By::Thread,
                Some("wait_time_s"),
                None,
                &["tid", "cpu_time_s"],
                &[],
            ),
        );
        assert_eq!(by_header.unwrap(), by_key.unwrap());
        let l = list_columns(By::Thread);
        assert!(l.contains("the column key or the header"), "{l}");
        assert!(
            l.lines()
                .any(|line| line.starts_with("sync_switches") && line.contains("sync sw")),
            "{l}"
        );
    }

    #[test]
    fn list_describes_every_column() {
        let l = list_columns(By::Thread);
        for c in columns(By::Thread) {
            assert!(
                l.lines()
                    .any(|line| line.starts_with(c.key) && line.contains(c.description)),
                "{}",
                c.key
            );
        }
        assert!(
            l.contains("wakeups_timer               by timer        hidden"),
            "{l}"
        );
        assert!(!l.contains("effective_parallelism"));
        assert!(list_columns(By::Process).contains("effective_parallelism"));
    }

    #[test]
    fn csv_one_line_per_row() {
        let r = report(true);
        let c = csv(
            &r,
            &opts(
                By::Thread,
                None,
                None,
                &[
                    "tid",
                    "pid",
                    "comm",
                    "cpu_time_s",
                    "wakeups_thread",
                    "mean_idle_before_wakeup_us",
                    "frequency_mhz",
                    "energy_j",
                ],
                &[],
            ),
        )
        .unwrap();
        assert_eq!(
            c,
            "\
tid,pid,comm,cpu_time_s,wakeups_thread,mean_idle_before_wakeup_us,frequency_mhz,energy_j
100,100,solver,0.07,0,0,,1.0769230769230769
101,100,solver-w1,0.04,1,10000,,0.6153846153846154
"
        );
        // Default CSV: every column of the grid.
        let all = csv(&r, &GridOptions::default()).unwrap();
        let header: Vec<&str> = all.lines().next().unwrap().split(',').collect();
        assert_eq!(
            header,
            columns(By::Thread)
                .iter()
                .map(|c| c.key)
                .collect::<Vec<_>>()
        );
        assert_eq!(all.lines().count(), 3);
        let p = csv(&r, &opts(By::Process, None, None, &[], &[])).unwrap();
        assert!(
            p.lines().nth(1).unwrap().starts_with("100,solver,2,0.11"),
            "{p}"
        );
    }

    #[test]
    fn json_contract() {
        let r = report(true);
        let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(v["system"]["elapsed_s"], 0.1);
        let t = &v["threads"][1];
        for key in [
            "tid",
            "pid",
            "comm",
            "cpu_time_s",
            "sync_switches",
            "preempt_switches",
            "wait_time_s",
            "inactive_time_s",
            "migrations",
            "idle_wakeups",
            "energy_j",
            "wakeups_caused",
            "mean_idle_before_wakeup_us",
        ] {
            assert!(!t[key].is_null(), "{key} in {t}");
        }
        assert_eq!(t["wakeups_received"]["thread"], 1);
        assert_eq!(t["idle_time_s"], 0.01);
        assert_eq!(
            (t["tid"].as_u64(), t["comm"].as_str()),
            (Some(101), Some("solver-w1"))
        );
        let c1 = &v["cpus"][1];
        assert_eq!(c1["cpu"], 1);
        let state = &c1["idle_states"][1];
        assert_eq!(state["name"], "C1");
        assert!(state["entries"].is_null() && state["time_s"].is_null());
        assert_eq!(
            (
                state["sysfs_entries"].as_u64(),
                state["sysfs_time_s"].as_f64()
            ),
            (Some(2), Some(0.05))
        );
        let e = &v["energy"];
        assert_eq!(e["provenance"]["kind"], "measured");
        let rows: f64 = v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["energy_j"].as_f64().unwrap())
            .sum();
        let total = e["total_j"].as_f64().unwrap();
        let sum = e["idle_j"].as_f64().unwrap() + e["other_j"].as_f64().unwrap() + rows;
        assert!((sum - total).abs() <= 1e-9 * total, "{sum} vs {total}");
        assert_eq!(v["system"]["inferred_switch_ins"], 1);
        // Unavailable energy: nulls and the reason, never zeros.
        let v: serde_json::Value = serde_json::from_str(&json(&report(false))).unwrap();
        assert!(v["energy"]["total_j"].is_null() && v["threads"][0]["energy_j"].is_null());
        assert_eq!(v["energy"]["provenance"]["kind"], "unavailable");
        assert!(v["unavailable"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["figure"] == "energy" && u["fix"] == "powerlens record --meter CMD"));
    }

    /// Issue 17 point 9: a kernel timer reads by its name, or says it is an unnamed kernel
    /// address; the idle task is named, not "0".
    #[test]
    fn wakeup_causes_name_kernel_timers_and_the_idle_task() {
        use powerlens_core::sched::wakeups::WakeupCause;
        let timer = |addr: &str, name: Option<&str>, tid: Option<u32>| WakeupCause {
            kind: "timer".into(),
            count: 5,
            per_s: 5.0,
            armed_by_tid: tid,
            timer_function: Some(addr.into()),
            timer_function_name: name.map(str::to_string),
            ..WakeupCause::default()
        };
        let mut r = report(true);
        r.wakeup_causes = vec![
            timer("0xffffffff814332e0", Some("tick_nohz_handler"), None),
            timer("0xffffffff81000010", None, Some(0)),
        ];
        let t = wakeup_causes(&r, NameFit::Full);
        assert!(t.contains("tick_nohz_handler (kernel)"), "{t}");
        assert!(!t.contains("0xffffffff814332e0"), "{t}");
        assert!(t.contains("0xffffffff81000010 (kernel, unnamed)"), "{t}");
        assert!(t.contains("idle task (0)"), "{t}");
    }

    /// Issue 30: a node recording's C++ names made every row of the text grid wrap. The
    /// text cuts them to the width asked for (function grid, wake-up causes); JSON and
    /// CSV keep them whole.
    #[test]
    fn long_names_are_cut_in_text_only() {
        const LONG: &str = "v8::internal::compiler::turboshaft::Assembler<v8::internal::compiler::turboshaft::reducer_list<v8::internal::compiler::turboshaft::MachineLoweringReducer>>::ReduceCall(v8::internal::compiler::turboshaft::OpIndex, v8::internal::compiler::turboshaft::OptionalOpIndex)";
        let cut = crate::names::elide_middle(LONG, 60);
        let mut r = report(true);
        r.functions = vec![powerlens_core::stacks::grid::FunctionRow {
            function: LONG.into(),
            module: "/usr/bin/node".into(),
            stack: None,
            cpu_time_s: 1.0,
            samples: 1000,
            sync_switches: 0,
            preempt_switches: 0,
            wait_time_s: 0.0,
            inactive_time_s: 0.0,
            idle_wakeups: 0,
            mean_idle_before_wakeup_us: None,
            idle_after_s: 0.0,
            idle_states_after: Vec::new(),
            wakeups_caused: 0,
            energy_j: Some(2.0),
        }];
        r.wakeup_causes = vec![powerlens_core::sched::wakeups::WakeupCause {
            kind: "thread".into(),
            count: 5,
            per_s: 5.0,
            function: Some(LONG.into()),
            ..powerlens_core::sched::wakeups::WakeupCause::default()
        }];
        let opts = GridOptions {
            by: By::Function,
            names: NameFit::Cap(60),
            ..GridOptions::default()
        };
        let text = grid(&r, &opts).unwrap();
        assert!(text.contains(&format!("{cut}  node")), "{text}");
        assert!(!text.contains(LONG), "{text}");
        let causes = wakeup_causes(&r, NameFit::Cap(60));
        assert!(causes.contains(&cut) && !causes.contains(LONG), "{causes}");
        assert!(json(&r).contains(LONG));
        assert!(csv(&r, &opts).unwrap().contains(LONG));
        // Without a width, as the HTML page asks: whole.
        let whole = grid(
            &r,
            &GridOptions {
                names: NameFit::Full,
                ..opts
            },
        )
        .unwrap();
        assert!(whole.contains(LONG));
    }

    #[test]
    fn text_view_sections() {
        let t = text(&report(true), &GridOptions::default()).unwrap();
        for needle in [
            "target                 pid 100\n",
            "idle wake-ups          3 (30.00 per s), mean idle before a wake-up 16667 µs\n",
            "target residency       POLL 0 µs (mean reaches it, 100.0% of idle periods do), C1 20000 µs (mean does NOT reach it, 33.3% of idle periods do)\n",
            "idleness efficiency    81.2% of idle-state time in C1 (deepest; from sysfs)\n",
            "inferred switch-ins    1 switch-ins inferred (kernel did not record them): cpu1 1\n",
            "  1  C1         n/a     n/a              2       0.05000        n/a\n",
            "  cpu1 trace n/a: no power:cpu_idle records from cpu1, while cpuidle sysfs counted 5 idle entries",
            "  MHz n/a: no power:cpu_frequency records and no cpufreq samples\n",
            "frequency              unavailable: no power:cpu_frequency records and no cpufreq samples\n",
            "  1  50.0%  0.05000  0.05000              2           25000  n/a         1     2\n",
            "\nby thread\ntid  pid  command",
            "solver (pid 100): 2 threads, busy max 0.07000 s / mean 0.05500 s = imbalance 1.27, effective parallelism 1.57\n",
            "  time with N threads running  0: 30.0%  1: 30.0%  2: 40.0%\n",
            "energy: total 3.000 J = idle/baseline 1.000 J + other processes 0.3077 J + rows above 1.692 J  [measured (fake-meter)]\n",
            "method: idle share = 10.00 W baseline × 0.100 s (capped at the total); the remaining 2.000 J split over threads by CPU time (frequency unknown)\n",
            "unavailable: idle residency from the trace: no power:cpu_idle records on cpu0, cpu1\n",
        ] {
            assert!(t.contains(needle), "missing {needle:?} in\n{t}");
        }
        let t = text(&report(false), &GridOptions::default()).unwrap();
        assert!(
            t.contains("energy                 unavailable (no energy source on this machine)\n"),
            "{t}"
        );
        assert!(
            t.contains("method: no energy attribution: no energy source on this machine\n"),
            "{t}"
        );
        assert!(!t.contains("energy: total"), "{t}");
    }

    #[test]
    fn reduced_recording_shows_blanks_not_zeros() {
        use powerlens_core::sched::analysis::{SchedSummary, ThreadStats};
        let summary = SchedSummary {
            start_ns: 0,
            end_ns: 100 * MS,
            threads: vec![ThreadStats {
                tid: 100,
                pid: Some(100),
                cpu_time_ns: 40 * MS,
                sync_switches: 7,
                preempt_switches: 2,
                ..ThreadStats::default()
            }],
            ..SchedSummary::default()
        };
        let r = build(&summary, &context(true));
        let g = grid(
            &r,
            &opts(
                By::Thread,
                None,
                None,
                &[
                    "tid",
                    "cpu_time_s",
                    "sync_switches",
                    "wait_time_s",
                    "migrations",
                    "idle_wakeups",
                ],
                &[],
            ),
        )
        .unwrap();
        assert_eq!(
            g,
            "\
tid      CPU s  sync sw  wait s  migr  idle wake-ups
100    0.04000        7
total  0.04000        7
"
        );
        let c = csv(
            &r,
            &opts(
                By::Thread,
                None,
                None,
                &["tid", "wait_time_s", "wakeups_timer"],
                &[],
            ),
        )
        .unwrap();
        assert_eq!(c, "tid,wait_time_s,wakeups_timer\n100,,\n");
        let t = text(&r, &GridOptions::default()).unwrap();
        assert!(
            t.contains("idle wake-ups          unavailable (no scheduler trace)\n"),
            "{t}"
        );
        assert!(t.contains("unavailable: wait time, inactive time, migrations, wake-ups, idle wake-ups, idle residency: reduced recording"), "{t}");
        let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
        assert!(v["threads"][0]["wait_time_s"].is_null());
        assert_eq!(v["threads"][0]["sync_switches"], 7);
    }
}
