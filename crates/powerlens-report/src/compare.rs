//! Views of a comparison: per-label table, ratio tables per candidate, and the verdicts.

use powerlens_core::compare::{CandidateComparison, Comparison, LabelStats};
use powerlens_core::stats::Summary;

use crate::page::Page;
use crate::svg::{self, Interval};
use crate::table::{csv_field, precise, sig, Table};

/// A mean and its 95% interval as `lo … hi` ([`crate::run::ci`]): the interval of a positive
/// figure is on the log scale, not symmetric, so never `± half-width` (issue 51).
fn mean_ci(s: &Summary) -> (String, String) {
    (precise(s.mean), crate::run::ci(s))
}

/// Figures in the order they are shown, with their display names.
const FIGURES: [(&str, &str); 6] = [
    ("time", "time"),
    ("energy", "energy"),
    ("power", "average power"),
    ("edp", "energy × delay"),
    ("ed2p", "energy × delay²"),
    ("perf_per_watt", "work per joule"),
];

fn figure_rows(c: &CandidateComparison) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = FIGURES
        .iter()
        .map(|(k, n)| (k.to_string(), n.to_string()))
        .collect();
    rows.extend(
        c.ratios
            .keys()
            .filter(|k| k.starts_with("energy:"))
            .map(|k| (k.clone(), format!("  {}", &k["energy:".len()..]))),
    );
    rows
}

/// One row per label: runs, means with their 95% intervals, power, EDP, work per joule.
fn labels_table(c: &Comparison) -> Table {
    let mut t = Table::new([
        "label", "runs", "time s", "95% CI", "energy J", "95% CI", "power W", "EDP J·s", "work/J",
    ]);
    for l in &c.labels {
        let (tm, tci) = mean_ci(&l.wall_s);
        let (em, eci) = mean_ci(&l.energy_j);
        t.row([
            l.label.clone(),
            l.wall_s.n.to_string(),
            tm,
            tci,
            em,
            eci,
            sig(l.power_w.mean, 4),
            sig(l.edp_js.mean, 4),
            sig(l.perf_per_watt.mean, 4),
        ]);
    }
    t
}

/// One candidate's ratios to the baseline, per figure.
fn ratios_table(cand: &CandidateComparison) -> Table {
    let mut t = Table::new([
        "figure",
        "ratio",
        "change",
        "95% CI of ratio",
        "significant",
    ]);
    for (key, name) in figure_rows(cand) {
        let Some(ratio) = cand.ratios.get(&key) else {
            continue;
        };
        t.row([
            name,
            format!("{ratio:.4}"),
            format!("{:+.1}%", (ratio - 1.0) * 100.0),
            cand.ratio_ci95
                .get(&key)
                .map(|[lo, hi]| format!("{lo:.4} … {hi:.4}"))
                .unwrap_or_else(|| "n/a".into()),
            match cand.significant.get(&key) {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "n/a (need ≥ 2 runs)".into(),
            },
        ]);
    }
    t
}

fn against(cand: &CandidateComparison) -> String {
    format!(
        "{} against {} (ratio = candidate / baseline)",
        cand.label, cand.baseline
    )
}

/// The notes of the battery figures, each once.
fn battery_notes(c: &Comparison) -> Vec<&str> {
    let mut notes: Vec<&str> = Vec::new();
    for n in c
        .battery
        .iter()
        .filter_map(|l| l.report.life.as_ref())
        .flat_map(|life| &life.notes)
    {
        if !notes.contains(&n.as_str()) {
            notes.push(n);
        }
    }
    notes
}

/// "run 6", "runs 2, 5".
fn runs(list: &[usize]) -> String {
    let n: Vec<String> = list.iter().map(usize::to_string).collect();
    format!("run{} {}", if n.len() > 1 { "s" } else { "" }, n.join(", "))
}

