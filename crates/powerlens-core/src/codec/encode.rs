//! Encoding events into a chunk: the header with the chunk's tables, then each event as
//! a tag, a varint time delta and its fields, against a window of recent events.

use std::collections::HashMap;

use super::{
    crc32, put_varint, varint_len, CODEC_VERSION, CPU_SAMPLE, EXEC, EXIT, FLAG_CONTEXT, FLAG_CPU,
    FLAG_SAME_TARGET, FORK, FREQUENCY, IDLE_ENTER, IDLE_EXIT, IRQ_ENTER_IPI, IRQ_ENTER_IRQ,
    IRQ_ENTER_SOFTIRQ, IRQ_ENTER_TIMER, IRQ_ENTER_TIMER_ID, IRQ_EXIT, MIGRATE, RUNTIME, STACK,
    SWITCH_BLOCKED, SWITCH_EXITED, SWITCH_PREEMPTED, TIMER_ARM, WAKEUP, WAKEUP_NEW,
};
use crate::sched::event::{Event, EventKind, InterruptKind, SwitchedOut, Tid, TidMap};

/// Builds one chunk from events pushed in time order.
#[derive(Debug, Default)]
pub struct ChunkEncoder {
    body: Vec<u8>,
    tids: Vec<u32>,
    tid_index: TidMap<u32>,
    strings: Vec<String>,
    string_index: HashMap<String, u32>,
    /// Bytes the interned tids and strings take in the header.
    table_bytes: usize,
    count: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    last_cpu: u32,
    last_context: Option<Tid>,
}

