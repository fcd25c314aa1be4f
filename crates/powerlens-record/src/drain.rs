//! The drain of a recording: one thread keeps the perf rings empty — waiting until one is
//! half full and copying it out — and another converts every record into a core event
//! and hands the events to the writer in batches. Draining never waits for the disk or
//! for unwinding, so neither a slow commit nor a burst of stacks makes the rings overflow.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use powerlens_core::sched::event::{Event, EventKind, InterruptKind, StackId, Tid};
use powerlens_store::recording::ThreadRow;
use powerlens_sys::nudge::Nudge;
use powerlens_sys::trace::{
    monotonic_now_ns, Collected, Collector, RawChunk, RecordDecoder, EXITED,
};
use powerlens_sys::unwind::UnwindStats;
use powerlens_sys::Roots;

use crate::convert::Converter;
use crate::error::RecordError;
use crate::handoff::{self, Receiver, Sender};
use crate::priority::{Hurry, Urgency, HURRIED_NICE, YIELDING_NICE};
use crate::stack_twins::{StackTwins, TwinCounts};
use crate::stacks::{RawStack, StackRecorder};
use crate::threads::{ThreadTable, SWEEP_VANISHED_EVERY};

/// An event and its context: the thread current on the CPU when it fired (the tid of the
/// perf sample's header, 0 for the idle task), `None` when perf could not say.
pub type InContext = (Event, Option<Tid>);

/// What one drain produced: events per ring CPU, in ring order, the thread-table rows
/// that changed, and the modules and stacks first seen.
#[derive(Debug, Default)]
pub struct Batch {
    pub events: Vec<(u32, Vec<InContext>)>,
    pub threads: Vec<ThreadRow>,
    pub modules: Vec<(u32, String)>,
    pub stacks: Vec<(StackId, Vec<u8>)>,
    /// When the drain began (CLOCK_MONOTONIC ns): every record written before it is in
    /// this batch or an earlier one, so a consumer merging the CPUs can deliver events up
    /// to this time.
    pub drained_ns: u64,
    /// Records lost so far, all CPUs together.
    pub lost: u64,
}

impl Batch {
    fn push(&mut self, cpu: u32, event: Event, context: Option<Tid>) {
        let slot = match self.events.iter().position(|(c, _)| *c == cpu) {
            Some(i) => i,
            None => {
                self.events.push((cpu, Vec::new()));
                self.events.len() - 1
            }
        };
        self.events[slot].1.push((event, context));
    }
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
    /// With stacks: distinct stacks and how unwinding went.
    pub stacks: Option<(usize, UnwindStats)>,
    /// With sampled stacks: the samples that met their record and those dropped, and
    /// the largest period they were paced to (1: every hit had its stack).
    pub stack_samples: Option<SampledStacks>,
}

/// How sampling the stacks went ([`DrainEnd::stack_samples`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledStacks {
    pub counts: TwinCounts,
    pub max_period: u64,
}

pub struct Drainer {
    handle: Option<JoinHandle<Result<DrainEnd, RecordError>>>,
    pub batches: Receiver<Batch>,
    urgency: Arc<Urgency>,
    control: Arc<Control>,
}

/// What the consumer tells the drain thread: to stop, or to doze — wait for a nudge
/// instead of draining every [`WAIT`]. While nothing is traced (an agent between its
/// tracing windows) an empty copy every 50 ms is 20 wake-ups a second of the drain, and
/// as many of the decoder and of its consumer.
struct Control {
    stop: AtomicBool,
    dozing: AtomicBool,
    /// `None` when no eventfd could be made: the drain then never dozes.
    nudge: Option<Nudge>,
}

impl Control {
    fn new() -> Control {
        Control {
            stop: AtomicBool::new(false),
            dozing: AtomicBool::new(false),
            nudge: Nudge::new().ok(),
        }
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.ring();
    }

