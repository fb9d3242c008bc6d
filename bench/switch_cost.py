#!/usr/bin/env python3
"""The scheduler programs' run time of two builds, interleaved (bench/RESULTS.md, "Steal").

Two measures, each taken with OLD and NEW in turn, PAIRS times:
  other   the switches of processes that are not traced (microbench ping-pong
          beside a traced sleeping shell, as bench/follow_cost.py): the cost every
          task on the machine pays
  target  the traced process's own ping-pong (microbench rate --kind switch, as
          bench/bpfstats.py): the cost on the trainer's own switches and wakeups
Kernel BPF run-time statistics (which add two clock reads per run), ns per run.
    sudo bench/switch_cost.py OLD/stepblame NEW/stepblame [PAIRS]
"""
import os
import statistics
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import bpfstats  # noqa: E402
import follow_cost  # noqa: E402

PROGS = ("btf_switch", "btf_wakeup", "btf_waking")


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    builds = {"old": sys.argv[1], "new": sys.argv[2]}
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    for b in builds.values():
        if not os.access(b, os.X_OK):
            print("switch_cost: no %s" % b, file=sys.stderr)
            return 1
    os.sched_setaffinity(0, {bench.AGENT_CPU})
    fd = bpfstats.enable_stats()
    rows = {(m, tag, p): [] for m in ("other", "target") for tag in builds for p in PROGS}
    per_op = {tag: [] for tag in builds}
    try:
        for _ in range(pairs):
            for tag, sb in builds.items():
                bench.SB = sb
                for p, ns in follow_cost.one(True).items():
                    rows[("other", tag, p)].append(ns)
                r = bpfstats.measure("switch", 20000)
                per_op[tag].append(r["bpf_ns_per_op"])
                for name, ns, _ in r["programs"]:
                    if name in PROGS:
                        rows[("target", tag, name)].append(ns)
    finally:
        os.close(fd)

    def med(v):
        return "%.0f" % statistics.median(v) if v else "-"

    print("| switches of | program | old ns/run | new ns/run |")
    print("|---|---|---|---|")
    for m in ("other", "target"):
        for p in PROGS:
            print("| %s | %s | %s (%s) | %s (%s) |" % (
                m, p, med(rows[(m, "old", p)]), ", ".join("%.0f" % x for x in rows[(m, "old", p)]),
                med(rows[(m, "new", p)]), ", ".join("%.0f" % x for x in rows[(m, "new", p)])))
    print("| target | all programs, per round trip | %s | %s |" % (med(per_op["old"]),
                                                                   med(per_op["new"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
