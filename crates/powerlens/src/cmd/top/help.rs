//! The help screen (`?`): what every column means, the header's energy and wake-up lines
//! whole (the main screen cuts them to the width), and the keys. Drawn in place of the
//! tables; the same key, or Esc, goes back.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::columns::Col;
use super::render::wakeup_line;
use super::view::View;

/// The keys and what they do, as the help lists them.
const KEYS: [(&str, &str); 6] = [
    (
        "p c w i n",
        "sort by power, CPU, wake-ups, idle wake-ups, name (Tab, ← → cycle)",
    ),
    (
        "/",
        "filter by process name (Enter keeps it, Esc clears it)",
    ),
    (
        "space, f",
        "freeze the display while measuring goes on (again: the latest interval)",
    ),
    ("?", "this help (again, or Esc: back)"),
    ("q, Ctrl-C", "quit (Esc too, when no filter is set)"),
    ("", "every column in full: docs/TOP.md"),
];

/// The help's lines: a heading, a line per column and for the idle row, the header's
/// sentences, the keys.
pub fn lines(view: &View) -> Vec<Line<'static>> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let name_w = Col::ALL
        .iter()
        .map(|c| c.title().chars().count())
        .max()
        .unwrap_or(0);
    let entry = |name: &str, meaning: &str| Line::raw(format!("{name:<name_w$}  {meaning}"));
    let mut out = vec![
        Line::styled("powerlens top: the columns", bold),
        entry(
            "[idle]",
            "the idle (baseline) share of the node's power, charged to no process",
        ),
    ];
    out.extend(Col::ALL.iter().map(|c| entry(c.title(), c.meaning())));
    out.push(Line::raw(
        "A narrow terminal leaves out the four causes first, then IDLE WK/s, WAKE/s and CPU %.",
    ));
    out.push(Line::raw(""));
    out.push(Line::styled("The header, whole", bold));
    out.push(Line::raw(view.header.energy.clone()));
    if let Some(s) = view.shown() {
        out.push(Line::raw(wakeup_line(s)));
    }
    out.push(Line::raw(""));
    out.push(Line::styled("Keys", bold));
    out.extend(KEYS.iter().map(|(k, what)| entry(k, what)));
    out
}

pub fn render(view: &View, area: Rect, buf: &mut Buffer) {
    Paragraph::new(lines(view))
        .wrap(Wrap { trim: false })
        .render(area, buf);
}
