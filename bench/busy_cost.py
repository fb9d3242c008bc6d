#!/usr/bin/env python3
"""Which probe family costs a busy trainer what (bench/RESULTS.md, "A busy trainer").

simtrainer with a busy launch thread, its host work the step's critical path
(as OBS_CONFIGS=busy in bench/observer.py: per step 20 round trips to a peer
thread, 60 minor faults, 57 malloc/free pairs, 200 us of CPU a launch; about
13k switches, 17k faults and 16k mallocs a second on the launcher), traced by `stepblame record` with its defaults; the kernel's BPF run
statistics of each of the agent's programs over WINDOW seconds of the capture
(after the guard's first second), grouped by family, and the launcher's own
rates from /proc over the same window. ROUNDS captures; the table gives the
median of each figure. A program's time is the time inside it: the trap or
tracepoint dispatch around it is not counted (the observer effect,
`OBS_CONFIGS=busy bench/observer.py`, is the whole).
    sudo bench/busy_cost.py [ROUNDS] [WINDOW]        (3, 3)
BUSY_OPTS: more options of `stepblame record` (e.g. "--fold 0"). BUSY_VARIANTS:
option sets separated by '|' (e.g. "|--fold 0": the defaults, then --fold 0),
captured in turn in each round, one table each (the VM's speed drifts by a
quarter between minutes: compare variants of one run only). A variant that starts
with @PATH records with the stepblame binary at PATH (another build).
BUSY_TARGET=torch measures the PyTorch loop of the tests instead
(tests/progs/torch_trainer.py, two DataLoader workers, all on CPU BENCH_CPU, 1;
/usr/bin/python3 with torch): one loop for the whole run, each capture attached
to it by PID; the per-thread rates are then its main thread's.
BUSY_PIN=launcher pins simtrainer as bench/observer.py does: the launcher alone
on BENCH_CPU (1), its other threads on AGENT_CPU (0).
"""
import json
import os
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import bpfstats  # noqa: E402

SIM = os.environ.get("SIMTRAINER", "build/simtrainer")
TARGET = os.environ.get("BUSY_TARGET", "simtrainer")
PIN = os.environ.get("BUSY_PIN") == "launcher"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUSY = ["--kernels", "10", "--kernel-us", "100", "--launch-us", "200", "--busy", "20,60,57"]


def family(name):
    """The probe family of one of the agent's programs (bpf/*.bpf.c), by name."""
    n = name.lower()
    if n.startswith(("raw_sys_", "tp_enter", "tp_exit")):
        return "system calls (I/O, mmap family)"
    if n.startswith("cuda_"):
        return "CUDA driver"
    if n.startswith("step_"):
        return "step marks"
    if "fault" in n:
        return "page faults"
    if "reclaim" in n or "memcg" in n or "compact" in n:
        return "reclaim, compaction"
    if "alloc" in n or "free" in n or "burst" in n or "memalign" in n:
        return "allocator"
    if n == "cpu_sample":
        return "CPU sample"
    return "scheduler"


def launcher_counts(pid):
    for t in os.listdir("/proc/%d/task" % pid):
        base = "/proc/%d/task/%s/" % (pid, t)
        try:
            if (open(base + "comm").read().strip() != "launcher" if TARGET == "simtrainer"
                    else int(t) != pid):
                continue
            st = open(base + "status").read()
            sw = sum(int(l.split()[1]) for l in st.splitlines() if "ctxt_switches" in l)
            flt = int(open(base + "stat").read().rsplit(")", 1)[1].split()[7])
            return sw, flt
        except OSError:
            pass
    return 0, 0


