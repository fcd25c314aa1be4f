//! Oracles: a C program built here with gcc reports the run-time addresses of its own
//! functions and the kernel shows its mappings; `nm` gives their sizes; this test binary's
//! own function pointers; kallsyms fixtures and the live kallsyms.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::*;
use crate::fixture::FixtureTree;
use crate::procfs::maps::read_executable_maps;

/// The C program. `main` prints the addresses of the three functions, then waits for
/// stdin to close so that its mappings can be read while it runs.
const PROGRAM: &str = r#"#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) void short_sleeper(int n) {
    for (int i = 0; i < n; i++)
        usleep(10);
    sink += n;
}

__attribute__((noinline)) unsigned long spinner(unsigned long n) {
    unsigned long acc = 1;
    for (unsigned long i = 0; i < n; i++)
        acc = acc * 6364136223846793005UL + sink;
    return acc;
}

__attribute__((noinline)) int condvar_waiter(pthread_mutex_t *m, pthread_cond_t *c) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000;
    pthread_mutex_lock(m);
    int rc = pthread_cond_timedwait(c, m, &ts);
    pthread_mutex_unlock(m);
    return rc;
}

int main(void) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    short_sleeper(1);
    sink += spinner(10) + condvar_waiter(&m, &c);
    printf("%p %p %p\n", (void *)short_sleeper, (void *)spinner, (void *)condvar_waiter);
    fflush(stdout);
    while (getchar() != EOF) {
    }
    return 0;
}
"#;

const FUNCTIONS: [&str; 3] = ["short_sleeper", "spinner", "condvar_waiter"];

/// Source lines (1-based, first..=last) of each function in [`PROGRAM`].
fn source_lines(name: &str) -> (u32, u32) {
    let lines: Vec<&str> = PROGRAM.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.contains(&format!(" {name}(")) && l.ends_with('{'))
        .unwrap();
    let last = first + lines[first..].iter().position(|l| *l == "}").unwrap();
    (first as u32 + 1, last as u32 + 1)
}

/// Builds [`PROGRAM`] with `extra` gcc flags; None (and a skip message) without gcc.
fn build_program(dir: &Path, extra: &[&str]) -> Option<PathBuf> {
    let src = dir.join("prog.c");
    let exe = dir.join("prog");
    std::fs::write(&src, PROGRAM).unwrap();
    let out = match Command::new("gcc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-pthread"])
        .args(extra)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            crate::skip_test!("cannot run gcc ({e})");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

/// Symbol sizes from `nm -S`, an oracle independent of blazesym.
fn nm_sizes(exe: &Path) -> HashMap<String, u64> {
    let out = Command::new("nm").arg("-S").arg(exe).output().expect("nm");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| (f[3].to_string(), u64::from_str_radix(f[1], 16).unwrap()))
        })
        .collect()
}

/// Runs the program until its mappings and function addresses are known, then lets it
/// exit: what the recorder keeps of a short-lived process.
fn run_and_record(exe: &Path) -> (Vec<Mapping>, Vec<u64>) {
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addrs: Vec<u64> = line
        .split_whitespace()
        .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap())
        .collect();
    let maps = read_executable_maps(&Roots::default(), child.id()).unwrap();
    child.stdin.take().unwrap().write_all(b"").unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(addrs.len(), FUNCTIONS.len(), "{line}");
    (maps, addrs)
}

