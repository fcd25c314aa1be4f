#!/usr/bin/env python3
"""Imports captures of real machines into crates/powerlens/tests/data/machines/.

Reads public captures from git directories (as `git --git-dir=DIR show COMMIT:PATH`) and
keeps, of each, only the files powerlens reads, as data: no code of the source project is
copied. The tests lay the kept files out as sysfs/procfs trees
(crates/powerlens/tests/common/machines.rs); docs/TESTING.md "Captures of real machines".

    scripts/import-machines.py PEPC_GIT NODE_EXPORTER_GIT PROCFS_GIT

Sources:
  intel/pepc tests/emul-data/<host>/ (BSD-3-Clause): sys/inlinefiles.txt (lines
    `ro|rw|/sys/PATH|VALUE`) and proc/cpuinfo.
  prometheus/node_exporter collector/fixtures/sys.ttar (Apache-2.0), a text archive.
  prometheus/procfs testdata/fixtures.ttar (Apache-2.0), a text archive.
"""

import os
import re
import subprocess
import sys

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "powerlens", "tests", "data", "machines")

# intel/pepc hosts kept: laptops, desktops, servers, many-socket, AMD.
PEPC_HOSTS = {
    "dell-latitude-5420-tgl": "Tiger Lake laptop (Core i7-1185G7)",
    "adl0": "Alder Lake client",
    "mtl-m-2": "Meteor Lake laptop",
    "lnl0": "Lunar Lake laptop",
    "spr1": "Sapphire Rapids, 4 sockets, 320 CPUs",
    "srf2": "Sierra Forest, 2 sockets",
    "rome0": "EPYC Rome",
    "genoa0": "EPYC Genoa",
    "turin0": "EPYC Turin",
}

# The sysfs attributes powerlens reads (topology is laid out from cpuinfo).
SYS_KEEP = re.compile(
    r"^/sys/devices/system/cpu/("
    r"online|present|offline"
    r"|cpuidle/current_(driver|governor|governor_ro)"
    r"|cpu[0-9]+/online"
    r"|cpu[0-9]+/cpuidle/state[0-9]+/(name|desc|latency|residency|disable)"
    r"|cpufreq/policy[0-9]+/(affected_cpus|scaling_driver|scaling_governor"
    r"|energy_performance_preference|scaling_min_freq|scaling_max_freq"
    r"|cpuinfo_min_freq|cpuinfo_max_freq|scaling_cur_freq)"
    r")$"
)

# The cpuinfo fields kept of every processor; `flags` is kept of the first one only (the
# readers look at the first processor's flags, and flags are most of the file's size).
CPUINFO_KEEP = {
    "processor", "vendor_id", "cpu family", "model", "model name", "stepping",
    "physical id", "siblings", "core id", "cpu cores", "apicid",
}

# The ttar entries kept: RAPL, batteries, hwmon chips, CPUs and cpufreq policies.
TTAR_KEEP = re.compile(
    r"^(sys|fixtures/sys)/(class/powercap|class/power_supply|class/hwmon"
    r"|devices/platform/[^/]+/hwmon|devices/.*/hwmon[0-9]+"
    r"|devices/system/cpu/(online|offline|present|cpu[0-9]+/(online|topology|cpufreq)"
    r"|cpufreq|cpuidle))(/|$)"
)
TTAR_DROP = re.compile(r"/(power|subsystem|uevent|driver)(/|$)")


def git_show(git_dir, commit, path):
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout


def head(git_dir):
    return subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", "HEAD"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()


def slim_cpuinfo(text):
    out, first = [], True
    for line in text.splitlines():
        if not line.strip():
            if out and out[-1] != "":
                out.append("")
                first = False
            continue
        key = line.split(":", 1)[0].strip()
        if key in CPUINFO_KEEP or (first and key == "flags"):
            out.append(line)
    return "\n".join(out).rstrip("\n") + "\n"


