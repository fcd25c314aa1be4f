//! Reading a recording back as one time-ordered event stream. A decode thread reads each
//! CPU's chunks and merges the CPUs by time (a k-way merge on a tournament tree) into
//! batches, decoding each CPU's run of events straight into the batch; this thread only
//! walks the batches and feeds the caller. On two cores the work splits between reading,
//! decoding and merging there and the analysis here. Batches go back and forth between the
//! threads instead of being allocated, so memory holds one encoded chunk per CPU and a few
//! batches whatever the length of the recording.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender};

use powerlens_core::codec::{ChunkDecoder, CodecError, EventContext};
use powerlens_core::sched::event::{Event, EventKind, Tid};
use powerlens_store::recording::{ChunkCursor, ChunkIndexRow, RecordingReader};

use crate::error::{Doing, RecordError};
use crate::tournament::TournamentTree;

/// What the replay saw besides the events.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReplayStats {
    /// Records delivered: events, and the stacks folded into them.
    pub events: u64,
    /// Records that came earlier than one already delivered (a record nested by an
    /// interrupt across a drain boundary; a folded stack counts with its event): delivered
    /// at the time of the previous event, so the analysis always sees time move forward.
    /// Microseconds at most.
    pub reordered: u64,
    /// The records the recording's chunk table counts: `events` falls short of it when an
    /// index page is damaged (the chunks are read by CPU through the index).
    pub counted: u64,
    /// The index rows of the chunks read, for the content check
    /// ([`powerlens_store::recording::ContentParts::check_read`]).
    pub chunks: Vec<ChunkIndexRow>,
}

impl ReplayStats {
    /// The warning to show when fewer events were read than the recording counts.
    pub fn short_read(&self, path: &std::path::Path) -> Option<String> {
        (self.events != self.counted).then(|| format!(
            "the recording {} is damaged: {} of the {} events its chunk table counts were read (an index or a chunk's header is damaged); the figures miss the rest: record again, or restore a copy",
            path.display(),
            self.events,
            self.counted
        ))
    }

    /// The note on events moved to keep time moving forward, when there were any.
    pub fn reordered_note(&self) -> Option<String> {
        (self.reordered > 0).then(|| format!(
            "{} events arrived out of order by microseconds and were moved to the previous event's time",
            self.reordered
        ))
    }
}

/// Merged events, in time order, and for each its context (the thread that was current on
/// its CPU when it fired, and its stack, when recorded).
#[derive(Default)]
struct Batch {
    events: Vec<Event>,
    contexts: Vec<EventContext>,
}

/// Events per batch: large enough that the channel hand-over is rare, small enough that a
/// few batches stay in the CPU caches' neighbourhood.
const BATCH_EVENTS: usize = 8192;

/// Batches in flight between the threads: the decode thread runs at most this far ahead.
const BATCHES_AHEAD: usize = 2;

/// What the decode thread sends: batches, then the end (or an error after the batches
/// that came before it).
enum Message {
    Batch(Batch),
    End {
        chunks: Vec<ChunkIndexRow>,
    },
    /// Boxed, so that the batches, which the channel moves (and a spinning send moves
    /// again), stay as small as they were.
    Failed(Box<RecordError>),
}

/// Calls `f` with every event of the recording in time order, with its context (the thread
/// that was current on its CPU when it fired, and the stack recorded with it), and
/// `progress` with the number of records delivered so far after each batch. A caller that
/// wants the stacks as records of their own wraps `f` in [`unfolded`].
pub fn replay(
    reader: &RecordingReader,
    f: impl FnMut(&Event, EventContext),
    progress: impl FnMut(u64),
) -> Result<ReplayStats, RecordError> {
    let (stats, ()) =
        start(reader.path(), |_| Ok(()), |_, _, _| {})?.deliver(reader, f, progress)?;
    Ok(stats)
}

/// A replay under way: the decode thread reads, merges and feeds its side analysis, a few
/// batches ahead of [`Replay::deliver`].
pub struct Replay<S> {
    batches: Receiver<Message>,
    empties: Sender<Batch>,
    /// Gives the side analysis back, `None` when the thread could not start its work
    /// (then its error came as a message).
    decode: std::thread::JoinHandle<Option<S>>,
}

