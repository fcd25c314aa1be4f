//! From perf tracepoint records to the core event model. Every recording goes through this
//! one converter, so `report` sees the same events whatever the kernel's field layout:
//! fields are found by name in each event's tracepoint `format` once, when the converter is
//! built, and read at their offsets for every record.

use powerlens_core::sched::event::{Event, EventKind, InterruptKind, Name, SwitchedOut};
use powerlens_sys::trace::{EventFormat, Field, TraceRecord};

use crate::threads::ThreadTable;

/// The tracepoints a recording asks for, and what each becomes. Entry/exit pairs of
/// interrupt contexts are both recorded: without the exit, every later wake-up on that CPU
/// would be blamed on the interrupt.
pub const RECORDED_EVENTS: &[(&str, Tracepoint)] = &[
    ("sched/sched_switch", Tracepoint::Switch),
    // sched_waking fires in the waker's context, on the waker's CPU; sched_wakeup may fire
    // later on the wakee's CPU, from the IPI or idle loop that completes a remote wake-up
    // (queued wake-ups), where the waker is no longer current. Only one of them is opened
    // (see `recorded_event_names`): waking where the kernel has it.
    ("sched/sched_waking", Tracepoint::Wakeup),
    ("sched/sched_wakeup", Tracepoint::Wakeup),
    ("sched/sched_wakeup_new", Tracepoint::WakeupNew),
    ("sched/sched_migrate_task", Tracepoint::Migrate),
    ("sched/sched_process_fork", Tracepoint::Fork),
    ("sched/sched_process_exec", Tracepoint::Exec),
    ("sched/sched_process_exit", Tracepoint::Exit),
    // The scheduler's own CPU-time account, in the running thread's context: exact even
    // where a kernel loses the idle-context switch-ins (this project's VMs).
    ("sched/sched_stat_runtime", Tracepoint::Runtime),
    ("power/cpu_idle", Tracepoint::CpuIdle),
    ("power/cpu_frequency", Tracepoint::CpuFrequency),
    ("irq/irq_handler_entry", Tracepoint::IrqEntry),
    ("irq/irq_handler_exit", Tracepoint::InterruptExit),
    ("irq/softirq_entry", Tracepoint::SoftirqEntry),
    ("irq/softirq_exit", Tracepoint::InterruptExit),
    ("timer/hrtimer_expire_entry", Tracepoint::HrtimerEntry),
    ("timer/hrtimer_expire_exit", Tracepoint::InterruptExit),
    ("timer/timer_expire_entry", Tracepoint::TimerEntry),
    // Who armed each timer (and, with stacks, from where): an idle exit by a timer is
    // traced back to the code that asked for it.
    ("timer/hrtimer_start", Tracepoint::HrtimerArm),
    ("timer/timer_start", Tracepoint::TimerArm),
    ("timer/timer_expire_exit", Tracepoint::InterruptExit),
    // The receiving side of IPIs (x86): a wake-up issued here came from another CPU.
    ("irq_vectors/reschedule_entry", Tracepoint::IpiEntry),
    ("irq_vectors/reschedule_exit", Tracepoint::InterruptExit),
    ("irq_vectors/call_function_entry", Tracepoint::IpiEntry),
    ("irq_vectors/call_function_exit", Tracepoint::InterruptExit),
    (
        "irq_vectors/call_function_single_entry",
        Tracepoint::IpiEntry,
    ),
    (
        "irq_vectors/call_function_single_exit",
        Tracepoint::InterruptExit,
    ),
];

/// The event names to open, in [`RECORDED_EVENTS`] order: sched_waking instead of
/// sched_wakeup when `has_waking` (kernels since 4.3), so each wake-up is one event,
/// recorded where its waker runs.
pub fn recorded_event_names(has_waking: bool) -> Vec<&'static str> {
    let skip = if has_waking {
        "sched/sched_wakeup"
    } else {
        "sched/sched_waking"
    };
    RECORDED_EVENTS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| *name != skip)
        .collect()
}

