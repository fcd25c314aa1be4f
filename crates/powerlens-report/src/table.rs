//! Aligned text tables for the terminal: left-aligned text, right-aligned numbers.

use crate::names::{elide_middle, name_widths, NameFit};

/// A table under construction.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders with two spaces between columns; a column is right-aligned when every
    /// non-empty cell in it starts like a number.
    pub fn render(&self) -> String {
        let widths = self.widths();
        let columns = widths.len();
        let numeric: Vec<bool> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| cell(r, c))
                    .filter(|s| !s.is_empty() && *s != NOT_AVAILABLE)
                    .all(looks_numeric)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let line: Vec<String> = (0..columns)
                .map(|c| {
                    let text = cell(row, c);
                    let pad = widths[c] - text.chars().count();
                    if numeric[c] {
                        format!("{}{text}", " ".repeat(pad))
                    } else {
                        format!("{text}{}", " ".repeat(pad))
                    }
                })
                .collect();
            out.push_str(line.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

impl Table {
    /// Each column's width: its widest cell, header included.
    fn widths(&self) -> Vec<usize> {
        let columns = self
            .headers
            .len()
            .max(self.rows.iter().map(Vec::len).max().unwrap_or(0));
        (0..columns)
            .map(|c| {
                std::iter::once(&self.headers)
                    .chain(&self.rows)
                    .map(|r| cell(r, c).chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// [`Table::render`] with the cells of the `names` columns (function names, stacks)
    /// elided in the middle to fit `fit` ([`crate::names`]).
    pub fn render_fitting(&self, names: &[usize], fit: NameFit) -> String {
        let caps = name_widths(fit, &self.widths(), names);
        if caps.iter().all(Option::is_none) {
            return self.render();
        }
        let mut fitted = self.clone();
        for row in &mut fitted.rows {
            for (cell, cap) in row.iter_mut().zip(&caps) {
                if let Some(cap) = cap {
                    *cell = elide_middle(cell, *cap);
                }
            }
        }
        fitted.render()
    }
}

fn cell(row: &[String], c: usize) -> &str {
    row.get(c).map(String::as_str).unwrap_or("")
}

/// What an unavailable cell reads where a blank could pass for zero; the table's caller
/// prints the reason. It does not make a number column text (left-aligned).
pub const NOT_AVAILABLE: &str = "n/a";

fn looks_numeric(s: &str) -> bool {
    s.trim_start_matches(['+', '-', '±', '~'])
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit())
}

/// A CSV field, quoted when it holds a comma, a quote or a newline (RFC 4180).
/// A Unix time as `YYYY-MM-DD HH:MM` in UTC (the date of a saved result), from the civil
/// calendar's day count; times before 1970 or not finite print as `-`.
pub fn utc_minute(unix_s: f64) -> String {
    if !unix_s.is_finite() || unix_s < 0.0 {
        return "-".into();
    }
    let secs = unix_s as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a proleptic Gregorian date, in 400-year eras of 146,097
    // days counted from 0000-03-01 (so that the leap day ends a year).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60
    )
}

pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub use powerlens_core::figures::sig;

/// Up to three decimals, trailing zeros trimmed, for values of 1 and above (joules and
/// seconds as users publish them: 43186.848); significant digits below 1.
pub fn precise(value: f64) -> String {
    if value.abs() < 1.0 {
        return sig(value, 4);
    }
    let s = format!("{value:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_text_left_and_numbers_right() {
        let mut t = Table::new(["name", "value"]);
        t.row(["a", "1.5"]).row(["longer", "12.25"]);
        assert_eq!(t.render(), "name    value\na         1.5\nlonger  12.25\n");
    }

    #[test]
    fn precise_digits() {
        assert_eq!(precise(43186.848), "43186.848");
        assert_eq!(precise(209.0), "209");
        assert_eq!(precise(0.0012345), "0.001234");
    }

    #[test]
    fn utc_minutes_by_hand() {
        assert_eq!(utc_minute(0.0), "1970-01-01 00:00");
        // 2000-02-29 (a leap day of a year divisible by 400) 12:34:56 UTC.
        assert_eq!(utc_minute(951_827_696.0), "2000-02-29 12:34");
        assert_eq!(utc_minute(1_795_996_800.0), "2026-11-30 00:00");
        assert_eq!(utc_minute(f64::NAN), "-");
    }
}
