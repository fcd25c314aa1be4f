//! The scheduler analysis run without end: per-thread counters for the current interval,
//! taken at each interval's close, and the threads that exited forgotten, so that memory
//! follows the live threads however long it runs.

use crate::sched::analysis::{SchedAnalysis, ThreadCharges, Waker, WakeupCauses};
use crate::sched::event::{Event, EventKind, Tid, TidMap, IDLE_TID};
use crate::sched::tracing_cost::{StackedKind, TracedEvents};

/// What one thread did in an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadInterval {
    /// CPU time the scheduler charged it (Σ `sched_stat_runtime`).
    pub runtime_ns: u64,
    /// Wake-ups it received, by what issued them.
    pub wakeups: WakeupCauses,
    /// Times it was the first to run on a CPU that had been idle.
    pub idle_wakeups: u64,
    /// Times it ran again after blocking with no wake-up recorded: `wakeups` is short of
    /// this many.
    pub unrecorded_wakeups: u64,
    /// Events recorded in its context: the tracing's cost to it.
    pub traced_events: TracedEvents,
}

/// The layer on [`SchedAnalysis`] that counts per thread, per interval.
#[derive(Debug, Default)]
pub struct IntervalCharges {
    threads: TidMap<ThreadInterval>,
}

impl IntervalCharges {
    fn thread(&mut self, tid: Tid) -> Option<&mut ThreadInterval> {
        // The idle task's time is idle time, and the analysis' marker for a task it does
        // not know is nobody's.
        (tid != IDLE_TID && tid != Tid::MAX).then(|| self.threads.entry(tid).or_default())
    }
}

impl ThreadCharges for IntervalCharges {
    fn runtime(&mut self, tid: Tid, ns: u64) {
        if let Some(t) = self.thread(tid) {
            t.runtime_ns += ns;
        }
    }

    fn woken(&mut self, tid: Tid, by: Waker) {
        if let Some(t) = self.thread(tid) {
            t.wakeups.count(by);
        }
    }

    fn idle_wakeup(&mut self, tid: Tid, _idle_ns: u64) {
        if let Some(t) = self.thread(tid) {
            t.idle_wakeups += 1;
        }
    }

    fn traced(&mut self, tid: Tid, kind: &EventKind) {
        if let Some(t) = self.thread(tid) {
            t.traced_events.count(kind);
        }
    }

    fn traced_stack(&mut self, tid: Tid, kind: StackedKind) {
        if let Some(t) = self.thread(tid) {
            t.traced_events.count_stack(kind);
        }
    }

    fn unrecorded_wakeup(&mut self, tid: Tid) {
        if let Some(t) = self.thread(tid) {
            t.unrecorded_wakeups += 1;
        }
    }
}

/// The streaming analysis: feed events in time order, close an interval whenever one ends.
#[derive(Default)]
pub struct StreamAnalysis {
    sched: SchedAnalysis<IntervalCharges>,
}

impl StreamAnalysis {
    pub fn new() -> Self {
        StreamAnalysis {
            sched: SchedAnalysis::new().with_charges(IntervalCharges::default()),
        }
    }

    /// One event, with the task current on its CPU when it fired (see
    /// [`SchedAnalysis::feed_in_context`]).
    #[inline]
    pub fn feed_in_context(&mut self, e: &Event, context: Option<Tid>) {
        self.sched.feed_in_context(e, context);
    }

    /// The counters of the interval that ends now, per thread (threads that did nothing
    /// are absent), and forgets the threads that exited: their last figures are in these
    /// counters.
    pub fn close_interval(&mut self) -> TidMap<ThreadInterval> {
        let counters = std::mem::take(&mut self.sched.charges_mut().threads);
        self.sched.forget_exited();
        counters
    }

