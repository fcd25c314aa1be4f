//! From trace records to measurements: which idle entry, idle exit and timer expiry belong
//! to each armed timer. Pure: the live tool and the tests feed the same function.
//!
//! Each measurement is a window on the measured CPU, from just before the thread armed its
//! timer (`armed_ns`) to just after it saw itself wake (`user_wake_ns`); windows do not
//! overlap because one thread makes them one after another. Inside a window:
//!
//! - our timer is the `hrtimer_start` whose `softexpires` equals LTime (the thread's
//!   `clock_nanosleep(TIMER_ABSTIME)` sets the soft expiry to exactly the requested time;
//!   the hard expiry adds the timer slack), which gives the hrtimer's address;
//! - TIntr is the first `hrtimer_expire_entry` of that address;
//! - TBI is the last `cpu_idle` entry at or before LTime, and TAI the first `cpu_idle`
//!   exit after TBI;
//! - the waker is the first interrupt after TBI: our timer's expiry, or another hrtimer
//!   expiring in the same interrupt (same `now`) means our timer woke the CPU; a hardware
//!   interrupt handler or another hrtimer's interrupt first means something else did.

use serde::{Deserialize, Serialize};

use super::Raw;

/// A trace record of the measured CPU, reduced to what wake matching needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WakeEventKind {
    /// power:cpu_idle with a state index: the CPU asks for idle state `state`.
    IdleEnter { state: u32 },
    /// power:cpu_idle with state PWR_EVENT_EXIT (u32::MAX): the CPU left idle.
    IdleExit,
    /// timer:hrtimer_start, in the context of the thread `tid` that armed it.
    HrtimerStart {
        hrtimer: u64,
        softexpires_ns: u64,
        tid: u32,
    },
    /// timer:hrtimer_expire_entry; `now_ns` is the clock the interrupt read once for all
    /// timers it expires, so equal `now_ns` means the same interrupt.
    HrtimerExpire { hrtimer: u64, now_ns: u64 },
    /// irq:irq_handler_entry.
    Irq { irq: i32 },
    /// irq:softirq_entry.
    SoftIrq { vec: u32 },
}

/// One record, CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeEvent {
    pub time_ns: u64,
    pub kind: WakeEventKind,
}

/// What the measuring thread knows of one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measurement {
    /// Read just before `clock_nanosleep`.
    pub armed_ns: u64,
    /// The absolute launch time the thread slept until.
    pub ltime_ns: u64,
    pub ldist_ns: u64,
    /// Read first thing after `clock_nanosleep` returned.
    pub user_wake_ns: u64,
    /// The measuring thread.
    pub tid: u32,
}

/// The state name of cpu_idle index `k`: from `state_names`, else `state<k>`.
fn state_name(state_names: &[String], k: u32) -> String {
    state_names
        .get(k as usize)
        .cloned()
        .unwrap_or_else(|| format!("state{k}"))
}

/// Matches every measurement with the records of its window. `events` are the measured
/// CPU's records in any order (they are sorted here); `state_names` are the CPU's cpuidle
/// states in index order, to name the state requested at TBI; `measured_state` names the
/// state when no idle entry was traced.
pub fn match_measurements(
    measurements: &[Measurement],
    events: &[WakeEvent],
    state_names: &[String],
    measured_state: &str,
) -> Vec<Raw> {
    let mut sorted: Vec<&WakeEvent> = events.iter().collect();
    sorted.sort_by_key(|e| e.time_ns);
    measurements
        .iter()
        .map(|m| {
            let start = sorted.partition_point(|e| e.time_ns < m.armed_ns);
            let end = sorted.partition_point(|e| e.time_ns <= m.user_wake_ns);
            match_one(
                m,
                &sorted[start..end.max(start)],
                state_names,
                measured_state,
            )
        })
        .collect()
}

