//! Comparing configurations by the energy to retire the same work.
//!
//! Each label (configuration) has repeated samples of wall time and energy. Against the
//! baseline (the first label) every candidate gets, per figure, the ratio of means
//! (candidate / baseline) with a 95% confidence interval (on the log scale for positive
//! samples, by Fieller's theorem otherwise), the difference of means with Welch's interval,
//! and whether the change is significant: exactly when the ratio's interval excludes 1. Samples of different labels are treated as independent,
//! which is conservative for interleaved runs.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::battery_life::{self, LabelBattery};
use crate::stats::{outliers, t_quantile, Summary};
use crate::verdict::{self, Ratios, VerdictClass};

/// One repeat of one configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    pub wall_s: f64,
    pub energy_j: f64,
    /// Average power over the interval the energy covers: the wall time, or a fixed window
    /// (`--window`), in which case it is not `energy_j / wall_s`.
    pub power_w: f64,
    /// Energy per domain, name → joules (may be empty, e.g. for CSV input).
    pub domains: BTreeMap<String, f64>,
    /// The command failed (kept with `--ignore-failure`).
    pub failed: bool,
    /// Other processes' CPU-seconds and share of the CPUs during the run
    /// ([`crate::run::OtherLoad`]); `None` when not measured, with the reason below.
    pub other_cpu_s: Option<f64>,
    pub other_cpu_share: Option<f64>,
    pub other_load_unavailable: Option<String>,
}

/// The repeats of one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub label: String,
    pub samples: Vec<Sample>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CompareError {
    #[error("need at least two labels to compare, got {0}")]
    TooFewLabels(usize),
    #[error("label {0:?} has no rows")]
    EmptyLabel(String),
    #[error("label {label:?}: {what} must be a positive number, got {value}{}", if *what == "energy" && *value == 0.0 { " (a run shorter than the energy counter's update interval measures 0 J: lengthen it or measure a fixed --window)" } else { "" })]
    NotPositive {
        label: String,
        what: &'static str,
        value: f64,
    },
    #[error("label {label:?}: a run's {what} is {value:e}, outside the {min:e} to {max:e} powerlens compares (its statistics would overflow); check the input's units")]
    OutOfRange {
        label: String,
        what: &'static str,
        value: f64,
        min: f64,
        max: f64,
    },
    #[error("mismatched energy domains: {baseline:?} has [{baseline_domains}] but {label:?} has [{label_domains}]; compare results measured with the same meter")]
    MismatchedDomains {
        baseline: String,
        baseline_domains: String,
        label: String,
        label_domains: String,
    },
}

/// Per-label summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelStats {
    pub label: String,
    pub wall_s: Summary,
    pub energy_j: Summary,
    pub power_w: Summary,
    pub edp_js: Summary,
    pub ed2p_js2: Summary,
    /// Units of work per joule (`--work`, default 1 unit per run): throughput per watt.
    pub perf_per_watt: Summary,
    pub domains: BTreeMap<String, Summary>,
    /// Other processes' CPU-seconds per run, and their share of the CPUs (0–1), while
    /// this label's runs ran (`/proc/stat` less the command's own CPU); absent when not
    /// measured, with `other_load_unavailable` saying why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_s: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_share: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_load_unavailable: Option<String>,
    /// Whether other processes' mean share was above [`crate::run::BUSY_OTHER_CPU_SHARE`].
    #[serde(default)]
    pub busy: bool,
    /// Runs (numbered from 1) that are statistical outliers, per figure (`wall_s`,
    /// `energy_j`), by the modified z-score ([`crate::stats::outliers`]).
    #[serde(default)]
    pub outlier_runs: BTreeMap<String, Vec<usize>>,
    /// Runs (numbered from 1) whose command failed (kept with `--ignore-failure`).
    #[serde(default)]
    pub failed_runs: Vec<usize>,
}

