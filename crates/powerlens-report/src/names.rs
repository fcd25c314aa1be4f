//! Function names cut to fit a terminal: a C++ or Java name of several hundred characters
//! made every row of the function grid wrap. Names are elided in the middle, keeping the
//! head (namespace and class) and the tail (the function's own name and its arguments),
//! which is what tells two overloads or two classes' methods apart. Only the text views
//! cut names: JSON, CSV, HTML and folded stacks keep them whole.

/// How wide the text grid's name cells (function, stack, wake-up cause) may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NameFit {
    /// Names as they are (JSON-like fidelity; tests and callers that wrap themselves).
    #[default]
    Full,
    /// A terminal `columns` wide: the name columns share what the other columns leave of
    /// a line, but never fewer than [`MIN_NAME_CHARS`] each.
    Terminal(usize),
    /// Output that is not a terminal (a pipe, a file): each name cut to this many
    /// characters ([`PIPE_NAME_CHARS`] from the command line).
    Cap(usize),
}

/// The name width when the output is not a terminal: readable in a pager or a diff
/// without wrapping, long enough for most `Class::method(args)` names.
pub const PIPE_NAME_CHARS: usize = 60;

/// A name column never gets narrower than this, even on a terminal the other columns
/// fill (the default function grid's other columns take about 127): below it a
/// `Class::method(args)` or a JavaScript `function file.js:line:col` says too little.
pub const MIN_NAME_CHARS: usize = 40;

/// What marks the cut.
const ELLIPSIS: char = '…';

