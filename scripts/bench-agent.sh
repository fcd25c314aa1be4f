#!/usr/bin/env bash
# The agent's own cost (issue 16): its CPU use on an idle machine and under a ping-pong load,
# as it reports it itself (powerlens_self_cpu_seconds_total, getrusage), and its memory over
# a long run with short-lived processes coming and going.
#   1. idle: the agent alone for SECONDS (default 60);
#   2. busy: the same while `powerlens workload pingpong` runs back to back;
#   3. churn: MINUTES (default 10) with ~200 short-lived processes a second; resident memory
#      (powerlens_self_resident_memory_bytes) every 30 s, and the number of process series.
# Needs root (the tracepoints). Usage:
#   scripts/bench-agent.sh                 SECTIONS="1 2 3" SECONDS_PER=60 MINUTES=10
set -euo pipefail
cd "$(dirname "$0")/.."

sections=${SECTIONS:-1 2 3}
seconds=${SECONDS_PER:-60}
minutes=${MINUTES:-10}
cargo build --release --locked -q
pl=$PWD/target/release/powerlens
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
agent_pid=""
load_pid=""
cleanup() {
    [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

wants() { [[ " $sections " == *" $1 "* ]]; }
metric() { curl -s "localhost:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
start_agent() {
    # shellcheck disable=SC2086  # AGENT_ARGS is a list of flags
    "$pl" agent --listen "127.0.0.1:$port" ${AGENT_ARGS:-} "$@" 2>"$dir/agent.log" &
    agent_pid=$!
    for _ in $(seq 100); do
        curl -sf "localhost:$port/healthz" >/dev/null 2>&1 && return
        sleep 0.1
    done
    echo "the agent did not start:" >&2
    cat "$dir/agent.log" >&2
    exit 1
}
stop_agent() { kill "$agent_pid"; wait "$agent_pid" || true; agent_pid=""; }
# CPU share of one CPU the agent used over `seconds`, by its own counter.
measure_cpu() {
    sleep 3
    local c0 c1 t0 t1
    c0=$(metric powerlens_self_cpu_seconds_total); t0=$(date +%s.%N)
    sleep "$seconds"
    c1=$(metric powerlens_self_cpu_seconds_total); t1=$(date +%s.%N)
    awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.3f%% of one CPU (%.3f s over %.1f s)\n", 100 * (b - a) / (e - s), b - a, e - s }'
}

if wants 1; then
    echo "== 1. idle machine: the agent alone for $seconds s"
    start_agent
    measure_cpu
    echo "lost records: $(metric powerlens_lost_records_total)"
    stop_agent
    echo
fi

if wants 2; then
    echo "== 2. busy machine: pingpong (pong preempting a spinner on cpu1) back to back for $seconds s"
    start_agent
    (while :; do "$pl" workload pingpong --iterations 20000 --pin 0,1 --spinner 1 --quiet; done) &
    load_pid=$!
    measure_cpu
    # The load's own rate, for the record.
    "$pl" workload pingpong --iterations 20000 --pin 0,1 --spinner 1 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("load: %.0f round trips/s beside the agent" % (20000 / d["wall_s"]))'
    echo "lost records: $(metric powerlens_lost_records_total)"
    kill "$load_pid"; wait "$load_pid" 2>/dev/null || true; load_pid=""
    stop_agent
    echo
fi

if wants 3; then
    echo "== 3. $minutes min with ~200 short-lived processes a second: resident memory"
    start_agent
    (while :; do for _ in $(seq 20); do /bin/true; done; sleep 0.1; done) &
    load_pid=$!
    end=$(( $(date +%s) + minutes * 60 ))
    while [ "$(date +%s)" -lt "$end" ]; do
        body=$(curl -s "localhost:$port/metrics")
        rss=$(awk '$1 == "powerlens_self_resident_memory_bytes" {print $2}' <<<"$body")
        series=$(grep -c '^powerlens_process_energy_joules_total{' <<<"$body" || true)
        cpu=$(awk '$1 == "powerlens_self_cpu_seconds_total" {print $2}' <<<"$body")
        echo "$(date +%T) resident $(( ${rss%.*} / 1024 )) KiB, $series process series, agent CPU ${cpu} s"
        sleep 30
    done
    kill "$load_pid"; wait "$load_pid" 2>/dev/null || true; load_pid=""
    stop_agent
fi
