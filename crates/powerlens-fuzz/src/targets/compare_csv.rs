//! `compare --from-csv FILE`: the CSV of runs measured elsewhere, then the comparison the
//! command prints. Checks: every figure of an accepted comparison is finite (an infinite
//! or NaN ratio, interval or mean printed as a figure is a wrong answer, not a result).

use powerlens_core::compare::{compare, groups_from_csv};

pub const DICT: &[&str] = &[
    "label,seconds,watts\n",
    "label,seconds,joules\n",
    "Label , Seconds , Watts\n",
    "performance,",
    "powersaving,",
];

pub fn run(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let Ok(groups) = groups_from_csv(text.lines()) else {
        return;
    };
    for g in &groups {
        assert!(!g.samples.is_empty(), "a label without rows");
    }
    let Ok(comparison) = compare(&groups, 1.0) else {
        return;
    };
    for l in &comparison.labels {
        for (what, s) in l.figures() {
            assert!(
                s.mean.is_finite() && s.mean > 0.0,
                "{}: {what} mean {}",
                l.label,
                s.mean
            );
        }
    }
    for c in &comparison.candidates {
        for (k, v) in &c.ratios {
            assert!(v.is_finite() && *v > 0.0, "{}: ratio {k} = {v}", c.label);
        }
        for (k, v) in &c.differences {
            assert!(v.is_finite(), "{}: difference {k} = {v}", c.label);
        }
        for (k, [lo, hi]) in c.ratio_ci95.iter().chain(&c.difference_ci95) {
            assert!(
                !lo.is_nan() && !hi.is_nan() && lo <= hi,
                "{}: interval {k} = [{lo}, {hi}]",
                c.label
            );
        }
        assert!(!c.verdict.is_empty());
    }
}