/// What a reader of a verdict must know of one label's runs: outliers, failed runs, and
/// the machine's other load while they ran (issue 51: only `runs show` warned of an
/// outlier that decided "no significant difference").
pub fn label_warnings(l: &LabelStats) -> Vec<String> {
    let mut out = Vec::new();
    for (figure, list) in &l.outlier_runs {
        let what = if figure == "wall_s" {
            "wall time"
        } else {
            "energy"
        };
        out.push(format!(
            "{}: {} an outlier in {what} (modified z-score > 3.5): it widens the intervals this verdict rests on; run again on a quiet machine or with more --runs",
            l.label,
            runs(list) + if list.len() > 1 { " are" } else { " is" }
        ));
    }
    if !l.failed_runs.is_empty() {
        out.push(format!(
            "{}: {} of {} failed (kept by --ignore-failure): their figures are in the comparison",
            l.label,
            runs(&l.failed_runs),
            l.wall_s.n
        ));
    }
    match (&l.other_cpu_s, &l.other_cpu_share) {
        (Some(cpu), Some(share)) => {
            // Said when it matters; the figures are in JSON for every label.
            if l.busy {
                out.push(format!(
                    "other processes used {} CPU-s per run, {:.1}% of the CPUs (max {:.1}%), while {}'s runs ran (/proc/stat less the command's own CPU time): the machine was busy, so the runs competed for CPUs, caches and power",
                    sig(cpu.mean, 3),
                    share.mean * 100.0,
                    share.max * 100.0,
                    l.label
                ));
            }
        }
        _ => {
            if let Some(why) = &l.other_load_unavailable {
                out.push(format!(
                    "the machine's other load during {}'s runs is unknown: {why}",
                    l.label
                ));
            }
        }
    }
    out
}

/// The warnings of the baseline's and the candidate's runs, beside its verdict.
fn verdict_warnings(c: &Comparison, cand: &CandidateComparison) -> Vec<String> {
    c.labels
        .iter()
        .filter(|l| l.label == cand.baseline || l.label == cand.label)
        .flat_map(label_warnings)
        .collect()
}

/// The terminal view. `provenance` says where the numbers come from.
pub fn text(c: &Comparison, provenance: &str) -> String {
    let mut out = format!("baseline: {}\nenergy:   {provenance}\n\n", c.baseline);
    out.push_str(&labels_table(c).render());
    if !c.battery.is_empty() {
        out.push_str("\non battery (one charge):\n");
        out.push_str(&crate::battery_view::table(&c.battery).render());
        for n in battery_notes(c) {
            out.push_str(&format!("battery note: {n}\n"));
        }
    }
    for cand in &c.candidates {
        out.push_str(&format!("\n{}\n", against(cand)));
        out.push_str(&ratios_table(cand).render());
    }
    out.push('\n');
    for cand in &c.candidates {
        out.push_str(&format!("verdict: {}\n", cand.verdict));
        for w in verdict_warnings(c, cand) {
            out.push_str(&format!("  warning: {w}\n"));
        }
    }
    out
}

/// `compare --html`: the verdicts, the labels' table, and per candidate its ratios with
/// 95% intervals as a chart (a dashed line at 1: no change) and as a table. `notes` (an
/// early stop) are shown under the verdicts. Labels are escaped.
pub fn html(c: &Comparison, provenance: &str, notes: &[String]) -> String {
    let mut page = Page::new(&format!("powerlens compare: baseline {}", c.baseline));
    page.p(&format!("Energy: {provenance}."));
    page.h2("Verdict");
    for cand in &c.candidates {
        page.p(&cand.verdict);
        for w in verdict_warnings(c, cand) {
            page.note(&w);
        }
    }
    for n in notes {
        page.note(n);
    }
    page.h2("Means per label (click a column to sort)");
    page.note("95% CI: the confidence interval of the mean, lo … hi (on the log scale for positive figures, so not symmetric about the mean).");
    page.table(&labels_table(c));
    if !c.battery.is_empty() {
        page.h2("On battery (one charge)");
        page.table(&crate::battery_view::table(&c.battery));
        for n in battery_notes(c) {
            page.note(n);
        }
    }
    for cand in &c.candidates {
        page.h2(&against(cand));
        let rows: Vec<Interval> = figure_rows(cand)
            .into_iter()
            .filter_map(|(key, name)| {
                Some(Interval {
                    label: name,
                    value: *cand.ratios.get(&key)?,
                    ci: cand.ratio_ci95.get(&key).copied(),
                })
            })
            .collect();
        page.svg(&svg::render_intervals(
            &format!("{} / {}", cand.label, cand.baseline),
            "ratio candidate / baseline (dot), 95% confidence interval (bar); dashed: 1 = no change",
            &rows,
            1.0,
        ));
        page.table(&ratios_table(cand));
    }
    page.finish()
}

