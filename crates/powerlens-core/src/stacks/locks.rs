//! Waits for an interpreter's global lock (CPython's GIL, Ruby's GVL), told apart from
//! other blocking by the stacks threads blocked at: threads that take turns on such a lock
//! run one at a time however many there are, so advice to split work over threads is
//! wrong for them (docs/ADVICE.md, `interpreter-lock`).
//!
//! A blocking stack is a lock wait when, under the wait's plumbing (kernel and C-runtime
//! frames), the first frame is one of the runtime's lock-taking functions (`take_gil`,
//! `PyEval_RestoreThread`, …). Distributions strip static functions such as `take_gil`
//! (Debian's `python3.11` keeps only its dynamic symbols), so for CPython a second form is
//! recognised too: the plumbing is a condition-variable wait (`pthread_cond_wait`,
//! `pthread_cond_timedwait`) called straight from the interpreter's own unnamed code. On
//! Linux CPython waits on condition variables only for the GIL: its locks (`Lock`,
//! `Condition`, `Queue`, `join`) wait on semaphores, its sleeps in `clock_nanosleep` or
//! `select`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::attribution::StackCharges;
use super::grid::target_charges;
use super::{is_kernel_or_c_runtime, short, Function, ResolvedStacks, NO_STACK};
use crate::sched::event::{StackId, Tid};
use crate::sched::report::ThreadRow;

/// A runtime whose threads share one global lock.
pub struct RuntimeLock {
    /// `CPython`, `Ruby`.
    pub runtime: &'static str,
    /// What the lock is called, for sentences.
    pub lock: &'static str,
    /// Functions a thread blocks in while it waits to take the lock.
    pub functions: &'static [&'static str],
    /// File-name prefixes of the interpreter's executable and library, for waits whose
    /// lock function has no symbol; empty where that form is not known to be specific.
    pub modules: &'static [&'static str],
    /// Name prefixes of the interpreter's exported functions, which identify its code in
    /// an executable of another name (an application embedding it).
    pub api_prefixes: &'static [&'static str],
    /// What to do instead of more threads.
    pub suggestion: &'static str,
}

/// The runtimes recognised. CPython: `take_gil`/`drop_gil` (Python/ceval_gil.c, static)
/// and the exported `PyEval_RestoreThread`, `PyEval_AcquireThread`, `PyEval_AcquireLock`,
/// `PyGILState_Ensure` that call it. Ruby: `gvl_acquire_common` (up to 3.2) and
/// `thread_sched_wait_running_turn` (3.3 on), both in thread_pthread.c.
pub const RUNTIMES: &[RuntimeLock] = &[
    RuntimeLock {
        runtime: "CPython",
        lock: "global interpreter lock (GIL)",
        functions: &[
            "take_gil",
            "drop_gil",
            "PyEval_RestoreThread",
            "PyEval_AcquireThread",
            "PyEval_AcquireLock",
            "PyGILState_Ensure",
        ],
        modules: &["python", "libpython"],
        api_prefixes: &["Py", "_Py"],
        suggestion: "use processes instead of threads (multiprocessing, concurrent.futures.ProcessPoolExecutor), or move the hot loop into native code that releases the GIL (NumPy, a C, Cython or Rust extension); a free-threaded CPython (3.13t) has no GIL",
    },
    RuntimeLock {
        runtime: "Ruby",
        lock: "global VM lock (GVL)",
        functions: &["gvl_acquire_common", "gvl_acquire", "thread_sched_wait_running_turn"],
        modules: &[],
        api_prefixes: &[],
        suggestion: "use processes (fork, Process.spawn) or Ractors instead of threads, or move the hot loop into a native extension that releases the GVL",
    },
];

/// One thread's waits for a runtime's global lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockWait {
    pub tid: Tid,
    /// `CPython`, `Ruby` (an index into [`RUNTIMES`] by name).
    pub runtime: String,
    /// The function the waits went through, `take_gil (libpython3.11.so.1.0)`, or the
    /// interpreter's unnamed code, `python3.11 [no symbols] (python3.11)`.
    pub function: String,
    /// True when the lock function had no symbol and the wait was recognised by its shape.
    pub inferred: bool,
    pub wait_s: f64,
    pub sync_switches: u64,
}

