#!/usr/bin/env python3
"""Where the traced cost goes: time spent inside stepblame's BPF programs per op.

For each workload kind, runs `microbench rate` at a modest paced rate, traced by
`stepblame record`, and reads the kernel's per-program run statistics
(run_time_ns, run_cnt from `bpftool prog show`) twice, 1.5 s apart, while the
capture runs. Statistics are switched on with BPF_ENABLE_STATS, which holds only
while this script keeps the returned fd open (they switch off again on exit,
even on a crash). They add two clock reads per program run, so the A/B numbers
of bench.py are measured without them, in a separate pass.

Output: per kind, the BPF program time per op, and per program ns per run and
runs per op. The rest of the added cost per op is the probe mechanism (uprobe
trap and single-step, tracepoint dispatch, ring buffer wakeups).
BPFSTATS_KINDS="fault mmap" measures only those kinds.
"""
import ctypes
import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

NR_BPF = 321            # x86_64
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0

KINDS = [
    # kind, ops/s, what one op is
    ("switch", 20000, "ping-pong round trip (2 switches)"),
    ("fault", 40000, "page fault"),
    ("mmap", 50000, "mmap+munmap pair"),
    ("malloc", 10000, "malloc(64)+free pair"),
]


def enable_stats():
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 32)()
    attr[0] = BPF_STATS_RUN_TIME
    fd = libc.syscall(NR_BPF, BPF_ENABLE_STATS, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_ENABLE_STATS")
    return fd


def prog_ids(pid):
    """IDs of the BPF programs the process holds, from its fds' fdinfo."""
    ids = set()
    d = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def snapshot(pid):
    ids = prog_ids(pid)
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True,
                         timeout=30).stdout
    progs = {}
    for p in json.loads(out or "[]"):
        if p["id"] in ids:
            progs[p.get("name", str(p["id"]))] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return progs


def measure(kind, rate):
    mb = subprocess.Popen(bench.mb_cmd(["rate", "--kind", kind, "--rate", str(rate),
                                        "--seconds", "3"]),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    path = os.path.join(bench.OUT, "trace-bpfstats-%s.sbt" % kind)
    rec = bench.record_attached([bench.SB, "record", "-p", str(mb.pid), "-o", path, "--agent-cpu",
                                 str(bench.AGENT_CPU)])
    time.sleep(0.2)
    mb.stdin.write("x")
    mb.stdin.close()
    time.sleep(0.7)
    t0, s0 = time.monotonic(), snapshot(rec.pid)
    time.sleep(1.5)
    t1, s1 = time.monotonic(), snapshot(rec.pid)
    out = mb.stdout.read()
    mb.wait()
    rec.wait(timeout=30)
    bench.drop_trace(path)
    res = bench.parse_kv(out)
    ops = res["achieved_rate"] * (t1 - t0)
    rows = []
    total = 0
    for name, (ns1, cnt1) in sorted(s1.items()):
        ns0, cnt0 = s0.get(name, (0, 0))
        dn, dc = ns1 - ns0, cnt1 - cnt0
        if dc <= 0:
            continue
        total += dn
        rows.append((name, dn / dc, dc / ops))
    return {"kind": kind, "achieved_rate": res["achieved_rate"], "ops": ops,
            "bpf_ns_per_op": total / ops if ops else 0, "programs": rows}


def main():
    if not os.access(bench.SB, os.X_OK) or not os.access(bench.MB, os.X_OK):
        print("bpfstats: need %s and %s" % (bench.SB, bench.MB), file=sys.stderr)
        return 1
    os.sched_setaffinity(0, {bench.AGENT_CPU})
    fd = enable_stats()
    results = []
    try:
        # BPFSTATS_KINDS="fault": only those kinds (bench/RESULTS.md, section 14)
        only = os.environ.get("BPFSTATS_KINDS", "").split()
        for kind, rate, what in KINDS:
            if only and kind not in only:
                continue
            r = measure(kind, rate)
            r["what"] = what
            results.append(r)
    finally:
        os.close(fd)
    with open(os.path.join(bench.OUT, "bpfstats.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("BPF program run time while tracing (kernel BPF stats; the programs fire system-wide")
    print("and filter inside, so runs per op include other processes' events)")
    print()
    print("| kind (one op) | ops/s | BPF program time per op | programs: ns per run x runs per op |")
    print("|---|---|---|---|")
    for r in results:
        progs = ", ".join("%s %.0f x %.2f" % (n, per, cnt) for n, per, cnt in r["programs"]
                          if cnt >= 0.005)
        print("| %s (%s) | %.0f | %.0f ns | %s |" % (r["kind"], r["what"], r["achieved_rate"],
                                                   r["bpf_ns_per_op"], progs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