/// Starts a replay ([`replay`]) of the recording at `path` whose decode thread also feeds a
/// side analysis every event, in the same order, with `feed`: an analysis that needs no
/// other's results moves off the caller's thread, which on two cores is the busier one.
/// The side analysis is made by `side` from the decode thread's own reader, so that the
/// thread starts at once, while the caller opens and checks the recording. The caller can
/// do other work before [`Replay::deliver`] (the decode thread runs ahead meanwhile), and
/// gets the side analysis back at the end.
pub fn start<S, M, F>(
    path: &std::path::Path,
    side: M,
    mut feed: F,
) -> Result<Replay<S>, RecordError>
where
    S: Send + 'static,
    M: FnOnce(&RecordingReader) -> Result<S, RecordError> + Send + 'static,
    F: FnMut(&mut S, &Event, EventContext) + Send + 'static,
{
    let path = path.to_path_buf();
    let (send, batches) = mpsc::sync_channel(BATCHES_AHEAD);
    let (empties, recycled) = mpsc::channel::<Batch>();
    let decode = std::thread::Builder::new()
        .name("powerlens-decode".into())
        .spawn(move || {
            let opened = RecordingReader::open(&path)
                .map_err(|cause| RecordError::Reopen { cause })
                .and_then(|reader| {
                    let side = side(&reader)?;
                    let cpus = reader.cpus()?;
                    Ok((reader, side, cpus))
                });
            let (reader, mut side, cpus) = match opened {
                Ok(opened) => opened,
                Err(e) => {
                    let _ = send.send(Message::Failed(Box::new(e)));
                    return None;
                }
            };
            decode_and_merge(&reader, &cpus, &send, &recycled, |e, c| {
                feed(&mut side, e, c)
            });
            Some(side)
        })
        .doing(|| "starting the decode thread".into())?;
    Ok(Replay {
        batches,
        empties,
        decode,
    })
}

impl<S> Replay<S> {
    /// Calls `f` with every event as [`replay`] does; returns what the replay saw and the
    /// side analysis. Dropping the replay instead (or returning early with an error) ends
    /// the decode thread: its next send fails.
    pub fn deliver(
        self,
        reader: &RecordingReader,
        mut f: impl FnMut(&Event, EventContext),
        mut progress: impl FnMut(u64),
    ) -> Result<(ReplayStats, S), RecordError> {
        let mut stats = ReplayStats::default();
        // The latest time delivered.
        let mut latest = 0;
        loop {
            let message = next_message(&self.batches)?;
            match message {
                Message::Batch(mut batch) => {
                    for (e, context) in batch.events.iter().zip(&batch.contexts) {
                        let records = 1 + context.stack().is_some() as u64;
                        stats.events += records;
                        // A record nested by an interrupt across a drain boundary can come
                        // a few microseconds before one already delivered: it takes that
                        // one's time, so the analysis always sees time move forward.
                        if e.time_ns < latest {
                            stats.reordered += records;
                            f(
                                &Event {
                                    time_ns: latest,
                                    ..*e
                                },
                                *context,
                            );
                        } else {
                            latest = e.time_ns;
                            f(e, *context);
                        }
                    }
                    progress(stats.events);
                    batch.events.clear();
                    batch.contexts.clear();
                    let _ = self.empties.send(batch);
                }
                Message::End { chunks } => {
                    stats.chunks = chunks;
                    stats.counted = reader.event_count()?;
                    let side = self
                        .decode
                        .join()
                        .map_err(|_| RecordError::Panicked {
                            thread: "decode thread",
                        })?
                        .ok_or(RecordError::DecodeStopped)?;
                    return Ok((stats, side));
                }
                Message::Failed(e) => return Err(*e),
            }
        }
    }
}

/// The decode thread's next message. Waited for by spinning a while before sleeping: a
/// batch is usually microseconds away, and waking a sleeping thread costs the sender a
/// system call and this one a reschedule (on a virtual machine, an interrupt between
/// virtual CPUs), once per batch: a tenth of the decode thread's time went to it.
fn next_message(batches: &Receiver<Message>) -> Result<Message, RecordError> {
    let spin = Spin::new();
    loop {
        match batches.try_recv() {
            Ok(message) => return Ok(message),
            Err(mpsc::TryRecvError::Empty) if spin.again() => {}
            _ => break,
        }
    }
    batches.recv().map_err(|_| RecordError::DecodeStopped)
}

/// A wait that spins for [`Spin::FOR`] before the waiter goes to sleep.
struct Spin(std::time::Instant);

impl Spin {
    /// Long enough for the other thread's next batch or its taking one, most times.
    const FOR: std::time::Duration = std::time::Duration::from_micros(50);

