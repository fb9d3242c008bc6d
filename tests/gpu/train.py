# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A small PyTorch training loop for tests/gpu/check.sh.

Every step is one NVTX range "step N" (torch.cuda.nvtx.range_push/pop), holds
a host-to-device copy, forward and backward kernels, an optimizer step and a
synchronisation (loss.item()). Every 10th step the host stalls 20 ms with the
GPU idle, so the report has something to blame.

    python3 train.py [STEPS [SLEEP_MS]]   (default 30 steps, no extra sleep)

SLEEP_MS adds a host sleep to every step (a long-running trainer to attach to).
With STEP_TIMES=FILE in the environment each step's wall time is appended to
FILE ("STEP NS" lines, flushed every step).
"""
import os
import sys
import time

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    sleep_s = (int(sys.argv[2]) if len(sys.argv) > 2 else 0) / 1000.0
    if not torch.cuda.is_available():
        print("train.py: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096),
        torch.nn.ReLU(),
        torch.nn.Linear(4096, 1024),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    target = torch.randn(512, 1024, device=dev)
    host = torch.randn(512, 1024).pin_memory()

    times = open(os.environ["STEP_TIMES"], "w") if os.environ.get("STEP_TIMES") else None
    for i in range(steps):
        t0 = time.monotonic_ns()
        torch.cuda.nvtx.range_push(f"step {i}")
        x = host.to(dev, non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i % 10 == 9:
            time.sleep(0.02)  # a host stall while the GPU waits
        if sleep_s:
            time.sleep(sleep_s)
        loss.item()  # the step's synchronisation
        torch.cuda.nvtx.range_pop()
        if times:
            times.write(f"{i} {time.monotonic_ns() - t0}\n")
            times.flush()
    torch.cuda.synchronize()
    print(f"train.py: {steps} steps done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
