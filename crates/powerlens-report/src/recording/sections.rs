//! The report's other sections as text: the system figures, the CPUs, the balance, the
//! energy split, the wake-up causes, the advice and what is unavailable; and the whole
//! text report and its JSON.

use std::fmt::Write;

use powerlens_core::sched::report::{CpuReport, RecordingReport};
use powerlens_core::sched::wakeups::WakeupCause;

use super::columns::{GridOptions, UnknownColumn};
use super::grid::{grid, grid_notes};
use crate::names::NameFit;
use crate::table::{sig, Table, NOT_AVAILABLE};

/// JSON: the whole report model, pretty-printed (docs/REPORT.md lists the fields).
pub fn json(report: &RecordingReport) -> String {
    serde_json::to_string_pretty(report).expect("the report model serializes")
}

pub(super) fn opt(v: Option<f64>, digits: usize, unit: &str) -> String {
    match v {
        Some(v) => format!("{}{unit}", sig(v, digits)),
        None => "unavailable".into(),
    }
}

pub(super) fn pct(v: f64) -> String {
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
        // Labelled for what it is, not "beside it": in a whole-system recording the
        // recorder is part of the target.
        if let Some(recorder) = p.recorder_text() {
            line(&mut out, "recorder", recorder);
        }
        if let Some(untraced) = &p.untraced_runs {
            line(&mut out, "untraced", untraced.text.clone());
        }
    }
    if let Some(path) = &s.tracing_path {
        line(&mut out, "tracing path", path.describe());
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
    if let Some(note) = wakeup_causes_held_note(&t) {
        let _ = writeln!(out, "{note}");
    }
    if let Some(line) = instrument_wakeups_line(report) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// What the recorder's own threads woke, left out of the causes: one line, or `None`.
pub fn instrument_wakeups_line(report: &RecordingReport) -> Option<String> {
    let causes = &report.instrument_wakeup_causes;
    if causes.is_empty() {
        return None;
    }
    let exits: u64 = causes.iter().map(|c| c.count).sum();
    let per_s: f64 = causes.iter().map(|c| c.per_s).sum();
    let expiries: u64 = causes.iter().filter_map(|c| c.expiries).sum();
    Some(format!(
        "not shown: powerlens's own threads caused {exits} idle exits ({}/s) and {expiries} timer expiries (the instrument's cost, not the target's; --json: instrument_wakeup_causes)",
        sig(per_s, 3)
    ))
}

/// The column of the causes' held expiries or idle exits, when the stacks were sampled.
const HELD: &str = "held";

/// What the `held` column of [`wakeup_causes_table`]'s table counts, when it has one.
pub fn wakeup_causes_held_note(t: &Table) -> Option<&'static str> {
    t.headers().iter().any(|h| h == HELD).then_some(
        "held: of a timer's expiries (or another cause's idle exits), those whose arming (or wake-up) carried no stack of its own, named by its thread's latest one (sampled stacks: sample and hold)",
    )
}

/// A cause's held expiries (timers) or idle exits (thread, ipi).
fn held(c: &WakeupCause) -> Option<u64> {
    c.held_expiries.or(c.held_idle_exits)
}

/// The wake-up causes shown (the first [`WAKEUP_CAUSES_SHOWN`]) and how many more there
/// are; `None` without any.
pub fn wakeup_causes_table(report: &RecordingReport) -> Option<(Table, usize)> {
    if report.wakeup_causes.is_empty() {
        return None;
    }
    let shown = &report.wakeup_causes[..report.wakeup_causes.len().min(WAKEUP_CAUSES_SHOWN)];
    let with_held = shown.iter().any(|c| held(c).is_some());
    let mut headers = vec!["kind", "idle exits", "per s", "cause"];
    if with_held {
        headers.push(HELD);
    }
    headers.extend([
        "thread",
        "expiries/s",
        "period µs",
        "periodic",
        "coalescible",
    ]);
    let mut t = Table::new(headers);
    let yes_no = |b: Option<bool>| match b {
        Some(true) => "yes".to_string(),
        Some(false) => "no".to_string(),
        None => String::new(),
    };
    for c in shown {
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
        let mut cells = vec![c.kind.clone(), c.count.to_string(), sig(c.per_s, 4), cause];
        if with_held {
            cells.push(held(c).map(|n| n.to_string()).unwrap_or_default());
        }
        cells.extend([
            thread,
            c.expiries_per_s.map(|v| sig(v, 4)).unwrap_or_default(),
            c.period_us.map(|v| sig(v, 4)).unwrap_or_default(),
            yes_no(c.periodic),
            yes_no(c.coalescible),
        ]);
        t.row(cells);
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
        out.push_str(&crate::battery_view::text(
            battery,
            crate::battery_view::Unit::Recording,
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
