//! Recorded fixtures (tests/data/recordings) replayed by the binary, reading nothing of
//! this machine: the deterministic tests of real recordings.

use std::path::{Path, PathBuf};
use std::process::Output;

use powerlens_sys::fixture::FixtureTree;
use serde_json::Value;

use super::{command_on_fixture, stderr};

/// The committed fixtures' folder.
pub fn recordings() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recordings")
}

/// A scratch folder holding copies of every fixture, where the binary runs on them (by
/// their bare names, so that no output names a folder of this run), reading nothing of
/// this machine.
pub struct Replay {
    tree: FixtureTree,
    dir: tempfile::TempDir,
}

impl Replay {
    /// Copies of the fixtures `names` (`NAME.rec`).
    pub fn of(names: &[&str]) -> Replay {
        let dir = tempfile::tempdir().unwrap();
        for name in names {
            let file = format!("{name}.rec");
            std::fs::copy(recordings().join(&file), dir.path().join(&file)).unwrap();
        }
        Replay {
            tree: FixtureTree::new(),
            dir,
        }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        command_on_fixture(&self.tree, &self.dir.path().join("results.db"))
            .current_dir(self.dir.path())
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs `args`, which must succeed without a warning (a damaged fixture, a symbol cache
    /// that could not be written) or an error.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        let said = stderr(&out);
        assert!(out.status.success(), "{args:?}: {:?}\n{said}", out.status);
        assert!(
            !said.contains("warning") && !said.contains("damaged"),
            "{args:?}: {said}"
        );
        out
    }

    /// What `args` printed: stdout, then stderr (its notes) after a marker line.
    pub fn text(&self, args: &[&str]) -> String {
        let out = self.ok(args);
        let mut text = String::from_utf8(out.stdout).unwrap();
        if !out.stderr.is_empty() {
            text.push_str("--- stderr ---\n");
            text.push_str(&String::from_utf8(out.stderr).unwrap());
        }
        text
    }

    pub fn json(&self, args: &[&str]) -> Value {
        super::json(&self.ok(args))
    }

    /// The copy of fixture `name`.
    pub fn copy(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.rec"))
    }
}