    /// Threads the analysis holds state for (live ones, and exited ones until the next
    /// [`StreamAnalysis::close_interval`]).
    pub fn threads(&self) -> usize {
        self.sched.thread_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::event::{EventKind, InterruptKind, SwitchedOut};

    fn ev(time_ns: u64, cpu: u32, kind: EventKind) -> Event {
        Event { time_ns, cpu, kind }
    }

    /// Thread 10 runs and is charged 3 ms by the scheduler, blocks, is woken by a timer
    /// on an idle CPU and runs again; thread 11 wakes thread 12, which then exits. Every
    /// counter is hand-counted, and the exited thread is forgotten at the close.
    #[test]
    fn counters_per_interval_and_exited_threads_forgotten() {
        use EventKind::*;
        let mut a = StreamAnalysis::new();
        let events = [
            ev(
                1_000,
                0,
                Switch {
                    prev: 0,
                    how: SwitchedOut::Preempted,
                    next: 10,
                },
            ),
            ev(4_000, 0, Runtime { tid: 10, ns: 3_000 }),
            ev(
                4_000,
                0,
                Switch {
                    prev: 10,
                    how: SwitchedOut::Blocked,
                    next: 0,
                },
            ),
            ev(
                9_000,
                0,
                InterruptEnter(InterruptKind::Timer {
                    timer: 1,
                    function: 2,
                }),
            ),
            ev(
                9_100,
                0,
                Wakeup {
                    tid: 10,
                    target_cpu: 0,
                    new_thread: false,
                },
            ),
            ev(9_200, 0, InterruptExit),
            ev(
                9_300,
                0,
                Switch {
                    prev: 0,
                    how: SwitchedOut::Preempted,
                    next: 10,
                },
            ),
            ev(
                9_400,
                1,
                Switch {
                    prev: 0,
                    how: SwitchedOut::Preempted,
                    next: 11,
                },
            ),
            ev(
                9_500,
                1,
                Wakeup {
                    tid: 12,
                    target_cpu: 1,
                    new_thread: false,
                },
            ),
            ev(
                9_600,
                1,
                Switch {
                    prev: 11,
                    how: SwitchedOut::Blocked,
                    next: 12,
                },
            ),
            ev(9_900, 1, Runtime { tid: 12, ns: 300 }),
            ev(9_900, 1, Exit { tid: 12 }),
            ev(
                9_950,
                1,
                Switch {
                    prev: 12,
                    how: SwitchedOut::Exited,
                    next: 0,
                },
            ),
        ];
        for e in &events {
            a.feed_in_context(e, None);
        }
        let first = a.close_interval();
        let t10 = first[&10];
        assert_eq!(t10.runtime_ns, 3_000);
        assert_eq!(t10.wakeups.timer, 1);
        assert_eq!(t10.wakeups.total(), 1);
        // Switched in on cpu0 twice, each time after the idle task.
        assert_eq!(t10.idle_wakeups, 2);
        assert_eq!(first[&12].runtime_ns, 300);
        assert_eq!(first[&12].wakeups.thread, 1);
        assert!(!first.contains_key(&0), "the idle task is not a thread");
        assert_eq!(
            a.threads(),
            2,
            "12 exited and is forgotten; 10 and 11 remain"
        );
        // The next interval starts from zero.
        a.feed_in_context(&ev(20_000, 0, Runtime { tid: 10, ns: 500 }), None);
        let second = a.close_interval();
        assert_eq!(second.len(), 1);
        assert_eq!(second[&10].runtime_ns, 500);
        assert_eq!(second[&10].wakeups.total(), 0);
    }

    /// Thread 20 blocks and runs again with no wake-up between (a lost record, or CPU 1
    /// of this VM): one unrecorded wake-up, and no wake-up by any cause.
    #[test]
    fn a_run_after_blocking_without_a_wakeup_counts_as_unrecorded() {
        let switch = |t, prev, how, next| ev(t, 0, EventKind::Switch { prev, how, next });
        let mut a = StreamAnalysis::new();
        for e in [
            switch(1_000, 0, SwitchedOut::Preempted, 20),
            switch(2_000, 20, SwitchedOut::Blocked, 0),
            switch(5_000, 0, SwitchedOut::Preempted, 20),
        ] {
            a.feed_in_context(&e, None);
        }
        let t = a.close_interval()[&20];
        assert_eq!(t.unrecorded_wakeups, 1);
        assert_eq!(t.wakeups.total(), 0);
    }
}
