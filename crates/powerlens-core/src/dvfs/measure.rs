//! Analysis of the `dvfs measure` microbenchmark (the report's section 4.1). The binary
//! times real kernels; this module turns the timings into transition costs and upclock
//! delays with their spread. Pure: timings in, figures out.
//!
//! - Lowering the license: the same block of `to`-level work is timed once with the core
//!   settled at `to` and once right after long-running `from`-level code; the difference
//!   of each pair is the cost of the change.
//! - Raising it: after vector code, short scalar sections are timed back to back. When
//!   the license rises, one section spikes (the stall) and the ones after it run faster;
//!   the spike's start is the upclock delay, its height above the settled sections the
//!   cost. An interrupt also makes a spike, but without the step in speed, so a spike
//!   counts only when the sections before it are measurably slower than those after.

use serde::Serialize;

use super::Level;
use crate::provenance::Provenance;
use crate::stats::{median, Summary};

/// Sections before the spike must be at least this much slower than the settled ones
/// (1%; the smallest swing in the built-in profiles is 2.7%).
pub const MIN_SLOWDOWN: f64 = 1.01;

/// A spike must exceed the settled section time by this many robust standard deviations,
/// and by at least [`MIN_SPIKE_US`].
pub const SPIKE_SIGMAS: f64 = 5.0;
pub const MIN_SPIKE_US: f64 = 1.0;

/// One timed scalar section after vector code.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Section {
    /// When the section started, µs after the vector code ended.
    pub start_us: f64,
    pub duration_us: f64,
}

/// A license increase seen in one series of sections.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Upclock {
    /// Start of the spiking section, µs after the vector code ended.
    pub delay_us: f64,
    /// Height of the spike above the settled section time.
    pub cost_us: f64,
    /// Median section time before the spike / settled section time.
    pub slowdown: f64,
}

/// The last third of a series: taken as settled at the high frequency.
fn settled_part(durations: &[f64]) -> &[f64] {
    &durations[durations.len() - durations.len() / 3..]
}

/// Finds the upclock in one series, or `None` when no frequency change is visible. The
/// last third of the series is taken as settled at the high frequency, so the series must
/// outlast the upclock delay by half again.
pub fn find_upclock(sections: &[Section]) -> Option<Upclock> {
    let n = sections.len();
    if n < 6 {
        return None;
    }
    let durations: Vec<f64> = sections.iter().map(|s| s.duration_us).collect();
    let tail = settled_part(&durations);
    let settled = median(tail);
    let mad = median(&tail.iter().map(|d| (d - settled).abs()).collect::<Vec<_>>());
    // 1.4826 * MAD estimates the standard deviation of normal noise, robust to outliers.
    let sigma = 1.4826 * mad;
    let head = &durations[..n - tail.len()];
    let (spike, height) = head
        .iter()
        .enumerate()
        .map(|(i, d)| (i, d - settled))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if spike == 0 || height <= MIN_SPIKE_US.max(SPIKE_SIGMAS * sigma) {
        return None;
    }
    let slowdown = median(&durations[..spike]) / settled;
    (slowdown >= MIN_SLOWDOWN).then_some(Upclock {
        delay_us: sections[spike].start_us,
        cost_us: height,
        slowdown,
    })
}

/// The cost of lowering the license from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DownResult {
    pub from: Level,
    pub to: Level,
    /// The block timed with the core settled at `to`.
    pub settled_us: Summary,
    /// The same block right after `from`-level code.
    pub changing_us: Summary,
    /// changing − settled, pair by pair.
    pub cost_us: Summary,
}

/// Pairs the two series (in the order they were run) into a [`DownResult`].
pub fn down_result(
    from: Level,
    to: Level,
    settled_us: &[f64],
    changing_us: &[f64],
) -> Option<DownResult> {
    let costs: Vec<f64> = changing_us
        .iter()
        .zip(settled_us)
        .map(|(c, s)| c - s)
        .collect();
    Some(DownResult {
        from,
        to,
        settled_us: Summary::of(settled_us)?,
        changing_us: Summary::of(changing_us)?,
        cost_us: Summary::of(&costs)?,
    })
}