impl LabelStats {
    /// Every whole-run figure with its JSON key, in the order the views list them.
    pub fn figures(&self) -> [(&'static str, &Summary); 6] {
        [
            ("wall_s", &self.wall_s),
            ("energy_j", &self.energy_j),
            ("power_w", &self.power_w),
            ("edp_js", &self.edp_js),
            ("ed2p_js2", &self.ed2p_js2),
            ("perf_per_watt", &self.perf_per_watt),
        ]
    }
}

/// A candidate against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateComparison {
    pub label: String,
    pub baseline: String,
    /// Ratio of means, candidate / baseline, per figure.
    pub ratios: BTreeMap<String, f64>,
    /// 95% confidence interval of each ratio (log scale for positive samples, else
    /// Fieller); absent when it cannot be bounded
    /// (a single sample per label, or a denominator not clearly above zero).
    pub ratio_ci95: BTreeMap<String, [f64; 2]>,
    /// Difference of means, candidate − baseline, per figure.
    pub differences: BTreeMap<String, f64>,
    /// 95% confidence interval of each difference (Welch).
    pub difference_ci95: BTreeMap<String, [f64; 2]>,
    /// Whether each ratio's interval excludes 1 (absent without an interval).
    pub significant: BTreeMap<String, bool>,
    pub class: VerdictClass,
    pub verdict: String,
    /// Where the energy behind the verdict comes from (`measured (…)`, `estimated (…)`),
    /// once the caller says ([`Comparison::energy_from`]); an estimate also says so in
    /// `verdict` itself.
    #[serde(default)]
    pub provenance: Option<String>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub baseline: String,
    pub labels: Vec<LabelStats>,
    pub candidates: Vec<CandidateComparison>,
    /// Each label's battery-life figures (on a battery, or with `--battery-wh`), once the
    /// caller gives them ([`Comparison::battery_from`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub battery: Vec<LabelBattery>,
}

impl Comparison {
    /// Adds every label's battery figures, and to every verdict how much work the
    /// baseline and the candidate retire per charge (and whether one runs out before
    /// finishing the job). Call before [`Comparison::energy_from`], so that an estimate's
    /// qualifier ends the verdict. `work` is the units of work one run retires.
    pub fn battery_from(&mut self, labels: Vec<LabelBattery>, work: f64) {
        let find = |label: &str| labels.iter().find(|l| l.label == label);
        for c in &mut self.candidates {
            if let Some(s) = find(&c.baseline)
                .zip(find(&c.label))
                .and_then(|(b, l)| battery_life::per_charge_sentence(b, l, work))
            {
                c.verdict.push(' ');
                c.verdict.push_str(&s);
            }
        }
        self.battery = labels;
    }

    /// Records where the compared energy comes from beside every verdict, and makes a
    /// verdict on estimated energy say so in its sentence.
    pub fn energy_from(&mut self, provenance: &crate::provenance::Provenance) {
        let qualifier = verdict::estimated_qualifier(provenance);
        for c in &mut self.candidates {
            c.provenance = Some(provenance.label());
            if let Some(q) = &qualifier {
                c.verdict.push_str(q);
            }
        }
    }
}

/// The runs of a `run` result as comparison samples.
pub fn samples_of(result: &crate::run::RunResult) -> Vec<Sample> {
    result
        .runs
        .iter()
        .map(|r| Sample {
            wall_s: r.wall_s,
            energy_j: r.energy_j,
            power_w: r.power_w,
            domains: r.domains.clone(),
            failed: !r.exit.success(),
            other_cpu_s: r.other_cpu_s,
            other_cpu_share: r.other_cpu_share,
            other_load_unavailable: match (r.other_cpu_s, &r.other_load_unavailable) {
                (None, None) => {
                    Some("a result saved before powerlens measured the machine's other load".into())
                }
                (_, why) => why.clone(),
            },
        })
        .collect()
}

