//! `powerlens report REC --html FILE`: one self-contained HTML page (no network access, no
//! fonts or scripts fetched): the system figures, the sortable grid, inline SVG plots
//! (power and energy over time, per-CPU busy/idle time, idle-state residency and frequency,
//! wake-up causes, a per-thread timeline of running, runnable and blocked time for the top
//! threads) and the energy split. Every string from
//! the system (thread and process names) is HTML-escaped.
//!
//! The timeline is aggregated into a fixed number of time bins per thread, so the page's
//! size does not grow with the recording's length.

use std::collections::HashMap;
use std::fmt::Write;

use powerlens_core::sched::analysis::{Interval, ThreadCharges};
use powerlens_core::sched::event::{Event, EventKind, SwitchedOut, Tid};
use powerlens_core::sched::report::RecordingReport;

use crate::export::Counter;
use crate::page::{Column, Page};
use crate::recording::{self, By, GridOptions, UnknownColumn};
use crate::svg::{self, escape, Panel, Series, XAxis};
use crate::table::sig;

/// Thread states drawn in the timeline.
const RUNNING: usize = 0;
const RUNNABLE: usize = 1;
const BLOCKED: usize = 2;
/// After a lost switch-out, until the thread's next recorded event: the grid counts none
/// of it as running, and neither does the timeline.
const UNKNOWN: usize = 3;
const STATES: usize = 4;
const STATE_NAMES: [&str; STATES] = ["running", "runnable", "blocked", "unknown (events lost)"];
const STATE_COLORS: [&str; STATES] = ["#2ca02c", "#ff7f0e", "#9ecae1", "#d9d9d9"];

/// One thread's row of the timeline: nanoseconds in each state per time bin.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub tid: Tid,
    pub label: String,
    pub bins: Vec<[u64; STATES]>,
}

/// The per-thread timeline of the top threads, over `[start_ns, end_ns]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub start_ns: u64,
    pub end_ns: u64,
    pub lanes: Vec<Lane>,
    /// Per CPU with `Frequency` events: the time-weighted mean MHz of each bin (`None`
    /// before the CPU's first event).
    pub frequency_mhz: Vec<(u32, Vec<Option<f64>>)>,
}

/// Builds the timeline from the scheduler analysis' own intervals (it is the analysis'
/// [`ThreadCharges`] layer, so the lanes agree with the grid, inferences included) and,
/// for frequency, from the events ([`TimelineBuilder::event`]).
pub struct TimelineBuilder {
    start_ns: u64,
    end_ns: u64,
    index: HashMap<Tid, usize>,
    lanes: Vec<Lane>,
    /// Per lane: the end of its last interval (`None` before the first), and whether the
    /// thread exited (after which nothing is drawn).
    seen_until: Vec<Option<u64>>,
    exited: Vec<bool>,
    bins: usize,
    /// Per CPU: the current frequency (kHz) and since when.
    freq: Vec<Option<(u64, u64)>>,
    /// Per CPU and bin: Σ kHz·ns and Σ ns.
    freq_bins: Vec<Vec<(f64, u64)>>,
}

/// Calls `f(bin, ns)` for the part of `[from, to)` in each of `n` bins over `[start, end)`.
fn spread(start: u64, end: u64, n: usize, from: u64, to: u64, mut f: impl FnMut(usize, u64)) {
    let from = from.max(start);
    let to = to.min(end);
    if to <= from || n == 0 {
        return;
    }
    let span = (end - start) as u128;
    let bins = n as u128;
    let bin_of = |t: u64| (((t - start) as u128 * bins / span) as usize).min(n - 1);
    let edge = |b: usize| start + ((b as u128 * span).div_ceil(bins)) as u64;
    let mut t = from;
    while t < to {
        let b = bin_of(t);
        let e = edge(b + 1).min(to).max(t + 1);
        f(b, e - t);
        t = e;
    }
}

