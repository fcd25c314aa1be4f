//! Captures of real machines (`tests/data/machines/<name>/`, see its README.md) and the
//! tool that lays one out as a sysfs and a procfs tree.
//!
//! Two capture formats are read, both data only:
//! - intel/pepc emulation data: `inlinefiles.txt`, lines `ro|rw|/sys/PATH|VALUE`, and
//!   `cpuinfo`. pepc captures no topology links, so each processor's `physical id` and
//!   `core id` in cpuinfo become its `topology/physical_package_id` and `topology/core_id`,
//!   as the kernel itself fills both from the same CPUID leaves on x86.
//! - ttar text archives (prometheus/node_exporter, prometheus/procfs): `Directory:`,
//!   `Path:` with `Lines: N` and N lines of content, or `Path:` with `SymlinkTo:`. Their first
//!   path component (`sys`, or `fixtures` then `sys`) names the tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The corpus directory.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/machines")
}

/// The names of every machine in the corpus, sorted.
pub fn names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            e.file_type()
                .unwrap()
                .is_dir()
                .then(|| e.file_name().to_string_lossy().to_string())
        })
        .collect();
    names.sort();
    names
}

/// One entry of a capture, by its path below the tree's root (`sys/...` or `proc/...`).
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    File(String),
    Dir,
    Link(String),
}

/// A capture as the entries of its trees, keyed by path (`sys/devices/...`, `proc/cpuinfo`).
pub type Capture = BTreeMap<String, Entry>;

/// Reads a machine's capture, in whichever format it was stored.
pub fn capture(name: &str) -> Capture {
    let dir = corpus_dir().join(name);
    let mut entries = Capture::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("inlinefiles.txt")) {
        entries.extend(inline_files(&text));
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("cpuinfo")) {
        entries.extend(topology_from_cpuinfo(&text));
        entries.insert("proc/cpuinfo".into(), Entry::File(text));
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("capture.ttar")) {
        entries.extend(ttar(&text));
    }
    assert!(
        !entries.is_empty(),
        "{name}: no capture in {}",
        dir.display()
    );
    entries
}

/// pepc `inlinefiles.txt`: the last line for a path wins (pepc lists some twice, `ro` and `rw`).
fn inline_files(text: &str) -> Capture {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.splitn(3, '|');
            let (_mode, path, value) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.strip_prefix('/')?.to_string();
            Some((path, Entry::File(format!("{value}\n"))))
        })
        .collect()
}

/// `cpuN/topology/{physical_package_id,core_id}` of each processor cpuinfo lists.
fn topology_from_cpuinfo(text: &str) -> Capture {
    let mut entries = Capture::new();
    for block in text.split("\n\n") {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        let Some(cpu) = field("processor") else {
            continue;
        };
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        for (file, key) in [
            ("physical_package_id", "physical id"),
            ("core_id", "core id"),
        ] {
            if let Some(value) = field(key) {
                entries.insert(format!("{dir}/{file}"), Entry::File(format!("{value}\n")));
            }
        }
    }
    entries
}

/// A ttar archive's entries, with the leading `fixtures/` (procfs) dropped.
fn ttar(text: &str) -> Capture {
    let mut entries = Capture::new();
    let mut lines = text.lines();
    let mut current: Option<String> = None;
    while let Some(line) = lines.next() {
        let rel = |p: &str| p.strip_prefix("fixtures/").unwrap_or(p).to_string();
        if let Some(p) = line.strip_prefix("Directory: ") {
            entries.insert(rel(p), Entry::Dir);
            current = None;
        } else if let Some(p) = line.strip_prefix("Path: ") {
            current = Some(rel(p));
        } else if let Some(target) = line.strip_prefix("SymlinkTo: ") {
            let path = current.take().expect("SymlinkTo after Path");
            entries.insert(path, Entry::Link(target.to_string()));
        } else if let Some(n) = line.strip_prefix("Lines: ") {
            let n: usize = n.parse().expect("Lines: N");
            let body: Vec<&str> = lines.by_ref().take(n).collect();
            let mut content = body.join("\n");
            if n > 0 {
                content.push('\n');
            }
            let path = current.take().expect("Lines after Path");
            entries.insert(path, Entry::File(content));
        }
    }
    entries
}

/// Lays a capture out below `root`: `root/sys` and `root/proc`.
pub fn lay_out(capture: &Capture, root: &Path) {
    for tree in ["sys", "proc"] {
        std::fs::create_dir_all(root.join(tree)).unwrap();
    }
    for (path, entry) in capture {
        let dest = root.join(path);
        match entry {
            Entry::Dir => std::fs::create_dir_all(&dest).unwrap(),
            Entry::File(content) => {
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::write(&dest, content).unwrap();
            }
            Entry::Link(target) => {
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                let target = target.trim_end_matches('/');
                std::os::unix::fs::symlink(target, &dest).unwrap();
            }
        }
    }
}

/// A capture's file content, if it has that file.
pub fn file<'a>(capture: &'a Capture, path: &str) -> Option<&'a str> {
    match capture.get(path)? {
        Entry::File(text) => Some(text.trim_end_matches('\n')),
        _ => None,
    }
}
