#!/usr/bin/env bash
# The observer effect (issue 28): what watching a program costs the program itself.
# Paired rounds on two switch-bound loads: each round runs the load bare, under the default
# `powerlens record` (stacks on, sampled to --stack-rate; the scheduler's events collected
# in the kernel, BPF), `record --perf-rings` (the same through perf rings, the fallback
# where the kernel cannot), `record --every-stack` (a stack
# on every switch, wake-up and timer arming), `record --every-stack --full-stacks` (and
# the kernel walks each one's frame-pointer chain: every recording before issue 28's
# changes), `record --no-stacks`, `perf sched record`, and with
# `powerlens agent` (its defaults) running, in a rotating order. The load's own wall time
# and CPU time (user + system, getrusage, measured inside the recorder) are compared
# with the bare run of the same round; medians of the per-round ratios are printed, with
# the middle half of the wall-time ratios (q1–q3), since the bare loads themselves move.
# For the default record it also prints the records lost and the report's estimate of the
# tracing's cost (system.tracing_cpu_s, and the target's share) against the CPU time
# recording added to the load (traced − bare, paired).
#
# Then, in recordings of their own, the in-kernel programs' own run time, as the kernel
# times it (kernel.bpf_stats_enabled, read from the recorder's BPF program descriptors'
# fdinfo): what the switches, wake-ups and CPU-time updates cost where they fired, beside
# the estimate. The statistics cost each run a clock read (~25–50 ns here), so the
# programs' time reads a little high; the programs run in every context (the idle task's
# switches too), so they are set beside the estimate for every context, which also holds
# the events that come through perf rings (timers, IRQs, CPU-time samples). SPLIT=0
# skips them.
#
# The agent is measured apart, on the load repeated AGENT_REPEAT times back to back (20:
# several seconds), with the agent started before the round: by default it traces 5% of
# each 1 s interval at a random place, so a load shorter than an interval would mostly
# fall outside the windows and flatter it. Configurations: bare, `agent` (its defaults)
# and `agent100` (`--trace-duty 100`, tracing throughout).
#
# Loads:
#   pingpong  `powerlens workload pingpong --iterations 20000` (two threads, unpinned)
#   pipes     two pairs of processes passing one byte back and forth through two pipes,
#             20,000 round trips each (python3, os.fork/os.read/os.write): every handoff
#             is a wake-up and a switch between address spaces
#   pinned    `powerlens workload pingpong --iterations 20000 --pin 0,0 --spinner 0`
#
# Two reference tracers run in the rounds where they can, each counting sched_switch and
# sched_waking in BPF maps and nothing else:
#   rawcounter  BPF programs on the raw tracepoints (built here with clang and libbpf when
#               both are installed): the tracepoint calls the program directly, so what it
#               costs the load is its programs' run time and a call of some tens of ns;
#   counter     the same in bpftrace (`tracepoint:` probes), which the kernel dispatches
#               through its perf tracepoint handler: that builds the event's whole record
#               before the program runs, a cost outside the programs' run time.
# Their `reference` lines set the CPU time each added beside its programs' own run time.
# For rawcounter that run time is nearly its whole direct cost, so what it added beyond it
# is what the load pays for being traced at all; for counter it is not (see
# docs/RECORD.md, "What the pipe load's gap is").
#
# Needs root (the tracepoints), perf (linux-perf) and curl; bpftrace, clang and libbpf-dev
# for the references.
# Usage:
#   scripts/bench-observer.sh                     ROUNDS=7 LOADS="pingpong pipes pinned"
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."
. scripts/bench-lib.sh

# perf and bpftrace find their tracepoints through tracefs, which a fresh machine has not
# mounted (powerlens mounts its own): mounted here in a private mount namespace, which ends
# with this script and leaves the host's mounts as they were.
if ! mountpoint -q /sys/kernel/tracing && [ -z "${BENCH_PRIVATE_MOUNTS:-}" ] && command -v unshare >/dev/null; then
    export BENCH_PRIVATE_MOUNTS=1
    exec unshare --mount --propagation private "$self" "$@"
fi
if [ -n "${BENCH_PRIVATE_MOUNTS:-}" ] && ! mountpoint -q /sys/kernel/tracing; then
    mount -t tracefs nodev /sys/kernel/tracing
fi