/// Start, middle and last byte (the farthest a return address can be) of each function
/// resolve to it, with the file offset the mapping implies and DWARF's file and line.
fn check_program(extra_flags: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_program(dir.path(), extra_flags) else {
        return;
    };
    let sizes = nm_sizes(&exe);
    let (maps, starts) = run_and_record(&exe);
    let exe_path = exe.to_str().unwrap();
    assert!(maps.iter().any(|m| m.path == exe_path), "{maps:?}");

    let mut sym = Symbolizer::new(&Roots::default());
    for (name, start) in FUNCTIONS.iter().zip(&starts) {
        let size = sizes[*name];
        assert!(size > 4, "{name} has size {size}");
        let probes = [*start, start + size / 2, start + size - 1];
        let got = sym.user(&maps, &probes);
        let (first_line, last_line) = source_lines(name);
        for (addr, s) in probes.iter().zip(&got) {
            assert_eq!(s.function.as_deref(), Some(*name), "{addr:#x}: {s:?}");
            assert_eq!(s.module, exe_path);
            let m = maps.iter().find(|m| m.contains(*addr)).unwrap();
            assert_eq!(s.offset, m.file_offset_of(*addr));
            assert!(s.file.as_deref().unwrap().ends_with("prog.c"), "{s:?}");
            let line = s.line.unwrap();
            assert!(
                (first_line..=last_line).contains(&line),
                "{s:?} {first_line}..={last_line}"
            );
        }
    }
    // The byte before `spinner` is not `spinner` (padding or the function before it).
    let before = sym.user(&maps, &[starts[1] - 1]);
    assert_ne!(before[0].function.as_deref(), Some("spinner"));
}

#[test]
fn c_pie_functions_resolve_after_the_process_exited() {
    check_program(&["-pie", "-fPIE"]);
}

#[test]
fn c_non_pie_functions_resolve_by_file_offset() {
    check_program(&["-no-pie", "-fno-PIE"]);
}

/// Debian's `-dbg` packages and `gcc -gz` compress debug sections; they still give lines.
#[test]
fn c_compressed_debug_sections_give_lines() {
    check_program(&["-gz=zlib"]);
}

#[test]
fn broken_debug_information_still_names_from_the_symbol_table() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_program(dir.path(), &[]) else {
        return;
    };
    // Garbage in place of .debug_info, as a truncated or foreign debug file would have.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, [0xffu8; 64]).unwrap();
    let broken = dir.path().join("broken");
    let status = Command::new("objcopy")
        .arg(format!("--update-section=.debug_info={}", junk.display()))
        .arg(&exe)
        .arg(&broken)
        .status()
        .unwrap();
    assert!(status.success());
    let (maps, starts) = run_and_record(&broken);
    let mut sym = Symbolizer::new(&Roots::default());
    let got = sym.user(&maps, &starts);
    let names: Vec<Option<&str>> = got.iter().map(|s| s.function.as_deref()).collect();
    assert_eq!(names, FUNCTIONS.map(Some));
    assert_eq!(got[0].line, None);
    let problems: Vec<_> = sym.debug_info_problems().collect();
    assert!(
        problems.iter().any(|(m, _)| Path::new(m) == broken),
        "{problems:?}"
    );
}

#[test]
fn a_stripped_binary_keeps_module_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build_program(dir.path(), &["-s"]) else {
        return;
    };
    let (maps, starts) = run_and_record(&exe);
    let got = Symbolizer::new(&Roots::default()).user(&maps, &starts);
    for s in &got {
        assert_eq!(s.function, None, "{s:?}");
        assert_eq!(s.module, exe.to_str().unwrap());
    }
}

/// A Rust function of this test binary, at an address the test can take.
#[inline(never)]
fn rust_marker(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(31)
}

#[test]
fn own_rust_function_resolves_demangled_live() {
    assert_eq!(rust_marker(1), 31);
    let maps = read_executable_maps(&Roots::default(), std::process::id()).unwrap();
    let addr = rust_marker as fn(u64) -> u64 as usize as u64;
    let got = Symbolizer::new(&Roots::default()).user(&maps, &[addr, addr + 1]);
    for s in &got {
        assert_eq!(
            s.function.as_deref(),
            Some("powerlens_sys::symbolize::tests::rust_marker"),
            "{s:?}"
        );
        assert!(s.module.contains("powerlens_sys"), "{s:?}");
        assert!(s.file.as_deref().unwrap().ends_with("tests.rs"), "{s:?}");
    }
}