    /// How long the drain waits for the rings: no limit while dozing.
    fn wait(&self, awake: Duration) -> Option<Duration> {
        let dozing = self.nudge.is_some() && self.dozing.load(Ordering::SeqCst);
        (!dozing).then_some(awake)
    }

    fn ring(&self) {
        if let Some(n) = &self.nudge {
            n.ring();
        }
    }
}

/// How long the drain thread waits for a ring to fill before draining anyway.
const WAIT: Duration = Duration::from_millis(50);

impl Drainer {
    /// Starts draining an enabled collector.
    pub fn start(
        collector: Collector,
        converter: Converter,
        threads: ThreadTable,
        stacks: Option<StackRecorder>,
        roots: Roots,
    ) -> Drainer {
        Self::start_with(
            collector,
            converter,
            threads,
            stacks,
            roots,
            DrainStyle::RECORDING,
        )
    }

    /// As [`Drainer::start`], for the consumer `style` describes.
    pub fn start_with(
        collector: Collector,
        converter: Converter,
        threads: ThreadTable,
        stacks: Option<StackRecorder>,
        roots: Roots,
        style: DrainStyle,
    ) -> Drainer {
        let (tx, rx) = handoff::channel();
        let urgency = Arc::new(Urgency::default());
        let feeders = urgency.clone();
        let control = Arc::new(Control::new());
        let told = control.clone();
        let handle = std::thread::Builder::new()
            .name("powerlens-drain".into())
            .spawn(move || {
                let state = State {
                    converter,
                    threads,
                    stacks,
                    forget_exited: style.forget_exited.then(Vec::new),
                    decoder_nice: style.decoder_nice,
                    twins: StackTwins::default(),
                };
                let copier = Hurry::new(style.drain_nice);
                run(collector, state, copier, feeders, &told, &roots, &tx)
            })
            .expect("spawning the drain thread");
        Drainer {
            handle: Some(handle),
            batches: rx,
            urgency,
            control,
        }
    }

    /// Says that nothing is traced for now (the tracepoints are off): the drain thread
    /// copies nothing until [`Drainer::wake`] or the stop, instead of every 50 ms.
    pub fn doze(&self) {
        self.control.dozing.store(true, Ordering::SeqCst);
    }

    /// Ends a [`Drainer::doze`]: the drain copies at once, then at its usual pace.
    pub fn wake(&self) {
        self.control.dozing.store(false, Ordering::SeqCst);
        self.control.ring();
    }

    /// Says whether the consumer finds the drain behind its deadlines: while it does, the
    /// drain's threads run ahead of the load (nice −10), raised at once from the calling
    /// thread, however starved they are.
    pub fn hurry(&self, behind: bool) {
        self.urgency.set(behind);
    }

