#!/usr/bin/env python3
"""The agent's own CPU while it runs (bench/RESULTS.md, "The agent's CPU"):
`stepblame watch` (or any agent command) beside a trainer, its user + system
time from /proc/PID/stat over the steady part of the capture (from AGENT_SKIP
seconds after its start, past loading the probes, to one second before its
end), as a share of one CPU. Builds or option sets in turn in each round, so
that the VM's drift falls on all of them alike.

Targets (AGENT_TARGET):
  sim    a fresh simtrainer per capture, 5 ms steps, a nice -10 hog on the
         launcher's CPU for the whole run (preemptions, tail steps, stacks)
  torch  one PyTorch loop (tests/progs/torch_trainer.py) for the whole run,
         every capture attached to it (libtorch's stacks to name)

Variants (AGENT_VARIANTS, "|"-separated option sets; one that starts with
@PATH runs the stepblame binary at PATH, e.g. a build of the revision before).

    sudo AGENT_VARIANTS="@/tmp/old/stepblame|" python3 bench/agent_cpu.py [ROUNDS] [SECONDS]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402  (torch_loop)

SB = os.path.join(ROOT, "build", "stepblame")
SIM = os.path.join(ROOT, "build", "simtrainer")
TARGET = os.environ.get("AGENT_TARGET", "sim")
SKIP = float(os.environ.get("AGENT_SKIP", "4"))
CMD = os.environ.get("AGENT_CMD", "watch")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def variants():
    out = []
    for v in os.environ.get("AGENT_VARIANTS", "").split("|") or [""]:
        v = v.split()
        sb = SB
        if v and v[0].startswith("@"):
            sb = os.path.abspath(v[0][1:])
            v = v[1:]
        out.append((sb, v))
    return out


def one(sb, opts, pid, secs, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    args = [sb, CMD, "-p", str(pid), "-d", str(secs)] + opts
    if CMD == "watch":
        args += ["--dir", d]
    else:
        args += ["-o", os.path.join(d, "t.sbt")]
    a = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(SKIP)
    c0, t0 = cpu_s(a.pid), time.monotonic()
    time.sleep(max(1.0, secs - SKIP - 1))
    c1, t1 = cpu_s(a.pid), time.monotonic()
    a.wait()
    subprocess.run(["rm", "-rf", d])
    return (c1 - c0) / (t1 - t0)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 15
    vs = variants()
    tmp = tempfile.mkdtemp(prefix="sbagentcpu.")
    res = {i: [] for i in range(len(vs))}
    loop = None
    try:
        if TARGET == "torch":
            loop, _, stop = bench.torch_loop(os.path.join(tmp, "loop"), 1000000)
        for r in range(rounds):
            for i, (sb, opts) in enumerate(vs):
                sim = None
                if TARGET == "torch":
                    pid = loop.pid
                else:
                    sim = subprocess.Popen([SIM, "--steps", "100000", "--kernels", "4",
                                            "--kernel-us", "1000", "--quiet",
                                            "--inject", "hog@20-100000:-10"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    pid = sim.pid
                    time.sleep(0.5)
                share = one(sb, opts, pid, secs, tmp)
                res[i].append(share)
                if sim:
                    sim.kill()
                    sim.wait()
                print("round %d  %-40s %.2f%% of a CPU" % (r + 1, " ".join([sb] + opts)[-40:],
                                                           100 * share), flush=True)
    finally:
        if loop:
            open(stop, "w").close()
            loop.kill()
            loop.wait()
        subprocess.run(["rm", "-rf", tmp])
    print("\n%s, %s, %d rounds of %g s (steady part from %g s):" % (CMD, TARGET, rounds, secs, SKIP))
    for i, (sb, opts) in enumerate(vs):
        xs = res[i]
        print("  %-50s median %.2f%% (%.2f..%.2f) of a CPU" % (
            " ".join([sb] + opts)[-50:], 100 * statistics.median(xs), 100 * min(xs), 100 * max(xs)))


if __name__ == "__main__":
    main()
