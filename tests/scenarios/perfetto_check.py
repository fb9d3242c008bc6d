"""Checks of the Perfetto output read by a real Trace Event Format consumer:
the trace engine of Chromium's DevTools (its Performance panel's parser,
models/trace in the DevTools bundled with Debian's chromium), driven headless
through tests/browser.py; then against the JSON report of the same trace
(tests/scenarios/perfetto_viewer.sh).

    perfetto_check.py TRACE.perfetto.json REPORT.json HOG_COMM

Prints PASS/FAIL lines (tests/lib.sh's format).
"""
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from browser import Browser, BrowserError  # noqa: E402

T = "perfetto_viewer"
STEPS_PID = 1073741824
CPU_PID = STEPS_PID + 1
GPU_PID = STEPS_PID + 16


def case(name, ok, why):
    print(("PASS %s_%s" % (T, name)) if ok else ("FAIL %s_%s: %s" % (T, name, why)))


# what the consumer made of the document: names, tracks and their slices, flows
PARSE = r"""(async () => {
  try {
    const T = await import('./models/trace/trace.js');
    const m = T.TraceModel.Model.createWithAllHandlers();
    await m.parse(JSON.parse(window.__doc).traceEvents, {metadata: {}, isFreshRecording: false});
    const p = m.parsedTrace(0).data;
    const nm = e => e && e.args ? e.args.name : null;
    const threads = [];
    for (const [pid, proc] of p.Renderer.processes)
      for (const [tid, th] of proc.threads)
        threads.push({pid, tid, name: th.name || null,
                      slices: th.entries.map(e => [e.name, e.cat, e.ts, e.dur || 0])});
    return JSON.stringify({
      generic: p.Meta.traceIsGeneric,
      processes: [...p.Meta.processNames.entries()].map(([pid, e]) => [pid, nm(e)]),
      thread_names: [...p.Meta.threadsInProcess.entries()].flatMap(
          ([pid, m]) => [...m.entries()].map(([tid, e]) => [pid, tid, nm(e)])),
      threads,
      flows: p.Flows.flows.map(f => f.map(e => [e.pid, e.tid, e.ts, e.name, e.cat])),
    });
  } catch (e) { return JSON.stringify({error: String(e) + ' ' + e.stack}); }
})()"""