    fn new() -> Self {
        Spin(std::time::Instant::now())
    }

    /// Whether to look again (after a pause) rather than sleep.
    fn again(&self) -> bool {
        std::hint::spin_loop();
        self.0.elapsed() < Self::FOR
    }
}

/// Adapts a callback that takes the recording's records as they were written, each stack a
/// [`EventKind::Stack`] right after its event, to [`replay`].
pub fn unfolded(mut f: impl FnMut(&Event, Option<Tid>)) -> impl FnMut(&Event, EventContext) {
    move |e, context| {
        for (record, thread) in context.records(e) {
            f(&record, thread);
        }
    }
}

/// The decode thread's body: every CPU's stream merged into batches sent on `send`, each
/// event fed to `side` first.
fn decode_and_merge(
    reader: &RecordingReader,
    cpus: &[u32],
    send: &SyncSender<Message>,
    recycled: &Receiver<Batch>,
    mut side: impl FnMut(&Event, EventContext),
) {
    let mut merge = Merge::new(reader, cpus);
    loop {
        let mut batch = recycled.try_recv().unwrap_or_else(|_| Batch {
            events: Vec::with_capacity(BATCH_EVENTS),
            contexts: Vec::with_capacity(BATCH_EVENTS),
        });
        let filled = merge.fill(&mut batch);
        for (e, context) in batch.events.iter().zip(&batch.contexts) {
            side(e, *context);
        }
        let message = match filled {
            Ok(()) if batch.events.is_empty() => Message::End {
                chunks: merge
                    .streams
                    .iter_mut()
                    .flat_map(|s| std::mem::take(&mut s.read))
                    .collect(),
            },
            Ok(()) => Message::Batch(batch),
            Err(e) => {
                // What came before the damage is delivered first.
                if !batch.events.is_empty() && !send_message(send, Message::Batch(batch)) {
                    return;
                }
                Message::Failed(Box::new(e))
            }
        };
        let last = !matches!(message, Message::Batch(_));
        if !send_message(send, message) || last {
            return;
        }
    }
}

/// Sends a message to the caller's thread, spinning a while before sleeping when the
/// channel is full (the caller takes a batch within microseconds, and a sleeping decode
/// thread, the busier of the two, would wait to be woken). False when the caller is gone.
fn send_message(send: &SyncSender<Message>, mut message: Message) -> bool {
    let spin = Spin::new();
    loop {
        match send.try_send(message) {
            Ok(()) => return true,
            Err(mpsc::TrySendError::Full(back)) if spin.again() => message = back,
            Err(mpsc::TrySendError::Full(back)) => return send.send(back).is_ok(),
            Err(mpsc::TrySendError::Disconnected(_)) => return false,
        }
    }
}

/// One CPU's events: its current chunk being decoded, whose next event (decoded ahead) is
/// the head the merge compares.
struct Stream<'a> {
    cpu: u32,
    cursor: ChunkCursor<'a>,
    /// The chunk being decoded, and its first event's time (for error messages); `None`
    /// once the stream ended or failed.
    chunk: Option<(ChunkDecoder<Vec<u8>>, u64)>,
    /// Decoding failed after the events delivered: the error, delivered once they are.
    /// Boxed, as `head_time`'s error: the merge asks for the head after every run of
    /// events, and an unboxed `RecordError` made each answer about a hundred bytes
    /// (`report --json` of a million-event recording took 4–6% longer).
    failed: Option<Box<RecordError>>,
    /// The index rows of the chunks read so far.
    read: Vec<ChunkIndexRow>,
}