fn match_one(
    m: &Measurement,
    window: &[&WakeEvent],
    state_names: &[String],
    measured_state: &str,
) -> Raw {
    use WakeEventKind::*;
    let ours = window.iter().find_map(|e| match e.kind {
        HrtimerStart {
            hrtimer,
            softexpires_ns,
            tid,
        } if softexpires_ns == m.ltime_ns && tid == m.tid => Some(hrtimer),
        _ => None,
    });
    let expiry = ours.and_then(|addr| {
        window.iter().find_map(|e| match e.kind {
            HrtimerExpire { hrtimer, now_ns } if hrtimer == addr => Some((e.time_ns, now_ns)),
            _ => None,
        })
    });
    let tbi = window
        .iter()
        .filter(|e| e.time_ns <= m.ltime_ns)
        .filter_map(|e| match e.kind {
            IdleEnter { state } => Some((e.time_ns, state)),
            _ => None,
        })
        .next_back();
    let tai = tbi.and_then(|(tbi, _)| {
        window
            .iter()
            .find(|e| e.time_ns >= tbi && e.kind == IdleExit)
            .map(|e| e.time_ns)
    });
    let woken_by_our_timer = tbi.and_then(|(tbi, _)| {
        let first = window
            .iter()
            .find(|e| e.time_ns >= tbi && matches!(e.kind, Irq { .. } | HrtimerExpire { .. }))?;
        Some(match (&first.kind, ours, expiry) {
            (HrtimerExpire { hrtimer, .. }, Some(addr), _) if *hrtimer == addr => true,
            // Another timer handled first in the same interrupt as ours.
            (HrtimerExpire { now_ns, .. }, _, Some((_, our_now))) => *now_ns == our_now,
            _ => false,
        })
    });
    let count = |f: fn(&WakeEventKind) -> bool| window.iter().filter(|e| f(&e.kind)).count() as u32;
    Raw {
        ltime_ns: m.ltime_ns,
        ldist_ns: m.ldist_ns,
        tbi_ns: tbi.map(|(t, _)| t),
        tai_ns: tai,
        tintr_ns: expiry.map(|(t, _)| t),
        user_wake_ns: m.user_wake_ns,
        cstate: tbi
            .map(|(_, k)| state_name(state_names, k))
            .unwrap_or_else(|| measured_state.to_string()),
        woken_by_our_timer,
        interrupts: count(|k| matches!(k, Irq { .. })),
        softirqs: count(|k| matches!(k, SoftIrq { .. })),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{state_report, Delivered, Dropped};
    use super::*;

    const TID: u32 = 4242;
    const TIMER: u64 = 0xffff_c900_050e_bc70;
    const TICK: u64 = 0xffff_8886_27d1_c6f8;

    fn names() -> Vec<String> {
        ["POLL", "C1", "C1E", "C6"].map(String::from).to_vec()
    }

    fn ev(time_ns: u64, kind: WakeEventKind) -> WakeEvent {
        WakeEvent { time_ns, kind }
    }

    fn start(t: u64, ltime: u64) -> WakeEvent {
        ev(
            t,
            WakeEventKind::HrtimerStart {
                hrtimer: TIMER,
                softexpires_ns: ltime,
                tid: TID,
            },
        )
    }

    fn enter(t: u64, state: u32) -> WakeEvent {
        ev(t, WakeEventKind::IdleEnter { state })
    }

    fn exit(t: u64) -> WakeEvent {
        ev(t, WakeEventKind::IdleExit)
    }

    fn expire(t: u64, hrtimer: u64, now_ns: u64) -> WakeEvent {
        ev(t, WakeEventKind::HrtimerExpire { hrtimer, now_ns })
    }

    fn measurement(armed: u64, ltime: u64, user: u64) -> Measurement {
        Measurement {
            armed_ns: armed,
            ltime_ns: ltime,
            ldist_ns: ltime - armed,
            user_wake_ns: user,
            tid: TID,
        }
    }

    /// What bare metal with intel_idle delivers for one C6 datapoint: the thread arms its
    /// timer (hrtimer_start in its own context), the CPU enters C6 (cpu_idle state=3), the
    /// timer fires; mwait returns with interrupts off, so the idle exit (cpu_idle
    /// state=4294967295) is traced before the interrupt runs our timer's expiry, then the
    /// softirqs of the interrupt's exit, then the thread runs. This VM delivers only the
    /// first record.
    #[test]
    fn bare_metal_c6_datapoint() {
        let m = measurement(1_000_000, 2_000_000, 2_062_000);
        let events = vec![
            start(1_000_400, 2_000_000),
            enter(1_003_000, 3),
            exit(2_041_000),
            expire(2_043_000, TIMER, 2_042_500),
            ev(2_045_000, WakeEventKind::SoftIrq { vec: 7 }),
        ];
        let raws = match_measurements(&[m], &events, &names(), "C6");
        let r = &raws[0];
        assert_eq!(
            (r.tbi_ns, r.tai_ns, r.tintr_ns),
            (Some(1_003_000), Some(2_041_000), Some(2_043_000))
        );
        assert_eq!(r.cstate, "C6");
        assert_eq!(r.woken_by_our_timer, Some(true));
        assert_eq!((r.interrupts, r.softirqs), (0, 1));
        let delivered = Delivered::detect(&events, &raws);
        assert_eq!(
            delivered,
            Delivered {
                idle: true,
                timer: true,
                untraced: false,
            }
        );
        let p = r.datapoint(&delivered).unwrap();
        assert_eq!(p.wake_latency_ns, Some(41_000));
        assert_eq!(p.intr_latency_ns, Some(43_000));
        assert_eq!(p.user_latency_ns, 62_000);
        assert_eq!(p.silent_time_ns, Some(997_000));
    }

    /// POLL polls with interrupts enabled: the timer's expiry runs inside the idle period,
    /// before the idle exit. The latencies still come out by the same rules; records of
    /// one CPU may also arrive slightly out of order (an interrupt between an event's
    /// timestamp and its write), which sorting undoes.
    #[test]
    fn poll_expiry_inside_idle_and_out_of_order_records() {
        let m = measurement(0, 500_000, 503_000);
        let events = vec![
            exit(501_900),
            expire(501_200, TIMER, 501_100),
            enter(10_000, 0),
            start(2_000, 500_000),
        ];
        let raws = match_measurements(&[m], &events, &names(), "POLL");
        let p = raws[0]
            .datapoint(&Delivered::detect(&events, &raws))
            .unwrap();
        assert_eq!(p.cstate, "POLL");
        assert_eq!(
            (p.wake_latency_ns, p.intr_latency_ns, p.silent_time_ns),
            (Some(1_900), Some(1_200), Some(490_000))
        );
    }

    /// Another interrupt (a NIC, IRQ 24) ends the idle period before our timer: dropped.
    /// The tick expiring in the same interrupt as ours (same `now`) is not another waker;
    /// a tick from an earlier interrupt is.
    #[test]
    fn who_woke_the_cpu() {
        let names = names();
        let base = |extra: Vec<WakeEvent>| {
            let mut events = vec![
                start(100, 1_000_000),
                enter(1_000, 1),
                exit(1_000_800),
                expire(1_001_000, TIMER, 1_000_900),
            ];
            events.extend(extra);
            let m = measurement(0, 1_000_000, 1_005_000);
            match_measurements(&[m], &events, &names, "C1").remove(0)
        };
        let all = Delivered {
            idle: true,
            timer: true,
            untraced: false,
        };
        let nic = base(vec![ev(999_000, WakeEventKind::Irq { irq: 24 })]);
        // The NIC came before LTime and the CPU did not go idle again: outside idle too,
        // but the first verdict is the waker.
        assert_eq!(nic.woken_by_our_timer, Some(false));
        assert_eq!(nic.datapoint(&all), Err(Dropped::NotOurTimer));
        assert_eq!(nic.interrupts, 1);

        let same_interrupt = base(vec![expire(1_000_950, TICK, 1_000_900)]);
        assert_eq!(same_interrupt.woken_by_our_timer, Some(true));
        assert!(same_interrupt.datapoint(&all).is_ok());

        let earlier_tick = base(vec![expire(1_000_300, TICK, 1_000_200)]);
        assert_eq!(earlier_tick.woken_by_our_timer, Some(false));

        // The idle entry before LTime is the last one: an earlier idle period ended by an
        // interrupt does not count against this datapoint.
        let re_idled = base(vec![
            enter(500, 2),
            ev(600, WakeEventKind::Irq { irq: 24 }),
            exit(700),
        ]);
        assert_eq!(re_idled.tbi_ns, Some(1_000));
        assert_eq!(re_idled.cstate, "C1");
        assert_eq!(re_idled.woken_by_our_timer, Some(true));
    }

    /// What this VM delivers: our thread's hrtimer_start (its own context) and nothing
    /// from the idle task: no cpu_idle, no expiry. Every datapoint keeps its UserLatency;
    /// the other metrics are unavailable with the reason, not a silent zero.
    #[test]
    fn vm_stream_keeps_user_latency() {
        let ms: Vec<Measurement> = (0..4)
            .map(|i| {
                let armed = i * 10_000_000;
                measurement(armed, armed + 1_000_000, armed + 1_050_000 + i * 1_000)
            })
            .collect();
        let events: Vec<WakeEvent> = ms
            .iter()
            .map(|m| start(m.armed_ns + 500, m.ltime_ns))
            .collect();
        let raws = match_measurements(&ms, &events, &[], "default-idle (no cpuidle driver)");
        let delivered = Delivered::detect(&events, &raws);
        assert_eq!(delivered, Delivered::default());
        assert!(raws
            .iter()
            .all(|r| r.tbi_ns.is_none() && r.tintr_ns.is_none()));
        let report = state_report(
            "default-idle (no cpuidle driver)",
            None,
            &raws,
            &delivered,
            1,
        );
        assert_eq!((report.count, report.dropped), (4, 0));
        let user = report.user_latency_ns.distribution().unwrap();
        assert_eq!((user.min, user.max), (50_000.0, 53_000.0));
        assert!(report.wake_latency_ns.distribution().is_none());
        assert!(report.intr_latency_ns.distribution().is_none());
        assert!(report.silent_time_ns.distribution().is_none());
    }

    /// Windows are separate: a record belongs to the measurement whose window holds it,
    /// and another thread's timer with the same expiry is not ours.
    #[test]
    fn records_go_to_their_own_window() {
        let ms = [
            measurement(0, 1_000, 1_500),
            measurement(2_000, 3_000, 3_500),
        ];
        let events = vec![
            start(10, 1_000),
            enter(20, 1),
            exit(1_100),
            expire(1_200, TIMER, 1_150),
            ev(
                2_010,
                WakeEventKind::HrtimerStart {
                    hrtimer: TIMER,
                    softexpires_ns: 3_000,
                    tid: TID + 1,
                },
            ),
            enter(2_020, 2),
            exit(3_100),
            expire(3_200, TIMER, 3_150),
        ];
        let raws = match_measurements(&ms, &events, &names(), "?");
        assert_eq!(raws[0].tintr_ns, Some(1_200));
        assert_eq!(raws[0].cstate, "C1");
        assert_eq!(raws[1].tbi_ns, Some(2_020));
        assert_eq!(raws[1].cstate, "C1E");
        assert_eq!(raws[1].tintr_ns, None, "another thread's timer");
        // Its idle exit is there but the first interrupt is not known to be ours.
        assert_eq!(raws[1].woken_by_our_timer, Some(false));
    }
}
