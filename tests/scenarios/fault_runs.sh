#!/usr/bin/env bash
# Page-fault runs, real probes on a real program (tests/progs/sbwork faultsteps):
# steps that touch 2000 fresh pages each, steps that only compute, marked by
# USDT. The program reads its thread's minflt + majflt (/proc/thread-self/stat)
# right before each mark. The report's fault count for each step is the
# kernel's, its fault steps have page_fault time, and the trace holds far fewer
# fault_run records than faults (docs/ARCHITECTURE.md, "Page-fault runs").
# Then dense bursts (tests/progs/sbwork faultbursts: 65 fresh pages back to
# back, a 2 ms spin after each, the program's own clock around each): the
# runs that carry a burst's faults lie inside the burst's time, none swallows
# a spin, and a burst caught whole ends where the program's clock says it did
# (the untimed faults of a dense run: its end is estimated).
set -u
. "$(dirname "$0")/../lib.sh"
T=fault_runs

need_bpf $T || exit 0
prog="${BUILD:-build}/tests/progs/sbwork"
if [ ! -x "$prog" ] || ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
	skip $T "no $prog or no stepblame that records"; exit 0
fi
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

STEPS=20
record_gated $T steps "" "$prog" faultsteps $STEPS || exit 0
if ! "$STEPBLAME" report --format json "$tmp/steps.sbt" >"$tmp/report.json" 2>"$tmp/err" ||
   ! "$STEPBLAME" dump --jsonl "$tmp/steps.sbt" >"$tmp/dump.jsonl" 2>>"$tmp/err"; then
	fail $T "report or dump failed: $(head -1 "$tmp/err")"; exit 0
fi
python3 - "$tmp/steps.prog" "$tmp/report.json" "$tmp/dump.jsonl" $STEPS <<'EOF'
import json, sys

T = "fault_runs"
prog, report, dump, nsteps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
truth = {}
for line in open(prog):
    w = line.split()
    if len(w) == 3 and w[0] == "faultstep":
        truth[int(w[1])] = int(w[2])
r = json.load(open(report))
steps = {s["step"]: s for s in r["steps"] if not s["incomplete"]}
bad = []
if len(truth) != nsteps:
    bad.append("sbwork reported %d steps of %d" % (len(truth), nsteps))
n_fault_steps = 0
for n, want in sorted(truth.items()):
    s = steps.get(n)
    if s is None:
        bad.append("step %d missing from the report" % n)
        continue
    got = s["counts"]["faults"]
    # the kernel's counter is read a few instructions before each mark: no fault between
    if abs(got - want) > 2:
        bad.append("step %d: %d faults reported, the kernel counted %d" % (n, got, want))
    if (n - 3000) % 2 == 0:
        n_fault_steps += 1
        if want < 2000:
            bad.append("step %d: the kernel counted %d faults, 2000 pages were touched" % (n, want))
        pf = sum(b["ns"] for b in s["blame"] if b["cause"] == "page_fault")
        if pf <= 0:
            bad.append("step %d: no page_fault time" % n)
# every fault of the program's thread, and the records that carried them
faults = runs = 0
tid = None
for line in open(dump):
    d = json.loads(line)
    if d.get("type") == "rename" and d.get("newcomm") == "sbw-main":
        tid = d["tid"]
for line in open(dump):
    d = json.loads(line)
    if d.get("tid") != tid:
        continue
    if d.get("type") == "fault":
        faults += 1
    elif d.get("type") == "fault_run":
        faults += d["count"]
        runs += 1
if tid is None:
    bad.append("no rename to sbw-main in the trace")
if faults < 2000 * n_fault_steps:
    bad.append("%d faults of sbw-main in the trace, %d pages touched" % (faults, 2000 * n_fault_steps))
# the faults come in runs: one record per run, not per fault
if runs == 0 or runs * 20 > faults:
    bad.append("%d fault_run records for %d faults" % (runs, faults))
