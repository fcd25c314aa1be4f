//! Reading a recording back as one time-ordered event stream. A decode thread reads each
//! CPU's chunks, decodes them and merges the CPUs by time (a k-way merge on a tournament tree)
//! into batches; this thread only walks the batches and feeds the caller. On two cores the
//! work splits about evenly: reading, decoding and merging there, the analysis here (a
//! caller with a heavier analysis can hand a second one to the decode thread:
//! [`replay_with_side`]).
//! Buffers go back and forth between the threads instead of being allocated per chunk, so
//! memory holds one decoded chunk per CPU and a few batches whatever the length of the
//! recording.

use std::sync::mpsc::{self, Receiver, SyncSender};

use anyhow::{anyhow, Context};
use powerlens_core::codec::{ChunkDecoder, CodecError};
use powerlens_core::sched::event::{Event, EventKind, Tid};
use powerlens_store::recording::{ChunkCursor, RecordingReader};

use super::tournament::TournamentTree;

/// What the replay saw besides the events.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplayStats {
    pub events: u64,
    /// Events that came earlier than one already delivered (a record nested by an interrupt
    /// across a drain boundary): delivered at the time of the previous event, so the
    /// analysis always sees time move forward. Microseconds at most.
    pub reordered: u64,
}

/// Merged events, in time order, and for each the thread that was current on its CPU when
/// it fired (when recorded).
#[derive(Default)]
struct Batch {
    events: Vec<Event>,
    contexts: Vec<Option<Tid>>,
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
    End { reordered: u64 },
    Failed(anyhow::Error),
}

/// Calls `f` with every event of the recording in time order, with the thread that was
/// current on its CPU when it fired (when recorded), and `progress` with the number of
/// events delivered so far after each batch.
pub fn replay(
    reader: &RecordingReader,
    f: impl FnMut(&Event, Option<Tid>),
    progress: impl FnMut(u64),
) -> anyhow::Result<ReplayStats> {
    replay_with_side(reader, |_, _| {}, f, progress)
}

/// As [`replay`], also calling `side` with every event, in the same order, on the decode
/// thread: for a second analysis when `f`'s is the heavier, so the two cores share the
/// work. `side` has seen an event before `f` does.
pub fn replay_with_side(
    reader: &RecordingReader,
    mut side: impl FnMut(&Event, Option<Tid>) + Send,
    mut f: impl FnMut(&Event, Option<Tid>),
    mut progress: impl FnMut(u64),
) -> anyhow::Result<ReplayStats> {
    let cpus = reader.cpus()?;
    let path = reader.path().to_path_buf();
    std::thread::scope(|scope| {
        let (send, batches) = mpsc::sync_channel(BATCHES_AHEAD);
        let (empties, recycled) = mpsc::channel::<Batch>();
        let side = &mut side;
        std::thread::Builder::new()
            .name("powerlens-decode".into())
            .spawn_scoped(scope, move || {
                decode_and_merge(&path, &cpus, side, &send, &recycled)
            })
            .context("starting the decode thread")?;
        // Returning drops both channel ends, which ends the decode thread (a blocked send
        // fails); the scope then joins it.
        let mut stats = ReplayStats::default();
        loop {
            let message = batches
                .recv()
                .map_err(|_| anyhow!("the decode thread stopped"))?;
            match message {
                Message::Batch(mut batch) => {
                    for (e, context) in batch.events.iter().zip(&batch.contexts) {
                        f(e, *context);
                    }
                    stats.events += batch.events.len() as u64;
                    progress(stats.events);
                    batch.events.clear();
                    batch.contexts.clear();
                    let _ = empties.send(batch);
                }
                Message::End { reordered } => {
                    stats.reordered = reordered;
                    return Ok(stats);
                }
                Message::Failed(e) => return Err(e),
            }
        }
    })
}

/// The decode thread's body: every CPU's stream merged into batches sent on `send`.
fn decode_and_merge(
    path: &std::path::Path,
    cpus: &[u32],
    side: &mut impl FnMut(&Event, Option<Tid>),
    send: &SyncSender<Message>,
    recycled: &Receiver<Batch>,
) {
    let reader = match RecordingReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            let _ = send.send(Message::Failed(anyhow!("reopening the recording: {e}")));
            return;
        }
    };
    let mut merge = Merge::new(&reader, cpus);
    loop {
        let mut batch = recycled.try_recv().unwrap_or_else(|_| Batch {
            events: Vec::with_capacity(BATCH_EVENTS),
            contexts: Vec::with_capacity(BATCH_EVENTS),
        });
        let filled = merge.fill(&mut batch);
        // The side consumer sees every merged event, those before a damaged chunk too.
        for (e, context) in batch.events.iter().zip(&batch.contexts) {
            side(e, *context);
        }
        let message = match filled {
            Ok(()) if batch.events.is_empty() => Message::End {
                reordered: merge.reordered,
            },
            Ok(()) => Message::Batch(batch),
            Err(e) => {
                // What came before the damage is delivered first.
                if !batch.events.is_empty() && send.send(Message::Batch(batch)).is_err() {
                    return;
                }
                Message::Failed(e)
            }
        };
        let last = !matches!(message, Message::Batch(_));
        if send.send(message).is_err() || last {
            return;
        }
    }
}

