//! A channel between threads of different priorities whose receiver never waits on a lock
//! the sender may hold.
//!
//! std's mpsc wakes a receiver blocked in `recv` through a mutex that both ends take (the
//! sender to wake it, the receiver to register and unregister). A live session's thread
//! waits at nice −10 for batches from a decoder at nice 19; beside CPU-bound work at a
//! raised priority a nice-19 thread preempted while it held that mutex waits hundreds of
//! milliseconds for a CPU, and the session's thread waited as long behind it: an agent's
//! interval closed up to 0.7 s late (beside two spinners at nice −10, debug build, where
//! the decoder runs longest). Here the receiver only ever *tries* the channel, which takes
//! no lock while no receiver blocks in it, and sleeps in poll(2) on an eventfd the sender
//! rings after each send. The kernel guards an eventfd with a spinlock, which no
//! preempted thread holds.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::mpsc::{self, RecvTimeoutError, SendError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use powerlens_sys::nudge::Nudge;

/// A channel: the sender rings `nudge` after each message and when it goes.
pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = mpsc::channel();
    // Without an eventfd (never on Linux), the receiver blocks in std's `recv`: slower to
    // wake beside starved senders, but correct.
    let nudge = Nudge::new().ok().map(Arc::new);
    (
        Sender {
            tx: Some(tx),
            nudge: nudge.clone(),
        },
        Receiver { rx, nudge },
    )
}

pub(crate) struct Sender<T> {
    /// `None` only while it is dropped (see its `Drop`).
    tx: Option<mpsc::Sender<T>>,
    nudge: Option<Arc<Nudge>>,
}

impl<T> Sender<T> {
    /// Sends `value`; an error gives it back when the receiver is gone.
    pub(crate) fn send(&self, value: T) -> Result<(), SendError<T>> {
        let sent = match &self.tx {
            Some(tx) => tx.send(value),
            None => Err(SendError(value)),
        };
        self.ring();
        sent
    }

    fn ring(&self) {
        if let Some(n) = &self.nudge {
            n.ring();
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            tx: self.tx.clone(),
            nudge: self.nudge.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    /// A receiver waiting on the nudge learns that the senders are gone only by trying
    /// the channel again: the channel's sender goes first, then the ring. Rung before the
    /// fields were dropped, a receiver could try the channel while it was still there,
    /// find it empty and wait for good (a test of the channel hung in CI).
    fn drop(&mut self) {
        drop(self.tx.take());
        self.ring();
    }
}

pub struct Receiver<T> {
    rx: mpsc::Receiver<T>,
    nudge: Option<Arc<Nudge>>,
}

impl<T> Receiver<T> {
    /// The next message, if one came within `wait`.
    pub fn recv_timeout(&self, wait: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(Instant::now() + wait))
    }

    /// The next message, waiting as long as it takes; `None` once every sender is gone
    /// and every message taken.
    pub fn recv(&self) -> Option<T> {
        self.recv_until(None).ok()
    }

    /// A message that is already there.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.rx.try_recv()
    }

    /// The messages that are already there.
    pub fn try_iter(&self) -> impl Iterator<Item = T> + '_ {
        self.rx.try_iter()
    }

    /// A descriptor that reads ready once a message may be waiting, for a thread that
    /// polls it beside others and then takes them with [`Receiver::take_ready`]; `None`
    /// without an eventfd.
    pub fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        self.nudge.as_ref().map(|n| n.as_fd())
    }

    /// The messages that are already there, after making [`Receiver::ready_fd`] unready:
    /// a message sent after the take makes it ready again.
    pub fn take_ready(&self) -> impl Iterator<Item = T> + '_ {
        if let Some(nudge) = &self.nudge {
            nudge.clear();
        }
        self.rx.try_iter()
    }

    /// Every message until the senders are gone.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(|| self.recv())
    }

    fn recv_until(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        let Some(nudge) = &self.nudge else {
            return match deadline {
                Some(d) => self
                    .rx
                    .recv_timeout(d.saturating_duration_since(Instant::now())),
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
        };
        loop {
            // Cleared before trying: a message sent after the try rings it again, so the
            // wait below cannot sleep through it.
            nudge.clear();
            match self.rx.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Err(RecvTimeoutError::Timeout);
            }
            // A signal or a spurious end only loops back to trying.
            nudge.wait(left);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_receiver_wakes_for_each_message_and_for_the_senders_going() {
        let (tx, rx) = channel::<u32>();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(5)),
            Err(RecvTimeoutError::Timeout)
        );
        let sender = std::thread::spawn(move || {
            for i in 0..3 {
                std::thread::sleep(Duration::from_millis(20));
                tx.send(i).unwrap();
            }
        });
        let start = Instant::now();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(0));
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "woken by the send"
        );
        assert_eq!(rx.iter().collect::<Vec<_>>(), vec![1, 2]);
        sender.join().unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected)
        );
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "no wait once they are gone"
        );
    }

    /// Each time, the sender's going ends the wait, however the receiver's try and the
    /// ring interleave with it.
    #[test]
    fn a_receiver_hears_of_its_sender_going_every_time() {
        for _ in 0..200 {
            let (tx, rx) = channel::<u32>();
            let dropper = std::thread::spawn(move || drop(tx));
            let start = Instant::now();
            assert_eq!(
                rx.recv_timeout(Duration::from_secs(2)),
                Err(RecvTimeoutError::Disconnected)
            );
            // A ring that came before the channel's sender went leaves the receiver to
            // wait out its timeout (as it did before the drop order was fixed).
            assert!(start.elapsed() < Duration::from_secs(1), "a ring was lost");
            dropper.join().unwrap();
        }
    }

    /// A thread that polls the channel beside other descriptors (the recorder's loop).
    #[test]
    fn the_ready_fd_reads_ready_until_the_messages_are_taken() {
        let (tx, rx) = channel::<u32>();
        let ready = |rx: &Receiver<u32>| {
            powerlens_sys::nudge::readable(rx.ready_fd().unwrap(), Some(Duration::ZERO))
        };
        assert!(!ready(&rx));
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert!(ready(&rx));
        assert_eq!(rx.take_ready().collect::<Vec<_>>(), [1, 2]);
        assert!(!ready(&rx), "taken: nothing more to wake for");
        tx.send(3).unwrap();
        assert!(ready(&rx));
        assert_eq!(rx.take_ready().collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn a_send_to_a_receiver_that_is_gone_gives_the_message_back() {
        let (tx, rx) = channel::<u32>();
        drop(rx);
        assert_eq!(tx.send(7).unwrap_err().0, 7);
    }
}
