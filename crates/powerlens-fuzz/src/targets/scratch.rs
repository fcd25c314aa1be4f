//! A scratch directory per thread for targets that parse files (SQLite databases, journals):
//! the input is written to a file there, and the directory is emptied between inputs.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

thread_local! {
    static DIR: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
}

/// Calls `f` with an emptied directory of its own.
pub fn with_dir<R>(f: impl FnOnce(&Path) -> R) -> R {
    DIR.with(|cell| {
        let mut cell = cell.borrow_mut();
        let dir = cell.get_or_insert_with(|| crate::scratch_dir("powerlens-fuzz"));
        let work = dir.path().join("w");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).expect("the scratch directory");
        f(&work)
    })
}

/// Writes `input` as `name` in an emptied scratch directory and calls `f` with its path.
pub fn with_file<R>(name: &str, input: &[u8], f: impl FnOnce(&Path) -> R) -> R {
    with_dir(|dir| {
        let path: PathBuf = dir.join(name);
        std::fs::write(&path, input).expect("writing the fuzz input");
        f(&path)
    })
}