/// The figures compared, with how each is derived from a sample.
type Figure = (&'static str, fn(&Sample, f64) -> f64);
const FIGURES: [Figure; 6] = [
    ("time", |s, _| s.wall_s),
    ("energy", |s, _| s.energy_j),
    ("power", |s, _| s.power_w),
    ("edp", |s, _| s.energy_j * s.wall_s),
    ("ed2p", |s, _| s.energy_j * s.wall_s * s.wall_s),
    ("perf_per_watt", |s, work| work / s.energy_j),
];

fn values(g: &Group, f: fn(&Sample, f64) -> f64, work: f64) -> Vec<f64> {
    g.samples.iter().map(|s| f(s, work)).collect()
}

/// Compares every label against the first. `work` is the units of work one run retires.
pub fn compare(groups: &[Group], work: f64) -> Result<Comparison, CompareError> {
    if groups.len() < 2 {
        return Err(CompareError::TooFewLabels(groups.len()));
    }
    for g in groups {
        validate(g, work)?;
    }
    check_domains(groups)?;
    let labels = groups.iter().map(|g| label_stats(g, work)).collect();
    let baseline = &groups[0];
    let candidates = groups[1..]
        .iter()
        .map(|c| candidate(baseline, c, work))
        .collect();
    Ok(Comparison {
        baseline: baseline.label.clone(),
        labels,
        candidates,
        battery: Vec::new(),
    })
}

/// The range every figure of a run must lie in: beyond it, sums of squares overflow and
/// means lose all precision (fuzzing found 5e-324 s, a positive and finite time, giving an
/// infinite power). Real runs are nanoseconds to days, microjoules to megajoules.
const FIGURE_RANGE: (f64, f64) = (1e-30, 1e30);

fn validate(g: &Group, work: f64) -> Result<(), CompareError> {
    if g.samples.is_empty() {
        return Err(CompareError::EmptyLabel(g.label.clone()));
    }
    for s in &g.samples {
        for (what, value) in [("seconds", s.wall_s), ("energy", s.energy_j)] {
            if !(value.is_finite() && value > 0.0) {
                return Err(CompareError::NotPositive {
                    label: g.label.clone(),
                    what,
                    value,
                });
            }
        }
        let (min, max) = FIGURE_RANGE;
        for (what, figure) in FIGURES {
            let value = figure(s, work);
            if !(min..=max).contains(&value) {
                return Err(CompareError::OutOfRange {
                    label: g.label.clone(),
                    what,
                    value,
                    min,
                    max,
                });
            }
        }
    }
    Ok(())
}

fn domain_set(g: &Group) -> BTreeSet<&String> {
    g.samples.iter().flat_map(|s| s.domains.keys()).collect()
}

fn check_domains(groups: &[Group]) -> Result<(), CompareError> {
    let base = domain_set(&groups[0]);
    for g in &groups[1..] {
        let other = domain_set(g);
        if other != base {
            let join =
                |s: &BTreeSet<&String>| s.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ");
            return Err(CompareError::MismatchedDomains {
                baseline: groups[0].label.clone(),
                baseline_domains: join(&base),
                label: g.label.clone(),
                label_domains: join(&other),
            });
        }
    }
    Ok(())
}

fn label_stats(g: &Group, work: f64) -> LabelStats {
    let summary =
        |i: usize| Summary::of(&values(g, FIGURES[i].1, work)).expect("validated non-empty");
    let domains = domain_set(g)
        .into_iter()
        .filter_map(|d| {
            let v: Vec<f64> = g
                .samples
                .iter()
                .filter_map(|s| s.domains.get(d).copied())
                .collect();
            Summary::of(&v).map(|s| (d.clone(), s))
        })
        .collect();
    let other = |f: fn(&Sample) -> Option<f64>| -> Option<Summary> {
        Summary::of(&g.samples.iter().map(f).collect::<Option<Vec<f64>>>()?)
    };
    let other_cpu_share = other(|s| s.other_cpu_share);
    let outlier_runs = [("wall_s", 0), ("energy_j", 1)]
        .into_iter()
        .filter_map(|(key, i)| {
            let runs: Vec<usize> = outliers(&values(g, FIGURES[i].1, work))
                .into_iter()
                .map(|r| r + 1)
                .collect();
            (!runs.is_empty()).then(|| (key.to_string(), runs))
        })
        .collect();
    LabelStats {
        label: g.label.clone(),
        wall_s: summary(0),
        energy_j: summary(1),
        power_w: summary(2),
        edp_js: summary(3),
        ed2p_js2: summary(4),
        perf_per_watt: summary(5),
        domains,
        other_cpu_s: other(|s| s.other_cpu_s),
        busy: other_cpu_share
            .as_ref()
            .is_some_and(|s| s.mean > crate::run::BUSY_OTHER_CPU_SHARE),
        other_cpu_share,
        other_load_unavailable: g
            .samples
            .iter()
            .find(|s| s.other_cpu_share.is_none())
            .map(|s| {
                s.other_load_unavailable.clone().unwrap_or_else(|| {
                    "figures measured elsewhere (CSV): no reading of this machine".into()
                })
            }),
        outlier_runs,
        failed_runs: (1..=g.samples.len())
            .filter(|i| g.samples[i - 1].failed)
            .collect(),
    }
}

fn candidate(baseline: &Group, cand: &Group, work: f64) -> CandidateComparison {
    let mut out = CandidateComparison {
        label: cand.label.clone(),
        baseline: baseline.label.clone(),
        ratios: BTreeMap::new(),
        ratio_ci95: BTreeMap::new(),
        differences: BTreeMap::new(),
        difference_ci95: BTreeMap::new(),
        significant: BTreeMap::new(),
        class: VerdictClass::Equivalent,
        verdict: String::new(),
        provenance: None,
    };
    let mut add = |name: String, b: &[f64], c: &[f64]| {
        let (mb, mc) = (mean(b), mean(c));
        out.ratios.insert(name.clone(), mc / mb);
        out.differences.insert(name.clone(), mc - mb);
        let difference = welch_difference_ci(c, b);
        if let Some(ci) = difference {
            out.difference_ci95.insert(name.clone(), ci);
        }
        if let Some(ci) = ratio_ci(c, b) {
            // Significant exactly when the ratio's interval, the one every view prints,
            // excludes 1 (issue 51): deciding on Welch's difference interval as well, which
            // is not printed, made `compare` print an interval excluding 1 beside "no".
            out.significant.insert(name.clone(), excludes_one(ci));
            out.ratio_ci95.insert(name, ci);
        }
    };
    for (name, f) in FIGURES {
        add(
            name.to_string(),
            &values(baseline, f, work),
            &values(cand, f, work),
        );
    }
    for d in domain_set(baseline) {
        let get = |g: &Group| -> Vec<f64> {
            g.samples
                .iter()
                .filter_map(|s| s.domains.get(d).copied())
                .collect()
        };
        let (b, c) = (get(baseline), get(cand));
        if !b.is_empty() && !c.is_empty() && mean(&b) > 0.0 {
            add(format!("energy:{d}"), &b, &c);
        }
    }
    let ratios = Ratios {
        time: out.ratios["time"],
        energy: out.ratios["energy"],
        power: out.ratios["power"],
        edp: out.ratios["edp"],
    };
    let changed = |name: &str, ratio: f64| match out.significant.get(name) {
        Some(sig) => *sig,
        None => (ratio - 1.0).abs() >= verdict::NEGLIGIBLE,
    };
    out.class = verdict::classify_changes(
        changed("time", ratios.time).then_some(ratios.time),
        changed("energy", ratios.energy).then_some(ratios.energy),
    );
    let ci = |name: &str| out.ratio_ci95.get(name).copied();
    out.verdict =
        verdict::sentence_with_ci(&cand.label, &ratios, ci("time"), ci("energy"), out.class);
    out
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Whether a ratio's interval excludes 1, no change: what `significant` says.
pub fn excludes_one([lo, hi]: [f64; 2]) -> bool {
    lo > 1.0 || hi < 1.0
}

/// Variance of the mean (s² / n); `None` with fewer than two values.
fn var_of_mean(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let m = mean(v);
    Some(v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64 / v.len() as f64)
}

/// Welch–Satterthwaite degrees of freedom for a sum of two variances of means.
fn welch_df(va: f64, na: usize, vb: f64, nb: usize) -> f64 {
    let num = (va + vb).powi(2);
    let den = va * va / (na - 1) as f64 + vb * vb / (nb - 1) as f64;
    if den == 0.0 {
        f64::INFINITY
    } else {
        num / den
    }
}

fn t975(df: f64) -> f64 {
    if df.is_finite() {
        t_quantile(0.975, df.max(1.0))
    } else {
        1.959_963_984_540_054
    }
}

/// 95% interval of mean(a) − mean(b) by Welch's t.
pub fn welch_difference_ci(a: &[f64], b: &[f64]) -> Option<[f64; 2]> {
    let (va, vb) = (var_of_mean(a)?, var_of_mean(b)?);
    let d = mean(a) - mean(b);
    let half = t975(welch_df(va, a.len(), vb, b.len())) * (va + vb).sqrt();
    Some([d - half, d + half])
}

/// 95% interval of mean(a) / mean(b): on the log scale when every value is positive
/// ([`log_ratio_ci`], never below zero), else by Fieller's theorem ([`fieller_ratio_ci`]).
pub fn ratio_ci(a: &[f64], b: &[f64]) -> Option<[f64; 2]> {
    if a.iter().chain(b).all(|&x| x > 0.0) {
        log_ratio_ci(a, b)
    } else {
        fieller_ratio_ci(a, b)
    }
}

/// 95% interval of mean(a) / mean(b) for strictly positive samples, on the log scale: by
/// the delta method the variance of ln(mean) is var(mean) / mean², so
/// ln(ratio) ± t · √(va / ma² + vb / mb²), with Welch–Satterthwaite degrees of freedom on
/// those two terms. Both ends are positive, as the ratio of two positive quantities is; a
/// ratio of run times near zero cannot get a negative lower end as Fieller's can.
/// `None` when a sample has fewer than two values.
pub fn log_ratio_ci(a: &[f64], b: &[f64]) -> Option<[f64; 2]> {
    let (va, vb) = (var_of_mean(a)?, var_of_mean(b)?);
    let (ma, mb) = (mean(a), mean(b));
    let (ra, rb) = (va / (ma * ma), vb / (mb * mb));
    let half = t975(welch_df(ra, a.len(), rb, b.len())) * (ra + rb).sqrt();
    let ratio = ma / mb;
    Some([ratio / half.exp(), ratio * half.exp()])
}

/// 95% interval of mean(a) / mean(b) by Fieller's theorem for independent samples, with
/// Welch–Satterthwaite degrees of freedom on the linearized variance. `None` when a sample
/// has fewer than two values or the denominator is not significantly away from zero (the
/// interval would be unbounded).
pub fn fieller_ratio_ci(a: &[f64], b: &[f64]) -> Option<[f64; 2]> {
    let (va, vb) = (var_of_mean(a)?, var_of_mean(b)?);
    let (ma, mb) = (mean(a), mean(b));
    let rho = ma / mb;
    let df = welch_df(va, a.len(), rho * rho * vb, b.len());
    let t2 = t975(df).powi(2);
    let qa = mb * mb - t2 * vb;
    if qa <= 0.0 {
        return None;
    }
    let disc = (ma * mb).powi(2) - qa * (ma * ma - t2 * va);
    let root = disc.max(0.0).sqrt();
    Some([(ma * mb - root) / qa, (ma * mb + root) / qa])
}

/// What a CSV of outside measurements gives per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CsvKind {
    Watts,
    Joules,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CsvError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("the CSV is empty: expected a header `label,seconds,watts` or `label,seconds,joules`")]
    Empty,
}