if bad:
    print("FAIL %s: %s" % (T, "; ".join(bad[:6])))
else:
    print("PASS %s (%d faults in %d fault_run records)" % (T, faults, runs))
EOF

# dense bursts: the clock read at one fault in eight, the run's end estimated
T=fault_runs/dense_bursts
BURSTS=40
record_gated $T bursts "" "$prog" faultbursts $BURSTS || exit 0
if ! "$STEPBLAME" dump --jsonl "$tmp/bursts.sbt" >"$tmp/bursts.jsonl" 2>"$tmp/err"; then
	fail $T "dump failed: $(head -1 "$tmp/err")"; exit 0
fi
python3 - "$tmp/bursts.prog" "$tmp/bursts.jsonl" $BURSTS <<'EOF'
import json, statistics, sys

T = "fault_runs/dense_bursts"
out, dump, nb = sys.argv[1], sys.argv[2], int(sys.argv[3])
PER = 65
bursts = []
for line in open(out):
    w = line.split()
    if len(w) == 6 and w[0] == "faultburst":
        bursts.append((int(w[2]), int(w[3]), int(w[4], 16), int(w[5], 16)))
recs = [json.loads(l) for l in open(dump)]
tid = next((d["tid"] for d in recs if d.get("type") == "rename" and d.get("newcomm") == "sbw-main"), None)
if len(bursts) != nb or tid is None:
    print("FAIL %s: %d bursts reported of %d, sbw-main %s" % (T, len(bursts), nb, tid))
    sys.exit(0)
# each record of the mapping's faults, in the burst its first fault is in
lo_all, hi_all = bursts[0][2], bursts[-1][3]
per_burst = [[] for _ in bursts]
for d in recs:
    if d.get("tid") != tid or d.get("type") not in ("fault", "fault_run"):
        continue
    first = int(d["addr"] if d["type"] == "fault" else d["lo_addr"], 16)
    if not lo_all <= first <= hi_all:
        continue
    k = next(i for i, b in enumerate(bursts) if b[2] <= first <= b[3])
    if d["type"] == "fault":
        per_burst[k].append((d["ts"], d["ts"], 1))
    else:
        per_burst[k].append((d["start_ns"], d["ts"], d["count"]))
bad, errs, total = [], [], 0
for k, ((t0, t1, lo, hi), runs) in enumerate(zip(bursts, per_burst)):
    n = sum(r[2] for r in runs)
    total += n
    # an untimed fault after the spin may join the run before it: at most 7 (bpf/common.bpf.h)
    if not PER - 7 <= n <= PER + 7:
        bad.append("burst %d: %d faults in its runs, %d pages" % (k, n, PER))
    for s, e, c in runs:
        if s < t0 or e > t1 + 1000000:
            bad.append("burst %d [0, %d us]: a run of %d faults over [%d, %d] us" %
                       (k, (t1 - t0) // 1000, c, (s - t0) // 1000, (e - t0) // 1000))
    if len(runs) == 1 and runs[0][2] >= PER:
        # caught whole: its end against the program's clock, in fault gaps
        errs.append((t1 - runs[0][1]) / ((t1 - t0) / PER))
if total != PER * nb:
    bad.append("%d faults in the mapping's records, %d pages touched" % (total, PER * nb))
if len(errs) < nb // 4:
    bad.append("only %d of %d bursts came in one run" % (len(errs), nb))
elif not -4 <= statistics.median(errs) <= 4:
    bad.append("a whole burst's run ends %.1f fault gaps before its last touch (median of %d)" %
               (statistics.median(errs), len(errs)))
if bad:
    print("FAIL %s: %s" % (T, "; ".join(bad[:6])))
else:
    print("PASS %s (%d bursts, %d whole; their runs end %.1f fault gaps from the clock, median)" %
          (T, nb, len(errs), statistics.median(errs)))
EOF
