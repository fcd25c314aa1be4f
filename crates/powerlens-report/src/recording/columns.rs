//! The grid's column registry: every column a view by thread, process or function can
//! show, named by its JSON key, and the lookups `--sort`, `--show` and `--hide` use.

use std::fmt;

use crate::names::NameFit;
use crate::table::Table;

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
pub(super) const THREAD: u8 = 1;

pub(super) const PROCESS: u8 = 2;

pub(super) const FUNCTION: u8 = 4;

pub(super) const BOTH: u8 = THREAD | PROCESS;

pub(super) const ALL: u8 = THREAD | PROCESS | FUNCTION;

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
    pub(super) total: Total,
    grids: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Total {
    None,
    Sum,
    /// A mean weighted by another column's value.
    WeightedBy(&'static str),
}

pub(super) const fn col(
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
pub(super) const COLUMNS: &[Column] = &[
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
        "user_time_s",
        "user s",
        "of the CPU time, the part in user space (the program's and its libraries' code), split as its cpu-clock samples were",
        true,
        Total::Sum,
        ALL,
    ),
    col(
        "system_time_s",
        "sys s",
        "of the CPU time, the part in the kernel on its behalf (system calls such as fsync, page faults), split as its cpu-clock samples were: samples whose stack starts in the kernel",
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

/// A column by its key, or by the header the text grid shows (`CPU s`, any case): a user
/// copies what they see.
pub(super) fn find(
    by: By,
    option: &'static str,
    name: &str,
) -> Result<&'static Column, UnknownColumn> {
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
pub(super) fn selected(
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
