#!/usr/bin/env python3
"""Observer effect on a trainer: simtrainer's step time P50/P99 untraced and traced,
stepblame side by side with perf and bpftrace collecting the same kinds of events.

Step times come from simtrainer itself: its STEP_BEGIN/STEP_END marker records in
the GPU timeline channel, read by build/bench/stepclock (bench/stepclock.c) in
every variant, untraced included, so the clock and its reader cost the same in
all of them. stepblame therefore runs with --no-gpu (the channel has one agent);
everything else is its default probe set.

Variants: untraced; "untraced again" (a second untraced run per round, the A/A
control: how far the ratios move with no tracer at all); stepblame record
(default probes, --no-gpu; in the alloc configuration also with --no-alloc);
`perf sched record` (system-wide, as perf sched works) plus `perf trace -p PID`
for the mmap-family syscalls and page faults (-F all); bpftrace running
bench/peers.bt (bench/peers-alloc.bt appended in the allocator configuration).

Each round runs every variant of a configuration once, in an order rotated
every round (so no variant always follows another); the ratio of a tool is its
P50 (P99) over the untraced P50 (P99) of the same round. The table gives the
median ratio over the rounds and its min..max.

Pinning (2 vCPUs, OBS_PIN=launcher, the default): simtrainer's launcher alone on
BENCH_CPU (1); its other threads (loaders, gpu-sim), every tool's user-space part
(stepblame's agent, perf, bpftrace) and stepclock on AGENT_CPU (0), as a trainer
is deployed with its launching thread on a core of its own. OBS_PIN=none: only
the launcher pinned (simtrainer's default), its helper threads free to run on the
launcher's CPU; every tracer then moves the median step (bench/RESULTS.md).

Environment: STEPBLAME, SIMTRAINER (build/simtrainer), OBS_ROUNDS (5),
OBS_STEPS (300; the alloc configuration runs 0.4 of them), OBS_CONFIGS
(default,alloc; also busy), OBS_PIN (launcher), BENCH_OUT (build/bench),
OBS_TOOLS (all; or a comma list of tool names),
OBS_VARIANTS (a comma list of variants instead, e.g. 'stepblame --no-alloc';
'stepblame@PATH ...' runs the stepblame binary at PATH, another build). Writes BENCH_OUT/observer.json.
"""
import glob
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import log, parse_kv  # noqa: E402
import records  # noqa: E402
SB = os.environ.get("STEPBLAME", "build/stepblame")
SIM = os.environ.get("SIMTRAINER", "build/simtrainer")
OUT = os.environ.get("BENCH_OUT", "build/bench")
CLOCK = os.path.join(OUT, "stepclock")
ROUNDS = int(os.environ.get("OBS_ROUNDS", "5"))
STEPS = int(os.environ.get("OBS_STEPS", "300"))
AGENT_CPU = int(os.environ.get("AGENT_CPU", "0"))
TOOL_CPU = str(AGENT_CPU)
LAUNCHER_CPU = os.environ.get("BENCH_CPU", "1")
# OBS_PIN=launcher: the launcher alone on LAUNCHER_CPU, simtrainer's other threads
# (loaders, gpu-sim) with the tools on AGENT_CPU; OBS_PIN=none: only the launcher pinned
if os.environ.get("OBS_PIN", "launcher") == "launcher":
    SIM_PIN = ["taskset", "-c", TOOL_CPU]
    SIM_ARGS = ["--launcher-cpu", LAUNCHER_CPU]
else:
    SIM_PIN, SIM_ARGS = [], []

