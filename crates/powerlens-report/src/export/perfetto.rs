//! A native Perfetto trace (protobuf), written by the small encoder in `proto.rs`: per-CPU
//! ftrace event bundles, so Perfetto draws its CPU, thread-state, idle and frequency
//! tracks itself; a process tree naming every process and thread; and power/energy as
//! counter tracks.
//!
//! Field numbers are those of Perfetto's protos (perfetto/protos/perfetto/trace/…), checked
//! against the `perfetto` Python package's `perfetto_trace_pb2` (0.59.1) by the export
//! tests, which decode this output with it:
//!
//! | message (proto file) | fields used |
//! |---|---|
//! | `Trace` (trace.proto) | packet = 1 |
//! | `TracePacket` (trace_packet.proto) | ftrace_events = 1, process_tree = 2, timestamp = 8, trusted_packet_sequence_id = 10, track_event = 11, sequence_flags = 13, track_descriptor = 60 |
//! | `FtraceEventBundle` (ftrace/ftrace_event_bundle.proto) | cpu = 1, event = 2 |
//! | `FtraceEvent` (ftrace/ftrace_event.proto) | timestamp = 1, pid = 2, sched_switch = 4, cpu_frequency = 11, cpu_idle = 13, sched_wakeup = 17, sched_wakeup_new = 114, sched_process_exec = 237, sched_process_exit = 238, sched_process_fork = 239, sched_migrate_task = 491 |
//! | `SchedSwitchFtraceEvent` (ftrace/sched.proto) | prev_comm = 1, prev_pid = 2, prev_state = 4, next_comm = 5, next_pid = 6 |
//! | `SchedWakeupFtraceEvent`, `SchedWakeupNewFtraceEvent` (ftrace/sched.proto) | comm = 1, pid = 2, success = 4, target_cpu = 5 |
//! | `SchedMigrateTaskFtraceEvent` (ftrace/sched.proto) | comm = 1, pid = 2, orig_cpu = 4, dest_cpu = 5 |
//! | `SchedProcessForkFtraceEvent` (ftrace/sched.proto) | parent_comm = 1, parent_pid = 2, child_comm = 3, child_pid = 4 |
//! | `SchedProcessExecFtraceEvent` (ftrace/sched.proto) | filename = 1, pid = 2, old_pid = 3 |
//! | `SchedProcessExitFtraceEvent` (ftrace/sched.proto) | comm = 1, pid = 2, tgid = 3 |
//! | `CpuIdleFtraceEvent`, `CpuFrequencyFtraceEvent` (ftrace/power.proto) | state = 1, cpu_id = 2 |
//! | `ProcessTree` (ps/process_tree.proto) | processes = 1, threads = 2; `Process`: pid = 1, ppid = 2, cmdline = 3, cmdline_is_comm = 9; `Thread`: tid = 1, name = 2, tgid = 3 |
//! | `TrackDescriptor` (track_event/track_descriptor.proto) | uuid = 1, name = 2, counter = 8 |
//! | `CounterDescriptor` (track_event/counter_descriptor.proto) | unit_name = 6 |
//! | `TrackEvent` (track_event/track_event.proto) | type = 9 (TYPE_COUNTER = 4), track_uuid = 11, double_counter_value = 44 |
//!
//! Timestamps are the recording's CLOCK_MONOTONIC nanoseconds, written without a clock id:
//! Perfetto places them on its default (boot-time) axis, which equals CLOCK_MONOTONIC
//! unless the machine suspended while recording.

use std::collections::HashMap;
use std::io::{self, Write};

use powerlens_core::sched::event::{Event, EventKind, SwitchedOut, Tid, IDLE_TID};

use super::proto::{bytes, double, len_prefix, string, uint, varint_len};
use super::{Counter, Counts, ThreadInfo};

