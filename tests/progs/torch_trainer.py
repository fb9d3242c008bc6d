#!/usr/bin/python3
"""A real PyTorch training loop (CPU) with interference injected at known steps.

It marks each step through libstepblame.so (ctypes, as a user would), and for
every step writes one JSON line of what it measured itself, on
CLOCK_MONOTONIC (the tracer's clock), after a first line naming the process,
the marking thread and the DataLoader worker processes:

  step, start_ns, end_ns      the step, mark to mark
  run_delay_ns, exec_ns       the marking thread's time waiting on a run queue
                              and on a CPU in the step (/proc/self/task/TID/schedstat)
  read0_ns, read1_ns          just after the step's first reading of schedstat, just
                              before its last: what the kernel counted lies between
                              (a wait that ends outside them is the step's, not theirs)
  tid                         the marking thread
  next_ns                     time inside next(loader)
  inject                      [{kind, start_ns, end_ns, ...}] what was injected

Injections (each --X takes a step list: 5 or 5-9 or 5,8,12-14):
  --hog STEPS            create HOG_FILE during the steps: an outside hog spins
                         while it exists (the harness runs it; it is not ours)
  --slow-item STEPS:MS[:cpu|:io|:fault]  the DataLoader worker that loads the
                         batch of those steps sleeps MS ms in __getitem__ (slow
                         storage), or spins MS ms on the CPU with :cpu, or for
                         MS ms writes 4 MiB to SLOW_DIR/shardSTEP.bin and
                         fsyncs it with :io, or fills fresh 64 MiB tensors
                         (page faults) with :fault
  --slow-dir DIR         where :io writes (default: the current directory)
  --tensor STEP:MIB      allocate and fill a fresh MIB MiB tensor
  --ckpt STEP:DIR        torch.save the model and a 64 MiB tensor to DIR, fsync
  --migrate STEPS        the marking thread moves itself between the CPUs it
                         may use (sched_setaffinity), 40 times per step
  --gil STEPS            a thread of the trainer computes in Python through
                         those steps: it holds the GIL that the loop takes
                         back after every torch call (the inject's tid is it)
"""
import argparse, ctypes, json, os, sys, threading, time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def steps_of(spec):
    out = set()
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def spin(ms):
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


class Images(Dataset):
    """Synthetic images; the samples of slow batches spin in __getitem__."""

    def __init__(self, n, batch, slow, slow_dir="."):
        self.n, self.batch, self.slow, self.slow_dir = n, batch, slow, slow_dir

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        step, k = divmod(i, self.batch)
        if k == 0 and step in self.slow:
            ms, how = self.slow[step]
            if how == "cpu":
                spin(ms)
            elif how == "io":
                # slow storage that is disk: writes and fsyncs, in the worker
                end = time.perf_counter() + ms / 1000.0
                fd = os.open(os.path.join(self.slow_dir, "shard%d.bin" % step), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                blob = os.urandom(4 << 20)
                while time.perf_counter() < end:
                    os.write(fd, blob)
                    os.fsync(fd)
                os.close(fd)
            elif how == "fault":
                # fresh memory, each time: the worker's page faults
                end = time.perf_counter() + ms / 1000.0
                while time.perf_counter() < end:
                    t = torch.empty(64 << 18)
                    t.fill_(1.0)
                    del t
            else:
                time.sleep(ms / 1000.0)  # slow storage
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), i % 10


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.body(x)


def gil_holder():
    """A thread that computes in Python until told to stop: (thread, stop, tid)"""
    stop, up, tid = threading.Event(), threading.Event(), []

    def run():
        tid.append(threading.get_native_id())
        up.set()
        x = 0
        while not stop.is_set():
            x += 1

    t = threading.Thread(target=run, name="gil-holder", daemon=True)
    t.start()
    up.wait()
    return t, stop, tid[0]


