//! The event stream as JSON lines (one object per event) or CSV (one row per event), for
//! scripts: every event of the recording in time order, with thread names resolved from
//! the thread table (and updated by `exec` events).

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;

use powerlens_core::sched::event::{Event, EventKind, InterruptKind, SwitchedOut, Tid, IDLE_TID};

use super::{Counts, ThreadInfo};
use crate::table::csv_field;

/// Output flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// One JSON object per line (JSON Lines), absent fields omitted.
    JsonLines,
    /// A header of [`COLUMNS`], one row per event, empty cells for absent fields.
    Csv,
}

/// The CSV columns, which are also the JSON keys.
pub const COLUMNS: [&str; 22] = [
    "time_ns",
    "cpu",
    "event",
    "tid",
    "comm",
    "prev_tid",
    "prev_comm",
    "prev_state",
    "next_tid",
    "next_comm",
    "target_cpu",
    "from_cpu",
    "to_cpu",
    "parent_tid",
    "idle_state",
    "khz",
    "runtime_ns",
    "interrupt",
    "period_ns",
    "timer",
    "function",
    "stack_id",
];

/// One event, flattened.
#[derive(Debug, Default, Serialize)]
struct Row<'a> {
    time_ns: u64,
    cpu: u32,
    event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<Tid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comm: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prev_tid: Option<Tid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prev_comm: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prev_state: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_tid: Option<Tid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_comm: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_cpu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from_cpu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to_cpu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_tid: Option<Tid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    idle_state: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    khz: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime_ns: Option<u64>,
    /// `timer`, `irq NAME`, `softirq NAME`, `ipi`.
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupt: Option<String>,
    /// CPU time a `cpu_sample` stands for.
    #[serde(skip_serializing_if = "Option::is_none")]
    period_ns: Option<u64>,
    /// Kernel addresses of a timer and its callback, in hex (`timer_arm`, timer interrupts).
    #[serde(skip_serializing_if = "Option::is_none")]
    timer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function: Option<String>,
    /// A `stack` event's id in the recording's stack table.
    #[serde(skip_serializing_if = "Option::is_none")]
    stack_id: Option<u32>,
}

fn hex(addr: u64) -> Option<String> {
    (addr != 0).then(|| format!("{addr:#x}"))
}

/// Writes every event as a JSON line or a CSV row.
pub struct EventWriter<W: Write> {
    out: W,
    flavour: Flavour,
    comms: HashMap<Tid, String>,
    counts: Counts,
    line: Vec<u8>,
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

impl<W: Write> EventWriter<W> {
    pub fn new(mut out: W, flavour: Flavour, threads: &[ThreadInfo]) -> io::Result<Self> {
        if flavour == Flavour::Csv {
            writeln!(out, "{}", COLUMNS.join(","))?;
        }
        Ok(Self {
            out,
            flavour,
            comms: threads
                .iter()
                .filter(|t| !t.comm.is_empty())
                .map(|t| (t.tid, t.comm.clone()))
                .collect(),
            counts: Counts::default(),
            line: Vec::with_capacity(256),
        })
    }