rounds=${ROUNDS:-7}
loads=${LOADS:-pingpong pipes pinned}
cargo build --release --locked -q
pl=$PWD/target/release/powerlens
command -v perf >/dev/null || { echo "bench-observer.sh: needs perf (apt-get install linux-perf)" >&2; exit 1; }
dir=$(mktemp -d)
agent_pid=""
stats=/proc/sys/kernel/bpf_stats_enabled
stats_were=$(cat "$stats" 2>/dev/null || echo 0)
cleanup() {
    [ -w "$stats" ] && echo "$stats_were" >"$stats" 2>/dev/null || true
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
cat >"$dir/timed.py" <<'PY'
import resource, subprocess, sys, time
t = time.perf_counter()
subprocess.run(["sh", "-c", sys.argv[2]], check=True)
wall = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "a") as f:
    f.write(f"{wall:.6f} {r.ru_utime:.6f} {r.ru_stime:.6f}\n")
# Its context switches, voluntary and involuntary, beside (how the load ran, not its cost).
with open(sys.argv[1] + ".switches", "a") as f:
    f.write(f"{r.ru_nvcsw} {r.ru_nivcsw}\n")
PY
# progtime.py OUT CMD...: runs CMD (a `powerlens record`, or the reference counter) and appends to OUT the run time
# of its BPF programs, summed from their descriptors' fdinfo (run_time_ns), which the
# kernel counts while kernel.bpf_stats_enabled is 1 (a program held by two descriptors
# counted once). Read until the tracer exits: the
# programs are detached once the load ends, so the last reading is the whole recording's.
# Only the descriptors that link to a BPF program are read, and not often: this poller
# shares the load's CPUs (a spinner there loses what it takes). The listing is read every
# time: a tracer may load its programs one by one.
cat >"$dir/progtime.py" <<'PY'
import os, subprocess, sys, time
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
seen = {}
while p.poll() is None:
    try:
        fds = os.listdir(f"/proc/{p.pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            if os.readlink(f"/proc/{p.pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            text = open(f"/proc/{p.pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        if "run_time_ns:" in text:
            prog = text.split("prog_id:")[1].split()[0] if "prog_id:" in text else fd
            ns = int(text.split("run_time_ns:")[1].split()[0])
            seen[prog] = max(seen.get(prog, 0), ns)
    time.sleep(0.05)
with open(sys.argv[1], "a") as f:
    f.write(f"{sum(seen.values()) / 1e9:.6f}\n")
PY
# The reference tracer: counts in BPF maps, prints them at exit (discarded).
cat >"$dir/count.bt" <<'BT'
tracepoint:sched:sched_switch { @switches[cpu] = count(); }
tracepoint:sched:sched_waking { @wakings[cpu] = count(); }
BT
# The raw-tracepoint reference: two programs counting into a per-CPU array, and a loader
# that attaches them, runs the command given and detaches them when it ends.
cat >"$dir/rawcount.bpf.c" <<'C'
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 2);
    __type(key, __u32);
    __type(value, __u64);
} counts SEC(".maps");
static void count(__u32 kind)
{
    __u64 *n = bpf_map_lookup_elem(&counts, &kind);
    if (n)
        *n += 1;
}
SEC("raw_tp/sched_switch") int on_switch(void *ctx) { count(0); return 0; }
SEC("raw_tp/sched_waking") int on_waking(void *ctx) { count(1); return 0; }
char LICENSE[] SEC("license") = "GPL";
C
cat >"$dir/rawcount.c" <<'C'
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
    struct bpf_program *prog;
    if (!obj || bpf_object__load(obj)) {
        perror("rawcount: loading the programs");
        return 1;
    }
    bpf_object__for_each_program(prog, obj) if (!bpf_program__attach(prog)) {
        perror("rawcount: attaching a program");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
C
rawcount=""
if command -v clang >/dev/null && [ -f /usr/include/bpf/libbpf.h ] \
    && clang -O2 -g -target bpf -I/usr/include/"$(uname -m)"-linux-gnu -c "$dir/rawcount.bpf.c" -o "$dir/rawcount.bpf.o" 2>/dev/null \
    && cc -O2 "$dir/rawcount.c" -o "$dir/rawcount" -lbpf 2>/dev/null \
    && "$dir/rawcount" "$dir/rawcount.bpf.o" true 2>"$dir/rawcount.err"; then
    rawcount="$dir/rawcount $dir/rawcount.bpf.o"
else
    echo "bench-observer.sh: no raw-tracepoint reference (it needs clang and libbpf-dev, and the kernel must load it: $(tail -1 "$dir/rawcount.err" 2>/dev/null))" >&2
fi
cat >"$dir/pipes.py" <<'PY'
import os, sys
pairs, trips = int(sys.argv[1]), int(sys.argv[2])
def pair():
    a_r, a_w = os.pipe(); b_r, b_w = os.pipe()
    if os.fork() == 0:
        for _ in range(trips):
            os.read(a_r, 1); os.write(b_w, b"x")
        os._exit(0)
    for _ in range(trips):
        os.write(a_w, b"x"); os.read(b_r, 1)
    os.wait()
    os._exit(0)
kids = []
for _ in range(pairs):
    pid = os.fork()
    if pid == 0:
        pair()
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
PY

load_cmd() {
    case $1 in
        pingpong) echo "$pl workload pingpong --iterations 20000 -q" ;;
        pipes) echo "python3 $dir/pipes.py 2 20000" ;;
        pinned) echo "$pl workload pingpong --iterations 20000 --pin 0,0 --spinner 0 -q" ;;
        *) echo "unknown load $1" >&2; exit 1 ;;
    esac
}
# The load, timed from inside whatever watches it: "wall_s user_s sys_s" appended to $1
# (the load's own clock and getrusage of its process tree, to the microsecond).
timed() {
    local out=$1 load=$2
    echo "python3 $dir/timed.py $out '$load'"
}

