#!/usr/bin/env bash
# Benchmark of `powerlens dvfs simulate` (issue 7: 10 million phases in under 2 s).
# Builds the release binary, generates a random three-level trace of PHASES phases with
# `dvfs gen`, then times `dvfs simulate` with all four policies (parsing included) and
# prints wall time, peak memory and phases per second.
#
#   scripts/bench-dvfs.sh [PHASES]      (default 10000000; needs ~150 MB of disk in $TMPDIR)
set -euo pipefail
cd "$(dirname "$0")/.."
phases=${1:-10000000}
bin=target/release/powerlens
cargo build --release --locked -p powerlens >&2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
trace=$dir/trace.csv

"$bin" dvfs gen --pattern random --phases "$phases" --seed 1 --levels 0,1,2 --out "$trace"
echo "trace: $phases phases, $(du -h "$trace" | cut -f1) ($trace)"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"

run() {
    local start end
    start=$(date +%s.%N)
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "CPU %U s user + %S s sys, peak RSS %M KiB" "$@" >"$dir/out.txt" 2>"$dir/time.txt"
    else
        "$@" >"$dir/out.txt"
    fi
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" -v n="$phases" \
        'BEGIN { printf "wall %.3f s, %.1f M phases/s\n", e - s, n / (e - s) / 1e6 }'
    [ -f "$dir/time.txt" ] && grep -h "CPU " "$dir/time.txt" || true
}

echo "== dvfs simulate, 4 policies (fixed:670us, fixed:breakeven, hint, oracle), 10 active cores"
for i in 1 2 3; do
    echo -n "run $i: "
    run "$bin" dvfs simulate "$trace" --profile xeon-gold-6130 --active-cores 10 \
        --policy fixed:670us --policy fixed:breakeven --policy hint --policy oracle
done
cat "$dir/out.txt"
