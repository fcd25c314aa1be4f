//! Idle-state residency per CPU over one interval, from the kernel's cumulative cpuidle
//! counters read at both ends (sysfs `time`, microseconds in each state since boot).
//!
//! The kernel adds an idle period's time to its state when the period *ends*, so an
//! interval is charged with the whole of a period that began before it: one state's
//! residency can pass 100% by up to one idle period, and the active share (what is left
//! of the interval) is then 0. Over several intervals the figures add up.

use serde::Serialize;

/// Per CPU and idle state: cumulative seconds in the state, the kernel's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleStateTime {
    pub cpu: u32,
    pub state: String,
    pub seconds: f64,
}

/// One CPU over an interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuResidency {
    pub cpu: u32,
    /// Each idle state, in the kernel's order (shallowest first).
    pub states: Vec<StateResidency>,
    /// The rest of the interval, % (100 − Σ states, at least 0): the CPU ran something.
    /// `None` when a state's residency is unknown.
    pub active_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateResidency {
    pub state: String,
    /// Share of the interval spent in the state, %; `None` when the counter was not read
    /// at both ends (a CPU that went offline, a state that appeared) or went backwards.
    pub residency_pct: Option<f64>,
}

/// Each CPU's residency between two readings `elapsed_s` apart. CPUs and states are those
/// of `after`, in its order.
pub fn interval_residency(
    before: &[IdleStateTime],
    after: &[IdleStateTime],
    elapsed_s: f64,
) -> Vec<CpuResidency> {
    let mut cpus: Vec<CpuResidency> = Vec::new();
    for now in after {
        let then = before
            .iter()
            .find(|b| b.cpu == now.cpu && b.state == now.state);
        let residency_pct = then
            .map(|t| now.seconds - t.seconds)
            .filter(|d| *d >= 0.0 && elapsed_s > 0.0)
            .map(|d| d / elapsed_s * 100.0);
        let state = StateResidency {
            state: now.state.clone(),
            residency_pct,
        };
        match cpus.last_mut() {
            Some(c) if c.cpu == now.cpu => c.states.push(state),
            _ => cpus.push(CpuResidency {
                cpu: now.cpu,
                states: vec![state],
                active_pct: None,
            }),
        }
    }
    for c in &mut cpus {
        let idle: Option<f64> = c.states.iter().map(|s| s.residency_pct).sum();
        c.active_pct = idle.map(|idle| (100.0 - idle).max(0.0));
    }
    cpus
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(cpu: u32, state: &str, seconds: f64) -> IdleStateTime {
        IdleStateTime {
            cpu,
            state: state.into(),
            seconds,
        }
    }

    /// Over 2 s, cpu0 spent 0.1 s polling and 1.5 s halted: 5% + 75%, 20% active
    /// (hand-computed); cpu1's haltpoll counter passed the interval by 0.2 s (a period that
    /// began before it): 110%, active 0, not negative.
    #[test]
    fn residency_is_the_counters_delta_over_the_interval() {
        let before = [
            t(0, "POLL", 1.0),
            t(0, "haltpoll", 10.0),
            t(1, "POLL", 0.0),
            t(1, "haltpoll", 3.0),
        ];
        let after = [
            t(0, "POLL", 1.1),
            t(0, "haltpoll", 11.5),
            t(1, "POLL", 0.0),
            t(1, "haltpoll", 5.2),
        ];
        let r = interval_residency(&before, &after, 2.0);
        assert_eq!(r.len(), 2);
        let pct = |c: &CpuResidency, i: usize| c.states[i].residency_pct.unwrap();
        assert!((pct(&r[0], 0) - 5.0).abs() < 1e-9);
        assert!((pct(&r[0], 1) - 75.0).abs() < 1e-9);
        assert!((r[0].active_pct.unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(r[1].states[0].state, "POLL");
        assert!((pct(&r[1], 1) - 110.0).abs() < 1e-9);
        assert_eq!(r[1].active_pct, Some(0.0));
    }

    /// A state without a reading at the start, or whose counter went backwards (the CPU
    /// was offlined and onlined), is unknown — and so is its CPU's active share.
    #[test]
    fn a_counter_not_read_twice_is_unknown() {
        let before = [t(0, "POLL", 5.0)];
        let after = [t(0, "POLL", 4.0), t(0, "C1", 1.0), t(2, "C1", 1.0)];
        let r = interval_residency(&before, &after, 1.0);
        assert_eq!(r.len(), 2);
        assert!(r[0].states.iter().all(|s| s.residency_pct.is_none()));
        assert_eq!(r[0].active_pct, None);
        assert_eq!((r[1].cpu, r[1].active_pct), (2, None));
    }
}