start_agent() {
    "$pl" agent --listen "127.0.0.1:$port" "$@" 2>"$dir/agent.log" &
    agent_pid=$!
    for _ in $(seq 200); do
        curl -sf "localhost:$port/healthz" >/dev/null 2>&1 && { sleep 1; return; }
        sleep 0.1
    done
    echo "the agent did not start:" >&2
    cat "$dir/agent.log" >&2
    exit 1
}
stop_agent() { kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=""; }

run_config() {
    local config=$1 load=$2 out=$3 round=$4
    local cmd
    cmd=$(timed "$out" "$load")
    case $config in
        bare) sh -c "$cmd" ;;
        record)
            "$pl" record -o "$dir/r$round.rec" -- sh -c "$cmd" 2>"$dir/record.err" >/dev/null
            local lost
            lost=$(grep -o '[0-9]* records LOST' "$dir/record.err" | grep -o '^[0-9]*' || echo 0)
            "$pl" report "$dir/r$round.rec" --json 2>/dev/null \
                | python3 -c 'import json,sys; s=json.load(sys.stdin)["system"]; p=s.get("perturbation") or {}; print(s.get("tracing_cpu_s"), p.get("tracing_cpu_s"))' \
                | { read -r whole target; echo "$lost $whole $target" >>"$dir/record.extra"; }
            rm -f "$dir/r$round.rec"
            ;;
        everystack) "$pl" record --every-stack -o "$dir/e.rec" -- sh -c "$cmd" >/dev/null 2>&1; rm -f "$dir/e.rec" ;;
        fullstacks) "$pl" record --every-stack --full-stacks -o "$dir/f.rec" -- sh -c "$cmd" >/dev/null 2>&1; rm -f "$dir/f.rec" ;;
        nostacks) "$pl" record --no-stacks -o "$dir/n.rec" -- sh -c "$cmd" >/dev/null 2>&1; rm -f "$dir/n.rec" ;;
        perfrings) "$pl" record --perf-rings -o "$dir/p.rec" -- sh -c "$cmd" >/dev/null 2>&1; rm -f "$dir/p.rec" ;;
        counter)
            # bpftrace runs -c's command without a shell, and wants a path to one binary: the
            # load goes in a script.
            echo "$cmd" >"$dir/counter.sh"
            bpftrace -o /dev/null -c "/bin/sh $dir/counter.sh" "$dir/count.bt" >/dev/null 2>&1
            ;;
        rawcounter) $rawcount sh -c "$cmd" >/dev/null 2>&1 ;;
        perf) perf sched record -o "$dir/perf.data" -- sh -c "$cmd" >/dev/null 2>&1; rm -f "$dir/perf.data" ;;
        agent) start_agent; sh -c "$cmd"; stop_agent ;;
        agent100) start_agent --trace-duty 100; sh -c "$cmd"; stop_agent ;;
    esac
}

# The awk functions every summary below uses: `sorted` copies a[1..n] into b sorted, `med`
# is the median of a[1..n].
awk_stats='
    function sorted(a, n, b,   i, j, t) { for (i = 1; i <= n; i++) b[i] = a[i]
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t } }
    function med(a, n,   b) { sorted(a, n, b); return n % 2 ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2 }
'