/// Parses `label,seconds,watts` or `label,seconds,joules` (header required). Rows with one
/// label are repeats; labels keep the order of their first row, so the first is the baseline.
pub fn groups_from_csv<'a>(
    lines: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Group>, CsvError> {
    let mut lines = lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let (hline, header) = lines.next().ok_or(CsvError::Empty)?;
    let cols: Vec<String> = header
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let kind = match cols
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["label", "seconds", "watts"] => CsvKind::Watts,
        ["label", "seconds", "joules"] => CsvKind::Joules,
        _ => {
            return Err(CsvError::Line {
                line: hline,
                message: format!(
                    "header {header:?} must be `label,seconds,watts` or `label,seconds,joules`"
                ),
            })
        }
    };
    let mut groups: Vec<Group> = Vec::new();
    for (line, text) in lines {
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        let [label, seconds, value] = fields.as_slice() else {
            return Err(CsvError::Line {
                line,
                message: format!("expected 3 fields, found {}", fields.len()),
            });
        };
        if label.is_empty() {
            return Err(CsvError::Line {
                line,
                message: "empty label".into(),
            });
        }
        let number = |what: &str, s: &str| -> Result<f64, CsvError> {
            match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
                Ok(v) => Err(CsvError::Line {
                    line,
                    message: format!("{what} must be greater than zero, got {v}"),
                }),
                Err(_) => Err(CsvError::Line {
                    line,
                    message: format!("{what} {s:?} is not a number"),
                }),
            }
        };
        let seconds = number("seconds", seconds)?;
        let energy_j = match kind {
            CsvKind::Watts => number("watts", value)? * seconds,
            CsvKind::Joules => number("joules", value)?,
        };
        let sample = Sample {
            wall_s: seconds,
            energy_j,
            power_w: energy_j / seconds,
            ..Sample::default()
        };
        match groups.iter_mut().find(|g| g.label == *label) {
            Some(g) => g.samples.push(sample),
            None => groups.push(Group {
                label: label.to_string(),
                samples: vec![sample],
            }),
        }
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(label: &str, pts: &[(f64, f64)]) -> Group {
        Group {
            label: label.into(),
            samples: pts
                .iter()
                .map(|&(t, e)| Sample {
                    wall_s: t,
                    energy_j: e,
                    power_w: e / t,
                    ..Sample::default()
                })
                .collect(),
        }
    }

    #[test]
    fn len_brown_csv_reproduces_the_published_figures() {
        let csv = "label,seconds,watts\nperformance,209,193.355\npowersaving,228,189.416\n";
        let groups = groups_from_csv(csv.lines()).unwrap();
        assert!((groups[0].samples[0].energy_j - 40411.195).abs() < 1e-6);
        assert!((groups[1].samples[0].energy_j - 43186.848).abs() < 1e-6);
        let c = compare(&groups, 1.0).unwrap();
        let cand = &c.candidates[0];
        assert_eq!(c.baseline, "performance");
        assert!((cand.ratios["time"] - 1.0909).abs() < 1e-4);
        assert!((cand.ratios["energy"] - 1.0687).abs() < 1e-4);
        assert!(cand.verdict.starts_with(
            "powersaving takes 9.1% longer and needs 6.9% more energy to retire the workload; its average power is 2.0% lower."
        ), "{}", cand.verdict);
        assert_eq!(cand.class, VerdictClass::WorseOnBoth);
        assert!(cand.ratio_ci95.is_empty(), "one row per label: no interval");
    }

    #[test]
    fn fieller_and_welch_by_hand() {
        // a = 10, 12 (mean 11, var of mean 1); b = 5, 5.5 (mean 5.25, var of mean 0.0625).
        let (a, b) = ([10.0, 12.0], [5.0, 5.5]);
        let d = welch_difference_ci(&a, &b).unwrap();
        // df = (1.0625)² / (1 + 0.0039) = 1.1245; t(0.975, 1.1245) from the CDF inversion.
        let df = 1.0625f64.powi(2) / (1.0 + 0.0625f64.powi(2));
        let half = t_quantile(0.975, df) * 1.0625f64.sqrt();
        assert!((d[0] - (5.75 - half)).abs() < 1e-9 && (d[1] - (5.75 + half)).abs() < 1e-9);
        // Fieller with equal-variance-free data collapses to the point ratio.
        let r = fieller_ratio_ci(&[2.0, 2.0, 2.0], &[1.0, 1.0, 1.0]).unwrap();
        assert_eq!(r, [2.0, 2.0]);
        // A noisy denominator around zero has no bounded interval.
        assert!(fieller_ratio_ci(&[1.0, 1.1], &[-1.0, 1.0]).is_none());
    }

    #[test]
    fn fieller_interval_covers_the_truth_about_95_percent() {
        // Deterministic pseudo-random normal samples (Box–Muller over a LCG): true ratio 1.1.
        let mut state = 12345u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let mut normal = |mu: f64, sd: f64| {
            let (u1, u2) = (uniform(), uniform());
            mu + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        };
        let trials = 2000;
        let mut covered = 0;
        for _ in 0..trials {
            let b: Vec<f64> = (0..6).map(|_| normal(100.0, 5.0)).collect();
            let a: Vec<f64> = (0..6).map(|_| normal(110.0, 5.0)).collect();
            if let Some([lo, hi]) = fieller_ratio_ci(&a, &b) {
                covered += usize::from(lo <= 1.1 && 1.1 <= hi);
            }
        }
        let rate = covered as f64 / trials as f64;
        assert!((0.93..=0.97).contains(&rate), "coverage {rate}");
    }

    #[test]
    fn intervals_of_positive_quantities_stay_positive() {
        // Issue 17: run times of 1–3 ms over three runs. The symmetric interval of the
        // mean reads below zero; the log-scale one does not, and holds the mean.
        let times = [0.0008, 0.0009, 0.0028];
        let s = crate::stats::Summary::of(&times).unwrap();
        let [lo, hi] = s.ci95.unwrap();
        assert!(lo > 0.0 && lo < s.mean && s.mean < hi, "{lo} … {hi}");
        let symmetric = s.mean - t_quantile(0.975, 2.0) * s.stddev / 3f64.sqrt();
        assert!(
            symmetric < 0.0,
            "the case needs a symmetric interval below 0"
        );
        // By hand: factor exp(t · s / (m √n)).
        let factor = (t_quantile(0.975, 2.0) * s.stddev / s.mean / 3f64.sqrt()).exp();
        assert!((lo - s.mean / factor).abs() < 1e-15 && (hi - s.mean * factor).abs() < 1e-15);

        // The ratio of two such samples: Fieller's lower end is negative, the log-scale
        // interval's positive, and it holds the ratio of means.
        let b = [0.010, 0.011, 0.012];
        let [f_lo, _] = fieller_ratio_ci(&times, &b).unwrap();
        assert!(f_lo < 0.0, "Fieller: {f_lo}");
        let [lo, hi] = ratio_ci(&times, &b).unwrap();
        let r = mean(&times) / mean(&b);
        assert!(lo > 0.0 && lo < r && r < hi, "{lo} … {hi}");
        // Data with a zero or a negative value keep Fieller's interval.
        assert_eq!(
            ratio_ci(&[0.0, 1.0, 2.0], &b),
            fieller_ratio_ci(&[0.0, 1.0, 2.0], &b)
        );
    }

    #[test]
    fn log_ratio_interval_covers_the_truth_about_95_percent() {
        let mut state = 99u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let mut normal = |mu: f64, sd: f64| {
            let (u1, u2) = (uniform(), uniform());
            mu + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        };
        let trials = 2000;
        let mut covered = 0;
        for _ in 0..trials {
            let b: Vec<f64> = (0..6).map(|_| normal(100.0, 5.0)).collect();
            let a: Vec<f64> = (0..6).map(|_| normal(110.0, 5.0)).collect();
            let [lo, hi] = log_ratio_ci(&a, &b).unwrap();
            covered += usize::from(lo <= 1.1 && 1.1 <= hi);
        }
        let rate = covered as f64 / trials as f64;
        assert!((0.93..=0.97).contains(&rate), "coverage {rate}");
    }

    #[test]
    fn significant_exactly_when_the_ratio_interval_excludes_one() {
        // Issue 51 (3): a case where the two intervals disagree. The log-scale ratio
        // interval weighs each side's spread relative to its mean, Welch's difference
        // interval absolutely: here the ratio's ends at 0.9992 (excludes 1) while the
        // difference's spans 0 (−1.955 … +0.055).
        let a = [2.16, 2.68, 1.56, 2.93, 0.99];
        let b = [0.79, 0.83, 1.97, 0.81, 1.17];
        let [rlo, rhi] = ratio_ci(&b, &a).unwrap();
        let [dlo, dhi] = welch_difference_ci(&b, &a).unwrap();
        assert!(rhi < 1.0, "ratio {rlo} … {rhi}");
        assert!(dlo < 0.0 && 0.0 < dhi, "difference {dlo} … {dhi}");
        let c = compare(
            &[
                group("A", &a.map(|t| (t, 10.0))),
                group("B", &b.map(|t| (t, 10.0))),
            ],
            1.0,
        )
        .unwrap();
        let cand = &c.candidates[0];
        // Decided on the printed (ratio) interval: significant, though Welch's spans 0.
        assert!(cand.significant["time"], "{cand:#?}");
        for (name, &sig) in &cand.significant {
            assert_eq!(sig, excludes_one(cand.ratio_ci95[name]), "{name}");
        }
    }

    #[test]
    fn significance_and_classes_with_repeats() {
        let base = group(
            "A",
            &[(10.0, 100.0), (10.2, 101.0), (9.9, 99.5), (10.1, 100.4)],
        );
        let slower_cheaper = group(
            "B",
            &[(11.0, 90.0), (11.1, 91.0), (10.9, 89.6), (11.05, 90.3)],
        );
        let same = group(
            "C",
            &[(10.1, 100.2), (9.95, 99.9), (10.05, 100.6), (10.0, 99.8)],
        );
        let c = compare(&[base, slower_cheaper, same], 1.0).unwrap();
        let b = &c.candidates[0];
        assert!(b.significant["time"]);
        assert!(b.significant["energy"]);
        assert_eq!(b.class, VerdictClass::TradeOff);
        assert!(b.verdict.contains("95% CI"), "{}", b.verdict);
        assert!(b.verdict.contains("trades"), "{}", b.verdict);
        let c2 = &c.candidates[1];
        assert!(!c2.significant["time"]);
        assert_eq!(c2.class, VerdictClass::Equivalent);
        // perf per watt is the inverse of energy per unit of work.
        assert!((b.ratios["perf_per_watt"] - 1.0 / b.ratios["energy"]).abs() < 1e-2);
    }

    #[test]
    fn the_battery_sentence_comes_before_an_estimates_qualifier() {
        use crate::battery_life::{figures, Capacity, Workload};
        let groups = [
            group("A", &[(1.0, 10.0), (1.0, 10.2)]),
            group("B", &[(2.0, 20.0), (2.0, 20.4)]),
        ];
        let mut c = compare(&groups, 1.0).unwrap();
        let estimated = crate::model::PowerModel::for_machine(&crate::model::class::facts(
            "Intel(R) Core(TM) i7-2720QM CPU @ 2.20GHz",
            8,
        ))
        .provenance();
        let labels = groups
            .iter()
            .map(|g| {
                let report = figures(
                    &Capacity {
                        energy_full_wh: 1.0,
                        energy_full_source: "energy_full".into(),
                        batteries: vec!["BAT0".into()],
                    },
                    &Workload::of_samples(&g.samples).unwrap(),
                    Err("n/a".into()),
                    &estimated,
                    false,
                );
                LabelBattery::new(&g.label, report, None)
            })
            .collect();
        c.battery_from(labels, 1.0);
        c.energy_from(&estimated);
        let v = &c.candidates[0].verdict;
        // 3600 J per charge: 356.4 runs of 10.1 J and 178.2 of 20.2 J.
        let battery = v.find("On battery, per charge of BAT0 1 Wh full (energy_full): A retires 356 runs, B 178: 50.0% fewer.").expect(v);
        assert!(v.find("ESTIMATED, not measured").expect(v) > battery, "{v}");
        assert_eq!(c.battery.len(), 2);
    }

    #[test]
    fn bad_input() {
        let g = |l: &str| group(l, &[(1.0, 1.0)]);
        assert_eq!(compare(&[g("A")], 1.0), Err(CompareError::TooFewLabels(1)));
        let empty = Group {
            label: "B".into(),
            samples: vec![],
        };
        assert_eq!(
            compare(&[g("A"), empty], 1.0),
            Err(CompareError::EmptyLabel("B".into()))
        );
        assert!(matches!(
            compare(&[g("A"), group("B", &[(0.0, 1.0)])], 1.0),
            Err(CompareError::NotPositive { .. })
        ));
        let mut with_dram = g("B");
        with_dram.samples[0].domains.insert("dram-0".into(), 0.5);
        let err = compare(&[g("A"), with_dram], 1.0).unwrap_err().to_string();
        assert!(err.contains("\"B\" has [dram-0]"), "{err}");

        let e = groups_from_csv("label,seconds,watts\nA,1,2\nB,x,2\n".lines()).unwrap_err();
        assert_eq!(e.to_string(), "line 3: seconds \"x\" is not a number");
        let e = groups_from_csv("label,seconds,watts\nA,1,-2\n".lines()).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("line 2: watts must be greater than zero"));
        let e = groups_from_csv("label,secs,watts\n".lines()).unwrap_err();
        assert!(e.to_string().starts_with("line 1: header"));
        let e = groups_from_csv("label,seconds,joules\nA,1\n".lines()).unwrap_err();
        assert_eq!(e.to_string(), "line 2: expected 3 fields, found 2");
        assert_eq!(groups_from_csv("".lines()).unwrap_err(), CsvError::Empty);
    }

    /// Regression (fuzz/regressions/compare_csv/denormal-seconds): a run of 5e-324 s, positive
    /// and finite, gave an infinite power and infinite means in the verdict.
    #[test]
    fn figures_outside_the_range_statistics_can_hold_are_refused() {
        let csv = "label,seconds,joules\nA,5e-324,50\nA,1,50\nB,1,40\n";
        let err = compare(&groups_from_csv(csv.lines()).unwrap(), 1.0).unwrap_err();
        assert!(
            matches!(err, CompareError::OutOfRange { what: "time", .. }),
            "{err}"
        );
        assert!(err.to_string().contains("check the input's units"), "{err}");
        // Squared, 1e200 J overflows a variance.
        let big = "label,seconds,joules\nA,1,1e200\nA,1,1e200\nB,1,1\n";
        let err = compare(&groups_from_csv(big.lines()).unwrap(), 1.0).unwrap_err();
        assert!(matches!(err, CompareError::OutOfRange { .. }), "{err}");
        // Nanoseconds and microjoules are in range.
        let small = "label,seconds,joules\nA,1e-9,1e-6\nB,2e-9,1e-6\n";
        assert!(compare(&groups_from_csv(small.lines()).unwrap(), 1.0).is_ok());
    }
}
