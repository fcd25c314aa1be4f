//! Sampled stacks meet their records. With stacks sampled
//! (`CollectorOptions::stack_samples_per_s`), the stack of one hit in N of a switch,
//! wake-up or timer arming comes in a record of its own, just before that hit's record on
//! the same CPU, with the same payload. Here each is held until the next record of its CPU
//! and handed to it when event, thread and payload agree: the event stream then reads as
//! if that record had carried the stack (a `Stack` event right after it).

use powerlens_core::sched::event::StackId;

/// A stack sample waiting for its record.
struct Held {
    event: usize,
    tid: u32,
    raw: Vec<u8>,
    /// The stack's id, or `None` when it could not be unwound into one.
    stack: Option<StackId>,
}

/// How pairing went, for the recording's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TwinCounts {
    /// Stack samples handed to their record.
    pub paired: u64,
    /// Stack samples whose record did not come next (a hit between disabling the event
    /// and its twin; another record in between): their stack is dropped.
    pub dropped: u64,
}

/// The stack sample held per CPU, and how pairing went.
#[derive(Default)]
pub struct StackTwins {
    held: Vec<Option<Held>>,
    pub counts: TwinCounts,
}

impl StackTwins {
    /// Holds a stack sample of `event` by `tid` on `cpu`, with payload `raw`, until the
    /// next record of that CPU; one still held there is dropped.
    pub fn hold(&mut self, cpu: u32, event: usize, tid: u32, raw: &[u8], stack: Option<StackId>) {
        let i = cpu as usize;
        if self.held.len() <= i {
            self.held.resize_with(i + 1, || None);
        }
        let held = Held {
            event,
            tid,
            raw: raw.to_vec(),
            stack,
        };
        if self.held[i].replace(held).is_some() {
            self.counts.dropped += 1;
        }
    }

    /// The stack held for this record of `cpu`: `Some(stack)` when the sample held there
    /// is its twin (then `stack` may still be `None`, a stack that did not unwind),
    /// `None` when nothing is held or what is held is another hit's (dropped).
    pub fn take_for(
        &mut self,
        cpu: u32,
        event: usize,
        tid: u32,
        raw: &[u8],
    ) -> Option<Option<StackId>> {
        let counts = &mut self.counts;
        let held = self.held.get_mut(cpu as usize)?.take()?;
        if held.event == event && held.tid == tid && held.raw == raw {
            counts.paired += 1;
            Some(held.stack)
        } else {
            counts.dropped += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_goes_to_the_next_record_of_its_cpu_when_they_agree() {
        let mut t = StackTwins::default();
        t.hold(1, 0, 42, b"switch 42->7", Some(5));
        // Another CPU's record does not take it.
        assert_eq!(t.take_for(0, 0, 42, b"switch 42->7"), None);
        assert_eq!(t.take_for(1, 0, 42, b"switch 42->7"), Some(Some(5)));
        // Taken once.
        assert_eq!(t.take_for(1, 0, 42, b"switch 42->7"), None);
        assert_eq!((t.counts.paired, t.counts.dropped), (1, 0));
    }

    #[test]
    fn a_sample_whose_record_does_not_come_next_is_dropped() {
        let mut t = StackTwins::default();
        // Another payload (another hit of the same event by the same thread).
        t.hold(0, 0, 42, b"switch 42->7", Some(5));
        assert_eq!(t.take_for(0, 0, 42, b"switch 42->8"), None);
        // Another event.
        t.hold(0, 0, 42, b"x", Some(5));
        assert_eq!(t.take_for(0, 1, 42, b"x"), None);
        // A second sample before any record: the first is dropped, the second paired.
        t.hold(0, 0, 42, b"a", Some(5));
        t.hold(0, 0, 42, b"b", None);
        assert_eq!(t.take_for(0, 0, 42, b"b"), Some(None));
        assert_eq!((t.counts.paired, t.counts.dropped), (1, 3));
    }
}
