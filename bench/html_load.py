#!/usr/bin/env python3
"""The HTML report at 100,000 steps (bench/RESULTS.md, "The HTML report").

A real recording (`stepblame demo --keep`, the default scenario: a hog, a fault
storm, checkpoints) is tiled in time by build/bench/gentrace until it holds
HTML_STEPS (100000) steps. Then, in ROUNDS interleaved rounds:
  text   `stepblame report FILE > /dev/null`
  html   `stepblame report FILE -o FILE.html`
(CPU seconds of each, and their ratio per round), and the page is opened
ROUNDS times in one headless Chromium (tests/browser.py): the time from the
navigation to the page's data-ready (its data decompressed and parsed, every
chart drawn), by the browser's clock, and the wall time of the whole load.
Prints the sizes: the page, and its data before compression.
    sudo bench/html_load.py [ROUNDS]        (5; env STEPBLAME, HTML_STEPS, HTML_TEMPLATE)
"""
import base64
import gzip
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from browser import Browser  # noqa: E402

SB = os.environ.get("STEPBLAME", "build/stepblame")
GEN = "build/bench/gentrace"
STEPS = int(os.environ.get("HTML_STEPS", "100000"))


def cpu_of(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    work = tempfile.mkdtemp(prefix="html_load.", dir="/var/tmp")
    tpl = os.environ.get("HTML_TEMPLATE")
    if not tpl:
        subprocess.run([SB, "demo", "--keep", work + "/demo"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tpl = work + "/demo/demo.sbtrace"
    if not os.path.exists(GEN):
        subprocess.run(["cc", "-O2", "-std=gnu11", "-D_GNU_SOURCE", "-I.", "-Iuser", "-Ibuild",
                        "bench/gentrace.c", "user/format/trace.c", "user/base/outfile.c",
                        "user/base/util.c", "-lzstd", "-lz", "-o", GEN], check=True)
    # records a step in the template, to size the tiled trace
    out = subprocess.run([GEN, "--read", tpl], capture_output=True, text=True, check=True).stdout
    recs = int(re.search(r"records=(\d+)", out).group(1))
    jl = subprocess.run([SB, "report", tpl, "-f", "jsonl"], capture_output=True, text=True).stdout
    tsteps = max(1, len(jl.splitlines()))
    big = work + "/big.sbt"
    subprocess.run([GEN, tpl, big, "--records", str(int(recs / tsteps * STEPS * 1.01))], check=True,
                   stdout=subprocess.DEVNULL)
    page = work + "/big.html"
    text_s, html_s = [], []
    for _ in range(rounds):
        text_s.append(cpu_of([SB, "report", big]))
        html_s.append(cpu_of([SB, "report", big, "-o", page]))
    html = open(page).read()
    m = re.search(r'data-encoding="gzip\+base64">([A-Za-z0-9+/=]*)</script>', html)
    data = gzip.decompress(base64.b64decode(m.group(1)))
    nsteps = len(json.loads(data)["dur"])
    ready, wall = [], []
    with Browser() as b:
        for _ in range(rounds):
            t = time.monotonic()
            b.open("file://" + page)
            b.wait_for("document.body.getAttribute('data-ready')", timeout=120)
            wall.append(time.monotonic() - t)
            ready.append(b.eval("performance.now()") / 1000)
        errors = b.errors
    res = {
        "steps": nsteps, "trace_bytes": os.path.getsize(big), "page_bytes": len(html.encode()),
        "data_bytes": len(data),
        "text_cpu_s": text_s, "html_cpu_s": html_s,
        "html_over_text": statistics.median(h / t for h, t in zip(html_s, text_s)),
        "ready_s": ready, "load_wall_s": wall, "errors": errors,
    }
    os.makedirs("build/bench", exist_ok=True)
    with open("build/bench/html_load.json", "w") as f:
        json.dump(res, f, indent=1)
    print("%d steps: trace %.0f MB, page %.2f MB (data %.2f MB before compression)" % (
        nsteps, res["trace_bytes"] / 1e6, res["page_bytes"] / 1e6, res["data_bytes"] / 1e6))
    print("report CPU: text %s s, html %s s; html/text median %.3f" % (
        " ".join("%.2f" % x for x in text_s), " ".join("%.2f" % x for x in html_s),
        res["html_over_text"]))
    print("page ready after %s s (median %.2f), whole load %s s; errors %s" % (
        " ".join("%.2f" % x for x in ready), statistics.median(ready),
        " ".join("%.2f" % x for x in wall), errors or "none"))
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
