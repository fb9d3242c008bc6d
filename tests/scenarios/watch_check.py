#!/usr/bin/env python3
"""
Did stepblame watch keep the detail of every injected interference, blamed
right? watch_check.py DIR TRUTH PID: DIR holds the snippets of PID
(tail-PID-step*.sbtrace) with their reports beside them (FILE.sbtrace.json, from
`stepblame report --format json`); TRUTH is simtrainer's --truth file. For
each injection (consecutive steps of one kind are one), one of its steps
must be in a snippet, its largest blame the kind's cause (a hog: cpu_wait on
the hog). Prints a line per injection, and "FAILED: ..." when one is missing
or blamed wrong. A hog's steps are judged only where it kept the launcher
waiting over 1 ms (the truth's launcher_run_delay_ns), and not its first and
last steps (the hog's start and stop). Used by
tests/scenarios/watch.sh and bench/watch_long.py.
"""
import glob, json, os, sys
d, truth, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
# what each injection is to be blamed on (as blame_check.py)
CAUSES = {"hog": {"cpu_wait"}, "faults": {"page_fault", "alloc"}, "ckpt": {"io_wait"},
          "alloc": {"alloc", "page_fault"}, "migrate": {"migration"}, "stall": {"blocked"}}
events = [json.loads(l) for l in open(truth)]
events = [e for e in events if "kind" in e]
if not events:
    print("FAILED: no injection in %s" % truth)
    sys.exit(0)
# step -> [(snippet, step object)]: a step near the start of a later snippet's
# window is in it too, so every snippet that holds it is looked at
steps = {}
for f in sorted(glob.glob(os.path.join(d, "tail-%d-step*.sbtrace.json" % pid))):
    r = json.load(open(f))
    for s in r["steps"]:
        if not s["incomplete"]:
            steps.setdefault(s["step"], []).append((os.path.basename(f)[:-5], s))
bad, said = [], []
def top(s):
    b = [x for x in s["blame"] if x["cause"] not in ("tracer", "vm_steal")]
    return max(b, key=lambda x: x["ns"]) if b else None
episodes = []
for e in sorted(events, key=lambda e: e["step"]):
    if episodes and episodes[-1][-1]["kind"] == e["kind"] and episodes[-1][-1]["step"] == e["step"] - 1:
        episodes[-1].append(e)
    else:
        episodes.append([e])
MS = 1000000
for ev in episodes:
    kind = ev[0]["kind"]
    ok = []
    # a hog delays the launcher only where it wins its CPU while the launcher
    # wants it (simtrainer's launcher_run_delay_ns): steps it did not delay
    # have nothing of it to blame (as blame_check.py)
    # simtrainer starts and stops the hog synchronously in the first and last
    # steps of its range (fork, kill): their delay is the injector's, not the
    # hog's, so only the steps between are judged (as blame_check.py)
    if kind == "hog":
        hurt = [e for e in ev[1:-1] if e.get("launcher_run_delay_ns", MS + 1) > MS]
        if not hurt:
            print("    hog (steps %d-%d): it never kept the launcher waiting over 1 ms between its "
                  "first and last steps: nothing to blame"
                  % (ev[0]["step"], ev[-1]["step"]))
            continue
        ev = hurt
    for e in ev:
        for f, s in steps.get(e["step"], []):
            t = top(s)
            if t and t["cause"] in CAUSES[kind] and (kind != "hog" or t.get("culprit", {}).get("comm") == "noisy-neighbor"):
                ok.append("%d in %s: %s %.1f ms" % (e["step"], f, t["cause"], t["ns"] / 1e6))
            else:
                said.append("%s step %d in %s: top %s" % (kind, e["step"], f, t and (t["cause"], t.get("culprit", {}).get("comm"), t["ns"])))
    if not ok:
        bad.append("%s (steps %s): no snippet blames it right%s" % (kind, ",".join(str(e["step"]) for e in ev),
                   "" if any(e["step"] in steps for e in ev) else " (none of its steps is in a snippet)"))
    else:
        print("    %s: %s" % (kind, ok[0]))
for s in said:
    print("    (%s)" % s)
if bad:
    print("FAILED: " + "; ".join(bad))