    /// Disables the tracepoints, drains what is left and returns the last batches and how
    /// collection ended.
    pub fn stop(mut self) -> Result<(Vec<Batch>, DrainEnd), RecordError> {
        // What is left is decoded ahead of the load: at nice 19 beside CPU-bound work the
        // end of a 3-s recording waited 15 s for it.
        self.urgency.set(true);
        self.control.stop();
        let end = match self.handle.take().map(JoinHandle::join) {
            Some(Ok(end)) => end?,
            Some(Err(_)) => {
                return Err(RecordError::Panicked {
                    thread: "drain thread",
                })
            }
            None => return Err(RecordError::DrainAlreadyStopped),
        };
        Ok((self.batches.try_iter().collect(), end))
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        self.control.stop();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A ring that held this share of its size at a copy has the copier hurry (nice −10)...
const HURRY_AT_RING_SHARE: f64 = 0.25;
/// ...until a copy finds every ring under this share.
const CALM_BELOW_RING_SHARE: f64 = 1.0 / 16.0;

/// What a drain's consumer needs of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainStyle {
    /// Whether the thread table forgets each exited thread once its last change is handed
    /// out, and every 10 s the threads procfs no longer has (a consumer that runs without
    /// end: the table then holds the live threads, not every thread ever).
    pub forget_exited: bool,
    /// The decoding thread's nice while its backlog is small.
    pub decoder_nice: i32,
    /// The copying (drain) thread's nice while the rings hold little (a copy finds none a
    /// quarter full); it hurries (nice −10) until they are nearly empty again.
    pub drain_nice: i32,
}

impl DrainStyle {
    /// A recording: every thread kept for the file's table, and decoding deferred to idle
    /// CPU time (nice 19), since the file is written whenever it is decoded. On the pipe
    /// load of scripts/bench-observer.sh, decoding at nice 0 instead grew the load's wall
    /// time from 1.37× to 1.91× its bare time, for the same added CPU time.
    ///
    /// The copier runs ahead of the load (nice −10) throughout: on a machine the load
    /// keeps busy, a copier at the load's priority got about a third of a CPU and the
    /// rings overflowed — a default recording of two pairs of processes passing bytes
    /// through pipes (the benchmark's `pipes`) lost 65,000–71,000 of its ~350,000 records
    /// through perf rings on this project's 2-CPU VMs, and 0–17,000 with the raise. A lost
    /// record is a wrong wait or runnable time in a whole trace.
    pub const RECORDING: DrainStyle = DrainStyle {
        forget_exited: false,
        decoder_nice: 19,
        drain_nice: HURRIED_NICE,
    };

    /// A live session (`agent`, `top`): threads forgotten once gone, and every thread of
    /// the session yields to the load (nice 19) while it keeps up, hurrying only when it
    /// falls behind (the rings a quarter full, a large backlog). A watcher that runs
    /// without end should cost the watched processes nothing it can defer to the CPU time
    /// they leave: on the pipe load ×5 with the agent tracing throughout, its copier at
    /// nice −10 and decoder and analysis at nice 0 cost the load 1.89× its bare wall time
    /// (paired median of 9 rounds), the same with the decoder and the analysis at nice 19
    /// 1.32×, and every thread at nice 19 0.99×, no record lost in any round.
    pub const LIVE: DrainStyle = DrainStyle {
        forget_exited: true,
        decoder_nice: YIELDING_NICE,
        drain_nice: YIELDING_NICE,
    };
}

/// What the drain thread keeps between drains.
struct State {
    converter: Converter,
    threads: ThreadTable,
    stacks: Option<StackRecorder>,
    /// Forget threads once their exit was handed out (a consumer that runs without end);
    /// the exits of the current drain wait here.
    forget_exited: Option<Vec<Tid>>,
    /// The decoding thread's nice while its backlog is small.
    decoder_nice: i32,
    /// Sampled stacks waiting for their records.
    twins: StackTwins,
}

impl State {
    /// Converts one collected record into events (an event, and its stack after it).
    fn take(&mut self, c: Collected<'_>, batch: &mut Batch) {
        match c {
            Collected::StackSample(r) => {
                let raw = RawStack {
                    pid: r.pid,
                    callchain: r.callchain,
                    user_regs: r.user_regs,
                    user_stack: r.user_stack,
                };
                let stack = self.stacks.as_mut().and_then(|s| s.intern(&raw));
                self.twins.hold(r.cpu, r.event, r.tid, r.raw, stack);
            }
            Collected::Trace(r) => {
                let sampled = self.twins.take_for(r.cpu, r.event, r.tid, r.raw);
                let Some(e) = self.converter.convert(&r, &mut self.threads) else {
                    return;
                };
                let context = (r.tid != EXITED).then_some(r.tid);
                if let (Some(gone), EventKind::Exit { tid }) = (&mut self.forget_exited, e.kind) {
                    gone.push(tid);
                }
                if let Some(stacks) = &mut self.stacks {
                    match e.kind {
                        // In the parent's context: the header's pid is the parent process.
                        EventKind::Fork { child, .. } => stacks.fork(r.pid, child, e.time_ns),
                        EventKind::Exit { tid } => {
                            // A thread's clone made an entry under its tid, never looked
                            // up (stacks go by process): it goes with the thread.
                            if tid != r.pid {
                                stacks.exit(tid, e.time_ns);
                            }
                            if self.converter.ends_process(&r) {
                                stacks.exit(r.pid, e.time_ns);
                            }
                        }
                        // Timer callbacks are kernel addresses: named with the stacks.
                        EventKind::TimerArm { function, .. }
                        | EventKind::InterruptEnter(InterruptKind::Timer { function, .. }) => {
                            stacks.kernel_function(function)
                        }
                        _ => {}
                    }
                }
                let (time_ns, cpu) = (e.time_ns, e.cpu);
                batch.push(cpu, e, context);
                if let Some(sampled) = sampled {
                    // Its stack came in the sample before it.
                    if let Some(id) = sampled {
                        batch.push(cpu, stack_event(time_ns, cpu, id), context);
                    }
                    return;
                }
                let raw = RawStack {
                    pid: r.pid,
                    callchain: r.callchain,
                    user_regs: r.user_regs,
                    user_stack: r.user_stack,
                };
                self.push_stack(&raw, time_ns, cpu, context, batch);
            }
            Collected::CpuSample(s) => {
                self.threads.observe_current(s.cpu, s.pid, s.tid, s.time_ns);
                let context = Some(s.tid);
                let sample = EventKind::CpuSample {
                    tid: s.tid,
                    period_ns: s.period_ns,
                };
                batch.push(
                    s.cpu,
                    Event {
                        time_ns: s.time_ns,
                        cpu: s.cpu,
                        kind: sample,
                    },
                    context,
                );
                let raw = RawStack {
                    pid: s.pid,
                    callchain: s.callchain,
                    user_regs: s.user_regs,
                    user_stack: s.user_stack,
                };
                self.push_stack(&raw, s.time_ns, s.cpu, context, batch);
            }
            Collected::Mmap(m) => {
                if let Some(stacks) = &mut self.stacks {
                    stacks.mmap(m);
                }
            }
            // The exec's COMM record comes before the new image's MMAP2 records (the
            // sched_process_exec tracepoint comes after them): the old mappings go here.
            Collected::Comm(c) if c.exec => {
                if let Some(stacks) = &mut self.stacks {
                    stacks.exec(c.pid, c.time_ns);
                }
            }
            _ => {}
        }
    }

