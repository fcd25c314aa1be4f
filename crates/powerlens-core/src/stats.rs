//! Descriptive statistics over repeated measurements: the summary `run` prints for every
//! figure, confidence intervals from Student's t, and outlier detection.

use serde::{Deserialize, Serialize};

/// Summary of one figure over repeated runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for a single value.
    pub stddev: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// 95% confidence interval of the mean, from Student's t with n − 1 degrees of freedom:
    /// for strictly positive values (times, energies, EDP) on the log scale, so that it
    /// never leaves the quantity's domain; otherwise the symmetric interval. `None` with
    /// fewer than two values: one run says nothing about the spread.
    pub ci95: Option<[f64; 2]>,
}

impl Summary {
    /// Summarizes `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = mean(values);
        let stddev = stddev(values, mean);
        let sorted = sorted(values);
        let ci95 = (n >= 2).then(|| {
            let half = t_quantile(0.975, (n - 1) as f64) * stddev / (n as f64).sqrt();
            if sorted[0] > 0.0 {
                positive_interval(mean, half)
            } else {
                [mean - half, mean + half]
            }
        });
        Some(Summary {
            n,
            mean,
            stddev,
            median: median_of_sorted(&sorted),
            min: sorted[0],
            max: sorted[n - 1],
            ci95,
        })
    }

    /// Relative half-width of the confidence interval (e.g. 0.02 for ±2%), when known.
    pub fn relative_ci(&self) -> Option<f64> {
        self.ci95
            .filter(|_| self.mean != 0.0)
            .map(|[lo, hi]| (hi - lo) / 2.0 / self.mean.abs())
    }
}

/// The 95% interval of a strictly positive mean `mean` whose symmetric interval has
/// half-width `half`, taken on the log scale (the delta method: the standard error of
/// ln(mean) is half / mean): [mean / f, mean × f] with f = exp(half / mean). It equals the
/// symmetric interval to first order when the spread is small, and stays above zero when
/// it is not: a symmetric interval for a run time of 0.0015 ± 0.0018 s would read
/// −0.0003 … 0.0033.
pub fn positive_interval(mean: f64, half: f64) -> [f64; 2] {
    let factor = (half / mean).exp();
    [mean / factor, mean * factor]
}

pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Sample standard deviation around `mean`.
pub fn stddev(values: &[f64], mean: f64) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let ss: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
    (ss / (values.len() - 1) as f64).sqrt()
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

pub fn median(values: &[f64]) -> f64 {
    median_of_sorted(&sorted(values))
}

/// Indices of outliers by the modified z-score (Iglewicz and Hoaglin): |0.6745 (x − median) / MAD|
/// above 3.5. Robust where the plain z-score is not: one wild value inflates the standard
/// deviation it is judged by. Returns nothing when the MAD is zero (most values identical).
pub fn outliers(values: &[f64]) -> Vec<usize> {
    if values.len() < 3 {
        return Vec::new();
    }
    let med = median(values);
    let deviations: Vec<f64> = values.iter().map(|v| (v - med).abs()).collect();
    let mad = median(&deviations);
    if mad == 0.0 {
        return Vec::new();
    }
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| (0.6745 * (*v - med) / mad).abs() > 3.5)
        .map(|(i, _)| i)
        .collect()
}

/// Quantile `p` of Student's t distribution with `df` degrees of freedom, by bisection on the CDF.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0 && df > 0.0, "t_quantile({p}, {df})");
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while t_cdf(hi, df) < p {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 {
            break;
        }
    }
    (lo + hi) / 2.0
}

/// CDF of Student's t distribution, through the regularized incomplete beta function.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// I_x(a, b) by its continued fraction (modified Lentz), using the symmetry relation where
/// the fraction converges slowly.
fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        for numerator in [
            m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
        ] {
            d = 1.0 + numerator * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + numerator / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// ln Γ(x) by the Lanczos approximation (g = 7, 9 coefficients), accurate to ~1e-15.
fn ln_gamma(x: f64) -> f64 {
    const COEF: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEF[0];
    for (i, c) in COEF.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_published_tables() {
        // Two-sided 95% critical values from any t table.
        for (df, expected) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (4.0, 2.776),
            (9.0, 2.262),
            (29.0, 2.045),
            (1000.0, 1.962),
        ] {
            let q = t_quantile(0.975, df);
            assert!((q - expected).abs() < 1e-3, "df {df}: {q} vs {expected}");
        }
        assert!((t_quantile(0.025, 9.0) + 2.262).abs() < 1e-3);
        assert!((t_cdf(0.0, 5.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn summary_by_hand() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample variance 32/7.
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.min, s.max),
            (8, 5.0, 4.5, 2.0, 9.0)
        );
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        let half = 2.364_624 * s.stddev / 8f64.sqrt(); // t(0.975, 7) = 2.364624
                                                       // Positive values: the interval is taken on the log scale, 5 / f … 5 × f.
        let f = (half / 5.0).exp();
        let [lo, hi] = s.ci95.unwrap();
        assert!((lo - 5.0 / f).abs() < 1e-4 && (hi - 5.0 * f).abs() < 1e-4);
        // With a value at or below zero, the symmetric interval.
        let shifted: Vec<f64> = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
            .iter()
            .map(|x| x - 5.0)
            .collect();
        let [lo, hi] = Summary::of(&shifted).unwrap().ci95.unwrap();
        assert!((lo + half).abs() < 1e-4 && (hi - half).abs() < 1e-4);
        assert!(Summary::of(&[]).is_none());
        let one = Summary::of(&[3.0]).unwrap();
        assert_eq!((one.stddev, one.ci95), (0.0, None));
    }

    #[test]
    fn modified_z_score_flags_only_the_wild_value() {
        let values = [10.0, 10.2, 9.9, 10.1, 10.0, 14.0];
        assert_eq!(outliers(&values), vec![5]);
        assert!(
            outliers(&[1.0, 1.0, 1.0, 5.0]).is_empty(),
            "MAD 0: no verdict"
        );
        assert!(outliers(&[10.0, 10.5, 9.5, 10.2]).is_empty());
    }
}