# configuration: simtrainer arguments, variants to run
CONFIGS = {
    # simtrainer's default scenario (20 x 400 us kernels, 8 MiB H2D per step)
    # "untraced again": a second untraced run per round, the A/A control: how far
    # the ratios move with no tracer at all
    "default": ([], ["untraced", "untraced again", "stepblame", "perf", "bpftrace"], 1.0),
    # allocation-heavy: a 2000-call malloc/free storm (5% of the mallocs big,
    # mmap'd blocks) every 5th step, so P50 is a clean step and P99 an allocating
    # one; the allocator probes of stepblame and of bpftrace are on. stepblame
    # runs with its overhead guard (default, 1%), without it (--max-overhead 0)
    # and without allocator probes. Fewer steps: bpftrace makes these runs long
    # (120 of them by default).
    "alloc": (["--inject", "alloc/5:2000"],
              ["untraced", "stepblame", "stepblame --max-overhead 0", "stepblame --no-alloc",
               "bpftrace"], 0.4),
    # a busy launch thread whose host work is the step's critical path
    # (bench/RESULTS.md, "A busy trainer"): short kernels, 200 us of CPU a launch,
    # and every step 20 round trips to a peer thread, 60 minor faults and 57
    # malloc/free pairs: about 13k switches, 17k faults and 16k mallocs a second
    # on the launcher at 3.5 ms steps; stepblame with its defaults (short trips
    # folded: scheduler runs), recording every switch, without the allocator probes
    "busy": (["--kernels", "10", "--kernel-us", "100", "--launch-us", "200",
              "--busy", "20,60,57"],
             ["untraced", "untraced again", "stepblame", "stepblame --fold 0", "stepblame --no-alloc",
              "perf"], 1.0),
}

# kernel event record types of a trace file (bpf/events.h), for the trailer's counts;
# a type not named there is counted as type_N
EV_TYPES = records.KERNEL
KERNEL_TYPES = range(1, 32)
TRAILER_SIZE = 24 + 64 * 8 + 8 + 8 + 8


def trailer(path):
    """Per-type record counts and drops_total from a complete trace's trailer."""
    with open(path, "rb") as f:
        f.seek(-TRAILER_SIZE, os.SEEK_END)
        b = f.read(TRAILER_SIZE)
    typ, size = struct.unpack_from("<HH", b, 0)
    if typ != 63 or size != TRAILER_SIZE:
        raise RuntimeError("%s: no trailer" % path)
    counts = struct.unpack_from("<64Q", b, 24)
    drops = struct.unpack_from("<Q", b, 24 + 512)[0]
    return {EV_TYPES.get(t, "type_%d" % t): counts[t] for t in KERNEL_TYPES if counts[t]}, drops


def alloc_calls(path):
    """Allocator calls counted in the kernel (last alloc_stats per thread), from dump."""
    p = subprocess.run([SB, "dump", path, "--jsonl"], capture_output=True, text=True,
                       timeout=300)
    per_tid = {}
    for line in p.stdout.splitlines():
        if '"alloc_stats"' not in line:
            continue
        r = json.loads(line)
        c = r.get("calls") or r.get("count") or r.get("counts")
        n = sum(c.values()) if isinstance(c, dict) else sum(c) if isinstance(c, list) else 0
        per_tid[r.get("tid")] = n
    return sum(per_tid.values())


