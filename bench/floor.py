#!/usr/bin/env python3
"""The floor under the probes: what hooking the events costs before any program body.

Three ways to run one microbench workload (bench/microbench.c, pinned to BENCH_CPU):
  untraced
  hollow    `stepblame record -p` of a build whose every BPF program returns at the
            target filter (make BUILD=build/hollow BPF_EXTRA=-DSB_BENCH_HOLLOW, built
            here if needed): the same hooks attached, nothing recorded. What it adds
            is what any tracer hooking these events pays on this machine.
  full      `stepblame record -p` of STEPBLAME (build/stepblame)
Both captures run with --no-alloc --no-gpu and the agent on AGENT_CPU.

Workloads (FLOOR_KINDS, default "switch fault mmap"): switch, a ping-pong with a
peer thread on the same CPU (ns per switch: one sched_switch, one sched_waking and
one sched_wakeup each); fault, a fresh 4 KiB page touched (ns per fault); mmap, one
mmap + munmap of a page (ns per pair). Each round runs the three ways of every
workload in an order rotated every round; a way's added cost in a round is its ns
per op minus the untraced ns per op of the same round. Prints the median of the
rounds and their min..max, and writes BENCH_OUT/floor.json.

    sudo python3 bench/floor.py [ROUNDS]      (bench/run builds build/bench/microbench)
"""
import json
import os
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402  (record_attached)
SB = os.path.abspath(os.environ.get("STEPBLAME", os.path.join(ROOT, "build", "stepblame")))
HOLLOW = os.path.join(ROOT, "build", "hollow", "stepblame")
OUT = os.environ.get("BENCH_OUT", os.path.join(ROOT, "build", "bench"))
MB = os.path.join(OUT, "microbench")
CPU = os.environ.get("BENCH_CPU", "1")
AGENT_CPU = os.environ.get("AGENT_CPU", "0")
WORKLOADS = {
    "switch": ["switch", "--batches", "15", "--ops", "20000"],
    "fault": ["fault", "--batches", "15", "--ops", "16384"],
    "mmap": ["mmap", "--batches", "15", "--ops", "20000"],
}


def ns_per_op(args, sb, trace):
    """One microbench run, traced by sb (None: untraced) from before its first op."""
    mb = subprocess.Popen([MB] + args + ["--cpu", CPU, "--wait-stdin"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    rec = None
    if sb:
        rec = bench.record_attached([sb, "record", "-p", str(mb.pid), "-o", trace, "--no-gpu",
                                     "--no-alloc", "--agent-cpu", AGENT_CPU])
        if rec.poll() is not None:
            mb.kill()
            raise RuntimeError("%s record exited %d before the workload" % (sb, rec.returncode))
        time.sleep(0.3)
    out, _ = mb.communicate("x", timeout=300)
    if rec:
        rec.wait(timeout=60)
        if rec.returncode != 0:
            raise RuntimeError("%s record exited %d" % (sb, rec.returncode))
        os.unlink(trace)
    if mb.returncode != 0:
        raise RuntimeError("microbench %s failed" % args[0])
    kv = dict(t.partition("=")[::2] for t in out.split())
    return float(kv["ns_op"])


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    kinds = os.environ.get("FLOOR_KINDS", "switch fault mmap").split()
    if not os.access(MB, os.X_OK):
        print("floor: no %s (bench/run builds it)" % MB, file=sys.stderr)
        return 1
    subprocess.run(["make", "-s", "-C", ROOT, "BUILD=build/hollow",
                    "BPF_EXTRA=-DSB_BENCH_HOLLOW", "build/hollow/stepblame"], check=True)
    ways = [("untraced", None), ("hollow", HOLLOW), ("full", SB)]
    ns = {(k, w): [] for k in kinds for w, _ in ways}
    trace = os.path.join(OUT, "floor.sbt")
    os.sched_setaffinity(0, {int(AGENT_CPU)})
    for i in range(rounds):
        for k in kinds:
            order = ways[i % 3:] + ways[:i % 3]
            for w, sb in order:
                v = ns_per_op(WORKLOADS[k], sb, trace)
                ns[(k, w)].append(v)
                print("round %d %-6s %-8s %9.1f ns/op" % (i, k, w, v), flush=True)
    print("\n| workload | way | ns/op, median | added ns/op: median (min..max) |")
    print("|---|---|---|---|")
    res = {}
    for k in kinds:
        base = ns[(k, "untraced")]
        for w, _ in ways:
            added = [a - b for a, b in zip(ns[(k, w)], base)]
            res["%s/%s" % (k, w)] = {"ns": ns[(k, w)], "added": added}
            print("| %s | %s | %.0f | %s |" % (
                k, w, statistics.median(ns[(k, w)]),
                "-" if w == "untraced" else "%+.0f (%+.0f..%+.0f)" % (
                    statistics.median(added), min(added), max(added))))
    with open(os.path.join(OUT, "floor.json"), "w") as f:
        json.dump({"rounds": rounds, "stepblame": SB, "results": res}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