// TracePacket
const PACKET: u32 = 1; // Trace.packet
const FTRACE_EVENTS: u32 = 1;
const PROCESS_TREE: u32 = 2;
const TIMESTAMP: u32 = 8;
const SEQUENCE_ID: u32 = 10;
const TRACK_EVENT: u32 = 11;
const SEQUENCE_FLAGS: u32 = 13;
const TRACK_DESCRIPTOR: u32 = 60;
// TracePacket.SequenceFlags
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
// FtraceEvent
const FT_TIMESTAMP: u32 = 1;
const FT_PID: u32 = 2;
const SCHED_SWITCH: u32 = 4;
const CPU_FREQUENCY: u32 = 11;
const CPU_IDLE: u32 = 13;
const SCHED_WAKEUP: u32 = 17;
const SCHED_WAKEUP_NEW: u32 = 114;
const SCHED_PROCESS_EXEC: u32 = 237;
const SCHED_PROCESS_EXIT: u32 = 238;
const SCHED_PROCESS_FORK: u32 = 239;
const SCHED_MIGRATE_TASK: u32 = 491;
/// power:cpu_idle's state on exit (PWR_EVENT_EXIT = (u32)-1).
const PWR_EVENT_EXIT: u64 = u32::MAX as u64;
/// Kernel prev_state values (TASK_REPORT): runnable, interruptible sleep, dead.
const STATE_RUNNING: u64 = 0;
const STATE_SLEEPING: u64 = 1;
const STATE_DEAD: u64 = 16;
/// The one packet sequence this writer emits its track packets on.
const SEQUENCE: u64 = 1;
/// A CPU's bundle is written out when it reaches this size.
const BUNDLE_BYTES: usize = 128 * 1024;
/// First counter track uuid (any value unique within the trace).
const COUNTER_UUID_BASE: u64 = 0x504c_0000;

/// Writes a Perfetto trace to `out`, one event at a time.
pub struct PerfettoWriter<W: Write> {
    out: W,
    comms: HashMap<Tid, String>,
    tgids: HashMap<Tid, u32>,
    /// The task current on each CPU (from sched_switch), the `pid` of the events there.
    current: Vec<Tid>,
    /// `swapper/N`, the idle task's name on each CPU.
    swapper: Vec<String>,
    /// Encoded `FtraceEvent`s (field 2 of the bundle) waiting, per CPU.
    bundles: Vec<Vec<u8>>,
    event: Vec<u8>,
    body: Vec<u8>,
    counts: Counts,
    counters: usize,
}