impl TimelineBuilder {
    /// `threads`: (tid, label) of the threads to draw, in drawing order; `bins`: time bins.
    pub fn new(start_ns: u64, end_ns: u64, threads: &[(Tid, String)], bins: usize) -> Self {
        Self {
            start_ns,
            end_ns: end_ns.max(start_ns + 1),
            index: threads
                .iter()
                .enumerate()
                .map(|(i, (t, _))| (*t, i))
                .collect(),
            lanes: threads
                .iter()
                .map(|(tid, label)| Lane {
                    tid: *tid,
                    label: label.clone(),
                    bins: vec![[0; STATES]; bins.max(1)],
                })
                .collect(),
            seen_until: vec![None; threads.len()],
            exited: vec![false; threads.len()],
            bins: bins.max(1),
            freq: Vec::new(),
            freq_bins: Vec::new(),
        }
    }

    fn close_frequency(&mut self, ci: usize, t: u64) {
        if let Some((khz, since)) = self.freq[ci] {
            let bins = &mut self.freq_bins[ci];
            spread(self.start_ns, self.end_ns, self.bins, since, t, |b, ns| {
                bins[b].0 += khz as f64 * ns as f64;
                bins[b].1 += ns;
            });
        }
    }

    /// Adds `[from, to)` in `state` to lane `i`, spread over the bins it covers.
    fn add(&mut self, i: usize, state: usize, from: u64, to: u64) {
        let bins = &mut self.lanes[i].bins;
        spread(self.start_ns, self.end_ns, bins.len(), from, to, |b, ns| {
            bins[b][state] += ns
        });
    }

    /// Every event, for the CPUs' frequency and the threads' exits; the states come
    /// from the analysis ([`ThreadCharges::interval`]).
    pub fn event(&mut self, e: &Event) {
        match &e.kind {
            EventKind::Switch {
                prev,
                how: SwitchedOut::Exited,
                ..
            } => {
                if let Some(&i) = self.index.get(prev) {
                    self.exited[i] = true;
                }
            }
            EventKind::Frequency { khz } => {
                let ci = e.cpu as usize;
                if self.freq.len() <= ci {
                    self.freq.resize(ci + 1, None);
                    self.freq_bins.resize(ci + 1, Vec::new());
                }
                if self.freq_bins[ci].is_empty() {
                    self.freq_bins[ci] = vec![(0.0, 0); self.bins];
                }
                self.close_frequency(ci, e.time_ns);
                self.freq[ci] = Some((*khz, e.time_ns));
            }
            _ => {}
        }
    }

    pub fn finish(mut self) -> Timeline {
        // The analysis closed every known state at the end; what is left open after a
        // thread's last interval is unknown (a lost switch-out), unless it exited.
        for i in 0..self.lanes.len() {
            if let (Some(until), false) = (self.seen_until[i], self.exited[i]) {
                self.add(i, UNKNOWN, until, self.end_ns);
            }
        }
        for ci in 0..self.freq.len() {
            self.close_frequency(ci, self.end_ns);
        }
        let frequency_mhz = self
            .freq_bins
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(ci, bins)| {
                (
                    ci as u32,
                    bins.iter()
                        .map(|&(sum, ns)| (ns > 0).then(|| sum / ns as f64 / 1000.0))
                        .collect(),
                )
            })
            .collect();
        Timeline {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            lanes: self.lanes,
            frequency_mhz,
        }
    }
}

/// What the page shows besides the report.
pub struct HtmlInput<'a> {
    pub title: &'a str,
    pub report: &'a RecordingReport,
    pub grid: &'a GridOptions,
    /// Power and energy over time (the meter's samples); empty without a meter.
    pub counters: &'a [Counter],
    /// Why there are no counters, when there are none.
    pub counters_missing: &'a str,
    pub timeline: &'a Timeline,
    /// Sampled cpufreq `(time_ns, cpu, kHz)`, drawn when there are no `Frequency` events.
    pub frequency_samples: &'a [(u64, u32, u64)],
}

const WIDTH: f64 = 720.0;
const LEFT: f64 = 170.0;
const RIGHT: f64 = 20.0;

/// An x axis in seconds along the bottom of a chart at `y`, 5 ticks from 0 to `span_s`.
fn time_axis(out: &mut String, y: f64, span_s: f64, label: &str) {
    let plot = WIDTH - LEFT - RIGHT;
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{y}" x2="{}" y2="{y}" stroke="#333"/>"##,
        WIDTH - RIGHT
    );
    for i in 0..=4 {
        let x = LEFT + plot * i as f64 / 4.0;
        let v = span_s * i as f64 / 4.0;
        let _ = writeln!(
            out,
            r##"<line x1="{x}" y1="{y}" x2="{x}" y2="{}" stroke="#333"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            y + 5.0,
            y + 18.0,
            if v == 0.0 { "0".to_string() } else { sig(v, 3) }
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot / 2.0,
        y + 36.0,
        escape(label)
    );
}