# Per-configuration medians of the paired ratios against bare, from $dir/CONFIG.times.
summarise() {
    printf '%-10s %12s %12s %12s %12s %14s\n' config "wall med s" "wall ×bare" "cpu med s" "cpu ×bare" "wall × q1–q3"
    for c in "$@"; do
        paste "$dir/bare.times" "$dir/$c.times" | awk -v c="$c" "$awk_stats"'
            { bw[NR] = $1; bc[NR] = $2 + $3; w[NR] = $4; cp[NR] = $5 + $6
              rw[NR] = (bw[NR] > 0 ? w[NR] / bw[NR] : 0); rc[NR] = (bc[NR] > 0 ? cp[NR] / bc[NR] : 0) }
            # The spread of the paired ratios (the middle half of the rounds): on these VMs
            # a bare load moves by tens of percent from run to run, and a median alone
            # hides how much that moves the ratio.
            function q(a, n, lower,   b) { sorted(a, n, b); return lower ? b[int(n / 4) + 1] : b[n - int(n / 4)] }
            END { printf "%-10s %12.3f %11.2f× %12.3f %11.2f× %6.2f–%.2f×\n", c, med(w, NR), med(rw, NR), med(cp, NR), med(rc, NR), q(rw, NR, 1), q(rw, NR, 0) }'
    done
}

# Runs each configuration once per round, in a rotating order so that none always runs
# first or after another.
rounds_of() {
    local load=$1; shift
    local configs=("$@") n=$#
    for round in $(seq "$rounds"); do
        for k in $(seq 0 $((n - 1))); do
            c=${configs[$(((k + round) % n))]}
            run_config "$c" "$load" "$dir/$c.times" "$round"
        done
    done
}

# Recordings with the kernel timing the BPF programs: the programs' own run time (every
# context) against the report's estimate for every context and for the target, medians
# over the rounds. (No bare runs: what these recordings add is not comparable, the poller
# and the statistics' clock reads being part of them.)
split_rounds() {
    local load=$1
    : >"$dir/split.programs"; : >"$dir/split.estimate"
    echo 1 >"$stats"
    for _ in $(seq "$rounds"); do
        python3 "$dir/progtime.py" "$dir/split.programs" "$pl" record -o "$dir/s.rec" -- sh -c "$load"
        "$pl" report "$dir/s.rec" --json 2>/dev/null | python3 -c 'import json,sys; s=json.load(sys.stdin)["system"]; p=s.get("perturbation") or {}; print(s.get("tracing_cpu_s", "nan"), p.get("tracing_cpu_s", "nan"))' >>"$dir/split.estimate"
        rm -f "$dir/s.rec"
    done
    echo "$stats_were" >"$stats"
    paste "$dir/split.programs" "$dir/split.estimate" | awk "$awk_stats"'
        { p[NR] = $1; w[NR] = $2; e[NR] = $3; r[NR] = ($1 > 0 ? $2 / $1 : 0) }
        END { printf "split (%d recordings, BPF statistics on): the programs ran %.3f s (kernel-timed, every context); estimated %.3f s in every context (%.2f of it), %.3f s in the target\n", NR, med(p, NR), med(w, NR), med(r, NR), med(e, NR) }'
}

# A reference tracer's programs' run time (kernel-timed, as split_rounds times the
# recorder's), against the CPU time it added in the paired rounds. CONFIG TITLE LOAD
# EXACT CMD...: EXACT says whether the programs' run time is the tracer's direct cost
# (its events call the programs directly), so that an estimate exact to that cost would
# read their ratio.
reference() {
    local config=$1 title=$2 load=$3 exact=$4
    shift 4
    : >"$dir/$config.programs"
    echo "$load" >"$dir/$config.sh"
    echo 1 >"$stats"
    for _ in $(seq "$rounds"); do
        python3 "$dir/progtime.py" "$dir/$config.programs" "$@"
    done
    echo "$stats_were" >"$stats"
    paste "$dir/bare.times" "$dir/$config.times" | awk '{ print ($5 + $6) - ($2 + $3) }' >"$dir/$config.added"
    awk -v title="$title" -v exact="$exact" "$awk_stats"'
        FNR == NR { a[++na] = $1; next } { p[++np] = $1 }
        END { added = med(a, na); ran = med(p, np)
              printf "reference, %s on sched_switch + sched_waking: added %.3f s of CPU (paired median); its programs ran %.3f s (kernel-timed, every context)", title, added, ran
              if (exact && added > 0) printf ": an estimate exact to its direct cost would read %.2f of what it added", ran / added
              if (!exact) printf " (its tracepoints build each event'"'"'s perf record before the program runs, which that time does not hold)"
              print "" }' "$dir/$config.added" "$dir/$config.programs"
}

