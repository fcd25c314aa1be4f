//! Fuzz targets for every parser of outside input, and the fuzzer that runs them.
//!
//! A target is a plain `fn(&[u8])` that feeds its bytes to one parser through the same
//! public API the binary uses, and panics when the parser breaks one of its promises
//! (a panic of the parser itself, or a check of the target: two decoders that disagree,
//! a figure that is not finite). Each target has a corpus seeded from real files in
//! `fuzz/corpus/TARGET/` and the inputs of fixed crashes in `fuzz/regressions/TARGET/`;
//! `cargo test -p powerlens-fuzz` replays both, and [`driver::fuzz`] mutates them for a
//! time budget (`scripts/fuzz.sh TARGET SECONDS`). docs/RELIABILITY.md says what each
//! target reaches and what the campaigns found.
//!
//! Adding a target: a `fn(&[u8])` in `targets/`, a line in [`TARGETS`] and a corpus
//! directory with a few real inputs.

pub mod coverage;
pub mod driver;
pub mod limits;
pub mod mutate;
pub mod targets;
pub mod tree;

use std::path::{Path, PathBuf};

/// One fuzz target.
pub struct Target {
    /// Also the name of its corpus and regression directories.
    pub name: &'static str,
    /// The parser it reaches, for `--list`.
    pub about: &'static str,
    pub run: fn(&[u8]),
    /// Tokens the mutator inserts (keywords, field names) besides its generic ones.
    pub dict: &'static [&'static str],
}

/// Every target, in the order `--list` shows them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "chunk",
        about: "event chunks of a recording (powerlens-core codec: decode_chunk, decode_chunk_in_context)",
        run: targets::chunk::run,
        dict: &[],
    },
    Target {
        name: "recording",
        about: "a whole recording file (SQLite): open, content check, metadata, threads, samples, stacks and symbol cache, the replay of every event into the analyses `report` runs",
        run: targets::recording::run,
        dict: targets::recording::DICT,
    },
    Target {
        name: "stack_frames",
        about: "the call-stack blobs of a recording's stacks table (decode_frames)",
        run: targets::stack_frames::run,
        dict: &[],
    },
    Target {
        name: "perf_map",
        about: "a managed runtime's perf map (/tmp/perf-PID.map) that names JIT code",
        run: targets::runtimes::perf_map,
        dict: targets::runtimes::PERF_MAP_DICT,
    },
    Target {
        name: "jitdump",
        about: "a managed runtime's jitdump file (jit-PID.dump): code loads, moves and closes with their times",
        run: targets::runtimes::jitdump,
        dict: &[],
    },
    Target {
        name: "results",
        about: "a whole results database file (SQLite): open, list, get every result",
        run: targets::results::run,
        dict: targets::results::DICT,
    },
    Target {
        name: "tracefs_format",
        about: "tracefs `format` files, and raw tracepoint payloads decoded by them",
        run: targets::tracefs::run,
        dict: targets::tracefs::DICT,
    },
    Target {
        name: "sysfs",
        about: "sysfs readers on a fixture tree: topology, cpuidle, cpufreq, powercap, perf power PMU, battery, hwmon, tracefs ids, perf_event_paranoid",
        run: targets::sysfs::run,
        dict: targets::sysfs::DICT,
    },
    Target {
        name: "procfs",
        about: "procfs readers on a fixture tree: /proc/stat, /proc/PID/task/TID/{stat,status}, children, the process tree",
        run: targets::procfs::run,
        dict: targets::procfs::DICT,
    },
    Target {
        name: "maps",
        about: "/proc/PID/maps (executable mappings for stack unwinding)",
        run: targets::maps::run,
        dict: targets::maps::DICT,
    },
    Target {
        name: "compare_csv",
        about: "`compare --from-csv` (label,seconds,watts|joules), then the comparison",
        run: targets::compare_csv::run,
        dict: targets::compare_csv::DICT,
    },
    Target {
        name: "dvfs_trace",
        about: "`dvfs simulate` trace CSV (duration_us,level[,hint]), checked against a plain reference parser, then simulated",
        run: targets::dvfs::trace,
        dict: targets::dvfs::TRACE_DICT,
    },
    Target {
        name: "dvfs_profile",
        about: "`dvfs --profile FILE` (TOML machine profiles)",
        run: targets::dvfs::profile,
        dict: targets::dvfs::PROFILE_DICT,
    },
    Target {
        name: "dvfs_samples",
        about: "`dvfs classify` samples CSV (time_us,pid,level), then the power scores",
        run: targets::dvfs::samples,
        dict: targets::dvfs::SAMPLES_DICT,
    },
    Target {
        name: "target_table",
        about: "`report --target FILE` idle-state tables (JSON, or `powerlens info --json`)",
        run: targets::target_table::run,
        dict: targets::target_table::DICT,
    },
    Target {
        name: "config",
        about: "`compare`/`sweep --config` setting values",
        run: targets::settings::config,
        dict: targets::settings::CONFIG_DICT,
    },
    Target {
        name: "journal",
        about: "the settings journal `powerlens restore` reads, restored onto a fixture sysfs tree",
        run: targets::settings::journal,
        dict: targets::settings::JOURNAL_DICT,
    },
    Target {
        name: "agent_http",
        about: "the agent's HTTP request heads, with the credentials of `Authorization: Basic`",
        run: targets::agent::http,
        dict: targets::agent::HTTP_DICT,
    },
    Target {
        name: "web_config",
        about: "the agent's `--web-config` file (exporter-toolkit's YAML: TLS, basic auth users)",
        run: targets::agent::web_config,
        dict: targets::agent::WEB_CONFIG_DICT,
    },
];

/// With `POWERLENS_FUZZ_VERBOSE` set, prints what a target's parser said (for replaying
/// one input and seeing why it was refused).
pub fn verbose(message: impl FnOnce() -> String) {
    if std::env::var_os("POWERLENS_FUZZ_VERBOSE").is_some() {
        eprintln!("{}", message());
    }
}

/// A temporary directory for a target's files: in memory (`/dev/shm`) where there is one,
/// since targets write a file or a tree per input and SQLite syncs what it commits.
pub fn scratch_dir(prefix: &str) -> tempfile::TempDir {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    let shm = Path::new("/dev/shm");
    shm.is_dir()
        .then(|| builder.tempdir_in(shm).ok())
        .flatten()
        .unwrap_or_else(|| {
            builder
                .tempdir()
                .expect("a scratch directory for fuzz inputs")
        })
}

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The repository's `fuzz/` directory (corpora and regressions).
pub fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The seed corpus of a target: real files, and inputs the fuzzer found worth keeping.
pub fn corpus_dir(target: &str) -> PathBuf {
    fuzz_dir().join("corpus").join(target)
}

/// The inputs of crashes found and fixed, replayed by `cargo test` for ever.
pub fn regressions_dir(target: &str) -> PathBuf {
    fuzz_dir().join("regressions").join(target)
}

/// Every file of `dir` (sorted by name), or none when it does not exist.
pub fn inputs_in(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|bytes| (p, bytes)))
        .collect()
}
