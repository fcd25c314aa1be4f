//! Views of `powerlens wake`: the text report of one run, the per-datapoint CSV (and its
//! reader, for `wake report`), the comparison of several results, and the SVG scatter and
//! histogram. Latencies are nanoseconds in files and JSON, microseconds on screen.

use std::fmt::Write;

use powerlens_core::wake::{Datapoint, Dropped, Metric, Raw, StateReport, WakeResult, METRICS};

use crate::page::Page;
use crate::svg::{self, Panel, Series, XAxis};
use crate::table::{csv_field, Table};

fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}

fn metric_of(state: &StateReport, index: usize) -> &Metric {
    match index {
        0 => &state.wake_latency_ns,
        1 => &state.intr_latency_ns,
        2 => &state.user_latency_ns,
        _ => &state.silent_time_ns,
    }
}

fn declared(state: &StateReport) -> String {
    match state.declared_latency_us {
        Some(d) => format!("{d} µs"),
        None => "none (no cpuidle state declares one)".to_string(),
    }
}

/// The verdict line on the declared exit latency.
fn verdict(state: &StateReport) -> String {
    let user = state.user_latency_ns.distribution();
    match (state.exceeds_declared, state.wake_latency_ns.distribution()) {
        (Some(exceeds), Some(w)) => format!(
            "wake latency p99.9 {} µs, max {} µs {} the declared {}",
            us(w.p99_9),
            us(w.max),
            if exceeds { "EXCEED" } else { "are within" },
            declared(state)
        ),
        _ => {
            let mut line =
                "wake latency unavailable: cannot compare it with the declared latency".to_string();
            if let (Some(u), Some(d)) = (user, state.declared_latency_us) {
                let _ = write!(
                    line,
                    "; UserLatency (an upper bound: it adds the interrupt, the scheduler and the \
                     syscall return to the wake-up) has median {} µs, max {} µs against the declared {d} µs",
                    us(u.median),
                    us(u.max)
                );
            }
            line
        }
    }
}

/// The text report of one run.
pub fn text(result: &WakeResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "powerlens wake: cpu{}, cpuidle driver {}, LDist uniform in {}–{} µs",
        result.cpu,
        result.cpuidle_driver,
        us(result.ldist_min_ns as f64),
        us(result.ldist_max_ns as f64)
    );
    if let Some(o) = &result.self_overhead {
        let _ = writeln!(
            out,
            "self overhead (measured at start on cpu{}): timestamp {} ns median (min {} ns); \
             sleep to a past time {} µs median (min {} µs), the floor of UserLatency",
            result.cpu,
            o.timestamp_ns.median,
            o.timestamp_ns.min,
            us(o.expired_sleep_ns.median),
            us(o.expired_sleep_ns.min),
        );
        if let Some(traced) = &o.expired_sleep_traced_ns {
            let cost = match (o.trace_cost_ns, &o.trace_cost_unavailable) {
                (Some(cost), _) => format!("so a traced event costs about {} µs", us(cost)),
                (None, Some(why)) => format!("the cost of a traced event is {why}"),
                (None, None) => "the cost of a traced event is unknown".to_string(),
            };
            let _ = writeln!(
                out,
                "  with the tracepoints on: {} µs median, {cost}; \
                 every latency here includes the events traced on its path \
                 (--no-trace: UserLatency without them)",
                us(traced.median),
            );
        }
    }
    for note in &result.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for missing in &result.trace_unavailable {
        let _ = writeln!(out, "tracepoint unavailable: {missing}");
    }
    if result.lost_records > 0 {
        let _ = writeln!(
            out,
            "warning: the kernel dropped {} trace records (ring full): datapoints near them may be dropped",
            result.lost_records
        );
    }
    for state in &result.states {
        let _ = writeln!(
            out,
            "\nstate {}: declared exit latency {}; {} datapoints kept, {} dropped{}",
            state.name,
            declared(state),
            state.count,
            state.dropped,
            dropped_detail(state)
        );
        let mut table = Table::new([
            "metric [µs]",
            "count",
            "min",
            "median",
            "mean",
            "std",
            "p99",
            "p99.9",
            "p99.99",
            "max",
        ]);
        let mut unavailable = Vec::new();
        for (index, (name, _)) in METRICS.iter().enumerate() {
            let label = name.replace('_', " ");
            match metric_of(state, index) {
                Metric::Measured {
                    distribution: d, ..
                } => {
                    table.row([
                        label,
                        d.count.to_string(),
                        us(d.min),
                        us(d.median),
                        us(d.mean),
                        us(d.std),
                        us(d.p99),
                        us(d.p99_9),
                        us(d.p99_99),
                        us(d.max),
                    ]);
                }
                Metric::Unavailable { reason, fix } => {
                    table.row([label, "unavailable".to_string()]);
                    unavailable.push((name, reason, fix));
                }
            }
        }
        out.push_str(&table.render());
        for (index, (name, _)) in METRICS.iter().enumerate() {
            if let Some(d) = metric_of(state, index).distribution() {
                if d.count < state.count {
                    let _ = writeln!(
                        out,
                        "  {name} from {} of {} datapoints: the kernel did not deliver the timestamp for \
                         the others (chosen by the kernel, not at random: may be biased)",
                        d.count, state.count
                    );
                }
            }
        }
        for (name, reason, fix) in unavailable {
            let _ = writeln!(out, "  {name} unavailable: {reason}");
            if let Some(fix) = fix {
                let _ = writeln!(out, "    fix: {fix}");
            }
        }
        let _ = writeln!(out, "  {}", verdict(state));
    }
    if let Some(why) = &result.stopped_early {
        let _ = writeln!(
            out,
            "\nstopped early: {why} (the datapoints so far are kept)"
        );
    }
    out
}

