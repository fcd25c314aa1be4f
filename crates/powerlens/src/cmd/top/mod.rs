//! `powerlens top`: a live terminal view of the agent's streaming analysis, in the spirit
//! of powertop's overview — the node's power and where it comes from, each process's
//! power, CPU and wake-ups, each CPU's idle-state residency. The measuring runs on a
//! thread of its own (`top/session.rs`); this loop answers keys and draws
//! (`top/render.rs`, a pure function of `top/view.rs`'s state).

mod columns;
mod fit;
mod hangup;
mod help;
mod render;
mod session;
mod snapshot;
mod terminal;
mod view;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event};
use ratatui::layout::Rect;

use powerlens_record::interrupt;
use powerlens_record::live::Tracing;

use crate::args::GlobalArgs;
use crate::cmd::live::LiveArgs;
use render::Screen;
use session::{Measurer, Message, Running};
use terminal::TerminalGuard;
use view::{Outcome, SortKey, View};

/// How long the loop waits for a key before it looks for a new interval or a signal.
const POLL: Duration = Duration::from_millis(100);

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  sudo powerlens top                              # one interval a second, by power
  sudo powerlens top --interval 2s --sort wakeups
  sudo powerlens top --filter firefox
  powerlens top --reduced                         # no tracing: CPU time and power, no wake-ups
  sudo powerlens top --once --json | jq '.processes[:5]'

Keys: p, c, w, i, n sort by power, CPU, wake-ups, idle wake-ups, name (Tab, ← and → cycle);
/ filters by process name (Enter keeps the filter, Esc clears it); space or f freezes the
display while measuring goes on (again: the latest interval); ? shows what every column
means (again, or Esc: back); q, Esc or Ctrl-C quits.

Every interval, top reads the energy meter (RAPL, perf power PMU, battery, hwmon; the
power model, labelled ESTIMATED, when there is none) and splits the node's energy into an
idle (baseline) share, the [idle] row, and the rest over processes by the CPU time the
scheduler charged them: the rows add up to the node. Wake-ups by cause and idle wake-ups
come from the scheduler tracepoints (root or CAP_PERFMON); without them top samples /proc
and shows them as n/a. Idle-state residency comes from cpuidle sysfs. Every column:
docs/TOP.md. For continuous metrics without a terminal: `powerlens agent`.")]
pub struct TopArgs {
    /// The process table's order at the start (keys change it).
    #[arg(long, value_enum, default_value = "power")]
    pub sort: SortKey,

    /// Show only processes whose name contains this (case-insensitive; `/` changes it).
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,

    /// Measure one interval, print it as text and exit (no terminal needed).
    #[arg(long)]
    pub once: bool,

    /// Measure one interval and print it as JSON (implies --once).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub live: LiveArgs,
}

/// How soon the measuring thread sees a `q`: its stop flag is set by a key, which wakes
/// nothing.
const KEY_CHECK: Duration = Duration::from_millis(50);

pub fn execute(global: &GlobalArgs, args: TopArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let once = args.once || args.json;
    if !once && !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "powerlens top draws on a terminal and stdout is not one: run it in a terminal (not through a pipe or a redirection); for scripts, `powerlens top --once --json` prints one interval, and `powerlens agent` serves the figures continuously"
        );
    }
    interrupt::install();
    let view_of = |header| {
        let mut view = View::new(header);
        view.sort = args.sort;
        view.filter = args.filter.clone().unwrap_or_default();
        view
    };
    if once {
        // Only Ctrl-C stops it early: no flag to ask besides the signal's.
        let mut measurer = Measurer::start(&roots, &args.live.options(Tracing::Continuous, None))?;
        let mut view = view_of(measurer.header().clone());
        view.once = true;
        let Some(snapshot) = measurer.next(&interrupt::interrupted)? else {
            eprintln!("powerlens: interrupted before the interval ended");
            return Ok(ExitCode::from(130));
        };
        view.update(snapshot);
        print_once(&view, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let running = Running::spawn(
        roots,
        args.live.options(Tracing::Continuous, Some(KEY_CHECK)),
    )?;
    let mut view = view_of(running.header.clone());
    let shown = show(&mut view, &running.snapshots);
    // The terminal is restored (the guard dropped in `show`) before the session stops.
    drop(running);
    shown?;
    Ok(ExitCode::SUCCESS)
}

/// The live view until a quit key, a signal, or a failed session (a terminal that hangs
/// up ends the process: `top/hangup.rs`).
fn show(view: &mut View, snapshots: &Receiver<Message>) -> anyhow::Result<()> {
    hangup::watch().context("cannot watch the terminal")?;
    let mut guard = TerminalGuard::enter()?;
    let mut dirty = true;
    loop {
        if dirty {
            guard
                .terminal
                .draw(|f| f.render_widget(Screen(view), f.area()))?;
            dirty = false;
        }
        if interrupt::interrupted() {
            return Ok(());
        }
        // Every key waiting is handled before the next draw (a pasted filter, held keys).
        let mut wait = POLL;
        while event::poll(wait)? {
            wait = Duration::ZERO;
            match event::read()? {
                Event::Key(key) => match view.handle_key(key) {
                    Outcome::Quit => return Ok(()),
                    Outcome::Changed => dirty = true,
                    Outcome::Ignored => {}
                },
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        loop {
            match snapshots.try_recv() {
                Ok(Message::Interval(s)) => {
                    view.update(*s);
                    dirty = true;
                }
                Ok(Message::Failed(e)) => anyhow::bail!(e),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    anyhow::bail!(
                        "the measuring thread stopped unexpectedly (see the message above)"
                    )
                }
            }
        }
    }
}

/// One interval for scripts: JSON, or the screen as text (the terminal's width, else 120
/// columns, and as tall as every process and CPU needs).
fn print_once(view: &View, json: bool) -> anyhow::Result<()> {
    let snapshot = view.shown().expect("an interval was measured");
    if json {
        // The snapshot's fields, its processes in the asked order and filter, and the
        // session's own.
        let mut out = serde_json::to_value(snapshot)?;
        out["processes"] = serde_json::to_value(view.rows())?;
        out["interval_s"] = view.header.interval.as_secs_f64().into();
        out["energy_description"] = view.header.energy.clone().into();
        out["sort"] = serde_json::to_value(view.sort)?;
        out["filter"] = (!view.filter.is_empty())
            .then(|| view.filter.clone())
            .into();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let width = if std::io::stdout().is_terminal() {
        ratatui::crossterm::terminal::size().map_or(120, |(w, _)| w)
    } else {
        120
    };
    let mut buf = Buffer::empty(Rect::new(0, 0, width, render::full_height(view)));
    render::render(view, buf.area, &mut buf);
    for line in render::buffer_lines(&buf) {
        println!("{line}");
    }
    Ok(())
}