fn legend(out: &mut String, y: f64, items: &[(&str, &str)]) {
    let mut x = LEFT;
    for (name, color) in items {
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{color}"/><text x="{}" y="{y}">{}</text>"#,
            y - 10.0,
            x + 16.0,
            escape(name)
        );
        x += 30.0 + 7.0 * name.len() as f64;
    }
}

/// Per-thread swimlanes: each bin drawn in its dominant state (runs of equal bins merged).
impl ThreadCharges for TimelineBuilder {
    fn interval(&mut self, tid: Tid, state: Interval, from: u64, to: u64) {
        let Some(&i) = self.index.get(&tid) else {
            return;
        };
        // A gap since the thread's last interval: the analysis did not know its state.
        if let Some(until) = self.seen_until[i].filter(|u| *u < from) {
            self.add(i, UNKNOWN, until, from);
        }
        let state = match state {
            Interval::Running => RUNNING,
            Interval::Runnable => RUNNABLE,
            Interval::Blocked => BLOCKED,
        };
        self.add(i, state, from, to);
        self.seen_until[i] = Some(self.seen_until[i].map_or(to, |u| u.max(to)));
    }
}

pub fn timeline_svg(t: &Timeline) -> String {
    let lane_h = 18.0;
    let top = 30.0;
    let height = top + lane_h * t.lanes.len() as f64 + 60.0;
    let plot = WIDTH - LEFT - RIGHT;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12" role="img" aria-label="thread timeline">"#
    );
    legend(
        &mut out,
        18.0,
        &[
            (STATE_NAMES[RUNNING], STATE_COLORS[RUNNING]),
            (STATE_NAMES[RUNNABLE], STATE_COLORS[RUNNABLE]),
            (STATE_NAMES[BLOCKED], STATE_COLORS[BLOCKED]),
            (STATE_NAMES[UNKNOWN], STATE_COLORS[UNKNOWN]),
        ],
    );
    for (i, lane) in t.lanes.iter().enumerate() {
        let y = top + lane_h * i as f64;
        let label: String = lane.label.chars().take(24).collect();
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 13.0,
            escape(&label)
        );
        let n = lane.bins.len();
        let dominant = |b: &[u64; STATES]| -> Option<usize> {
            let (s, v) = b.iter().enumerate().max_by_key(|(_, v)| **v)?;
            (*v > 0).then_some(s)
        };
        let mut b = 0;
        while b < n {
            let s = dominant(&lane.bins[b]);
            let mut e = b + 1;
            while e < n && dominant(&lane.bins[e]) == s {
                e += 1;
            }
            if let Some(s) = s {
                let x = LEFT + plot * b as f64 / n as f64;
                let w = plot * (e - b) as f64 / n as f64;
                let _ = writeln!(
                    out,
                    r#"<rect x="{x:.2}" y="{}" width="{w:.2}" height="{}" fill="{}"/>"#,
                    y + 2.0,
                    lane_h - 4.0,
                    STATE_COLORS[s]
                );
            }
            b = e;
        }
    }
    let span_s = (t.end_ns - t.start_ns) as f64 / 1e9;
    time_axis(
        &mut out,
        top + lane_h * t.lanes.len() as f64 + 4.0,
        span_s,
        "time since the start of the recording (s)",
    );
    out.push_str("</svg>\n");
    out
}

/// Horizontal stacked bars: one row per label, one segment per legend entry.
pub(crate) struct Bars<'a> {
    pub(crate) aria: &'a str,
    pub(crate) legend: Vec<(String, &'static str)>,
    pub(crate) rows: Vec<(String, Vec<f64>)>,
    /// The axis' end (the longest bar when larger).
    pub(crate) max: f64,
    pub(crate) axis_label: &'a str,
    /// Unit in each segment's tooltip.
    pub(crate) unit: &'a str,
}

pub(crate) const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

