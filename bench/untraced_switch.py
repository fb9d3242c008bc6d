#!/usr/bin/env python3
"""Switch-ins the kernel did not trace, and what the trace says of them
(bench/RESULTS.md, section 43).

Two builds in turn, ROUNDS times: each captures `sbkids 0 2 300 20 0` (two
worker processes, 300 rounds of 20 ms of their own CPU time each, the parent
reading a byte per round) beside `stress-ng --cpu 1`, for about 6 s. In each
trace, per followed thread and in time order (a runslice and a scheduler run
at their start):
  preempted  switch-outs runnable
  own        slices of a thread's own while the trace had it off its CPU: a
             switch-in the kernel did not trace (schemas/trace.md, runslice)
  stale      of those, ones that begin at a preemption's switch-out written
             while the thread was back on its CPU (its held trip, written)
  unended    switch-outs followed by another switch-out or the thread's exit,
             with no switch-in, run or slice of its own between: the engine
             has the thread waiting until then
    sudo bench/untraced_switch.py OLD/stepblame NEW/stepblame [ROUNDS]   (6)
SBKIDS (build/tests/progs/sbkids) is the workload.
"""
import json
import os
import subprocess
import sys
import time

from interleave import interleaved

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
SBKIDS = os.environ.get("SBKIDS", "build/tests/progs/sbkids")


def key(r):
    return r["start_ns"] if r["type"] in ("runslice", "sched_run") else r["ts"]


def count(sb, trace):
    dump = subprocess.run([sb, "dump", trace, "-f", "jsonl"], capture_output=True, text=True,
                          check=True).stdout
    recs = [json.loads(x) for x in dump.splitlines()]
    recs = sorted((r for r in recs if "ts" in r), key=key)
    out = {}  # tid: the switch-out record still open
    n = {"preempted": 0, "own": 0, "stale": 0, "unended": 0}
    for r in recs:
        t, tid = r["type"], r.get("tid")
        o = out.get(tid)
        if t == "runslice":
            if o:
                n["own"] += 1
                if o["state"] == "runnable" and r["start_ns"] == o["ts"]:
                    n["stale"] += 1
                del out[tid]
        elif t in ("switch_out", "thread_exit") and o:
            n["unended"] += 1
            del out[tid]
        elif t in ("switch_in", "sched_run") and o:
            del out[tid]
        if t == "switch_out":
            out[tid] = r
            n["preempted"] += r["state"] == "runnable"
    return n


def capture(sb, trace):
    r, w = os.pipe()
    kids = subprocess.Popen([SBKIDS, "0", "2", "300", "20", "0"], stdin=r)
    os.close(r)
    rec = subprocess.Popen([sb, "record", "-p", str(kids.pid), "-d", "30", "-o", trace],
                           stderr=subprocess.PIPE, text=True)
    for line in rec.stderr:
        if " probes to PID " in line:
            break
    os.write(w, b"g")
    os.close(w)
    kids.wait()
    rec.communicate()
    if rec.returncode != 0:
        sys.exit("%s record failed (exit %d)" % (sb, rec.returncode))
    return count(sb, trace)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    builds = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    trace = "/tmp/untraced_switch.%d.sbtrace" % os.getpid()
    hog = subprocess.Popen(["stress-ng", "--cpu", "1", "--quiet"])
    try:
        time.sleep(0.5)
        res = interleaved(builds, rounds, lambda b: capture(b, trace),
                          lambda b, x: print(b, x, flush=True))
    finally:
        hog.terminate()
        hog.wait()
        if os.path.exists(trace):
            os.unlink(trace)
    print("| build | captures | preempted | own slices | stale trips written | unended |")
    print("|---|---:|---:|---:|---:|---:|")
    for b in builds:
        s = {k: sum(x[k] for x in res[b]) for k in res[b][0]}
        print("| %s | %d | %d | %d | %d (in %d captures) | %d |" % (
            b, len(res[b]), s["preempted"], s["own"], s["stale"],
            sum(1 for x in res[b] if x["stale"]), s["unended"]))


if __name__ == "__main__":
    main()
