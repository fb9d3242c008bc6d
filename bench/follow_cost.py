#!/usr/bin/env python3
"""What following the target's child processes costs every context switch of the machine.

The target filter (bpf/common.bpf.h) compares the tgid with the target's; once
a descendant is followed it also looks the tgid up in the hash of followed
processes, for every task that switches, the target's or not. This measures the
scheduler programs' run time per run (kernel BPF stats, as bench/bpfstats.py)
while other processes ping-pong (microbench rate --kind switch, untraced), with
the traced target a shell that has one child, recorded with and without
--no-children: interleaved pairs, the difference per run and per switch.

    sudo bench/follow_cost.py [PAIRS]
"""
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import bpfstats  # noqa: E402

PROGS = ("btf_switch", "btf_waking", "btf_wakeup")


def one(no_children):
    # the target: a shell with a child, both asleep; other processes do the switching
    target = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    noise = subprocess.Popen(bench.mb_cmd(["rate", "--kind", "switch", "--rate", "20000",
                                           "--seconds", "4"]),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    path = os.path.join(bench.OUT, "trace-follow-cost.sbt")
    cmd = [bench.SB, "record", "-p", str(target.pid), "-o", path, "--agent-cpu",
           str(bench.AGENT_CPU), "--no-alloc"] + (["--no-children"] if no_children else [])
    rec = bench.record_attached(cmd)
    noise.stdin.write("x")
    noise.stdin.close()
    time.sleep(0.5)
    s0 = bpfstats.snapshot(rec.pid)
    time.sleep(2.0)
    s1 = bpfstats.snapshot(rec.pid)
    noise.stdout.read()
    noise.wait()
    rec.terminate()
    rec.wait(timeout=30)
    # the shell and its sleep: the process group this script started
    os.killpg(target.pid, 9)
    target.wait()
    bench.drop_trace(path)
    out = {}
    for name in PROGS:
        ns0, c0 = s0.get(name, (0, 0))
        ns1, c1 = s1.get(name, (0, 0))
        if c1 > c0:
            out[name] = (ns1 - ns0) / (c1 - c0)
    return out


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if not os.access(bench.SB, os.X_OK) or not os.access(bench.MB, os.X_OK):
        print("follow_cost: need %s and %s" % (bench.SB, bench.MB), file=sys.stderr)
        return 1
    os.sched_setaffinity(0, {bench.AGENT_CPU})
    fd = bpfstats.enable_stats()
    rows = {p: ([], []) for p in PROGS}
    try:
        for _ in range(pairs):
            for no_children in (True, False):
                r = one(no_children)
                for p in PROGS:
                    if p in r:
                        rows[p][0 if no_children else 1].append(r[p])
    finally:
        os.close(fd)
    print("ns per program run, median of %d interleaved pairs: --no-children | children "
          "followed (one child) | added" % pairs)
    for p in PROGS:
        a, b = sorted(rows[p][0]), sorted(rows[p][1])
        if not a or not b:
            continue
        ma, mb = a[len(a) // 2], b[len(b) // 2]
        print("  %-12s %6.1f | %6.1f | %+6.1f   (runs: %s | %s)" % (
            p, ma, mb, mb - ma, " ".join("%.1f" % x for x in a), " ".join("%.1f" % x for x in b)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
