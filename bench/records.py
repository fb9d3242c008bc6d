"""The record types of a trace file, read from the one table that defines them:
SB_RECORD_TYPES in bpf/events.h (schemas/trace.md, "Record types")."""
import os
import re

EVENTS_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bpf", "events.h")
# X(ENUM, id, "name", struct, start, cost, kind)
ROW = re.compile(r'^\s*X\(\s*(SB_\w+)\s*,\s*(\d+)\s*,\s*"(\w+)"\s*,\s*(\w+)\s*,\s*(\w+)\s*,'
                 r'\s*(\w+)\s*,\s*(\w+)\s*\)', re.M)


def record_types(path=EVENTS_H):
    """{id: {"enum", "name", "struct", "start", "cost", "kind"}} for every type."""
    with open(path) as f:
        rows = ROW.findall(f.read())
    if not rows:
        raise RuntimeError("%s: no SB_RECORD_TYPES rows" % path)
    return {int(i): {"enum": e, "name": n, "struct": s, "start": st, "cost": c, "kind": k}
            for e, i, n, s, st, c, k in rows}


TYPES = record_types()
# kernel events: what the workload makes the probes emit
KERNEL = {i: t["name"] for i, t in TYPES.items() if t["kind"] == "KERNEL"}
# everything else is written by the agent
AGENT = {i: t["name"] for i, t in TYPES.items() if t["kind"] != "KERNEL"}