pub(crate) fn hbars_svg(b: &Bars<'_>) -> String {
    let bar_h = 20.0;
    let top = 30.0;
    let height = top + bar_h * b.rows.len() as f64 + 60.0;
    let plot = WIDTH - LEFT - RIGHT;
    let longest = b
        .rows
        .iter()
        .map(|(_, v)| v.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let span = b.max.max(longest).max(1e-12);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12" role="img" aria-label="{}">"#,
        escape(b.aria)
    );
    let legend_items: Vec<(&str, &str)> = b.legend.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    legend(&mut out, 18.0, &legend_items);
    for (i, (label, values)) in b.rows.iter().enumerate() {
        let y = top + bar_h * i as f64;
        let label: String = label.chars().take(24).collect();
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 14.0,
            escape(&label)
        );
        let mut x = LEFT;
        for (v, (name, color)) in values.iter().zip(&b.legend) {
            let w = plot * (v / span).clamp(0.0, 1.0);
            if w > 0.0 {
                let _ = writeln!(
                    out,
                    r#"<rect x="{x:.2}" y="{}" width="{w:.2}" height="{}" fill="{color}"><title>{}: {} {}</title></rect>"#,
                    y + 2.0,
                    bar_h - 4.0,
                    escape(name),
                    sig(*v, 4),
                    escape(b.unit)
                );
            }
            x += w;
        }
    }
    time_axis(
        &mut out,
        top + bar_h * b.rows.len() as f64 + 4.0,
        span,
        b.axis_label,
    );
    out.push_str("</svg>\n");
    out
}

/// Per-CPU busy, idle and unknown seconds.
fn cpu_bars_svg(report: &RecordingReport) -> String {
    hbars_svg(&Bars {
        aria: "CPU time",
        legend: vec![
            ("busy".into(), "#2ca02c"),
            ("idle".into(), "#c7c7c7"),
            ("unknown".into(), "#d62728"),
        ],
        rows: report
            .cpus
            .iter()
            .map(|c| {
                (
                    format!("cpu{}", c.cpu),
                    vec![c.busy_s, c.idle_s, c.unknown_s],
                )
            })
            .collect(),
        max: report.system.elapsed_s,
        axis_label: "seconds of the recording",
        unit: "s",
    })
}

/// Per-CPU idle-state residency: from the trace when every CPU has power:cpu_idle records,
/// else from the cpuidle sysfs counters, else from the CPUs that have trace records; with a
/// note naming the source and the CPUs without data. `None` when there is nothing.
fn residency_svg(report: &RecordingReport) -> Option<(String, String)> {
    type Get = fn(&powerlens_core::sched::report::IdleStateRow) -> Option<f64>;
    let trace: Get = |s| s.time_s;
    let sysfs: Get = |s| s.sysfs_time_s;
    let has = |get: Get, c: &powerlens_core::sched::report::CpuReport| {
        c.idle_states.iter().any(|s| get(s).is_some())
    };
    let (get, source) = if !report.cpus.is_empty() && report.cpus.iter().all(|c| has(trace, c)) {
        (trace, "power:cpu_idle records")
    } else if report.cpus.iter().any(|c| has(sysfs, c)) {
        (sysfs, "cpuidle sysfs counters")
    } else if report.cpus.iter().any(|c| has(trace, c)) {
        (trace, "power:cpu_idle records")
    } else {
        return None;
    };
    let first = report.cpus.iter().find(|c| has(get, c))?;
    let names: Vec<String> = first.idle_states.iter().map(|s| s.name.clone()).collect();
    let rows: Vec<(String, Vec<f64>)> = report
        .cpus
        .iter()
        .map(|c| {
            (
                format!("cpu{}", c.cpu),
                c.idle_states
                    .iter()
                    .map(|s| get(s).unwrap_or(0.0))
                    .collect(),
            )
        })
        .collect();
    let without: Vec<String> = report
        .cpus
        .iter()
        .filter(|c| !has(get, c))
        .map(|c| format!("cpu{}", c.cpu))
        .collect();
    let mut note = format!("From the {source}.");
    if !without.is_empty() {
        note += &format!(
            " No data for {} (empty bars): see Unavailable below.",
            without.join(", ")
        );
    }
    // Why the trace has no residency on some CPUs (the reason the sysfs bars stand in).
    for c in &report.cpus {
        if let Some(reason) = &c.idle_trace_unavailable {
            note += &format!(" cpu{}: {reason}.", c.cpu);
        }
    }
    let svg = hbars_svg(&Bars {
        aria: "idle-state residency",
        legend: names
            .into_iter()
            .enumerate()
            .map(|(i, n)| (n, PALETTE[i % PALETTE.len()]))
            .collect(),
        rows,
        max: report.system.elapsed_s,
        axis_label: "seconds in each idle state",
        unit: "s",
    });
    Some((svg, note))
}

