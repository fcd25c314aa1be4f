#!/usr/bin/env bash
# Benchmarks of `powerlens record` / `report` (issue 4), each side by side with its peer in
# one run, because this machine is shared and noisy and only ratios mean much:
#   1. report vs `perf sched timehist -s` on recordings of the SAME context-switch-heavy run
#      (pingpong, >= 1 million events), medians of interleaved timings and their ratio;
#   2. recording overhead: pingpong bare, under `powerlens record` and under `perf record -a`
#      with the same tracepoints, interleaved rounds, slowdowns against bare;
#   3. peak memory of report on a recording and on one about four times longer.
# Needs root (tracepoints), perf (Debian linux-perf) and sqlite3. Usage:
#   scripts/bench-record.sh [PINGPONG_ITERATIONS]      (default 300000)
set -euo pipefail
cd "$(dirname "$0")/.."

iterations=${1:-300000}
rounds=5
cargo build --release --locked -q
pl=$PWD/target/release/powerlens
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

now_ns() { date +%s%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# Peak resident set of a command, in KiB (the kernel's own maxrss of the child).
peak_kib() {
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}

echo "== 1. report vs perf sched timehist -s, same run (pingpong --iterations $iterations)"
perf sched record -q -o "$dir/perf.data" -- \
    "$pl" record -o "$dir/pp.rec" --quiet-command -- \
    "$pl" workload pingpong --iterations "$iterations" 2>"$dir/record.log"
events=$(sqlite3 "$dir/pp.rec" 'SELECT sum(events) FROM chunks')
perf_size=$(stat -c %s "$dir/perf.data")
rec_size=$(stat -c %s "$dir/pp.rec")
echo "events in the recording: $events (powerlens file $((rec_size / 1024)) KiB, perf.data $((perf_size / 1024)) KiB)"
for _ in $(seq "$rounds"); do
    t0=$(now_ns); "$pl" report "$dir/pp.rec" --json >/dev/null; t1=$(now_ns)
    perf sched timehist -s -i "$dir/perf.data" >/dev/null 2>&1; t2=$(now_ns)
    echo "$(( t1 - t0 )) $(( t2 - t1 ))"
done >"$dir/report.times"
pl_ms=$(awk '{print $1/1e6}' "$dir/report.times" | median)
perf_ms=$(awk '{print $2/1e6}' "$dir/report.times" | median)
awk -v e="$events" -v a="$pl_ms" -v b="$perf_ms" 'BEGIN {
    printf "powerlens report: %.1f ms (%.1f M events/s)   perf sched timehist -s: %.1f ms   ratio %.1fx\n",
        a, e / a / 1e3, b, b / a }'

echo
echo "== 2. recording overhead on pingpong --iterations $iterations (wall time of the workload)"
events_list=$(sqlite3 "$dir/pp.rec" "SELECT value FROM meta WHERE key = 'events'" |
    python3 -c 'import json, sys; print(",".join(e.replace("/", ":") for e in json.load(sys.stdin)))')
wall() { python3 -c 'import json, sys; print(json.load(sys.stdin)["wall_s"])'; }
for _ in $(seq "$rounds"); do
    bare=$("$pl" workload pingpong --iterations "$iterations" --json | wall)
    ours=$("$pl" record -o "$dir/o.rec" -- "$pl" workload pingpong --iterations "$iterations" --json 2>/dev/null | wall)
    theirs=$(perf record -q -a -e "$events_list" -o "$dir/o.data" -- \
        "$pl" workload pingpong --iterations "$iterations" --json 2>/dev/null | wall)
    echo "$bare $ours $theirs"
done >"$dir/overhead.times"
awk '{print $2/$1}' "$dir/overhead.times" | median >"$dir/ours"
awk '{print $3/$1}' "$dir/overhead.times" | median >"$dir/theirs"
bare_s=$(awk '{print $1}' "$dir/overhead.times" | median)
lost=$(grep -o '[0-9]* records LOST' "$dir/record.log" || echo "no records lost")
awk -v b="$bare_s" -v o="$(cat "$dir/ours")" -v t="$(cat "$dir/theirs")" 'BEGIN {
    printf "bare %.3f s; slowdown under powerlens record %.3fx, under perf record -a %.3fx (medians of per-round ratios)\n", b, o, t }'
echo "powerlens record on the first run: $lost"

echo
echo "== 3. peak memory of report (kernel maxrss)"
short=$(( iterations / 4 ))
"$pl" record -o "$dir/short.rec" --quiet-command -- "$pl" workload pingpong --iterations "$short" 2>/dev/null
short_events=$(sqlite3 "$dir/short.rec" 'SELECT sum(events) FROM chunks')
short_kib=$(peak_kib "$pl" report "$dir/short.rec" --json)
long_kib=$(peak_kib "$pl" report "$dir/pp.rec" --json)
echo "report of $short_events events: $short_kib KiB; of $events events: $long_kib KiB"
