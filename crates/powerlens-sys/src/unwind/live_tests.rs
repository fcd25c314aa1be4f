//! The proof that DWARF unwinding recovers what frame pointers lose on this machine: a C
//! program built with frame pointers, blocked in glibc (built without them), recorded
//! system-wide with stacks on sched_switch, its mappings learnt from MMAP2 records only.

use std::io::{BufRead, BufReader, Write};
use std::ops::Range;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use object::{Object, ObjectSymbol};

use super::module::ModuleSections;
use super::UserUnwinder;
use crate::trace::collector::tests::with_tracefs;
use crate::trace::{Collected, Collector, CollectorOptions};

/// `short_sleeper` sleeps in nanosleep (glibc's clock_nanosleep pushes no frame, so the
/// FP chain skips short_sleeper); `condvar_waiter` blocks in pthread_cond_wait (glibc's
/// futex wait uses rbp as a general register, so the FP chain ends there). Each runs in a
/// thread named after it; main signals the condition variable. It prints "ready" and
/// waits for a line on stdin before starting, so that the test can take its mappings.
const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long ticks;
static volatile int waiter_done;

__attribute__((noinline)) void short_sleeper(int n) {
    struct timespec ts = {0, 200000};
    for (int i = 0; i < n; i++)
        nanosleep(&ts, NULL);
}

__attribute__((noinline)) void condvar_waiter(int n) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n; i++) {
        long seen = ticks;
        while (ticks == seen)
            pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
}

static void *sleeper_main(void *arg) {
    prctl(PR_SET_NAME, "pl-short");
    short_sleeper((int)(long)arg);
    return NULL;
}

