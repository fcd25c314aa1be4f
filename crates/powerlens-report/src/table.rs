//! Aligned text tables for the terminal: left-aligned text, right-aligned numbers.

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
        let columns = self
            .headers
            .len()
            .max(self.rows.iter().map(Vec::len).max().unwrap_or(0));
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                std::iter::once(&self.headers)
                    .chain(&self.rows)
                    .map(|r| cell(r, c).chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric: Vec<bool> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| cell(r, c))
                    .filter(|s| !s.is_empty())
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

fn cell(row: &[String], c: usize) -> &str {
    row.get(c).map(String::as_str).unwrap_or("")
}

fn looks_numeric(s: &str) -> bool {
    s.trim_start_matches(['+', '-', '±', '~'])
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit())
}

/// A CSV field, quoted when it holds a comma, a quote or a newline (RFC 4180).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Formats a value with `significant` significant digits, without exponent for the
/// magnitudes powerlens prints (µJ to MJ).
pub fn sig(value: f64, significant: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (significant as i32 - 1 - magnitude).max(0) as usize;
    format!("{value:.decimals$}")
}

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
    fn significant_digits() {
        assert_eq!(sig(43186.848, 4), "43187");
        assert_eq!(sig(1.23456, 4), "1.235");
        assert_eq!(sig(0.0012345, 3), "0.00123");
        assert_eq!(sig(0.0, 3), "0");
        assert_eq!(precise(43186.848), "43186.848");
        assert_eq!(precise(209.0), "209");
        assert_eq!(precise(0.0012345), "0.001234");
    }
}