impl Stream<'_> {
    /// The time of the next event, [`TournamentTree::DONE`] after the last one; the error
    /// once the events before it are delivered.
    fn head_time(&mut self) -> Result<u64, Box<RecordError>> {
        match (&self.chunk, self.failed.take()) {
            (Some((decoder, _)), _) => Ok(decoder.next_time().unwrap_or(TournamentTree::DONE)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(TournamentTree::DONE),
        }
    }

    /// Appends to `batch` the next event and the events after it that come before
    /// `limit` (at most `room` in all), decoding them straight into the batch; reads the
    /// next chunk when this one ends.
    fn run_into(&mut self, limit: u64, room: usize, batch: &mut Batch) {
        let Some((decoder, first_ns)) = &mut self.chunk else {
            return;
        };
        match decoder.decode_before(limit, room, &mut batch.events, &mut batch.contexts) {
            Ok(()) if decoder.next_time().is_some() => {}
            Ok(()) => self.next_chunk(),
            Err(e) => {
                let e = corrupt(self.cpu, *first_ns, e);
                self.fail(e)
            }
        }
    }

    /// Reads chunks until one has an event: it becomes the chunk being decoded.
    #[inline(never)]
    fn next_chunk(&mut self) {
        let cpu = self.cpu;
        loop {
            // The chunk read last (used up, or empty) lends its buffer to the next one.
            if let Some((decoder, _)) = self.chunk.take() {
                self.cursor.recycle(decoder.into_data());
            }
            let chunk = match self.cursor.next_chunk() {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return,
                Err(e) => {
                    return self.fail(RecordError::While {
                        doing: format!("reading cpu{cpu}'s events"),
                        source: Box::new(e.into()),
                    })
                }
            };
            self.read.push(chunk.index_row());
            let first_ns = chunk.first_ns;
            match ChunkDecoder::new(chunk.data) {
                Ok(decoder) => {
                    let has_events = decoder.next_time().is_some();
                    self.chunk = Some((decoder, first_ns));
                    if has_events {
                        return;
                    }
                }
                Err(e) => return self.fail(corrupt(cpu, first_ns, e)),
            }
        }
    }

    /// The stream ends with `e`, after the events already decoded.
    fn fail(&mut self, e: RecordError) {
        self.chunk = None;
        self.failed = Some(Box::new(e));
    }
}

fn corrupt(cpu: u32, first_ns: u64, e: CodecError) -> RecordError {
    RecordError::While {
        doing: format!(
            "cpu{cpu}'s chunk at {first_ns} ns is corrupt (the recording is damaged; events before it were read)"
        ),
        source: Box::new(e.into()),
    }
}

/// The k-way merge of the CPUs' streams by time.
struct Merge<'a> {
    streams: Vec<Stream<'a>>,
    /// Which stream's next event comes first; `None` until the first chunks are read.
    order: Option<TournamentTree>,
}

impl<'a> Merge<'a> {
    fn new(reader: &'a RecordingReader, cpus: &[u32]) -> Self {
        Merge {
            streams: cpus
                .iter()
                .map(|&cpu| Stream {
                    cpu,
                    cursor: reader.chunks(cpu),
                    chunk: None,
                    failed: None,
                    read: Vec::new(),
                })
                .collect(),
            order: None,
        }
    }

    /// Appends merged events to `batch` until it holds [`BATCH_EVENTS`] or every stream
    /// is used up. The leading stream's events are decoded into the batch a run at a
    /// time: as long as its next event still comes before every other stream's head (a
    /// CPU's burst of events between two of another's).
    fn fill(&mut self, batch: &mut Batch) -> Result<(), RecordError> {
        if self.streams.is_empty() {
            return Ok(());
        }
        let order = match &mut self.order {
            Some(order) => order,
            None => {
                let heads = self
                    .streams
                    .iter_mut()
                    .map(|s| {
                        s.next_chunk();
                        s.head_time()
                    })
                    .collect::<Result<Vec<u64>, _>>()
                    .map_err(|e| *e)?;
                self.order.insert(TournamentTree::new(heads))
            }
        };
        let first = batch.events.len();
        let mut failed = Ok(());
        while batch.events.len() < BATCH_EVENTS && order.min_key() != TournamentTree::DONE {
            let winner = order.winner();
            let (next_t, next_stream) = order.runner_up();
            // The winner's events go on while they come before the runner-up's head; on
            // equal times the lower stream goes first.
            let limit = if winner < next_stream {
                next_t.saturating_add(1)
            } else {
                next_t
            };
            let s = &mut self.streams[winner];
            s.run_into(limit, BATCH_EVENTS - batch.events.len(), batch);
            match s.head_time() {
                Ok(t) => order.replace_winner(t),
                Err(e) => {
                    failed = Err(*e);
                    break;
                }
            }
        }
        // The batch's events are checked in one pass once merged, not a run at a time: runs
        // are a few events long.
        check_cpus(&mut batch.events, &mut batch.contexts, first).and(failed)
    }
}

