#!/usr/bin/env python3
"""What one user-stack capture costs in the kernel (bench/RESULTS.md, "Stack capture").

Runs `microbench rate --kind fault` (a steady page-fault load, one thread) traced
by `stepblame record`, with stacks and with --no-stacks, rounds interleaved, and
reads the fault program's run statistics (bpfstats.py's method) over 1.5 s of
each capture. With stacks the fault program captures one stack per thread per
ms (the rate limit), so the cost of one capture is the program's extra time per
second divided by the stacks it took per second (counted in the trace).

Then the same for a stack copy (the registers and the stack's top pages, walked
by the agent): a measuring build that copies at every stack (make
BUILD=build/copyall BPF_EXTRA=-DSB_STACK_COPY_GAP_NS=0, built here), with its
copies and with --fp-stacks, rounds interleaved: what a copy adds to a stack is
the fault program's extra time per second over the copies per second (the
trace's stack records marked copied).
"""
import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import bpfstats  # noqa: E402

RATE = 40000
ROUNDS = int(os.environ.get("STACK_ROUNDS", "3"))
# STACK_COPY_ONLY=1: the stack copy's part only


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COPYALL = os.path.join(ROOT, "build", "copyall", "stepblame")


def count_stacks(path, copied=False):
    """stack records in the trace (copied: those whose probe copied the stack)"""
    out = subprocess.run([bench.SB, "dump", "--jsonl", path], capture_output=True, text=True,
                         timeout=120).stdout
    n = 0
    for line in out.splitlines():
        if '"type":"stack"' in line.replace(" ", ""):
            if not copied or int(json.loads(line).get("flags", 0)) & 2:
                n += 1
    return n


def one(stacks, sb=None, opts=(), copied=False):
    mb = subprocess.Popen(bench.mb_cmd(["rate", "--kind", "fault", "--rate", str(RATE),
                                        "--seconds", "3"]),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    path = os.path.join(bench.OUT, "trace-stackcost.sbt")
    cmd = [sb or bench.SB, "record", "-p", str(mb.pid), "-o", path, "--agent-cpu",
           str(bench.AGENT_CPU)] + list(opts)
    if not stacks:
        cmd.append("--no-stacks")
    rec = bench.record_attached(cmd)
    time.sleep(0.2)
    mb.stdin.write("x")
    mb.stdin.close()
    time.sleep(0.7)
    t0, s0 = time.monotonic(), bpfstats.snapshot(rec.pid)
    time.sleep(1.5)
    t1, s1 = time.monotonic(), bpfstats.snapshot(rec.pid)
    mb.stdout.read()
    mb.wait()
    rec.wait(timeout=30)
    ns0, c0 = s0.get("raw_fault", (0, 0))
    ns1, c1 = s1.get("raw_fault", (0, 0))
    nstacks = count_stacks(path, copied) if stacks else 0
    bench.drop_trace(path)
    return (ns1 - ns0) / (t1 - t0), (c1 - c0) / (t1 - t0), nstacks


def main():
    os.sched_setaffinity(0, {bench.AGENT_CPU})
    if os.environ.get("STACK_COPY_ONLY") != "1":
        compare(lambda: one(True), lambda: one(False), "stacks", "no-stacks",
                "stacks", "one stack capture")
    subprocess.run(["make", "-s", "-C", ROOT, "BUILD=build/copyall",
                    "BPF_EXTRA=-DSB_STACK_COPY_GAP_NS=0", "build/copyall/stepblame"], check=True)
    compare(lambda: one(True, COPYALL, copied=True), lambda: one(True, COPYALL, ["--fp-stacks"]),
            "copies", "fp-stacks", "copies", "one stack copy on top of a stack")
    return 0


def compare(with_it, without, tag_with, tag_without, what, label):
    """ROUNDS of with_it() and without() in turn, the kernel's statistics on;
    each gives (fault program ns/s, runs/s, events counted): what one event adds"""
    fd = bpfstats.enable_stats()
    on, off = [], []
    try:
        for _ in range(ROUNDS):
            on.append(with_it())
            off.append(without())
    finally:
        os.close(fd)
    for tag, rows in ((tag_with, on), (tag_without, off)):
        for ns, runs, n in rows:
            print("%-9s fault program %.0f ns/s, %.0f runs/s (%.0f ns/run), %d %s in the trace"
                  % (tag, ns, runs, ns / runs if runs else 0, n, what))
    per_run_on = sum(r[0] for r in on) / sum(r[1] for r in on)
    per_run_off = sum(r[0] for r in off) / sum(r[1] for r in off)
    # events per fault over the whole 3 s run
    per_fault = sum(r[2] for r in on) / (sum(r[1] for r in on) / len(on) * 3.0 * len(on))
    print("fault program: %.0f ns/run with, %.0f without; %.4f %s per fault"
          % (per_run_on, per_run_off, per_fault, what))
    if per_fault > 0:
        print("%s: %.0f ns" % (label, (per_run_on - per_run_off) / per_fault))


if __name__ == "__main__":
    sys.exit(main())
