//! The drain thread of a recording: it keeps the perf rings empty — waiting until one is
//! half full, converting every record into a core event — and hands the events to the
//! writer in batches. Draining never waits for the disk, so a slow commit cannot make the
//! rings overflow.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use powerlens_core::sched::event::{Event, Tid};
use powerlens_store::recording::ThreadRow;
use powerlens_sys::trace::{monotonic_now_ns, Collector, EXITED};
use powerlens_sys::Roots;

use super::convert::Converter;
use super::threads::ThreadTable;

/// An event and its context: the thread current on the CPU when it fired (the tid of the
/// perf sample's header, 0 for the idle task), `None` when perf could not say.
pub type InContext = (Event, Option<Tid>);

/// What one drain produced: events per ring CPU, in ring order, and the thread-table rows
/// that changed.
#[derive(Debug, Default)]
pub struct Batch {
    pub events: Vec<(u32, Vec<InContext>)>,
    pub threads: Vec<ThreadRow>,
}

/// How the collection ended.
#[derive(Debug)]
pub struct DrainEnd {
    /// Records lost per CPU (rings that overflowed, undecodable records).
    pub lost: Vec<(u32, u64)>,
    /// Threads known at the end.
    pub threads: usize,
    /// When the tracepoints were disabled (CLOCK_MONOTONIC ns): no event is later.
    pub disabled_ns: u64,
}

pub struct Drainer {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<anyhow::Result<DrainEnd>>>,
    pub batches: Receiver<Batch>,
}

/// How long the drain thread waits for a ring to fill before draining anyway.
const WAIT: Duration = Duration::from_millis(50);

impl Drainer {
    /// Starts draining an enabled collector.
    pub fn start(
        collector: Collector,
        converter: Converter,
        threads: ThreadTable,
        roots: Roots,
    ) -> Drainer {
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("powerlens-drain".into())
            .spawn(move || run(collector, converter, threads, &roots, &flag, &tx))
            .expect("spawning the drain thread");
        Drainer {
            stop,
            handle: Some(handle),
            batches: rx,
        }
    }

    /// Disables the tracepoints, drains what is left and returns the last batches and how
    /// collection ended.
    pub fn stop(mut self) -> anyhow::Result<(Vec<Batch>, DrainEnd)> {
        self.stop.store(true, Ordering::SeqCst);
        let end = match self.handle.take().map(JoinHandle::join) {
            Some(Ok(end)) => end?,
            Some(Err(_)) => anyhow::bail!("the drain thread panicked"),
            None => anyhow::bail!("the drain thread was already stopped"),
        };
        Ok((self.batches.try_iter().collect(), end))
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(
    mut collector: Collector,
    converter: Converter,
    mut threads: ThreadTable,
    roots: &Roots,
    stop: &AtomicBool,
    tx: &Sender<Batch>,
) -> anyhow::Result<DrainEnd> {
    let mut disabled_ns = 0;
    loop {
        let last = stop.load(Ordering::SeqCst);
        if last {
            collector.disable()?;
            disabled_ns = monotonic_now_ns();
        } else {
            collector.wait(WAIT)?;
        }
        let mut batch = Batch::default();
        collector.drain(|r| {
            if let Some(e) = converter.convert(r, &mut threads) {
                let context = (r.tid != EXITED).then_some(r.tid);
                let slot = match batch.events.iter().position(|(cpu, _)| *cpu == r.cpu) {
                    Some(i) => i,
                    None => {
                        batch.events.push((r.cpu, Vec::new()));
                        batch.events.len() - 1
                    }
                };
                batch.events[slot].1.push((e, context));
            }
        });
        if last {
            // Threads no record named (they never ran while recorded) get their process
            // from procfs while they still exist.
            threads.resolve_missing_pids(roots);
        }
        batch.threads = threads.take_changed();
        // A closed channel means the writer gave up (a write error): stop collecting.
        if tx.send(batch).is_err() || last {
            return Ok(DrainEnd {
                lost: collector.lost(),
                threads: threads.len(),
                disabled_ns,
            });
        }
    }
}
