//! The committed BPF object is what its source builds to (the bpf2go convention: the
//! object is committed so that building powerlens needs no BPF toolchain, and this test
//! keeps the two together). Where clang is installed it rebuilds the object with
//! scripts/build-bpf.sh: with the clang major version that built the committed object
//! (`powerlens.bpf.o.clang`), the bytes must be the same; with another, the source must
//! still build and the object hold the same programs and maps.

use std::path::{Path, PathBuf};
use std::process::Command;

fn in_kernel_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/trace/in_kernel")
}

/// clang's major version (`clang --version`'s "version 14.0.6" → "14"), `None` without it.
fn clang_major() -> Option<String> {
    let out = Command::new("clang").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split("version ").nth(1)?;
    Some(version.split('.').next()?.trim().to_string())
}

/// The ELF section names of an object: its programs (`tp_btf/...`) and `.maps`.
fn sections(object: &[u8]) -> Vec<String> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(object).expect("an ELF object");
    let mut names: Vec<String> = file
        .sections()
        .filter_map(|s| s.name().ok().map(str::to_string))
        .filter(|n| n.starts_with("tp_btf/") || n == ".maps" || n == "license")
        .collect();
    names.sort();
    names
}

#[test]
fn the_committed_bpf_object_is_what_its_source_builds_to() {
    let Some(major) = clang_major() else {
        powerlens_sys::skip_test!(
            "clang is not installed (Debian: clang), so the object cannot be rebuilt here"
        );
        return;
    };
    let dir = in_kernel_dir();
    let committed = std::fs::read(dir.join("powerlens.bpf.o")).unwrap();
    let built_with = std::fs::read_to_string(dir.join("powerlens.bpf.o.clang"))
        .unwrap()
        .trim()
        .to_string();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("powerlens.bpf.o");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-bpf.sh");
    let run = Command::new("bash")
        .arg(&script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "scripts/build-bpf.sh failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rebuilt = std::fs::read(&out).unwrap();
    if major == built_with {
        assert!(
            rebuilt == committed,
            "powerlens.bpf.o is not what powerlens.bpf.c builds to with clang {major}: run scripts/build-bpf.sh and commit the object"
        );
    } else {
        eprintln!(
            "note: clang {major} here, the object was built with clang {built_with}: comparing its programs and maps, not its bytes"
        );
        assert_eq!(sections(&rebuilt), sections(&committed));
    }
    assert_eq!(
        sections(&committed),
        [
            ".maps",
            "license",
            "tp_btf/sched_stat_runtime",
            "tp_btf/sched_switch",
            "tp_btf/sched_waking"
        ]
    );
}
