//! Which periodic timer groups could be coalesced ([`coalescing`]), and why.

use super::{describe, WakeupCause, ALIGNED_NS, SHORT_PERIOD_US};

/// Share of `a`'s times within `window_ns` of one of `b`'s (both ascending).
fn aligned_share(a: &[u64], b: &[u64], window_ns: u64) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let mut j = 0;
    let mut near = 0;
    for &t in a {
        while j + 1 < b.len() && b[j + 1] <= t {
            j += 1;
        }
        let d = |x: u64| x.abs_diff(t);
        let nearest = d(b[j]).min(b.get(j + 1).map(|&x| d(x)).unwrap_or(u64::MAX));
        if nearest <= window_ns {
            near += 1;
        }
    }
    near as f64 / a.len() as f64
}

/// Marks the periodic timer groups that could be coalesced, with a note saying why:
/// - **pairs**: two periodic groups whose periods are within 10% of an integer ratio
///   (1:1 up to 1:8, so one common multiple serves both) and whose expiries are not
///   aligned: fewer than half of the slower group's expiries fall within [`ALIGNED_NS`]
///   (or a quarter of the faster period, if smaller) of one of the faster group's.
///   Merged, the slower timer's wake-ups would ride on the faster one's.
/// - **fast**: a periodic group with a period under [`SHORT_PERIOD_US`] is coalescible on
///   its own: a larger timer slack (`prctl(PR_SET_TIMERSLACK)`) or a longer period lets
///   the kernel batch its expiries with others.
///
/// Other periodic groups of a thread get `coalescible: false`; non-periodic ones and the
/// kernel's own timers `None`.
pub fn coalescing(groups: &mut [(WakeupCause, Vec<u64>)]) {
    // Only a thread's timers: the kernel's own (the tick, armed by no thread or by the
    // idle task) are not the program's to change.
    let periodic: Vec<usize> = (0..groups.len())
        .filter(|&i| {
            let c = &groups[i].0;
            c.periodic == Some(true) && c.armed_by_tid.is_some_and(|t| t != 0)
        })
        .collect();
    for &i in &periodic {
        groups[i].0.coalescible = Some(false);
    }
    for (n, &i) in periodic.iter().enumerate() {
        for &j in &periodic[n + 1..] {
            let (pi, pj) = (
                groups[i].0.period_us.unwrap_or(0.0),
                groups[j].0.period_us.unwrap_or(0.0),
            );
            let (fast, slow) = if pi <= pj { (i, j) } else { (j, i) };
            let (pf, ps) = (pi.min(pj), pi.max(pj));
            if pf <= 0.0 {
                continue;
            }
            let ratio = ps / pf;
            let whole = ratio.round();
            if !(1.0..=8.0).contains(&whole) || (ratio - whole).abs() > 0.1 * whole {
                continue;
            }
            let window = ALIGNED_NS.min((pf * 1e3 / 4.0) as u64);
            let share = aligned_share(&groups[slow].1, &groups[fast].1, window);
            if share >= 0.5 {
                continue;
            }
            for (me, other) in [(fast, slow), (slow, fast)] {
                let note = format!(
                    "with {} (period {:.0} µs; {:.0}% of expiries aligned now)",
                    describe(&groups[other].0),
                    groups[other].0.period_us.unwrap_or(0.0),
                    share * 100.0
                );
                let c = &mut groups[me].0;
                c.coalescible = Some(true);
                c.coalesce_with = Some(match c.coalesce_with.take() {
                    Some(prev) => format!("{prev}; {note}"),
                    None => note,
                });
            }
        }
    }
    for &i in &periodic {
        let c = &mut groups[i].0;
        if c.coalescible == Some(false) && c.period_us.is_some_and(|p| p < SHORT_PERIOD_US) {
            c.coalescible = Some(true);
            c.coalesce_with = Some(format!(
                "because its period is under {} ms (raise the timer slack or lengthen the period)",
                SHORT_PERIOD_US / 1e3
            ));
        }
    }
}