/// The tracepoints a monitor that runs without end opens (`powerlens agent`, `top`): what
/// per-process CPU time, wake-ups by cause and idle wake-ups need, and no more — no
/// `cpu_idle` (idle-state residency comes from the kernel's cpuidle counters), no
/// frequency, migrations or timer arming (who armed a timer is the report's question).
/// Each event left out is CPU time the monitor does not spend. A monitor that reads CPU
/// time from procfs (`cpu_time_from_trace` false) leaves out the runtime updates too.
pub fn monitor_event_names(has_waking: bool, cpu_time_from_trace: bool) -> Vec<&'static str> {
    const LEFT_OUT: &[&str] = &[
        "power/cpu_idle",
        "power/cpu_frequency",
        "sched/sched_migrate_task",
        "timer/hrtimer_start",
        "timer/timer_start",
    ];
    recorded_event_names(has_waking)
        .into_iter()
        .filter(|name| !LEFT_OUT.contains(name))
        .filter(|name| cpu_time_from_trace || *name != "sched/sched_stat_runtime")
        .collect()
}

/// What a tracepoint means to the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracepoint {
    Switch,
    Wakeup,
    WakeupNew,
    Migrate,
    Fork,
    Exec,
    Exit,
    Runtime,
    CpuIdle,
    CpuFrequency,
    IrqEntry,
    SoftirqEntry,
    HrtimerEntry,
    TimerEntry,
    HrtimerArm,
    TimerArm,
    IpiEntry,
    InterruptExit,
}

/// `prev_state` bits of sched_switch (the kernel's TASK_REPORT encoding): the low byte is
/// the task state, 0 meaning runnable; EXIT_DEAD and EXIT_ZOMBIE mark a task's last switch.
const TASK_STATE_MASK: i64 = 0xff;
const EXIT_DEAD: i64 = 0x10;
const EXIT_ZOMBIE: i64 = 0x20;

/// `power:cpu_idle` state value for "leaving idle" (PWR_EVENT_EXIT, (u32)-1).
const PWR_EVENT_EXIT: u64 = u32::MAX as u64;

/// Softirq vector names, as the kernel's `softirq_to_name`.
const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// The longest comm the kernel keeps (TASK_COMM_LEN − 1).
const COMM_LEN: usize = 15;

/// One tracepoint's meaning and the fields it needs, looked up by name once.
#[derive(Debug, Clone)]
struct Plan {
    tracepoint: Tracepoint,
    /// Fields in the order the tracepoint's conversion reads them.
    fields: Vec<Field>,
}

/// Converts the records of one collector. Also tells a [`ThreadTable`] which process each
/// thread belongs to and its name, from every record's header and payload.
#[derive(Debug)]
pub struct Converter {
    /// By the collector's event index; `None` for an event this converter does not know
    /// or whose format lacks a field it needs.
    plans: Vec<Option<Plan>>,
    /// sched_process_exit's event index and its `group_dead` field, where the kernel has
    /// it (Linux 6.x): whether an exit ends the whole process.
    group_dead: Option<(usize, Field)>,
    /// Events whose format lacked a needed field: (event, missing field).
    pub malformed: Vec<(String, String)>,
}

