//! Drawing `top`: a pure function of the view onto a ratatui buffer (no terminal, no I/O),
//! so that tests draw on a `TestBackend` and `--once` prints the same screen as text.
//!
//! From the top: the status line, the node's power and its provenance, the energy source
//! and the wake-up source; the process table (the idle share first, as its own row); each
//! CPU's idle-state residency; the keys.

use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Widget};

use powerlens_core::monitor::CpuResidency;
use powerlens_core::provenance::Provenance;

use super::columns::{columns_for, watts, Col};
use super::fit::elide_fields;
use super::snapshot::Snapshot;
use super::view::View;

const HEADER_LINES: u16 = 4;
/// The process table's header and the idle row, plus at least two processes.
const TABLE_MIN: u16 = 4;

/// The view as a widget: `frame.render_widget(Screen(&view), frame.area())`.
pub struct Screen<'a>(pub &'a View);

impl Widget for Screen<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        render(self.0, area, buf);
    }
}

/// The height that shows every process and CPU (for `--once`).
pub fn full_height(view: &View) -> u16 {
    let rows = view.rows().len() as u16;
    let cpus = view.shown().map_or(0, |s| s.cpus.len()) as u16;
    HEADER_LINES + 2 + rows.max(1) + residency_height(cpus) + u16::from(!view.once)
}

fn residency_height(cpus: u16) -> u16 {
    // A title line, the table's header, a row per CPU; one line saying why when none.
    if cpus == 0 {
        1
    } else {
        cpus + 2
    }
}

pub fn render(view: &View, area: Rect, buf: &mut Buffer) {
    let mut rest = area;
    let mut take = |h: u16| {
        let h = h.min(rest.height);
        let part = Rect { height: h, ..rest };
        rest.y += h;
        rest.height -= h;
        part
    };
    let help_h = u16::from(!view.once);
    if view.help {
        let body = take(area.height.saturating_sub(help_h));
        super::help::render(view, body, buf);
        Paragraph::new(help_line(view, area.width)).render(take(help_h), buf);
        return;
    }
    let header = take(HEADER_LINES);
    Paragraph::new(header_lines(view, area.width)).render(header, buf);
    let cpus = view.shown().map_or(0, |s| s.cpus.len()) as u16;
    let below = area.height.saturating_sub(HEADER_LINES + help_h);
    let res_h = residency_height(cpus).min(below.saturating_sub(TABLE_MIN));
    let table = take(below - res_h);
    render_processes(view, table, buf);
    render_residency(view, take(res_h), buf);
    if help_h > 0 {
        Paragraph::new(help_line(view, area.width)).render(take(1), buf);
    }
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

fn header_lines(view: &View, width: u16) -> Vec<Line<'static>> {
    // The energy and wake-up sentences lose whole fields to fit; `?` shows them whole.
    let fit = |text: String| Line::raw(elide_fields(&text, width as usize));
    let mut status = vec![Span::styled("powerlens top", bold())];
    match view.shown() {
        Some(s) => status.push(Span::raw(format!(
            "  interval #{} ({:.2} s)",
            s.interval, s.elapsed_s
        ))),
        None => status.push(Span::raw(format!(
            "  measuring the first interval ({:.2} s)…",
            view.header.interval.as_secs_f64()
        ))),
    }
    status.push(Span::raw(format!("  sort: {}", view.sort.label())));
    if !view.filter.is_empty() || view.editing_filter {
        status.push(Span::raw(format!("  filter: \"{}\"", view.filter)));
    }
    if view.frozen {
        status.push(Span::raw("  "));
        let latest = view.latest_interval().unwrap_or(0);
        status.push(Span::styled(
            format!(" FROZEN (latest #{latest}: space resumes) "),
            bold().add_modifier(Modifier::REVERSED),
        ));
    }
    let mut lines = vec![Line::from(status)];
    let Some(s) = view.shown() else {
        lines.push(fit(view.header.energy.clone()));
        return lines;
    };
    lines.push(node_line(s));
    lines.push(fit(view.header.energy.clone()));
    lines.push(fit(wakeup_line(s)));
    lines
}

