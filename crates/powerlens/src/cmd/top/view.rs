//! What `top` shows and how the keys change it: the interval on display (the latest, or the
//! one the display was frozen on), the sort order and the name filter. No terminal here:
//! the event loop feeds keys and intervals in, the renderer reads the state out.

use std::time::Duration;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::snapshot::{ProcessRow, Snapshot};

/// The process table's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    Power,
    Cpu,
    Wakeups,
    IdleWakeups,
    Name,
}

impl SortKey {
    /// In the order Tab (→) cycles through, which is the columns' order.
    pub const ALL: [SortKey; 5] = [
        SortKey::Power,
        SortKey::Cpu,
        SortKey::Wakeups,
        SortKey::IdleWakeups,
        SortKey::Name,
    ];

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Power => "power",
            SortKey::Cpu => "CPU",
            SortKey::Wakeups => "wake-ups",
            SortKey::IdleWakeups => "idle wake-ups",
            SortKey::Name => "name",
        }
    }

    fn step(self, by: isize) -> SortKey {
        let n = SortKey::ALL.len() as isize;
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0) as isize;
        SortKey::ALL[(i + by).rem_euclid(n) as usize]
    }

    /// Most first for figures, alphabetical for names; ties by power, then pid.
    fn compare(self, a: &ProcessRow, b: &ProcessRow) -> std::cmp::Ordering {
        let desc = |x: Option<f64>, y: Option<f64>| {
            // Unavailable (reduced mode) sorts last and equal.
            y.unwrap_or(f64::NEG_INFINITY)
                .total_cmp(&x.unwrap_or(f64::NEG_INFINITY))
        };
        let primary = match self {
            SortKey::Power => desc(Some(a.power_w), Some(b.power_w)),
            SortKey::Cpu => desc(Some(a.cpu_pct), Some(b.cpu_pct)),
            SortKey::Wakeups => desc(
                a.wakeups_per_s.map(|w| w.total),
                b.wakeups_per_s.map(|w| w.total),
            ),
            SortKey::IdleWakeups => desc(a.idle_wakeups_per_s, b.idle_wakeups_per_s),
            SortKey::Name => a.comm.to_lowercase().cmp(&b.comm.to_lowercase()),
        };
        primary
            .then(desc(Some(a.power_w), Some(b.power_w)))
            .then(a.pid.cmp(&b.pid))
    }
}

/// What the session says of itself once, at the start.
#[derive(Debug, Clone)]
pub struct SessionHeader {
    pub interval: Duration,
    /// The meter's own line: what measures energy, and why not something better.
    pub energy: String,
}

/// What a key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Quit,
    /// The display changed: draw again.
    Changed,
    Ignored,
}

#[derive(Debug)]
pub struct View {
    pub header: SessionHeader,
    /// The interval on display.
    shown: Option<Snapshot>,
    /// While frozen: the latest interval measured, shown when the display thaws.
    latest: Option<Snapshot>,
    pub sort: SortKey,
    /// Case-insensitive part of a process name; empty: every process.
    pub filter: String,
    /// Keys go to the filter's text (after `/`).
    pub editing_filter: bool,
    pub frozen: bool,
    /// No key help (a one-shot print, not an interactive view).
    pub once: bool,
    /// The help screen (`?`) is shown instead of the tables.
    pub help: bool,
}

impl View {
    pub fn new(header: SessionHeader) -> View {
        View {
            header,
            shown: None,
            latest: None,
            sort: SortKey::Power,
            filter: String::new(),
            editing_filter: false,
            frozen: false,
            once: false,
            help: false,
        }
    }

    /// A new interval: on display at once, or kept for when the display thaws.
    pub fn update(&mut self, snapshot: Snapshot) {
        if self.frozen {
            self.latest = Some(snapshot);
        } else {
            self.shown = Some(snapshot);
        }
    }