/// What a wait's plumbing is: the kernel and C runtime frames under the first frame of
/// anything else. `None` when the stack is only plumbing.
fn first_above_plumbing(stacks: &ResolvedStacks, id: StackId) -> Option<(usize, bool)> {
    let frames = stacks.frames(id);
    let mut condvar = false;
    for (i, f) in frames.iter().enumerate() {
        let f = stacks.function(*f);
        if !is_kernel_or_c_runtime(&f.module) {
            return Some((i, condvar));
        }
        condvar |= f.name.contains("pthread_cond_") && f.name.contains("wait");
    }
    None
}

fn module_matches(lock: &RuntimeLock, f: &Function) -> bool {
    let file = short(&f.module);
    lock.modules.iter().any(|m| file.starts_with(m))
}

/// Which runtime's lock a blocking stack waits for, whether by shape only, and the frame
/// named as the culprit.
fn lock_of(stacks: &ResolvedStacks, id: StackId) -> Option<(&'static RuntimeLock, bool, String)> {
    let (at, condvar) = first_above_plumbing(stacks, id)?;
    let frames = stacks.frames(id);
    let first = stacks.function(frames[at]);
    let culprit = format!("{} ({})", first.name, short(&first.module));
    if first.resolved {
        return RUNTIMES
            .iter()
            .find(|r| r.functions.contains(&first.name.as_str()))
            .map(|r| (r, false, culprit));
    }
    if !condvar {
        return None;
    }
    // Unnamed code straight above a condition-variable wait: the interpreter's, when its
    // file is the interpreter's or its next named caller in the same file is its API.
    let runtime = RUNTIMES.iter().find(|r| {
        !r.modules.is_empty()
            && (module_matches(r, first)
                || frames[at + 1..]
                    .iter()
                    .map(|f| stacks.function(*f))
                    .find(|f| f.resolved && f.module == first.module)
                    .is_some_and(|f| r.api_prefixes.iter().any(|p| f.name.starts_with(p))))
    })?;
    Some((runtime, true, culprit))
}