fn dropped_detail(state: &StateReport) -> String {
    if state.dropped_by_reason.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = state
        .dropped_by_reason
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    format!(" ({})", parts.join(", "))
}

/// The columns of `datapoints.csv`.
pub const CSV_HEADER: &str = "state,ltime_ns,ldist_ns,user_wake_ns,tbi_ns,tai_ns,tintr_ns,\
wake_latency_ns,intr_latency_ns,user_latency_ns,silent_time_ns,interrupts,softirqs,dropped";

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// One CSV row per measurement, kept or dropped (`dropped` names the rule; empty when
/// kept). Latencies are empty where the trace did not deliver their timestamps.
pub fn datapoints_csv(rows: &[(Raw, Result<Datapoint, Dropped>)]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for (raw, outcome) in rows {
        let (p, dropped) = match outcome {
            Ok(p) => (Some(p), String::new()),
            Err(d) => (None, d.name().to_string()),
        };
        let fields = [
            csv_field(&raw.cstate),
            raw.ltime_ns.to_string(),
            raw.ldist_ns.to_string(),
            raw.user_wake_ns.to_string(),
            opt(raw.tbi_ns),
            opt(raw.tai_ns),
            opt(raw.tintr_ns),
            opt(p.and_then(|p| p.wake_latency_ns)),
            opt(p.and_then(|p| p.intr_latency_ns)),
            opt(p.map(|p| p.user_latency_ns)),
            opt(p.and_then(|p| p.silent_time_ns)),
            raw.interrupts.to_string(),
            raw.softirqs.to_string(),
            dropped,
        ];
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// A kept datapoint as read back from `datapoints.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvPoint {
    pub state: String,
    pub ldist_ns: u64,
    pub wake_latency_ns: Option<u64>,
    pub intr_latency_ns: Option<u64>,
    pub user_latency_ns: u64,
    pub silent_time_ns: Option<u64>,
}

/// Splits one CSV line (RFC 4180 quoting, as [`csv_field`] writes it).
fn split_csv(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            (c, _) => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

/// Reads the kept datapoints of a `datapoints.csv`; errors name the line.
pub fn parse_datapoints_csv(text: &str) -> Result<Vec<CsvPoint>, String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    if header.trim() != CSV_HEADER {
        return Err(format!(
            "line 1: not a powerlens wake datapoints.csv header (expected `{CSV_HEADER}`)"
        ));
    }
    let mut points = Vec::new();
    for (n, line) in lines.enumerate() {
        let f = split_csv(line);
        let line_no = n + 2;
        if f.len() != 14 {
            return Err(format!("line {line_no}: {} fields, expected 14", f.len()));
        }
        if !f[13].is_empty() {
            continue;
        }
        let num = |i: usize| -> Result<Option<u64>, String> {
            if f[i].is_empty() {
                return Ok(None);
            }
            f[i].parse()
                .map(Some)
                .map_err(|_| format!("line {line_no}: `{}` is not a whole number", f[i]))
        };
        points.push(CsvPoint {
            state: f[0].clone(),
            ldist_ns: num(2)?.ok_or(format!("line {line_no}: no ldist_ns"))?,
            wake_latency_ns: num(7)?,
            intr_latency_ns: num(8)?,
            user_latency_ns: num(9)?.ok_or(format!("line {line_no}: no user_latency_ns"))?,
            silent_time_ns: num(10)?,
        });
    }
    Ok(points)
}

/// One result of `wake report`: its label (the directory), its info and its datapoints.
pub struct Loaded {
    pub label: String,
    pub result: WakeResult,
    pub points: Vec<CsvPoint>,
}

fn cell(metric: &Metric, pick: fn(&powerlens_core::wake::Distribution) -> f64) -> String {
    metric
        .distribution()
        .map(|d| us(pick(d)))
        .unwrap_or_else(|| "n/a".to_string())
}

const COMPARE_HEADERS: [&str; 12] = [
    "result",
    "state",
    "declared [µs]",
    "kept",
    "dropped",
    "user median",
    "user p99.9",
    "user max",
    "wake median",
    "wake p99.9",
    "wake max",
    "exceeds",
];

const COMPARE_NOTE: &str = "latencies in µs; n/a: unavailable on the kernel that measured it (see each result's info.json)";

/// The comparison, one row per result and state.
fn compare_table(results: &[Loaded]) -> Table {
    let mut table = Table::new(COMPARE_HEADERS);
    for loaded in results {
        for s in &loaded.result.states {
            table.row([
                loaded.label.clone(),
                s.name.clone(),
                s.declared_latency_us
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| "none".to_string()),
                s.count.to_string(),
                s.dropped.to_string(),
                cell(&s.user_latency_ns, |d| d.median),
                cell(&s.user_latency_ns, |d| d.p99_9),
                cell(&s.user_latency_ns, |d| d.max),
                cell(&s.wake_latency_ns, |d| d.median),
                cell(&s.wake_latency_ns, |d| d.p99_9),
                cell(&s.wake_latency_ns, |d| d.max),
                match s.exceeds_declared {
                    Some(true) => "yes".to_string(),
                    Some(false) => "no".to_string(),
                    None => "n/a".to_string(),
                },
            ]);
        }
    }
    table
}

