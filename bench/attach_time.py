#!/usr/bin/env python3
"""How long `stepblame record -d 1` takes, attach and all (bench/RESULTS.md, section 41).

Two builds in turn, ROUNDS times, on one simtrainer (8 kernels a step) that runs
through all of it: for each capture the seconds from the command's start to its
"attached N probes" line (the attach: loading and verifying the probe objects,
reading the target's mappings, attaching), and to its exit (the one-second
capture, then the detach and the trace's end). Medians and ranges.
    sudo bench/attach_time.py OLD/stepblame NEW/stepblame [ROUNDS]   (5)
The agent runs on AGENT_CPU (0), simtrainer wherever the scheduler puts it.
"""
import os
import statistics
import subprocess
import sys
import time

from interleave import interleaved

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
SIM = os.environ.get("SIMTRAINER", "build/simtrainer")
AGENT_CPU = os.environ.get("AGENT_CPU", "0")


def capture(sb, pid, out):
    t0 = time.monotonic()
    attached = None
    p = subprocess.Popen([sb, "record", "-p", str(pid), "-d", "1", "--agent-cpu", AGENT_CPU,
                          "-o", out], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if attached is None and " probes to PID " in line:
            attached = time.monotonic() - t0
    p.wait()
    if p.returncode != 0 or attached is None:
        sys.exit("%s record failed (exit %d)" % (sb, p.returncode))
    return attached, time.monotonic() - t0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    builds = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    out = "/tmp/attach_time.%d.sbtrace" % os.getpid()
    sim = subprocess.Popen([SIM, "--steps", "100000000", "--kernels", "8", "--quiet"])
    try:
        time.sleep(0.5)
        res = interleaved(builds, rounds, lambda b: capture(b, sim.pid, out),
                          lambda b, x: time.sleep(1))
    finally:
        sim.kill()
        sim.wait()
        if os.path.exists(out):
            os.unlink(out)
    print("| build | attach, s: median (min..max) | `record -d 1` in all, s |")
    print("|---|---|---|")
    for b in builds:
        a = [x[0] for x in res[b]]
        t = [x[1] for x in res[b]]
        print("| %s | %.2f (%.2f..%.2f) | %.2f (%.2f..%.2f) |" % (
            b, statistics.median(a), min(a), max(a), statistics.median(t), min(t), max(t)))


if __name__ == "__main__":
    main()
