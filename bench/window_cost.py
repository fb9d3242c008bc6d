#!/usr/bin/env python3
"""What the overhead guard's allocator windows cost the steps they fall in
(bench/RESULTS.md, section 38).

The PyTorch loop of the tests (bench.torch_loop: tests/progs/torch_trainer.py,
two DataLoader workers, all on BENCH_CPU) runs for minutes; the builds given
capture it in turn, WIN_CAPTURES rounds of WIN_DURATION each (agent on
AGENT_CPU). From each capture's trace: the guard's attached windows (guard
records with window_start_ns / window_end_ns); from the loop's own record of
its steps: the steps that overlap a window, each against the median of the
capture's other steps. Printed per build: windows a capture, their median
length, how many steps they hit, those steps' excess (wall and the marking
thread's CPU time, median and max), and the excess of all hit steps a capture.

    sudo python3 bench/window_cost.py OLD/stepblame build/stepblame

Environment: WIN_CAPTURES (7), WIN_DURATION (4s), BENCH_CPU (1), AGENT_CPU (0),
BENCH_OUT (build/bench), PYTHON (/usr/bin/python3, with torch), STEPBLAME_LIB
(build/libstepblame.so).
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
import bench  # noqa: E402

CAPTURES = int(os.environ.get("WIN_CAPTURES", "7"))
DURATION = os.environ.get("WIN_DURATION", "4s")
CPU = os.environ.get("BENCH_CPU", "1")
AGENT = os.environ.get("AGENT_CPU", "0")
OUT = os.path.abspath(os.environ.get("BENCH_OUT", os.path.join(ROOT, "build", "bench")))
PY = os.environ.get("PYTHON", "/usr/bin/python3")
LIB = os.path.abspath(os.environ.get("STEPBLAME_LIB", os.path.join(ROOT, "build", "libstepblame.so")))


def windows_of(sb, trace):
    """the attached windows of the guard records in trace, (start_ns, end_ns)"""
    dump = subprocess.run([sb, "dump", trace], capture_output=True, text=True, check=True).stdout
    wins = []
    for line in dump.splitlines():
        if " guard " not in line or "window_start_ns" not in line:
            continue
        kv = dict(x.split("=", 1) for x in line.split('text="', 1)[1].rstrip('"').split("\\n")
                  if "=" in x)
        wins.append((int(kv["window_start_ns"]), int(kv["window_end_ns"])))
    return wins


def main():
    builds = [os.path.abspath(b) for b in sys.argv[1:]]
    if not builds:
        raise SystemExit(__doc__)
    os.makedirs(OUT, exist_ok=True)
    loop, truth, stop = bench.torch_loop(os.path.join(OUT, "wincost"), 1000000, CPU, PY, LIB)
    caps = []  # (build index, capture start, end, windows)
    try:
        time.sleep(6)
        for k in range(CAPTURES):
            for j, sb in enumerate(builds):
                trace = os.path.join(OUT, "wincost-%d-%d.sbt" % (k, j))
                rec = bench.record_attached([sb, "record", "-p", str(loop.pid), "-d", DURATION,
                                             "--agent-cpu", AGENT, "-q", "-o", trace])
                if rec.wait():
                    raise SystemExit("stepblame record: exit %d" % rec.returncode)
                rep = json.loads(subprocess.run([sb, "report", "--format", "json", trace],
                                                capture_output=True, check=True).stdout)
                caps.append((j, rep["capture"]["start_ns"], rep["capture"]["end_ns"],
                             windows_of(sb, trace)))
                os.unlink(trace)
                time.sleep(2)
    finally:
        open(stop, "w").close()
        loop.wait()
    with open(truth) as f:
        steps = [s for s in (json.loads(x) for x in f if x.strip())
                 if "step" in s and "start_ns" in s and "end_ns" in s]
    print("| build | windows a capture | window length, median | steps hit | their excess, "
          "wall median (max) | CPU median | excess a capture |")
    print("|---|---|---|---|---|---|---|")
    for j, sb in enumerate(builds):
        wall, cpu, counts, lens = [], [], [], []
        for jj, a, b, wins in caps:
            if jj != j:
                continue
            mine = [s for s in steps if s["start_ns"] >= a and s["end_ns"] <= b]
            hit = [s for s in mine if any(s["start_ns"] < we and s["end_ns"] > ws for ws, we in wins)]
            rest = [s for s in mine if s not in hit]
            if not rest:
                continue
            mw = statistics.median(s["end_ns"] - s["start_ns"] for s in rest)
            mc = statistics.median(s["exec_ns"] for s in rest)
            wall += [(s["end_ns"] - s["start_ns"] - mw) / 1e6 for s in hit]
            cpu += [(s["exec_ns"] - mc) / 1e6 for s in hit]
            counts.append(len(wins))
            lens += [(we - ws) / 1e6 for ws, we in wins]
        med = lambda xs: statistics.median(xs) if xs else 0.0  # noqa: E731
        print("| %s | %s | %.1f ms | %d | %.2f ms (%.2f) | %.2f ms | %.1f ms |" % (
            sb, "-".join(str(x) for x in sorted(set(counts))), med(lens), len(wall), med(wall),
            max(wall) if wall else 0.0, med(cpu), sum(wall) / max(1, len(counts))))


main()