/// Wake-ups received by cause: all threads, then the threads woken most.
fn wakeup_causes_svg(report: &RecordingReport) -> Option<String> {
    let all = report.system.wakeups_received.as_ref()?;
    let values = |w: &powerlens_core::sched::report::WakeupCounts| {
        vec![
            w.thread as f64,
            w.timer as f64,
            w.irq as f64,
            w.softirq as f64,
            w.ipi as f64,
        ]
    };
    let mut rows = vec![("all threads".to_string(), values(all))];
    let mut top: Vec<_> = report
        .threads
        .iter()
        .filter_map(|t| {
            Some((
                t,
                t.metrics.wakeups_received.as_ref()?,
                t.metrics.wakeups_received_total?,
            ))
        })
        .filter(|(_, _, n)| *n > 0)
        .collect();
    top.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.tid.cmp(&b.0.tid)));
    for (t, w, _) in top.into_iter().take(10) {
        rows.push((format!("{} ({})", t.comm, t.tid), values(w)));
    }
    Some(hbars_svg(&Bars {
        aria: "wake-up causes",
        legend: ["thread", "timer", "irq", "softirq", "ipi"]
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), PALETTE[i]))
            .collect(),
        rows,
        max: 0.0,
        axis_label: "wake-ups received",
        unit: "wake-ups",
    }))
}

fn power_svg(counters: &[Counter], start_ns: u64) -> String {
    let series = |unit: &str| -> Vec<Series> {
        counters
            .iter()
            .filter(|c| c.unit == unit)
            .map(|c| Series {
                name: c.name.clone(),
                points: c
                    .points
                    .iter()
                    .map(|&(t, v)| ((t as f64 - start_ns as f64) / 1e9, v))
                    .collect(),
            })
            .collect()
    };
    svg::render(
        &XAxis::Numeric {
            label: "time since the start of the recording (s)".into(),
        },
        &[
            Panel {
                title: "power".into(),
                y_label: "W".into(),
                series: series("W"),
            },
            Panel {
                title: "energy since the first sample".into(),
                y_label: "J".into(),
                series: series("J"),
            },
        ],
    )
}

/// Frequency per CPU over time: from `Frequency` events (bin means), else cpufreq samples.
fn frequency_svg(t: &Timeline, samples: &[(u64, u32, u64)]) -> Option<(String, String)> {
    let secs = |ns: u64| (ns as f64 - t.start_ns as f64) / 1e9;
    let (series, note): (Vec<Series>, String) = if !t.frequency_mhz.is_empty() {
        let span = (t.end_ns - t.start_ns) as f64;
        let series = t
            .frequency_mhz
            .iter()
            .map(|(cpu, bins)| Series {
                name: format!("cpu{cpu}"),
                points: bins
                    .iter()
                    .enumerate()
                    .filter_map(|(b, v)| {
                        let mid = (b as f64 + 0.5) * span / bins.len() as f64 / 1e9;
                        Some((mid, (*v)?))
                    })
                    .collect(),
            })
            .collect();
        (
            series,
            "From power:cpu_frequency records: the time-weighted mean of each time bin.".into(),
        )
    } else if !samples.is_empty() {
        let mut cpus: Vec<u32> = samples.iter().map(|s| s.1).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let series = cpus
            .iter()
            .map(|&cpu| Series {
                name: format!("cpu{cpu}"),
                points: samples
                    .iter()
                    .filter(|s| s.1 == cpu)
                    .map(|&(ns, _, khz)| (secs(ns), khz as f64 / 1000.0))
                    .collect(),
            })
            .collect();
        (series, "From sampled cpufreq scaling_cur_freq.".into())
    } else {
        return None;
    };
    let svg = svg::render(
        &XAxis::Numeric {
            label: "time since the start of the recording (s)".into(),
        },
        &[Panel {
            title: "CPU frequency".into(),
            y_label: "MHz".into(),
            series,
        }],
    );
    Some((svg, note))
}

