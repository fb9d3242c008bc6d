#!/usr/bin/env python3
"""Compressed traces: what -z costs the agent and saves on disk
(bench/RESULTS.md, "Compressed traces").

A trace of simtrainer (STEPS steps, its GPU timeline on, a CPU hog injected
part of the time) is recorded once, plain. Then, in every round, its records
are written again through the trace writer at each level in turn (0 plain,
1, 3 the -z default, 9; build/bench/gentrace --copy, the writer's CPU time
only), and `stepblame report` reads each result, so the machine's drift falls
on all levels alike. Last, one `record -z` of the same trainer, to show the
size as the agent writes it.
Prints each run, then per level the medians: size ratio, writer CPU per MiB
of records and its excess over plain, and the report's time against plain.
    sudo bench/zstd_cost.py [ROUNDS]   (5; env STEPBLAME, SIMTRAINER, STEPS, GENTRACE)
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
stepblame = os.environ.get("STEPBLAME", os.path.join(here, "..", "build", "stepblame"))
simtrainer = os.environ.get("SIMTRAINER", os.path.join(here, "..", "build", "simtrainer"))
gentrace = os.path.abspath(os.environ.get("GENTRACE", os.path.join(here, "..", "build", "bench", "gentrace")))
steps = os.environ.get("STEPS", "1500")
LEVELS = [0, 1, 3, 9]


def record(out, opts):
    sim = subprocess.Popen([simtrainer, "--steps", steps, "--kernels", "12", "--kernel-us", "300",
                            "--wait-agent", "30", "--inject", "hog@100-400:-10", "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([stepblame, "record", "-q", "-p", str(sim.pid), "-d", "120", "-o", out] + opts,
                   check=True)
    sim.wait()


def build_gentrace():
    """as bench/run builds it: the project's trace code, plain -O2"""
    root = os.path.join(here, "..")
    os.makedirs(os.path.dirname(gentrace), exist_ok=True)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=gnu11", "-D_GNU_SOURCE", "-I.",
                    "-Iuser", "bench/gentrace.c", "user/format/trace.c", "user/base/outfile.c",
                    "user/base/util.c", "-lzstd", "-lz", "-o", gentrace], cwd=root, check=True)


def main():
    if "GENTRACE" not in os.environ:
        build_gentrace()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    res = {lv: [] for lv in LEVELS}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        tpl = os.path.join(tmp, "template.sbt")
        record(tpl, [])
        print("template: %s, %d bytes" % (tpl, os.path.getsize(tpl)))
        print("%-6s %10s %10s %7s %10s %10s %9s" %
              ("level", "records", "file", "ratio", "writer", "per MiB", "report"))
        for _ in range(rounds):
            for lv in LEVELS:
                out = os.path.join(tmp, "c%d.sbt" % lv)
                if os.path.exists(out):
                    os.unlink(out)
                g = subprocess.run([gentrace, "--copy", tpl, out, str(lv)],
                                   capture_output=True, text=True, check=True).stdout
                v = dict((k, int(x)) for k, x in re.findall(r"(\w+)=(\d+)", g))
                t0 = time.monotonic()
                subprocess.run([stepblame, "report", out], stdout=subprocess.DEVNULL, check=True)
                rep = time.monotonic() - t0
                mib = v["bytes_in"] / 2**20
                res[lv].append((v["bytes_in"] / v["bytes_out"], v["cpu_ns"] / 1e6 / mib, rep))
                print("%-6d %9.0fK %9.0fK %6.2fx %8.1fms %8.2fms %7.0fms" %
                      (lv, v["bytes_in"] / 1024, v["bytes_out"] / 1024,
                       v["bytes_in"] / v["bytes_out"], v["cpu_ns"] / 1e6, v["cpu_ns"] / 1e6 / mib,
                       rep * 1e3), flush=True)
        z = os.path.join(tmp, "rec.sbt.zst")
        record(z, ["-z"])
        raw = int(subprocess.run(["sh", "-c", "zstd -dc '%s' | wc -c" % z],
                                 capture_output=True, text=True, check=True).stdout)
        print("record -z: %d bytes, %d decompressed, %.2fx" %
              (os.path.getsize(z), raw, raw / os.path.getsize(z)))
    print("\nmedians over %d rounds" % rounds)
    med = lambda lv, i: statistics.median(r[i] for r in res[lv])
    for lv in LEVELS:
        print("level %d: ratio %5.2fx  writer %5.2f ms/MiB (+%.2f over plain)  report %.2fx plain" %
              (lv, med(lv, 0), med(lv, 1), med(lv, 1) - med(0, 1), med(lv, 2) / med(0, 2)))


main()