def write(dir_, name, text):
    os.makedirs(dir_, exist_ok=True)
    with open(os.path.join(dir_, name), "w") as f:
        f.write(text)


def import_pepc(git_dir):
    commit = head(git_dir)
    rows = []
    for host, what in PEPC_HOSTS.items():
        base = f"tests/emul-data/{host}"
        lines = git_show(git_dir, commit, f"{base}/sys/inlinefiles.txt").splitlines()
        kept = [l for l in lines if l.count("|") >= 2 and SYS_KEEP.match(l.split("|")[1])]
        dir_ = os.path.join(OUT, host)
        write(dir_, "inlinefiles.txt", "\n".join(kept) + "\n")
        write(dir_, "cpuinfo", slim_cpuinfo(git_show(git_dir, commit, f"{base}/proc/cpuinfo")))
        rows.append((host, "intel/pepc", commit, base, "BSD-3-Clause", what))
    return rows


def ttar_entries(text):
    """(kind, path, body) of each entry: kind is 'file', 'dir' or 'link'."""
    entries, cur = [], None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("Path: "):
            cur = {"path": line[6:], "kind": "file", "body": None}
            entries.append(cur)
        elif line.startswith("Directory: "):
            cur = {"path": line[11:], "kind": "dir", "body": None}
            entries.append(cur)
        elif line.startswith("SymlinkTo: "):
            cur["kind"], cur["body"] = "link", line[11:]
        elif line.startswith("Lines: "):
            n = int(line[7:])
            cur["body"] = lines[i + 1:i + 1 + n]
            i += n
        i += 1
    return entries


def link_targets(entries):
    """The paths that kept symlinks point to, so that the links resolve once laid out."""
    targets = []
    for e in entries:
        if e["kind"] == "link" and TTAR_KEEP.match(e["path"]):
            parent = os.path.dirname(e["path"])
            targets.append(os.path.normpath(os.path.join(parent, e["body"])))
    return targets


def slim_ttar(text):
    out = []
    entries = ttar_entries(text)
    targets = link_targets(entries)

    def kept(path):
        if TTAR_DROP.search(path):
            return False
        return TTAR_KEEP.match(path) or any(
            path == t or path.startswith(t + "/") or t.startswith(path + "/") for t in targets
        )

    for e in entries:
        if not kept(e["path"]):
            continue
        if e["kind"] == "dir":
            out += [f"Directory: {e['path']}", "Mode: 755"]
        elif e["kind"] == "link":
            out += [f"Path: {e['path']}", f"SymlinkTo: {e['body']}"]
        else:
            body = e["body"] or []
            out += [f"Path: {e['path']}", f"Lines: {len(body)}", *body, "Mode: 644"]
        out.append("# ttar - - -")
    return "\n".join(out) + "\n"


def import_ttar(git_dir, path, name, what):
    commit = head(git_dir)
    write(os.path.join(OUT, name), "capture.ttar", slim_ttar(git_show(git_dir, commit, path)))
    repo = "prometheus/node_exporter" if "node_exporter" in git_dir else "prometheus/procfs"
    return [(name, repo, commit, path, "Apache-2.0", what)]


def main():
    pepc, node_exporter, procfs = sys.argv[1:4]
    rows = import_pepc(pepc)
    rows += import_ttar(node_exporter, "collector/fixtures/sys.ttar", "node-exporter",
                        "composite of several machines: RAPL package+core, a Lenovo battery, hwmon chips")
    rows += import_ttar(procfs, "testdata/fixtures.ttar", "procfs",
                        "an offline CPU's empty cpufreq policy (policy1)")
    with open(os.path.join(OUT, "SOURCES.tsv"), "w") as f:
        f.write("machine\trepository\tcommit\tpath\tlicence\twhat\n")
        for row in rows:
            f.write("\t".join(row) + "\n")


if __name__ == "__main__":
    main()
