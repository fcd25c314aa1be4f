#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets (fuzz/corpus/TARGET/) from real files of
the machine it runs on (Linux, as root for tracefs and the recordings), and from the
test inputs of the repository. Run from the repository root after `cargo build`:

    python3 fuzz/make_seeds.py target/debug/powerlens

Seeds are real files wherever this machine has them (tracefs format files, /proc, cpuidle
sysfs, a recording and a results database made by powerlens itself); the sources it lacks
(RAPL powercap, batteries, hwmon, the perf power PMU, cpufreq) are laid out as the Linux
kernel documents them, with values of real machines, as the fixture trees of the tests are.
"""

import glob
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    if data is None:
        return
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path, limit=None):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if limit is None else data[:limit]


def archive(files):
    out = b""
    for path, content in files:
        if content is None:
            continue
        out += b"== " + path.encode() + b"\n" + content
        if not content.endswith(b"\n"):
            out += b"\n"
    return out


def tracefs():
    events = [
        "sched/sched_switch", "sched/sched_wakeup", "sched/sched_wakeup_new",
        "sched/sched_migrate_task", "sched/sched_process_fork", "sched/sched_process_exec",
        "sched/sched_process_exit", "sched/sched_stat_runtime", "power/cpu_idle",
        "power/cpu_frequency", "irq/irq_handler_entry", "irq/softirq_entry",
        "timer/hrtimer_start", "timer/hrtimer_expire_entry", "timer/timer_start",
        "ipi/ipi_send_cpumask",
    ]
    for event in events:
        text = read(f"/sys/kernel/tracing/events/{event}/format")
        if text is None:
            continue
        # A payload as the kernel lays it out: every fixed field filled, each dynamic
        # field's locator pointing at a string after the fixed part.
        size, dynamic = 0, []
        for line in text.decode().splitlines():
            line = line.strip()
            if not line.startswith("field:"):
                continue
            parts = dict(p.strip().split(":", 1) for p in line.split(";") if ":" in p)
            off, sz = int(parts["offset"]), int(parts["size"])
            size = max(size, off + sz)
            if "__data_loc" in parts["field"] or "__rel_loc" in parts["field"]:
                dynamic.append((off, "__rel_loc" in parts["field"]))
        payload = bytearray((i * 37) & 0xFF for i in range(size))
        for off, rel in dynamic:
            s = b"eth0\0"
            start = len(payload) - (off + 4 if rel else 0)
            struct.pack_into("<I", payload, off, (len(s) << 16) | start)
            payload += s
        put("tracefs_format", event.replace("/", "-"), text + b"\0" + bytes(payload))


def sysfs():
    cpu = "/sys/devices/system/cpu"
    files = [(f"sys/devices/system/cpu/{f}", read(f"{cpu}/{f}")) for f in ("online", "possible", "present", "kernel_max")]
    files += [(f"sys/devices/system/cpu/cpuidle/{f}", read(f"{cpu}/cpuidle/{f}"))
              for f in ("current_driver", "current_governor", "current_governor_ro", "available_governors")]
    for c in sorted(glob.glob(f"{cpu}/cpu[0-9]*")):
        n = os.path.basename(c)
        for f in ("physical_package_id", "core_id", "die_id", "thread_siblings_list", "core_cpus_list"):
            files.append((f"sys/devices/system/cpu/{n}/topology/{f}", read(f"{c}/topology/{f}")))
        for s in sorted(glob.glob(f"{c}/cpuidle/state*")):
            for f in ("name", "desc", "latency", "residency", "disable", "usage", "time", "above", "below", "rejected"):
                files.append((f"sys/devices/system/cpu/{n}/cpuidle/{os.path.basename(s)}/{f}", read(f"{s}/{f}")))
    files.append(("sys/kernel/tracing/events/sched/sched_switch/id", read("/sys/kernel/tracing/events/sched/sched_switch/id")))
    files.append(("proc/sys/kernel/perf_event_paranoid", read("/proc/sys/kernel/perf_event_paranoid")))
    put("sysfs", "this-machine", archive(files))

    # What this VM lacks, as the kernel lays it out (values from a laptop and a server).
    laptop = [
        ("sys/devices/system/cpu/online", b"0-3\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/affected_cpus", b"0\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/scaling_driver", b"intel_pstate\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/scaling_governor", b"powersave\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference", b"balance_performance\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq", b"400000\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq", b"4700000\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/cpuinfo_min_freq", b"400000\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/cpuinfo_max_freq", b"4700000\n"),
        ("sys/devices/system/cpu/cpufreq/policy0/scaling_cur_freq", b"1287654\n"),
        ("sys/devices/system/cpu/cpu0/topology/physical_package_id", b"0\n"),
        ("sys/devices/system/cpu/cpu0/topology/core_id", b"0\n"),
        ("sys/class/powercap/intel-rapl:0/name", b"package-0\n"),
        ("sys/class/powercap/intel-rapl:0/energy_uj", b"26111457363\n"),
        ("sys/class/powercap/intel-rapl:0/max_energy_range_uj", b"262143328850\n"),
        ("sys/class/powercap/intel-rapl:0/enabled", b"1\n"),
        ("sys/class/powercap/intel-rapl:0:0/name", b"core\n"),
        ("sys/class/powercap/intel-rapl:0:0/energy_uj", b"9411093482\n"),
        ("sys/class/powercap/intel-rapl:0:0/max_energy_range_uj", b"262143328850\n"),
        ("sys/class/powercap/intel-rapl:0:0/enabled", b"1\n"),
        ("sys/class/powercap/intel-rapl:0:1/name", b"uncore\n"),
        ("sys/class/powercap/intel-rapl:0:1/energy_uj", b"33410122\n"),
        ("sys/class/powercap/intel-rapl:0:1/max_energy_range_uj", b"262143328850\n"),
        ("sys/class/powercap/intel-rapl:0:1/enabled", b"1\n"),
        ("sys/class/powercap/intel-rapl:1/name", b"psys\n"),
        ("sys/class/powercap/intel-rapl:1/energy_uj", b"84005116771\n"),
        ("sys/class/powercap/intel-rapl:1/max_energy_range_uj", b"262143328850\n"),
        ("sys/class/powercap/intel-rapl:1/enabled", b"1\n"),
        ("sys/class/power_supply/BAT0/type", b"Battery\n"),
        ("sys/class/power_supply/BAT0/status", b"Discharging\n"),
        ("sys/class/power_supply/BAT0/energy_now", b"41290000\n"),
        ("sys/class/power_supply/BAT0/power_now", b"7825000\n"),
        ("sys/class/power_supply/BAT0/voltage_now", b"12311000\n"),
        ("sys/class/power_supply/AC/type", b"Mains\n"),
        ("sys/class/power_supply/AC/online", b"0\n"),
    ]
    put("sysfs", "laptop-rapl-battery", archive(laptop))
    server = [
        ("sys/devices/system/cpu/online", b"0-1\n"),
        ("sys/devices/system/cpu/cpu0/topology/physical_package_id", b"0\n"),
        ("sys/devices/system/cpu/cpu1/topology/physical_package_id", b"1\n"),
        ("sys/bus/event_source/devices/power/type", b"23\n"),
        ("sys/bus/event_source/devices/power/cpumask", b"0,1\n"),
        ("sys/bus/event_source/devices/power/events/energy-pkg", b"event=0x02\n"),
        ("sys/bus/event_source/devices/power/events/energy-pkg.scale", b"2.3283064365386962890625e-10\n"),
        ("sys/bus/event_source/devices/power/events/energy-pkg.unit", b"Joules\n"),
        ("sys/bus/event_source/devices/power/events/energy-ram", b"event=0x03\n"),
        ("sys/bus/event_source/devices/power/events/energy-ram.scale", b"1.52587890625e-05\n"),
        ("sys/bus/event_source/devices/power/events/energy-ram.unit", b"Joules\n"),
        ("sys/class/hwmon/hwmon0/name", b"amd_energy\n"),
        ("sys/class/hwmon/hwmon0/energy1_input", b"1418372412\n"),
        ("sys/class/hwmon/hwmon0/energy1_label", b"Ecore000\n"),
        ("sys/class/hwmon/hwmon0/energy17_input", b"58412119321\n"),
        ("sys/class/hwmon/hwmon0/energy17_label", b"Esocket0\n"),
        ("sys/class/hwmon/hwmon1/name", b"power_meter\n"),
        ("sys/class/hwmon/hwmon1/power1_input", b"181000000\n"),
    ]
    put("sysfs", "server-pmu-hwmon", archive(server))


def procfs():
    pids = [os.getpid(), os.getppid(), 1]
    files = [("proc/stat", read("/proc/stat"))]
    for pid in pids:
        files += [(f"proc/{pid}/{f}", read(f"/proc/{pid}/{f}")) for f in ("status", "stat")]
        maps = read(f"/proc/{pid}/maps")
        if maps:
            files.append((f"proc/{pid}/maps", b"".join(maps.splitlines(True)[:40])))
        for task in sorted(glob.glob(f"/proc/{pid}/task/*"))[:3]:
            tid = os.path.basename(task)
            for f in ("status", "stat", "schedstat"):
                files.append((f"proc/{pid}/task/{tid}/{f}", read(f"{task}/{f}")))
    put("procfs", "this-machine", archive(files))


def maps():
    put("maps", "self", read("/proc/self/maps"))
    # The process with the most mappings (libraries, threads' stacks), cut to 200 lines.
    all_maps = [read(f"/proc/{p}/maps") or b"" for p in os.listdir("/proc") if p.isdigit()]
    largest = max(all_maps, key=len, default=b"")
    put("maps", "largest", b"".join(largest.splitlines(True)[:200]))


def recordings(powerlens):
    tmp = tempfile.mkdtemp()
    try:
        def record(name, *args):
            out = os.path.join(tmp, name)
            subprocess.run([powerlens, "record", "-o", out, *args], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            sqlite3.connect(out).execute("VACUUM").connection.close()
            return out
        nostacks = record("nostacks.rec", "--no-stacks", "--", powerlens, "workload", "pingpong", "--iterations", "300")
        stacks = record("stacks.rec", "-F", "10", "--stack-bytes", "512", "--", "true")
        for name, path in (("pingpong-no-stacks.rec", nostacks), ("true-with-stacks.rec", stacks)):
            put("recording", name, read(path))
        # The chunks inside them, for the codec alone (the smallest few of each).
        for rec in (nostacks, stacks):
            db = sqlite3.connect(rec)
            rows = db.execute("SELECT seq, cpu, data FROM chunks ORDER BY length(data) LIMIT 3").fetchall()
            for seq, cpu, data in rows:
                put("chunk", f"{os.path.basename(rec)}-cpu{cpu}-seq{seq}", bytes(data))
            for (sid, frames) in db.execute("SELECT id, frames FROM stacks ORDER BY length(frames) DESC LIMIT 3").fetchall() if "stacks" in rec else []:
                put("stack_frames", f"stack-{sid}", bytes(frames))
            db.close()
        results = os.path.join(tmp, "results.db")
        for args in (["--runs", "2", "--", "true"], ["--runs", "3", "--label", "x", "--", "sleep", "0.01"]):
            subprocess.run([powerlens, "run", "--db", results, "--warmup", "0", *args], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        put("results", "two-results.db", read(results))
    finally:
        shutil.rmtree(tmp)


def texts():
    put("compare_csv", "len-brown", "label,seconds,watts\nperformance,209,193.355\npowersaving,228,189.416\n")
    put("compare_csv", "joules-repeats", "# measured with an external meter\nlabel,seconds,joules\nA,1.02,50.1\nA,0.98,49.7\nA,1.01,50.3\nB,1.20,44.0\nB,1.18,43.1\nB,1.22,44.9\nC,0.9,60\nC,0.91,61\n")
    put("dvfs_trace", "phases", "duration_us,level,hint\n# a vector phase, then scalar code\n120.5,1,0\n30,0\n2000,2,1\n15.25,avx2\n0.5,normal,1\n")
    put("dvfs_trace", "plain-rows", "".join(f"{(i * 37) % 500}.{i % 10},{i % 3},{i % 2}\n" for i in range(60)))
    put("dvfs_samples", "two-processes", "time_us,pid,level\n# pid 10 switches to AVX-512 code, pid 11 stays scalar\n0,10,0\n1200,11,0\n2500,10,2\n2600,11,0\n5000,10,avx512\n5100,11,normal\n9000,10,2\n")
    put("dvfs_profile", "toml", 'name = "laptop"\n\n[[bucket]]\nmin_cores = 1\nmax_cores = 2\nnormal_ghz = 4.7\navx2_ghz = 4.2\navx512_ghz = 3.6\n\n[[bucket]]\nmin_cores = 3\nmax_cores = 4\nnormal_ghz = 4.2\navx2_ghz = 3.8\navx512_ghz = 3.2\n\n[transition_us]\nnormal_to_avx2_us = 9\nnormal_to_avx512_us = 12\navx2_to_avx512_us = 9\nup_us = 500\n')
    put("dvfs_profile", "json", '{"name": "server", "bucket": [{"min_cores": 1, "max_cores": 16, "normal_ghz": 3.1, "avx2_ghz": 2.7, "avx512_ghz": 2.4}], "transition_us": {"up_us": 670}}\n')
    put("target_table", "states", '{"states": [{"name": "C1", "latency_us": 2, "target_residency_us": 2}, {"name": "C6", "latency_us": 133, "target_residency_us": 600}]}\n')
    put("config", "governor-freq-cstates", "governor=powersave,max_freq=2GHz,cstates=POLL,C1,turbo=off")
    put("config", "qos-cpus", "pm_qos=20us,cpus=0-3,6,epp=balance_power,min_freq=800MHz,cstate.C6=off")
    journal = """{
  "format": "powerlens settings journal v1",
  "pid": 4194000,
  "start_time": 1234,
  "sysfs_root": "@SYSFS@",
  "originals": [
    {
      "setting": "governor=powersave",
      "path": "@SYSFS@/devices/system/cpu/cpufreq/policy0/scaling_governor",
      "value": "schedutil\\n"
    },
    {
      "setting": "cstate.C1=off",
      "path": "@SYSFS@/devices/system/cpu/cpu0/cpuidle/state1/disable",
      "value": "0\\n"
    }
  ]
}"""
    put("journal", "two-settings", journal)


def runtimes():
    """Perf maps and a jitdump as Node and Java write them (skipped without them)."""
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "hot.js")
        with open(script, "w") as f:
            f.write("function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) }\nfib(27)\n")
        for option, target, name, path, limit in [
            ("--perf-basic-prof", "perf_map", "node", "/tmp/perf-{pid}.map", 200),
            ("--perf-prof", "jitdump", "node", os.path.join(d, "jit-{pid}.dump"), 32768),
        ]:
            try:
                p = subprocess.Popen(["node", option, script], cwd=d)
            except OSError:
                return
            p.wait()
            data = read(path.format(pid=p.pid))
            if target == "perf_map":
                data = b"".join(data.splitlines(True)[:limit]) if data else None
                try:
                    os.remove(path.format(pid=p.pid))
                except OSError:
                    pass
            else:
                data = data[:limit] if data else None
            put(target, name, data)
        java = os.path.join(d, "Hot.java")
        with open(java, "w") as f:
            f.write("public class Hot { public static void main(String[] a) { long s = 0;"
                    " for (long i = 0; i < 300000000L; i++) s += i % 7; System.out.println(s); } }\n")
        try:
            subprocess.run(["javac", java], check=True, cwd=d)
            p = subprocess.Popen(["java", "-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit",
                                  "-cp", d, "Hot"], cwd=d, stdout=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError):
            return
        p.wait()
        path = f"/tmp/perf-{p.pid}.map"
        data = read(path)
        put("perf_map", "java", b"".join(data.splitlines(True)[:200]) if data else None)
        if data:
            os.remove(path)


def info_json(powerlens):
    out = subprocess.run([powerlens, "info", "--json"], check=True, capture_output=True).stdout
    put("target_table", "info-json-this-machine", out)


def main():
    powerlens = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target/debug/powerlens")
    tracefs()
    sysfs()
    procfs()
    maps()
    runtimes()
    texts()
    info_json(powerlens)
    recordings(powerlens)


if __name__ == "__main__":
    main()
