#!/usr/bin/env bash
# Scheduler runs, real probes on a real program (tests/progs/sbwork pingpong):
# steps of 200 round trips through pipes with a peer thread on the same CPU,
# marked by USDT. The program reads its thread's voluntary and involuntary
# context switches (/proc/thread-self/status) right before each mark. By
# default (a 100 us fold), each of the thread's trips off its CPU is in the trace once,
# as a switch_out record or inside a sched_run record, as many in each step as
# the kernel counted; most of them are folded; the report blames the sleeps on
# the peer that woke the thread (docs/ARCHITECTURE.md, "Scheduler runs").
# With --fold 0 there is no sched_run record and the same count holds.
set -u
. "$(dirname "$0")/../lib.sh"
T=sched_runs

need_bpf $T || exit 0
prog="${BUILD:-build}/tests/progs/sbwork"
if [ ! -x "$prog" ] || ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
	skip $T "no $prog or no stepblame that records"; exit 0
fi
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

STEPS=30
one() { # name, record options...
	local name=$1
	shift
	record_gated "$T/$name" "$name" "$*" "$prog" pingpong $STEPS || return 1
	if ! "$STEPBLAME" report --format json "$tmp/$name.sbt" >"$tmp/$name.json" 2>"$tmp/err" ||
	   ! "$STEPBLAME" dump --jsonl "$tmp/$name.sbt" >"$tmp/$name.jsonl" 2>>"$tmp/err"; then
		fail "$T/$name" "report or dump failed: $(head -1 "$tmp/err")"
		return 1
	fi
	python3 - "$T/$name" "$tmp/$name.prog" "$tmp/$name.json" "$tmp/$name.jsonl" $STEPS <<'EOF'
import json, sys

name, prog, report, dump, nsteps = sys.argv[1:5] + [int(sys.argv[5])]
folded = name.endswith("default")
truth = {}
for line in open(prog):
    w = line.split()
    if len(w) == 4 and w[0] == "switchstep":
        truth[int(w[1])] = int(w[2]) + int(w[3])
recs = [json.loads(l) for l in open(dump)]
tid = peer = None
for d in recs:
    if d.get("type") == "rename" and d.get("newcomm") == "sbw-main":
        tid = d["tid"]
    if d.get("type") == "thread_new" and d.get("comm") == "sbw-peer":
        peer = d["tid"]
    if d.get("type") == "rename" and d.get("newcomm") == "sbw-peer":
        peer = d["tid"]
# the agent: it can end a sleep too (the thread waiting on a lock of its
# process that the agent held, reading its mappings or placing probes)
agent = next((int(kv[10:]) for d in recs if d.get("type") == "host"
              for kv in d["text"].split("\n") if kv.startswith("agent_pid=")), None)
by_agent = 0
bad = []
if len(truth) != nsteps:
    bad.append("sbwork reported %d steps of %d" % (len(truth), nsteps))
if tid is None or peer is None:
    bad.append("no sbw-main (%s) or sbw-peer (%s) in the trace" % (tid, peer))
marks = sorted((d["step"], d["ts"]) for d in recs if d.get("type") == "step")
at = {n: ts for n, ts in marks}
trips = {}
plain = runs = in_runs = 0
for d in recs:
    if d.get("tid") != tid:
        continue
    if d["type"] == "switch_out":
        t, k = d["ts"], 1
        plain += 1
    elif d["type"] == "sched_run":
        t, k = d["start_ns"], d["sleeps"] + d["preempts"]
        runs += 1
        in_runs += k
        # its sleeps were ended by the peer (the pipe's writer)
        if d["sleeps"] and agent and d["waker_pid"] == agent:
            by_agent += 1
        elif d["sleeps"] and d["waker_tid"] not in (peer, 0):
            bad.append("a run woken by %s[%d], not the peer" % (d["waker_comm"], d["waker_tid"]))
    else:
        continue
    for n in truth:
        if n in at and n + 1 in at and at[n] <= t < at[n + 1]:
            trips[n] = trips.get(n, 0) + k
for n, want in sorted(truth.items()):
    got = trips.get(n, 0)
    # the kernel's counters are read a few instructions before each mark
    if abs(got - want) > 2:
        bad.append("step %d: %d trips off the CPU in the trace, the kernel counted %d" % (n, got, want))
total = sum(truth.values())
if total < 200 * nsteps:
    bad.append("the kernel counted %d switches in %d steps of 200 round trips" % (total, nsteps))
if folded and in_runs < 0.5 * (plain + in_runs):
    bad.append("%d trips folded in %d sched_run records, %d written as switches" % (in_runs, runs, plain))
if not folded and runs:
    bad.append("%d sched_run records with --fold 0" % runs)
# the report: the steps' sleeps are blocked on the peer (or on whoever held it up, via it)
r = json.load(open(report))
steps = {s["step"]: s for s in r["steps"] if not s["incomplete"]}
for n in sorted(truth):
    s = steps.get(n)
    if not s:
        bad.append("step %d missing from the report" % n)
        continue
    blocked = [b for b in s["blame"] if b["cause"] == "blocked"]
    top = max(blocked, key=lambda b: b["ns"], default=None)
    # the peer, or what kept the peer (another task preempting it on a busy machine)
    c = (top or {}).get("culprit", {})
    if not top or peer not in (c.get("tid"), c.get("via", {}).get("tid")):
        bad.append("step %d: blocked %s, not on sbw-peer[%s]" % (n, top, peer))
        break
if bad:
    print("FAIL %s: %s" % (name, "; ".join(bad[:6])))
else:
    print("PASS %s (%d trips: %d in %d sched_run records, %d as switches%s)" %
          (name, plain + in_runs, in_runs, runs, plain,
           "; %d runs woken by the agent" % by_agent if by_agent else ""))
EOF
}

one default
one fold0 --fold 0
