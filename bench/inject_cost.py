#!/usr/bin/env python3
"""Loading the collector into a running PyTorch trainer: what the trainer
notices (bench/RESULTS.md, "Late injection").

A PyTorch CPU loop (two threads, a small MLP, 5 ms of sleep a step) maps a
stand-in libcuda.so.1 (tests/progs/fakecuda.c), so `stepblame record -p`
loads the collector into it. Each round runs the loop twice, in turn: once
with `record -p PID -d 1 --no-alloc` started 2 s in (the collector is loaded
then), once with the same record and --no-inject (the control: the probes
alone). For each, the steps that overlap the second after the record starts
are compared with the steps of the same loop before it: median and max step
time, and the agent's "held N ms".
    sudo bench/inject_cost.py [ROUNDS]   (5; env STEPBLAME, COLLECTOR, PYTHON)
COLLECTOR: the library loaded (default build/libstepblame-cupti.so, else the
stand-in build/tests/libs/libinjtest.so).
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..")
stepblame = os.environ.get("STEPBLAME", os.path.join(root, "build", "stepblame"))
python = os.environ.get("PYTHON", "/usr/bin/python3")
collector = os.environ.get("COLLECTOR") or next(
    (p for p in (os.path.join(root, "build", "libstepblame-cupti.so"),
                 os.path.join(root, "build", "tests", "libs", "libinjtest.so")) if os.path.exists(p)),
    None)

LOOP = r"""
import ctypes, sys, time, torch
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
torch.set_num_threads(2)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
x = torch.randn(64, 256)
print("ready", flush=True)
t_end = time.monotonic() + float(sys.argv[2])
out = open(sys.argv[3], "w")
while time.monotonic() < t_end:
    t0 = time.monotonic_ns()
    loss = m(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    time.sleep(0.005)
    out.write(f"{t0} {time.monotonic_ns() - t0}\n")
out.flush()
"""


def one(tmp, libcuda, inject):
    times = os.path.join(tmp, "times")
    loop = subprocess.Popen([python, "-c", LOOP, libcuda, "5", times],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    loop.stdout.readline()
    time.sleep(2)
    t_rec = time.monotonic_ns()
    env = dict(os.environ, STEPBLAME_COLLECTOR=collector)
    r = subprocess.run([stepblame, "record", "-p", str(loop.pid), "-d", "1", "--no-alloc",
                        "-o", os.path.join(tmp, "t.sbtrace")] + ([] if inject else ["--no-inject"]),
                       env=env, capture_output=True, text=True)
    loop.wait()
    m = re.search(r"held ([0-9.]+) ms", r.stderr)
    steps = [tuple(map(int, l.split())) for l in open(times)]
    before = [d for t0, d in steps if t0 + d < t_rec and t0 > t_rec - 1.5e9]
    during = [d for t0, d in steps if t0 + d >= t_rec and t0 < t_rec + 1.5e9]
    return (statistics.median(before) / 1e6, statistics.median(during) / 1e6,
            max(during) / 1e6, float(m.group(1)) if m else None)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    if not collector:
        sys.exit("no collector built (make, or COLLECTOR=)")
    tmp = tempfile.mkdtemp()
    libcuda = os.path.join(tmp, "libcuda.so.1")
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-DFAKECUDA_LIB",
                    os.path.join(root, "tests", "progs", "fakecuda.c"), "-o", libcuda], check=True)
    print(f"# collector {collector}; rounds {rounds}")
    print("round variant before_p50_ms during_p50_ms during_max_ms held_ms")
    res = {True: [], False: []}
    for i in range(rounds):
        for inject in ((True, False) if i % 2 == 0 else (False, True)):
            b, d, mx, held = one(tmp, libcuda, inject)
            res[inject].append((b, d, mx, held))
            print(f"{i} {'inject' if inject else 'no-inject'} {b:.2f} {d:.2f} {mx:.2f} "
                  f"{held if held is not None else '-'}", flush=True)
    for inject in (True, False):
        r = res[inject]
        ratio = statistics.median(x[1] / x[0] for x in r)
        mxr = statistics.median(x[2] / x[0] for x in r)
        held = [x[3] for x in r if x[3] is not None]
        print(f"# {'inject' if inject else 'no-inject'}: P50 during/before {ratio:.3f}, "
              f"max during/P50 before {mxr:.2f}" +
              (f", held {min(held):.1f}..{max(held):.1f} ms (median {statistics.median(held):.1f})"
               if held else ""))
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