/// `node 31.000 W ESTIMATED (model) = idle 27.300 W + processes 3.700 W`.
fn node_line(s: &Snapshot) -> Line<'static> {
    let processes_w: f64 = s.processes.iter().map(|p| p.power_w).sum();
    let provenance = match &s.energy {
        Provenance::Estimated { model, .. } => Span::styled(format!("ESTIMATED ({model})"), bold()),
        other => Span::raw(other.label()),
    };
    Line::from(vec![
        Span::styled(format!("node {} W", watts(s.node_power_w)), bold()),
        Span::raw(" "),
        provenance,
        Span::raw(format!(
            " = idle {} W + processes {} W",
            watts(s.idle_power_w),
            watts(processes_w)
        )),
    ])
}

/// Where the wake-up columns come from (or why they are n/a, and the fix), lost records
/// (the last interval's rate and the total) and notes.
pub(super) fn wakeup_line(s: &Snapshot) -> String {
    let mut text = match &s.wakeups_unavailable {
        None => "wake-ups: traced (sched/irq/timer tracepoints)".to_string(),
        // The fix first: it is what survives when the line is cut to the width.
        Some(reason) => match &s.wakeups_fix {
            Some(fix) => format!("wake-ups n/a: {fix}; REDUCED (CPU time from /proc): {reason}"),
            None => format!("wake-ups n/a: REDUCED (CPU time from /proc): {reason}"),
        },
    };
    if let Some(lost) = s.lost_records.filter(|n| *n > 0) {
        let rate = s.lost_records_per_s.unwrap_or(0.0);
        text.push_str(&format!(
            "; trace records lost {rate:.0}/s ({lost} in all; raise --buffer-pages)"
        ));
    }
    for note in &s.notes {
        text.push_str("; ");
        text.push_str(note);
    }
    text
}

fn right(text: String) -> Cell<'static> {
    Cell::from(Text::from(text).alignment(Alignment::Right))
}

fn cell(col: Col, text: String) -> Cell<'static> {
    match col {
        Col::Command => Cell::from(text),
        _ => right(text),
    }
}

fn render_processes(view: &View, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let cols = columns_for(area.width);
    let fixed: u16 = cols
        .iter()
        .filter(|c| **c != Col::Command)
        .map(|c| c.width() + 1)
        .sum();
    // The command takes what the other columns leave (columns_for keeps a whole name
    // where it can; a terminal narrower than that still shows 8 characters of it).
    let command_w = area.width.saturating_sub(fixed).max(8);
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|c| match c {
            Col::Command => Constraint::Length(command_w),
            c => Constraint::Length(c.width()),
        })
        .collect();
    let header = Row::new(cols.iter().map(|c| {
        let style = if c.sorted_by() == Some(view.sort) {
            bold().add_modifier(Modifier::UNDERLINED)
        } else {
            bold()
        };
        cell(*c, c.title().to_string()).style(style)
    }))
    .style(Style::new().add_modifier(Modifier::REVERSED));

    let mut rows = Vec::new();
    // A line across the columns, under the command (past the PID), below the table's rows.
    let mut note = None;
    if let Some(s) = view.shown() {
        rows.push(Row::new(cols.iter().map(|c| match c {
            Col::Command => Cell::from("[idle]"),
            Col::Power => right(watts(s.idle_power_w)),
            _ => Cell::from(""),
        })));
        let processes = view.rows();
        // The header and the idle row take two lines.
        let slots = area.height.saturating_sub(2) as usize;
        let (shown, more) = if processes.len() > slots {
            (
                slots.saturating_sub(1),
                processes.len() - slots.saturating_sub(1),
            )
        } else {
            (processes.len(), 0)
        };
        for p in &processes[..shown] {
            rows.push(Row::new(cols.iter().map(|c| cell(*c, c.text(p)))));
        }
        if more > 0 {
            note = Some(format!("… {more} more processes (/ filters by name)"));
        } else if processes.is_empty() && !view.filter.is_empty() {
            note = Some(format!("no process name contains \"{}\"", view.filter));
        }
    }
    let below = rows.len() as u16 + 1;
    Table::new(rows, widths).header(header).render(area, buf);
    if let Some(text) = note {
        let x = Col::Pid.width() + 1;
        note_line(text, area, x, below, buf);
    }
}

/// One line of text at (`x`, `y`) within `area`, if it fits.
fn note_line(text: String, area: Rect, x: u16, y: u16, buf: &mut Buffer) {
    if y < area.height && x < area.width {
        let at = Rect::new(area.x + x, area.y + y, area.width - x, 1);
        Paragraph::new(text).render(at, buf);
    }
}

