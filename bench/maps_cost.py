#!/usr/bin/env python3
"""What reading and recording a target's mappings at attach costs the agent.

The target is a Python process holding N extra anonymous mappings (alternately
read-only and read-write, so that the kernel cannot merge them). The agent
writes the host, target and thread records, reads /proc/PID/maps and writes
the mapping records (capture/stackmaps.c), then writes the probe statuses: the
time from the target record to the first probe record is what the attach
spent on the process (its threads, its children, its mappings). Each N is
recorded by the OLD and the NEW build in interleaved pairs; per run the span,
the mapping records written and the maps text's size.

    sudo bench/maps_cost.py OLD_STEPBLAME NEW_STEPBLAME [PAIRS]
"""
import os
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

SIZES = (0, 2000, 10000, 30000)

TARGET = r"""
import mmap, sys, time
n = int(sys.argv[1])
keep = [mmap.mmap(-1, 4096, prot=mmap.PROT_READ | (mmap.PROT_WRITE if i % 2 else 0))
        for i in range(n)]
print("ready", flush=True)
time.sleep(60)
"""


def one(sb, n):
    target = subprocess.Popen(["/usr/bin/python3", "-c", TARGET, str(n)], stdout=subprocess.PIPE,
                              text=True)
    target.stdout.readline()
    with open("/proc/%d/maps" % target.pid, "rb") as f:
        maps_bytes = len(f.read())
    path = os.path.join(bench.OUT, "trace-maps-cost.sbt")
    cmd = [sb, "record", "-p", str(target.pid), "-o", path, "-d", "1", "--no-alloc",
           "--agent-cpu", str(bench.AGENT_CPU)]
    rec = bench.record_attached(cmd)
    rec.wait(timeout=60)
    target.kill()
    target.wait()
    t_target = t_probe = None
    mappings = 0
    for line in subprocess.run([sb, "dump", path], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        if f[3] == "target" and t_target is None:
            t_target = float(f[0])
        elif f[3] == "probe" and t_probe is None:
            t_probe = float(f[0])
        elif f[3] == "mapping":
            mappings += 1
    bench.drop_trace(path)
    return (t_probe - t_target) * 1e3, mappings, maps_bytes


def main():
    old, new = sys.argv[1], sys.argv[2]
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.makedirs(bench.OUT, exist_ok=True)
    print("| extra mappings | maps text | old: ms at attach | new: ms at attach | new - old, ms "
          "| mapping records old / new |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in SIZES:
        a, b, d = [], [], []
        recs = None
        for _ in range(pairs):
            ta, ra, size = one(old, n)
            tb, rb, _ = one(new, n)
            a.append(ta)
            b.append(tb)
            d.append(tb - ta)
            recs = (ra, rb)
            time.sleep(0.2)
        print("| %d | %d KiB | %.1f | %.1f | %+.1f (%s) | %d / %d |" % (
            n, size // 1024, statistics.median(a), statistics.median(b), statistics.median(d),
            ", ".join("%+.1f" % x for x in d), recs[0], recs[1]))


if __name__ == "__main__":
    main()
