//! Which modules belong to the system rather than to the program being analysed, for the
//! "user functions" view: its frame is the innermost one in the program's own code, so a
//! sleep is charged to the function that called `nanosleep`, not to libc.

use std::path::Path;

/// Directories whose contents are the distribution's, not the program's.
const SYSTEM_DIRS: &[&str] = &["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/libexec"];

/// File-name prefixes of the C runtime and the dynamic loader, system code wherever they
/// are installed (Nix, Guix and containers put them outside `/usr/lib`).
const RUNTIME_PREFIXES: &[&str] = &[
    "libc.so",
    "libc-",
    "libpthread.so",
    "libpthread-",
    "libm.so",
    "libm-",
    "libdl.so",
    "librt.so",
    "ld-linux",
    "ld-musl",
    "ld64.so",
    "libgcc_s.so",
    "libstdc++.so",
];

/// Which user-space code the function view counts as the program's: the innermost frame
/// of it is charged, frames outside it fold into their caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FunctionScope {
    /// Every executable and library: only the kernel, the vDSO and the C runtime's
    /// plumbing ([`is_kernel_or_c_runtime`]: libc's system-call wrappers, the loader)
    /// fold into their caller. A thin front end's time goes to the library doing the
    /// work (xz's to liblzma).
    #[default]
    Modules,
    /// The program's own code only: the distribution's libraries fold into their caller
    /// too ([`is_system_module`]; `report --program-only`).
    ProgramOnly,
}

impl FunctionScope {
    /// Whether frames of `module` fold into their caller in this view.
    pub fn folds(self, module: &str) -> bool {
        match self {
            FunctionScope::Modules => is_kernel_or_c_runtime(module),
            FunctionScope::ProgramOnly => is_system_module(module, None),
        }
    }
}

/// True for modules that are not the program's own code: the kernel, the vDSO, the C
/// runtime and dynamic loader, and anything in the system library directories — except
/// the main executable itself and libraries shipped in its own directory
/// (`/usr/lib/firefox/libxul.so` next to `/usr/lib/firefox/firefox`).
pub fn is_system_module(path: &str, main_executable: Option<&str>) -> bool {
    if is_kernel_or_c_runtime(path) && main_executable != Some(path) {
        return true;
    }
    if main_executable == Some(path) {
        return false;
    }
    let file = Path::new(path);
    if !SYSTEM_DIRS.iter().any(|dir| file.starts_with(dir)) {
        return false;
    }
    !main_executable.is_some_and(|main| beside_main_executable(file, Path::new(main)))
}

/// True for the kernel, the vDSO and the C runtime and dynamic loader (libc, libpthread,
/// ld.so, …) wherever installed: what every blocking call passes through, below any
/// program's, runtime's or interpreter's own code.
pub fn is_kernel_or_c_runtime(path: &str) -> bool {
    if path.starts_with("[kernel") || matches!(path, "[vdso]" | "[vsyscall]" | "[uprobes]") {
        return true;
    }
    let name = Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    RUNTIME_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// True when `file` sits in the main executable's own directory and that directory is an
/// application's (e.g. `/usr/lib/firefox`), not a shared library directory.
fn beside_main_executable(file: &Path, main: &Path) -> bool {
    let (Some(dir), Some(main_dir)) = (file.parent(), main.parent()) else {
        return false;
    };
    dir == main_dir && !is_shared_library_dir(dir)
}

/// `/usr/lib`, `/lib64`, and multiarch directories like `/usr/lib/x86_64-linux-gnu`.
fn is_shared_library_dir(dir: &Path) -> bool {
    if SYSTEM_DIRS.iter().any(|d| dir == Path::new(d)) {
        return true;
    }
    let triplet = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains("-linux-"));
    triplet
        && dir
            .parent()
            .is_some_and(|p| SYSTEM_DIRS.iter().any(|d| p == Path::new(d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_kernel_and_system_directories_are_system() {
        for path in [
            "[kernel]",
            "[vdso]",
            "[vsyscall]",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/x86_64-linux-gnu/libpthread.so.0",
            "/usr/lib/x86_64-linux-gnu/libm.so.6",
            "/lib64/ld-linux-x86-64.so.2",
            "/usr/lib/x86_64-linux-gnu/libssl.so.3",
            "/usr/libexec/some-helper",
            "/nix/store/abc-glibc-2.39/lib/libc.so.6",
        ] {
            assert!(is_system_module(path, Some("/opt/app/bin/app")), "{path}");
            assert!(is_system_module(path, None), "{path}");
        }
    }

    #[test]
    fn the_programs_own_code_is_not_system() {
        let main = "/home/u/proj/target/release/app";
        for path in [
            main,
            "/opt/app/lib/libfoo.so",
            "/home/u/proj/target/release/deps/libbar.so",
            "/usr/local/lib/libmine.so",
            "/usr/lib64-old/libx.so",
            "[anon]",
        ] {
            assert!(!is_system_module(path, Some(main)), "{path}");
        }
    }

    #[test]
    fn a_main_executable_under_usr_lib_keeps_its_own_libraries() {
        let main = "/usr/lib/firefox/firefox";
        assert!(!is_system_module(main, Some(main)));
        assert!(!is_system_module("/usr/lib/firefox/libxul.so", Some(main)));
        assert!(is_system_module("/usr/lib/firefox/libxul.so", None));
        // The C runtime stays system even beside the executable.
        assert!(is_system_module("/usr/lib/firefox/libc.so.6", Some(main)));
        // A tool living in the multiarch directory does not claim every library there.
        let tool = "/usr/lib/x86_64-linux-gnu/tool";
        assert!(!is_system_module(tool, Some(tool)));
        assert!(is_system_module(
            "/usr/lib/x86_64-linux-gnu/libz.so.1",
            Some(tool)
        ));
    }
}