def schedstat(tid):
    """(time on a CPU, time waiting on a run queue) of thread tid, ns"""
    with open("/proc/self/task/%d/schedstat" % tid) as f:
        v = f.read().split()
    return int(v[0]), int(v[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--start-delay-ms", type=int, default=0, help="wait before the first step (to attach)")
    ap.add_argument("--lib", default=os.environ.get("STEPBLAME_LIB", "libstepblame.so"))
    ap.add_argument("--truth", required=True)
    ap.add_argument("--hog", default="")
    ap.add_argument("--hog-file", default="")
    ap.add_argument("--slow-item", action="append", default=[])
    ap.add_argument("--slow-dir", default=".")
    ap.add_argument("--tensor", action="append", default=[])
    ap.add_argument("--ckpt", action="append", default=[])
    ap.add_argument("--migrate", default="")
    ap.add_argument("--gil", default="")
    ap.add_argument("--ready", default="", help="file to create once the loop is about to start")
    ap.add_argument("--go", default="", help="then wait for this file before the first step")
    ap.add_argument("--stop", default="", help="end the loop (before --steps) once this file exists")
    a = ap.parse_args()

    sb = ctypes.CDLL(a.lib)
    sb.stepblame_step.argtypes = [ctypes.c_ulonglong]
    if a.threads:
        torch.set_num_threads(a.threads)
    slow = {}
    for s in a.slow_item:
        st, ms, how = (s + ":sleep").split(":")[:3]
        for x in steps_of(st):
            slow[x] = (float(ms), how)
    tensors = {int(s.split(":")[0]): int(s.split(":")[1]) for s in a.tensor}
    ckpts = {int(s.split(":")[0]): s.split(":", 1)[1] for s in a.ckpt}
    hog = steps_of(a.hog)
    if hog and not a.hog_file:
        sys.exit("--hog needs --hog-file")
    migrate = steps_of(a.migrate)
    gil = steps_of(a.gil)
    holder = None
    cpus = sorted(os.sched_getaffinity(0))

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    data = Images(a.batch * (a.steps + 2), a.batch, slow, a.slow_dir)
    # the workers as the installed PyTorch leaves them: before 2.3 (Debian's
    # 1.13) unnamed forks, known by the tensors they hand over; from 2.3 on
    # named pt_data_worker
    loader = DataLoader(data, batch_size=a.batch, num_workers=a.workers, shuffle=False)
    it = iter(loader)
    workers = [w.pid for w in getattr(it, "_workers", [])]
    tid = threading.get_native_id()
    if a.start_delay_ms:
        time.sleep(a.start_delay_ms / 1000.0)
    if a.ready:
        open(a.ready, "w").close()
    if a.go:
        deadline = time.monotonic() + 120
        while not os.path.exists(a.go) and time.monotonic() < deadline:
            time.sleep(0.01)
    rows, keep = [], []
    for step in range(a.steps):
        if a.stop and os.path.exists(a.stop):
            break
        inj = []
        if step in hog:
            open(a.hog_file, "w").close()  # the hog sees it within a millisecond
        sb.stepblame_step(step)
        t0 = now()
        ex0, rd0 = schedstat(tid)
        if step in hog:
            inj.append({"kind": "hog", "start_ns": t0})
        if step in gil:
            if holder is None:
                holder = gil_holder()
            inj.append({"kind": "gil", "start_ns": now(), "tid": holder[2]})
        n0 = now()
        x, y = next(it)
        n1 = now()
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in tensors:
            s = now()
            big = torch.empty(tensors[step] << 18)  # float32: MiB * 2^18 elements
            big.fill_(1.0)
            keep.append(big)
            inj.append({"kind": "tensor", "start_ns": s, "end_ns": now(), "mib": tensors[step]})
        if step in ckpts:
            path = os.path.join(ckpts[step], "model.pt")
            s = now()
            torch.save({"model": model.state_dict(), "blob": torch.ones(16 << 20)}, path)
            m = now()
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            inj.append({"kind": "ckpt", "start_ns": s, "save_end_ns": m, "end_ns": now(), "path": path,
                        "bytes": os.path.getsize(path)})
        if step in migrate and len(cpus) > 1:
            s = now()
            for k in range(40):
                os.sched_setaffinity(0, {cpus[k % len(cpus)]})
                spin(0.2)
            os.sched_setaffinity(0, set(cpus))
            inj.append({"kind": "migrate", "start_ns": s, "end_ns": now(), "moves": 40})
        if step in gil:
            if step + 1 not in gil:
                holder[1].set()
                holder[0].join()
                holder = None
            [i for i in inj if i["kind"] == "gil"][0]["end_ns"] = now()
        if step in hog:
            if step + 1 not in hog:
                os.unlink(a.hog_file)
            inj[0]["end_ns"] = now()
        r1 = now()
        ex1, rd1 = schedstat(tid)
        t1 = now()
        rows.append({"step": step, "start_ns": t0, "end_ns": t1, "tid": tid, "run_delay_ns": rd1 - rd0, "exec_ns": ex1 - ex0,
                     "read0_ns": n0, "read1_ns": r1,
                     "next_ns": n1 - n0, "inject": inj})
    sb.stepblame_step(len(rows))
    with open(a.truth, "w") as out:
        out.write(json.dumps({"pid": os.getpid(), "tid": tid, "workers": workers, "slow_items": sorted(slow),
                              "slow_how": {str(k): v[1] for k, v in sorted(slow.items())},
                              "slow_dir": os.path.abspath(a.slow_dir)}) + "\n")
        for r in rows:
            out.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