/// Keeps the events from `first` on up to the first that names a CPU no machine has,
/// which ends the replay with an error. A chunk passes its checksum when it was written
/// that way, and the analyses keep a table per CPU up to the highest number they see: CPU
/// 4000000000 in a crafted chunk would have asked for gigabytes.
fn check_cpus(
    events: &mut Vec<Event>,
    contexts: &mut Vec<EventContext>,
    first: usize,
) -> Result<(), RecordError> {
    let max = powerlens_sys::sysfs::MAX_CPU;
    let Some((at, named)) = events[first..].iter().enumerate().find_map(|(i, e)| {
        let named = match e.kind {
            EventKind::Wakeup { target_cpu, .. } => target_cpu.max(e.cpu),
            EventKind::Migrate { from, to, .. } => from.max(to).max(e.cpu),
            _ => e.cpu,
        };
        (named > max).then_some((first + i, named))
    }) else {
        return Ok(());
    };
    let (cpu, time_ns) = (events[at].cpu, events[at].time_ns);
    events.truncate(at);
    contexts.truncate(at);
    Err(RecordError::CpuOutOfRange {
        cpu,
        time_ns,
        named,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::codec::ChunkEncoder;
    use powerlens_store::recording::RecordingWriter;

    /// A chunk with a valid checksum naming CPU 4000000000 (crafted, or damaged before its
    /// checksum was computed) ends the replay with an error after the events before it,
    /// instead of sizing the analyses' per-CPU tables by it.
    #[test]
    fn a_chunk_naming_a_cpu_no_machine_has_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        let mut enc = ChunkEncoder::new();
        let idle = |t, cpu| Event {
            time_ns: t,
            cpu,
            kind: EventKind::IdleExit,
        };
        enc.push(&idle(10, 0));
        enc.push(&Event {
            time_ns: 20,
            cpu: 0,
            kind: EventKind::Wakeup {
                tid: 7,
                target_cpu: 4_000_000_000,
                new_thread: false,
            },
        });
        enc.push(&idle(30, 0));
        w.append_chunk(0, 10, 30, 3, &enc.finish()).unwrap();
        w.finish().unwrap();
        let reader = RecordingReader::open(&path).unwrap();
        let mut seen = Vec::new();
        let err = replay(&reader, |e, _| seen.push(e.time_ns), |_| {}).unwrap_err();
        assert_eq!(seen, [10]);
        assert!(err.to_string().contains("names CPU 4000000000"), "{err}");
    }

    /// The CPUs' events come merged by time, and a record that a drain wrote in a later
    /// chunk than a later one of its CPU (an interrupt nested across the drain boundary)
    /// takes the time of the latest record delivered, counted as moved: hand-merged,
    /// cpu0 = [10, 30 | 25 with its stack, 40], cpu1 = [20, 35] give 10, 20, 30, 30, 35,
    /// 40 with two records moved (the event and its stack).
    #[test]
    fn cpus_merge_by_time_and_a_late_record_keeps_time_forward() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rec");
        let mut w = RecordingWriter::create(&path).unwrap();
        let idle = |t, cpu| Event {
            time_ns: t,
            cpu,
            kind: EventKind::IdleExit,
        };
        let mut chunk = |cpu: u32, times: &[u64], stack_at: Option<u64>| {
            let mut enc = ChunkEncoder::new();
            for &t in times {
                enc.push_in_context(&idle(t, cpu), Some(1));
                if stack_at == Some(t) {
                    let stack = EventKind::Stack { id: 4 };
                    enc.push_in_context(
                        &Event {
                            kind: stack,
                            ..idle(t, cpu)
                        },
                        Some(1),
                    );
                }
            }
            let (first, last) = (times[0], times[times.len() - 1]);
            let records = times.len() as u32 + stack_at.is_some() as u32;
            w.append_chunk(cpu, first, last, records, &enc.finish())
                .unwrap();
        };
        chunk(0, &[10, 30], None);
        chunk(1, &[20, 35], None);
        chunk(0, &[25, 40], Some(25));
        w.finish().unwrap();
        let reader = RecordingReader::open(&path).unwrap();
        let mut seen = Vec::new();
        let stats = replay(
            &reader,
            |e, c| seen.push((e.time_ns, e.cpu, c.stack())),
            |_| {},
        )
        .unwrap();
        assert_eq!(
            seen,
            [
                (10, 0, None),
                (20, 1, None),
                (30, 0, None),
                (30, 0, Some(4)),
                (35, 1, None),
                (40, 0, None)
            ]
        );
        assert_eq!((stats.events, stats.counted, stats.reordered), (7, 7, 2));
        assert_eq!(stats.chunks.len(), 3);
    }
}