/// Every target thread's blocking waits for a runtime's global lock, per thread (the
/// function it waited in most), in thread order. Threads with none are left out.
pub fn interpreter_lock_waits(
    charges: &StackCharges,
    threads: &[ThreadRow],
    stacks: &ResolvedStacks,
) -> Vec<LockWait> {
    // (tid) → (runtime, per culprit (wait ns, switches, inferred)).
    type Culprits = BTreeMap<String, (u64, u64, bool)>;
    let mut acc: BTreeMap<Tid, (&'static str, Culprits)> = BTreeMap::new();
    for (t, stack, m) in target_charges(charges, threads) {
        if stack == NO_STACK || m.sync_switches == 0 {
            continue;
        }
        let Some((runtime, inferred, culprit)) = lock_of(stacks, stack) else {
            continue;
        };
        let entry = acc
            .entry(t.tid)
            .or_insert_with(|| (runtime.runtime, BTreeMap::new()));
        let c = entry.1.entry(culprit).or_insert((0, 0, inferred));
        c.0 += m.wait_ns;
        c.1 += m.sync_switches;
    }
    acc.into_iter()
        .map(|(tid, (runtime, culprits))| {
            let (function, &(_, _, inferred)) = culprits
                .iter()
                .max_by_key(|(name, c)| (c.0, std::cmp::Reverse((*name).clone())))
                .expect("a thread is in the map only with a wait");
            LockWait {
                tid,
                runtime: runtime.to_string(),
                function: function.clone(),
                inferred,
                wait_s: culprits.values().map(|c| c.0).sum::<u64>() as f64 / 1e9,
                sync_switches: culprits.values().map(|c| c.1).sum(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::attribution::StackMetrics;
    use crate::stacks::test_support::{resolve, NamedFrame};

    const KERNEL: &str = "[kernel]";
    const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    const LIBPYTHON: &str = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0";
    const PYTHON: &str = "/usr/bin/python3.11";
    const APP: &str = "/opt/app/bin/app";

    fn thread(tid: Tid) -> ThreadRow {
        serde_json::from_value(serde_json::json!({
            "tid": tid, "pid": 100, "comm": "python3", "cpu_time_s": 0.5,
            "cpu_time_source": "sched_runtime", "sync_switches": 0, "preempt_switches": 0,
        }))
        .expect("a minimal thread row")
    }

    fn charge(c: &mut StackCharges, tid: Tid, stack: StackId, wait_ms: u64, switches: u64) {
        c.by_thread_stack.insert(
            (tid, stack),
            StackMetrics {
                wait_ns: wait_ms * 1_000_000,
                sync_switches: switches,
                ..Default::default()
            },
        );
    }

    /// A condition-variable wait: the plumbing under a GIL wait.
    fn cond_wait(above: &[NamedFrame<'static>]) -> Vec<NamedFrame<'static>> {
        let mut frames = vec![
            (KERNEL, Some("__schedule")),
            (LIBC, Some("__futex_abstimed_wait_common")),
            (LIBC, Some("___pthread_cond_timedwait64")),
        ];
        frames.extend_from_slice(above);
        frames
    }

    /// The stacks of a GIL-bound program as recorded on this project's VM, with
    /// symbols (pyenv's libpython) and without (Debian's python3.11), next to waits that
    /// are not the GIL: `Thread.join` on a semaphore, a sleep, and a condition variable
    /// of an application that is not an interpreter.
    #[test]
    fn gil_waits_with_and_without_symbols_and_others_not() {
        let s = resolve(&[
            (
                0,
                cond_wait(&[
                    (LIBPYTHON, Some("take_gil")),
                    (LIBPYTHON, Some("_PyEval_EvalFrameDefault")),
                ]),
            ),
            (
                1,
                cond_wait(&[(PYTHON, None), (PYTHON, Some("_PyEval_EvalFrameDefault"))]),
            ),
            (
                2,
                cond_wait(&[(PYTHON, None), (PYTHON, Some("PyEval_RestoreThread"))]),
            ),
            (
                3,
                vec![
                    (KERNEL, Some("__schedule")),
                    (LIBC, Some("__new_sem_wait_slow64")),
                    (LIBPYTHON, Some("PyThread_acquire_lock_timed")),
                ],
            ),
            (
                4,
                vec![
                    (KERNEL, Some("__schedule")),
                    (LIBC, Some("clock_nanosleep")),
                    (PYTHON, None),
                    (PYTHON, Some("_PyEval_EvalFrameDefault")),
                ],
            ),
            (5, cond_wait(&[(APP, None), (APP, Some("worker_loop"))])),
        ]);
        let mut c = StackCharges::default();
        charge(&mut c, 1, 0, 900, 300); // tid 1: the GIL, named
        charge(&mut c, 1, 3, 100, 2); //   and a join
        charge(&mut c, 2, 1, 700, 200); // tid 2: the GIL, unnamed, in two places
        charge(&mut c, 2, 2, 150, 30);
        charge(&mut c, 3, 4, 500, 5); // tid 3: sleeps
        charge(&mut c, 4, 5, 800, 90); // tid 4: an application's condition variable
        charge(&mut c, 9, 0, 999, 9); // tid 9: not a target thread
        let threads: Vec<ThreadRow> = [1, 2, 3, 4].into_iter().map(thread).collect();
        let w = interpreter_lock_waits(&c, &threads, &s);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(
            (
                w[0].tid,
                w[0].runtime.as_str(),
                w[0].function.as_str(),
                w[0].inferred
            ),
            (1, "CPython", "take_gil (libpython3.11.so.1.0)", false)
        );
        assert!(
            (w[0].wait_s - 0.9).abs() < 1e-12 && w[0].sync_switches == 300,
            "{w:?}"
        );
        assert_eq!(
            (w[1].tid, w[1].function.as_str(), w[1].inferred),
            (2, "python3.11 [no symbols] (python3.11)", true)
        );
        assert!(
            (w[1].wait_s - 0.85).abs() < 1e-12 && w[1].sync_switches == 230,
            "{w:?}"
        );
    }

    /// An interpreter embedded in an application: its unnamed code is the application's
    /// file, recognised by the CPython API it is called from.
    #[test]
    fn an_embedded_interpreter_is_recognised_by_its_api() {
        let s = resolve(&[(0, cond_wait(&[(APP, None), (APP, Some("PyEval_EvalCode"))]))]);
        let mut c = StackCharges::default();
        charge(&mut c, 1, 0, 400, 40);
        let w = interpreter_lock_waits(&c, &[thread(1)], &s);
        assert_eq!(w.len(), 1);
        assert!(w[0].inferred && w[0].runtime == "CPython", "{w:?}");
    }
}
