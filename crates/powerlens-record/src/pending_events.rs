//! A live session's events between the drain and the analysis: each CPU's events in the
//! order they arrived, handed on merged by time once the drain has passed them, and only
//! those of the time span the analysis is open for.

use crate::drain::InContext;

/// Each CPU's events not yet handed to the analysis.
#[derive(Debug, Default)]
pub(crate) struct PendingEvents {
    by_cpu: Vec<(u32, Vec<InContext>)>,
}

impl PendingEvents {
    /// Keeps `events` of `cpu`, after those it already holds of that CPU.
    pub(crate) fn add(&mut self, cpu: u32, events: Vec<InContext>) {
        match self.by_cpu.iter_mut().find(|(c, _)| *c == cpu) {
            Some((_, held)) => held.extend(events),
            None => self.by_cpu.push((cpu, events)),
        }
    }

    /// Takes every event up to `until` (inclusive), all CPUs merged by time (ties in CPU
    /// order, as a recording's replay has them). Those before `from` are dropped, and
    /// counted in the second value: they belong to a span already analysed (a traced
    /// window that closed before the drain brought them).
    pub(crate) fn take_between(&mut self, from: u64, until: u64) -> (Vec<(u32, InContext)>, u64) {
        let mut ready = Vec::new();
        let mut stale = 0;
        for (cpu, events) in &mut self.by_cpu {
            // A ring is in write order: time order but for records nested by an interrupt.
            events.sort_by_key(|(e, _)| e.time_ns);
            let n = events.partition_point(|(e, _)| e.time_ns <= until);
            let before = events[..n].partition_point(|(e, _)| e.time_ns < from);
            stale += before as u64;
            ready.extend(events.drain(..n).skip(before).map(|ev| (*cpu, ev)));
        }
        ready.sort_by_key(|(cpu, (e, _))| (e.time_ns, *cpu));
        (ready, stale)
    }

    /// Gives back events [`PendingEvents::take_between`] took and nobody handed on: they
    /// go before what each CPU still holds, which is all later than them.
    pub(crate) fn put_back(&mut self, events: impl Iterator<Item = (u32, InContext)>) {
        let mut returned: Vec<(u32, Vec<InContext>)> = Vec::new();
        for (cpu, event) in events {
            match returned.iter_mut().find(|(c, _)| *c == cpu) {
                Some((_, held)) => held.push(event),
                None => returned.push((cpu, vec![event])),
            }
        }
        for (cpu, earlier) in returned {
            match self.by_cpu.iter_mut().find(|(c, _)| *c == cpu) {
                Some((_, held)) => {
                    held.splice(0..0, earlier);
                }
                None => self.by_cpu.push((cpu, earlier)),
            }
        }
    }

    /// Forgets every event held.
    pub(crate) fn clear(&mut self) {
        self.by_cpu.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::sched::event::{Event, EventKind};

    fn at(time_ns: u64, cpu: u32) -> InContext {
        let kind = EventKind::Exit { tid: 7 };
        (Event { time_ns, cpu, kind }, Some(7))
    }

    fn times(taken: &[(u32, InContext)]) -> Vec<(u64, u32)> {
        taken
            .iter()
            .map(|(cpu, (e, _))| (e.time_ns, *cpu))
            .collect()
    }

    /// Events taken and given back are taken again, in the same order, before later ones.
    #[test]
    fn events_put_back_come_again_first() {
        let mut p = PendingEvents::default();
        p.add(0, vec![at(10, 0), at(30, 0), at(50, 0)]);
        p.add(1, vec![at(20, 1), at(40, 1)]);
        let (taken, _) = p.take_between(0, 40);
        assert_eq!(times(&taken), [(10, 0), (20, 1), (30, 0), (40, 1)]);
        // The first two handed on, the rest given back.
        p.put_back(taken.into_iter().skip(2));
        p.add(1, vec![at(60, 1)]);
        let (again, _) = p.take_between(0, 100);
        assert_eq!(times(&again), [(30, 0), (40, 1), (50, 0), (60, 1)]);
    }

    /// Two CPUs' events, one nested out of order: merged by time, ties in CPU order, the
    /// ones past `until` kept for later, the ones before `from` dropped and counted.
    #[test]
    fn takes_the_span_merged_and_drops_what_came_before_it() {
        let mut p = PendingEvents::default();
        p.add(1, vec![at(10, 1), at(30, 1), at(50, 1)]);
        p.add(0, vec![at(5, 0), at(30, 0), at(20, 0)]);
        p.add(0, vec![at(60, 0)]);
        let (taken, stale) = p.take_between(10, 50);
        assert_eq!(times(&taken), [(10, 1), (20, 0), (30, 0), (30, 1), (50, 1)]);
        assert_eq!(stale, 1, "the event at 5 ns, before the span");
        // What was past the span is still held; nothing is taken twice.
        let (taken, stale) = p.take_between(0, u64::MAX);
        assert_eq!((times(&taken), stale), (vec![(60, 0)], 0));
    }

    /// Before a window is on (`from` past every event), whatever arrives is a closed
    /// window's late events: all dropped, all counted.
    #[test]
    fn with_no_span_open_every_event_is_late() {
        let mut p = PendingEvents::default();
        p.add(0, vec![at(1, 0), at(2, 0)]);
        let (taken, stale) = p.take_between(u64::MAX, 100);
        assert!(taken.is_empty());
        assert_eq!(stale, 2);
    }
}
