#!/usr/bin/env bash
# Fuzzes powerlens's parsers of outside input (docs/RELIABILITY.md, crates/powerlens-fuzz).
#
#   scripts/fuzz.sh --list                   the targets and the parsers they reach
#   scripts/fuzz.sh TARGET SECONDS           fuzz one target (or `all`: SECONDS each)
#   scripts/fuzz.sh --ci [SECONDS]           every target for SECONDS (default 15): CI's step
#   scripts/fuzz.sh --replay TARGET FILE...  run saved inputs once (reproduce a crash)
#   scripts/fuzz.sh --summary                hours and inputs per target, from the log
#
# The fuzzer is built in release mode with LLVM's SanitizerCoverage (on stable Rust: edge
# counters guide the mutations), overflow checks and debug assertions, in target/fuzz.
# Long runs go in segments of at most POWERLENS_FUZZ_SEGMENT_S seconds (default 600),
# each resuming from the inputs the previous ones found (target/fuzz/work/TARGET), so
# that memory stays bounded; each segment is a line of target/fuzz/campaigns.tsv.
# A crash saves its input in target/fuzz/crashes/TARGET/ and prints how to replay it;
# a fixed crash's input goes to fuzz/regressions/TARGET/, which `cargo test` replays.
set -euo pipefail
cd "$(dirname "$0")/.."

host=$(rustc -vV | sed -n 's/^host: //p')
bin="target/fuzz/$host/release/powerlens-fuzz"

build() {
    # --target keeps the instrumentation out of build scripts and proc macros.
    RUSTFLAGS="-C passes=sancov-module -C llvm-args=-sanitizer-coverage-level=3 \
-C llvm-args=-sanitizer-coverage-inline-8bit-counters -C overflow-checks=on \
-C debug-assertions=on" \
        cargo build --release --locked -q -p powerlens-fuzz --bin powerlens-fuzz \
        --target "$host" --target-dir target/fuzz
}

usage() {
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

campaign() { # TARGET SECONDS
    local name=$1 total=$2 segment=${POWERLENS_FUZZ_SEGMENT_S:-600} left status
    left=$total
    while awk "BEGIN{exit !($left > 0)}"; do
        local this
        this=$(awk "BEGIN{print ($left < $segment) ? $left : $segment}")
        status=0
        "$bin" run "$name" "$this" --keep target/fuzz/work --log target/fuzz/campaigns.tsv \
            --crash-dir target/fuzz/crashes || status=$?
        [ "$status" = 0 ] || return "$status"
        left=$(awk "BEGIN{print $left - $this}")
    done
}

case "${1:-}" in
    --list|list)
        build
        "$bin" --list
        ;;
    --replay)
        shift
        [ $# -ge 2 ] || usage
        build
        "$bin" replay "$@"
        ;;
    --ci)
        seconds=${2:-15}
        build
        # No working corpus: CI starts from the checked-in seeds every time.
        "$bin" run all "$seconds" --crash-dir target/fuzz/crashes
        ;;
    --summary)
        # target/fuzz/campaigns.tsv: unix time, target, seed, seconds, inputs, corpus,
        # edges covered, edges, outcome.
        printf "%-16s %8s %14s %8s\n" target hours inputs crashes
        awk -F'\t' '{ s[$2] += $4; n[$2] += $5; if ($9 != "ok") c[$2]++ }
            END { for (t in s) printf "%-16s %8.2f %14d %8d\n", t, s[t] / 3600, n[t], c[t] }' \
            target/fuzz/campaigns.tsv | sort
        ;;
    ""|-h|--help)
        usage
        ;;
    *)
        [ $# -eq 2 ] || usage
        build
        if [ "$1" = all ]; then
            # A crash ends its target's campaign, not the others'.
            failed=()
            for name in $("$bin" --list | awk '{print $1}'); do
                campaign "$name" "$2" || failed+=("$name")
            done
            if ((${#failed[@]})); then
                echo "fuzz.sh: crashes in ${failed[*]} (inputs in target/fuzz/crashes/)" >&2
                exit 1
            fi
        else
            campaign "$1" "$2"
        fi
        ;;
esac
