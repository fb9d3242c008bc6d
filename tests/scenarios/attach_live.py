"""attach's step lines as they arrive (tests/scenarios/attach_live.sh).

    attach_live.py STEPBLAME SIMTRAINER TMPDIR

Prints PASS/FAIL lines (tests/lib.sh's format).
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

T = "attach_live"
stepblame, simtrainer, tmp = sys.argv[1:4]


def case(name, ok, why):
    print(("PASS %s_%s" % (T, name)) if ok else ("FAIL %s_%s: %s" % (T, name, why)), flush=True)


def mono():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


sim = subprocess.Popen([simtrainer, "--steps", "400", "--kernels", "6", "--kernel-us", "1000",
                        "--start-delay-ms", "500", "--quiet"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
exited = {}


def reap():
    sim.wait()
    exited["t"] = mono()


# held until the probes are in: on a loaded machine they take seconds, and the
# start delay alone would let the first steps pass before them
os.kill(sim.pid, signal.SIGSTOP)
threading.Thread(target=reap, daemon=True).start()
err = open(tmp + "/live.err", "w")
a = subprocess.Popen([stepblame, "attach", "-p", str(sim.pid), "-d", "60", "--no-gpu",
                      "--jsonl", "-"], stdout=subprocess.PIPE, stderr=err, text=True)


def release():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and a.poll() is None:
        if re.search(r"attached \d+ probes", open(tmp + "/live.err").read()):
            break
        time.sleep(0.05)
    os.kill(sim.pid, signal.SIGCONT)


threading.Thread(target=release, daemon=True).start()
rows = []
for line in a.stdout:
    now = mono()
    try:
        d = json.loads(line)
    except ValueError:
        case("lines", False, "not JSON: %r" % line[:80])
        break
    rows.append((d, now))
rc = a.wait()
sim.wait()
time.sleep(0.1)
complete = [(d, t) for d, t in rows if not d.get("incomplete")]
if rc != 0 or "t" not in exited:
    case("lines", False, "attach exited %d: %s" % (rc, open(tmp + "/live.err").read()[-200:]))
    sys.exit(0)
case("lines", len(complete) >= 390,
     "%d complete step lines for 400 steps" % len(complete))
before = [(d, t) for d, t in complete if d["end_ns"] < exited["t"] - 500000000]
late = [d["step"] for d, t in before if t > exited["t"]]
case("while_running", before and 2 * len(late) < len(before),
     "%d steps ended 0.5 s before the trainer exited; %d of their lines came after it (%s)"
     % (len(before), len(late), late[:5]))
delay = sorted((t - d["end_ns"]) / 1e6 for d, t in complete)
med = statistics.median(delay) if delay else float("inf")
case("median_delay", med < 1500,
     "lines came %.0f ms after their steps ended (median; P90 %.0f ms)"
     % (med, delay[int(len(delay) * 0.9)] if delay else 0))
print("# line delay: median %.0f ms, P90 %.0f ms, P99 %.0f ms, max %.0f ms over %d steps" %
      (med, delay[int(len(delay) * 0.9)], delay[int(len(delay) * 0.99)], delay[-1], len(delay)))