/// The whole page.
pub fn page(input: &HtmlInput<'_>) -> Result<String, UnknownColumn> {
    let r = input.report;
    let mut page = Page::new(input.title);
    page.p(&format!(
        "{} CPUs over {} s; target: {}. Energy: {}.",
        r.system.cpus,
        sig(r.system.elapsed_s, 4),
        r.system.target,
        r.energy.provenance.label()
    ));
    if let Some(p) = &r.system.perturbation {
        // The first thing a reader sees when the tracing slowed the run it describes.
        if p.slowed {
            page.p(&format!("Perturbation — WARNING: {}.", p.text));
        } else {
            page.p(&format!("Perturbation: {}.", p.text));
        }
        if let Some(recorder) = p.recorder_text() {
            page.p(&format!("Recorder: {recorder}."));
        }
        if let Some(untraced) = &p.untraced_runs {
            page.p(&format!("Untraced runs: {}.", untraced.text));
        }
    }
    if let Some(path) = &r.system.tracing_path {
        page.p(&format!("Tracing path: {}.", path.describe()));
    }

    page.h2("Power and energy over time");
    if input.counters.is_empty() {
        page.unavailable(input.counters_missing);
    } else {
        page.svg(&power_svg(input.counters, input.timeline.start_ns));
    }

    page.h2("CPUs: busy, idle and unknown time");
    if r.cpus.is_empty() {
        page.unavailable("the recording has no scheduler events per CPU (a reduced recording).");
    } else {
        page.svg(&cpu_bars_svg(r));
    }
    if let Some(t) = recording::cpu_tables(r) {
        page.table(&t.cpus);
        for note in &t.cpu_notes {
            page.note(note);
        }
        if !t.residency.is_empty() {
            page.note(&format!("{}:", recording::RESIDENCY_HEADING));
            page.table(&t.residency);
            for note in &t.residency_notes {
                page.note(note);
            }
        }
    }

    page.h2("Idle-state residency per CPU");
    match residency_svg(r) {
        Some((svg, note)) => {
            page.svg(&svg);
            page.note(&note);
        }
        None => page.unavailable(
            "neither power:cpu_idle records nor cpuidle counters (the reasons are under Unavailable below).",
        ),
    }

    page.h2("Wake-up causes");
    match wakeup_causes_svg(r) {
        Some(svg) => page.svg(&svg),
        None => page.unavailable("a reduced recording has no wake-up events."),
    }
    if let Some((causes, more)) = recording::wakeup_causes_table(r) {
        page.note("What ended the CPUs' idle periods (timers with the function that armed them):");
        page.table(&causes);
        if let Some(note) = recording::wakeup_causes_held_note(&causes) {
            page.note(note);
        }
        if more > 0 {
            page.note(&format!("{more} more in report --json."));
        }
    }

    page.h2("Frequency over time");
    match frequency_svg(input.timeline, input.frequency_samples) {
        Some((svg, note)) => {
            page.svg(&svg);
            page.note(&note);
        }
        None => page.unavailable(
            "no power:cpu_frequency records and no cpufreq samples (no cpufreq driver: typical of virtual machines).",
        ),
    }

    page.h2(&format!(
        "Thread timeline (top {} threads by CPU time)",
        input.timeline.lanes.len()
    ));
    if input.timeline.lanes.is_empty() {
        page.unavailable(
            "no thread ran in the recording's scheduler events (a reduced recording has none).",
        );
    } else {
        page.svg(&timeline_svg(input.timeline));
        page.note(&format!(
            "Each of the {} time bins per thread is drawn in the state the thread spent most of it in.",
            input.timeline.lanes[0].bins.len()
        ));
    }

    page.h2(&format!(
        "By {} (click a column to sort)",
        input.grid.by.name()
    ));
    grid_table(&mut page, r, input.grid)?;
    // With stacks, the functions too, whichever grid the page leads with.
    if !r.functions.is_empty() && !matches!(input.grid.by, By::Function | By::Stack) {
        let grouping = match r.function_grouping.as_deref() {
            Some("function_inclusive") => "anywhere on the stack",
            _ => "innermost frame of the program's own code",
        };
        page.h2(&format!("By function ({grouping}; click a column to sort)"));
        let by_function = GridOptions {
            by: By::Function,
            ..Default::default()
        };
        grid_table(&mut page, r, &by_function)?;
    }

    page.h2("System");
    page.key_values(&recording::system_items(r));
    page.section_lines("Thread balance", &recording::balance(r));
    page.section_lines("Energy", &recording::energy(r));
    if let Some(battery) = &r.battery {
        crate::battery_view::html(&mut page, battery, crate::battery_view::Unit::Recording);
    }
    if !r.cpus.is_empty() {
        page.h2("Advice");
        page.p(&format!(
            "Judged against: {}.",
            recording::advice_judged_against(r)
        ));
        if r.advice.is_empty() {
            page.p("No rule fired.");
        }
        let items: Vec<Vec<String>> = r
            .advice
            .iter()
            .map(|a| {
                vec![
                    format!("[{}] {}", a.rule, a.evidence),
                    format!("→ {}", a.suggestion),
                ]
            })
            .collect();
        page.list(&items);
    }
    if !r.unavailable.is_empty() {
        page.h2("Unavailable");
        let items: Vec<Vec<String>> = r
            .unavailable
            .iter()
            .map(|u| {
                let mut lines = vec![format!("{}: {}", u.figure, u.reason)];
                lines.extend(u.fix.iter().map(|f| format!("fix: {f}")));
                lines
            })
            .collect();
        page.list(&items);
    }
    Ok(page.finish())
}

