//! The text of `report --tree`: the caller/callee tree of the recorded stacks, one node a
//! line, indented by depth under a header that says what the weights are. Names are cut
//! in the middle as in the grids ([`crate::names`]): a C++ or JIT frame's name of several
//! hundred characters wrapped every line it was on.

use std::fmt::Write;

use powerlens_core::stacks::grid::StackTree;

use crate::names::{elide_middle, NameFit, MIN_NAME_CHARS};

/// `tree` as text: `share  weight  name`, each name indented two spaces a level and cut to
/// what `fit` leaves of the line.
pub fn text(tree: &StackTree, fit: NameFit) -> String {
    // The header says what the numbers are: "1667667" alone read as anything.
    let label = &tree.metric_label;
    let width = label.chars().count().max(12);
    let mut out = format!(
        "{:>7} {label:>width$}  thread, then its callers down to the callees (module)\n",
        "share",
    );
    for line in &tree.lines {
        let indent = "  ".repeat(line.depth);
        // "100.0% " + weight + two spaces + indentation, then the name.
        let used = 8 + width + 2 + indent.len();
        let name = match fit {
            NameFit::Full => line.name.clone(),
            NameFit::Cap(chars) => elide_middle(&line.name, chars),
            NameFit::Terminal(columns) => {
                elide_middle(&line.name, columns.saturating_sub(used).max(MIN_NAME_CHARS))
            }
        };
        let _ = writeln!(
            out,
            "{:>6.1}% {:>width$}  {indent}{name}",
            line.share_pct, line.weight
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_core::stacks::grid::TreeLine;

    fn tree(name: &str) -> StackTree {
        StackTree {
            metric_label: "CPU time µs".into(),
            lines: vec![
                TreeLine {
                    depth: 0,
                    share_pct: 100.0,
                    weight: 1_500,
                    name: "node (42)".into(),
                },
                TreeLine {
                    depth: 1,
                    share_pct: 62.5,
                    weight: 937,
                    name: name.into(),
                },
            ],
        }
    }

    /// The layout by hand: right-aligned share and weight under the header, two spaces,
    /// then the name indented by depth; whole names when asked.
    #[test]
    fn lines_are_laid_out_under_the_header() {
        let text = text(&tree("main (a.out)"), NameFit::Full);
        assert_eq!(
            text,
            concat!(
                "  share  CPU time µs  thread, then its callers down to the callees (module)\n",
                " 100.0%         1500  node (42)\n",
                "  62.5%          937    main (a.out)\n",
            )
        );
    }

    /// A 300-character C++ name is cut to the pipe's cap, and on an 100-column terminal
    /// to what the line leaves, keeping its head and its own name with arguments.
    #[test]
    fn long_names_are_cut_in_the_middle() {
        let long = format!(
            "v8::internal::{}::Builtins_InterpreterEntryTrampoline(int) (node)",
            "Namespace".repeat(26)
        );
        let piped = text(&tree(&long), NameFit::Cap(60));
        let line = piped.lines().nth(2).unwrap();
        let name = line.trim_start_matches(|c: char| c != 'v');
        assert_eq!(name.chars().count(), 60, "{line}");
        assert!(name.starts_with("v8::internal::"), "{name}");
        assert!(name.contains('…'), "{name}");
        let wide = text(&tree(&long), NameFit::Terminal(100));
        for line in wide.lines().skip(1) {
            assert!(
                line.chars().count() <= 100,
                "{} chars: {line}",
                line.chars().count()
            );
        }
        let whole = text(&tree(&long), NameFit::Full);
        assert!(whole.lines().nth(2).unwrap().ends_with(&long), "{whole}");
    }
}