impl ChunkEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one event whose context is unknown (see [`ChunkEncoder::push_in_context`]).
    pub fn push(&mut self, e: &Event) {
        self.push_in_context(e, None);
    }

    /// Appends one event recorded while `context` was the current thread on its CPU (the
    /// tid of the perf sample's header; 0 for the idle task, `None` when unknown). Events
    /// of a chunk come in non-decreasing time order; an event out of order still
    /// round-trips (the delta wraps) but costs ten bytes. A context costs nothing while it
    /// stays the same from one event to the next.
    pub fn push_in_context(&mut self, e: &Event, context: Option<Tid>) {
        if self.first_ns.is_none() {
            self.first_ns = Some(e.time_ns);
            self.last_ns = e.time_ns;
        }
        debug_assert!(
            e.time_ns >= self.last_ns,
            "events of a chunk must come in time order ({} after {})",
            e.time_ns,
            self.last_ns
        );
        let (code, aux) = match &e.kind {
            EventKind::Switch { how, .. } => (
                match how {
                    SwitchedOut::Preempted => SWITCH_PREEMPTED,
                    SwitchedOut::Blocked => SWITCH_BLOCKED,
                    SwitchedOut::Exited => SWITCH_EXITED,
                },
                0,
            ),
            EventKind::Wakeup {
                target_cpu,
                new_thread,
                ..
            } => (
                if *new_thread { WAKEUP_NEW } else { WAKEUP },
                if *target_cpu == e.cpu {
                    FLAG_SAME_TARGET
                } else {
                    0
                },
            ),
            EventKind::Migrate { .. } => (MIGRATE, 0),
            EventKind::Fork { .. } => (FORK, 0),
            EventKind::Exec { .. } => (EXEC, 0),
            EventKind::Exit { .. } => (EXIT, 0),
            EventKind::IdleEnter { .. } => (IDLE_ENTER, 0),
            EventKind::IdleExit => (IDLE_EXIT, 0),
            EventKind::InterruptEnter(k) => (
                match k {
                    InterruptKind::Timer {
                        timer: 0,
                        function: 0,
                    } => IRQ_ENTER_TIMER,
                    InterruptKind::Timer { .. } => IRQ_ENTER_TIMER_ID,
                    InterruptKind::Irq(_) => IRQ_ENTER_IRQ,
                    InterruptKind::SoftIrq(_) => IRQ_ENTER_SOFTIRQ,
                    InterruptKind::Ipi => IRQ_ENTER_IPI,
                },
                0,
            ),
            EventKind::InterruptExit => (IRQ_EXIT, 0),
            EventKind::Frequency { .. } => (FREQUENCY, 0),
            EventKind::Runtime { .. } => (RUNTIME, 0),
            EventKind::TimerArm { .. } => (TIMER_ARM, 0),
            EventKind::Stack { .. } => (STACK, 0),
            EventKind::CpuSample { .. } => (CPU_SAMPLE, 0),
        };
        // The decoder starts every chunk at CPU 0 and an unknown context.
        let cpu_flag = if e.cpu == self.last_cpu { 0 } else { FLAG_CPU };
        let context_flag = if context == self.last_context {
            0
        } else {
            FLAG_CONTEXT
        };
        self.body.push(code | aux | cpu_flag | context_flag);
        put_varint(&mut self.body, e.time_ns.wrapping_sub(self.last_ns));
        if cpu_flag != 0 {
            put_varint(&mut self.body, e.cpu as u64);
        }
        if context_flag != 0 {
            let v = context.map_or(0, |tid| self.intern_tid(tid) as u64 + 1);
            put_varint(&mut self.body, v);
            self.last_context = context;
        }
        match &e.kind {
            EventKind::Switch { prev, next, .. } => {
                self.put_tid(*prev);
                self.put_tid(*next);
            }
            EventKind::Wakeup {
                tid, target_cpu, ..
            } => {
                self.put_tid(*tid);
                if aux == 0 {
                    put_varint(&mut self.body, *target_cpu as u64);
                }
            }
            EventKind::Migrate { tid, from, to } => {
                self.put_tid(*tid);
                put_varint(&mut self.body, *from as u64);
                put_varint(&mut self.body, *to as u64);
            }
            EventKind::Fork { parent, child } => {
                self.put_tid(*parent);
                self.put_tid(*child);
            }
            EventKind::Exec { tid, comm } => {
                self.put_tid(*tid);
                self.put_string(comm);
            }
            EventKind::Exit { tid } => self.put_tid(*tid),
            EventKind::IdleEnter { state } => put_varint(&mut self.body, *state as u64),
            EventKind::InterruptEnter(InterruptKind::Irq(name))
            | EventKind::InterruptEnter(InterruptKind::SoftIrq(name)) => self.put_string(name),
            EventKind::Frequency { khz } => put_varint(&mut self.body, *khz),
            EventKind::Runtime { tid, ns } => {
                self.put_tid(*tid);
                put_varint(&mut self.body, *ns);
            }
            EventKind::InterruptEnter(InterruptKind::Timer { timer, function })
                if code == IRQ_ENTER_TIMER_ID =>
            {
                self.put_kernel_addresses(*timer, *function)
            }
            EventKind::TimerArm { timer, function } => self.put_kernel_addresses(*timer, *function),
            EventKind::Stack { id } => put_varint(&mut self.body, *id as u64),
            EventKind::CpuSample { tid, period_ns } => {
                self.put_tid(*tid);
                put_varint(&mut self.body, *period_ns);
            }
            EventKind::IdleExit | EventKind::InterruptExit | EventKind::InterruptEnter(_) => {}
        }
        self.last_ns = e.time_ns;
        self.last_cpu = e.cpu;
        self.count += 1;
    }

    fn intern_tid(&mut self, tid: u32) -> u32 {
        let next = self.tids.len() as u32;
        *self.tid_index.entry(tid).or_insert_with(|| {
            self.tids.push(tid);
            self.table_bytes += varint_len(tid as u64);
            next
        })
    }

    /// Kernel addresses have their top bits set: stored complemented, a timer's address
    /// takes 7 bytes and a function's 5 instead of 10 each.
    fn put_kernel_addresses(&mut self, timer: u64, function: u64) {
        put_varint(&mut self.body, !timer);
        put_varint(&mut self.body, !function);
    }

    fn put_tid(&mut self, tid: u32) {
        let index = self.intern_tid(tid);
        put_varint(&mut self.body, index as u64);
    }

    fn put_string(&mut self, s: &str) {
        let index = match self.string_index.get(s) {
            Some(&i) => i,
            None => {
                let i = self.strings.len() as u32;
                self.strings.push(s.to_owned());
                self.string_index.insert(s.to_owned(), i);
                self.table_bytes += varint_len(s.len() as u64) + s.len();
                i
            }
        };
        put_varint(&mut self.body, index as u64);
    }

    /// Events pushed since the last [`finish`](Self::finish).
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Time of the first event pushed.
    pub fn first_ns(&self) -> Option<u64> {
        self.first_ns
    }

    /// Time of the last event pushed.
    pub fn last_ns(&self) -> Option<u64> {
        self.first_ns.map(|_| self.last_ns)
    }

    /// Size the chunk would have if finished now (exact), so a writer can cut chunks by size.
    pub fn encoded_bytes(&self) -> usize {
        self.header_bytes() + self.table_bytes + self.body.len() + 4
    }

    fn header_bytes(&self) -> usize {
        varint_len(CODEC_VERSION as u64)
            + varint_len(self.count)
            + varint_len(self.first_ns.unwrap_or(0))
            + varint_len(self.tids.len() as u64)
            + varint_len(self.strings.len() as u64)
    }

    /// The chunk's bytes. Resets the encoder for the next chunk.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_bytes());
        put_varint(&mut out, CODEC_VERSION as u64);
        put_varint(&mut out, self.count);
        put_varint(&mut out, self.first_ns.unwrap_or(0));
        put_varint(&mut out, self.tids.len() as u64);
        for &t in &self.tids {
            put_varint(&mut out, t as u64);
        }
        put_varint(&mut out, self.strings.len() as u64);
        for s in &self.strings {
            put_varint(&mut out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        out.extend_from_slice(&self.body);
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len(), self.encoded_bytes());
        self.body.clear();
        self.tids.clear();
        self.tid_index.clear();
        self.strings.clear();
        self.string_index.clear();
        self.table_bytes = 0;
        self.count = 0;
        self.first_ns = None;
        self.last_ns = 0;
        self.last_cpu = 0;
        self.last_context = None;
        out
    }
}