def self_estimate(path):
    """What stepblame's own report says it cost: summary.tracer of its JSON report
    (the median and P99 share of step time, and the guard's state), to set next to
    the measured ratios."""
    p = subprocess.run([SB, "report", path, "--format", "json"], capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        return {}
    t = json.loads(p.stdout)["summary"]["tracer"]
    g = t.get("guard") or {}
    return {"est_p50_share": t["p50_share"], "est_p99_share": t["p99_share"],
            "guard_mode_changes": g.get("mode_changes", 0),
            "calibrated": t.get("calibrated", []),
            "alloc_call_ns": t["cost_per_event_ns"]["alloc_call"]}


class Lines:
    """Collects a child's stderr lines; sets an event when one contains `key`."""

    def __init__(self, stream, key):
        self.lines, self.ready = [], threading.Event()
        self.key = key
        self.th = threading.Thread(target=self.run, args=(stream,), daemon=True)
        self.th.start()

    def run(self, stream):
        for line in stream:
            self.lines.append(line.rstrip())
            if self.key and self.key in line:
                self.ready.set()
        self.ready.set()


def wait_file_line(path, key, timeout):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        try:
            with open(path) as f:
                if key in f.read(4096):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def start_tool(tool, cfg, pid, tag):
    """Start the tracer on pid; returns (procs, finish) once it is attached.
    finish() stops it if needed and returns {events, drops, ...}."""
    path = os.path.join(OUT, "obs-%s" % tag)
    if tool.startswith("stepblame"):
        trace = path + ".sbt"
        extra = tool.split()[1:]
        # "stepblame@PATH ...": the stepblame binary at PATH (another build)
        sb = tool.split()[0].partition("@")[2] or SB
        r = subprocess.Popen([sb, "record", "-p", str(pid), "-o", trace, "--no-gpu",
                              "--agent-cpu", TOOL_CPU] + extra,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ln = Lines(r.stderr, "stepblame: attached")
        if not ln.ready.wait(30):
            raise RuntimeError("stepblame did not attach: %s" % ln.lines)

        def finish():
            r.wait(timeout=60)
            ln.th.join(5)
            if r.returncode != 0:
                raise RuntimeError("stepblame record exited %d: %s" % (r.returncode, ln.lines))
            by, drops = trailer(trace)
            res = {"events": sum(by.values()), "drops": drops, "by_type": by,
                   "size": os.path.getsize(trace)}
            if cfg == "alloc" and "--no-alloc" not in tool:
                res["alloc_calls_counted"] = alloc_calls(trace)
            res.update(self_estimate(trace))
            os.unlink(trace)
            return res
        return finish

    if tool == "perf":
        sched, tr = path + ".sched.data", path + ".trace.txt"
        for p in (sched, tr):
            if os.path.exists(p):
                os.unlink(p)
        a = subprocess.Popen(["taskset", "-c", TOOL_CPU, "perf", "sched", "record", "-o", sched],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        b = subprocess.Popen(["taskset", "-c", TOOL_CPU, "perf", "trace", "-p", str(pid),
                              "-e", "mmap,munmap,brk,madvise,mprotect,mremap", "-F", "all",
                              "-o", tr],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        la, lb = Lines(a.stderr, None), Lines(b.stderr, None)
        # no line says "attached": perf record writes its header first, perf trace
        # creates its output file once its events are set up
        if not wait_file_line(tr, "", 20) or not os.path.exists(sched):
            time.sleep(1)
        time.sleep(1.5)

        def finish():
            b.wait(timeout=60)  # perf trace -p ends with the target
            a.send_signal(2)
            a.wait(timeout=60)
            st = subprocess.run(["perf", "report", "-i", sched, "--stats"],
                                capture_output=True, text=True, timeout=120).stdout
            samples, lost = 0, 0
            for line in st.splitlines():
                s = line.split()
                if line.strip().startswith("SAMPLE events:") and "stats" not in line:
                    pass
                if len(s) >= 3 and s[0] == "LOST" and s[1] == "events:":
                    lost += int(s[2])
                if len(s) >= 3 and s[0] == "LOST_SAMPLES" and s[1] == "events:":
                    lost += int(s[2])
            # per-event SAMPLE counts follow "<event> stats:" lines
            cur = None
            for line in st.splitlines():
                if line.strip().endswith("stats:"):
                    cur = line.strip()
                elif cur and line.strip().startswith("SAMPLE events:"):
                    samples += int(line.split()[2])
                    cur = None
            ntr, trlost = 0, 0
            with open(tr, errors="replace") as f:
                for line in f:
                    if "LOST" in line:
                        trlost += int("".join(ch for ch in line.split("LOST")[1].split()[0]
                                              if ch.isdigit()) or 0)
                    elif line.strip():
                        ntr += 1
            res = {"events": samples + ntr, "drops": lost + trlost,
                   "by_type": {"perf sched samples (system-wide)": samples,
                               "perf trace lines": ntr},
                   "size": os.path.getsize(sched) + os.path.getsize(tr)}
            os.unlink(sched)
            os.unlink(tr)
            return res
        return finish

    if tool == "bpftrace":
        script = os.path.join(HERE, "peers.bt")
        if cfg == "alloc":
            script = os.path.join(OUT, "peers-alloc-full.bt")
            with open(script, "w") as f:
                f.write(open(os.path.join(HERE, "peers.bt")).read())
                f.write(open(os.path.join(HERE, "peers-alloc.bt")).read())
        out = path + ".bt.txt"
        if os.path.exists(out):
            os.unlink(out)
        b = subprocess.Popen(["taskset", "-c", TOOL_CPU, "bpftrace", "-p", str(pid), "-o", out,
                              script, str(pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lb = Lines(b.stderr, None)
        if not wait_file_line(out, "peers: attached", 60):
            b.kill()
            raise RuntimeError("bpftrace did not attach: %s" % lb.lines)

        def finish():
            try:
                b.wait(timeout=10)  # with -p it ends with the target
            except subprocess.TimeoutExpired:
                b.send_signal(2)
                b.wait(timeout=60)
            n, lost, by = 0, 0, {}
            with open(out, errors="replace") as f:
                for line in f:
                    s = line.split()
                    if not s:
                        continue
                    if s[0] == "Lost":
                        lost += int(s[1])
                    elif s[0] in ("Attaching", "peers:") or s[0].startswith("@"):
                        continue
                    else:
                        n += 1
                        by[s[0]] = by.get(s[0], 0) + 1
            res = {"events": n, "drops": lost, "by_type": by, "size": os.path.getsize(out)}
            os.unlink(out)
            return res
        return finish
    raise ValueError(tool)


def one_run(cfg, tool, tag):
    args = CONFIGS[cfg][0]
    steps = max(50, int(STEPS * CONFIGS[cfg][2]))
    steps_file = os.path.join(OUT, "obs-%s.steps" % tag)
    sim = subprocess.Popen(SIM_PIN + [SIM, "--steps", str(steps), "--wait-agent", "60",
                            "--start-delay-ms", "300", "--quiet"] + SIM_ARGS + args,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    finish = None
    try:
        # the channel exists once simtrainer itself runs (not taskset before its
        # exec): only then may a tracer resolve /proc/PID/exe and its libraries
        chan = "/dev/shm/stepblame-%d-*.chan" % sim.pid
        t_end = time.monotonic() + 20
        while not glob.glob(chan) and time.monotonic() < t_end and sim.poll() is None:
            time.sleep(0.01)
        if not tool.startswith("untraced"):
            finish = start_tool(tool, cfg, sim.pid, tag)
        c = subprocess.run(["taskset", "-c", TOOL_CPU, CLOCK, "-p", str(sim.pid), "-o",
                            steps_file], capture_output=True, text=True, timeout=600)
        sim.wait(timeout=60)
    except BaseException:
        sim.kill()
        raise
    if sim.returncode != 0:
        raise RuntimeError("simtrainer exited %d: %s" % (sim.returncode, sim.stderr.read()))
    res = parse_kv(c.stdout)
    if c.returncode != 0 or not res.get("steps"):
        raise RuntimeError("stepclock: %s %s" % (c.stdout, c.stderr))
    res["tool"] = finish() if finish else {"events": 0, "drops": 0}
    # the first 5 steps warm up (loader prefetch, page tables): left out
    durs = []
    with open(steps_file) as f:
        for line in f:
            s, d, _ = line.split()
            if int(s) >= 5:
                durs.append(int(d))
    os.unlink(steps_file)
    durs.sort()
    res["p50"] = pct(durs, 50)
    res["p99"] = pct(durs, 99)
    res["mean"] = sum(durs) / len(durs)
    res["n"] = len(durs)
    return res


def pct(v, p):
    k = max(1, int(p / 100.0 * len(v) + 0.999999))
    return v[min(k, len(v)) - 1]


def run_config(cfg, rounds):
    variants = CONFIGS[cfg][1]
    if os.environ.get("OBS_VARIANTS"):
        variants = ["untraced"] + os.environ["OBS_VARIANTS"].split(",")
    tools = os.environ.get("OBS_TOOLS")
    if tools:
        variants = [v for v in variants if v == "untraced" or v.split()[0] in tools.split(",")]
    if not shutil.which("bpftrace") and "bpftrace" in variants:
        log("observer: no bpftrace (apt-get install bpftrace): its rows are skipped")
        variants = [v for v in variants if v != "bpftrace"]
    if not shutil.which("perf") and "perf" in variants:
        log("observer: no perf (apt-get install linux-perf): its rows are skipped")
        variants = [v for v in variants if v != "perf"]
    runs = {v: [] for v in variants}
    log("== observer effect, %s configuration: %d rounds of %s, %d steps each"
        % (cfg, rounds, ", ".join(variants), max(50, int(STEPS * CONFIGS[cfg][2]))))
    for i in range(rounds):
        k = i % len(variants)
        order = variants[k:] + variants[:k]
        for v in order:
            r = one_run(cfg, v, "%s-%s-%d" % (cfg, v.replace(" ", "").replace("/", "_"), i))
            runs[v].append(r)
            log("  round %d %-22s P50 %6.3f ms  P99 %6.3f ms  events %8d  drops %d"
                % (i, v, r["p50"] / 1e6, r["p99"] / 1e6, r["tool"]["events"],
                   r["tool"]["drops"]))
    rows = []
    base = runs["untraced"]
    for v in variants:
        r50 = [x["p50"] / b["p50"] for x, b in zip(runs[v], base)]
        r99 = [x["p99"] / b["p99"] for x, b in zip(runs[v], base)]
        rows.append({
            "config": cfg, "tool": v,
            "p50_ms": statistics.median(x["p50"] for x in runs[v]) / 1e6,
            "p99_ms": statistics.median(x["p99"] for x in runs[v]) / 1e6,
            "mean_ms": statistics.median(x["mean"] for x in runs[v]) / 1e6,
            "p50_ratio": statistics.median(r50), "p50_ratio_range": [min(r50), max(r50)],
            "p99_ratio": statistics.median(r99), "p99_ratio_range": [min(r99), max(r99)],
            "events": statistics.median(x["tool"]["events"] for x in runs[v]),
            "drops": [x["tool"]["drops"] for x in runs[v]],
            "by_type": runs[v][-1]["tool"].get("by_type"),
            "alloc_calls_counted": runs[v][-1]["tool"].get("alloc_calls_counted"),
            "est_p50_share": median_of(runs[v], "est_p50_share"),
            "est_p99_share": median_of(runs[v], "est_p99_share"),
            "raw": runs[v],
        })
    return rows


def median_of(runs, key):
    xs = [x["tool"][key] for x in runs if key in x.get("tool", {})]
    return statistics.median(xs) if xs else None


def table(rows):
    print("| configuration | tool | P50 ms | P99 ms | mean ms | P50 ratio (min..max) | "
          "P99 ratio (min..max) | events captured per run | drops | own estimate P50 / P99 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ev = "%d" % r["events"] if not r["tool"].startswith("untraced") else "-"
        if r.get("alloc_calls_counted"):
            ev += " + %d allocator calls counted" % r["alloc_calls_counted"]
        est = "-"
        if r.get("est_p50_share") is not None:
            est = "+%.2f%% / +%.2f%%" % (100 * r["est_p50_share"], 100 * r["est_p99_share"])
        print("| %s | %s | %.3f | %.3f | %.3f | %.4f (%.4f..%.4f) | %.4f (%.4f..%.4f) | %s | %s | %s |"
              % (r["config"], r["tool"], r["p50_ms"], r["p99_ms"], r["mean_ms"], r["p50_ratio"],
            r["p50_ratio_range"][0], r["p50_ratio_range"][1], r["p99_ratio"],
            r["p99_ratio_range"][0], r["p99_ratio_range"][1], ev,
            "-" if r["tool"].startswith("untraced") else "/".join(str(d) for d in r["drops"]),
            est))
    print()
    for r in rows:
        if not r["tool"].startswith("untraced") and r.get("by_type"):
            print("%s / %s, last run: %s" % (r["config"], r["tool"],
                                              json.dumps(r["by_type"], sort_keys=True)))


def main():
    if os.geteuid() != 0:
        log("observer: tracing needs root")
        return 1
    for p in (SB, SIM, CLOCK):
        if not os.access(p, os.X_OK):
            log("observer: %s not found (bench/run builds stepclock; make builds the rest)" % p)
            return 1
    os.makedirs(OUT, exist_ok=True)
    os.sched_setaffinity(0, {AGENT_CPU})
    t = time.monotonic()
    rows = []
    for cfg in os.environ.get("OBS_CONFIGS", "default,alloc").split(","):
        rows += run_config(cfg, ROUNDS)
    with open(os.path.join(OUT, "observer.json"), "w") as f:
        json.dump({"rows": rows, "rounds": ROUNDS, "steps": STEPS, "stepblame": SB,
                   "elapsed_s": time.monotonic() - t}, f, indent=1)
    print()
    print("Observer effect on simtrainer (%d steps per run, alloc configuration %d; first 5 "
          "left out; %d rounds; ratios = traced / untraced of the same round; pinning %s; %.0f s)"
          % (STEPS, max(50, int(STEPS * CONFIGS["alloc"][2])), ROUNDS,
             os.environ.get("OBS_PIN", "launcher"), time.monotonic() - t))
    print()
    table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
