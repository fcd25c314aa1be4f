//! The help screen (`?`): what every column means, the keys, and the header's energy and
//! wake-up lines whole (the main screen cuts them to the width). Drawn in place of the
//! tables; the same key, or Esc, goes back. At 80 × 24 the columns and the keys fit.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::columns::Col;
use super::render::wakeup_line;
use super::view::View;

/// The keys and what they do, as the help lists them.
const KEYS: [(&str, &str); 5] = [
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
        "freeze the display while measuring goes on (again: the latest)",
    ),
    ("?", "this help (again, or Esc: back)"),
    ("q, Ctrl-C", "quit (Esc too, when no filter is set)"),
];

/// The help's lines for a screen `width` wide: a heading, a line per column and for the
/// idle row, the keys, the header's sentences. An entry's meaning wraps under itself.
pub fn lines(view: &View, width: u16) -> Vec<Line<'static>> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let name_w = Col::ALL
        .iter()
        .map(|c| c.title().chars().count())
        .max()
        .unwrap_or(0);
    let entry = |name: &str, meaning: &str| -> Vec<Line<'static>> {
        let indent = name_w + 2;
        hanging(meaning, (width as usize).saturating_sub(indent).max(20))
            .into_iter()
            .enumerate()
            .map(|(i, part)| {
                let head = if i == 0 { name } else { "" };
                Line::raw(format!("{head:<name_w$}  {part}"))
            })
            .collect()
    };
    let mut out = vec![Line::styled(
        "powerlens top: the columns (all of them in docs/TOP.md)",
        bold,
    )];
    out.extend(entry(
        "[idle]",
        "the idle (baseline) share of the node's power, charged to no process",
    ));
    for c in Col::ALL {
        out.extend(entry(c.title(), c.meaning()));
    }
    out.push(Line::raw(
        "Narrow terminals leave out the causes, then UNREC/s and IDLE WK/s, WAKE/s, CPU %.",
    ));
    out.push(Line::raw(""));
    out.push(Line::styled("Keys", bold));
    for (key, what) in KEYS {
        out.extend(entry(key, what));
    }
    out.push(Line::raw(""));
    out.push(Line::styled("The header, whole", bold));
    out.push(Line::raw(view.header.energy.clone()));
    if let Some(s) = view.shown() {
        out.push(Line::raw(wakeup_line(s)));
    }
    out
}

/// `text` in lines of at most `width` characters, broken between words.
fn hanging(text: &str, width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let needed = line.chars().count() + 1 + word.chars().count();
        if !line.is_empty() && needed > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push(line);
    out
}

pub fn render(view: &View, area: Rect, buf: &mut Buffer) {
    Paragraph::new(lines(view, area.width))
        .wrap(Wrap { trim: false })
        .render(area, buf);
}