#[test]
fn frames_without_a_readable_module_keep_module_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let not_elf = dir.path().join("notes.txt");
    std::fs::write(&not_elf, "not an ELF file").unwrap();
    let not_elf = not_elf.to_str().unwrap().to_string();
    let maps = vec![
        mapping(0x1000, 0x3000, 0x2000, "/nonexistent/libgone.so"),
        mapping(0x5000, 0x6000, 0x1000, "/opt/app/libold.so (deleted)"),
        mapping(0x7000, 0x8000, 0, "[vdso]"),
        mapping(0x9000, 0xa000, 0, "[anon:jit]"),
        mapping(0xb000, 0xc000, 0, &not_elf),
    ];
    let addrs = [0x1010, 0x5020, 0x7030, 0x9040, 0xd000, 0xb050, 0x1020];
    let mut sym = Symbolizer::new(&Roots::default());
    let got = sym.user(&maps, &addrs);
    let expect = [
        ("/nonexistent/libgone.so", 0x2010),
        ("/opt/app/libold.so (deleted)", 0x1020),
        ("[vdso]", 0x30),
        ("[anon:jit]", 0x40),
        (UNKNOWN_MODULE, 0xd000),
        (not_elf.as_str(), 0x50),
        ("/nonexistent/libgone.so", 0x2020),
    ];
    assert_eq!(got.len(), expect.len());
    for (s, (module, offset)) in got.iter().zip(expect) {
        assert_eq!(
            (s.module.as_str(), s.offset, &s.function),
            (module, offset, &None)
        );
    }
    assert_eq!(got[0].to_string(), "libgone.so+0x2010");
    assert_eq!(got[1].to_string(), "libold.so (deleted)+0x1020");
    assert_eq!(got[2].to_string(), "[vdso]+0x30");
    let failed: Vec<&str> = sym.failed_modules().map(|(m, _)| m).collect();
    assert!(failed.contains(&"/nonexistent/libgone.so"), "{failed:?}");
    assert!(failed.contains(&not_elf.as_str()), "{failed:?}");
}

fn mapping(start: u64, end: u64, file_offset: u64, path: &str) -> Mapping {
    Mapping {
        start,
        end,
        file_offset,
        path: path.to_string(),
    }
}

#[test]
fn kernel_fixture_resolves_to_the_nearest_preceding_symbol() {
    let tree = FixtureTree::new();
    tree.write_proc(
        "kallsyms",
        "ffffffff81000000 T _stext\n\
         ffffffff81000100 t do_idle\n\
         ffffffff81000400 T schedule\n\
         ffffffffc0001000 t e1000_clean\t[e1000]\n",
    );
    let mut sym = Symbolizer::new(&tree.roots());
    assert_eq!(sym.kernel_unavailable_reason(), None);
    let got = sym.kernel(&[
        0xffffffff81000432,
        0xffffffff81000100,
        0xffffffffc0001010,
        0x10,
    ]);
    let names: Vec<Option<&str>> = got.iter().map(|s| s.function.as_deref()).collect();
    assert_eq!(
        names,
        [
            Some("schedule"),
            Some("do_idle"),
            Some("e1000_clean [e1000]"),
            None
        ]
    );
    assert!(got.iter().all(|s| s.module == KERNEL_MODULE));
    assert_eq!(got[0].offset, 0xffffffff81000432);
    assert_eq!(got[0].to_string(), "schedule");
    assert_eq!(got[3].to_string(), "[kernel]+0x10");
}

#[test]
fn kernel_with_hidden_addresses_says_why_and_keeps_addresses() {
    let tree = FixtureTree::new();
    tree.write_proc(
        "kallsyms",
        "0000000000000000 T _stext\n0000000000000000 T schedule\n",
    );
    let mut sym = Symbolizer::new(&tree.roots());
    let reason = sym.kernel_unavailable_reason().expect("a reason");
    assert!(
        reason.contains("kptr_restrict=0") && reason.contains("root"),
        "{reason}"
    );
    let got = sym.kernel(&[0xffffffff81000432]);
    assert_eq!(got[0].function, None);
    assert_eq!(
        (got[0].module.as_str(), got[0].offset),
        (KERNEL_MODULE, 0xffffffff81000432)
    );
}