/// `name` in at most `max` characters: as it is when it fits, else its head, `…` and its
/// tail. For a name with an argument list (C++, Java, Rust), the tail is the function's
/// own name with its arguments (after the last `::` or `.` outside brackets) when that
/// takes at most three fifths of the room, so that the head keeps as much of the
/// namespace as fits; else the last three fifths (the argument tail). For a name followed
/// by its place (a JavaScript `function file.js:line:col`), the head is the function's
/// name when it takes at most three fifths of the room, and the tail the end of its place.
/// Otherwise the tail gets three fifths.
pub fn elide_middle(name: &str, max: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= max {
        return name.to_string();
    }
    if max <= 1 {
        return chars[..max].iter().collect();
    }
    let room = max - 1;
    let most_tail = room * 3 / 5;
    let tail = match (own_name_start(&chars), chars.iter().position(|&c| c == ' ')) {
        (Some(start), _) if chars.len() - start <= most_tail => chars.len() - start,
        (None, Some(space)) if space <= most_tail => room - space,
        _ => most_tail,
    };
    let head = room - tail;
    let mut out: String = chars[..head].iter().collect();
    out.push(ELLIPSIS);
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// Where the function's own name starts: after the last `::` or `.` that is outside
/// every bracket and before the last bracketed argument list. `None` when the name has no
/// argument list or no qualifier (a C function, a JavaScript `name file:line`), or its
/// brackets do not balance (`operator->`), where the plain split is as good.
fn own_name_start(chars: &[char]) -> Option<usize> {
    // Backwards: the argument list is the last top-level `(…)` group.
    let mut depth = 0i32;
    let mut args = None;
    for i in (0..chars.len()).rev() {
        match chars[i] {
            ')' | '>' | ']' => depth += 1,
            '(' | '<' | '[' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
                if depth == 0 && chars[i] == '(' {
                    args = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let args = args?;
    let mut depth = 0i32;
    for i in (0..args).rev() {
        match chars[i] {
            ')' | '>' | ']' => depth += 1,
            '(' | '<' | '[' => depth -= 1,
            ':' if depth == 0 && i > 0 && chars[i - 1] == ':' => return Some(i + 1),
            '.' if depth == 0 => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// The widths name columns get under `fit`, given the widest cell of every column
/// (`widths`, headers included), which columns hold names, and the two spaces between
/// columns. `None` for a column that keeps its width.
pub fn name_widths(fit: NameFit, widths: &[usize], names: &[usize]) -> Vec<Option<usize>> {
    let mut out = vec![None; widths.len()];
    let names: Vec<usize> = names
        .iter()
        .copied()
        .filter(|&c| c < widths.len())
        .collect();
    let cap = match fit {
        NameFit::Full => return out,
        NameFit::Cap(n) => n,
        NameFit::Terminal(columns) => {
            let others: usize = (0..widths.len())
                .filter(|c| !names.contains(c))
                .map(|c| widths[c])
                .sum();
            let gaps = 2 * widths.len().saturating_sub(1);
            let left = columns.saturating_sub(others + gaps);
            (left / names.len().max(1)).max(MIN_NAME_CHARS)
        }
    };
    for c in names {
        out[c] = Some(cap);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made C++ name of the kind a `node` recording holds, 170 characters.
    const CPP: &str = "v8::internal::compiler::turboshaft::Assembler<v8::internal::compiler::turboshaft::reducer_list<v8::internal::compiler::turboshaft::MachineLoweringReducer>>::ReduceCall(v8::internal::compiler::turboshaft::OpIndex, v8::internal::compiler::turboshaft::OptionalOpIndex)";

    #[test]
    fn a_long_cpp_name_keeps_its_namespace_head_and_its_argument_tail() {
        // The own name with its arguments is longer than 3/5 of the room (35 of 59): the
        // last 35 characters, the argument tail, and the first 24, the namespaces.
        let cut = elide_middle(CPP, 60);
        assert_eq!(
            cut,
            "v8::internal::compiler::…piler::turboshaft::OptionalOpIndex)"
        );
        assert_eq!(cut.chars().count(), 60);
    }

    #[test]
    fn a_short_own_name_is_kept_whole_and_the_head_gets_the_rest() {
        let name = "std::__1::basic_string<char, std::__1::char_traits<char>, std::__1::allocator<char>>::append(char const*)";
        // 19 characters of own name fit in 3/5 of 49: the head gets the other 30.
        assert_eq!(
            elide_middle(name, 50),
            "std::__1::basic_string<char, s…append(char const*)"
        );
        // Java's dots separate the class from the method.
        assert_eq!(
            elide_middle("long org.example.very.deep.pkg.Hot.collatzSteps(long)", 32),
            "long org.exam…collatzSteps(long)"
        );
    }

    #[test]
    fn names_that_fit_and_plain_names_are_cut_plainly() {
        assert_eq!(elide_middle("main", 60), "main");
        assert_eq!(elide_middle(CPP, CPP.chars().count()), CPP);
        // A JavaScript name and its place: the name whole when it takes at most 3/5 of
        // the room (16 of 39), the end of the place in the rest.
        assert_eq!(
            elide_middle(
                "fibonacciHotLoop /home/someone/projects/app/src/hot.js:1:26",
                40
            ),
            "fibonacciHotLoop…cts/app/src/hot.js:1:26"
        );
        // A function name longer than that (16 of 20): 3/5 of the room to the tail.
        assert_eq!(
            elide_middle(
                "fibonacciHotLoop /home/someone/projects/app/hot.js:1:26",
                21
            ),
            "fibonacc…/hot.js:1:26"
        );
        // Unbalanced brackets (`operator->`) fall back to the plain split too.
        assert_eq!(
            elide_middle("a::b::operator->(int, int)", 11),
            "a::b…, int)"
        );
        assert_eq!(elide_middle("abcdef", 1), "a");
        assert_eq!(elide_middle("abcdef", 0), "");
    }

    #[test]
    fn name_columns_share_what_a_terminal_line_leaves() {
        // Columns 10, [name], 8, [name], 6 wide: 24 + 2 * 4 gaps = 32 of 140 taken.
        let widths = [10, 300, 8, 200, 6];
        assert_eq!(
            name_widths(NameFit::Terminal(140), &widths, &[1, 3]),
            [None, Some(54), None, Some(54), None]
        );
        // A narrow terminal still leaves each name its minimum.
        assert_eq!(
            name_widths(NameFit::Terminal(40), &widths, &[1, 3])[1],
            Some(MIN_NAME_CHARS)
        );
        assert_eq!(name_widths(NameFit::Cap(60), &widths, &[1])[1], Some(60));
        assert_eq!(name_widths(NameFit::Full, &widths, &[1]), [None; 5]);
    }
}
