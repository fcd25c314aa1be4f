#!/usr/bin/env bash
# Re-records every fixture of crates/powerlens/tests/replay.rs, with the exact commands its
# README lists (crates/powerlens/tests/data/recordings/README.md), so that a deliberate
# re-record is this one command. Not run by the test suite: a recording is of this
# kernel and scheduler, so every figure of the replay snapshots moves with it; re-accept
# them after (`cargo insta test -p powerlens --test replay --accept`, or
# INSTA_UPDATE=always) and read the diff before committing.
#
# Needs root (tracepoints), gcc and node (Debian's nodejs), and two CPUs (the ping-pong is
# pinned to cpu0 and cpu1). Builds the debug binary, which recorded the committed files.
# Usage: scripts/record-fixtures.sh [NAME...]   (default: every fixture; NAME without .rec)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --locked -q -p powerlens
pl=${CARGO_TARGET_DIR:-$PWD/target}/debug/powerlens
out=$PWD/crates/powerlens/tests/data/recordings
work=$(mktemp -d -t powerlens-fixtures.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The stack program and the node script are built and run from here: the paths the
# recordings keep (their modules) are these, and report must not need them afterwards.
cd "$work"

# The share of the CPUs' time that was busy over one second, in percent (/proc/stat).
busy_pct() {
    local a b
    a=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
    sleep 1
    b=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
    echo "$a $b" | awk '{d=$4-$2; print (d > 0) ? int(100 * ($3-$1) / d) : 0}'
}

# Recordings are system-wide: whatever else runs is in them (its threads' names, the paths
# of its binaries, its stacks' symbols) and takes their CPUs. Waits, up to QUIET_WAIT_S
# (default 600) seconds, for a second under QUIET_PCT (default 10) percent busy.
wait_quiet() {
    local waited=0 busy
    while busy=$(busy_pct) && [ "$busy" -ge "${QUIET_PCT:-10}" ]; do
        if [ "$waited" -ge "${QUIET_WAIT_S:-600}" ]; then
            echo "record-fixtures: the machine is still ${busy}% busy: recording anyway" >&2
            return
        fi
        waited=$((waited + 1))
    done
}

# `powerlens record -o OUT/NAME.rec ARGS…` in a private mount namespace with tracefs
# mounted (as tests/common/mod.rs `with_tracefs` does; the host's mounts are untouched).
record() {
    local name=$1
    shift
    rm -f "$out/$name.rec" "$out/$name.rec.old"
    wait_quiet
    echo "record-fixtures: $name.rec" >&2
    unshare -m --propagation private sh -c 'mount -t tracefs nodev /sys/kernel/tracing && exec "$@"' \
        sh "$pl" record -o "$out/$name.rec" "$@"
}

selected=" $* "
# Whether fixture $1 is to be recorded: every one without arguments, else those named.
want() {
    [ "$selected" = "  " ] && return 0
    case "$selected" in *" $1 "*) return 0 ;; esac
    return 1
}

if want stack_program; then
    gcc -O2 -g -fno-omit-frame-pointer -pthread -o stack_program \
        "$OLDPWD/crates/powerlens/tests/data/stack_program.c"
    record stack_program --quiet-command -- taskset -c 0 ./stack_program
fi
if want pingpong; then
    record pingpong --quiet-command -- "$pl" workload pingpong --iterations 2000 --pin 0,1
fi
# The sleepers on cpu0: this project's VMs lose some of cpu1's idle-context events, the
# expiries of a sleeper's timer among them (docs/REPORT.md, "Lost events"), and its
# wake-ups then read as IPIs.
if want sleepy_short; then
    record sleepy_short --no-stacks --quiet-command -- \
        taskset -c 0 "$pl" workload sleepy --period 2ms --duration 0.3s
fi
if want sleepy_long; then
    record sleepy_long --no-stacks --quiet-command -- \
        taskset -c 0 "$pl" workload sleepy --period 50ms --duration 0.3s
fi
if want pipes; then
    record pipes --no-stacks -- sh -c 'seq 200000 | gzip > /dev/null'
fi
if want node_jit; then
    cat > hot.js <<'EOF'
function fibonacciHotLoop(n) { return n < 2 ? n : fibonacciHotLoop(n - 1) + fibonacciHotLoop(n - 2); }
let total = 0;
for (let i = 0; i < 6; i++) total += fibonacciHotLoop(30);
console.log(total > 0 ? 'done' : 'none');
EOF
    record node_jit --quiet-command -- node hot.js
    # node's perf map, whose names the recording now holds (its symbol cache).
    sqlite3 "$out/node_jit.rec" "SELECT path FROM modules WHERE path LIKE '/tmp/perf-%.map'" |
        xargs -r rm -f
fi
# Real programs no one here wrote (issue 51): xz, a thin front end whose work is in
# liblzma, on the first 3 MB of this machine's perf binary; sqlite3 committing 150 rows
# one transaction at a time, each commit fdatasync'd (system time, blocked time).
if want xz; then
    head -c 3000000 /usr/bin/perf > input.bin
    record xz --quiet-command -- xz -6 -T1 -k -f input.bin
fi
if want sqlite_fsync; then
    echo 'CREATE TABLE t(x);' > inserts.sql
    seq 1 150 | sed 's/.*/INSERT INTO t VALUES(&);/' >> inserts.sql
    rm -f t.db
    record sqlite_fsync --quiet-command -- sqlite3 t.db '.read inserts.sql'
fi
# `diff`'s parallel build: the project of tests/data/make_project (a generated big.c and
# four tiny files), built with -j1 and with -j2 from a fresh copy each time.
for j in 1 2; do
    if want make_j$j; then
        rm -rf make_project && cp -r "$OLDPWD/crates/powerlens/tests/data/make_project" .
        (cd make_project && record make_j$j --no-stacks --quiet-command -- make -s -j$j PYTHON=/usr/bin/python3)
    fi
done
ls -l "$out"/*.rec >&2
