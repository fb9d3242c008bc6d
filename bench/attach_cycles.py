#!/usr/bin/env python3
"""Step time traced over untraced within one trainer process (bench/RESULTS.md):
the real PyTorch loop of the tests (tests/progs/torch_trainer.py: a conv net,
DataLoader with 2 worker processes, steps marked through libstepblame.so) runs
for a long time, and `stepblame record -p PID` attaches and detaches in cycles:
CYC_OFF seconds untraced, then a capture of CYC_ON seconds, CYC_CYCLES times.

Separate processes differ by more than the effect measured here (memory layout,
which CPU the workers land on, the VM's neighbours: the A/A control of
bench/safe_start.py moves 0.78-1.19 between runs on this VM), so the comparison
stays inside one process and one stretch of time. Each capture is compared with
the untraced windows just before and just after it:

  ratio = P50 of the steps inside the capture / P50 of the steps in the two
          untraced windows around it

A step counts as traced when it starts at or after the capture's start (its
first probe attached: the report's capture.start_ns) and ends before the
capture's end; as untraced when it lies between one capture's end and the next
recorder's launch. Steps during the recorder's start (loading and verifying the
BPF programs, before the first probe is in) belong to neither. Two clocks:
wall time (mark to mark), and the marking thread's CPU time in the step
(schedstat, as written by the loop: the probes' traps are charged to it,
preemptions by other tasks are not). "first 10" compares the first 10 steps
after the capture's start with the untraced windows around it: the time right
after attach, when the overhead guard has not measured the probes yet.

The A/A control: the same ratio with an untraced window in the place of the
capture (window k over windows k-1 and k+1), from the same run.

Also from each capture's report: the tracer's own estimate (steps[].tracer_ns)
over the step time, at the median, and the tail steps whose largest excess is
`tracer`-inflated alloc (there should be none).

Tail steps both ways: the report's tail rule (median + 3 MAD of the window)
applied to the loop's own step times, in each capture and in the untraced
window after it, per 1000 steps, and in the first second after the attach and
after the detach; beside them the report's own tail steps.

Environment: STEPBLAME (build/stepblame), CYC_CYCLES (12), CYC_ON (4), CYC_OFF
(4), CYC_OPTS (extra record options, e.g. "--no-stacks"), BENCH_CPU (1: the
loop and its workers), AGENT_CPU (0), BENCH_OUT (build/bench), PYTHON
(/usr/bin/python3, with torch), STEPBLAME_LIB (build/libstepblame.so).

    sudo python3 bench/attach_cycles.py
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402  (record_attached)

SB = os.path.abspath(os.environ.get("STEPBLAME", os.path.join(ROOT, "build", "stepblame")))
CYCLES = int(os.environ.get("CYC_CYCLES", "12"))
ON = float(os.environ.get("CYC_ON", "4"))
OFF = float(os.environ.get("CYC_OFF", "4"))
OPTS = os.environ.get("CYC_OPTS", "").split()
# several option sets, ";"-separated ("-" for none), taken in turn by the captures of one run;
# a set that starts with @PATH records with the stepblame binary at PATH (another build)
CONFIGS = [c.strip() for c in os.environ.get("CYC_CONFIGS", "").split(";") if c.strip()]
CONFIGS = [[] if c == "-" else c.split() for c in CONFIGS] or [[]]
CPU = os.environ.get("BENCH_CPU", "1")
AGENT = os.environ.get("AGENT_CPU", "0")
OUT = os.path.abspath(os.environ.get("BENCH_OUT", os.path.join(ROOT, "build", "bench")))
PY = os.environ.get("PYTHON", "/usr/bin/python3")
LIB = os.path.abspath(os.environ.get("STEPBLAME_LIB", os.path.join(ROOT, "build", "libstepblame.so")))
FIRST = 10


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def p50(xs):
    return statistics.median(xs) if xs else None


def main():
    os.makedirs(OUT, exist_ok=True)
    # this script and what it runs (the reports between captures, the recorder before it
    # pins itself) stay off the loop's CPU: the loop is pinned apart by taskset
    os.sched_setaffinity(0, {int(AGENT)})
    # more steps than the cycles take at the loop's ~25 ms a step; ended by the stop file
    steps = int((CYCLES * (ON + OFF + 3) + OFF + 10) / 0.010)
    loop, truth, stop = bench.torch_loop(os.path.join(OUT, "cycles"), steps, CPU, PY, LIB)
    windows = []   # (kind, start_ns, end_ns, report or None)
    t_untraced = now()
    for k in range(CYCLES):
        time.sleep(OFF)
        launch = now()
        windows.append(("off", t_untraced, launch, None))
        trace = os.path.join(OUT, "cycles-%d.sbt" % k)
        conf, sb = CONFIGS[k % len(CONFIGS)], SB
        if conf and conf[0].startswith("@"):
            sb, conf = conf[0][1:], conf[1:]
        rec = bench.record_attached([sb, "record", "-p", str(loop.pid), "-d", "%gs" % ON,
                                     "--agent-cpu", AGENT, "-q", "-o", trace] + OPTS + conf)
        if rec.wait():
            raise SystemExit("stepblame record: exit %d" % rec.returncode)
        t_untraced = now()
        rep = json.loads(subprocess.run([sb, "report", "--format", "json", trace],
                                        capture_output=True, check=True).stdout)
        os.unlink(trace)
        windows.append(("on", rep["capture"]["start_ns"], rep["capture"]["end_ns"], rep,
                        k % len(CONFIGS)))
    time.sleep(OFF)
    windows.append(("off", t_untraced, now(), None))
    open(stop, "w").close()
    if loop.wait():
        raise SystemExit("the loop: exit %d" % loop.returncode)
    with open(os.path.join(OUT, "cycles-windows.json"), "w") as f:  # for a closer look afterwards
        json.dump([list(w[:3]) + list(w[4:]) for w in windows], f)
    with open(truth) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    st = [x for x in lines if "step" in x and "start_ns" in x and "end_ns" in x]

    def inside(w):
        return [s for s in st if s["start_ns"] >= w[1] and s["end_ns"] <= w[2]]

    offs = [w for w in windows if w[0] == "off"]
    ons = [w for w in windows if w[0] == "on"]
    for c, conf in enumerate(CONFIGS):
        if len(CONFIGS) > 1:
            print("\n## options: %s" % (" ".join(conf) or "(defaults)"))
        analyse(inside, offs, [(k, w) for k, w in enumerate(ons) if w[4] == c], c == 0)


def tail_count(durs, which=False):
    """how many steps of durs are over the report's tail threshold among them
    (user/engine/summary.c: median + 3 MAD, MAD floored at 1% of the median); which:
    their indices"""
    if len(durs) < 3:
        return [] if which else 0
    med = statistics.median(durs)
    mad = max(statistics.median(abs(d - med) for d in durs), med / 100)
    over = [i for i, d in enumerate(durs) if d > med + 3 * mad]
    return over if which else len(over)


def analyse(inside, offs, ons, aa):
    """the ratios for the captures ons ((k, window): the k-th capture), A/A if aa"""
    parts = {"traced": [], "untraced": []}  # per capture: mean wall, exec, run delay, blocked, in next()
    res = {"wall": [], "cpu": [], "wall_first": [], "cpu_first": [], "aa_wall": [], "aa_cpu": [],
           "wall_mean": [], "aa_wall_mean": [], "cpu_mean": []}
    est, tails, tail_tracer, tail_causes = [], 0, 0, {}
    # the same rule on the loop's own step times: traced captures (its clock, not the
    # report's judged time) and the untraced windows around them, steps counted
    rule = {"traced": [0, 0], "untraced": [0, 0], "reported": [0, 0], "traced first 1 s": [0, 0],
            "untraced first 1 s": [0, 0]}
    by_index = {}  # i: the i-th step after attach over the untraced P50, per capture
    for k, w in ons:
        around = inside(offs[k]) + inside(offs[k + 1])
        mine = inside(w)
        if len(mine) < FIRST or len(around) < FIRST:
            print("cycle %d: too few steps (%d traced, %d untraced)" % (k, len(mine), len(around)),
                  file=sys.stderr)
            continue
        for key, f in (("wall", lambda s: s["end_ns"] - s["start_ns"]), ("cpu", lambda s: s["exec_ns"])):
            base = p50([f(s) for s in around])
            res[key].append(p50([f(s) for s in mine]) / base)
            res[key + "_first"].append(p50([f(s) for s in mine[:FIRST]]) / base)
            if key == "wall":
                for i, s in enumerate(mine[:FIRST]):
                    by_index.setdefault(i, []).append(f(s) / base)
        wall = [s["end_ns"] - s["start_ns"] for s in mine]
        for name, xs in (("traced", mine), ("untraced", around)):
            parts[name].append([statistics.mean(f(s) for s in xs) for f in (
                lambda s: s["end_ns"] - s["start_ns"], lambda s: s["exec_ns"], lambda s: s["run_delay_ns"],
                lambda s: s["end_ns"] - s["start_ns"] - s["exec_ns"] - s["run_delay_ns"],
                lambda s: s.get("next_ns", 0))])
        res["wall_mean"].append(statistics.mean(wall) / statistics.mean([s["end_ns"] - s["start_ns"] for s in around]))
        res["cpu_mean"].append(statistics.mean(s["exec_ns"] for s in mine) /
                               statistics.mean(s["exec_ns"] for s in around))
        for name, w2, xs in (("traced", w, mine), ("untraced", offs[k + 1], inside(offs[k + 1]))):
            d = [s["end_ns"] - s["start_ns"] for s in xs]
            over = tail_count(d, True)
            rule[name][0] += len(over)
            rule[name][1] += len(d)
            # the first second of the window (right after attach; right after a detach)
            first = [i for i, s in enumerate(xs) if s["start_ns"] < w2[1] + 1e9]
            rule[name + " first 1 s"][0] += sum(1 for i in over if i in first)
            rule[name + " first 1 s"][1] += len(first)
        rep = w[3]
        rule["reported"][1] += sum(1 for s in rep["steps"] if s.get("duration_ns"))
        rule["reported"][0] += sum(1 for s in rep["steps"] if s.get("tail"))
        for s in rep["steps"]:
            if s.get("duration_ns"):
                est.append(s.get("tracer_ns", 0) / s["duration_ns"])
            if s.get("tail"):
                tails += 1
                top = s["excess"][0]["cause"] if s.get("excess") else "-"
                tail_causes[top] = tail_causes.get(top, 0) + 1
                if s.get("excess") and s["excess"][0]["cause"] == "alloc":
                    tail_tracer += 1
        print("cycle %d: %d traced steps, wall %.3f, cpu %.3f" % (k, len(mine), res["wall"][-1],
                                                                 res["cpu"][-1]), file=sys.stderr)
    for k in range(1, len(offs) - 1 if aa else 1):
        mine, around = inside(offs[k]), inside(offs[k - 1]) + inside(offs[k + 1])
        if len(mine) < FIRST or len(around) < FIRST:
            continue
        for key, f in (("aa_wall", lambda s: s["end_ns"] - s["start_ns"]), ("aa_cpu", lambda s: s["exec_ns"])):
            res[key].append(p50([f(s) for s in mine]) / p50([f(s) for s in around]))
        res["aa_wall_mean"].append(statistics.mean([s["end_ns"] - s["start_ns"] for s in mine]) /
                                   statistics.mean([s["end_ns"] - s["start_ns"] for s in around]))

    def row(name, xs):
        if not xs:
            return "| %s | - | - |" % name
        return "| %s | %.3f (%.3f..%.3f) | %d |" % (name, statistics.median(xs), min(xs), max(xs), len(xs))

    print("untraced step P50: %.1f ms wall, %.1f ms CPU" % (
        p50([s["end_ns"] - s["start_ns"] for w in offs for s in inside(w)]) / 1e6,
        p50([s["exec_ns"] for w in offs for s in inside(w)]) / 1e6))
    print("| ratio of step P50s | median (min..max) | windows |")
    print("|---|---|---|")
    print(row("traced / untraced around it, wall", res["wall"]))
    print(row("traced / untraced around it, CPU", res["cpu"]))
    print(row("first %d steps after attach / untraced around, wall" % FIRST, res["wall_first"]))
    print(row("first %d steps after attach / untraced around, CPU" % FIRST, res["cpu_first"]))
    if by_index:
        print("steps after attach, wall over the untraced P50, median over captures: " + ", ".join(
            "%d: %.3f" % (i + 1, statistics.median(by_index[i])) for i in sorted(by_index)))
    print(row("A/A: untraced / untraced around it, wall", res["aa_wall"]))
    print(row("A/A: untraced / untraced around it, CPU", res["aa_cpu"]))
    print(row("mean step time (not P50), traced / untraced around it, wall", res["wall_mean"]))
    print(row("mean step time (not P50), A/A, wall", res["aa_wall_mean"]))
    print(row("mean CPU time a step, traced / untraced around it", res["cpu_mean"]))
    if parts["traced"]:
        # where a traced step's time goes, against the untraced steps around it (means, ms)
        print("| step time, mean over captures (ms) | wall | on CPU | runnable (run delay) | blocked | in next(loader) |")
        print("|---|---|---|---|---|---|")
        for name in ("untraced", "traced"):
            m = [statistics.mean(c[i] for c in parts[name]) / 1e6 for i in range(5)]
            print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |" % tuple([name] + m))
    if est:
        print("tracer's own estimate, steps[].tracer_ns / duration: P50 %.2f%%, P90 %.2f%%" % (
            100 * statistics.median(est), 100 * sorted(est)[int(0.9 * (len(est) - 1))]))
    if rule["traced"][1] and rule["untraced"][1]:
        print("steps over median + 3 MAD of their window, per 1000: untraced (the window after "
              "each capture) %.1f (%d of %d), traced by the loop's clock %.1f (%d of %d), reported "
              "tail %.1f (%d of %d); in the first second after a detach %.1f (%d of %d), after an "
              "attach %.1f (%d of %d)" % tuple(
                  x for name in ("untraced", "traced", "reported", "untraced first 1 s", "traced first 1 s")
                  for x in (1000 * rule[name][0] / max(rule[name][1], 1), rule[name][0], rule[name][1])))
    print("tail steps: %d, of them alloc on top: %d; by the cause on top: %s" % (
        tails, tail_tracer, ", ".join("%s %d" % kv for kv in sorted(tail_causes.items(),
                                                                   key=lambda kv: -kv[1]))))


main()
