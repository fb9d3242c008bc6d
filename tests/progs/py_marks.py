#!/usr/bin/env python3
"""A small real PyTorch training loop (CPU) marked through the stepblame
Python package one way or another: py_marks.py MODE STEPS READY_FILE.

  explicit   stepblame.step(i) at the start of iteration i
  with       with stepblame.step(i): iteration i
  hook       stepblame.mark_optimizer_steps(): a mark after each optimizer step
  nested     the same, with an optimizer whose step() calls another's
  lightning  StepblameCallback.on_train_batch_start, called as a loop would
  plain      nothing: for `stepblame run --mark-optimizer-steps`

It creates READY_FILE once it is set up and waits for GO_FILE (READY_FILE.go)
before the first iteration, so that the tracer has attached; each iteration
takes about 10 ms.
"""
import os
import sys
import time

mode, steps, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import torch

if mode != "plain":
    import stepblame
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


class Wrapper(torch.optim.Optimizer):
    """An optimizer that steps another (as Lookahead does)."""

    def __init__(self, inner):
        self.inner = inner
        super().__init__(inner.param_groups[0]["params"], {})

    def step(self, closure=None):
        return self.inner.step(closure)

    def zero_grad(self, set_to_none=False):
        self.inner.zero_grad()


if mode in ("hook", "nested"):
    stepblame.mark_optimizer_steps()
if mode == "nested":
    opt = Wrapper(opt)
cb = None
if mode == "lightning":
    from stepblame.lightning import StepblameCallback
    cb = StepblameCallback()
x = torch.randn(512, 64)
y = torch.randint(0, 8, (512,))
open(ready, "w").close()
for _ in range(3000):
    if os.path.exists(ready + ".go"):
        break
    time.sleep(0.01)
def iteration():
    end = time.perf_counter() + 0.008
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    while time.perf_counter() < end:
        pass


for i in range(steps):
    if mode == "with":
        with stepblame.step(i):
            iteration()
        continue
    if mode == "explicit":
        stepblame.step(i)
    if cb is not None:
        cb.on_train_batch_start(None, model, (x, y), i)
    iteration()