impl Converter {
    /// Plans the conversion of `events` (the collector's events, in its index order).
    pub fn new(events: &[EventFormat]) -> Converter {
        let mut malformed = Vec::new();
        let plans = events
            .iter()
            .map(|format| {
                let name = format.full_name();
                let tracepoint = RECORDED_EVENTS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, t)| *t)?;
                let mut fields = Vec::new();
                for wanted in needed_fields(tracepoint) {
                    match format.field(wanted) {
                        Some(f) => fields.push(f.clone()),
                        None => {
                            malformed.push((name.clone(), wanted.to_string()));
                            return None;
                        }
                    }
                }
                Some(Plan { tracepoint, fields })
            })
            .collect();
        let group_dead = events.iter().enumerate().find_map(|(index, format)| {
            let field = (format.full_name() == "sched/sched_process_exit")
                .then(|| format.field("group_dead"))??;
            Some((index, field.clone()))
        });
        Converter {
            plans,
            group_dead,
            malformed,
        }
    }

    /// Whether `r` is the exit of a process's last thread (`group_dead`); false for other
    /// records, and for every record on kernels whose exit tracepoint lacks the field.
    pub fn ends_process(&self, r: &TraceRecord<'_>) -> bool {
        self.group_dead
            .as_ref()
            .is_some_and(|(index, field)| *index == r.event && field.u64(r.raw) == Some(1))
    }

    /// The event a record stands for, or `None` for a record that carries nothing the
    /// analysis uses (or is truncated).
    pub fn convert(&self, r: &TraceRecord<'_>, threads: &mut ThreadTable) -> Option<Event> {
        let t = r.time_ns;
        threads.observe_current(r.cpu, r.pid, r.tid, t);
        let plan = self.plans.get(r.event)?.as_ref()?;
        let raw = r.raw;
        let f = &plan.fields;
        let int = |i: usize| f[i].i64(raw);
        let kind = match plan.tracepoint {
            Tracepoint::Switch => {
                let (prev, state, next) = (int(1)?, int(2)?, int(4)?);
                let (prev, next) = (prev as u32, next as u32);
                if let Some(comm) = f[0].bytes(raw) {
                    threads.observe_comm_bytes(prev, comm, t);
                }
                if let Some(comm) = f[3].bytes(raw) {
                    threads.observe_comm_bytes(next, comm, t);
                }
                EventKind::Switch {
                    prev,
                    how: switched_out(state),
                    next,
                }
            }
            Tracepoint::Wakeup | Tracepoint::WakeupNew => EventKind::Wakeup {
                tid: int(0)? as u32,
                target_cpu: int(1)? as u32,
                new_thread: plan.tracepoint == Tracepoint::WakeupNew,
            },
            Tracepoint::Migrate => EventKind::Migrate {
                tid: int(0)? as u32,
                from: int(1)? as u32,
                to: int(2)? as u32,
            },
            Tracepoint::Fork => {
                let (parent, child) = (int(0)? as u32, int(1)? as u32);
                threads.observe_fork(parent, child, t);
                if let Some(comm) = f[2].bytes(raw) {
                    threads.observe_comm_bytes(child, comm, t);
                }
                EventKind::Fork { parent, child }
            }
            Tracepoint::Exec => {
                let tid = int(0)? as u32;
                let filename = f[1].str(raw)?;
                let comm = exec_comm(&filename);
                threads.observe_comm(tid, &comm, t);
                EventKind::Exec {
                    tid,
                    comm: comm.into(),
                }
            }
            Tracepoint::Exit => EventKind::Exit {
                tid: int(0)? as u32,
            },
            Tracepoint::Runtime => EventKind::Runtime {
                tid: int(0)? as u32,
                ns: f[1].u64(raw)?,
            },
            Tracepoint::CpuIdle => {
                let state = f[0].u64(raw)?;
                let cpu = f[1].u64(raw)? as u32;
                let kind = if state == PWR_EVENT_EXIT {
                    EventKind::IdleExit
                } else {
                    EventKind::IdleEnter {
                        state: state as u32,
                    }
                };
                return Some(Event {
                    time_ns: r.time_ns,
                    cpu,
                    kind,
                });
            }
            Tracepoint::CpuFrequency => {
                // Emitted once per CPU of the policy, possibly from another CPU: the
                // payload's cpu_id is the CPU whose frequency changed.
                let khz = f[0].u64(raw)?;
                let cpu = f[1].u64(raw)? as u32;
                return Some(Event {
                    time_ns: r.time_ns,
                    cpu,
                    kind: EventKind::Frequency { khz },
                });
            }
            Tracepoint::IrqEntry => {
                EventKind::InterruptEnter(InterruptKind::Irq(Name::new(&f[0].str(raw)?)))
            }
            Tracepoint::SoftirqEntry => {
                let vec = f[0].u64(raw)? as usize;
                let name = match SOFTIRQ_NAMES.get(vec) {
                    Some(s) => Name::new(s),
                    None => Name::new(&format!("softirq{vec}")),
                };
                EventKind::InterruptEnter(InterruptKind::SoftIrq(name))
            }
            Tracepoint::HrtimerEntry | Tracepoint::TimerEntry => {
                EventKind::InterruptEnter(InterruptKind::Timer {
                    timer: f[0].u64(raw)?,
                    function: f[1].u64(raw)?,
                })
            }
            Tracepoint::HrtimerArm | Tracepoint::TimerArm => EventKind::TimerArm {
                timer: f[0].u64(raw)?,
                function: f[1].u64(raw)?,
            },
            Tracepoint::IpiEntry => EventKind::InterruptEnter(InterruptKind::Ipi),
            Tracepoint::InterruptExit => EventKind::InterruptExit,
        };
        Some(Event {
            time_ns: r.time_ns,
            cpu: r.cpu,
            kind,
        })
    }
}