fn render_residency(view: &View, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let Some(s) = view.shown() else {
        return;
    };
    if s.cpus.is_empty() {
        let why = s
            .cpus_unavailable
            .as_deref()
            .unwrap_or(super::session::NO_CPUIDLE);
        Paragraph::new(format!("idle-state residency: n/a ({why})")).render(area, buf);
        return;
    }
    let title = Rect { height: 1, ..area };
    Paragraph::new(Line::styled(
        "idle-state residency, % of the interval (cpuidle sysfs)",
        bold(),
    ))
    .render(title, buf);
    let table = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    let mut states: Vec<&str> = Vec::new();
    for cpu in &s.cpus {
        for st in &cpu.states {
            if !states.contains(&st.state.as_str()) {
                states.push(&st.state);
            }
        }
    }
    let mut widths = vec![Constraint::Length(5)];
    widths.extend(
        states
            .iter()
            .map(|n| Constraint::Length(n.chars().count().max(6) as u16)),
    );
    widths.push(Constraint::Length(6));
    let mut header = vec![Cell::from("CPU")];
    header.extend(states.iter().map(|n| right(n.to_string())));
    header.push(right("active".into()));
    let slots = table.height.saturating_sub(1) as usize;
    let mut rows: Vec<Row> = Vec::new();
    let hidden = s.cpus.len().saturating_sub(slots);
    let visible = if hidden > 0 {
        slots.saturating_sub(1)
    } else {
        s.cpus.len()
    };
    for cpu in &s.cpus[..visible] {
        rows.push(residency_row(cpu, &states));
    }
    let below = rows.len() as u16 + 1;
    Table::new(rows, widths)
        .header(Row::new(header).style(bold()))
        .render(table, buf);
    if hidden > 0 {
        let text = format!(
            "… {} more CPUs (a taller terminal shows them)",
            s.cpus.len() - visible
        );
        note_line(text, table, 0, below, buf);
    }
}

fn residency_row(cpu: &CpuResidency, states: &[&str]) -> Row<'static> {
    let pct = |p: Option<f64>| p.map_or_else(|| "n/a".to_string(), |p| format!("{p:.1}"));
    let mut cells = vec![Cell::from(format!("cpu{}", cpu.cpu))];
    for name in states {
        let st = cpu.states.iter().find(|s| s.state == *name);
        cells.push(right(pct(st.and_then(|s| s.residency_pct))));
    }
    cells.push(right(pct(cpu.active_pct)));
    Row::new(cells)
}

/// The keys, on the last line: the longest wording that fits, always with `? help` and
/// `q quit`.
fn help_line(view: &View, width: u16) -> Line<'static> {
    let text = if view.editing_filter {
        format!(
            "filter: {}▏  Enter keeps it · Esc clears it · Backspace, Ctrl-U erase",
            view.filter
        )
    } else if view.help {
        "? or Esc closes the help · q quit".to_string()
    } else {
        const WORDINGS: [&str; 3] = [
            "sort: p power c CPU w wake-ups i idle n name (Tab ←→) · / filter · space freeze · ? help · q quit",
            "sort: p c w i n (Tab ←→) · / filter · space freeze · ? help · q quit",
            "p c w i n sort · / filter · ? help · q quit",
        ];
        WORDINGS
            .iter()
            .find(|w| w.chars().count() <= width as usize)
            .unwrap_or(&WORDINGS[WORDINGS.len() - 1])
            .to_string()
    };
    Line::styled(text, Style::new().add_modifier(Modifier::REVERSED))
}

