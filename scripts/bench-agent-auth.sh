#!/usr/bin/env bash
# What basic auth costs a scrape of `powerlens agent --web-config` (issue 18): the same
# agent (TLS, one user whose bcrypt hash has cost COST) answers HTTPS scrapes with the
# right password (verified once, then answered from the credential cache) and with a wrong
# one (never cached: a bcrypt check every time, the cost every scrape would pay without the
# cache); a second agent with TLS and no users, and a third with neither, for comparison.
# Kinds are interleaved in rounds (this machine is shared and noisy). Per kind: the median
# request time as curl measures it (TCP connect to the last byte, TLS handshake included)
# and the agent's CPU time per request (its own powerlens_self_cpu_seconds_total, read
# before and after each batch).
# Needs openssl, curl and htpasswd (apache2-utils). Usage:
#   scripts/bench-agent-auth.sh [COST] [REQUESTS_PER_BATCH] [ROUNDS]   (default 10 40 5)
#   POWERLENS=target/debug/powerlens scripts/bench-agent-auth.sh   (a given binary)
set -euo pipefail
cd "$(dirname "$0")/.."

cost=${1:-10}
batch=${2:-40}
rounds=${3:-5}
if [ -z "${POWERLENS:-}" ]; then
    cargo build --release --locked -q -p powerlens
    POWERLENS=${CARGO_TARGET_DIR:-$PWD/target}/release/powerlens
fi
POWERLENS=$(realpath "$POWERLENS")
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh

cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -keyout agent.key -out agent.crt -subj /CN=localhost \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
hash=$(htpasswd -nbBC "$cost" "" s3cret | tr -d ':\n')
printf 'tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\nbasic_auth_users:\n  prometheus: %s\n' "$hash" >auth.yml
printf 'tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\n' >tls.yml

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Starts an agent; sets $pid and $port. A long interval: the agent's own sampling stays
# out of the CPU figures.
start() {
    port=$(port)
    "$POWERLENS" agent --reduced --interval 60min --listen "127.0.0.1:$port" "$@" 2>/dev/null &
    pid=$!
    pids+=("$pid")
}
start --web-config auth.yml; auth_port=$port
start --web-config tls.yml; tls_port=$port
start; plain_port=$port
sleep 2

# The agent's own CPU time, s, as it reports it (getrusage: finer than /proc's ticks). The
# scrape that reads it is counted in the batch after it: one request in REQUESTS_PER_BATCH.
# shellcheck disable=SC2086
self_cpu() { curl -s $1 | awk '/^powerlens_self_cpu_seconds_total /{print $2}'; }
# kind -> "self-scrape url curl-args"
auth="--cacert agent.crt -u prometheus:s3cret https://127.0.0.1:$auth_port/metrics"
declare -A target=(
    [cached]="$auth|https://127.0.0.1:$auth_port/metrics|--cacert agent.crt -u prometheus:s3cret"
    [wrong]="$auth|https://127.0.0.1:$auth_port/metrics|--cacert agent.crt -u prometheus:wrong"
    [tls]="--cacert agent.crt https://127.0.0.1:$tls_port/metrics|https://127.0.0.1:$tls_port/metrics|--cacert agent.crt"
    [plain]="http://127.0.0.1:$plain_port/metrics|http://127.0.0.1:$plain_port/metrics|"
)
kinds=(cached wrong tls plain)
# One verification first, so that `cached` measures the cache.
self_cpu "$auth" >/dev/null
for r in $(seq "$rounds"); do
    for k in "${kinds[@]}"; do
        IFS='|' read -r self url args <<<"${target[$k]}"
        c0=$(self_cpu "$self")
        for _ in $(seq "$batch"); do
            # shellcheck disable=SC2086
            curl -s -o /dev/null -w '%{time_total}\n' $args "$url" >>"time.$k"
        done
        c1=$(self_cpu "$self")
        awk -v a="$c0" -v b="$c1" -v n="$batch" 'BEGIN {printf "%.0f\n", (b - a) * 1e6 / n}' >>"cpu.$k"
    done
done
echo "powerlens agent, bcrypt cost $cost, $rounds rounds of $batch requests per kind ($POWERLENS):"
printf '%-8s %18s %22s\n' kind "median request ms" "agent CPU µs/request"
for k in "${kinds[@]}"; do
    ms=$(median <"time.$k" | awk '{printf "%.2f", $1 * 1000}')
    us=$(median <"cpu.$k")
    printf '%-8s %18s %22s\n' "$k" "$ms" "$us"
done
