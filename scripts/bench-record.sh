#!/usr/bin/env bash
# Benchmarks of `powerlens record` / `report` on the path a user runs: the DEFAULT recording
# (call stacks on, every event), each side by side with its peer in one run, because this
# machine is shared and noisy and only ratios mean much (issues 4, 5 and 14):
#   1. report vs `perf sched timehist -s` on recordings of the SAME ping-pong run
#      (interleaved rounds, medians and the median of the per-round ratios), and the CPU
#      time report took and on how many CPUs; the `--no-stacks` recording of another run
#      beside it;
#   2. recording overhead on a switch-bound load (ping-pong, pong sharing cpu1 with a
#      spinner): bare, under the default `powerlens record` and under `perf record -a -g`
#      recording the same tracepoints (every hit) plus cpu-clock samples at the same rate,
#      in paired rounds; `--no-stacks` beside `perf record -a` without call chains;
#   3. peak memory of report on a default recording and on one four times longer;
#   4. call stacks: report of the default recording against the --no-stacks one of the
#      same workload, and report's first run on a recording whose symbol cache was emptied
#      against a cached run;
#   5. start and stop: `record -- true` against `perf sched record -- true` (paired), and
#      the wall time of `record -a --duration 2`.
# Needs root (tracepoints), perf (Debian linux-perf) and sqlite3. Usage:
#   scripts/bench-record.sh [PINGPONG_ITERATIONS]      (default 110000, section 1, 3, 4)
# ROUNDS=N sets the paired rounds (default 10); SECTIONS="1 2" runs only those sections;
# LOAD_ITERATIONS=K sets section 2's round trips (default 12000, about 0.5 s bare).
#
# perf's peer in section 2 records every tracepoint hit: `-F` on perf's command line
# would switch *every* event, tracepoints included, to frequency mode and sample them at
# that rate (a few percent of the hits), which is how a 1.01x "overhead" was once
# measured. The cpu-clock rate is set on that event alone (`cpu-clock/freq=HZ/`).
set -euo pipefail
cd "$(dirname "$0")/.."

iterations=${1:-110000}
rounds=${ROUNDS:-10}
sections=${SECTIONS:-1 2 3 4 5}
load_iterations=${LOAD_ITERATIONS:-12000}
cargo build --release --locked -q
pl=$PWD/target/release/powerlens
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh  # the script has cd'd to the repository root

wants() { [[ " $sections " == *" $1 "* ]]; }
# The tracepoints a recording opened, as perf's -e list.
perf_events() {
    sqlite3 "$1" "SELECT value FROM meta WHERE key = 'events'" |
        python3 -c 'import json, sys; print(",".join(e.replace("/", ":") for e in json.load(sys.stdin)))'
}
cpu_clock_hz() {
    sqlite3 "$1" "SELECT value FROM meta WHERE key = 'stacks'" |
        python3 -c 'import json, sys; print(json.load(sys.stdin).get("cpu_clock_hz") or 999)'
}
events_of() { sqlite3 "$1" 'SELECT sum(events) FROM chunks'; }

# Section 1's recordings, also read by sections 3 and 4: the default one (pp.rec) recorded
# together with perf sched record (pp.data), and a --no-stacks one of another run.
if wants 1 || wants 3 || wants 4; then
    perf sched record -q -o "$dir/perf.data" -- \
        "$pl" record -o "$dir/pp.rec" --quiet-command -- \
        "$pl" workload pingpong --iterations "$iterations" 2>"$dir/record.log"
    "$pl" record --no-stacks -o "$dir/pn.rec" --quiet-command -- \
        "$pl" workload pingpong --iterations "$iterations" 2>/dev/null
fi