    fn push_stack(
        &mut self,
        raw: &RawStack<'_>,
        time_ns: u64,
        cpu: u32,
        context: Option<Tid>,
        batch: &mut Batch,
    ) {
        let Some(stacks) = &mut self.stacks else {
            return;
        };
        if let Some(id) = stacks.intern(raw) {
            batch.push(cpu, stack_event(time_ns, cpu, id), context);
        }
    }
}

/// The event that gives the event before it on `cpu` its stack.
fn stack_event(time_ns: u64, cpu: u32, id: StackId) -> Event {
    Event {
        time_ns,
        cpu,
        kind: EventKind::Stack { id },
    }
}

/// Bytes copied out of the rings and not yet decoded, at most. Past it the copier leaves
/// records in the rings, which overflow and count what they lose: memory stays bounded
/// whatever the load, and a loss is still said.
const MAX_BACKLOG_BYTES: usize = 256 << 20;

/// What the copier hands the decoder: every CPU's ring contents at one drain.
struct Copied {
    chunks: Vec<RawChunk>,
    /// When the copy began: every record written before it is in this copy or an earlier.
    drained_ns: u64,
    /// The tracepoints are disabled: nothing follows.
    last: bool,
}

/// How decoding ended.
struct Decoded {
    lost: Vec<(u32, u64)>,
    threads: usize,
    stacks: Option<(usize, UnwindStats)>,
    twins: TwinCounts,
}

/// The drain thread: it only copies the rings out (memory speed) and hands the copies to
/// a decoding thread, so that the rings are freed however long converting and unwinding
/// take. A single thread that decoded between two waits lost records on every burst that
/// outlasted a ring: a default recording of scripts/bench-observer.sh's `pipes` load lost
/// 100–25,000 of its ~350,000 records on this project's 2-CPU VMs, whatever its priority.
fn run(
    mut collector: Collector,
    state: State,
    copier: Hurry,
    urgency: Arc<Urgency>,
    control: &Control,
    roots: &Roots,
    tx: &Sender<Batch>,
) -> Result<DrainEnd, RecordError> {
    urgency.enlist();
    copier.follow(false);
    // Whether the rings filled: the copier hurries until they are nearly empty again.
    let mut rings_filling = false;
    let decoder = collector.decoder();
    let backlog = Arc::new(AtomicUsize::new(0));
    let (raw_tx, raw_rx) = handoff::channel::<Copied>();
    let decoding = {
        let (backlog, roots, tx, urgency) =
            (backlog.clone(), roots.clone(), tx.clone(), urgency.clone());
        std::thread::Builder::new()
            .name("powerlens-decode".into())
            .spawn(move || {
                urgency.enlist();
                decode(&decoder, state, &roots, &raw_rx, &tx, &backlog, &urgency)
            })
            .expect("spawning the decoding thread")
    };
    let mut disabled_ns = 0;
    // Tracing has started: the pacing of sampled stacks counts from here, and the waits
    // end in time for its readings.
    let mut pace_in = collector.pace_stack_samples();
    loop {
        let wait = control.wait(pace_in.map_or(WAIT, |next| next.min(WAIT)));
        let last = control.stop.load(Ordering::SeqCst);
        let room = backlog.load(Ordering::Relaxed) < MAX_BACKLOG_BYTES;
        if last {
            collector.disable()?;
            disabled_ns = monotonic_now_ns();
        } else if room {
            collector.wait_or(wait, control.nudge.as_ref())?;
            if let Some(n) = &control.nudge {
                n.clear();
            }
            pace_in = collector.pace_stack_samples();
        } else {
            // The decoder is far behind: let the rings hold (and lose) what comes.
            std::thread::sleep(WAIT);
        }
        let mut copied = Copied {
            chunks: Vec::new(),
            drained_ns: monotonic_now_ns(),
            last,
        };
        if last || backlog.load(Ordering::Relaxed) < MAX_BACKLOG_BYTES {
            let out = collector.copy_out(&mut copied.chunks);
            backlog.fetch_add(out.bytes, Ordering::Relaxed);
            if out.fullest_ring_share >= HURRY_AT_RING_SHARE {
                rings_filling = true;
            } else if out.fullest_ring_share < CALM_BELOW_RING_SHARE {
                rings_filling = false;
            }
        }
        copier.follow(rings_filling || urgency.is_set());
        // A decoder that stopped (the writer gave up on a write error): stop collecting.
        if raw_tx.send(copied).is_err() || last {
            break;
        }
    }
    drop(raw_tx);
    let decoded = match decoding.join() {
        Ok(d) => d,
        Err(_) => {
            return Err(RecordError::Panicked {
                thread: "decoding thread",
            })
        }
    };
    let mut lost = collector.lost();
    for (cpu, n) in decoded.lost {
        match lost.iter_mut().find(|(c, _)| *c == cpu) {
            Some((_, l)) => *l += n,
            // A chunk of no CPU of the collector's (the in-kernel ring's copies, whose
            // records carry their own CPU) is listed only when one could not be read.
            None if n > 0 => lost.push((cpu, n)),
            None => {}
        }
    }
    Ok(DrainEnd {
        lost,
        threads: decoded.threads,
        disabled_ns,
        stacks: decoded.stacks,
        stack_samples: collector
            .max_stack_sample_period()
            .map(|max_period| SampledStacks {
                counts: decoded.twins,
                max_period,
            }),
    })
}

/// Backlog below which the decoder keeps its consumer's nice ([`DrainStyle`]): a
/// recording's waits for idle CPU time, so that the load under watch does not pay for it
/// while it runs.
const YIELD_BELOW_BYTES: usize = 32 << 20;

/// The decoding thread: converts each copy into events and stacks, one batch per copy.
fn decode(
    decoder: &RecordDecoder,
    mut state: State,
    roots: &Roots,
    copies: &Receiver<Copied>,
    tx: &Sender<Batch>,
    backlog: &AtomicUsize,
    urgency: &Urgency,
) -> Decoded {
    let mut lost: Vec<(u32, u64)> = Vec::new();
    // Ahead of the load (as the copier) once much waits, so that memory stays bounded. On
    // the pipe load of scripts/bench-observer.sh, decoding a recording at the copier's
    // priority throughout cost the load 4.0× its bare time (perf sched record: 1.7×).
    let priority = Hurry::new(state.decoder_nice);
    let mut last_sweep_ns = 0;
    for copied in copies.iter() {
        priority.follow(backlog.load(Ordering::Relaxed) >= YIELD_BELOW_BYTES || urgency.is_set());
        let mut batch = Batch {
            drained_ns: copied.drained_ns,
            ..Batch::default()
        };
        for chunk in &copied.chunks {
            let slot = match lost.iter().position(|(c, _)| *c == chunk.cpu) {
                Some(i) => i,
                None => {
                    lost.push((chunk.cpu, 0));
                    lost.len() - 1
                }
            };
            decoder.decode(chunk, &mut lost[slot].1, |c| state.take(c, &mut batch));
            backlog.fetch_sub(chunk.bytes.len(), Ordering::Relaxed);
        }
        if copied.last {
            // Threads no record named (they never ran while recorded) get their process
            // from procfs while they still exist.
            state.threads.resolve_missing_pids(roots);
        }
        batch.threads = state.threads.take_changed();
        if let Some(gone) = &mut state.forget_exited {
            for tid in gone.drain(..) {
                state.threads.forget(tid);
            }
            let since_sweep = Duration::from_nanos(copied.drained_ns.saturating_sub(last_sweep_ns));
            if since_sweep >= SWEEP_VANISHED_EVERY {
                state.threads.forget_vanished(roots);
                last_sweep_ns = copied.drained_ns;
            }
        }
        batch.lost = lost.iter().map(|(_, n)| n).sum();
        if let Some(stacks) = &mut state.stacks {
            (batch.modules, batch.stacks) = stacks.take_new();
            stacks.forget_exited();
        }
        // A closed channel means the writer gave up (a write error): stop decoding, and
        // the copier stops when its next copy finds nobody to take it.
        if tx.send(batch).is_err() || copied.last {
            break;
        }
    }
    Decoded {
        lost,
        threads: state.threads.len(),
        stacks: state
            .stacks
            .as_ref()
            .map(|s| (s.distinct_stacks(), s.unwind_stats())),
        twins: state.twins.counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::tests::nices_of;

    /// The nices each thread of a drain of `style` takes, calm, behind, calm again, as
    /// the kernel holds them: (copier, decoder).
    fn nices(style: DrainStyle) -> (Vec<i32>, Vec<i32>) {
        (nices_of(style.drain_nice), nices_of(style.decoder_nice))
    }

    #[test]
    fn a_recording_copies_ahead_of_the_load_and_a_live_session_yields_to_it() {
        // Raising a thread's priority needs CAP_SYS_NICE (root on this project's machines).
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped the priorities above nice 0: they need CAP_SYS_NICE (root)");
            return;
        }
        let live = nices(DrainStyle::LIVE);
        assert_eq!(live, (vec![19, -10, 19], vec![19, -10, 19]));
        let recording = nices(DrainStyle::RECORDING);
        assert_eq!(recording, (vec![-10, -10, -10], vec![19, -10, 19]));
    }
}