/// One CPU's events: the chunk being decoded, and its next event.
struct Stream<'a> {
    cpu: u32,
    cursor: ChunkCursor<'a>,
    chunk: Option<ChunkDecoder>,
    /// The time of the chunk's first event, to name a damaged one.
    chunk_ns: u64,
    /// The next event and its context (valid while the stream's key is not DONE).
    head: (Event, Option<Tid>),
}

impl Stream<'_> {
    /// Decodes the next event into `head` and returns its time ([`TournamentTree::DONE`]
    /// after the last one), reading the next chunk when this one is used up.
    #[inline]
    fn advance(&mut self) -> anyhow::Result<u64> {
        if let Some(chunk) = &mut self.chunk {
            match chunk.next_event_into(&mut self.head) {
                Ok(Some(time)) => return Ok(time),
                Ok(None) => {}
                Err(e) => return Err(corrupt(self.cpu, self.chunk_ns, e)),
            }
        }
        self.next_chunk()
    }

    #[inline(never)]
    fn next_chunk(&mut self) -> anyhow::Result<u64> {
        let cpu = self.cpu;
        loop {
            self.chunk = None;
            let Some(chunk) = self
                .cursor
                .next_chunk()
                .with_context(|| format!("reading cpu{cpu}'s events"))?
            else {
                return Ok(TournamentTree::DONE);
            };
            self.chunk_ns = chunk.first_ns;
            let mut decoder =
                ChunkDecoder::new(chunk.data).map_err(|e| corrupt(cpu, chunk.first_ns, e))?;
            if let Some(time) = decoder
                .next_event_into(&mut self.head)
                .map_err(|e| corrupt(cpu, chunk.first_ns, e))?
            {
                self.chunk = Some(decoder);
                return Ok(time);
            }
        }
    }
}

fn corrupt(cpu: u32, first_ns: u64, e: CodecError) -> anyhow::Error {
    anyhow::Error::new(e).context(format!(
        "cpu{cpu}'s chunk at {first_ns} ns is corrupt (the recording is damaged; events before it were read)"
    ))
}

/// The k-way merge of the CPUs' streams by time.
struct Merge<'a> {
    streams: Vec<Stream<'a>>,
    /// Which stream's next event comes first; `None` until the first chunks are read.
    order: Option<TournamentTree>,
    last: u64,
    reordered: u64,
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
                    chunk_ns: 0,
                    head: (
                        Event {
                            time_ns: 0,
                            cpu,
                            kind: EventKind::IdleExit,
                        },
                        None,
                    ),
                })
                .collect(),
            order: None,
            last: 0,
            reordered: 0,
        }
    }

    /// Appends merged events to `batch` until it holds [`BATCH_EVENTS`] or every stream
    /// is used up.
    fn fill(&mut self, batch: &mut Batch) -> anyhow::Result<()> {
        if self.streams.is_empty() {
            return Ok(());
        }
        let order = match &mut self.order {
            Some(order) => order,
            None => {
                let heads = self
                    .streams
                    .iter_mut()
                    .map(Stream::advance)
                    .collect::<anyhow::Result<Vec<u64>>>()?;
                self.order.insert(TournamentTree::new(heads))
            }
        };
        while batch.events.len() < BATCH_EVENTS && order.min_key() != TournamentTree::DONE {
            let s = &mut self.streams[order.winner()];
            let (mut e, context) = s.head;
            // A record nested by an interrupt across a drain boundary can come a few
            // microseconds before one already delivered: it takes that one's time, so the
            // analysis always sees time move forward.
            if e.time_ns < self.last {
                self.reordered += 1;
                e.time_ns = self.last;
            } else {
                self.last = e.time_ns;
            }
            batch.events.push(e);
            batch.contexts.push(context);
            order.replace_winner(s.advance()?);
        }
        Ok(())
    }
}
