//! A small self-contained SVG line chart: axes with ticks and units, one polyline per
//! series, a legend. No fonts or scripts are fetched, so the file renders offline and
//! prints cleanly.

use std::fmt::Write;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x index or value, y) points.
    pub points: Vec<(f64, f64)>,
}

/// A chart panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// The x axis: numeric values, or categories placed at 0, 1, 2, …
#[derive(Debug, Clone, PartialEq)]
pub enum XAxis {
    Numeric { label: String },
    Categories { label: String, names: Vec<String> },
}

const WIDTH: f64 = 720.0;
const PANEL_HEIGHT: f64 = 300.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
];

/// Escapes text for SVG/XML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// "Nice" tick positions covering [lo, hi].
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 1.0, hi + 1.0)
    };
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    // Up to and including the first tick at or above `hi`, so the axis covers every point.
    let count = ((hi - start) / step - 1e-9).ceil().max(1.0) as usize;
    (0..=count).map(|i| start + i as f64 * step).collect()
}

/// Tick positions for a log axis covering [lo, hi] (both > 0): 1, 2 and 5 times powers of
/// ten, from the last at or below `lo` to the first at or above `hi`.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    let mut all = Vec::new();
    for exp in (lo.log10().floor() as i32 - 1)..=(hi.log10().ceil() as i32 + 1) {
        for m in [1.0, 2.0, 5.0] {
            all.push(m * 10f64.powi(exp));
        }
    }
    let first = all
        .iter()
        .rposition(|t| *t <= lo * (1.0 + 1e-9))
        .unwrap_or(0);
    let last = all
        .iter()
        .position(|t| *t >= hi * (1.0 - 1e-9))
        .unwrap_or(all.len() - 1);
    all[first..=last].to_vec()
}

/// Whether every value is a whole number: swept thread counts or -j levels are their own
/// best ticks; measured values such as 0.336 s are not.
fn all_whole(values: &[f64]) -> bool {
    values.iter().all(|v| (v - v.round()).abs() < 1e-9)
}

fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let s = crate::table::sig(v, 3);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Renders panels stacked vertically, sharing the x axis.
pub fn render(x: &XAxis, panels: &[Panel]) -> String {
    render_with(x, panels, Style::Lines)
}

/// Like [`render`], but points only (no connecting lines): for scatter plots of many
/// datapoints, such as latency against silent time.
pub fn render_scatter(x: &XAxis, panels: &[Panel]) -> String {
    render_with(x, panels, Style::Points)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Style {
    Lines,
    Points,
}

fn render_with(x: &XAxis, panels: &[Panel], style: Style) -> String {
    let height = PANEL_HEIGHT * panels.len() as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, panel) in panels.iter().enumerate() {
        panel_svg(&mut out, x, panel, i as f64 * PANEL_HEIGHT, style);
    }
    out.push_str("</svg>\n");
    out
}