/// Upclocks after `from`-level code over repeated series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpResult {
    pub from: Level,
    pub series: usize,
    /// Series in which an upclock was visible.
    pub visible: usize,
    pub delay_us: Option<Summary>,
    pub cost_us: Option<Summary>,
    pub slowdown: Option<Summary>,
    /// Settled scalar section time (median of each series' last third).
    pub section_us: Option<Summary>,
}

/// Analyses every series of sections timed after `from`-level code.
pub fn up_result(from: Level, series: &[Vec<Section>]) -> UpResult {
    let found: Vec<Upclock> = series.iter().filter_map(|s| find_upclock(s)).collect();
    let of = |f: fn(&Upclock) -> f64| Summary::of(&found.iter().map(f).collect::<Vec<_>>());
    let settled: Vec<f64> = series
        .iter()
        .filter(|s| s.len() >= 3)
        .map(|s| {
            let durations: Vec<f64> = s.iter().map(|x| x.duration_us).collect();
            median(settled_part(&durations))
        })
        .collect();
    UpResult {
        from,
        series: series.len(),
        visible: found.len(),
        delay_us: of(|u| u.delay_us),
        cost_us: of(|u| u.cost_us),
        slowdown: of(|u| u.slowdown),
        section_us: Summary::of(&settled),
    }
}

/// Everything `dvfs measure` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasureReport {
    pub provenance: Provenance,
    pub cpu: String,
    /// Things the reader must know, e.g. that a virtual machine may hide the changes.
    pub notes: Vec<String>,
    /// Kernels this CPU cannot run, with the reason.
    pub skipped: Vec<String>,
    pub down: Vec<DownResult>,
    pub up: Vec<UpResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sections back to back with the given durations, starting at 0.
    fn series(durations: &[f64]) -> Vec<Section> {
        let mut start = 0.0;
        durations
            .iter()
            .map(|&d| {
                let s = Section {
                    start_us: start,
                    duration_us: d,
                };
                start += d;
                s
            })
            .collect()
    }

    #[test]
    fn finds_the_spike_and_the_step() {
        // Four sections at 11 µs (10% slow), a 21 µs spike starting at 4 * 11 = 44 µs, then
        // ten settled 10 µs sections. Settled = 10; spike height 21 - 10 = 11; slowdown
        // median(11, 11, 11, 11) / 10 = 1.1.
        let s = series(&[
            11.0, 11.0, 11.0, 11.0, 21.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0,
            10.0,
        ]);
        let up = find_upclock(&s).unwrap();
        assert_eq!(up.delay_us, 44.0);
        assert_eq!(up.cost_us, 11.0);
        assert!((up.slowdown - 1.1).abs() < 1e-12);
    }

    #[test]
    fn an_interrupt_without_a_step_is_no_upclock() {
        // A 30 µs spike, but the sections before it are as fast as those after.
        let s = series(&[
            10.0, 10.1, 9.9, 10.0, 30.0, 10.0, 10.1, 9.9, 10.0, 10.0, 10.1, 9.9,
        ]);
        assert_eq!(find_upclock(&s), None);
        // A step without a spike above the noise is none either.
        let s = series(&[
            10.5, 10.5, 10.5, 10.5, 10.6, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0,
        ]);
        assert_eq!(find_upclock(&s), None);
    }

    #[test]
    fn summaries_pair_the_runs() {
        // Costs 17, 19, 15: mean 17, median 17.
        let r = down_result(
            Level::Normal,
            Level::Avx2,
            &[100.0, 101.0, 99.0],
            &[117.0, 120.0, 114.0],
        )
        .unwrap();
        assert_eq!(
            (r.cost_us.mean, r.cost_us.median, r.cost_us.n),
            (17.0, 17.0, 3)
        );
        let visible = series(&[
            11.0, 11.0, 11.0, 11.0, 21.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0,
            10.0,
        ]);
        let flat = series(&[10.0; 12]);
        let up = up_result(Level::Avx512, &[visible, flat]);
        assert_eq!((up.series, up.visible), (2, 1));
        assert_eq!(up.delay_us.unwrap().median, 44.0);
        assert_eq!(up.section_us.unwrap().median, 10.0);
    }
}
