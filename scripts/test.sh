#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script).
# Installs the outside tools the tests use as oracles when they are missing, then runs
# formatting, lints and every test of the workspace.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."

# A fresh machine has neither tracefs nor debugfs mounted (no init system mounts them). The
# suite runs in a private mount namespace where both are unmounted, so that a mount made by
# hand on this machine can never hide a test's or a command's dependence on it. The host's
# own mounts are untouched: the namespace and its unmounts end with this script.
if [ -z "${POWERLENS_TEST_PRIVATE_MOUNTS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
    export POWERLENS_TEST_PRIVATE_MOUNTS=1
    exec unshare --mount --propagation private "$self" "$@"
fi
if [ -n "${POWERLENS_TEST_PRIVATE_MOUNTS:-}" ]; then
    for m in /sys/kernel/debug/tracing /sys/kernel/debug /sys/kernel/tracing; do
        while mountpoint -q "$m"; do umount -l "$m"; done
    done
    echo "test.sh: in a private mount namespace without tracefs and debugfs, as on a fresh machine" >&2
else
    echo "test.sh: not root (or no unshare): the suite sees this machine's mounts as they are" >&2
fi

# Debian packages the tests need as outside oracles: sqlite3 reads the results and recording
# files, rt-tests (cyclictest) checks `wake`, linux-perf (`perf sched timehist`) checks `report`.
# rt-tests gives cyclictest, the oracle of `powerlens wake`'s UserLatency; chromium (headless)
# checks the HTML report in a real browser; xz-utils is a command of the README's Quick start;
# prometheus (the server and promtool) scrapes `powerlens agent` and lints its exposition;
# openssl (certificates), apache2-utils (htpasswd's bcrypt hashes) and curl (an HTTPS
# client) check the agent's --web-config; tmux is the real terminal `powerlens top` is
# driven in (send-keys, capture-pane); binutils' readelf reads the build IDs recordings keep;
# nodejs and openjdk-17-jdk-headless (java, javac) are the managed runtimes whose JIT code
# `record` names from their perf maps (tests/runtimes.rs).
# clang rebuilds the committed BPF object of in-kernel collection and checks that it is
# what its source builds to (crates/powerlens-sys/tests/bpf_object.rs).
debs=(sqlite3 rt-tests linux-perf chromium xz-utils prometheus openssl apache2-utils curl tmux binutils
      nodejs openjdk-17-jdk-headless clang)

missing=()
if command -v dpkg >/dev/null 2>&1; then
    for p in "${debs[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
fi
if ((${#missing[@]})); then
    echo "test.sh: installing ${missing[*]}" >&2
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    elif command -v sudo >/dev/null 2>&1; then
        sudo apt-get update -qq
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "test.sh: cannot install ${missing[*]} (not root, no sudo); tests that need them will say SKIP" >&2
    fi
fi

# Python packages the tests use as oracles: `perfetto` (its perfetto_trace_pb2, generated
# from Perfetto's own trace.proto, decodes `powerlens export --format perfetto`). Installed
# when missing and the network allows; the export tests say "skipped" without it.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null; then
    echo "test.sh: installing the perfetto python package" >&2
    python3 -m pip install --quiet perfetto >/dev/null 2>&1 \
        || echo "test.sh: cannot install the perfetto python package; the Perfetto decode tests will say skipped" >&2
fi

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
# No two source files of a crate may use each other, directly or around a circle.
echo "== import circles" >&2
python3 scripts/import-cycles.py --self-test
python3 scripts/import-cycles.py
# Each step's skipped tests (the harness has none: a test that cannot run returns early and
# reads as passed) are noted in a file by `skip_test!` and reported as skipped below.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# The libtest summary lines of a step's log, added up: "passed failed ignored".
tally() { awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "%d %d %d\n", p, f, i }' "$1"; }
# "N passed, K skipped …" for a step: its passes less the tests that noted a skip (each
# test once per skip file: a step's passes each have their own file).
report_step() {
    local name=$1 log=$2 started=$3 p f i k=0 skips
    shift 3
    read -r p f i < <(tally "$log")
    local noted=()
    for skips in "$@"; do
        [ -s "$skips" ] || continue
        while IFS= read -r line; do noted+=("$line"); done < <(sort -u -t $'\t' -k1,1 "$skips")
    done
    k=${#noted[@]}
    summary+=("$name: $((p - k)) passed, $k skipped, $f failed, $i ignored, in $(( $(date +%s) - started )) s")
    local line
    for line in "${noted[@]}"; do summary+=("  skipped, not passed: ${line/$'\t'/: }"); done
}
summary=()
# No test may write to the user's own results database: each gets its own. Its state
# before and after the tests must be the same.
default_db="${XDG_DATA_HOME:-$HOME/.local/share}/powerlens/results.db"
db_state() { if [ -e "$default_db" ]; then stat -c '%s %Y' "$default_db"; else echo absent; fi; }
db_before=$(db_state)
# Step 1, deterministic: unit tests, fixtures, captures of real machines, recorded traces
# replayed exactly, fake meters, the mock executor. Nothing here depends on the scheduler's
# timing or on what this kernel traces, so it passes beside a CPU hog. The live oracle
# tests are marked `#[ignore = "live: …"]` and counted as not run here.
echo "== cargo test: the deterministic step" >&2
started=$(date +%s)
POWERLENS_TEST_SKIPS=$logs/deterministic.skips cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$logs/deterministic.log"
report_step "deterministic step (ignored: the live step's)" "$logs/deterministic.log" "$started" "$logs/deterministic.skips"
# Step 2, live: the oracle tests against the running kernel (getrusage, cpuidle sysfs,
# `perf sched`, cyclictest, Prometheus, real runtimes), as root. `helper_*` tests are
# processes other tests start, not tests.
if [ "$(id -u)" = 0 ]; then
    echo "== cargo test: the live step (the tests marked live, against this kernel)" >&2
    started=$(date +%s)
    live=(cargo test --workspace --locked --no-fail-fast --tests -- --ignored --skip helper_)
    # The tracing-cost calibrations this run measures, kept for this run only: the boot's
    # kept ones (/run/powerlens) may come from an earlier run at a busier or quieter
    # moment, and a test must not lean on state no one here made in it.
    export POWERLENS_COST_CACHE_DIR=$logs/cost-cache
    POWERLENS_TEST_SKIPS=$logs/live.skips "${live[@]}" 2>&1 | tee "$logs/live.log"
    # The oracle tests of recordings and of the agent once more with every event through
    # perf rings, the fallback where the kernel cannot collect in-kernel (docs/RECORD.md,
    # How events are collected): the same oracles must hold on both paths.
    echo "== the live recording and agent tests again, every event through perf rings (POWERLENS_PERF_RINGS=1)" >&2
    # Not the agent's per-process figures against the kernel's clocks: through perf rings
    # its ~40,000-wake-ups-a-second ping-pong loses records on this project's 2-vCPU VMs
    # (the load's CPU read 2.3% short in one CI run, and once in 11 runs after), which the
    # agent reports as unrecorded wake-ups; the live step above checks it on the default,
    # in-kernel collection (docs/PERFORMANCE.md, "What the live tests measured").
    POWERLENS_PERF_RINGS=1 POWERLENS_TEST_SKIPS=$logs/perf-rings.skips \
        cargo test --locked -p powerlens --test record --test stacks --test advice --test agent \
        -- --ignored --skip helper_ --skip the_agents_figures_are_the_kernels 2>&1 | tee -a "$logs/live.log"
    report_step "live step" "$logs/live.log" "$started" "$logs/live.skips" "$logs/perf-rings.skips"
else
    summary+=("live step: SKIPPED, not run: it traces the kernel and needs root")
fi
if [ "$(db_state)" != "$db_before" ]; then
    echo "test.sh: a test wrote to the user's default results database ($default_db): give it its own (--db / POWERLENS_DB)" >&2
    exit 1
fi
# Every parser of outside input fuzzed for a bounded time (docs/RELIABILITY.md): the
# coverage-guided fuzzer, built in release mode with edge counters in target/fuzz, starts
# from the checked-in seeds; a crash fails the suite and names the input that caused it.
# `cargo test` above already replayed every seed and every fixed crash's input.
fuzz_s=${POWERLENS_FUZZ_CI_S:-15}
echo "== fuzzing every parser of outside input, ${fuzz_s} s per target (scripts/fuzz.sh --ci)" >&2
nice -n 10 scripts/fuzz.sh --ci "$fuzz_s"
# The README's set-up block, command by command as it is written (scripts/setup-check.sh):
# `cargo run --release -- demo` builds the release binary and runs the demo; the block's
# own ./scripts/test.sh line is this script, checked rather than run again.
echo "== the README's set-up block (scripts/setup-check.sh)" >&2
POWERLENS_RUNNING_TEST_SH=$self scripts/setup-check.sh
# The README's Quick start, line by line, as a new user runs it (`record` and `wake` need
# root, as the README says), with the release binary the set-up block built.
if [ "$(id -u)" = 0 ]; then
    echo "== the README's Quick start (scripts/quickstart.sh)" >&2
    scripts/quickstart.sh target/release/powerlens
else
    echo "test.sh: SKIP the README's Quick start (record and wake need root)" >&2
fi
echo "== summary" >&2
printf 'test.sh: %s\n' "${summary[@]}" >&2