fn panel_svg(out: &mut String, x: &XAxis, panel: &Panel, y0: f64, style: Style) {
    let points: Vec<(f64, f64)> = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    let (x_label, (xmin, xmax)) = match x {
        XAxis::Numeric { label } => (label.as_str(), min_max(points.iter().map(|p| p.0))),
        XAxis::Categories { label, names } => (label.as_str(), (-0.5, names.len() as f64 - 0.5)),
    };
    let (ymin, ymax) = min_max(points.iter().map(|p| p.1));
    let yticks = ticks(ymin.min(0.0), ymax);
    let (ylo, yhi) = (yticks[0], *yticks.last().unwrap_or(&ymax));
    let xticks: Vec<(f64, String)> = match x {
        XAxis::Numeric { .. } => {
            // A few swept values (thread counts, -j levels) are their own best ticks.
            let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
            xs.sort_by(f64::total_cmp);
            xs.dedup();
            let chosen = if xs.len() <= 12 && all_whole(&xs) {
                xs
            } else {
                ticks(xmin, xmax)
                    .into_iter()
                    .filter(|t| *t >= xmin - 1e-9 && *t <= xmax + 1e-9)
                    .collect()
            };
            chosen.into_iter().map(|t| (t, tick_label(t))).collect()
        }
        XAxis::Categories { names, .. } => names
            .iter()
            .enumerate()
            .map(|(i, n)| (i as f64, n.clone()))
            .collect(),
    };
    let (xlo, xhi) = if xmax > xmin {
        (xmin, xmax)
    } else {
        (xmin - 1.0, xmax + 1.0)
    };
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = PANEL_HEIGHT - TOP - BOTTOM;
    let px = |v: f64| LEFT + (v - xlo) / (xhi - xlo) * plot_w;
    let py = |v: f64| y0 + TOP + plot_h - (v - ylo) / (yhi - ylo).max(f64::MIN_POSITIVE) * plot_h;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        LEFT,
        y0 + 22.0,
        escape(&panel.title)
    );
    let (bottom, top) = (y0 + TOP + plot_h, y0 + TOP);
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="black"/>"#,
        LEFT + plot_w
    );
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{bottom}" stroke="black"/>"#
    );
    for t in &yticks {
        let y = py(*t);
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            tick_label(*t)
        );
    }
    for (t, name) in &xticks {
        let xx = px(*t);
        let _ = writeln!(
            out,
            r#"<line x1="{xx:.1}" y1="{bottom}" x2="{xx:.1}" y2="{}" stroke="black"/><text x="{xx:.1}" y="{}" text-anchor="middle">{}</text>"#,
            bottom + 5.0,
            bottom + 18.0,
            escape(name)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        bottom + 38.0,
        escape(x_label)
    );
    let _ = writeln!(
        out,
        r#"<text x="18" y="{0:.1}" text-anchor="middle" transform="rotate(-90 18 {0:.1})">{1}</text>"#,
        top + plot_h / 2.0,
        escape(&panel.y_label)
    );
    for (i, s) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|(a, b)| format!("{:.1},{:.1}", px(*a), py(*b)))
            .collect();
        let radius = match style {
            Style::Lines => {
                let _ = writeln!(
                    out,
                    r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                    pts.join(" ")
                );
                "3.5"
            }
            Style::Points => "1.5",
        };
        for p in &s.points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="{radius}" fill="{color}"/>"#,
                px(p.0),
                py(p.1)
            );
        }
        let ly = top + 14.0 + i as f64 * 18.0;
        let lx = LEFT + plot_w + 14.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            lx + 18.0,
            lx + 24.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
}

/// One row of an interval chart: a value and its confidence interval, when known.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    pub label: String,
    pub value: f64,
    pub ci: Option<[f64; 2]>,
}

/// A forest plot: one row per interval, the value as a dot and its interval as a bar, and a
/// dashed vertical line at `reference` (e.g. a ratio of 1: no change). Rows without an
/// interval show the dot only. When every value is positive (ratios), the axis is
/// logarithmic: a ratio of 78 and one of 1.05 both stay readable, and 0.5 and 2 lie
/// equally far from 1.
pub fn render_intervals(title: &str, x_label: &str, rows: &[Interval], reference: f64) -> String {
    let left = 170.0;
    let right = 40.0;
    let row_h = 24.0;
    let top = TOP;
    let plot_w = WIDTH - left - right;
    let plot_h = row_h * rows.len().max(1) as f64;
    let height = top + plot_h + BOTTOM;
    let values = rows
        .iter()
        .flat_map(|r| {
            let mut v = vec![r.value];
            if let Some([lo, hi]) = r.ci {
                v.extend([lo, hi]);
            }
            v
        })
        .filter(|v| v.is_finite())
        .chain([reference]);
    let (lo, hi) = min_max(values);
    let log = lo > 0.0;
    let xticks = if log {
        log_ticks(lo, hi)
    } else {
        ticks(lo, hi)
    };
    let (xlo, xhi) = (xticks[0], *xticks.last().unwrap_or(&hi));
    let scale = |v: f64| if log { v.log10() } else { v };
    let px = |v: f64| {
        left + (scale(v) - scale(xlo)) / (scale(xhi) - scale(xlo)).max(f64::MIN_POSITIVE) * plot_w
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12" role="img" aria-label="{}">"#,
        escape(title)
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{left}" y="22" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let bottom = top + plot_h;
    for t in &xticks {
        let x = px(*t);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom}" stroke="#ddd"/><line x1="{x:.1}" y1="{bottom}" x2="{x:.1}" y2="{}" stroke="black"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 5.0,
            bottom + 18.0,
            tick_label(*t)
        );
    }
    let _ = writeln!(
        out,
        r#"<line x1="{left}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="black"/>"#,
        left + plot_w
    );
    let rx = px(reference);
    let _ = writeln!(
        out,
        r#"<line x1="{rx:.1}" y1="{top}" x2="{rx:.1}" y2="{bottom}" stroke="black" stroke-dasharray="4 3"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        bottom + 38.0,
        escape(x_label)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = top + row_h * (i as f64 + 0.5);
        let label: String = r.label.trim().chars().take(26).collect();
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + 4.0,
            escape(&label)
        );
        let tip = match r.ci {
            Some([a, b]) => format!(
                "{}: {} (95% CI {} … {})",
                r.label.trim(),
                tick_label(r.value),
                tick_label(a),
                tick_label(b)
            ),
            None => format!("{}: {} (no interval)", r.label.trim(), tick_label(r.value)),
        };
        let _ = writeln!(out, "<g><title>{}</title>", escape(&tip));
        if let Some([a, b]) = r.ci.filter(|[a, b]| a.is_finite() && b.is_finite()) {
            let _ = writeln!(
                out,
                r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="3"/>"#,
                px(a),
                px(b),
                COLORS[0]
            );
        }
        if r.value.is_finite() {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{y:.1}" r="4.5" fill="{}"/>"#,
                px(r.value),
                COLORS[1]
            );
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    out
}

fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 17: a ratio of 78 (ED²P) beside ratios near 1 is drawn on a log axis.
    #[test]
    fn ratio_plots_with_a_wide_range_are_logarithmic() {
        let row = |label: &str, value: f64| Interval {
            label: label.into(),
            value,
            ci: Some([value * 0.9, value * 1.1]),
        };
        let svg = render_intervals("r", "ratio", &[row("time", 1.05), row("ed2p", 78.0)], 1.0);
        for tick in [">1<", ">10<", ">100<"] {
            assert!(svg.contains(tick), "{tick}: {svg}");
        }
        assert!(!svg.contains(">40<"), "a linear axis: {svg}");
    }

    #[test]
    fn log_ticks_are_1_2_5_and_cover_the_range() {
        assert_eq!(
            log_ticks(0.9, 78.0),
            vec![0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(log_ticks(1.0, 1.0), vec![0.5, 1.0, 2.0]);
    }

    #[test]
    fn measured_x_values_get_round_ticks_and_counts_keep_their_own() {
        let panel = |xs: &[f64]| Panel {
            title: "t".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "s".into(),
                points: xs.iter().map(|&x| (x, 1.0)).collect(),
            }],
        };
        let x = XAxis::Numeric { label: "x".into() };
        let measured = render(&x, &[panel(&[0.336, 0.671, 1.007])]);
        assert!(
            !measured.contains(">0.336<") && measured.contains(">0.4<"),
            "{measured}"
        );
        let counts = render(&x, &[panel(&[1.0, 2.0, 4.0])]);
        assert!(
            counts.contains(">4<") && !counts.contains(">3<"),
            "{counts}"
        );
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 43.0), vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        let t = ticks(0.0, 0.9);
        assert!(t[0] <= 0.0 && *t.last().unwrap() >= 0.9, "{t:?}");
    }

    #[test]
    fn renders_escaped_well_formed_svg() {
        let svg = render(
            &XAxis::Numeric {
                label: "threads".into(),
            },
            &[Panel {
                title: "energy <per run>".into(),
                y_label: "energy [J]".into(),
                series: vec![Series {
                    name: "a&b".into(),
                    points: vec![(1.0, 10.0), (2.0, 7.0), (4.0, 8.0)],
                }],
            }],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("energy &lt;per run&gt;") && svg.contains("a&amp;b"));
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn intervals_place_dots_bars_and_the_reference() {
        let svg = render_intervals(
            "ratios <x>",
            "candidate / baseline",
            &[
                Interval {
                    label: "time".into(),
                    value: 1.1,
                    ci: Some([1.0, 1.2]),
                },
                Interval {
                    label: "<i>e</i>".into(),
                    value: 0.9,
                    ci: None,
                },
            ],
            1.0,
        );
        assert!(svg.contains("ratios &lt;x&gt;") && svg.contains("&lt;i&gt;e&lt;/i&gt;"));
        assert!(!svg.contains("<i>"));
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg.matches("stroke-width=\"3\"").count(), 1);
        assert_eq!(svg.matches("stroke-dasharray").count(), 1);
        assert!(svg.contains("(95% CI 1 … 1.2)"), "{svg}");
    }
}