/// The comparison table of several results, one row per result and state.
pub fn compare_text(results: &[Loaded]) -> String {
    let mut out = format!("{COMPARE_NOTE}\n");
    out.push_str(&compare_table(results).render());
    out
}

/// `wake report --html`: the comparison (sortable), the scatter and the histogram, and
/// each result's text report. Result labels (directory names) and state names are escaped.
pub fn html(results: &[Loaded]) -> String {
    let labels: Vec<&str> = results.iter().map(|r| r.label.as_str()).collect();
    let mut page = Page::new(&format!("powerlens wake report: {}", labels.join(", ")));
    page.h2("Comparison (click a column to sort)");
    page.note(COMPARE_NOTE);
    page.table(&compare_table(results));
    let (wake, silent) = axes(results);
    let metric = if wake { "wake latency" } else { "UserLatency" };
    page.h2(&format!("{metric} per datapoint"));
    page.svg(&scatter_svg(results));
    page.note(&if silent {
        format!("One point per kept datapoint (at most {SCATTER_MAX_POINTS} per result and state, evenly thinned), one colour per result and state.")
    } else {
        format!("Silent time is unavailable in at least one result (no idle trace), so the x axis is the launch distance LDist; at most {SCATTER_MAX_POINTS} points per result and state.")
    });
    if !wake {
        page.note("Wake latency is unavailable in at least one result: the plots use UserLatency, an upper bound (it adds the interrupt, the scheduler and the syscall return).");
    }
    page.h2(&format!("{metric} histogram"));
    page.svg(&histogram_svg(results));
    page.note(&format!(
        "Share of each result and state's datapoints in each of {HISTOGRAM_BINS} bins between the smallest latency and the p99.9 of all; the last bin holds everything above."
    ));
    for r in results {
        page.h2(&format!("Result {}", r.label));
        page.pre(&text(&r.result));
    }
    page.finish()
}

