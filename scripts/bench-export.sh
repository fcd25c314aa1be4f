#!/usr/bin/env bash
# Benchmark of `powerlens export` and `report --html` (issue 8): records one pingpong run
# of about a million events, then times every export format and the HTML report on it
# (median of interleaved rounds, this machine is shared and noisy), with the peak memory and
# the output size of each.
# Targets: under 2 s per export of a 1-million-event recording (checked per million
# events: recordings with call stacks hold about four times as many events for the same
# run); HTML under 5 MB.
# Needs root (tracepoints) and sqlite3. Usage:
#   scripts/bench-export.sh [PINGPONG_ITERATIONS]      (default 340000, about 1 M events)
set -euo pipefail
cd "$(dirname "$0")/.."

iterations=${1:-340000}
rounds=3
formats=(perfetto firefox json csv)
cargo build --release --locked -q -p powerlens
pl=${CARGO_TARGET_DIR:-$PWD/target}/release/powerlens
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh  # the script has cd'd to the repository root
# powerlens record mounts tracefs privately itself when it is missing.
"$pl" record -o "$dir/pp.rec" --quiet-command -- \
    "$pl" workload pingpong --iterations "$iterations" 2>"$dir/record.log"
events=$(sqlite3 "$dir/pp.rec" 'SELECT sum(events) FROM chunks')
rec_kib=$(( $(stat -c %s "$dir/pp.rec") / 1024 ))
echo "recording: pingpong --iterations $iterations, $events events, $rec_kib KiB"
echo "for comparison, report --json on the same recording and $rounds rounds of each export:"

for r in $(seq "$rounds"); do
    line=""
    now t0; "$pl" report "$dir/pp.rec" --json >/dev/null; now t1
    line="$(( t1 - t0 ))"
    for f in "${formats[@]}"; do
        now t0; "$pl" export "$dir/pp.rec" -f "$f" -o "$dir/out.$f" 2>/dev/null; now t1
        line="$line $(( t1 - t0 ))"
    done
    now t0; "$pl" report "$dir/pp.rec" --html "$dir/out.html" 2>/dev/null; now t1
    echo "$line $(( t1 - t0 ))"
done >"$dir/times"

printf '%-10s %10s %12s %12s %12s\n' format median_s "M events/s" peak_MiB output_MiB
col=1
report_s=$(awk -v c=$col '{print $c/1e9}' "$dir/times" | median)
report_kib=$(peak_kib "$pl" report "$dir/pp.rec" --json)
awk -v s="$report_s" -v e="$events" -v m="$report_kib" 'BEGIN {
    printf "%-10s %10.3f %12.2f %12.1f %12s\n", "(report)", s, e / s / 1e6, m / 1024, "-" }'
for f in "${formats[@]}"; do
    col=$((col + 1))
    s=$(awk -v c=$col '{print $c/1e9}' "$dir/times" | median)
    kib=$(peak_kib "$pl" export "$dir/pp.rec" -f "$f" -o "$dir/out.$f")
    size=$(stat -c %s "$dir/out.$f")
    awk -v f="$f" -v s="$s" -v e="$events" -v m="$kib" -v z="$size" 'BEGIN {
        printf "%-10s %10.3f %12.2f %12.1f %12.1f%s\n", f, s, e / s / 1e6, m / 1024, z / 1048576,
            (s / (e / 1e6) < 2 ? "" : "   OVER the target of 2 s per million events") }'
done
col=$((col + 1))
s=$(awk -v c=$col '{print $c/1e9}' "$dir/times" | median)
kib=$(peak_kib "$pl" report "$dir/pp.rec" --html "$dir/out.html")
size=$(stat -c %s "$dir/out.html")
awk -v s="$s" -v e="$events" -v m="$kib" -v z="$size" 'BEGIN {
    printf "%-10s %10.3f %12.2f %12.1f %12.1f%s\n", "html", s, e / s / 1e6, m / 1024, z / 1048576,
        (z < 5 * 1048576 ? "" : "   OVER the 5 MB target") }'