#[test]
fn live_kallsyms_names_schedule() {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let addr = text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() == 3 && f[2] == "schedule" && f[1].eq_ignore_ascii_case("t"))
            .then(|| u64::from_str_radix(f[0], 16).unwrap())
    });
    let mut sym = Symbolizer::new(&Roots::default());
    match addr {
        Some(0) | None => {
            let reason = sym.kernel_unavailable_reason();
            crate::skip_test!("live kallsyms has no schedule address ({reason:?})");
        }
        Some(addr) => {
            assert_eq!(sym.kernel_unavailable_reason(), None);
            let got = sym.kernel(&[addr, addr + 8]);
            assert_eq!(got[0].function.as_deref(), Some("schedule"));
            assert_eq!(got[1].function.as_deref(), Some("schedule"));
        }
    }
}

/// Exported functions of an ELF file as file-offset ranges, from `nm -D -S` and the
/// `readelf -l` load segments: which libc offsets must get a name even without debug
/// information.
fn exported_function_offsets(path: &str) -> Vec<(u64, u64)> {
    let run = |cmd: &str, args: &[&str]| {
        let out = Command::new(cmd).args(args).arg(path).output().unwrap();
        assert!(out.status.success(), "{cmd}");
        String::from_utf8(out.stdout).unwrap()
    };
    // LOAD Offset VirtAddr PhysAddr FileSiz ...
    let segments: Vec<(u64, u64, u64)> = run("readelf", &["-lW"])
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .take(4)
                .map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap())
                .collect();
            (f[0], f[1], f[3])
        })
        .collect();
    run("nm", &["-D", "-S", "--defined-only"])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 4 || !matches!(f[2], "T" | "t" | "W" | "i") {
                return None;
            }
            let vaddr = u64::from_str_radix(f[0], 16).unwrap();
            let size = u64::from_str_radix(f[1], 16).unwrap();
            let (offset, seg_vaddr, _) = segments
                .iter()
                .find(|(_, v, filesz)| (*v..v + filesz).contains(&vaddr))?;
            let start = vaddr - seg_vaddr + offset;
            Some((start, start + size))
        })
        .collect()
}

/// 10,000 distinct libc addresses: the cold batch parses libc, the warm one is the cache.
#[test]
fn ten_thousand_libc_addresses() {
    let maps = read_executable_maps(&Roots::default(), std::process::id()).unwrap();
    let libc = maps
        .iter()
        .filter(|m| {
            Path::new(&m.path)
                .file_name()
                .is_some_and(|n| n == "libc.so.6")
        })
        .max_by_key(|m| m.end - m.start)
        .expect("libc mapped");
    let n = 10_000u64;
    let step = ((libc.end - libc.start) / n).max(1);
    let mut addrs: Vec<u64> = (0..n).map(|i| libc.start + i * step).collect();
    // A function this process calls through libc, named whichever source names it.
    let clock_gettime = libc::clock_gettime as *const () as usize as u64;
    addrs.push(clock_gettime);

    let mut sym = Symbolizer::new(&Roots::default());
    let t = Instant::now();
    let got = sym.user(&maps, &addrs);
    let cold = t.elapsed();
    let t = Instant::now();
    let again = sym.user(&maps, &addrs);
    let warm = t.elapsed();
    assert_eq!(got, again);

    let named = got.iter().filter(|s| s.function.is_some()).count();
    let lined = got.iter().filter(|s| s.line.is_some()).count();
    eprintln!(
        "symbolized {} libc addresses: cold {cold:?}, cached {warm:?}; {named} named, \
         {lined} with file:line; debug information problems: {:?}",
        addrs.len(),
        sym.debug_info_problems().collect::<Vec<_>>()
    );
    let last = got.last().unwrap();
    assert!(
        last.function
            .as_deref()
            .unwrap_or("")
            .contains("clock_gettime"),
        "{last:?}"
    );
    // Every offset inside an exported function must be named, debug information or not.
    let exported = exported_function_offsets(&libc.path);
    let mut must = 0;
    for s in got.iter().filter(|s| s.module == libc.path) {
        if exported.iter().any(|(a, b)| (*a..*b).contains(&s.offset)) {
            must += 1;
            assert!(s.function.is_some(), "{s:?}");
        }
    }
    assert!(
        must > 1000,
        "only {must} sampled offsets in exported functions"
    );
}

