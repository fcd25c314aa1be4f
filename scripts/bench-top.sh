#!/usr/bin/env bash
# `powerlens top`'s own cost against the agent's (issue 16): both run side by side, the same
# interval, top in a tmux pane of 120 x 40; their CPU time (utime + stime from
# /proc/PID/stat) over SECONDS_PER seconds after a 3 s warm-up, and the ratio. The same live
# session measures in both: the difference is top's drawing and key loop. Needs root (the
# tracepoints) and tmux. Usage:
#   scripts/bench-top.sh                   PROFILE=debug|release SECONDS_PER=20 INTERVAL=1s
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${PROFILE:-debug}
seconds=${SECONDS_PER:-20}
interval=${INTERVAL:-1s}
if [ "$profile" = release ]; then
    cargo build --release --locked -q
else
    cargo build --locked -q
fi
pl=$PWD/target/$profile/powerlens
dir=$(mktemp -d)
agent_pid=""
cleanup() {
    tmux -S "$dir/tmux.sock" kill-server 2>/dev/null || true
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

tmux -S "$dir/tmux.sock" -f /dev/null new-session -d -x 120 -y 40 "$pl" top --interval "$interval"
"$pl" agent --listen 127.0.0.1:0 --interval "$interval" 2>/dev/null &
agent_pid=$!
sleep 1
top_pid=$(tmux -S "$dir/tmux.sock" display-message -p '#{pane_pid}')
sleep 3
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
t0=$(cpu_ticks "$top_pid") a0=$(cpu_ticks "$agent_pid") s0=$(date +%s.%N)
sleep "$seconds"
t1=$(cpu_ticks "$top_pid") a1=$(cpu_ticks "$agent_pid") s1=$(date +%s.%N)
python3 - "$t0" "$t1" "$a0" "$a1" "$s0" "$s1" "$(getconf CLK_TCK)" <<'EOF'
import sys
t0, t1, a0, a1, s0, s1, hz = map(float, sys.argv[1:])
wall = s1 - s0
top, agent = (t1 - t0) / hz / wall * 100, (a1 - a0) / hz / wall * 100
ratio = f"{(t1 - t0) / (a1 - a0):.2f}" if a1 > a0 else "n/a (the agent used no tick)"
print(f"over {wall:.1f} s: top {top:.2f}% of a CPU, agent {agent:.2f}%, top / agent {ratio}")
EOF
