//! Creating the files powerlens keeps: recordings and the results database hold command
//! lines, which can carry secrets (a token in an argument), so they are created readable
//! by their owner only; and a symbolic link planted at one of their paths (or at SQLite's
//! `-wal`, `-shm` or `-journal` beside it) must not make powerlens write elsewhere.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::StoreError;

/// The files SQLite may create beside a database.
pub(crate) const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Permissions of a new recording or results database (SQLite gives its `-wal`, `-shm`
/// and `-journal` files the database's own).
pub(crate) const PRIVATE_MODE: u32 = 0o600;

/// Creates `path` for its owner only, failing if anything exists there (a symbolic link
/// included: `O_EXCL` never follows one).
pub(crate) fn create_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_MODE)
        .open(path)
}

/// `path` with `suffix` appended to its file name (`db` + `-wal`).
pub(crate) fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut side = path.as_os_str().to_owned();
    side.push(suffix);
    PathBuf::from(side)
}

/// Refuses a database path that is a symbolic link, or whose SQLite side files are: SQLite
/// would write through them.
pub(crate) fn refuse_symlinks(path: &Path) -> Result<(), StoreError> {
    let candidates =
        std::iter::once(path.to_path_buf()).chain(SIDE_FILES.iter().map(|s| side_file(path, s)));
    for p in candidates {
        if p.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err(StoreError::Symlink { path: p });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_files_are_the_owners_only_and_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        create_private(&path).unwrap();
        let mode = path.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(
            create_private(&path).is_err(),
            "never over an existing file"
        );

        let target = dir.path().join("elsewhere");
        let link = dir.path().join("b.db");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_private(&link).is_err());
        assert!(!target.exists(), "nothing written through the link");
        assert!(matches!(
            refuse_symlinks(&link),
            Err(StoreError::Symlink { .. })
        ));
        // A dangling link at a side file is refused too.
        std::os::unix::fs::symlink(&target, side_file(&path, "-journal")).unwrap();
        let err = refuse_symlinks(&path).unwrap_err();
        assert!(err.to_string().contains("a.db-journal"), "{err}");
        assert!(refuse_symlinks(&dir.path().join("c.db")).is_ok());
    }
}