/// Plain C names that a C++ demangler would read as types: blazesym's demangler turned a
/// static `w` into `wchar_t` and `s` into `short` (Itanium's builtin type codes). Only
/// mangled-looking names are demangled now.
#[test]
fn short_static_function_names_come_from_the_symbol_table() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("short.c");
    let exe = dir.path().join("short");
    std::fs::write(
        &src,
        "static volatile int sink;\n\
         __attribute__((noinline)) static void w(void) { sink++; }\n\
         __attribute__((noinline)) static void s(void) { sink += 2; }\n\
         __attribute__((noinline)) void add(void) { sink += 3; }\n\
         int main(void) { w(); s(); add(); return sink; }\n",
    )
    .unwrap();
    match Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
    {
        Ok(st) => assert!(st.success()),
        Err(e) => {
            crate::skip_test!("cannot run gcc ({e})");
            return;
        }
    }
    let out = Command::new("nm").arg(&exe).output().expect("nm");
    let addr_of = |name: &str| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3 && f[2] == name).then(|| u64::from_str_radix(f[0], 16).unwrap())
            })
            .unwrap_or_else(|| panic!("nm has no {name}"))
    };
    // In a gcc PIE the code segment's file offsets equal its addresses.
    let whole = Mapping {
        start: 0,
        end: u64::MAX,
        file_offset: 0,
        path: exe.display().to_string(),
    };
    let mut sym = Symbolizer::new(&crate::Roots::default());
    let names: Vec<Option<String>> = sym
        .user(&[whole], &[addr_of("w"), addr_of("s"), addr_of("add")])
        .into_iter()
        .map(|s| s.function)
        .collect();
    assert_eq!(
        names,
        [Some("w".into()), Some("s".into()), Some("add".into())]
    );
}

#[test]
fn only_mangled_names_are_demangled() {
    assert_eq!(demangle("w"), "w");
    assert_eq!(demangle("s"), "s");
    assert_eq!(demangle("main"), "main");
    assert_eq!(demangle("_ZN3foo3barE"), "foo::bar");
    assert_eq!(
        demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
        "core::ptr::drop_in_place"
    );
    assert_eq!(demangle("_Z3addii"), "add(int, int)");
}

/// Against binutils' `readelf -n` (the oracle), on this test's own executable and on
/// `/bin/sh`; a file that is not ELF, or not there, has none.
#[test]
fn build_ids_are_the_ones_readelf_prints() {
    for path in [std::env::current_exe().unwrap(), "/bin/sh".into()] {
        let path = std::fs::canonicalize(path).unwrap();
        let out = std::process::Command::new("readelf")
            .arg("-n")
            .arg(&path)
            .output()
            .expect("readelf (binutils)");
        let text = String::from_utf8_lossy(&out.stdout);
        let expected = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .map(str::to_string);
        assert!(expected.is_some(), "{}: {text}", path.display());
        assert_eq!(build_id(&path), expected, "{}", path.display());
    }
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not an ELF file").unwrap();
    assert_eq!(build_id(&text), None);
    assert_eq!(build_id(&dir.path().join("gone")), None);
}

/// A library without a build ID, but with a SystemTap probe note (type 3 as well, named
/// `stapsdt`, as libstdc++ leaves in what links it): no build ID, as readelf says.
#[test]
fn a_probe_note_is_not_a_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("probe.c");
    let lib = dir.path().join("libprobe.so");
    std::fs::write(
        &src,
        "__asm__(\".pushsection .note.stapsdt,\\\"\\\",@note\\n\"\n\
         \".long 8\\n.long 4\\n.long 3\\n.asciz \\\"stapsdt\\\"\\n.balign 4\\n\"\n\
         \".long 0x12345678\\n.popsection\\n\");\n\
         int probe(void) { return 1; }\n",
    )
    .unwrap();
    match Command::new("gcc")
        .args(["-shared", "-fPIC", "-Wl,--build-id=none", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            crate::skip_test!("cannot run gcc ({e})");
            return;
        }
    }
    let notes = Command::new("readelf")
        .arg("-n")
        .arg(&lib)
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&notes.stdout);
    assert!(
        notes.contains("stapsdt") && !notes.contains("Build ID"),
        "{notes}"
    );
    assert_eq!(build_id(&lib), None);
}