/// The fields each tracepoint's conversion reads, in the order `convert` indexes them.
fn needed_fields(t: Tracepoint) -> &'static [&'static str] {
    match t {
        Tracepoint::Switch => &[
            "prev_comm",
            "prev_pid",
            "prev_state",
            "next_comm",
            "next_pid",
        ],
        Tracepoint::Wakeup | Tracepoint::WakeupNew => &["pid", "target_cpu"],
        Tracepoint::Migrate => &["pid", "orig_cpu", "dest_cpu"],
        Tracepoint::Fork => &["parent_pid", "child_pid", "child_comm"],
        Tracepoint::Exec => &["pid", "filename"],
        Tracepoint::Exit => &["pid"],
        Tracepoint::Runtime => &["pid", "runtime"],
        Tracepoint::CpuIdle | Tracepoint::CpuFrequency => &["state", "cpu_id"],
        Tracepoint::IrqEntry => &["name"],
        Tracepoint::SoftirqEntry => &["vec"],
        Tracepoint::HrtimerEntry | Tracepoint::HrtimerArm => &["hrtimer", "function"],
        Tracepoint::TimerEntry | Tracepoint::TimerArm => &["timer", "function"],
        Tracepoint::IpiEntry | Tracepoint::InterruptExit => &[],
    }
}

/// How a thread left the CPU, from sched_switch's `prev_state`. Runnable (R, or R+ for
/// "preempted") is what the kernel counts as a nonvoluntary switch; a dying task's last
/// switch is neither; anything else blocked.
pub fn switched_out(prev_state: i64) -> SwitchedOut {
    if prev_state & (EXIT_DEAD | EXIT_ZOMBIE) != 0 {
        SwitchedOut::Exited
    } else if prev_state & TASK_STATE_MASK == 0 {
        SwitchedOut::Preempted
    } else {
        SwitchedOut::Blocked
    }
}

/// The comm a task gets at exec: the file name's last component, cut to 15 bytes.
fn exec_comm(filename: &str) -> String {
    let base = filename.rsplit('/').next().unwrap_or(filename);
    let mut end = base.len().min(COMM_LEN);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    base[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wake_up_event_is_opened() {
        let with = recorded_event_names(true);
        assert!(with.contains(&"sched/sched_waking") && !with.contains(&"sched/sched_wakeup"));
        let without = recorded_event_names(false);
        assert!(
            !without.contains(&"sched/sched_waking") && without.contains(&"sched/sched_wakeup")
        );
        assert!(
            with.contains(&"sched/sched_wakeup_new") && without.contains(&"sched/sched_wakeup_new")
        );
    }

    #[test]
    fn prev_state_classification() {
        assert_eq!(switched_out(0), SwitchedOut::Preempted, "R");
        assert_eq!(switched_out(0x100), SwitchedOut::Preempted, "R+");
        assert_eq!(switched_out(1), SwitchedOut::Blocked, "S");
        assert_eq!(switched_out(2), SwitchedOut::Blocked, "D");
        assert_eq!(switched_out(0x80), SwitchedOut::Blocked, "I");
        assert_eq!(switched_out(0x10), SwitchedOut::Exited, "X");
        assert_eq!(switched_out(0x20), SwitchedOut::Exited, "Z");
    }

    #[test]
    fn exec_comm_is_the_basename_cut_like_the_kernel() {
        assert_eq!(exec_comm("/usr/bin/sleep"), "sleep");
        assert_eq!(exec_comm("a-very-long-program-name"), "a-very-long-pro");
        assert_eq!(exec_comm("./x"), "x");
        // Never cuts inside a UTF-8 character.
        assert_eq!(exec_comm("ééééééééé"), "ééééééé");
    }
}
