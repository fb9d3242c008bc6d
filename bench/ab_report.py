#!/usr/bin/env python3
"""Report speed of two builds on the same traces, interleaved (A B A B ...), so
that the machine's noise falls on both alike: CPU time (user + sys) of
`stepblame report TRACE --format FMT` to /dev/null, per trace and format, and
the ratio of the medians (B / A).

  bench/ab_report.py OLD_STEPBLAME NEW_STEPBLAME TRACE... [--rounds N] [--cpu C]

--cpu pins both to one CPU (taskset). Prints a Markdown table.
"""
import argparse
import os
import statistics
import subprocess


def cpu_of(argv, cpu):
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu)] + argv
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(argv, stdout=null, stderr=null)
        _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {os.waitstatus_to_exitcode(status)}")
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cpu", type=int)
    ap.add_argument("--formats", default="text,json,perfetto")
    a = ap.parse_args()
    print("| trace | format | A median CPU s | B median CPU s | B/A | B/A min..max per round |")
    print("|---|---|---|---|---|---|")
    for t in a.traces:
        for fmt in a.formats.split(","):
            xs, ys, rs = [], [], []
            for _ in range(a.rounds):
                x = cpu_of([a.old, "report", t, "--format", fmt], a.cpu)
                y = cpu_of([a.new, "report", t, "--format", fmt], a.cpu)
                xs.append(x)
                ys.append(y)
                rs.append(y / x if x else 0)
            mx, my = statistics.median(xs), statistics.median(ys)
            print(f"| {os.path.basename(t)} | {fmt} | {mx:.3f} | {my:.3f} | {my / mx:.3f} | "
                  f"{min(rs):.2f}..{max(rs):.2f} |")


if __name__ == "__main__":
    main()
