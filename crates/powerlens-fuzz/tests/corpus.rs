//! Every input of every target's corpus (real files) and regressions (the inputs of crashes
//! found and fixed) runs through its target: the fuzz campaigns' findings stay fixed, and
//! the seeds keep reaching the parsers (a seed the parser now refuses is a changed format,
//! which this test does not hide: the targets check what an accepted input must satisfy).

use std::time::Duration;

use powerlens_fuzz::limits::LimitedAlloc;
use powerlens_fuzz::{corpus_dir, driver, inputs_in, regressions_dir, TARGETS};

#[global_allocator]
static ALLOC: LimitedAlloc = LimitedAlloc;

#[test]
fn every_target_has_a_seed_corpus() {
    for t in TARGETS {
        let seeds = inputs_in(&corpus_dir(t.name));
        assert!(
            !seeds.is_empty(),
            "{}: no seeds in {} (fuzz/make_seeds.py makes them)",
            t.name,
            corpus_dir(t.name).display()
        );
    }
}

#[test]
fn corpus_and_regressions_run_clean() {
    driver::quiet_panics();
    let mut failures = Vec::new();
    let mut count = 0;
    for t in TARGETS {
        for dir in [corpus_dir(t.name), regressions_dir(t.name)] {
            for (path, bytes) in inputs_in(&dir) {
                count += 1;
                if let Err(message) = driver::replay(t, &bytes, Duration::from_secs(120)) {
                    failures.push(format!("{} {}: {message}", t.name, path.display()));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} inputs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{count} corpus and regression inputs ran clean");
}
