#!/usr/bin/env python3
"""Analysis throughput: `stepblame report` on a trace of ANALYSIS_RECORDS (10
million) events: events per second on one core and peak RSS, against the size of
the file (driven by bench/run).

The big traces are made by build/bench/gentrace (bench/gentrace.c) from a real
recording, tiled in time: simtrainer is recorded by `stepblame record` (default
probes, GPU channel) in two shapes, then each recording is repeated, shifted by
its own span, until the file holds the wanted number of event records:

  mixed    120 steps with every kind of injected interference (page-fault
           storms every step, allocator storms, a CPU hog, migrations, a loader
           stall): ~1000-4000 host events per step, faults first
  default  simtrainer's default scenario (GPU-bound, 20 kernels per step):
           ~150 records per step, a third of them GPU records

Each big trace is then read, pinned to CPU BENCH_CPU (1), by:
  read     build/bench/gentrace --read: the strict streaming reader alone
           (trace.o's sbt_next), the floor under any analysis of the file
  report   `stepblame report FILE` (text) to BENCH_OUT/analysis-TEMPLATE.report.txt
  json     `stepblame report FILE --format json` to /dev/null
under /usr/bin/time -v (user+sys CPU, wall, maximum resident set size). The file
is in the page cache (just written), so this is CPU, not disk.
Env: STEPBLAME, SIMTRAINER, BENCH_OUT, ANALYSIS_RECORDS (10000000),
ANALYSIS_TEMPLATES (mixed,default).
"""
import glob
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

SIM = os.environ.get("SIMTRAINER", "build/simtrainer")
GEN = os.path.join(bench.OUT, "gentrace")
N = int(os.environ.get("ANALYSIS_RECORDS", "10000000"))
TEMPLATES = {
    "mixed": ["--steps", "120", "--loaders", "3", "--inject", "faults/1:4",
              "--inject", "alloc/3:1000", "--inject", "hog/10", "--inject", "migrate/4:4",
              "--inject", "stall/15:20"],
    "default": ["--steps", "300"],
}


def record_template(name):
    path = os.path.join(bench.OUT, "analysis-template-%s.sbt" % name)
    if os.path.exists(path):
        os.unlink(path)
    sim = subprocess.Popen(["taskset", "-c", str(bench.AGENT_CPU), SIM, "--launcher-cpu",
                            str(bench.CPU), "--wait-agent", "30", "--start-delay-ms", "200",
                            "--quiet", "--ckpt-dir", bench.OUT] + TEMPLATES[name],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    chan = "/dev/shm/stepblame-%d-*.chan" % sim.pid
    t = time.monotonic() + 20
    while not glob.glob(chan) and time.monotonic() < t:
        time.sleep(0.01)
    r = subprocess.run([bench.SB, "record", "-p", str(sim.pid), "-o", path, "--agent-cpu",
                        str(bench.AGENT_CPU), "-q"], capture_output=True, text=True, timeout=300)
    sim.wait(timeout=60)
    if r.returncode != 0:
        raise RuntimeError("recording the %s template failed: %s" % (name, r.stderr))
    return path


def timed(cmd, stdout=subprocess.DEVNULL):
    p = subprocess.run(["taskset", "-c", str(bench.CPU), "/usr/bin/time", "-v"] + cmd,
                       stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=900)
    def field(name):
        m = re.search(r"%s: ([0-9.:]+)" % re.escape(name), p.stderr)
        return m.group(1) if m else None
    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    w = 0.0
    for part in wall.split(":"):
        w = w * 60 + float(part)
    return {"rc": p.returncode, "cpu_s": float(field("User time (seconds)")) +
            float(field("System time (seconds)")), "wall_s": w,
            "max_rss_kib": int(field("Maximum resident set size (kbytes)")),
            "stderr_tail": p.stderr.splitlines()[:3] if p.returncode else []}


def main():
    if os.geteuid() != 0:
        bench.log("analysis: recording the templates needs root")
        return 1
    rows = []
    for name in os.environ.get("ANALYSIS_TEMPLATES", "mixed,default").split(","):
        bench.log("== analysis: recording the %s template" % name)
        tpl = record_template(name)
        big = os.path.join(bench.OUT, "analysis-%s-%d.sbt" % (name, N))
        if os.path.exists(big):
            os.unlink(big)
        t = time.monotonic()
        g = subprocess.run([GEN, tpl, big, "--records", str(N)], capture_output=True, text=True,
                           timeout=600)
        if g.returncode != 0:
            raise RuntimeError("gentrace: %s" % g.stderr)
        gen = bench.parse_kv(g.stdout)
        size = os.path.getsize(big)
        bench.log("  %s: %d records, %.0f MB, %d copies of %d events (%.1f s)"
                  % (big, gen["records"], size / 1e6, gen["copies"], gen["template_events"],
                     time.monotonic() - t))
        row = {"template": name, "records": gen["records"], "file_bytes": size,
               "template_events": gen["template_events"], "copies": gen["copies"],
               "steps_per_copy": gen["steps_per_copy"]}
        head = os.path.join(bench.OUT, "analysis-%s.report.txt" % name)
        for what, cmd in (("read", [GEN, "--read", big]),
                          ("report", [bench.SB, "report", big]),
                          ("json", [bench.SB, "report", big, "--format", "json"])):
            with open(head if what == "report" else os.devnull, "w") as out:
                x = timed(cmd, out)
            x["events_per_s"] = gen["records"] / x["cpu_s"] if x["cpu_s"] else None
            row[what] = x
            bench.log("  %-6s rc %d, %.2f s CPU (%.2f s wall), %.2fM events/s, peak RSS %.1f MiB"
                      % (what, x["rc"], x["cpu_s"], x["wall_s"], (x["events_per_s"] or 0) / 1e6,
                         x["max_rss_kib"] / 1024))
        # the report's first lines: what it made of the big trace
        with open(head) as f:
            row["report_head"] = f.read().splitlines()[:4]
        rows.append(row)
        if os.environ.get("BENCH_KEEP") != "1":
            os.unlink(big)
    with open(os.path.join(bench.OUT, "analysis.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print()
    print("Analysis of a %d-event trace (%s; one core: CPU %d; file in the page cache)"
          % (N, bench.SB, bench.CPU))
    print()
    print("| trace | file | bytes/event | reader alone: events/s, RSS | report (text): CPU s, "
          "events/s, peak RSS | report --format json: CPU s, events/s, peak RSS |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %s (%d copies of %d events, %d steps each) | %.0f MB | %.1f | %.2fM/s, %.1f MiB "
              "| %.2f s, %.2fM/s, %.1f MiB | %.2f s, %.2fM/s, %.1f MiB |" % (
                  r["template"], r["copies"], r["template_events"], r["steps_per_copy"],
                  r["file_bytes"] / 1e6, r["file_bytes"] / r["records"],
                  r["read"]["events_per_s"] / 1e6, r["read"]["max_rss_kib"] / 1024,
                  r["report"]["cpu_s"], r["report"]["events_per_s"] / 1e6,
                  r["report"]["max_rss_kib"] / 1024,
                  r["json"]["cpu_s"], r["json"]["events_per_s"] / 1e6,
                  r["json"]["max_rss_kib"] / 1024))
    print()
    for r in rows:
        print("%s: %s" % (r["template"], " / ".join(r["report_head"][:4])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
