//! Commits that hold their second on a busy machine.
//!
//! A recording commits every second, so that a recorder killed at any moment leaves a file
//! that covers all but its last second. What a commit holds is what the decoder has
//! handed over, and the decoder runs at nice 19 so that the load under watch does not pay
//! for it while it runs: beside CPU-bound work at nice 0 it gets about 1.5% of a CPU
//! (weight 15 against 1,024 each), falls seconds behind, and a commit holds events that
//! old. So the recorder watches how far behind the drain's batches are, raises the
//! drain's threads while they are (as a live session does at an interval's end), and
//! before each commit asks for a copy and waits, briefly, for the batches up to now.

use std::time::{Duration, Instant};

use powerlens_sys::trace::monotonic_now_ns;

use crate::drain::{Batch, Drainer};
use crate::interrupt::{self, Woke};
use crate::recorder::Recorder;

/// Batches this much older than now mean the decoder is behind: more than two of the
/// drain's 50-ms periods.
pub(crate) const BEHIND_NS: u64 = 150_000_000;

/// Before a commit, a batch copied this recently holds every event up to the commit: the
/// copy asked for, and its decoding, with the drain's threads raised.
const FRESH_NS: u64 = 20_000_000;

/// The longest a commit waits for the batches up to its time; past it, it commits what it
/// has (a decoder that cannot be raised, or a backlog too large to decode in time).
const WAIT_AT_MOST: Duration = Duration::from_millis(300);

/// How far the drain's batches are behind the clock, and what a commit waited for them.
#[derive(Debug, Default)]
pub(crate) struct OnTime {
    /// When the newest batch taken was copied (CLOCK_MONOTONIC ns): every event before it
    /// has been taken.
    newest_drained_ns: u64,
    /// The longest a commit has waited for its batches, and how many gave up waiting.
    pub(crate) longest_wait: Duration,
    pub(crate) gave_up: u32,
}

impl OnTime {
    /// Takes every batch that is ready into `recorder`.
    pub(crate) fn take_ready(&mut self, drainer: &Drainer, recorder: &mut Recorder) {
        for batch in drainer.batches.take_ready() {
            self.took(&batch);
            recorder.take(batch);
        }
    }

    fn took(&mut self, batch: &Batch) {
        self.newest_drained_ns = self.newest_drained_ns.max(batch.drained_ns);
    }

    /// Whether the batches are behind at `now_ns`.
    pub(crate) fn behind(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.newest_drained_ns) > BEHIND_NS
    }

    /// Raises the drain's threads while the batches are behind, and lets them yield again
    /// once they have caught up.
    pub(crate) fn pace(&self, drainer: &Drainer) {
        drainer.hurry(self.behind(monotonic_now_ns()));
    }

    /// Before a commit: asks for a copy of the rings and takes the batches until one holds
    /// the events up to now, with the drain's threads raised, for at most
    /// [`WAIT_AT_MOST`]. Returns early on a signal (the loop then stops).
    pub(crate) fn catch_up(&mut self, drainer: &Drainer, recorder: &mut Recorder) {
        let asked_ns = monotonic_now_ns();
        let started = Instant::now();
        drainer.wake();
        drainer.hurry(true);
        let Some(ready) = drainer.batches.ready_fd() else {
            return;
        };
        loop {
            self.take_ready(drainer, recorder);
            if self.newest_drained_ns + FRESH_NS >= asked_ns {
                break;
            }
            let left = WAIT_AT_MOST.saturating_sub(started.elapsed());
            if left.is_zero() {
                self.gave_up += 1;
                break;
            }
            if interrupt::wait_or(&[ready], Some(left)) == Woke::Interrupted {
                break;
            }
        }
        self.longest_wait = self.longest_wait.max(started.elapsed());
        self.pace(drainer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_behind_once_older_than_two_drain_periods() {
        let mut t = OnTime::default();
        t.took(&Batch {
            drained_ns: 1_000_000_000,
            ..Batch::default()
        });
        assert!(!t.behind(1_000_000_000 + BEHIND_NS));
        assert!(t.behind(1_000_000_000 + BEHIND_NS + 1));
        // An older batch taken later moves nothing back.
        t.took(&Batch {
            drained_ns: 10,
            ..Batch::default()
        });
        assert!(!t.behind(1_100_000_000));
    }
}
