"""Decodes a Perfetto trace with the `perfetto` Python package's own protos
(perfetto.protos.perfetto.trace.perfetto_trace_pb2, generated from Perfetto's trace.proto)
and prints what it holds as JSON, for the export tests to compare with the recording.
Exit status 3 when the package is missing (the test skips, saying why)."""
import json
import sys
from collections import defaultdict

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as e:  # pragma: no cover
    print(f"perfetto python package not importable: {e}", file=sys.stderr)
    sys.exit(3)

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

cpus = defaultdict(lambda: defaultdict(int))
last_ts = {}
out_of_order = 0
names = {}
tracks = {}
counters = defaultdict(list)
processes = threads = 0
comms = {}
for packet in trace.packet:
    kind = packet.WhichOneof("data")
    if kind == "ftrace_events":
        b = packet.ftrace_events
        for e in b.event:
            ev = e.WhichOneof("event")
            cpus[b.cpu][ev] += 1
            if e.timestamp < last_ts.get(b.cpu, 0):
                out_of_order += 1
            last_ts[b.cpu] = e.timestamp
            if ev == "sched_switch":
                comms[e.sched_switch.next_pid] = e.sched_switch.next_comm
    elif kind == "process_tree":
        processes += len(packet.process_tree.processes)
        threads += len(packet.process_tree.threads)
        for t in packet.process_tree.threads:
            names[t.tid] = t.name
    elif kind == "track_descriptor":
        d = packet.track_descriptor
        tracks[d.uuid] = d.name
        assert d.HasField("counter"), d
    elif kind == "track_event":
        te = packet.track_event
        assert te.type == pb.TrackEvent.TYPE_COUNTER, te
        counters[te.track_uuid].append((packet.timestamp, te.double_counter_value))
    else:
        cpus["other"][str(kind)] += 1

print(json.dumps({
    "cpus": {str(k): dict(v) for k, v in cpus.items()},
    "out_of_order": out_of_order,
    "processes": processes,
    "threads": threads,
    "thread_names": {str(k): v for k, v in names.items()},
    "switch_comms": {str(k): v for k, v in comms.items()},
    "counters": {tracks[u]: v for u, v in counters.items()},
    "tracks": sorted(tracks.values()),
}))