agent_repeat=${AGENT_REPEAT:-20}
configs=(bare record perfrings everystack fullstacks nostacks perf)
[ -n "$rawcount" ] && configs+=(rawcounter)
command -v bpftrace >/dev/null && configs+=(counter)
echo "# bench-observer.sh: $rounds paired rounds per load, $(nproc) CPUs, $(uname -r), $(date -u +%F)"
for load_name in $loads; do
    load=$(load_cmd "$load_name")
    rm -f "$dir"/*.times "$dir"/*.times.switches "$dir/record.extra"
    echo
    echo "== $load_name: $load"
    rounds_of "$load" "${configs[@]}"
    summarise "${configs[@]}"
    # The estimate against what recording added: per round, the target's tracing_cpu_s
    # over (record's CPU − bare's CPU).
    paste "$dir/bare.times" "$dir/record.times" "$dir/record.extra" | awk "$awk_stats"'
        { added = ($5 + $6) - ($2 + $3); lost += $7
          if (added > 0 && $9 != "None") { r[++n] = $9 / added; a[n] = added; e[n] = $9 } }
        END { printf "default record: %d records lost in %d rounds\n", lost, NR
              if (n) printf "tracing_cpu_s (target) / CPU added by recording: median %.2f (added %.3f s, estimated %.3f s; %d rounds with added > 0)\n", med(r, n), med(a, n), med(e, n), n
              else print "tracing_cpu_s: no round where recording added CPU time" }'
    # Whether recording changed how the load ran: its switches (getrusage), and the share
    # of them it made blocking. On the pipe load the count stays and about 10,000 of its
    # involuntary switches become voluntary (docs/RECORD.md, "What the pipe load's gap is").
    paste "$dir/bare.times.switches" "$dir/record.times.switches" | awk "$awk_stats"'
        { b[NR] = $1 + $2; bv[NR] = 100 * $1 / ($1 + $2); r[NR] = $3 + $4; rv[NR] = 100 * $3 / ($3 + $4) }
        END { if (NR) printf "the load'"'"'s context switches (getrusage, medians): bare %d (%.0f%% voluntary), default record %d (%.0f%% voluntary)\n", med(b, NR), med(bv, NR), med(r, NR), med(rv, NR) }'
    # On the pinned load the spinner shares CPU 0 with the players and spins for as long
    # as the run lasts: a run the tracing slows gives it more CPU time that is not the
    # tracing's. The estimate is checked there against the players' own added CPU time
    # (their CLOCK_THREAD_CPUTIME_ID, from the workload's --json), paired per round.
    if [ "$load_name" = pinned ]; then
        : >"$dir/players"
        json_load=${load% -q}
        for round in $(seq "$rounds"); do
            $json_load --json 2>/dev/null >"$dir/bare.json"
            "$pl" record -o "$dir/p.rec" -- $json_load --json 2>/dev/null >"$dir/rec.json"
            "$pl" report "$dir/p.rec" --json 2>/dev/null >"$dir/report.json"
            python3 - "$dir" >>"$dir/players" <<'PY'
import json, sys
d = sys.argv[1]
def players(f):
    return sum(t["cpu_clock_s"] for t in json.load(open(f"{d}/{f}"))["threads"] if t["name"] in ("ping", "pong"))
est = sum(t.get("tracing_cpu_s") or 0 for t in json.load(open(f"{d}/report.json"))["threads"] if t.get("comm") in ("ping", "pong"))
added = players("rec.json") - players("bare.json")
print(f"{est / added if added > 0 else 'nan'} {added:.4f} {est:.4f}")
PY
            rm -f "$dir/p.rec"
        done
        sort -g "$dir/players" | awk '{ r[NR] = $1; a[NR] = $2; e[NR] = $3 }
            END { m = int((NR + 1) / 2); printf "players (ping, pong) only: tracing_cpu_s / CPU added: median %.2f (added %.3f s, estimated %.3f s)\n", r[m], a[m], e[m] }'
    fi
    if [ "${SPLIT:-1}" = 1 ] && [ -w "$stats" ]; then
        split_rounds "$load"
        [ -f "$dir/rawcounter.times" ] && reference rawcounter "a raw-tracepoint counter" "$load" 1 \
            $rawcount /bin/sh "$dir/rawcounter.sh"
        [ -f "$dir/counter.times" ] && reference counter "a bpftrace counter" "$load" 0 \
            bpftrace -o /dev/null -c "/bin/sh $dir/counter.sh" "$dir/count.bt"
    fi
    # The agent, on the load repeated: several of its intervals.
    rm -f "$dir"/*.times
    long="for i in \$(seq $agent_repeat); do $load; done"
    echo "-- $load_name × $agent_repeat with the agent running"
    rounds_of "$long" bare agent agent100
    summarise agent agent100
done