/// A buffer's lines as text, trailing blanks trimmed (for `--once` and the tests).
pub fn buffer_lines(buf: &Buffer) -> Vec<String> {
    let area = buf.area;
    (area.top()..area.bottom())
        .map(|y| {
            let mut line = String::new();
            for x in area.left()..area.right() {
                line.push_str(buf[(x, y)].symbol());
            }
            line.trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use powerlens_core::monitor::{interval_residency, IdleStateTime, IntervalReport};
    use powerlens_core::sched::analysis::WakeupCauses;
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::Terminal;

    use super::*;
    use crate::cmd::top::snapshot::process_rows;
    use crate::cmd::top::snapshot::tests::process;
    use crate::cmd::top::view::SessionHeader;

    /// Interval `n` of one second: 31 W on the node, 27.3 W of it idle; spin (3 W, one CPU,
    /// 1 timer wake-up), sleepy (0.5 W, 5% CPU, 1000 timer wake-ups of which 400 ended an
    /// idle), irqbalance (0.2 W, 100 irq + 50 thread wake-ups, 600 idle) and `a` (ran
    /// nothing). cpu0 spent 1% polling and 80% halted; cpu1 60% halted.
    pub fn snapshot(n: u64, traced: bool) -> Snapshot {
        let w = |thread, timer, irq| WakeupCauses {
            thread,
            timer,
            irq,
            ..WakeupCauses::default()
        };
        let report = IntervalReport {
            elapsed_s: 1.0,
            traced_s: 1.0,
            node_j: 31.0,
            idle_j: 27.3,
            processes: vec![
                (process(10, "spin", 1_000_000_000, w(0, 1, 0), 0), 3.0),
                (
                    powerlens_core::monitor::ProcessInterval {
                        unrecorded_wakeups: 200,
                        ..process(20, "sleepy", 50_000_000, w(0, 1000, 0), 400)
                    },
                    0.5,
                ),
                (
                    process(30, "irqbalance", 10_000_000, w(50, 0, 100), 600),
                    0.2,
                ),
                (process(40, "a", 0, w(0, 0, 0), 0), 0.0),
            ],
        };
        let t = |cpu, state: &str, seconds| IdleStateTime {
            cpu,
            state: state.into(),
            seconds,
        };
        let before = [
            t(0, "POLL", 1.0),
            t(0, "haltpoll", 5.0),
            t(1, "POLL", 0.0),
            t(1, "haltpoll", 2.0),
        ];
        let after = [
            t(0, "POLL", 1.01),
            t(0, "haltpoll", 5.8),
            t(1, "POLL", 0.0),
            t(1, "haltpoll", 2.6),
        ];
        Snapshot {
            interval: n,
            elapsed_s: report.elapsed_s,
            node_power_w: report.node_j,
            idle_power_w: report.idle_j,
            energy: Provenance::estimated("default-linear", "27.3 W idle"),
            wakeups_unavailable: (!traced).then(|| "no tracing for the test".to_string()),
            wakeups_fix: (!traced).then(|| "run as root or with CAP_PERFMON for them".to_string()),
            lost_records: traced.then_some(0),
            lost_records_per_s: traced.then_some(0.0),
            processes: process_rows(&report, traced),
            cpus: interval_residency(&before, &after, 1.0),
            cpus_unavailable: None,
            notes: Vec::new(),
        }
    }

    fn view(traced: bool) -> View {
        let mut v = View::new(SessionHeader {
            interval: Duration::from_secs(1),
            energy: "energy: ESTIMATED by the power model default-linear — no meter can be read"
                .into(),
        });
        v.update(snapshot(1, traced));
        v
    }

    fn draw(v: &View, width: u16, height: u16) -> (Vec<String>, Buffer) {
        let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
        t.draw(|f| f.render_widget(Screen(v), f.area())).unwrap();
        let buf = t.backend().buffer().clone();
        (buffer_lines(&buf), buf)
    }

    /// The process rows' commands, top to bottom, with the rest of each line split in words.
    fn table(lines: &[String]) -> Vec<Vec<String>> {
        let start = lines.iter().position(|l| l.contains("COMMAND")).unwrap() + 1;
        lines[start..]
            .iter()
            .take_while(|l| !l.trim().is_empty() && !l.starts_with("idle-state"))
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    }

    fn key(v: &mut View, c: char) {
        v.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }

    #[test]
    fn the_screen_has_the_node_the_processes_their_wakeups_and_the_cpus() {
        let v = view(true);
        let (lines, _) = draw(&v, 120, 40);
        let screen = lines.join("\n");
        assert!(lines[0].contains("interval #1 (1.00 s)") && lines[0].contains("sort: power"));
        assert!(
            lines[1].contains(
                "node 31.00 W ESTIMATED (default-linear) = idle 27.30 W + processes 3.700 W"
            ),
            "{screen}"
        );
        assert!(lines[2].starts_with("energy: ESTIMATED"));
        assert!(lines[3].starts_with("wake-ups: traced"));
        let header: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(
            header,
            [
                "PID", "COMMAND", "POWER", "W", "CPU", "%", "WAKE/s", "thread", "timer", "irq",
                "ipi", "UNREC/s", "IDLE", "WK/s"
            ]
        );
        let rows = table(&lines);
        assert_eq!(
            rows[0],
            ["[idle]", "27.30"],
            "the idle share is a row of its own"
        );
        assert_eq!(
            rows[1],
            ["10", "spin", "3.000", "100.0", "1.0", "0.0", "1.0", "0.0", "0.0", "0.0", "0.0"]
        );
        assert_eq!(
            rows[2],
            [
                "20", "sleepy", "0.500", "5.0", "1000", "0.0", "1000", "0.0", "0.0", "200.0",
                "400.0"
            ],
            "the runs with no wake-up recorded are beside the idle wake-ups they explain"
        );
        assert_eq!(
            rows[3],
            [
                "30",
                "irqbalance",
                "0.200",
                "1.0",
                "150.0",
                "50.0",
                "0.0",
                "100.0",
                "0.0",
                "0.0",
                "600.0"
            ]
        );
        assert_eq!(rows.len(), 5);
        // Residency: hand-computed from the counters' deltas over 1 s.
        let cpu = |n: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(n))
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .unwrap()
        };
        assert!(screen.contains("idle-state residency, % of the interval (cpuidle sysfs)"));
        assert_eq!(cpu("CPU"), ["CPU", "POLL", "haltpoll", "active"]);
        assert_eq!(cpu("cpu0"), ["cpu0", "1.0", "80.0", "19.0"]);
        assert_eq!(cpu("cpu1"), ["cpu1", "0.0", "60.0", "40.0"]);
        assert!(
            lines[39].starts_with("sort: p power"),
            "the keys, last line"
        );
    }

    /// The sort column is underlined in the header and the rows follow it.
    #[test]
    fn sorting_reorders_the_rows_and_marks_the_column() {
        let mut v = view(true);
        let names = |v: &View| -> Vec<String> {
            table(&draw(v, 120, 40).0)[1..]
                .iter()
                .map(|r| r[1].clone())
                .collect()
        };
        assert_eq!(names(&v), ["spin", "sleepy", "irqbalance", "a"]);
        key(&mut v, 'w');
        assert_eq!(names(&v), ["sleepy", "irqbalance", "spin", "a"]);
        key(&mut v, 'i');
        assert_eq!(names(&v), ["irqbalance", "sleepy", "spin", "a"]);
        key(&mut v, 'n');
        assert_eq!(names(&v), ["a", "irqbalance", "sleepy", "spin"]);
        let (lines, buf) = draw(&v, 120, 40);
        assert!(lines[0].contains("sort: name"));
        let x = lines[4].find("COMMAND").unwrap() as u16;
        assert!(buf[(x, 4)].modifier.contains(Modifier::UNDERLINED));
        let p = lines[4].find("POWER").unwrap() as u16;
        assert!(!buf[(p, 4)].modifier.contains(Modifier::UNDERLINED));
    }

    #[test]
    fn the_filter_keeps_matching_rows_and_says_so() {
        let mut v = view(true);
        for c in "/irq".chars() {
            key(&mut v, c);
        }
        let (lines, _) = draw(&v, 120, 40);
        assert!(lines[0].contains("filter: \"irq\""));
        assert!(lines[39].starts_with("filter: irq▏"), "{}", lines[39]);
        let rows = table(&lines);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[1][1], "irqbalance");
        for c in "zz".chars() {
            key(&mut v, c);
        }
        let (lines, _) = draw(&v, 120, 40);
        assert!(lines
            .iter()
            .any(|l| l.contains("no process name contains \"irqzz\"")));
    }

    #[test]
    fn a_frozen_display_says_so_and_which_interval_is_latest() {
        let mut v = view(true);
        key(&mut v, ' ');
        v.update(snapshot(4, true));
        let (lines, buf) = draw(&v, 120, 40);
        assert!(lines[0].contains("interval #1"));
        assert!(lines[0].contains("FROZEN (latest #4: space resumes)"));
        let x = lines[0].find("FROZEN").unwrap() as u16;
        assert!(buf[(x, 0)].modifier.contains(Modifier::REVERSED));
        key(&mut v, ' ');
        let (lines, _) = draw(&v, 120, 40);
        assert!(lines[0].contains("interval #4") && !lines[0].contains("FROZEN"));
    }

    /// Without tracing, every wake-up cell is n/a and the reason is on screen: never 0.
    #[test]
    fn reduced_mode_shows_wakeups_as_unavailable_with_the_reason() {
        let v = view(false);
        let (lines, _) = draw(&v, 120, 40);
        assert_eq!(
            lines[3],
            "wake-ups n/a: run as root or with CAP_PERFMON for them; REDUCED (CPU time from /proc): no tracing for the test"
        );
        // Asked for with --reduced, the fix is to leave it out, not privileges.
        let mut asked = view(false);
        let mut s = snapshot(2, false);
        s.wakeups_unavailable = Some("procfs sampling was asked for (--reduced)".into());
        s.wakeups_fix = Some("leave out --reduced to trace them (root or CAP_PERFMON)".into());
        asked.update(s);
        let (asked_lines, _) = draw(&asked, 160, 40);
        assert_eq!(
            asked_lines[3],
            "wake-ups n/a: leave out --reduced to trace them (root or CAP_PERFMON); REDUCED (CPU time from /proc): procfs sampling was asked for (--reduced)"
        );
        // At 80 columns the fix stays, the reason goes (`?` shows it).
        let (asked_lines, _) = draw(&asked, 80, 24);
        assert_eq!(
            asked_lines[3],
            "wake-ups n/a: leave out --reduced to trace them (root or CAP_PERFMON); REDUCED …"
        );
        let rows = table(&lines);
        for r in &rows[1..] {
            assert_eq!(&r[4..], ["n/a"; 7], "{r:?}");
        }
        assert_eq!(rows[1][..4], ["10", "spin", "3.000", "100.0"]);
    }

    /// A measured meter is labelled as such, with no ESTIMATED anywhere.
    #[test]
    fn measured_energy_is_labelled_measured() {
        let mut v = view(true);
        v.header.energy = "energy: measured by rapl-powercap".into();
        let mut s = snapshot(2, true);
        s.energy = Provenance::Measured {
            source: "rapl-powercap".into(),
        };
        v.update(s);
        let (lines, _) = draw(&v, 120, 40);
        assert!(lines[1].starts_with("node 31.00 W measured (rapl-powercap) = idle"));
        assert!(!lines.join("\n").contains("ESTIMATED"));
    }

    /// Issue 29, point 7: at 80 × 24 the keys' line keeps `? help` and `q quit`, the
    /// command gets the width the columns leave (the causes go before a name is cut), and
    /// the energy line loses whole fields, never part of a word.
    #[test]
    fn at_80_by_24_the_footer_the_command_and_the_energy_line_fit() {
        let mut v = view(true);
        v.header.energy = "energy: ESTIMATED by the power model server-vcpu-linear (1.48 W idle + 2.76 W per busy CPU of the machine; chosen because a virtual machine) — no meter can be read".into();
        let mut s = snapshot(1, true);
        s.processes[0].comm = "a-fifteen-chars".into();
        v.update(s);
        let (lines, _) = draw(&v, 80, 24);
        assert!(lines.iter().all(|l| l.chars().count() <= 80));
        assert_eq!(
            lines[23],
            "sort: p c w i n (Tab ←→) · / filter · space freeze · ? help · q quit"
        );
        assert_eq!(
            lines[2],
            "energy: ESTIMATED by the power model server-vcpu-linear …"
        );
        let header: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(
            header,
            ["PID", "COMMAND", "POWER", "W", "CPU", "%", "WAKE/s", "UNREC/s", "IDLE", "WK/s"]
        );
        // The command column is 80 less the six other columns and the gaps around them
        // (7 + 8 + 6 + 7 + 8 + 9 and 6: 51): 29. From its start to the power column's end
        // (right-aligned): 29, a gap, 8.
        let power_end = lines[4].find("POWER W").unwrap() + "POWER W".len();
        assert_eq!(
            power_end - lines[4].find("COMMAND").unwrap(),
            29 + 1 + 8,
            "{}",
            lines[4]
        );
        assert!(
            lines.iter().any(|l| l.contains(" a-fifteen-chars ")),
            "{lines:?}"
        );
        // Wide enough, the long wording and every column.
        let (lines, _) = draw(&v, 120, 40);
        assert!(
            lines[39].starts_with("sort: p power c CPU") && lines[39].ends_with("? help · q quit")
        );
        assert!(lines[4].contains("thread") && lines[4].contains("IDLE WK/s"));
    }

    /// Issue 29, point 7: `?` shows what every column means and the header's lines whole;
    /// `?` again, or Esc, goes back (Esc does not quit from the help).
    #[test]
    fn question_mark_toggles_a_help_screen_explaining_every_column() {
        let mut v = view(true);
        key(&mut v, '?');
        let (lines, _) = draw(&v, 80, 24);
        let screen = lines.join("\n");
        assert!(screen.contains("powerlens top: the columns"), "{screen}");
        // At 80 × 24 every column and every key fits, each on a line of its own.
        assert!(
            lines.iter().any(|l| l.starts_with("q, Ctrl-C  quit")),
            "{screen}"
        );
        assert!(lines.iter().all(|l| l.chars().count() <= 80));
        for c in Col::ALL {
            assert!(
                lines.iter().any(|l| l.starts_with(c.title())
                    && l.contains(c.meaning().split(' ').next().unwrap())),
                "{} unexplained: {screen}",
                c.title()
            );
        }
        assert!(screen.contains("[idle]"));
        assert_eq!(lines[23], "? or Esc closes the help · q quit");
        assert_eq!(
            v.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)),
            crate::cmd::top::view::Outcome::Changed
        );
        let (lines, _) = draw(&v, 80, 24);
        assert!(lines[4].contains("COMMAND"), "{lines:?}");
        key(&mut v, '?');
        key(&mut v, '?');
        assert!(!v.help);
    }

    /// Issue 29, point 7: losses show as the last interval's rate and the total, so a
    /// frozen total no longer hides whether they go on.
    #[test]
    fn lost_records_show_as_a_rate_and_a_total() {
        let mut v = view(true);
        let mut s = snapshot(2, true);
        s.lost_records = Some(72363);
        s.lost_records_per_s = Some(120.0);
        v.update(s);
        let (lines, _) = draw(&v, 160, 40);
        assert!(
            lines[3].ends_with("; trace records lost 120/s (72363 in all; raise --buffer-pages)"),
            "{}",
            lines[3]
        );
    }

    /// At 60 columns the causes go first, then CPU and the wake-ups, never the power; a
    /// short terminal says how many rows and CPUs it could not show.
    #[test]
    fn narrow_and_short_terminals_keep_the_essentials() {
        let v = view(true);
        let (lines, _) = draw(&v, 60, 20);
        let header: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(
            header,
            ["PID", "COMMAND", "POWER", "W", "CPU", "%", "WAKE/s"]
        );
        let (lines, _) = draw(&v, 67, 20);
        assert_eq!(
            lines[4].split_whitespace().collect::<Vec<_>>(),
            ["PID", "COMMAND", "POWER", "W", "CPU", "%", "WAKE/s", "UNREC/s", "IDLE", "WK/s"],
            "the unrecorded wake-ups come with the idle ones"
        );
        let (lines, _) = draw(&v, 30, 20);
        assert_eq!(
            lines[4].split_whitespace().collect::<Vec<_>>(),
            ["PID", "COMMAND", "POWER", "W"]
        );
        // 12 lines: 4 of header, the help line, 7 between the table (4) and the CPUs (3).
        let (lines, _) = draw(&v, 120, 12);
        let rows = table(&lines);
        assert_eq!(rows[1][1], "spin");
        assert!(
            rows[2].join(" ").starts_with("… 3 more processes"),
            "{rows:?}"
        );
        assert!(
            lines.iter().any(|l| l.contains("… 2 more CPUs")),
            "{lines:?}"
        );
        // Smaller than the header: what fits, no panic.
        let (lines, _) = draw(&v, 10, 3);
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn before_the_first_interval_it_says_it_is_measuring() {
        let v = View::new(SessionHeader {
            interval: Duration::from_millis(500),
            energy: "energy: test".into(),
        });
        let (lines, _) = draw(&v, 100, 20);
        assert!(lines[0].contains("measuring the first interval (0.50 s)…"));
        assert_eq!(lines[1], "energy: test");
    }

    /// `--once`: no key help, every process and CPU fits the height it asks for.
    #[test]
    fn the_full_height_shows_everything() {
        let mut v = view(true);
        v.once = true;
        let h = full_height(&v);
        let (lines, _) = draw(&v, 120, h);
        assert_eq!(table(&lines).len(), 5);
        assert!(lines.last().unwrap().starts_with("cpu1"), "{lines:?}");
    }
}