def one(window, opts, loop=None):
    sb = bench.SB
    if opts and opts[0].startswith("@"):
        sb, opts = opts[0][1:], opts[1:]
    pin = (["taskset", "-c", str(bench.AGENT_CPU)] if PIN else [])
    sim = loop or subprocess.Popen(pin + [SIM, "--steps", "100000", "--quiet"] + BUSY +
                                   (["--launcher-cpu", str(bench.CPU)] if PIN else []),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rec = subprocess.Popen([sb, "record", "-q", "-p", str(sim.pid), "-o", "/dev/shm/busy.sbt",
                            "--no-gpu"] + (["--agent-cpu", str(bench.AGENT_CPU)] if PIN else []) + opts,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(3)
        s0, c0, t0 = bpfstats.snapshot(rec.pid), launcher_counts(sim.pid), time.monotonic()
        time.sleep(window)
        s1, c1, t1 = bpfstats.snapshot(rec.pid), launcher_counts(sim.pid), time.monotonic()
    finally:
        rec.send_signal(2)
        rec.wait()
        if not loop:
            sim.kill()
            sim.wait()
        try:
            os.unlink("/dev/shm/busy.sbt")
        except OSError:
            pass
    dt = t1 - t0
    fam, progs = {}, {}
    for name, (ns1, cnt1) in s1.items():
        ns0, cnt0 = s0.get(name, (0, 0))
        ns, cnt = (ns1 - ns0) / dt, (cnt1 - cnt0) / dt
        if cnt <= 0:
            continue
        progs[name] = (ns, cnt)
        fam[family(name)] = fam.get(family(name), 0) + ns
    return {"switches_s": (c1[0] - c0[0]) / dt, "faults_s": (c1[1] - c0[1]) / dt,
            "families_ns_s": fam, "programs": progs}


def table(res, rounds, window):
    fams = sorted({f for r in res for f in r["families_ns_s"]})
    print("%s: %.0f switches/s, %.0f faults/s (median of %d captures, %.0f s each)" % (
        "launcher" if TARGET == "simtrainer" else "main thread",
        statistics.median(r["switches_s"] for r in res),
        statistics.median(r["faults_s"] for r in res), rounds, window))
    print()
    print("| family | BPF time, ms a second (median) | share of one CPU |")
    print("|---|---|---|")
    tot = 0
    for f in fams:
        v = statistics.median(r["families_ns_s"].get(f, 0) for r in res) / 1e6
        tot += v
        print("| %s | %.2f | %.2f%% |" % (f, v, v / 10))
    print("| all | %.2f | %.2f%% |" % (tot, tot / 10))
    print()
    print("| program | ns a run | runs a second |")
    print("|---|---|---|")
    names = sorted({n for r in res for n in r["programs"]})
    for n in names:
        v = [r["programs"][n] for r in res if n in r["programs"]]
        print("| %s | %.0f | %.0f |" % (n, statistics.median(ns / cnt for ns, cnt in v),
                                        statistics.median(cnt for ns, cnt in v)))


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    window = float(sys.argv[2]) if len(sys.argv) > 2 else 3
    variants = os.environ.get("BUSY_VARIANTS", os.environ.get("BUSY_OPTS", "")).split("|")
    fd = bpfstats.enable_stats()
    res = {v: [] for v in variants}
    loop = stop = None
    if TARGET == "torch":
        os.makedirs(bench.OUT, exist_ok=True)
        loop, _, stop = bench.torch_loop(os.path.join(bench.OUT, "busy-torch"), 1000000,
                                         os.environ.get("BENCH_CPU", "1"),
                                         os.environ.get("PYTHON", "/usr/bin/python3"),
                                         os.path.join(ROOT, "build", "libstepblame.so"))
    try:
        for _ in range(rounds):
            for v in variants:
                res[v].append(one(window, v.split(), loop))
    finally:
        os.close(fd)
        if loop:
            open(stop, "w").close()
            try:
                loop.wait(timeout=30)
            except subprocess.TimeoutExpired:
                loop.kill()
    for v in variants:
        if len(variants) > 1:
            print("## stepblame record %s" % (v or "(defaults)"))
            print()
        table(res[v], rounds, window)
        print()
    os.makedirs(bench.OUT, exist_ok=True)
    with open(os.path.join(bench.OUT, "busy_cost.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
