#!/usr/bin/env python3
"""attach, live: how soon a step's line comes after the step ends
(bench/RESULTS.md, "attach, live").

simtrainer runs STEPS steps of about 5 ms under `stepblame attach --jsonl -`;
each line is stamped (CLOCK_MONOTONIC) as it arrives and compared with its
step's end_ns. Rounds alternate host-only (attach --no-gpu: the lines wait
100 ms and a tick) and with the GPU timeline (they wait for its batches, 3 s).
Prints, per round, the median, P90, P99 and max delay over the complete steps.
    sudo bench/live_delay.py [ROUNDS]       (2; env STEPBLAME, SIMTRAINER, STEPS)
"""
import json
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
stepblame = os.environ.get("STEPBLAME", os.path.join(here, "..", "build", "stepblame"))
simtrainer = os.environ.get("SIMTRAINER", os.path.join(here, "..", "build", "simtrainer"))
steps = os.environ.get("STEPS", "1000")


def one(host_only):
    sim = subprocess.Popen([simtrainer, "--steps", steps, "--kernels", "6", "--kernel-us", "500",
                            "--start-delay-ms", "1500", "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    a = subprocess.Popen([stepblame, "attach", "-p", str(sim.pid), "-d", "120", "--jsonl", "-"] +
                         (["--no-gpu"] if host_only else []),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    delay = []
    for line in a.stdout:
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        d = json.loads(line)
        if not d.get("incomplete"):
            delay.append((now - d["end_ns"]) / 1e6)
    a.wait()
    sim.wait()
    delay.sort()
    q = lambda p: delay[min(len(delay) - 1, int(len(delay) * p))]
    return len(delay), q(0.5), q(0.9), q(0.99), delay[-1]


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
print("%-10s %6s %9s %9s %9s %9s" % ("mode", "steps", "median", "P90", "P99", "max"))
for r in range(rounds):
    for host in (True, False):
        n, p50, p90, p99, mx = one(host)
        print("%-10s %6d %7.0fms %7.0fms %7.0fms %7.0fms" %
              ("host-only" if host else "GPU", n, p50, p90, p99, mx), flush=True)