if wants 1; then
    echo "== 1. report (default recording) vs perf sched timehist -s, same run (pingpong --iterations $iterations)"
    events=$(events_of "$dir/pp.rec")
    echo "events: $events in the default recording ($(( $(stat -c %s "$dir/pp.rec") / 1024 )) KiB), perf.data $(( $(stat -c %s "$dir/perf.data") / 1024 )) KiB; lost: $(grep -o '[0-9]* records LOST' "$dir/record.log" || echo none)"
    for _ in $(seq "$rounds"); do
        now t0; "$pl" report "$dir/pp.rec" --json >/dev/null 2>&1; now t1
        perf sched timehist -s -i "$dir/perf.data" >/dev/null 2>&1; now t2
        echo "$(( t1 - t0 )) $(( t2 - t1 ))"
    done >"$dir/report.times"
    pl_ms=$(awk '{print $1/1e6}' "$dir/report.times" | median)
    perf_ms=$(awk '{print $2/1e6}' "$dir/report.times" | median)
    paired=$(awk '{print $2/$1}' "$dir/report.times" | median)
    awk -v e="$events" -v a="$pl_ms" -v b="$perf_ms" -v p="$paired" -v n="$rounds" 'BEGIN {
        printf "powerlens report --json: %.1f ms (%.1f M events/s)   perf sched timehist -s: %.1f ms\n", a, e / a / 1e3, b
        printf "report is %.1fx faster (medians); per-round ratio median %.1fx over %d rounds (target >= 5x)\n", b / a, p, n }'
    # report's pass runs on two threads, timehist on one: how much of the machine report
    # had tells whether its second thread ran beside the first (the host at times places
    # a VM's two vCPUs so that the threads' shared batches cost twice the CPU).
    for _ in 1 2 3; do
        perf stat -x, -e task-clock "$pl" report "$dir/pp.rec" --json 2>&1 >/dev/null | tail -1
    done | awk -F, '{ms[NR] = $1; cpus[NR] = $6} END {
        printf "report used %.1f ms of CPU, %.2f CPUs (perf stat task-clock, the middle of 3 runs after the rounds)\n", ms[2], cpus[2] }'
    echo
fi

if wants 2; then
    echo "== 2. recording overhead: pingpong --iterations $load_iterations --pin 0,1 --spinner 1 (wall time of the workload)"
    load=("$pl" workload pingpong --iterations "$load_iterations" --pin 0,1 --spinner 1 --json)
    # The event list and rate come from a default recording of this load.
    "$pl" record -o "$dir/load.rec" -- "${load[@]}" >/dev/null 2>&1
    tracepoints=$(perf_events "$dir/load.rec")
    hz=$(cpu_clock_hz "$dir/load.rec")
    wall() { python3 -c 'import json, sys; print(json.load(sys.stdin)["wall_s"])'; }
    for _ in $(seq "$rounds"); do
        bare=$("${load[@]}" | wall)
        ours=$("$pl" record -o "$dir/o.rec" -- "${load[@]}" 2>/dev/null | wall)
        theirs=$(perf record -q -a -g -e "$tracepoints" -e "cpu-clock/freq=$hz/" -o "$dir/o.data" -- \
            "${load[@]}" 2>/dev/null | wall)
        ours_plain=$("$pl" record --no-stacks -o "$dir/o.rec" -- "${load[@]}" 2>/dev/null | wall)
        theirs_plain=$(perf record -q -a -e "$tracepoints" -o "$dir/o.data" -- "${load[@]}" 2>/dev/null | wall)
        echo "$bare $ours $theirs $ours_plain $theirs_plain"
    done >"$dir/overhead.times"
    ratio() { awk -v c="$1" '{print $c/$1}' "$dir/overhead.times" | median; }
    paired() { awk -v a="$1" -v b="$2" '{print $a/$b}' "$dir/overhead.times" | median; }
    ahead() { awk -v a="$1" -v b="$2" '$a < $b {n++} END {print n + 0}' "$dir/overhead.times"; }
    awk -v b="$(awk '{print $1}' "$dir/overhead.times" | median)" \
        -v o="$(ratio 2)" -v t="$(ratio 3)" -v p="$(paired 2 3)" -v a="$(ahead 2 3)" \
        -v op="$(ratio 4)" -v tp="$(ratio 5)" -v pp="$(paired 4 5)" -v ap="$(ahead 4 5)" -v n="$rounds" 'BEGIN {
        printf "bare %.3f s (median of %d)\n", b, n
        printf "default powerlens record: slowdown %.3fx; perf record -a -g (+cpu-clock): %.3fx\n", o, t
        printf "  powerlens / perf in the same round: median %.3f (target <= 1.05); powerlens faster in %d of %d rounds\n", p, a, n
        printf "--no-stacks: slowdown %.3fx; perf record -a: %.3fx; same round: median %.3f, powerlens faster in %d of %d\n", op, tp, pp, ap, n }'
    echo "records lost in the last default recording: $(sqlite3 "$dir/o.rec" "SELECT value FROM meta WHERE key = 'lost_records'")"
    echo
fi