    pub fn shown(&self) -> Option<&Snapshot> {
        self.shown.as_ref()
    }

    /// The number of the latest interval measured (beyond the shown one while frozen).
    pub fn latest_interval(&self) -> Option<u64> {
        self.latest
            .as_ref()
            .or(self.shown.as_ref())
            .map(|s| s.interval)
    }

    /// The shown interval's processes that pass the filter, in the sort order.
    pub fn rows(&self) -> Vec<&ProcessRow> {
        let Some(s) = &self.shown else {
            return Vec::new();
        };
        let filter = self.filter.to_lowercase();
        let mut rows: Vec<&ProcessRow> = s
            .processes
            .iter()
            .filter(|p| filter.is_empty() || p.comm.to_lowercase().contains(&filter))
            .collect();
        rows.sort_by(|a, b| self.sort.compare(a, b));
        rows
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> Outcome {
        if key.kind == KeyEventKind::Release {
            return Outcome::Ignored;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            return Outcome::Quit;
        }
        if self.editing_filter {
            return self.edit_filter(key, ctrl);
        }
        match key.code {
            KeyCode::Char('q') => Outcome::Quit,
            KeyCode::Char('?') => {
                self.help = !self.help;
                Outcome::Changed
            }
            // Esc closes the help before it clears a filter or quits.
            KeyCode::Esc if self.help => {
                self.help = false;
                Outcome::Changed
            }
            KeyCode::Esc if self.filter.is_empty() => Outcome::Quit,
            KeyCode::Esc => {
                self.filter.clear();
                Outcome::Changed
            }
            KeyCode::Char('/') => {
                self.editing_filter = true;
                Outcome::Changed
            }
            KeyCode::Char(' ') | KeyCode::Char('f') => {
                self.toggle_freeze();
                Outcome::Changed
            }
            KeyCode::Tab | KeyCode::Right => self.sort_by(self.sort.step(1)),
            KeyCode::BackTab | KeyCode::Left => self.sort_by(self.sort.step(-1)),
            KeyCode::Char(c) if !ctrl => match c.to_ascii_lowercase() {
                'p' => self.sort_by(SortKey::Power),
                'c' => self.sort_by(SortKey::Cpu),
                'w' => self.sort_by(SortKey::Wakeups),
                'i' => self.sort_by(SortKey::IdleWakeups),
                'n' => self.sort_by(SortKey::Name),
                _ => Outcome::Ignored,
            },
            _ => Outcome::Ignored,
        }
    }

    fn edit_filter(&mut self, key: KeyEvent, ctrl: bool) -> Outcome {
        match key.code {
            KeyCode::Esc => {
                self.filter.clear();
                self.editing_filter = false;
            }
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char('u') if ctrl => self.filter.clear(),
            KeyCode::Char(c) if !ctrl => self.filter.push(c),
            _ => return Outcome::Ignored,
        }
        Outcome::Changed
    }

    fn sort_by(&mut self, key: SortKey) -> Outcome {
        self.sort = key;
        Outcome::Changed
    }

    /// Freezing keeps the shown interval; thawing shows the latest one measured meanwhile.
    fn toggle_freeze(&mut self) {
        self.frozen = !self.frozen;
        if !self.frozen {
            if let Some(latest) = self.latest.take() {
                self.shown = Some(latest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::top::render::tests::snapshot;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn pids(v: &View) -> Vec<u32> {
        v.rows().iter().map(|r| r.pid).collect()
    }

    fn view() -> View {
        let mut v = View::new(SessionHeader {
            interval: Duration::from_secs(1),
            energy: "energy: test".into(),
        });
        v.update(snapshot(1, true));
        v
    }

    /// The test snapshot's processes (render::tests::snapshot): spin 10 (most power and
    /// CPU), sleepy 20 (most wake-ups), irqbalance 30 (most idle wake-ups), a 40.
    #[test]
    fn keys_sort_each_column_its_way() {
        let mut v = view();
        assert_eq!(pids(&v), [10, 20, 30, 40], "power, most first");
        for (key, order) in [
            ('c', [10, 20, 30, 40]),
            ('w', [20, 30, 10, 40]),
            ('i', [30, 20, 10, 40]),
            ('n', [40, 30, 20, 10]),
            ('p', [10, 20, 30, 40]),
        ] {
            assert_eq!(v.handle_key(press(KeyCode::Char(key))), Outcome::Changed);
            assert_eq!(pids(&v), order, "after {key}");
        }
        assert_eq!(v.handle_key(press(KeyCode::Tab)), Outcome::Changed);
        assert_eq!(v.sort, SortKey::Cpu);
        v.handle_key(press(KeyCode::Left));
        v.handle_key(press(KeyCode::Left));
        assert_eq!(v.sort, SortKey::Name, "← wraps around");
        assert_eq!(v.handle_key(press(KeyCode::Char('z'))), Outcome::Ignored);
    }

    /// Without tracing the wake-up figures are unknown: sorting by them falls back to
    /// power, it does not rank unknowns as zeros among figures.
    #[test]
    fn sorting_by_unavailable_wakeups_keeps_the_power_order() {
        let mut v = view();
        v.update(snapshot(2, false));
        v.handle_key(press(KeyCode::Char('w')));
        assert_eq!(pids(&v), [10, 20, 30, 40]);
    }

    #[test]
    fn the_filter_is_typed_after_slash_and_esc_clears_it() {
        let mut v = view();
        v.handle_key(press(KeyCode::Char('/')));
        for c in "SLE".chars() {
            v.handle_key(press(KeyCode::Char(c)));
        }
        assert_eq!(pids(&v), [20], "case-insensitive part of the name");
        // While typing, q is text, not quit.
        assert_eq!(v.handle_key(press(KeyCode::Char('q'))), Outcome::Changed);
        assert!(pids(&v).is_empty());
        v.handle_key(press(KeyCode::Backspace));
        v.handle_key(press(KeyCode::Enter));
        assert!(!v.editing_filter);
        assert_eq!(v.filter, "SLE");
        assert_eq!(pids(&v), [20]);
        assert_eq!(
            v.handle_key(press(KeyCode::Esc)),
            Outcome::Changed,
            "clears"
        );
        assert_eq!(pids(&v).len(), 4);
        assert_eq!(
            v.handle_key(press(KeyCode::Esc)),
            Outcome::Quit,
            "then quits"
        );
        v.handle_key(press(KeyCode::Char('/')));
        v.handle_key(press(KeyCode::Char('x')));
        v.handle_key(press(KeyCode::Esc));
        assert!(!v.editing_filter && v.filter.is_empty());
    }

    #[test]
    fn freezing_keeps_the_interval_and_thawing_shows_the_latest() {
        let mut v = view();
        v.handle_key(press(KeyCode::Char(' ')));
        assert!(v.frozen);
        v.update(snapshot(2, true));
        v.update(snapshot(3, true));
        assert_eq!(v.shown().unwrap().interval, 1);
        assert_eq!(v.latest_interval(), Some(3));
        v.handle_key(press(KeyCode::Char('n')));
        assert_eq!(pids(&v), [40, 30, 20, 10], "a frozen interval still sorts");
        v.handle_key(press(KeyCode::Char('f')));
        assert!(!v.frozen);
        assert_eq!(v.shown().unwrap().interval, 3);
    }

    #[test]
    fn q_esc_and_ctrl_c_quit() {
        let mut v = view();
        assert_eq!(v.handle_key(press(KeyCode::Char('q'))), Outcome::Quit);
        assert_eq!(v.handle_key(press(KeyCode::Esc)), Outcome::Quit);
        v.handle_key(press(KeyCode::Char('/')));
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(v.handle_key(ctrl_c), Outcome::Quit, "even while typing");
    }
}
