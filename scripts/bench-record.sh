#!/usr/bin/env bash
# Benchmarks of `powerlens record` / `report` (issue 4), each side by side with its peer in
# one run, because this machine is shared and noisy and only ratios mean much:
#   1. report vs `perf sched timehist -s` on recordings of the SAME context-switch-heavy run
#      (pingpong, >= 1 million events), medians of interleaved timings and their ratio;
#   2. recording overhead: pingpong bare, under `powerlens record` and under `perf record -a`
#      with the same tracepoints, interleaved rounds, slowdowns against bare;
#   3. peak memory of report on a recording and on one about four times longer;
#   4. call stacks (issue 5): report of the same workload recorded with stacks against
#      without (target: stacks at most double the analysis time), and report's first run
#      on a recording whose symbol cache was emptied against a cached run.
# Sections 1-3 record with --no-stacks, as issue 4's benchmark did; section 2 also records
# with stacks beside `perf record -a -g` with cpu-clock samples at the same rate.
# Needs root (tracepoints), perf (Debian linux-perf) and sqlite3. Usage:
#   scripts/bench-record.sh [PINGPONG_ITERATIONS]      (default 300000)
# ROUNDS=N sets the interleaved rounds of sections 1, 2 and 4 (default 5); the recording
# overhead needs about 20 to be read within a few percent on a noisy host.
set -euo pipefail
cd "$(dirname "$0")/.."

iterations=${1:-300000}
rounds=${ROUNDS:-5}
cargo build --release --locked -q
pl=$PWD/target/release/powerlens
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh  # the script has cd'd to the repository root

echo "== 1. report vs perf sched timehist -s, same run (pingpong --iterations $iterations)"
perf sched record -q -o "$dir/perf.data" -- \
    "$pl" record --no-stacks -o "$dir/pp.rec" --quiet-command -- \
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
    ours=$("$pl" record --no-stacks -o "$dir/o.rec" -- "$pl" workload pingpong --iterations "$iterations" --json 2>/dev/null | wall)
    theirs=$(perf record -q -a -e "$events_list" -o "$dir/o.data" -- \
        "$pl" workload pingpong --iterations "$iterations" --json 2>/dev/null | wall)
    ours_stacks=$("$pl" record -o "$dir/o.rec" -- "$pl" workload pingpong --iterations "$iterations" --json 2>/dev/null | wall)
    theirs_stacks=$(perf record -q -a -g -F 999 -e "$events_list,cpu-clock" -o "$dir/o.data" -- \
        "$pl" workload pingpong --iterations "$iterations" --json 2>/dev/null | wall)
    echo "$bare $ours $theirs $ours_stacks $theirs_stacks"
done >"$dir/overhead.times"
ratio() { awk -v c="$1" '{print $c/$1}' "$dir/overhead.times" | median; }
bare_s=$(awk '{print $1}' "$dir/overhead.times" | median)
lost=$(grep -o '[0-9]* records LOST' "$dir/record.log" || echo "no records lost")
awk -v b="$bare_s" -v o="$(ratio 2)" -v t="$(ratio 3)" -v os="$(ratio 4)" -v ts="$(ratio 5)" 'BEGIN {
    printf "bare %.3f s; slowdown under powerlens record --no-stacks %.3fx, under perf record -a %.3fx\n", b, o, t
    printf "with stacks: powerlens record %.3fx, perf record -a -g -F 999 (+cpu-clock) %.3fx (medians of per-round ratios)\n", os, ts }'
# The peers' ratio within each round cancels the host's drift between rounds.
awk '{ r = $2 / $3; print r; if (r < 1) ahead++ } END { print "ahead", ahead + 0, NR > "/dev/stderr" }' \
    "$dir/overhead.times" 2>"$dir/ahead" | median >"$dir/paired"
awk -v p="$(cat "$dir/paired")" -v a="$(awk '{print $2}' "$dir/ahead")" -v n="$(awk '{print $3}' "$dir/ahead")" 'BEGIN {
    printf "powerlens --no-stacks / perf record -a, same round: median %.3f; powerlens faster in %d of %d rounds\n", p, a, n }'
echo "powerlens record on the first run: $lost"

echo
echo "== 3. peak memory of report (kernel maxrss)"
short=$(( iterations / 4 ))
"$pl" record -o "$dir/short.rec" --quiet-command -- "$pl" workload pingpong --iterations "$short" 2>/dev/null
short_events=$(sqlite3 "$dir/short.rec" 'SELECT sum(events) FROM chunks')
short_kib=$(peak_kib "$pl" report "$dir/short.rec" --json)
long_kib=$(peak_kib "$pl" report "$dir/pp.rec" --json)
echo "report of $short_events events: $short_kib KiB; of $events events: $long_kib KiB"

echo
echo "== 4. call stacks: report with stacks against without, same workload"
"$pl" record -o "$dir/st.rec" --quiet-command -- \
    "$pl" workload pingpong --iterations "$iterations" 2>/dev/null
st_events=$(sqlite3 "$dir/st.rec" 'SELECT sum(events) FROM chunks')
stacks=$(sqlite3 "$dir/st.rec" 'SELECT count(*) FROM stacks')
for _ in $(seq "$rounds"); do
    t0=$(now_ns); "$pl" report "$dir/pp.rec" --json >/dev/null; t1=$(now_ns)
    "$pl" report "$dir/st.rec" --json >/dev/null 2>&1; t2=$(now_ns)
    "$pl" report "$dir/st.rec" --by function --json >/dev/null 2>&1; t3=$(now_ns)
    echo "$(( t1 - t0 )) $(( t2 - t1 )) $(( t3 - t2 ))"
done >"$dir/stacks.times"
plain_ms=$(awk '{print $1/1e6}' "$dir/stacks.times" | median)
with_ms=$(awk '{print $2/1e6}' "$dir/stacks.times" | median)
func_ms=$(awk '{print $3/1e6}' "$dir/stacks.times" | median)
awk -v e="$events" -v se="$st_events" -v s="$stacks" -v a="$plain_ms" -v b="$with_ms" -v c="$func_ms" 'BEGIN {
    printf "without stacks: %d events, %.1f ms; with stacks: %d events (%d distinct stacks), %.1f ms (%.2fx), --by function %.1f ms (%.2fx)\n",
        e, a, se, s, b, b / a, c, c / a }'
# Symbolization: the first report on a recording without its cache, then a cached one.
for _ in $(seq 3); do
    sqlite3 "$dir/st.rec" 'DELETE FROM symbols'
    t0=$(now_ns); "$pl" report "$dir/st.rec" --by function --json >/dev/null 2>&1; t1=$(now_ns)
    "$pl" report "$dir/st.rec" --by function --json >/dev/null 2>&1; t2=$(now_ns)
    echo "$(( t1 - t0 )) $(( t2 - t1 ))"
done >"$dir/symbols.times"
awk -v n="$(sqlite3 "$dir/st.rec" 'SELECT count(*) FROM symbols')" '{a+=$1; b+=$2} END {
    printf "report --by function symbolizing %d frames: %.1f ms; with the cache: %.1f ms (means of 3)\n", n, a/NR/1e6, b/NR/1e6 }' "$dir/symbols.times"