    pub fn event(&mut self, e: &Event) -> io::Result<()> {
        self.counts.count(e.cpu, &e.kind);
        if let EventKind::Exec { tid, comm } = &e.kind {
            self.comms.insert(*tid, comm.to_string());
        }
        let comms = &self.comms;
        let name = |tid: Tid| -> Option<&str> {
            if tid == IDLE_TID {
                Some("swapper")
            } else {
                comms.get(&tid).map(String::as_str)
            }
        };
        let mut r = Row {
            time_ns: e.time_ns,
            cpu: e.cpu,
            ..Row::default()
        };
        match &e.kind {
            EventKind::Switch { prev, how, next } => {
                r.event = "switch";
                r.prev_tid = Some(*prev);
                r.prev_comm = name(*prev);
                r.prev_state = Some(match how {
                    SwitchedOut::Preempted => "preempted",
                    SwitchedOut::Blocked => "blocked",
                    SwitchedOut::Exited => "exited",
                });
                r.next_tid = Some(*next);
                r.next_comm = name(*next);
            }
            EventKind::Wakeup {
                tid,
                target_cpu,
                new_thread,
            } => {
                r.event = if *new_thread { "wakeup_new" } else { "wakeup" };
                r.tid = Some(*tid);
                r.comm = name(*tid);
                r.target_cpu = Some(*target_cpu);
            }
            EventKind::Migrate { tid, from, to } => {
                r.event = "migrate";
                r.tid = Some(*tid);
                r.comm = name(*tid);
                r.from_cpu = Some(*from);
                r.to_cpu = Some(*to);
            }
            EventKind::Fork { parent, child } => {
                r.event = "fork";
                r.tid = Some(*child);
                r.comm = name(*child).or_else(|| name(*parent));
                r.parent_tid = Some(*parent);
            }
            EventKind::Exec { tid, comm } => {
                r.event = "exec";
                r.tid = Some(*tid);
                r.comm = Some(comm);
            }
            EventKind::Exit { tid } => {
                r.event = "exit";
                r.tid = Some(*tid);
                r.comm = name(*tid);
            }
            EventKind::IdleEnter { state } => {
                r.event = "idle_enter";
                r.idle_state = Some(*state);
            }
            EventKind::IdleExit => r.event = "idle_exit",
            EventKind::Frequency { khz } => {
                r.event = "frequency";
                r.khz = Some(*khz);
            }
            EventKind::InterruptEnter(k) => {
                r.event = "interrupt_enter";
                r.interrupt = Some(match k {
                    InterruptKind::Timer { timer, function } => {
                        r.timer = hex(*timer);
                        r.function = hex(*function);
                        "timer".to_string()
                    }
                    InterruptKind::Irq(n) => format!("irq {n}"),
                    InterruptKind::SoftIrq(n) => format!("softirq {n}"),
                    InterruptKind::Ipi => "ipi".to_string(),
                });
            }
            EventKind::InterruptExit => r.event = "interrupt_exit",
            EventKind::Runtime { tid, ns } => {
                r.event = "runtime";
                r.tid = Some(*tid);
                r.comm = name(*tid);
                r.runtime_ns = Some(*ns);
            }
            EventKind::TimerArm { timer, function } => {
                r.event = "timer_arm";
                r.timer = hex(*timer);
                r.function = hex(*function);
            }
            EventKind::CpuSample { tid, period_ns } => {
                r.event = "cpu_sample";
                r.tid = Some(*tid);
                r.comm = name(*tid);
                r.period_ns = Some(*period_ns);
            }
            EventKind::Stack { id } => {
                r.event = "stack";
                r.stack_id = Some(*id);
            }
        }
        self.line.clear();
        match self.flavour {
            Flavour::JsonLines => {
                serde_json::to_writer(&mut self.line, &r).map_err(io::Error::other)?;
            }
            Flavour::Csv => {
                let text = |s: Option<&str>| s.map(csv_field).unwrap_or_default();
                write!(
                    self.line,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    r.time_ns,
                    r.cpu,
                    r.event,
                    opt(&r.tid),
                    text(r.comm),
                    opt(&r.prev_tid),
                    text(r.prev_comm),
                    r.prev_state.unwrap_or_default(),
                    opt(&r.next_tid),
                    text(r.next_comm),
                    opt(&r.target_cpu),
                    opt(&r.from_cpu),
                    opt(&r.to_cpu),
                    opt(&r.parent_tid),
                    opt(&r.idle_state),
                    opt(&r.khz),
                    opt(&r.runtime_ns),
                    text(r.interrupt.as_deref()),
                    opt(&r.period_ns),
                    r.timer.as_deref().unwrap_or_default(),
                    r.function.as_deref().unwrap_or_default(),
                    opt(&r.stack_id),
                )?;
            }
        }
        self.line.push(b'\n');
        self.out.write_all(&self.line)
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    pub fn finish(mut self) -> io::Result<(W, Counts)> {
        self.out.flush()?;
        Ok((self.out, self.counts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> Vec<Event> {
        vec![
            Event {
                time_ns: 10,
                cpu: 1,
                kind: EventKind::Wakeup {
                    tid: 7,
                    target_cpu: 1,
                    new_thread: false,
                },
            },
            Event {
                time_ns: 20,
                cpu: 1,
                kind: EventKind::Switch {
                    prev: 0,
                    how: SwitchedOut::Preempted,
                    next: 7,
                },
            },
            Event {
                time_ns: 30,
                cpu: 1,
                kind: EventKind::Exec {
                    tid: 7,
                    comm: "a,\"b\"".into(),
                },
            },
            Event {
                time_ns: 40,
                cpu: 1,
                kind: EventKind::InterruptEnter(InterruptKind::Irq("virtio0".into())),
            },
        ]
    }

    fn threads() -> Vec<ThreadInfo> {
        vec![ThreadInfo {
            tid: 7,
            pid: Some(7),
            ppid: None,
            comm: "seven".into(),
        }]
    }

    #[test]
    fn json_lines_have_one_object_per_event() {
        let mut w = EventWriter::new(Vec::new(), Flavour::JsonLines, &threads()).unwrap();
        for e in stream() {
            w.event(&e).unwrap();
        }
        let (out, counts) = w.finish().unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(counts.0[1].total(), 4);
        assert_eq!(
            lines[0],
            serde_json::json!({"time_ns": 10, "cpu": 1, "event": "wakeup", "tid": 7, "comm": "seven", "target_cpu": 1})
        );
        assert_eq!(lines[1]["prev_comm"], "swapper");
        assert_eq!(lines[1]["next_comm"], "seven");
        assert_eq!(lines[1]["prev_state"], "preempted");
        assert_eq!(lines[2]["comm"], "a,\"b\"");
        assert_eq!(lines[3]["interrupt"], "irq virtio0");
    }

    #[test]
    fn csv_has_a_row_per_event_and_quotes_names() {
        let mut w = EventWriter::new(Vec::new(), Flavour::Csv, &threads()).unwrap();
        for e in stream() {
            w.event(&e).unwrap();
        }
        let text = String::from_utf8(w.finish().unwrap().0).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], COLUMNS.join(","));
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[1], "10,1,wakeup,7,seven,,,,,,1,,,,,,,,,,,");
        assert_eq!(
            lines[2],
            "20,1,switch,,,0,swapper,preempted,7,seven,,,,,,,,,,,,"
        );
        assert_eq!(lines[3], "30,1,exec,7,\"a,\"\"b\"\"\",,,,,,,,,,,,,,,,,");
        for l in &lines {
            // Quoted commas aside, every row has the header's cells.
            let unquoted: String = l.split('"').step_by(2).collect();
            assert_eq!(unquoted.matches(',').count(), COLUMNS.len() - 1, "{l}");
        }
    }
}