/// CSV: one line per label (means), then one line per candidate figure (ratios).
pub fn csv(c: &Comparison) -> String {
    let mut out = String::from("kind,label,baseline,figure,value,ci_low,ci_high,significant\n");
    for l in &c.labels {
        for (figure, s) in l.figures() {
            let (lo, hi) = s
                .ci95
                .map(|[a, b]| (a.to_string(), b.to_string()))
                .unwrap_or_default();
            out.push_str(&format!(
                "mean,{},,{figure},{},{lo},{hi},\n",
                csv_field(&l.label),
                s.mean
            ));
        }
    }
    for cand in &c.candidates {
        for (key, ratio) in &cand.ratios {
            let (lo, hi) = cand
                .ratio_ci95
                .get(key)
                .map(|[a, b]| (a.to_string(), b.to_string()))
                .unwrap_or_default();
            let sig = cand
                .significant
                .get(key)
                .map(|b| b.to_string())
                .unwrap_or_default();
            out.push_str(&format!(
                "ratio,{},{},{},{ratio},{lo},{hi},{sig}\n",
                csv_field(&cand.label),
                csv_field(&cand.baseline),
                csv_field(key)
            ));
        }
    }
    out
}

/// Markdown: the label table and one verdict line per candidate.
pub fn markdown(c: &Comparison, provenance: &str) -> String {
    let mut out = format!(
        "Baseline **{}** — energy {provenance}\n\n| label | runs | time s | energy J | power W | EDP J·s |\n|:--|--:|--:|--:|--:|--:|\n",
        c.baseline
    );
    for l in &c.labels {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            l.label.replace('|', "\\|"),
            l.wall_s.n,
            sig(l.wall_s.mean, 4),
            sig(l.energy_j.mean, 4),
            sig(l.power_w.mean, 4),
            sig(l.edp_js.mean, 4)
        ));
    }
    out.push('\n');
    for cand in &c.candidates {
        out.push_str(&format!("- {}\n", cand.verdict));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::compare::{compare, groups_from_csv};

    fn brown() -> Comparison {
        let csv = "label,seconds,watts\nperformance,209,193.355\npowersaving,228,189.416\n";
        compare(&groups_from_csv(csv.lines()).unwrap(), 1.0).unwrap()
    }

    #[test]
    fn text_shows_joules_ratios_and_verdict() {
        let t = text(&brown(), "imported from CSV");
        assert!(t.contains("40411.195"), "{t}");
        assert!(t.contains("43186.848"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("time") && l.contains("+9.1%")),
            "{t}"
        );
        assert!(
            t.contains("verdict: powersaving takes 9.1% longer and needs 6.9% more energy"),
            "{t}"
        );
    }

    /// Issue 51 (4): three runs of 0.8, 0.9 and 2.8 s have a log-scale interval that is
    /// not symmetric about their mean: printed as its two ends, never as ± half-width.
    #[test]
    fn an_asymmetric_interval_prints_as_its_two_ends() {
        let csv = "label,seconds,joules\nA,0.8,8\nA,0.9,9\nA,2.8,28\nB,1,10\nB,1.1,11\n";
        let c = compare(&groups_from_csv(csv.lines()).unwrap(), 1.0).unwrap();
        let [lo, hi] = c.labels[0].wall_s.ci95.unwrap();
        let mean = c.labels[0].wall_s.mean;
        assert!((hi - mean) - (mean - lo) > 1.0, "{lo} … {hi} about {mean}");
        let t = text(&c, "imported");
        let row = t.lines().find(|l| l.starts_with("A ")).expect(&t);
        assert!(
            row.contains(&format!("{} … {}", sig(lo, 4), sig(hi, 4))),
            "{row}"
        );
        assert!(!t.contains('±'), "{t}");
    }

    #[test]
    fn csv_and_markdown() {
        let c = csv(&brown());
        assert!(
            c.lines()
                .any(|l| l.starts_with("mean,performance,,energy_j,40411.195")),
            "{c}"
        );
        assert!(
            c.lines()
                .any(|l| l.starts_with("ratio,powersaving,performance,energy,1.0686")),
            "{c}"
        );
        let md = markdown(&brown(), "x");
        let h = html(&brown(), "imported <csv>", &[]);
        assert!(h.contains("Energy: imported &lt;csv&gt;."), "{h}");
        assert!(h.contains("<p>powersaving takes 9.1% longer and needs 6.9% more energy"));
        assert!(h.contains("aria-label=\"powersaving / performance\""));
        // One dot per figure: time, energy, power, EDP, ED²P, work per joule.
        assert_eq!(h.matches("<circle").count(), 6, "{h}");
        assert!(md.contains("| powersaving | 1 | 228.0 |"), "{md}");
    }
}
