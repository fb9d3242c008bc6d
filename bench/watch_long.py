#!/usr/bin/env python3
"""stepblame watch left running (bench/RESULTS.md, "Watch"): a long simtrainer
run with an injection every few minutes, watched by name with tight caps.

Every 5 s it samples the agent's RSS and the snippets' disk use, and copies
each new snippet aside (watch removes the oldest at its cap). At the end every
injection must have a snippet whose report blames it right
(tests/scenarios/watch_check.py), the RSS after the first two minutes must stay
within +-10% of its median, and the snippets never above --max-disk-mb.
    sudo bench/watch_long.py [MINUTES] [BUILD]     (30, build)
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("hog", "ckpt", "faults", "stall")
CAP_MB = 40


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 30
    build = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "build")
    sb, sim = os.path.join(build, "stepblame"), os.path.join(build, "simtrainer")
    tmp = tempfile.mkdtemp(prefix="sbwatch.")
    os.chmod(tmp, 0o755)
    out, side, ckpt = (os.path.join(tmp, d) for d in ("out", "side", "ckpt"))
    for d in (side, ckpt):
        os.mkdir(d)
    # about 5 ms a step: an injection every ~3 minutes
    step_s = 0.005
    every = int(180 / step_s)
    total = int(minutes * 60 / step_s)
    inject = []
    for i, at in enumerate(range(every // 2, total - 2000, every)):
        k = KINDS[i % len(KINDS)]
        inject += ["--inject", {"hog": "hog@%d-%d:-10" % (at, at + 9), "ckpt": "ckpt@%d" % at,
                                "faults": "faults@%d:256" % at, "stall": "stall@%d:200" % at}[k]]
    truth = os.path.join(tmp, "truth.jsonl")
    w = subprocess.Popen([sb, "watch", "-n", "--ckpt-dir " + ckpt, "--dir", out, "--around", "2",
                          "--max-disk-mb", str(CAP_MB), "--rotate-mb", "16"],
                         stdout=open(os.path.join(tmp, "watch.out"), "w"),
                         stderr=open(os.path.join(tmp, "watch.err"), "w"))
    time.sleep(1)
    t = subprocess.Popen([sim, "--steps", str(total), "--kernels", "4", "--kernel-us", "1000",
                          "--quiet", "--wait-agent", "30", "--ckpt-dir", ckpt, "--truth", truth]
                         + inject, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    samples, disk_max, copied = [], 0, set()
    try:
        while t.poll() is None and time.time() - t0 < minutes * 60 + 300:
            time.sleep(5)
            if t.poll() is None:
                samples.append((time.time() - t0, rss_kb(w.pid)))
            disk = 0
            for n in os.listdir(out):
                if n.endswith(".sbt"):
                    p = os.path.join(out, n)
                    try:
                        disk += os.path.getsize(p)
                        if n not in copied:
                            shutil.copy(p, side)
                            copied.add(n)
                    except OSError:
                        pass
            disk_max = max(disk_max, disk)
    finally:
        if t.poll() is None:
            t.terminate()  # simtrainer finishes its truth file on SIGTERM
        t.wait()
        time.sleep(8)
        w.send_signal(signal.SIGINT)
        w.wait()
    for n in os.listdir(out):
        if n.endswith(".sbt") and n not in copied:
            shutil.copy(os.path.join(out, n), side)
    for n in os.listdir(side):
        p = os.path.join(side, n)
        with open(p + ".json", "w") as f:
            subprocess.run([sb, "report", "--format", "json", p], stdout=f,
                           stderr=subprocess.DEVNULL)
    check = subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "scenarios",
                                                        "watch_check.py"), side, truth, str(t.pid)],
                           capture_output=True, text=True)
    check = check.stdout if check.returncode == 0 and os.path.exists(truth) else \
        "FAILED: no check (%s)" % (check.stderr.strip().splitlines() or ["no truth file"])[-1]
    steady = [r for s, r in samples if s >= 120]
    med = statistics.median(steady) if steady else 0
    res = {
        "minutes": round((time.time() - t0) / 60, 1),
        "injections": len(inject) // 2,
        "snippets_written": len(copied),
        "snippets_left": len([n for n in os.listdir(out) if n.endswith(".sbt")]),
        "disk_cap_mb": CAP_MB,
        "disk_max_mb": round(disk_max / 2**20, 1),
        "rss_kb_min_max_median_after_2min": [min(steady, default=0), max(steady, default=0), med],
        "rss_within_10pct": bool(steady) and max(steady) <= 1.1 * med and min(steady) >= 0.9 * med,
        "rss_first_last_kb": [samples[0][1] if samples else 0, samples[-1][1] if samples else 0],
        "blame": check.strip().splitlines(),
        "all_blamed_right": "FAILED" not in check,
        "stream_files": sorted(n for n in os.listdir(out) if n.startswith("steps.jsonl")),
        "watch_tail": open(os.path.join(tmp, "watch.out")).read().splitlines()[-1:],
        "dir": tmp,
    }
    print(json.dumps(res, indent=1))
    with open(os.path.join(tmp, "rss.tsv"), "w") as f:
        for s, r in samples:
            f.write("%.0f\t%d\n" % (s, r))
    return 0 if res["all_blamed_right"] and res["rss_within_10pct"] and disk_max <= CAP_MB << 20 else 1


if __name__ == "__main__":
    sys.exit(main())
