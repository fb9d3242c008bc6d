#!/usr/bin/env python3
"""Overhead benchmark of `stepblame record` (driven by bench/run).

For each workload of build/bench/microbench, runs A (untraced) and B (traced by
`stepblame record -p PID`) alternately, PAIRS pairs (2*PAIRS-1 for page faults,
the noisiest), order flipped every pair (A B, B A, ...) so slow drift hits both
sides alike. Each run prints the median
ns/op of its batches; the table gives the median of those run medians and their
min..max, the added cost per op (median B - median A), the trace records per op
(counted in the trace file between the workload's first and last timed batch)
and the added cost per event. Then (BENCH_DROP_TEST=1; bench/drain.py does it
in more detail) the drop test: paced event rates, traced, with the ring drop
counters from the trace file; and always the drop accounting check.

The workload runs pinned to BENCH_CPU (default 1), the agent with --agent-cpu
AGENT_CPU (default 0) and this driver on AGENT_CPU too.

Environment: STEPBLAME (default build/stepblame), MICROBENCH (default
build/bench/microbench), BENCH_PAIRS (5), BENCH_QUICK=1 (2 pairs, short drop
test), BENCH_OUT (directory for traces and raw results, default build/bench),
BENCH_KEEP=1 (keep the big drop-test traces too).
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402

SB = os.environ.get("STEPBLAME", "build/stepblame")
MB = os.environ.get("MICROBENCH", "build/bench/microbench")
OUT = os.environ.get("BENCH_OUT", "build/bench")
QUICK = os.environ.get("BENCH_QUICK") == "1"
PAIRS = int(os.environ.get("BENCH_PAIRS", "2" if QUICK else "5"))
CPU = int(os.environ.get("BENCH_CPU", "1"))
AGENT_CPU = int(os.environ.get("AGENT_CPU", "0"))
# after the recorder's "recording" line, wait for its post-attach line
# ("stepblame: attached N probes ..."; older binaries: the GPU channel note); if
# it never comes, this fixed delay after "recording"
ATTACH_FALLBACK_S = 2.0


def torch_loop(prefix, steps, cpu="1", python="/usr/bin/python3", lib="build/libstepblame.so"):
    """The PyTorch loop of the tests (tests/progs/torch_trainer.py: a conv net,
    DataLoader with 2 worker processes, all on CPU cpu, steps marked through lib),
    started and past its warm-up. Its truth goes to PREFIX-truth.jsonl; it ends
    (before `steps`) once PREFIX-stop exists. Returns (loop, truth, stop)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    truth, ready, stop = prefix + "-truth.jsonl", prefix + "-ready", prefix + "-stop"
    for f in (truth, ready, stop):
        if os.path.exists(f):
            os.unlink(f)
    loop = subprocess.Popen(["taskset", "-c", str(cpu), python,
                             os.path.join(root, "tests", "progs", "torch_trainer.py"),
                             "--steps", str(steps), "--workers", "2", "--threads", "1",
                             "--lib", os.path.abspath(lib), "--truth", truth, "--ready", ready,
                             "--stop", stop],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(ready):
        if loop.poll() is not None:
            raise SystemExit("the loop exited before its first step (python3-torch missing?)")
        time.sleep(0.1)
    time.sleep(2)  # past the loop's own warm-up
    return loop, truth, stop


def ATTACHED(line):
    return ("stepblame: attached" in line or "GPU timeline" in line
            or "GPU channel" in line)


def record_attached(cmd):
    """start the recorder cmd; return it once its probes are attached (or after
    ATTACH_FALLBACK_S when it never says so within 20 s); its stderr is read to the end"""
    rec = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ready = threading.Event()

    def reader():
        for line in rec.stderr:
            if ATTACHED(line):
                ready.set()
        ready.set()

    threading.Thread(target=reader, daemon=True).start()
    if not ready.wait(20):
        time.sleep(ATTACH_FALLBACK_S)
    return rec

# records the agent writes itself (every type but the kernel's, bpf/events.h), and
# dump's file header line: not events of the workload
AGENT_TYPES = {"header"} | set(records.AGENT.values())

# B side: a list of `stepblame record` options, or ("perf-uprobe", SPEC) for the
# floor: bare kernel uprobes put in by the workload itself, no stepblame, no BPF
FLOOR_SPEC = "malloc,free,malloc-ret,free-ret"
SCHED = {"switch_out", "switch_in", "runslice", "wakeup", "migrate"}
# Many short batches: the median of a run is then robust against the odd
# preemption by other work on the VM. The fault batches are 1 MiB (256 pages):
# freed memory is reused at once instead of going back to the hypervisor.
WORKLOADS = [
    # name, microbench args, B side, what one op is, record types of the op's own family
    ("switch", ["switch", "--ops", "2000", "--batches", "35"], [], "context switch", SCHED),
    ("fault", ["fault", "--ops", "256", "--batches", "101"], [], "page fault", {"fault"}),
    # the probes' own cost per call: the overhead guard off (it would detach
    # them from a loop that does nothing but allocate)
    ("malloc", ["malloc", "--ops", "1000", "--batches", "21"], ["--max-overhead", "0"],
     "malloc(64)+free pair", {"alloc"}),
    # the default: the guard duty-cycles them
    ("malloc, guard (default 1%)", ["malloc", "--ops", "20000", "--batches", "21"], [],
     "malloc(64)+free pair", {"alloc"}),
    ("malloc --no-alloc", ["malloc", "--ops", "20000", "--batches", "21"], ["--no-alloc"],
     "malloc(64)+free pair", {"alloc"}),
    ("malloc, bare uprobes (floor)", ["malloc", "--ops", "1000", "--batches", "21"],
     ("perf-uprobe", FLOOR_SPEC), "malloc(64)+free pair", {"alloc"}),
    ("mmap", ["mmap", "--ops", "2000", "--batches", "35"], [], "mmap+munmap pair", {"mmsys"}),
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_kv(line):
    d = {}
    for tok in line.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            try:
                d[k] = int(v)
            except ValueError:
                try:
                    d[k] = float(v)
                except ValueError:
                    d[k] = v
    return d


def mb_cmd(args):
    return [MB] + args + ["--cpu", str(CPU), "--wait-stdin"]


def run_untraced(args):
    p = subprocess.Popen(mb_cmd(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate("x", timeout=120)
    if p.returncode != 0:
        raise RuntimeError("microbench failed: %s" % " ".join(args))
    return parse_kv(out)


def dump_records(path):
    p = subprocess.run([SB, "dump", path, "--jsonl"], capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        raise RuntimeError("stepblame dump %s failed (%d): %s" %
                           (path, p.returncode, p.stderr.strip()))
    for line in p.stdout.splitlines():
        if line.strip():
            yield json.loads(line)


def analyse(path, res):
    """Counts of workload records in [t0, t1] by type, drops, attach check."""
    t0, t1 = res["t0"], res["t1"]
    by_type = {}
    last_probe_ts = 0
    trailer = None
    last_drops = None
    n_all = 0
    for r in dump_records(path):
        n_all += 1
        t = r.get("type")
        if t == "probe":
            last_probe_ts = max(last_probe_ts, r.get("ts", 0))
        elif t == "trailer":
            trailer = r
        elif t == "drops":
            last_drops = r
        if t in AGENT_TYPES:
            continue
        ts = r.get("ts", 0)
        if t0 <= ts <= t1:
            by_type[t] = by_type.get(t, 0) + 1
    return {
        "by_type": by_type,
        "records": sum(by_type.values()),
        "attached_before_t0": last_probe_ts != 0 and last_probe_ts < t0,
        "attach_margin_ms": (t0 - last_probe_ts) / 1e6 if last_probe_ts else None,
        "drops_total": trailer.get("drops_total") if trailer else None,
        "drops_ring": last_drops.get("ring") if last_drops else None,
        "trailer": trailer is not None,
        "file_records": n_all,
    }


def irq_work_count(cpu):
    """IRQ work interrupts (IWI) taken so far by cpu: BPF ring buffer wakeups go this way."""
    try:
        with open("/proc/interrupts") as f:
            head = f.readline().split()
            col = head.index("CPU%d" % cpu)
            for line in f:
                parts = line.split()
                if parts and parts[0] == "IWI:":
                    return int(parts[1 + col])
    except (OSError, ValueError, IndexError):
        pass
    return None


def run_traced(args, rec_opts, tag):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "trace-%s.sbt" % tag)
    if os.path.exists(path):
        os.unlink(path)
    p = subprocess.Popen(mb_cmd(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    r = subprocess.Popen([SB, "record", "-p", str(p.pid), "-o", path, "--agent-cpu",
                          str(AGENT_CPU)] + rec_opts,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    recording = threading.Event()
    attached = threading.Event()

    def reader():
        for line in r.stderr:
            lines.append(line.rstrip())
            if "recording PID" in line:
                recording.set()
            if ATTACHED(line):
                attached.set()
        recording.set()

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    t_start = time.monotonic()
    if not recording.wait(30):
        raise RuntimeError("recorder printed nothing in 30 s")
    if not attached.wait(20):
        log("  (no post-attach line from the recorder; waiting %.1f s)" % ATTACH_FALLBACK_S)
        time.sleep(ATTACH_FALLBACK_S)
    attach_s = time.monotonic() - t_start
    time.sleep(0.2)
    iwi0 = irq_work_count(CPU)
    try:
        out, _ = p.communicate("x", timeout=300)
    except Exception:
        p.kill()
        raise
    try:
        r.wait(timeout=30)
    except subprocess.TimeoutExpired:
        log("  recorder did not stop after the target exited: SIGINT")
        r.send_signal(signal.SIGINT)
        r.wait(timeout=30)
    iwi1 = irq_work_count(CPU)
    th.join(5)
    if p.returncode != 0:
        raise RuntimeError("microbench failed under tracing: %s" % " ".join(args))
    res = parse_kv(out)
    if r.returncode != 0 or not os.path.exists(path):
        raise RuntimeError("stepblame record exited %d: %s" % (r.returncode, " | ".join(lines)))
    res.update(analyse(path, res))
    res["attach_s"] = attach_s
    res["path"] = path
    res["iwi"] = iwi1 - iwi0 if iwi0 is not None and iwi1 is not None else None
    res["recorder_stderr"] = lines
    if not res["attached_before_t0"]:
        log("  WARNING: last probe attached after the workload started (%s)" % tag)
    return res


def alloc_calls_per_op(path, ops_total):
    """Fast allocator calls counted in the kernel (alloc_stats), per op."""
    best = 0
    for r in dump_records(path):
        if r.get("type") == "alloc_stats":
            best = max(best, sum_counts(r))
    return best / ops_total if ops_total else 0


def sum_counts(r):
    """Sum of per-function call counts in an alloc_stats record, whatever its layout."""
    c = r.get("count") or r.get("counts") or r.get("calls")
    if isinstance(c, dict):
        return sum(v for v in c.values() if isinstance(v, (int, float)))
    if isinstance(c, list):
        return sum(v for v in c if isinstance(v, (int, float)))
    if isinstance(c, (int, float)):
        return c
    return 0


def drop_trace(path):
    """The drop-test traces are big (50-90 MB each): keep them only with BENCH_KEEP=1."""
    if os.environ.get("BENCH_KEEP") != "1" and os.path.exists(path):
        os.unlink(path)


def fmt_range(xs):
    f = "%.1f..%.1f" if max(xs) < 100 else "%.0f..%.0f"
    return f % (min(xs), max(xs))


def bench_workloads():
    rows = []
    for name, args, rec_opts, what, family in WORKLOADS:
        a, b = [], []
        # page faults are the noisiest on this VM and the cheapest to run: more pairs
        pairs = PAIRS * 2 - 1 if args[0] == "fault" else PAIRS
        log("== %s (%d pairs)" % (name, pairs))
        for i in range(pairs):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            for side in order:
                tag = "%s-%d" % (name.replace(" ", "").replace("--", "-"), i)
                if side == "A":
                    res = run_untraced(args)
                    a.append(res)
                elif isinstance(rec_opts, tuple):
                    res = run_untraced(args + ["--perf-uprobe", rec_opts[1]])
                    res.update(records=0, by_type={}, drops_total=None, attach_margin_ms=None)
                    b.append(res)
                else:
                    res = run_traced(args, rec_opts, tag)
                    b.append(res)
                extra = ""
                if side == "B" and not isinstance(rec_opts, tuple):
                    extra = "  records/op %.3f drops %s attach %.2fs irq-work %s" % (
                        res["records"] / res["ops"], res["drops_total"], res["attach_s"],
                        res["iwi"])
                log("  %s%d %-6s ns/op %9.1f%s" % (
                    side, i, "plain" if side == "A" else "uprobe" if extra == "" else "traced",
                    res["ns_op"], extra))
        ua = [x["ns_op"] for x in a]
        tb = [x["ns_op"] for x in b]
        med_a, med_b = statistics.median(ua), statistics.median(tb)
        rec_per_op = statistics.median([x["records"] / x["ops"] for x in b])
        ev_per_op = statistics.median([sum(v for k, v in x["by_type"].items() if k in family)
                                       / x["ops"] for x in b])
        last = b[-1]
        types = {}
        for x in b:
            for k, v in x["by_type"].items():
                types[k] = types.get(k, 0) + v
        ops_b = sum(x["ops"] for x in b)
        types_per_op = {k: round(v / ops_b, 3) for k, v in sorted(types.items())}
        added = med_b - med_a
        diffs = []
        for x, y in zip(a, b):
            diffs.append(y["ns_op"] - x["ns_op"])
        alloc_per_op = None
        if args[0] == "malloc" and not isinstance(rec_opts, tuple):
            path = os.path.join(OUT, "trace-%s-%d.sbt" % (name.replace(" ", "").replace("--", "-"),
                                                          pairs - 1))
            # the warm-up batch (ops/10) and one malloc before it are counted too
            ops_incl = last["ops"] + int(args[2]) // 10 + 1
            alloc_per_op = alloc_calls_per_op(path, ops_incl)
        rows.append({
            "name": name, "what": what, "untraced": med_a, "untraced_range": fmt_range(ua),
            "traced": med_b, "traced_range": fmt_range(tb), "added_per_op": added,
            "paired_diff_median": statistics.median(diffs),
            "records_per_op": rec_per_op, "types_per_op": types_per_op,
            "alloc_calls_per_op": alloc_per_op,
            "events_per_op": ev_per_op,
            # the allocator probes write a record only for a slow call and count the
            # rest in the kernel: per probed call (2 per malloc+free pair) instead
            "added_per_event": (added / 2 if args[0] == "malloc" and not isinstance(rec_opts, tuple)
                                and "--no-alloc" not in rec_opts and rec_opts
                                else added / ev_per_op if ev_per_op >= 0.01 else None),
            "floor": isinstance(rec_opts, tuple),
            "drops": [x["drops_total"] for x in b],
            "iwi_per_1k_records": [round(1000 * x["iwi"] / x["records"], 1)
                                   if x.get("iwi") is not None and x["records"] else None
                                   for x in b],
            "attach_margin_ms": [x["attach_margin_ms"] for x in b],
            "raw_untraced": ua, "raw_traced": tb,
        })
    return rows


def drop_test(events_per_op):
    """Paced rates, traced; events/s measured from the trace itself."""
    secs = 2.0 if QUICK else 4.0
    plan = []
    # page faults cannot reach 200k/s on this VM (~90k/s flat out), so the rate is
    # made of mmap+munmap pairs and of ping-pong switches, whose records/op are known
    for kind, targets in (("mmap", [200000] if QUICK else [200000, 400000]),
                          ("switch", [200000] if QUICK else [200000, 400000, 800000]),
                          ("fault", [] if QUICK else [200000])):
        epo = events_per_op.get(kind)
        if not epo:
            continue
        for ev in targets:
            plan.append((kind, ev, ev / epo))
    rows = []
    for kind, ev, ops_rate in plan:
        args = ["rate", "--kind", kind, "--rate", "%.0f" % ops_rate, "--seconds", str(secs)]
        log("== drop test: %s at %d events/s (%.0f ops/s)" % (kind, ev, ops_rate))
        res = run_traced(args, [], "rate-%s-%d" % (kind, ev))
        dur = (res["t1"] - res["t0"]) / 1e9
        row = {"kind": kind, "target_events_s": ev, "target_ops_s": ops_rate, "iwi": res["iwi"],
               "achieved_ops_s": res["achieved_rate"], "events_s": res["records"] / dur,
               "records": res["records"], "drops_total": res["drops_total"],
               "drops_ring": res["drops_ring"], "seconds": dur, "by_type": res["by_type"]}
        log("  achieved %.0f ops/s, %.0f events/s in the trace, drops_total %s, irq-work %s"
            % (row["achieved_ops_s"], row["events_s"], row["drops_total"], row["iwi"]))
        drop_trace(res["path"])
        rows.append(row)
    return rows


def drop_accounting_check():
    """Force drops and check that none goes uncounted: mmap+munmap pairs at 100k/s
    (200k events/s) for 3 s with a 1 MiB ring, the agent stopped (SIGSTOP) for 1.5 s.
    Every pair makes two mmsys events: records in the file + counted drops must
    equal 2 x pairs."""
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "trace-drop-accounting.sbt")
    if os.path.exists(path):
        os.unlink(path)
    log("== drop accounting: agent stopped 1.5 s, 1 MiB ring, 200k events/s")
    p = subprocess.Popen(mb_cmd(["rate", "--kind", "mmap", "--rate", "100000", "--seconds", "3"]),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    r = subprocess.Popen([SB, "record", "-p", str(p.pid), "-o", path, "--agent-cpu",
                          str(AGENT_CPU), "--ring-mb", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    attached = threading.Event()

    def reader():
        for line in r.stderr:
            if ATTACHED(line):
                attached.set()
        attached.set()

    threading.Thread(target=reader, daemon=True).start()
    if not attached.wait(20):
        time.sleep(ATTACH_FALLBACK_S)
    time.sleep(0.2)
    p.stdin.write("x")
    p.stdin.close()
    time.sleep(0.5)
    r.send_signal(signal.SIGSTOP)
    time.sleep(1.5)
    r.send_signal(signal.SIGCONT)
    out = p.stdout.read()
    p.wait()
    r.wait(timeout=30)
    res = parse_kv(out)
    a = analyse(path, res)
    ring = a["drops_ring"] or {}
    mmsys = a["by_type"].get("mmsys", 0)
    expected = 2 * res["ops"]
    row = {"pairs": res["ops"], "expected_mmsys": expected, "mmsys_records": mmsys,
           "mmsys_drops": ring.get("mmsys", 0), "drops_total": a["drops_total"],
           "balance": mmsys + ring.get("mmsys", 0) - expected}
    log("  %d mmsys records + %d counted drops = %d; expected %d (difference %+d)"
        % (mmsys, row["mmsys_drops"], mmsys + row["mmsys_drops"], expected, row["balance"]))
    drop_trace(path)
    return row


def main():
    if not os.access(SB, os.X_OK):
        log("bench: %s not found; build it (make) or set STEPBLAME=/path/to/stepblame" % SB)
        return 1
    if not os.access(MB, os.X_OK):
        log("bench: %s not found (bench/run builds it)" % MB)
        return 1
    if os.geteuid() != 0:
        log("bench: tracing needs root")
        return 1
    os.sched_setaffinity(0, {AGENT_CPU})
    load0 = open("/proc/loadavg").read().split()[:3]
    t = time.monotonic()
    rows = bench_workloads()
    epo = {"mmap": next(r["events_per_op"] for r in rows if r["name"] == "mmap"),
           # rate --kind switch counts round trips: two switches each
           "switch": 2 * next(r["events_per_op"] for r in rows if r["name"] == "switch"),
           "fault": next(r["events_per_op"] for r in rows if r["name"] == "fault")}
    # bench/drain.py measures the live drain in more detail; BENCH_DROP_TEST=0 skips this
    drops = drop_test(epo) if os.environ.get("BENCH_DROP_TEST", "1") == "1" else []
    acct = drop_accounting_check()
    elapsed = time.monotonic() - t
    load1 = open("/proc/loadavg").read().split()[:3]
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"workloads": rows, "drop_test": drops, "drop_accounting": acct, "stepblame": SB, "pairs": PAIRS,
                   "loadavg_before": load0, "loadavg_after": load1,
                   "cpu": CPU, "agent_cpu": AGENT_CPU, "kernel": os.uname().release,
                   "elapsed_s": elapsed}, f, indent=1)

    print()
    print("stepblame overhead: %s, kernel %s, %d CPUs, workload on CPU %d, agent on CPU %d, "
          "%d interleaved pairs (faults %d); load average %s before, %s after"
          % (SB, os.uname().release, os.cpu_count(), CPU, AGENT_CPU, PAIRS, 2 * PAIRS - 1,
             "/".join(load0), "/".join(load1)))
    print()
    print("| workload | one op | untraced ns/op (min..max) | traced ns/op (min..max) "
          "| added ns/op (median of pair diffs) | events/op | added ns/event (malloc: per call) "
          "| all records/op "
          "| drops |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ev = "%.3f" % r["events_per_op"] if not r["floor"] else "4 bare uprobe hits"
        if r["alloc_calls_per_op"] is not None:
            ev += " + %.2f calls counted in kernel" % r["alloc_calls_per_op"]
        per = "%.0f" % r["added_per_event"] if r["added_per_event"] is not None else "-"
        print("| %s | %s | %.0f (%s) | %.0f (%s) | %.0f (%.0f) | %s | %s | %s | %s |" % (
            r["name"], r["what"], r["untraced"], r["untraced_range"], r["traced"],
            r["traced_range"], r["added_per_op"], r["paired_diff_median"], ev, per,
            "-" if r["floor"] else "%.3f" % r["records_per_op"],
            "n/a (no stepblame)" if r["floor"] else "/".join(str(d) for d in r["drops"])))
    print()
    if drops:
        print("| drop test | target events/s | achieved ops/s | events/s in trace | records | "
              "drops_total | irq-work interrupts on CPU %d |" % CPU)
        print("|---|---|---|---|---|---|---|")
        for d in drops:
            print("| %s | %d | %.0f | %.0f | %d | %s | %s |" % (
                d["kind"], d["target_events_s"], d["achieved_ops_s"], d["events_s"], d["records"],
                d["drops_total"], d["iwi"]))
        print()
    print("drop accounting (agent SIGSTOPped 1.5 s, 1 MiB ring): %d mmap+munmap pairs -> %d "
          "mmsys records + %d counted drops (expected %d, difference %+d)"
          % (acct["pairs"], acct["mmsys_records"], acct["mmsys_drops"], acct["expected_mmsys"],
             acct["balance"]))
    print()
    print("irq-work interrupts on CPU %d per 1000 records, per traced run: " % CPU
          + "; ".join("%s %s" % (r["name"], r["iwi_per_1k_records"]) for r in rows
                      if not r["floor"]))
    print("record types per op: " + "; ".join("%s %s" % (r["name"], r["types_per_op"])
                                              for r in rows))
    print("raw results: %s (%.0f s)" % (os.path.join(OUT, "results.json"), elapsed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