/// Which latency and which x the plots use: wake latency against silent time where every
/// result has them (as the waltr thesis plots), else UserLatency against LDist.
fn axes(results: &[Loaded]) -> (bool, bool) {
    let all = |f: fn(&CsvPoint) -> bool| results.iter().flat_map(|r| &r.points).all(f);
    let any = results.iter().any(|r| !r.points.is_empty());
    (
        any && all(|p| p.wake_latency_ns.is_some()),
        any && all(|p| p.silent_time_ns.is_some()),
    )
}

/// At most this many points per series in the scatter (evenly thinned), so the file
/// stays small enough for a browser.
pub const SCATTER_MAX_POINTS: usize = 5_000;

fn series_keys(results: &[Loaded]) -> Vec<(usize, String)> {
    let mut keys = Vec::new();
    for (i, r) in results.iter().enumerate() {
        for p in &r.points {
            if !keys.contains(&(i, p.state.clone())) {
                keys.push((i, p.state.clone()));
            }
        }
    }
    keys
}

fn latency_of(wake: bool) -> fn(&CsvPoint) -> f64 {
    if wake {
        |p| p.wake_latency_ns.unwrap_or(0) as f64 / 1e3
    } else {
        |p| p.user_latency_ns as f64 / 1e3
    }
}

/// The scatter: latency against silent time (or LDist), one series per result and state.
pub fn scatter_svg(results: &[Loaded]) -> String {
    let (wake, silent) = axes(results);
    let y = latency_of(wake);
    let x: fn(&CsvPoint) -> f64 = if silent {
        |p| p.silent_time_ns.unwrap_or(0) as f64 / 1e3
    } else {
        |p| p.ldist_ns as f64 / 1e3
    };
    let series = series_keys(results)
        .into_iter()
        .map(|(i, state)| {
            let points: Vec<&CsvPoint> = results[i]
                .points
                .iter()
                .filter(|p| p.state == state)
                .collect();
            let step = points.len().div_ceil(SCATTER_MAX_POINTS).max(1);
            Series {
                name: format!("{} {}", results[i].label, state),
                points: points.iter().step_by(step).map(|p| (x(p), y(p))).collect(),
            }
        })
        .collect();
    let metric = if wake { "wake latency" } else { "UserLatency" };
    let x_label = if silent {
        "silent time [µs]"
    } else {
        "launch distance LDist [µs] (silent time unavailable)"
    };
    svg::render_scatter(
        &XAxis::Numeric {
            label: x_label.to_string(),
        },
        &[Panel {
            title: format!("{metric} per datapoint"),
            y_label: format!("{metric} [µs]"),
            series,
        }],
    )
}

/// Histogram bins: this many between the smallest and the p99.9 of all latencies, so a
/// few outliers do not squeeze the rest into one bin (the counts above are in the last).
pub const HISTOGRAM_BINS: usize = 40;

