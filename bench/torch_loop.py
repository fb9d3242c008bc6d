#!/usr/bin/env python3
"""A PyTorch CPU training loop with many allocator calls per step, for
bench/safe_start.py: a small conv net, batch 16 of 3x32x32, SGD, one thread.

    python3 bench/torch_loop.py STEPS OUT

Marks every step with libstepblame.so (USDT stepblame:step; STEPBLAME_LIB, else
build/libstepblame.so) when it can load it, and writes each step's start
(time.monotonic_ns: CLOCK_MONOTONIC, the trace's clock), duration and the
thread's CPU time in it (time.thread_time_ns: the probes' traps are charged
to it, other tasks' preemptions are not) in ns to OUT, one step a line. Prints "ready" on stdout after its first step, so that a
tracer can be attached to a loop already running (`stepblame record -p`).
"""
import ctypes
import os
import sys
import time

import torch

steps, out = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(1)
torch.manual_seed(1)
lib = os.environ.get("STEPBLAME_LIB",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                  "libstepblame.so"))
try:
    sb = ctypes.CDLL(lib)
    sb.stepblame_step.argtypes = [ctypes.c_ulonglong]
    mark = sb.stepblame_step
except OSError:
    def mark(n):
        pass
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x = torch.randn(16, 3, 32, 32)
y = torch.randint(0, 10, (16,))
times = []
for k in range(steps):
    mark(k)
    t0, c0 = time.monotonic_ns(), time.thread_time_ns()
    for _ in range(4):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    times.append((t0, time.monotonic_ns() - t0, time.thread_time_ns() - c0))
    if k == 0:
        print("ready", flush=True)
mark(steps)
with open(out, "w") as f:
    f.write("".join("%d %d %d\n" % t for t in times))
