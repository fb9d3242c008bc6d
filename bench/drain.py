#!/usr/bin/env python3
"""Live drain: which event rates `stepblame record` sustains without drops, and
what the agent's CPU costs at a given rate (driven by bench/run).

The events come from build/bench/microbench `rate`, paced on an absolute
schedule on BENCH_CPU (1): `--kind mmap` makes one mmap+munmap pair per op (two
`mmsys` records, 64 bytes each), `--kind switch` one futex ping-pong round trip
between two threads on that CPU (~7 records of 64-72 bytes). The agent runs on
AGENT_CPU (0), pinned by --agent-cpu.

Per run: the records and drops of the trace (its trailer and its once-a-second
`drops` records: when the first drop happened), and the agent's CPU time over
the workload's own window, read from /proc/AGENT/task/*/schedstat (ns, all its
threads) at the start and the end of the paced part, plus its total CPU
(utime+stime, getrusage of the child) for the whole run including the drain at
exit. Env: STEPBLAME, MICROBENCH, BENCH_OUT, DRAIN_SECONDS (8),
DRAIN_RATES (events/s list, default 50000,100000,200000,400000),
DRAIN_SMALL_RING_MB (1: the switch source at 200k events/s with a small ring,
which cannot hide a reader that falls behind).
"""
import os
import re
import resource
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

SECS = float(os.environ.get("DRAIN_SECONDS", "8"))
RATES = [int(x) for x in os.environ.get("DRAIN_RATES", "50000,100000,200000,400000").split(",")]
SMALL_MB = int(os.environ.get("DRAIN_SMALL_RING_MB", "1"))
# events per op of each kind (measured by bench.py: mmap 2.00, switch ~7.1 per round trip)
EPO = {"mmap": 2.0, "switch": 7.1}


def agent_ns(pid):
    tot = 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                tot += int(f.read().split()[0])
    except OSError:
        return None
    return tot


def drops_timeline(path):
    """seconds since the file's creation of the first `drops` record with ring_total > 0
    (records are written once a second: the drop began up to 1 s earlier), or None"""
    p = subprocess.Popen([bench.SB, "dump", path], stdout=subprocess.PIPE, text=True)
    first = None
    for line in p.stdout:
        if " drops " not in line:
            continue
        m = re.search(r"ring_total=(\d+)", line)
        if m and int(m.group(1)) > 0 and first is None:
            first = float(line.split()[0])
    p.wait()
    return first