/// A grid of the report as a sortable table, with its totals row.
fn grid_table(
    page: &mut Page,
    r: &RecordingReport,
    grid: &GridOptions,
) -> Result<(), UnknownColumn> {
    let cells = recording::grid_cells(r, grid)?;
    let cols: Vec<Column<'_>> = cells
        .cols
        .iter()
        .map(|c| Column {
            header: c.header,
            description: c.description,
        })
        .collect();
    page.sortable_table_with_totals(&cols, &cells.rows, cells.totals.as_deref());
    for note in recording::grid_notes(r, grid.by) {
        page.note(&note);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::sched::event::IDLE_TID;

    fn ev(t: u64, kind: EventKind) -> Event {
        Event {
            time_ns: t,
            cpu: 0,
            kind,
        }
    }

    /// The timeline as the HTML report builds it: the scheduler analysis over `events`
    /// with the builder as its layer, and the events for frequency and exits.
    fn timeline(events: &[Event], end: u64, lanes: &[(Tid, String)], bins: usize) -> Timeline {
        let builder = TimelineBuilder::new(0, end, lanes, bins);
        let mut a = powerlens_core::sched::analysis::SchedAnalysis::new().with_charges(builder);
        for e in events {
            a.charges_mut().event(e);
            a.feed(e);
        }
        a.finish_with_charges(end).1.finish()
    }

    #[test]
    fn the_timeline_puts_each_state_in_its_bins() {
        // 0..1000 ns in 10 bins of 100 ns. Thread 5: runnable 0..150 (woken), running
        // 150..400, blocked 400..1000 (open to the end).
        let events = [
            ev(
                0,
                EventKind::Wakeup {
                    tid: 5,
                    target_cpu: 0,
                    new_thread: false,
                },
            ),
            ev(
                150,
                EventKind::Switch {
                    prev: 0,
                    how: SwitchedOut::Preempted,
                    next: 5,
                },
            ),
            ev(
                400,
                EventKind::Switch {
                    prev: 5,
                    how: SwitchedOut::Blocked,
                    next: 0,
                },
            ),
        ];
        let t = timeline(&events, 1000, &[(5, "five".into())], 10);
        let bins = &t.lanes[0].bins;
        assert_eq!(bins[0], [0, 100, 0, 0]);
        assert_eq!(bins[1], [50, 50, 0, 0]);
        assert_eq!(bins[2], [100, 0, 0, 0]);
        assert_eq!(bins[3], [100, 0, 0, 0]);
        assert_eq!(bins[4], [0, 0, 100, 0]);
        let total: u64 = bins.iter().flatten().sum();
        assert_eq!(total, 1000);
        assert!(t.frequency_mhz.is_empty());
        let svg = timeline_svg(&t);
        assert!(svg.contains(">five</text>"));
        // Four legend swatches; runnable (bin 0), running (bins 1-3; bin 1 is a tie, first
        // state wins), blocked.
        assert_eq!(svg.matches("<rect x=").count(), 4 + 3, "{svg}");
    }

    /// Issue 17 point 4: a thread whose switch-out was lost was drawn running to the end
    /// (9 of 10 s for a thread whose row showed 0.019 s of CPU). The lanes are the grid's
    /// own intervals: running as long as the grid's switch-interval time (`on_cpu_ns`),
    /// inferences included, and unknown where the grid knows nothing.
    #[test]
    fn a_lost_switch_out_is_drawn_unknown_as_the_grid_counts_it() {
        let at = |t: u64, cpu: u32, kind: EventKind| Event {
            time_ns: t,
            cpu,
            kind,
        };
        let sw = |t, cpu, prev, next| {
            at(
                t,
                cpu,
                EventKind::Switch {
                    prev,
                    how: SwitchedOut::Blocked,
                    next,
                },
            )
        };
        let events = [
            sw(0, 0, IDLE_TID, 7),
            // cpu0's last recorded event while 7 runs: an interrupt at 100.
            at(100, 0, EventKind::InterruptExit),
            // 7's switch-out is lost; cpu0 next switches 8 out.
            sw(900, 0, 8, IDLE_TID),
            // On cpu1, 9 runs 0..500 and blocks; at 700 it is switched in on cpu1 while
            // cpu0 said nothing (a plain run, for comparison).
            sw(0, 1, IDLE_TID, 9),
            sw(500, 1, 9, IDLE_TID),
        ];
        let mut sorted = events.to_vec();
        sorted.sort_by_key(|e| e.time_ns);
        let lanes = [(7, "seven".to_string()), (9, "nine".to_string())];
        let t = timeline(&sorted, 1000, &lanes, 10);
        let state =
            |lane: usize, s: usize| -> u64 { t.lanes[lane].bins.iter().map(|b| b[s]).sum() };
        let grid = powerlens_core::sched::analysis::analyse(&sorted, 1000);
        let on_cpu = |tid| {
            grid.threads
                .iter()
                .find(|th| th.tid == tid)
                .unwrap()
                .on_cpu_ns
        };
        // The grid infers 8's lost switch-in a mean run (9's 500 ns) before 900, so 7 ran
        // 0..400; the lane says so, and unknown after.
        assert_eq!(on_cpu(7), 400);
        assert_eq!((state(0, RUNNING), state(0, UNKNOWN)), (400, 600));
        assert_eq!((state(1, RUNNING), state(1, BLOCKED)), (500, 500));
        assert_eq!(on_cpu(9), state(1, RUNNING));
        assert!(timeline_svg(&t).contains("#d9d9d9"));
    }

    #[test]
    fn frequency_bins_are_time_weighted_means() {
        // 2000 MHz for 0..250 ns, 1000 MHz from 250 ns, in 4 bins of 250 ns over 0..1000;
        // 3000 MHz on cpu 2 from 500 ns (bins before it unknown).
        let mut b = TimelineBuilder::new(0, 1000, &[], 4);
        let f = |t: u64, cpu: u32, khz: u64| Event {
            time_ns: t,
            cpu,
            kind: EventKind::Frequency { khz },
        };
        b.event(&f(0, 0, 2_000_000));
        b.event(&f(250, 0, 1_000_000));
        b.event(&f(600, 2, 3_000_000));
        let t = b.finish();
        assert_eq!(t.frequency_mhz.len(), 2);
        assert_eq!(
            t.frequency_mhz[0],
            (
                0,
                vec![Some(2000.0), Some(1000.0), Some(1000.0), Some(1000.0)]
            )
        );
        assert_eq!(
            t.frequency_mhz[1],
            (2, vec![None, None, Some(3000.0), Some(3000.0)])
        );
        let (svg, note) = frequency_svg(&t, &[]).unwrap();
        assert!(
            svg.contains(">MHz</text>") && svg.contains(">cpu2</text>"),
            "{svg}"
        );
        assert!(note.contains("power:cpu_frequency"));
    }
}
