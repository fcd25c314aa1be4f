//! Fitting a header line to the terminal's width by whole fields: a sentence such as the
//! meter's ("energy: ESTIMATED by the power model M (1.48 W idle + …) — no meter can be
//! read (…)") is cut before a field that does not fit — a parenthesis, a clause after
//! "; " or " — " — never inside a word. The help screen (`?`) shows the lines whole.

/// Where a field begins, at the top level of the parentheses.
const SEPARATORS: [&str; 3] = [" (", "; ", " — "];

/// What marks a line that was cut.
const MORE: &str = " …";

/// `text` within `width` characters: whole when it fits, else up to the last field
/// boundary that fits, followed by " …"; a first field longer than the line is cut at a
/// word (at a character only when one word is longer than the line).
pub fn elide_fields(text: &str, width: usize) -> String {
    let chars = |s: &str| s.chars().count();
    if chars(text) <= width {
        return text.to_string();
    }
    let room = width.saturating_sub(chars(MORE));
    let fits = |end: usize| chars(&text[..end]) <= room;
    let cut = field_boundaries(text)
        .into_iter()
        .rev()
        .find(|&end| fits(end))
        .or_else(|| {
            text.match_indices(' ')
                .map(|(i, _)| i)
                .rev()
                .find(|&end| end > 0 && fits(end))
        });
    match cut {
        Some(end) => format!("{}{MORE}", &text[..end]),
        None => text.chars().take(width).collect(),
    }
}

/// The byte offsets where a top-level field ends (the next begins with a separator),
/// in order.
fn field_boundaries(text: &str) -> Vec<usize> {
    let mut depth = 0i32;
    let mut out = Vec::new();
    for (i, c) in text.char_indices() {
        if depth == 0 && i > 0 && SEPARATORS.iter().any(|s| text[i..].starts_with(s)) {
            out.push(i);
        }
        match c {
            '(' => depth += 1,
            ')' => depth = (depth - 1).max(0),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = "energy: ESTIMATED by the power model server-vcpu-linear (1.48 W idle + 2.76 W per busy CPU of the machine; chosen because a virtual machine (the `hypervisor` flag)) — no meter can be read (rapl: none; perf power: none)";

    #[test]
    fn a_line_is_cut_between_whole_fields_never_in_a_word() {
        assert_eq!(elide_fields("short", 80), "short");
        assert_eq!(elide_fields(MODEL, 500), MODEL);
        // 80 columns: the parenthesis does not fit, so the line ends before it.
        assert_eq!(
            elide_fields(MODEL, 80),
            "energy: ESTIMATED by the power model server-vcpu-linear …"
        );
        // Wide enough for the parenthesis (with its inner "; " and nested parentheses
        // kept whole) but not for what follows.
        let upto = MODEL.find(" — ").unwrap();
        assert_eq!(
            elide_fields(MODEL, upto + 3),
            format!("{} …", &MODEL[..upto])
        );
        // Every cut is a prefix that ends at a whole word, within the width.
        for width in 10..MODEL.chars().count() {
            let cut = elide_fields(MODEL, width);
            assert!(cut.chars().count() <= width, "{width}: {cut}");
            let kept = cut.trim_end_matches(MORE);
            assert!(MODEL.starts_with(kept), "{width}: {cut}");
            let next = MODEL[kept.len()..].chars().next();
            assert!(
                matches!(next, Some(' ') | Some(';')),
                "{width}: cut inside a word: {cut}"
            );
        }
        // One word longer than the line: the characters that fit.
        assert_eq!(elide_fields("abcdefghij", 4), "abcd");
    }
}
