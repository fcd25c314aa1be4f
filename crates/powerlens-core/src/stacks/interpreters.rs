//! Interpreter time in the function view. A CPython program's innermost frames are the
//! interpreter's own C code (`_PyEval_EvalFrameDefault`, object allocation, dictionary
//! lookups): dozens of rows no Python developer can act on, and none names their Python
//! function. Python 3.12 and later name them when run with `-X perf` (or
//! `PYTHONPERFSUPPORT=1`, which `record --jit-names` sets): each Python function gets a
//! trampoline, named `py::function:/path/file.py` in the process's perf map, on the stack
//! above the interpreter frames that run it. So the function view treats the interpreter
//! as runtime, not the program: its frames are charged to the innermost frame above them
//! that is the program's (a Python function's trampoline, a C extension's function), or,
//! without one, to one labelled row per interpreter that says how to get names. Stack
//! views keep the interpreter's frames.

use super::{short, Function};

/// CPython's version from its executable's or library's file name (`python3.11`,
/// `libpython3.12.so.1.0`, `python3.11d`); `None` for any other module.
pub fn cpython_version(module: &str) -> Option<(u32, u32)> {
    let file = short(module);
    let rest = file
        .strip_prefix("libpython")
        .or_else(|| file.strip_prefix("python"))?;
    let (major, rest) = rest.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    // After the minor: nothing, an ABI flag (`d`, `t`) or the library's `.so`.
    let tail = &rest[minor.len()..];
    if !(tail.is_empty() || tail.starts_with(".so") || tail.chars().all(|c| c.is_ascii_lowercase()))
    {
        return None;
    }
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The row that stands for the time of the interpreter in `module` when no Python
/// function names it: `python3.11 [interpreter: run with Python ≥ 3.12 -X perf for
/// function names]`.
pub fn interpreter_row(module: &str) -> Option<Function> {
    let (major, minor) = cpython_version(module)?;
    let hint = if (major, minor) >= (3, 12) {
        "run with -X perf (or PYTHONPERFSUPPORT=1) for function names"
    } else {
        "run with Python ≥ 3.12 -X perf for function names"
    };
    Some(Function {
        name: format!("python{major}.{minor} [interpreter: {hint}]"),
        module: module.to_string(),
        resolved: false,
        system: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::test_support::resolve;

    const PYTHON311: &str = "/usr/bin/python3.11";
    const PYTHON312: &str = "/usr/local/bin/python3.12";
    const MAP: &str = "/tmp/perf-4242.map";
    const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

    #[test]
    fn interpreters_are_recognised_by_file_name() {
        assert_eq!(cpython_version(PYTHON311), Some((3, 11)));
        assert_eq!(
            cpython_version("/usr/lib/libpython3.12.so.1.0"),
            Some((3, 12))
        );
        assert_eq!(cpython_version("/opt/py/bin/python3.13t"), Some((3, 13)));
        for not in [
            "/usr/bin/python",
            "/usr/bin/python3",
            "/srv/python3.11-tool.sh",
            LIBC,
        ] {
            assert_eq!(cpython_version(not), None, "{not}");
        }
    }

    /// CPython 3.11 (no perf trampoline): the interpreter's frames, named or not, are one
    /// labelled row in the function view; a C extension's own code stays itself.
    #[test]
    fn python_311_interpreter_time_is_one_labelled_row() {
        let stacks = resolve(&[
            (
                0,
                vec![
                    (PYTHON311, Some("_PyEval_EvalFrameDefault")),
                    (PYTHON311, None),
                    (PYTHON311, Some("Py_RunMain")),
                ],
            ),
            (
                1,
                vec![
                    (LIBC, Some("malloc")),
                    (PYTHON311, Some("PyObject_Malloc")),
                    (PYTHON311, Some("_PyEval_EvalFrameDefault")),
                ],
            ),
            (
                2,
                vec![
                    ("/srv/venv/lib/_speedups.so", Some("checksum_block")),
                    (PYTHON311, Some("_PyEval_EvalFrameDefault")),
                ],
            ),
        ]);
        let name = |id| {
            stacks
                .function(stacks.innermost_user(id).unwrap())
                .name
                .clone()
        };
        let label = "python3.11 [interpreter: run with Python ≥ 3.12 -X perf for function names]";
        assert_eq!(name(0), label);
        assert_eq!(name(1), label);
        assert_eq!(
            stacks.innermost_user(0),
            stacks.innermost_user(1),
            "one row"
        );
        assert_eq!(name(2), "checksum_block");
        // The stacks themselves keep the interpreter's names (lock waits read them).
        assert_eq!(stacks.describe(1)[1], "PyObject_Malloc (python3.11)");
    }

    /// Python 3.12 with perf trampolines: the interpreter's frames are charged to the
    /// innermost Python function above them, named from the perf map.
    #[test]
    fn python_312_frames_go_to_the_python_function_they_run() {
        let stacks = resolve(&[
            (
                0,
                vec![
                    (PYTHON312, Some("_PyEval_EvalFrameDefault")),
                    (MAP, Some("py::checksum:/srv/app/util.py")),
                    (PYTHON312, Some("_PyEval_EvalFrameDefault")),
                    (MAP, Some("py::<module>:/srv/app/main.py")),
                ],
            ),
            // Without -X perf, 3.12's own hint.
            (1, vec![(PYTHON312, Some("_PyEval_EvalFrameDefault"))]),
        ]);
        let name = |id| {
            stacks
                .function(stacks.innermost_user(id).unwrap())
                .name
                .clone()
        };
        assert_eq!(name(0), "py::checksum:/srv/app/util.py");
        assert_eq!(
            name(1),
            "python3.12 [interpreter: run with -X perf (or PYTHONPERFSUPPORT=1) for function names]"
        );
    }
}
