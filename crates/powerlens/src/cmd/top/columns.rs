//! The process table's columns: their titles, widths, what each one means (the help
//! screen's text), and which fit a terminal's width.

use super::snapshot::{ProcessRow, WakeupRates};
use super::view::SortKey;

/// The process table's columns, in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    Pid,
    Command,
    Power,
    Cpu,
    Wakeups,
    Thread,
    Timer,
    Irq,
    Ipi,
    Unrecorded,
    IdleWakeups,
}

/// The narrowest command column: a whole name (the kernel's `comm` holds 15 characters)
/// and a space. Optional columns go before the command is cut below this.
pub const COMMAND_MIN: u16 = 16;

impl Col {
    /// Every column in display order.
    pub const ALL: [Col; 11] = [
        Col::Pid,
        Col::Command,
        Col::Power,
        Col::Cpu,
        Col::Wakeups,
        Col::Thread,
        Col::Timer,
        Col::Irq,
        Col::Ipi,
        Col::Unrecorded,
        Col::IdleWakeups,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Col::Pid => "PID",
            Col::Command => "COMMAND",
            Col::Power => "POWER W",
            Col::Cpu => "CPU %",
            Col::Wakeups => "WAKE/s",
            Col::Thread => "thread",
            Col::Timer => "timer",
            Col::Irq => "irq",
            Col::Ipi => "ipi",
            Col::Unrecorded => "UNREC/s",
            Col::IdleWakeups => "IDLE WK/s",
        }
    }

    /// What the column shows, in one line (the help screen).
    pub fn meaning(self) -> &'static str {
        match self {
            Col::Pid => "the process id",
            Col::Command => "its main thread's name (the kernel's comm, 15 characters at most)",
            Col::Power => "its share of the node's power: the non-idle power split by CPU time",
            Col::Cpu => "CPU time over the interval: 200 is two CPUs busy all the interval",
            Col::Wakeups => "wake-ups its threads received per second, all causes",
            Col::Thread => "… issued by another thread",
            Col::Timer => "… from a timer callback",
            Col::Irq => "… from a hardware interrupt or a softirq",
            Col::Ipi => "… from an IPI or an idle CPU (a remote wake-up, no thread behind it)",
            Col::Unrecorded => {
                "runs after blocking with no wake-up recorded, per second: WAKE/s is short of these"
            }
            Col::IdleWakeups => "wake-ups per second that ended a CPU's idle (an idle exit each)",
        }
    }

    /// Fixed widths; the command's is what is left, at least [`COMMAND_MIN`].
    pub fn width(self) -> u16 {
        match self {
            Col::Pid => 7,
            Col::Command => COMMAND_MIN,
            Col::Power => 8,
            Col::Cpu => 6,
            Col::Wakeups => 7,
            Col::Thread | Col::Timer | Col::Irq | Col::Ipi => 6,
            Col::Unrecorded => 8,
            Col::IdleWakeups => 9,
        }
    }

    pub fn sorted_by(self) -> Option<SortKey> {
        match self {
            Col::Command => Some(SortKey::Name),
            Col::Power => Some(SortKey::Power),
            Col::Cpu => Some(SortKey::Cpu),
            Col::Wakeups => Some(SortKey::Wakeups),
            Col::IdleWakeups => Some(SortKey::IdleWakeups),
            _ => None,
        }
    }

    pub fn text(self, p: &ProcessRow) -> String {
        let na = || "n/a".to_string();
        let cause =
            |f: fn(&WakeupRates) -> f64| p.wakeups_per_s.as_ref().map_or_else(na, |w| rate(f(w)));
        match self {
            Col::Pid => p.pid.to_string(),
            Col::Command => p.comm.clone(),
            Col::Power => watts(p.power_w),
            Col::Cpu => format!("{:.1}", p.cpu_pct),
            Col::Wakeups => cause(|w| w.total),
            Col::Thread => cause(|w| w.thread),
            Col::Timer => cause(|w| w.timer),
            Col::Irq => cause(|w| w.irq),
            Col::Ipi => cause(|w| w.ipi_or_idle),
            Col::Unrecorded => p.unrecorded_wakeups_per_s.map_or_else(na, rate),
            Col::IdleWakeups => p.idle_wakeups_per_s.map_or_else(na, rate),
        }
    }
}

/// The columns that fit `width` with a whole command name: PID, command and power
/// always, then CPU, wake-ups, idle and unrecorded wake-ups together (an idle count above
/// the wake-ups is explained by the unrecorded ones beside it) and last the wake-ups'
/// causes, in display order. The command column takes the width the chosen columns leave.
pub fn columns_for(width: u16) -> Vec<Col> {
    let groups: [&[Col]; 5] = [
        &[Col::Pid, Col::Command, Col::Power],
        &[Col::Cpu],
        &[Col::Wakeups],
        &[Col::Unrecorded, Col::IdleWakeups],
        &[Col::Thread, Col::Timer, Col::Irq, Col::Ipi],
    ];
    let used = |cols: &[Col]| -> u16 { cols.iter().map(|c| c.width() + 1).sum::<u16>() - 1 };
    let mut chosen: Vec<Col> = groups[0].to_vec();
    for group in &groups[1..] {
        let mut trial = chosen.clone();
        trial.extend_from_slice(group);
        if used(&trial) > width {
            break;
        }
        chosen = trial;
    }
    Col::ALL
        .into_iter()
        .filter(|c| chosen.contains(c))
        .collect()
}

pub fn watts(w: f64) -> String {
    if w >= 100.0 {
        format!("{w:.1}")
    } else if w >= 10.0 {
        format!("{w:.2}")
    } else {
        format!("{w:.3}")
    }
}

fn rate(x: f64) -> String {
    if x >= 1000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}
