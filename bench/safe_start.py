#!/usr/bin/env python3
"""The overhead guard's safe start and the tracer cause (bench/RESULTS.md,
section 12): a PyTorch CPU training loop with thousands of allocator calls per
step (bench/torch_loop.py), untraced and traced, step times from the first step
after the tracer attached.

SAFE_MODE=attach (the default): the loop starts untraced; once it has done a
step, SAFE_WAIT (1) seconds later `stepblame record -p PID` attaches to it (until
it exits). The steps compared are those that start after the capture's start
(the report's capture.start_ns; in untraced runs, after the same time from the
first step as in the round's first traced run). Two ratios per step: wall time,
and the loop thread's CPU time (what the probes' traps add, without the
preemptions by other tasks that dominate wall time on a busy machine).
SAFE_MODE=run: `stepblame run`
starts the loop, every step counts (the interpreter's start, importing torch,
comes before the first step: the guard has measured the probes by then).

Variants, one run each per round, in an order rotated every round:
  untraced, untraced again (the A/A control: how far ratios move with no tracer),
  stepblame (STEPBLAME, the default --max-overhead 1), stepblame --max-overhead 0
  (allocator probes unguarded: what the guard saves), and, if SAFE_BASE names
  another build, that build with its defaults (e.g. the one before the safe start).
The loop is pinned to BENCH_CPU (1), stepblame's agent to AGENT_CPU (0). Step
times are the loop's own (time.perf_counter_ns around each step, written by the
loop), so the clock costs the same in every variant. A variant's ratio in a
round is its P50 over the untraced P50 of that round, over all steps (the first
included) and over the first SAFE_FIRST (10) steps (the time the old guard let
the probes run full); the table gives the median ratio over the rounds and its
min..max. For traced runs it also reads the report (JSON) of the run's trace:
tail steps, those whose top excess is alloc, and the alloc and tracer totals.

Environment: STEPBLAME (build/stepblame), SAFE_BASE (none), SAFE_ROUNDS (5),
SAFE_STEPS (80), SAFE_FIRST (10), BENCH_CPU, AGENT_CPU, BENCH_OUT (build/bench),
PYTHON (/usr/bin/python3, with torch).
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SB = os.path.abspath(os.environ.get("STEPBLAME", "build/stepblame"))
BASE = os.environ.get("SAFE_BASE", "")
ROUNDS = int(os.environ.get("SAFE_ROUNDS", "5"))
STEPS = int(os.environ.get("SAFE_STEPS", "80"))
FIRST = int(os.environ.get("SAFE_FIRST", "10"))
CPU = os.environ.get("BENCH_CPU", "1")
AGENT = os.environ.get("AGENT_CPU", "0")
OUT = os.path.abspath(os.environ.get("BENCH_OUT", "build/bench"))
PY = os.environ.get("PYTHON", "/usr/bin/python3")
LOOP = os.path.join(HERE, "torch_loop.py")


def variants():
    v = [("untraced", None, []), ("untraced again", None, []), ("stepblame", SB, []),
         ("stepblame --max-overhead 0", SB, ["--max-overhead", "0"])]
    if BASE:
        v.append(("previous build", os.path.abspath(BASE), []))
    return v


MODE = os.environ.get("SAFE_MODE", "attach")
WAIT = float(os.environ.get("SAFE_WAIT", "1"))


def run(name, sb, opts, rnd, offset):
    """(durations, report, offset of the capture's start from the first step)"""
    tag = "%s-%d" % (name.replace(" ", "_").replace("-", ""), rnd)
    times = os.path.join(OUT, "safe-%s.txt" % tag)
    trace = os.path.join(OUT, "safe-%s.sbt" % tag)
    loop = [PY, LOOP, str(STEPS), times]
    if MODE == "run" and sb:
        argv = ["taskset", "-c", CPU, sb, "run", "--no-gpu", "--agent-cpu", AGENT, "-q",
                "-o", trace] + opts + ["--"] + loop
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    else:
        p = subprocess.Popen(["taskset", "-c", CPU] + loop, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        p.stdout.readline()
        if sb and MODE == "attach":
            time.sleep(WAIT)
            subprocess.run([sb, "record", "-p", str(p.pid), "--agent-cpu", AGENT, "-q",
                            "-o", trace] + opts, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
        if p.wait():
            raise SystemExit("%s: exit %d" % (LOOP, p.returncode))
    with open(times) as f:
        t = [tuple(int(x) for x in line.split()) for line in f if line.strip()]
    os.unlink(times)
    rep = None
    if sb:
        # every trace is read by the build under test: the same blame model for all
        js = subprocess.run([SB, "report", "--format", "json", trace], capture_output=True,
                            check=True).stdout
        d = json.loads(js)
        if MODE == "attach":
            offset = d["capture"]["start_ns"] - t[0][0]
        tails = [s for s in d["steps"] if s["tail"]]
        rep = {"tail": len(tails),
               "tail_alloc": sum(1 for s in tails if s["excess"] and
                                 s["excess"][0]["cause"] == "alloc"),
               "alloc_ms": d["summary"]["by_cause"].get("alloc", 0) / 1e6,
               "tracer_ms": d["summary"]["by_cause"].get("tracer", 0) / 1e6}
        os.unlink(trace)
    if MODE == "attach":
        t = [(d, c) for s, d, c in t if s - t[0][0] >= (offset or 0)]
    else:
        t = [(d, c) for s, d, c in t]
    return t, rep, offset


def main():
    os.makedirs(OUT, exist_ok=True)
    vs = variants()
    ratio = {n: ([], [], [], []) for n, _, _ in vs}
    reps = {n: [] for n, _, _ in vs}
    for r in range(ROUNDS):
        order = vs[r % len(vs):] + vs[:r % len(vs)]
        # traced runs first within the rotation's order, so that untraced ones know the offset
        order = [v for v in order if v[1]] + [v for v in order if not v[1]]
        res, offset = {}, None
        for name, sb, opts in order:
            res[name] = run(name, sb, opts, r, offset)
            if offset is None:
                offset = res[name][2]
        u = res["untraced"][0]
        short = [n for n, _, _ in vs if len(res[n][0]) < FIRST]
        if short:
            # the loop ended before the attach was done: a round without a comparison
            print("round %d: skipped, under %d steps after attach in %s" % (
                r + 1, FIRST, ", ".join(short)), file=sys.stderr)
            continue
        for name, _, _ in vs:
            t, rep, _ = res[name]
            for k in (0, 1):
                tk, uk = [x[k] for x in t], [x[k] for x in u]
                ratio[name][2 * k].append(statistics.median(tk) / statistics.median(uk))
                ratio[name][2 * k + 1].append(statistics.median(tk[:FIRST]) /
                                              statistics.median(uk[:FIRST]))
            if rep:
                reps[name].append(rep)
        print("round %d: untraced P50 %.1f ms (CPU %.1f ms); %s" % (
            r + 1, statistics.median([x[0] for x in u]) / 1e6,
            statistics.median([x[1] for x in u]) / 1e6,
            ", ".join("%s %.3f/%.3f" % (n, ratio[n][0][-1], ratio[n][2][-1])
                      for n, _, _ in vs)), file=sys.stderr)
        sys.stderr.flush()
    print("| variant | wall P50 ratio, every step%s (min..max) | first %d steps | CPU P50 ratio,"
          " every step (min..max) | first %d steps | tail steps | of them alloc on top |"
          " alloc ms | tracer ms |" % (" after attach" if MODE == "attach" else "", FIRST, FIRST))
    print("|---|---|---|---|---|---|---|---|---|")
    for name, sb, _ in vs:
        a, f, ca, cf = ratio[name]
        rp = reps[name]
        extra = " | ".join("%.1f" % statistics.median([x[k] for x in rp])
                           for k in ("tail", "tail_alloc", "alloc_ms", "tracer_ms")) \
            if rp else " | ".join(["-"] * 4)
        print("| %s | %.3f (%.3f..%.3f) | %.3f (%.3f..%.3f) | %.3f (%.3f..%.3f) |"
              " %.3f (%.3f..%.3f) | %s |" % (
                  name, statistics.median(a), min(a), max(a), statistics.median(f), min(f),
                  max(f), statistics.median(ca), min(ca), max(ca), statistics.median(cf),
                  min(cf), max(cf), extra))


main()