def run(kind, events_s, ring_mb=None, secs=SECS):
    ops = events_s / EPO[kind]
    path = os.path.join(bench.OUT, "drain-%s-%d.sbt" % (kind, events_s))
    if os.path.exists(path):
        os.unlink(path)
    mb = subprocess.Popen(bench.mb_cmd(["rate", "--kind", kind, "--rate", "%.0f" % ops,
                                        "--seconds", str(secs)]),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    opts = ["--ring-mb", str(ring_mb)] if ring_mb else []
    rec = subprocess.Popen([bench.SB, "record", "-p", str(mb.pid), "-o", path, "--agent-cpu",
                            str(bench.AGENT_CPU)] + opts,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines, ready = [], threading.Event()

    def reader():
        for line in rec.stderr:
            lines.append(line.rstrip())
            if "stepblame: attached" in line:
                ready.set()
        ready.set()

    threading.Thread(target=reader, daemon=True).start()
    if not ready.wait(30):
        mb.kill()
        raise RuntimeError("stepblame did not attach: %s" % lines)
    time.sleep(0.2)
    c0, w0 = agent_ns(rec.pid), time.monotonic()
    mb.stdin.write("x")
    mb.stdin.close()
    # sample the agent's CPU every 0.5 s: a reader that stops draining shows flat
    samples = []
    while mb.poll() is None:
        time.sleep(0.5)
        samples.append(agent_ns(rec.pid))
    c1, w1 = agent_ns(rec.pid), time.monotonic()
    out = mb.stdout.read()
    _, status, ru = os.wait4(rec.pid, 0)
    rec.returncode = os.waitstatus_to_exitcode(status)
    res = bench.parse_kv(out)
    by, drops = None, None
    try:
        import observer  # noqa: E402  (trailer reader)
        by, drops = observer.trailer(path)
    except Exception as e:  # a trace without trailer is itself a finding
        lines.append("trailer: %s" % e)
    records = sum(by.values()) if by else 0
    first_drop = drops_timeline(path) if drops else None
    if first_drop is not None:
        # dump prints seconds since the file's creation (header: created_mono_ns at 32)
        import struct
        with open(path, "rb") as f:
            created = struct.unpack_from("<Q", f.read(40), 32)[0]
        first_drop = (created + first_drop * 1e9 - res["t0"]) / 1e9
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if os.environ.get("BENCH_KEEP") != "1" and os.path.exists(path):
        os.unlink(path)
    window_cpu = (c1 - c0) / 1e9 if c0 is not None and c1 is not None else None
    dur = (res["t1"] - res["t0"]) / 1e9
    flat = 0
    for a, b in zip(samples, samples[1:]):
        if a is not None and b is not None and b - a < 1e6:  # < 1 ms CPU in 0.5 s
            flat += 1
    return {
        "kind": kind, "target_events_s": events_s, "ring_mb": ring_mb or 64,
        "achieved_events_s": res["achieved_rate"] * EPO[kind], "seconds": dur,
        "records": records, "drops": drops, "first_drop_s": first_drop,
        "agent_cpu_window_s": window_cpu,
        "agent_cpu_pct": 100 * window_cpu / (w1 - w0) if window_cpu is not None else None,
        "agent_cpu_total_s": ru.ru_utime + ru.ru_stime,
        # steady state: agent CPU in the paced window per event generated in it
        "agent_ns_per_event": (1e9 * window_cpu / (res["achieved_rate"] * EPO[kind] * dur)
                               if window_cpu is not None and res["achieved_rate"] else None),
        "flat_half_seconds": flat, "half_seconds": max(0, len(samples) - 1),
        "file_bytes": size, "rc": rec.returncode,
        "stderr_tail": lines[-2:],
    }


def main():
    if os.geteuid() != 0:
        print("drain: needs root", file=sys.stderr)
        return 1
    os.sched_setaffinity(0, {bench.AGENT_CPU})
    rows = []
    # mmap: one record size, one thread; switch: mixed sizes from two threads
    plan = [("mmap", r, None) for r in RATES]
    plan += [("switch", r, None) for r in RATES if r >= 100000]
    # a small ring: what a missed wakeup costs when the reader must keep up
    plan += [("switch", r, SMALL_MB) for r in RATES if r == 200000]
    for kind, r, ring in plan:
        bench.log("== live drain: %s at %d events/s, %d MiB ring, %.0f s"
                  % (kind, r, ring or 64, SECS))
        x = run(kind, r, ring)
        bench.log("  %.0f events/s, %d records, drops %s (first at %s s), agent CPU %.1f%% "
                  "of a core in the window, %s of %s half-seconds with no agent CPU"
                  % (x["achieved_events_s"], x["records"], x["drops"], x["first_drop_s"],
                     x["agent_cpu_pct"] or 0, x["flat_half_seconds"], x["half_seconds"]))
        rows.append(x)
    import json
    with open(os.path.join(bench.OUT, "drain.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print()
    print("Live drain (%s, %.0f s per run, workload on CPU %d, agent on CPU %d)"
          % (bench.SB, SECS, bench.CPU, bench.AGENT_CPU))
    print()
    print("| source | target events/s | achieved events/s | ring MiB | records | drops "
          "| first drop after | agent CPU in window (per event) | agent CPU total "
          "| half-seconds the agent did not run |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        print("| %s | %d | %.0f | %d | %d | %s | %s | %.1f%% (%.0f ns) | %.2f s | %d of %d |" % (
            x["kind"], x["target_events_s"], x["achieved_events_s"], x["ring_mb"],
            x["records"], x["drops"],
            "%.1f s" % x["first_drop_s"] if x["first_drop_s"] is not None else "-",
            x["agent_cpu_pct"] or 0, x["agent_ns_per_event"] or 0, x["agent_cpu_total_s"],
            x["flat_half_seconds"], x["half_seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