impl<W: Write> PerfettoWriter<W> {
    /// Starts the trace: the process tree from the thread table (`start_ns`: its time).
    pub fn new(mut out: W, threads: &[ThreadInfo], start_ns: u64) -> io::Result<Self> {
        let mut tree = Vec::new();
        let mut processes: HashMap<u32, (Option<u32>, String)> = HashMap::new();
        for t in threads.iter().filter(|t| t.tid != IDLE_TID) {
            let pid = t.pid.unwrap_or(t.tid);
            let p = processes.entry(pid).or_insert((None, String::new()));
            if p.0.is_none() {
                p.0 = t.ppid;
            }
            if t.tid == pid || p.1.is_empty() {
                p.1 = t.comm.clone();
            }
        }
        let mut pids: Vec<_> = processes.into_iter().collect();
        pids.sort_by_key(|(pid, _)| *pid);
        let mut m = Vec::new();
        for (pid, (ppid, name)) in &pids {
            m.clear();
            uint(&mut m, 1, u64::from(*pid));
            uint(&mut m, 2, u64::from(ppid.unwrap_or(0)));
            if !name.is_empty() {
                string(&mut m, 3, name);
                uint(&mut m, 9, 1); // cmdline_is_comm
            }
            bytes(&mut tree, 1, &m);
        }
        for t in threads.iter().filter(|t| t.tid != IDLE_TID) {
            m.clear();
            uint(&mut m, 1, u64::from(t.tid));
            if !t.comm.is_empty() {
                string(&mut m, 2, &t.comm);
            }
            uint(&mut m, 3, u64::from(t.pid.unwrap_or(t.tid)));
            bytes(&mut tree, 2, &m);
        }
        let mut packet = Vec::new();
        uint(&mut packet, TIMESTAMP, start_ns);
        uint(&mut packet, SEQUENCE_ID, SEQUENCE);
        uint(&mut packet, SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        bytes(&mut packet, PROCESS_TREE, &tree);
        let mut framed = Vec::new();
        bytes(&mut framed, PACKET, &packet);
        out.write_all(&framed)?;
        Ok(Self {
            out,
            comms: threads
                .iter()
                .filter(|t| !t.comm.is_empty())
                .map(|t| (t.tid, t.comm.clone()))
                .collect(),
            tgids: threads
                .iter()
                .map(|t| (t.tid, t.pid.unwrap_or(t.tid)))
                .collect(),
            current: Vec::new(),
            swapper: Vec::new(),
            bundles: Vec::new(),
            event: Vec::new(),
            body: Vec::new(),
            counts: Counts::default(),
            counters: 0,
        })
    }

    fn comm(&self, tid: Tid, cpu: u32) -> &str {
        if tid == IDLE_TID {
            return &self.swapper[cpu as usize];
        }
        self.comms.get(&tid).map(String::as_str).unwrap_or_default()
    }

    /// A counter track and all its values.
    pub fn counter(&mut self, c: &Counter) -> io::Result<()> {
        let uuid = COUNTER_UUID_BASE + self.counters as u64;
        self.counters += 1;
        let mut desc = Vec::new();
        uint(&mut desc, 1, uuid);
        string(&mut desc, 2, &format!("{} ({})", c.name, c.unit));
        let mut counter = Vec::new();
        string(&mut counter, 6, c.unit); // unit_name
        bytes(&mut desc, 8, &counter);
        let mut packet = Vec::new();
        uint(&mut packet, SEQUENCE_ID, SEQUENCE);
        bytes(&mut packet, TRACK_DESCRIPTOR, &desc);
        let mut framed = Vec::new();
        bytes(&mut framed, PACKET, &packet);
        let mut ev = Vec::new();
        for &(t, v) in &c.points {
            ev.clear();
            uint(&mut ev, 9, 4); // type = TYPE_COUNTER
            uint(&mut ev, 11, uuid); // track_uuid
            double(&mut ev, 44, v); // double_counter_value
            packet.clear();
            uint(&mut packet, TIMESTAMP, t);
            uint(&mut packet, SEQUENCE_ID, SEQUENCE);
            uint(&mut packet, SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
            bytes(&mut packet, TRACK_EVENT, &ev);
            bytes(&mut framed, PACKET, &packet);
        }
        self.out.write_all(&framed)
    }

    /// Writes one event (events in time order; each CPU's come out in order in its bundles).
    /// Interrupt entries and exits are counted but not written (docs/EXPORT.md).
    pub fn event(&mut self, e: &Event) -> io::Result<()> {
        let cpu = e.cpu;
        let ci = cpu as usize;
        if self.current.len() <= ci {
            self.current.resize(ci + 1, IDLE_TID);
            self.swapper = (0..=ci).map(|c| format!("swapper/{c}")).collect();
            self.bundles.resize_with(ci + 1, Vec::new);
        }
        self.counts.count(cpu, &e.kind);
        let context = self.current[ci];
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        let written = self.encode(e, &mut body);
        self.body = body;
        let Some(field) = written else {
            return Ok(());
        };
        let ev = &mut self.event;
        ev.clear();
        uint(ev, FT_TIMESTAMP, e.time_ns);
        uint(ev, FT_PID, u64::from(context));
        bytes(ev, field, &self.body);
        let bundle = &mut self.bundles[ci];
        bytes(bundle, 2, ev);
        if bundle.len() >= BUNDLE_BYTES {
            self.flush_cpu(ci)?;
        }
        Ok(())
    }

    /// Encodes the event's message into `body`; returns its `FtraceEvent` field, `None` for
    /// an event not written.
    fn encode(&mut self, e: &Event, body: &mut Vec<u8>) -> Option<u32> {
        let cpu = e.cpu;
        let ci = cpu as usize;
        let field = match &e.kind {
            EventKind::Switch { prev, how, next } => {
                string(body, 1, self.comm(*prev, cpu));
                uint(body, 2, u64::from(*prev));
                let state = match how {
                    SwitchedOut::Preempted => STATE_RUNNING,
                    SwitchedOut::Blocked => STATE_SLEEPING,
                    SwitchedOut::Exited => STATE_DEAD,
                };
                uint(body, 4, state);
                string(body, 5, self.comm(*next, cpu));
                uint(body, 6, u64::from(*next));
                self.current[ci] = *next;
                SCHED_SWITCH
            }
            EventKind::Wakeup {
                tid,
                target_cpu,
                new_thread,
            } => {
                string(body, 1, self.comm(*tid, cpu));
                uint(body, 2, u64::from(*tid));
                uint(body, 4, 1); // success
                uint(body, 5, u64::from(*target_cpu));
                if *new_thread {
                    SCHED_WAKEUP_NEW
                } else {
                    SCHED_WAKEUP
                }
            }
            EventKind::Migrate { tid, from, to } => {
                string(body, 1, self.comm(*tid, cpu));
                uint(body, 2, u64::from(*tid));
                uint(body, 4, u64::from(*from));
                uint(body, 5, u64::from(*to));
                SCHED_MIGRATE_TASK
            }
            EventKind::Fork { parent, child } => {
                let pc = self.comm(*parent, cpu).to_string();
                if !self.comms.contains_key(child) && !pc.is_empty() {
                    self.comms.insert(*child, pc.clone());
                }
                string(body, 1, &pc);
                uint(body, 2, u64::from(*parent));
                string(body, 3, self.comm(*child, cpu));
                uint(body, 4, u64::from(*child));
                SCHED_PROCESS_FORK
            }
            EventKind::Exec { tid, comm } => {
                self.comms.insert(*tid, comm.to_string());
                string(body, 1, comm);
                uint(body, 2, u64::from(*tid));
                uint(body, 3, u64::from(*tid));
                SCHED_PROCESS_EXEC
            }
            EventKind::Exit { tid } => {
                string(body, 1, self.comm(*tid, cpu));
                uint(body, 2, u64::from(*tid));
                uint(
                    body,
                    3,
                    u64::from(self.tgids.get(tid).copied().unwrap_or(*tid)),
                );
                SCHED_PROCESS_EXIT
            }
            EventKind::IdleEnter { state } => {
                uint(body, 1, u64::from(*state));
                uint(body, 2, u64::from(cpu));
                CPU_IDLE
            }
            EventKind::IdleExit => {
                uint(body, 1, PWR_EVENT_EXIT);
                uint(body, 2, u64::from(cpu));
                CPU_IDLE
            }
            EventKind::Frequency { khz } => {
                uint(body, 1, *khz);
                uint(body, 2, u64::from(cpu));
                CPU_FREQUENCY
            }
            // Interrupts need IRQ and vector numbers the model does not keep; runtime
            // updates are the report's CPU-time source, not a Perfetto track; stacks,
            // samples and timer arming need Perfetto's profiling packets (not written yet).
            EventKind::InterruptEnter(_)
            | EventKind::InterruptExit
            | EventKind::Runtime { .. }
            | EventKind::TimerArm { .. }
            | EventKind::CpuSample { .. }
            | EventKind::Stack { .. } => return None,
        };
        Some(field)
    }

    /// Writes CPU `ci`'s waiting events as one bundle packet.
    fn flush_cpu(&mut self, ci: usize) -> io::Result<()> {
        let events = &self.bundles[ci];
        if events.is_empty() {
            return Ok(());
        }
        let cpu = ci as u64;
        // FtraceEventBundle { cpu = 1; event = 2 (already framed) }
        let bundle_len = 1 + varint_len(cpu) + events.len();
        // TracePacket { ftrace_events = 1 }
        let packet_len = 1 + varint_len(bundle_len as u64) + bundle_len;
        let mut head = Vec::with_capacity(24);
        len_prefix(&mut head, PACKET, packet_len);
        len_prefix(&mut head, FTRACE_EVENTS, bundle_len);
        uint(&mut head, 1, cpu);
        self.out.write_all(&head)?;
        self.out.write_all(events)?;
        self.bundles[ci].clear();
        Ok(())
    }

    /// Events seen so far, per CPU (interrupts are counted but not written).
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Counter tracks written.
    pub fn counter_tracks(&self) -> usize {
        self.counters
    }

    /// Writes the waiting bundles and returns the output and the counts.
    pub fn finish(mut self) -> io::Result<(W, Counts)> {
        for ci in 0..self.bundles.len() {
            self.flush_cpu(ci)?;
        }
        self.out.flush()?;
        Ok((self.out, self.counts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads one varint at `*i`.
    fn varint(b: &[u8], i: &mut usize) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let byte = b[*i];
            *i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    /// (field, wire type, varint value or bytes) of each field of a message.
    fn fields(b: &[u8]) -> Vec<(u32, u64, u64, Vec<u8>)> {
        let mut i = 0;
        let mut out = Vec::new();
        while i < b.len() {
            let tag = varint(b, &mut i);
            let (f, w) = ((tag >> 3) as u32, tag & 7);
            match w {
                0 => out.push((f, w, varint(b, &mut i), vec![])),
                1 => {
                    out.push((f, w, 0, b[i..i + 8].to_vec()));
                    i += 8
                }
                2 => {
                    let n = varint(b, &mut i) as usize;
                    out.push((f, w, 0, b[i..i + n].to_vec()));
                    i += n;
                }
                _ => panic!("wire type {w}"),
            }
        }
        out
    }

    #[test]
    fn a_switch_lands_in_its_cpus_bundle_with_perfettos_field_numbers() {
        let threads = vec![ThreadInfo {
            tid: 42,
            pid: Some(40),
            ppid: Some(1),
            comm: "worker".into(),
        }];
        let mut w = PerfettoWriter::new(Vec::new(), &threads, 5).unwrap();
        w.event(&Event {
            time_ns: 1000,
            cpu: 3,
            kind: EventKind::Switch {
                prev: 0,
                how: SwitchedOut::Preempted,
                next: 42,
            },
        })
        .unwrap();
        w.event(&Event {
            time_ns: 1100,
            cpu: 3,
            kind: EventKind::InterruptExit,
        })
        .unwrap();
        let (out, counts) = w.finish().unwrap();
        assert_eq!(counts.0[3].switches, 1);
        assert_eq!(counts.0[3].interrupts, 1);
        let packets = fields(&out);
        assert_eq!(packets.len(), 2);
        assert!(packets.iter().all(|p| p.0 == 1 && p.1 == 2));
        // The first packet: the process tree with process 40 and thread 42.
        let first = fields(&packets[0].3);
        let tree = &first.iter().find(|f| f.0 == PROCESS_TREE).unwrap().3;
        let tree = fields(tree);
        assert_eq!(tree.len(), 2);
        assert_eq!(fields(&tree[0].3)[0].2, 40);
        // The second: ftrace_events { cpu: 3, event { timestamp 1000, pid 0, sched_switch } }.
        let second = fields(&packets[1].3);
        assert_eq!(second[0].0, FTRACE_EVENTS);
        let bundle = fields(&second[0].3);
        assert_eq!((bundle[0].0, bundle[0].2), (1, 3));
        assert_eq!(bundle.len(), 2, "the interrupt is not written");
        let ev = fields(&bundle[1].3);
        assert_eq!((ev[0].0, ev[0].2), (FT_TIMESTAMP, 1000));
        assert_eq!((ev[1].0, ev[1].2), (FT_PID, 0));
        assert_eq!(ev[2].0, SCHED_SWITCH);
        let sw = fields(&ev[2].3);
        assert_eq!(sw[0].3, b"swapper/3");
        assert_eq!(sw[3].3, b"worker");
        assert_eq!((sw[4].0, sw[4].2), (6, 42));
    }
}
