//! Reading a recording back as one time-ordered event stream. Each CPU's chunks are read and
//! decoded by a prefetch thread — one chunk ahead of the one being consumed, per CPU — while
//! this thread merges the CPUs by time (a k-way merge on a small heap) and feeds the caller.
//! Decoding and analysis thus overlap, and memory holds at most two chunks per CPU whatever
//! the length of the recording.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use anyhow::{anyhow, Context};
use powerlens_core::codec::decode_chunk_in_context;
use powerlens_core::sched::event::{Event, Tid};
use powerlens_store::recording::RecordingReader;

/// What the replay saw besides the events.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplayStats {
    pub events: u64,
    /// Events that came earlier than one already delivered (a record nested by an interrupt
    /// across a drain boundary): delivered at the time of the previous event, so the
    /// analysis always sees time move forward. Microseconds at most.
    pub reordered: u64,
}

/// A decoded chunk of one CPU — its events and each one's context — `None` when that CPU
/// has no more.
type Decoded = anyhow::Result<Option<(Vec<Event>, Vec<Option<Tid>>)>>;

/// The prefetch thread: it answers "the next chunk of stream i" requests in order, each
/// with its own reader of the file (an SQLite connection is not shared across threads).
struct Prefetcher {
    requests: Option<Sender<usize>>,
    replies: Vec<Receiver<Decoded>>,
    handle: Option<JoinHandle<()>>,
}

impl Prefetcher {
    fn start(path: PathBuf, cpus: Vec<u32>) -> Prefetcher {
        let (requests, wanted) = mpsc::channel::<usize>();
        let (senders, replies): (Vec<Sender<Decoded>>, Vec<Receiver<Decoded>>) =
            cpus.iter().map(|_| mpsc::channel()).unzip();
        let handle = std::thread::Builder::new()
            .name("powerlens-decode".into())
            .spawn(move || {
                let reader = match RecordingReader::open(&path) {
                    Ok(r) => r,
                    Err(e) => {
                        for s in &senders {
                            let _ = s.send(Err(anyhow!("reopening the recording: {e}")));
                        }
                        return;
                    }
                };
                let mut cursors: Vec<_> = cpus.iter().map(|&cpu| reader.chunks(cpu)).collect();
                while let Ok(i) = wanted.recv() {
                    let cpu = cpus[i];
                    let decoded = cursors[i]
                        .next_chunk()
                        .with_context(|| format!("reading cpu{cpu}'s events"))
                        .and_then(|chunk| {
                            let Some(chunk) = chunk else { return Ok(None) };
                            let mut events = Vec::with_capacity(chunk.events as usize);
                            let mut contexts = Vec::with_capacity(chunk.events as usize);
                            decode_chunk_in_context(&chunk.data, &mut events, &mut contexts)
                                .with_context(|| {
                                format!(
                                    "cpu{cpu}'s chunk at {} ns is corrupt (the recording is damaged; events before it were read)",
                                    chunk.first_ns
                                )
                            })?;
                            Ok(Some((events, contexts)))
                        });
                    if senders[i].send(decoded).is_err() {
                        return;
                    }
                }
            })
            .expect("spawning the decode thread");
        Prefetcher {
            requests: Some(requests),
            replies,
            handle: Some(handle),
        }
    }

    fn request(&self, stream: usize) {
        if let Some(r) = &self.requests {
            let _ = r.send(stream);
        }
    }

    fn receive(&self, stream: usize) -> Decoded {
        self.replies[stream]
            .recv()
            .map_err(|_| anyhow!("the decode thread stopped"))?
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        // Hanging up the requests ends the thread's loop.
        drop(self.requests.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One CPU's events: the chunk being consumed; the next one is already requested.
struct Stream {
    events: Vec<Event>,
    contexts: Vec<Option<Tid>>,
    next: usize,
    done: bool,
}

impl Stream {
    /// The time of the next event, taking the prefetched chunk when this one is used up
    /// (and asking for the one after it).
    fn peek_time(&mut self, i: usize, p: &Prefetcher) -> anyhow::Result<Option<u64>> {
        while self.next >= self.events.len() {
            if self.done {
                return Ok(None);
            }
            match p.receive(i)? {
                Some((events, contexts)) => {
                    self.events = events;
                    self.contexts = contexts;
                    self.next = 0;
                    p.request(i);
                }
                None => self.done = true,
            }
        }
        Ok(Some(self.events[self.next].time_ns))
    }
}

/// Calls `f` with every event of the recording in time order, with the thread that was
/// current on its CPU when it fired (when recorded), and `progress` with the number of
/// events delivered so far after each chunk's worth.
pub fn replay(
    reader: &RecordingReader,
    mut f: impl FnMut(&Event, Option<Tid>),
    mut progress: impl FnMut(u64),
) -> anyhow::Result<ReplayStats> {
    let cpus = reader.cpus()?;
    let prefetcher = Prefetcher::start(reader.path().to_path_buf(), cpus.clone());
    let mut streams: Vec<Stream> = cpus
        .iter()
        .enumerate()
        .map(|(i, _)| {
            prefetcher.request(i);
            Stream {
                events: Vec::new(),
                contexts: Vec::new(),
                next: 0,
                done: false,
            }
        })
        .collect();
    let mut heap = BinaryHeap::with_capacity(streams.len());
    for (i, s) in streams.iter_mut().enumerate() {
        if let Some(t) = s.peek_time(i, &prefetcher)? {
            heap.push(Reverse((t, i)));
        }
    }
    let mut stats = ReplayStats::default();
    let mut last = 0u64;
    while let Some(Reverse((_, i))) = heap.pop() {
        // Deliver this CPU's events up to the next other CPU's head in one tight loop:
        // events come in per-CPU bursts, and a heap operation per event cost a third of
        // the report's time.
        let limit = heap.peek().map_or(u64::MAX, |Reverse((t, _))| *t);
        let s = &mut streams[i];
        loop {
            while let Some(e) = s.events.get(s.next) {
                if e.time_ns > limit {
                    break;
                }
                let context = s.contexts.get(s.next).copied().flatten();
                if e.time_ns < last {
                    stats.reordered += 1;
                    let mut moved = e.clone();
                    moved.time_ns = last;
                    f(&moved, context);
                } else {
                    last = e.time_ns;
                    f(e, context);
                }
                s.next += 1;
            }
            if s.next < s.events.len() {
                break;
            }
            // This chunk is used up: account for it, then go on with the next one if it
            // still comes before the other CPUs' heads.
            stats.events += s.events.len() as u64;
            progress(stats.events);
            match s.peek_time(i, &prefetcher)? {
                Some(t) if t <= limit => continue,
                _ => break,
            }
        }
        if let Some(t) = s.peek_time(i, &prefetcher)? {
            heap.push(Reverse((t, i)));
        }
    }
    Ok(stats)
}
