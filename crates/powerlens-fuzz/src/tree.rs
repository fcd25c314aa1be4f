//! Fuzz inputs that stand for a directory tree (a fixture `/sys` or `/proc`): a text
//! archive of files, each introduced by a line `== RELATIVE/PATH` and followed by its
//! content up to the next such line. Readable, so that seeds are real files copied from
//! a machine, and the mutator changes contents, paths and the set of files alike.
//!
//! ```text
//! == sys/devices/system/cpu/online
//! 0-1
//! == sys/devices/system/cpu/cpu0/cpuidle/state0/name
//! POLL
//! ```

use std::cell::RefCell;
use std::path::{Component, Path, PathBuf};

/// At most this many files per input, so that one input cannot take seconds to lay out.
const MAX_FILES: usize = 400;

/// The files of an archive: (relative path, content). Paths that would leave the tree
/// (absolute, `..`) are made relative and lose their `..` components.
pub fn files(input: &[u8]) -> Vec<(PathBuf, &[u8])> {
    let mut out: Vec<(PathBuf, &[u8])> = Vec::new();
    let mut current: Option<(PathBuf, usize)> = None;
    let mut at = 0;
    let finish = |current: &mut Option<(PathBuf, usize)>, end: usize, out: &mut Vec<_>| {
        if let Some((path, start)) = current.take() {
            if out.len() < MAX_FILES {
                out.push((path, &input[start..end.max(start)]));
            }
        }
    };
    while at < input.len() {
        let line_end = input[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(input.len(), |p| at + p + 1);
        let line = &input[at..line_end];
        if let Some(path) = line.strip_prefix(b"== ") {
            finish(&mut current, at, &mut out);
            let path = String::from_utf8_lossy(path.strip_suffix(b"\n").unwrap_or(path));
            current = Some((sanitize(Path::new(path.as_ref())), line_end));
        }
        at = line_end;
    }
    finish(&mut current, input.len(), &mut out);
    out
}

fn sanitize(path: &Path) -> PathBuf {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect()
}

thread_local! {
    /// One scratch directory per thread, emptied between inputs: creating a temporary
    /// directory per input would cost more than most parsers.
    static SCRATCH: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
}

/// Lays out the archive `input` in an emptied scratch directory and calls `f` with it.
/// Files whose path clashes with a directory (or the reverse) are skipped, as is anything
/// the file system refuses.
pub fn with_tree<R>(input: &[u8], f: impl FnOnce(&Path) -> R) -> R {
    SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let dir = cell.get_or_insert_with(|| crate::scratch_dir("powerlens-fuzz-tree"));
        let root = dir.path().join("t");
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::create_dir_all(&root);
        for (path, content) in files(input) {
            if path.as_os_str().is_empty() {
                continue;
            }
            let full = root.join(&path);
            if let Some(parent) = full.parent() {
                if std::fs::create_dir_all(parent).is_err() {
                    continue;
                }
            }
            let _ = std::fs::write(&full, content);
        }
        f(&root)
    })
}

/// As [`with_tree`], with the tree's `sys` and `proc` as the readers' roots (made to exist
/// when the archive has neither).
pub fn with_roots<R>(input: &[u8], f: impl FnOnce(&powerlens_sys::Roots) -> R) -> R {
    with_tree(input, |root| {
        let _ = std::fs::create_dir_all(root.join("sys"));
        let _ = std::fs::create_dir_all(root.join("proc"));
        f(&powerlens_sys::Roots {
            sysfs: root.join("sys"),
            procfs: root.join("proc"),
        })
    })
}

/// Writes `files` as an archive (for building seeds from a real tree).
pub fn archive(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, content) in files {
        out.extend_from_slice(b"== ");
        out.extend_from_slice(path.as_bytes());
        out.push(b'\n');
        out.extend_from_slice(content);
        if !content.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_lays_out_its_files_and_stays_inside_the_tree() {
        let input = b"ignored preamble\n== a/b\nhello\n== ../../etc/x\nworld\n== /abs\n";
        let f = files(input);
        assert_eq!(
            f,
            vec![
                (PathBuf::from("a/b"), &b"hello\n"[..]),
                (PathBuf::from("etc/x"), &b"world\n"[..]),
                (PathBuf::from("abs"), &b""[..]),
            ]
        );
        let listed = with_tree(input, |root| {
            std::fs::read_to_string(root.join("etc/x")).unwrap()
        });
        assert_eq!(listed, "world\n");
        let again = with_tree(b"== c\n1\n", |root| root.join("a").exists());
        assert!(!again, "the previous input's files are gone");
    }
}