def main():
    trace_path, report_path, hog = sys.argv[1:4]
    doc = open(trace_path).read()
    raw = json.loads(doc)
    report = json.load(open(report_path))
    try:
        with Browser() as b:
            b.open("devtools://devtools/bundled/trace_app.html")
            b.eval("window.__doc = %s; 1" % json.dumps(doc))
            got = json.loads(b.eval(PARSE))
            errors = b.errors
    except BrowserError as e:
        case("parsed", False, "chromium: %s" % e)
        return
    if "error" in got:
        case("parsed", False, got["error"][:300])
        return
    case("parsed", got["generic"] and not errors,
         "generic %s, console errors %s" % (got["generic"], errors[:2]))

    # every process and thread with slices has a name
    pnames = {pid: n for pid, n in got["processes"]}
    tnames = {(pid, tid): n for pid, tid, n in got["thread_names"]}
    tracks = [t for t in got["threads"] if t["slices"]]
    unnamed = [(t["pid"], t["tid"]) for t in tracks
               if not pnames.get(t["pid"]) or not tnames.get((t["pid"], t["tid"]))]
    case("every_track_named", tracks and not unnamed,
         "%d tracks, unnamed (pid, tid): %s" % (len(tracks), unnamed[:5]))

    # the GPU: every device and stream that ran an operation, by its number
    ops = [e for e in raw["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "gpu"
           and e["pid"] >= GPU_PID]
    devs = {(e["pid"], e["tid"]) for e in ops}
    bad = [(pid - GPU_PID, tid, pnames.get(pid), tnames.get((pid, tid))) for pid, tid in devs
           if pnames.get(pid) != "GPU %d" % (pid - GPU_PID) or tnames.get((pid, tid)) != "stream %d" % tid]
    case("gpu_streams_named", devs and not bad, "%d streams; misnamed: %s" % (len(devs), bad[:3]))

    # the steps track holds every step of the JSON report, with its times
    st = [t for t in got["threads"] if t["pid"] == STEPS_PID and t["name"] == "steps"]
    sl = st[0]["slices"] if st else []
    want = sorted(round(s["start_ns"] / 1000.0, 3) for s in report["steps"]) if all(
        "start_ns" in s for s in report["steps"]) else None
    have = sorted(round(x[2], 3) for x in sl)
    case("steps_track", len(sl) == len(report["steps"]) and (want is None or
         all(abs(a - b) < 0.002 for a, b in zip(want, have))),
         "%d slices on the steps track, %d steps in the report" % (len(sl), len(report["steps"])))

    # a flow from each launch the engine tied to its thread to the operation
    launches = [e for e in raw["traceEvents"] if e.get("ph") == "s"]
    flows = got["flows"]
    target = raw["metadata"]["stepblame"]["pid"]
    wrong = []
    for f in flows:
        ends = sorted(f, key=lambda e: e[2])
        if not (len(ends) == 2 and ends[0][0] == target and ends[0][3] == "launch" and
                ends[1][0] >= GPU_PID and ends[1][2] >= ends[0][2]):
            wrong.append(ends)
    case("launch_flows", len(ops) and len(flows) == len(launches) and
         len(flows) >= 0.9 * len(ops) and not wrong,
         "%d flows bound of %d written, %d GPU operations; wrong: %s" %
         (len(flows), len(launches), len(ops), wrong[:2]))

    # counters: each step's GPU busy share and tracer cost from its start
    cnt = {}
    for e in raw["traceEvents"]:
        if e.get("ph") == "C" and e["pid"] == STEPS_PID:
            cnt.setdefault(e["name"], {})[round(e["ts"], 3)] = e["args"]["percent"]
    busy, tracer, off = cnt.get("GPU busy", {}), cnt.get("tracer cost", {}), []
    for s in report["steps"]:
        d = s["duration_ns"]
        if not d:
            continue
        ts = round(s["start_ns"] / 1000.0, 3)
        want_b = 100.0 * (d - min(s["gpu_idle_ns"], d)) / d
        want_t = 100.0 * min(s.get("tracer_ns", 0), d) / d
        if abs(busy.get(ts, -1) - want_b) > 0.006 or abs(tracer.get(ts, -1) - want_t) > 0.006:
            off.append((s["step"], busy.get(ts), round(want_b, 2), tracer.get(ts), round(want_t, 2)))
    case("counters", busy and not off,
         "%d GPU busy samples; off (step, busy, want, tracer, want): %s" % (len(busy), off[:3]))

    # the CPU tracks: the hog on the CPU it took, slices never overlapping
    cpus = [t for t in got["threads"] if t["pid"] == CPU_PID and t["slices"]]
    hog_on = [t["name"] for t in cpus if any(x[0] == hog for x in t["slices"])]
    overlap = []
    for t in cpus:
        xs = sorted(t["slices"], key=lambda x: x[2])
        overlap += [(t["name"], a[0], b[0]) for a, b in zip(xs, xs[1:]) if a[2] + a[3] > b[2] + 0.001]
    case("cpu_tracks", hog_on and all(t["name"].startswith("CPU ") for t in cpus) and not overlap,
         "%s on %s; CPU tracks %s; overlapping: %s" %
         (hog, hog_on, [t["name"] for t in cpus], overlap[:2]))

    # whose trace it is, as the JSON report says
    ident = raw["metadata"]["stepblame"]
    keys = ("host", "boot_id", "start_realtime_ns", "pid", "stepblame_version", "agent_pid")
    rid = report["identity"]
    case("identity", all(k in ident and ident[k] == rid.get(k) for k in keys),
         "metadata %s, report %s" % ({k: ident.get(k) for k in keys}, {k: rid.get(k) for k in keys}))


if __name__ == "__main__":
    main()
