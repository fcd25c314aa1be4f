//! Reading a recording back as one time-ordered event stream: each CPU's chunks are decoded
//! one at a time and the CPUs are merged by time (a k-way merge on a small heap), so memory
//! holds one chunk per CPU whatever the length of the recording.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use anyhow::Context;
use powerlens_core::codec::decode_chunk;
use powerlens_core::sched::event::Event;
use powerlens_store::recording::{ChunkCursor, RecordingReader};

/// What the replay saw besides the events.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplayStats {
    pub events: u64,
    /// Events that came earlier than one already delivered (a record nested by an interrupt
    /// across a drain boundary): delivered at the time of the previous event, so the
    /// analysis always sees time move forward. Microseconds at most.
    pub reordered: u64,
}

struct Stream<'r> {
    cpu: u32,
    cursor: ChunkCursor<'r>,
    events: Vec<Event>,
    next: usize,
}

impl Stream<'_> {
    /// The time of the next event, loading the next chunk when this one is used up.
    fn peek_time(&mut self) -> anyhow::Result<Option<u64>> {
        while self.next >= self.events.len() {
            let Some(chunk) = self
                .cursor
                .next_chunk()
                .with_context(|| format!("reading cpu{}'s events", self.cpu))?
            else {
                return Ok(None);
            };
            self.events.clear();
            self.next = 0;
            decode_chunk(&chunk.data, &mut self.events).with_context(|| {
                format!(
                    "cpu{}'s chunk at {} ns is corrupt (the recording is damaged; events before it were read)",
                    self.cpu, chunk.first_ns
                )
            })?;
        }
        Ok(Some(self.events[self.next].time_ns))
    }
}

/// Calls `f` with every event of the recording in time order, and `progress` with the
/// number of events delivered so far after each chunk's worth.
pub fn replay(
    reader: &RecordingReader,
    mut f: impl FnMut(&Event),
    mut progress: impl FnMut(u64),
) -> anyhow::Result<ReplayStats> {
    let mut streams: Vec<Stream<'_>> = reader
        .cpus()?
        .into_iter()
        .map(|cpu| Stream {
            cpu,
            cursor: reader.chunks(cpu),
            events: Vec::new(),
            next: 0,
        })
        .collect();
    let mut heap = BinaryHeap::with_capacity(streams.len());
    for (i, s) in streams.iter_mut().enumerate() {
        if let Some(t) = s.peek_time()? {
            heap.push(Reverse((t, i)));
        }
    }
    let mut stats = ReplayStats::default();
    let mut last = 0u64;
    while let Some(Reverse((_, i))) = heap.pop() {
        let s = &mut streams[i];
        let e = &s.events[s.next];
        if e.time_ns < last {
            stats.reordered += 1;
            let mut moved = e.clone();
            moved.time_ns = last;
            f(&moved);
        } else {
            last = e.time_ns;
            f(e);
        }
        s.next += 1;
        stats.events += 1;
        if s.next == s.events.len() {
            progress(stats.events);
        }
        if let Some(t) = s.peek_time()? {
            heap.push(Reverse((t, i)));
        }
    }
    Ok(stats)
}