/// The histogram (as frequency polygons, one per result and state, share of datapoints
/// per bin) of the latency the scatter uses.
pub fn histogram_svg(results: &[Loaded]) -> String {
    let (wake, _) = axes(results);
    let y = latency_of(wake);
    let mut all: Vec<f64> = results.iter().flat_map(|r| &r.points).map(y).collect();
    all.sort_by(f64::total_cmp);
    let (lo, hi) = if all.is_empty() {
        (0.0, 1.0)
    } else {
        (
            all[0],
            powerlens_core::wake::quantile(&all, 0.999).max(all[0] + 1e-3),
        )
    };
    let width = (hi - lo) / HISTOGRAM_BINS as f64;
    let series = series_keys(results)
        .into_iter()
        .map(|(i, state)| {
            let values: Vec<f64> = results[i]
                .points
                .iter()
                .filter(|p| p.state == state)
                .map(y)
                .collect();
            let mut counts = vec![0usize; HISTOGRAM_BINS];
            for v in &values {
                let bin = (((v - lo) / width) as usize).min(HISTOGRAM_BINS - 1);
                counts[bin] += 1;
            }
            Series {
                name: format!("{} {}", results[i].label, state),
                points: counts
                    .iter()
                    .enumerate()
                    .map(|(b, c)| {
                        (
                            lo + (b as f64 + 0.5) * width,
                            100.0 * *c as f64 / values.len().max(1) as f64,
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    let metric = if wake { "wake latency" } else { "UserLatency" };
    svg::render(
        &XAxis::Numeric {
            label: format!("{metric} [µs] (last bin: everything above)"),
        },
        &[Panel {
            title: format!("{metric} histogram"),
            y_label: "datapoints [%]".to_string(),
            series,
        }],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::wake::{datapoints, state_report, Delivered};

    fn raw(i: u64, idle: bool) -> Raw {
        let l = 1_000_000 * (i + 1);
        Raw {
            ltime_ns: l,
            ldist_ns: 500_000 + i,
            tbi_ns: idle.then_some(l - 100_000 - i * 1_000),
            tai_ns: idle.then_some(l + 2_000 + i * 10),
            tintr_ns: idle.then_some(l + 3_000),
            user_wake_ns: l + 50_000 + i * 100,
            cstate: "C1, \"deep\"".into(),
            woken_by_our_timer: idle.then_some(true),
            interrupts: 0,
            softirqs: 1,
        }
    }

    fn loaded(idle: bool) -> Loaded {
        let raws: Vec<Raw> = (0..20).map(|i| raw(i, idle)).collect();
        let delivered = Delivered::detect(&[], &raws);
        let delivered = Delivered { idle, ..delivered };
        let rows: Vec<_> = raws
            .iter()
            .map(|r| (r.clone(), r.datapoint(&delivered)))
            .collect();
        let csv = datapoints_csv(&rows);
        let points = parse_datapoints_csv(&csv).unwrap();
        assert_eq!(datapoints(&raws, &delivered).0.len(), points.len());
        Loaded {
            label: if idle { "metal" } else { "vm" }.into(),
            result: WakeResult {
                cpu: 1,
                cpuidle_driver: "none".into(),
                ldist_min_ns: 300_000,
                ldist_max_ns: 8_000_000,
                self_overhead: None,
                trace_unavailable: vec![],
                lost_records: 0,
                notes: vec![],
                stopped_early: None,
                states: vec![state_report("C1", Some(1), &raws, &delivered, 1)],
            },
            points,
        }
    }

    #[test]
    fn csv_round_trips_quoted_state_names_and_empty_cells() {
        let vm = loaded(false);
        assert_eq!(vm.points.len(), 20);
        let p = &vm.points[3];
        assert_eq!(p.state, "C1, \"deep\"");
        assert_eq!(
            (
                p.ldist_ns,
                p.user_latency_ns,
                p.wake_latency_ns,
                p.silent_time_ns
            ),
            (500_003, 50_300, None, None)
        );
        let metal = loaded(true);
        assert_eq!(metal.points[3].wake_latency_ns, Some(2_030));
        assert_eq!(metal.points[3].silent_time_ns, Some(103_000));
        // A dropped row is not a point.
        let mut r = raw(0, true);
        r.woken_by_our_timer = Some(false);
        let d = Delivered {
            idle: true,
            timer: true,
            untraced: false,
        };
        let csv = datapoints_csv(&[(r.clone(), r.datapoint(&d))]);
        assert!(csv.trim_end().ends_with(",not_our_timer"), "{csv}");
        assert!(parse_datapoints_csv(&csv).unwrap().is_empty());
        assert!(parse_datapoints_csv("a,b\n")
            .unwrap_err()
            .contains("line 1"));
    }

    #[test]
    fn text_says_unavailable_with_reason_and_fix() {
        let vm = loaded(false);
        let text = text(&vm.result);
        assert!(text.contains("user latency"), "{text}");
        assert!(text.contains("wake_latency unavailable: the kernel delivered no power:cpu_idle"));
        assert!(text.contains("fix: measure on a kernel"), "{text}");
        assert!(text.contains("UserLatency (an upper bound"), "{text}");
        // 50.00 µs min, 51.90 µs max for i in 0..20.
        assert!(text.contains("50.00") && text.contains("51.90"), "{text}");
        let metal = text_of(true);
        assert!(metal.contains("EXCEED the declared 1 µs"), "{metal}");
    }

    fn text_of(idle: bool) -> String {
        text(&loaded(idle).result)
    }

    #[test]
    fn plots_fall_back_to_ldist_without_silent_time() {
        let both = [loaded(true), loaded(false)];
        let scatter = scatter_svg(&both);
        assert!(scatter.contains("LDist"), "mixed results fall back");
        assert!(scatter.contains("UserLatency per datapoint"));
        assert_eq!(scatter.matches("<circle").count(), 40);
        assert!(!scatter.contains("<polyline"));
        let metal = scatter_svg(&both[..1]);
        assert!(metal.contains("silent time [µs]") && metal.contains("wake latency"));
        let hist = histogram_svg(&both);
        assert!(hist.contains("UserLatency histogram"));
        assert!(!hist.contains("NaN"));
        let table = compare_text(&both);
        assert!(table.contains("metal") && table.contains("vm") && table.contains("n/a"));
    }

    #[test]
    fn html_draws_wake_latency_against_silent_time_and_escapes_labels() {
        let mut metal = loaded(true);
        metal.label = "<b>m&\"x\"".into();
        let page = html(std::slice::from_ref(&metal));
        assert!(!page.contains("<b>"), "{page}");
        assert!(page.contains("<td>&lt;b&gt;m&amp;&quot;x&quot;</td><td>C1</td>"));
        // The plots' legend: result and the state named in datapoints.csv.
        assert!(page.contains(">&lt;b&gt;m&amp;&quot;x&quot; C1, &quot;deep&quot;</text>"));
        assert!(page.contains("<h2>wake latency per datapoint</h2>"));
        assert!(
            page.contains(">silent time [µs]</text>") && page.contains(">wake latency [µs]</text>")
        );
        assert!(!page.contains("launch distance"), "{page}");
        // 20 datapoints in the scatter, 40 histogram bins.
        assert_eq!(page.matches("<circle").count(), 20 + HISTOGRAM_BINS);
        // With a result lacking the idle trace: UserLatency against LDist, and the page says why.
        let page = html(&[metal, loaded(false)]);
        assert!(page.contains("Silent time is unavailable in at least one result"));
        assert!(page.contains("Wake latency is unavailable in at least one result"));
        assert_eq!(page.matches("<circle").count(), 40 + 2 * HISTOGRAM_BINS);
        assert_eq!(page.matches("<h2>Result ").count(), 2);
    }
}