if wants 3; then
    echo "== 3. peak memory of report on default recordings (kernel maxrss)"
    short=$(( iterations / 4 ))
    "$pl" record -o "$dir/short.rec" --quiet-command -- "$pl" workload pingpong --iterations "$short" 2>/dev/null
    short_kib=$(peak_kib "$pl" report "$dir/short.rec" --json)
    long_kib=$(peak_kib "$pl" report "$dir/pp.rec" --json)
    echo "report of $(events_of "$dir/short.rec") events: $short_kib KiB; of $(events_of "$dir/pp.rec") events: $long_kib KiB"
    echo
fi

if wants 4; then
    echo "== 4. call stacks: report of the default recording against the --no-stacks one"
    for _ in $(seq "$rounds"); do
        now t0; "$pl" report "$dir/pn.rec" --json >/dev/null 2>&1; now t1
        "$pl" report "$dir/pp.rec" --json >/dev/null 2>&1; now t2
        "$pl" report "$dir/pp.rec" --by function --json >/dev/null 2>&1; now t3
        echo "$(( t1 - t0 )) $(( t2 - t1 )) $(( t3 - t2 ))"
    done >"$dir/stacks.times"
    plain_ms=$(awk '{print $1/1e6}' "$dir/stacks.times" | median)
    with_ms=$(awk '{print $2/1e6}' "$dir/stacks.times" | median)
    func_ms=$(awk '{print $3/1e6}' "$dir/stacks.times" | median)
    awk -v e="$(events_of "$dir/pn.rec")" -v se="$(events_of "$dir/pp.rec")" \
        -v s="$(sqlite3 "$dir/pp.rec" 'SELECT count(*) FROM stacks')" \
        -v a="$plain_ms" -v b="$with_ms" -v c="$func_ms" 'BEGIN {
        printf "--no-stacks: %d events, %.1f ms; default: %d events (%d distinct stacks), %.1f ms (%.2fx), --by function %.1f ms (%.2fx)\n",
            e, a, se, s, b, b / a, c, c / a }'
    # Symbolization: the first report on a recording without its cache, then a cached one.
    for _ in $(seq 3); do
        sqlite3 "$dir/pp.rec" 'DELETE FROM symbols'
        now t0; "$pl" report "$dir/pp.rec" --by function --json >/dev/null 2>&1; now t1
        "$pl" report "$dir/pp.rec" --by function --json >/dev/null 2>&1; now t2
        echo "$(( t1 - t0 )) $(( t2 - t1 ))"
    done >"$dir/symbols.times"
    awk -v n="$(sqlite3 "$dir/pp.rec" 'SELECT count(*) FROM symbols')" '{a+=$1; b+=$2} END {
        printf "report --by function symbolizing %d frames: %.1f ms; with the cache: %.1f ms (means of 3)\n", n, a/NR/1e6, b/NR/1e6 }' "$dir/symbols.times"
    echo
fi

if wants 5; then
    echo "== 5. start and stop: record -- true against perf sched record -- true; record -a --duration 2"
    for _ in $(seq "$rounds"); do
        now t0; "$pl" record -o "$dir/true.rec" -- true >/dev/null 2>&1; now t1
        perf sched record -q -o "$dir/true.data" -- true >/dev/null 2>&1; now t2
        "$pl" record -a --duration 2 -o "$dir/window.rec" >/dev/null 2>&1; now t3
        echo "$(( t1 - t0 )) $(( t2 - t1 )) $(( t3 - t2 ))"
    done >"$dir/startstop.times"
    awk -v pl="$(awk '{print $1/1e6}' "$dir/startstop.times" | median)" \
        -v perf="$(awk '{print $2/1e6}' "$dir/startstop.times" | median)" \
        -v paired="$(awk '{print $1/$2}' "$dir/startstop.times" | median)" \
        -v window="$(awk '{print $3/1e9}' "$dir/startstop.times" | median)" \
        -v slowest="$(awk '{print $3/1e9}' "$dir/startstop.times" | sort -g | tail -1)" -v n="$rounds" 'BEGIN {
        printf "powerlens record -- true: %.0f ms; perf sched record -- true: %.0f ms; per-round ratio median %.2f (target <= 0.6) over %d rounds\n", pl, perf, paired, n
        printf "record -a --duration 2: %.2f s median, %.2f s slowest (target <= 2.4 s)\n", window, slowest }'
    echo
fi