static void *waiter_main(void *arg) {
    prctl(PR_SET_NAME, "pl-condvar");
    condvar_waiter((int)(long)arg);
    waiter_done = 1;
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200;
    printf("ready\n");
    fflush(stdout);
    char c;
    if (read(0, &c, 1) != 1)
        return 1;
    pthread_t a, b;
    pthread_create(&a, NULL, sleeper_main, (void *)(long)n);
    pthread_create(&b, NULL, waiter_main, (void *)(long)n);
    struct timespec ts = {0, 200000};
    while (!waiter_done) {
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&mu);
        ticks++;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
"#;

/// Builds [`PROGRAM`] into `dir`; `None` (after saying why) when gcc is missing.
fn build_program(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let source = dir.join("stacks.c");
    let exe = dir.join("stacks");
    std::fs::write(&source, PROGRAM).unwrap();
    let status = Command::new("gcc")
        .args(["-O2", "-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .status();
    match status {
        Ok(s) if s.success() => Some(exe),
        Ok(s) => panic!("gcc failed to build the test program: {s}"),
        Err(e) => {
            crate::skip_test!("gcc is needed to build the test program ({e})");
            None
        }
    }
}

/// The stated address ranges of the functions `names` in `exe`'s symbol table.
fn function_ranges(exe: &std::path::Path, names: &[&str]) -> Vec<Range<u64>> {
    let data = std::fs::read(exe).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    names
        .iter()
        .map(|name| {
            let sym = elf
                .symbols()
                .find(|s| s.name() == Ok(name))
                .unwrap_or_else(|| panic!("{name} not in the symbol table"));
            assert!(sym.size() > 0, "{name} has no size");
            sym.address()..sym.address() + sym.size()
        })
        .collect()
}

/// Per thread of the program: its blocked switch-outs, how many of their unwound (and
/// frame-pointer) chains pass through its function.
#[derive(Debug, Default)]
struct Tally {
    outs: u32,
    unwound: u32,
    fp: u32,
}

#[test]
#[ignore = "live: traces the real kernel (root)"]
fn live_dwarf_unwinding_finds_the_frames_frame_pointers_lose() {
    with_tracefs(|roots| {
        let dir = tempfile::tempdir().unwrap();
        let Some(exe) = build_program(dir.path()) else {
            return;
        };
        let exe_path = exe.to_str().unwrap().to_string();
        let ranges = function_ranges(&exe, &["short_sleeper", "condvar_waiter"]);
        let sections = ModuleSections::read_file(&exe).unwrap();
        let options = CollectorOptions {
            buffer_pages: 512,
            stack_events: vec!["sched/sched_switch".to_string()],
            mmap_records: true,
            ..Default::default()
        };
        let mut c = Collector::open(roots, &["sched/sched_switch"], options).unwrap();
        assert!(c.has_mmap_records(), "{:?}", c.unavailable());
        let mut unwinder = UserUnwinder::new(roots);
        c.enable().unwrap();
        let n = 300;
        let mut child = Command::new(&exe)
            .arg(n.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");

        // Mappings from MMAP2 records only: exec clears, the loader's mmaps fill in.
        let mut fp = Vec::new();
        let mut user = Vec::new();
        let mut tallies = [Tally::default(), Tally::default()];
        let mut unwind_time = Duration::ZERO;
        let mut unwound_stacks = 0u32;
        let mut sample: Option<(crate::trace::UserRegs, Vec<u8>, Vec<u64>)> = None;
        let mut drain = |c: &mut Collector, unwinder: &mut UserUnwinder| {
            c.drain_all(|collected| match collected {
                Collected::Comm(comm) if comm.exec => unwinder.exec(comm.pid, comm.time_ns),
                Collected::Mmap(m) if m.pid == pid => {
                    unwinder.add_mapping(m.pid, m.mapping, m.time_ns)
                }
                Collected::Trace(r) if r.pid == pid => {
                    let d = r.decoded();
                    let thread = match d.str("prev_comm").as_deref() {
                        Some("pl-short") => 0,
                        Some("pl-condvar") => 1,
                        _ => return,
                    };
                    // Blocked, not preempted or exiting (TASK_DEAD 0x80, EXIT_* 0x10/0x20).
                    let state = d.i64("prev_state").unwrap();
                    if state & 0xff == 0 || state & 0xb0 != 0 {
                        return;
                    }
                    r.callchain.user_ips(&mut fp);
                    let start = Instant::now();
                    unwinder.user_frames(r.pid, r.user_regs, r.user_stack, &fp, &mut user);
                    unwind_time += start.elapsed();
                    unwound_stacks += 1;
                    if sample.is_none() && thread == 1 {
                        sample = Some((r.user_regs.unwrap(), r.user_stack.to_vec(), fp.clone()));
                    }
                    let in_function = |chain: &[u64]| {
                        chain.iter().enumerate().any(|(depth, &addr)| {
                            // Return addresses point after the call: look up addr - 1.
                            let addr = if depth > 0 { addr - 1 } else { addr };
                            unwinder.maps(pid).iter().any(|m| {
                                m.path == exe_path
                                    && m.contains(addr)
                                    && ranges[thread]
                                        .contains(&(addr.wrapping_sub(sections.base_avma(m))))
                            })
                        })
                    };
                    let tally = &mut tallies[thread];
                    tally.outs += 1;
                    tally.unwound += u32::from(in_function(&user));
                    tally.fp += u32::from(in_function(&fp));
                }
                _ => {}
            });
        };
        drain(&mut c, &mut unwinder);
        assert!(
            unwinder.maps(pid).iter().any(|m| m.path == exe_path),
            "no MMAP2 record of the program: {:?}",
            unwinder.maps(pid)
        );
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        while child.try_wait().unwrap().is_none() {
            c.wait(Duration::from_millis(20)).unwrap();
            drain(&mut c, &mut unwinder);
        }
        c.disable().unwrap();
        drain(&mut c, &mut unwinder);
        let stats = unwinder.stats();
        eprintln!(
            "short_sleeper {:?}, condvar_waiter {:?}; {stats:?}; lost {:?}; \
             {unwound_stacks} stacks unwound in {unwind_time:?} ({:.1} µs each, modules loaded on the way)",
            tallies[0],
            tallies[1],
            c.lost(),
            unwind_time.as_secs_f64() * 1e6 / unwound_stacks.max(1) as f64
        );
        assert_eq!(
            c.total_lost(),
            0,
            "lost records would make the counts partial"
        );
        assert_eq!(
            stats.maps_refreshes, 0,
            "MMAP2 records alone should describe the process"
        );
        for (name, tally) in ["short_sleeper", "condvar_waiter"].iter().zip(&tallies) {
            assert!(
                tally.outs >= n / 2,
                "{name}: only {} switch-outs",
                tally.outs
            );
            assert!(
                tally.unwound * 100 >= tally.outs * 95,
                "{name} in {} of {} unwound stacks",
                tally.unwound,
                tally.outs
            );
            assert_eq!(
                tally.fp, 0,
                "{name} in the frame-pointer chain: the test proves nothing"
            );
        }

        // Steady-state cost: one recorded condvar stack again and again (rule cache warm,
        // modules loaded), as the drain thread sees a busy program's stacks.
        let (regs, stack, fp_chain) = sample.expect("a condvar_waiter stack");
        let rounds = 20_000;
        let start = Instant::now();
        for _ in 0..rounds {
            unwinder.user_frames(pid, Some(regs), &stack, &fp_chain, &mut user);
        }
        let each = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
        eprintln!(
            "steady state: {each:.2} µs per stack of {} frames ({} stack bytes)",
            user.len(),
            stack.len()
        );
    });
}
