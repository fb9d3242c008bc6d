#!/usr/bin/env bash
# A real-time task (SCHED_FIFO) preempts the launcher whatever the nice values,
# so renicing the trainer cannot help: the report says so. simtrainer, its
# launcher pinned, is preempted by two processes on its CPU: its own
# noisy-neighbor hog for steps 150-170 (nice -10: it wins the CPU, in the fair
# class), and a process of ours named rt-burst, SCHED_FIFO priority 1, that
# spins 15 ms every 250 ms six times from the attach on, and its child rt-tick
# (SCHED_FIFO too) that spins 40 us every 2 ms for 3 s: trips of the launcher
# short enough to fold into the kernel's runs, which flag it as their runner
# (real-time) where the runslices it would have left are not written. rt-burst is an
# interferer marked real-time, in the JSON (interferers[], and the culprit of
# the steps it slowed) and in the text; noisy-neighbor is an interferer that is
# not.
set -u
. "$(dirname "$0")/../lib.sh"
T=realtime_hog

need_bpf $T || exit 0
if [ -x "${PLAIN_SIMTRAINER:-}" ]; then SIMTRAINER=$PLAIN_SIMTRAINER; fi
need_sim $T || exit 0
need_cmd $T python3 python3 || exit 0

tmp=$(mktemp -d)
sim= rec= rt=
cleanup() {
	exec 2>/dev/null
	for p in $rt $sim $rec; do kill -9 "$p"; done
	wait
	rm -rf "$tmp"
}
trap cleanup EXIT

cpu=$(($(nproc) - 1))
"$SIMTRAINER" --steps 600 --kernels 8 --launcher-cpu $cpu --start-delay-ms 100 \
	--inject hog@150-170:-10 --quiet >"$tmp/sim.out" 2>&1 &
sim=$!
# every step inside the capture, however long the probes take to attach
hold_trainer "$sim" "$SIMTRAINER"
"$STEPBLAME" record -p $sim -d 60 -o "$tmp/t.sbtrace" >"$tmp/rec.out" 2>&1 &
rec=$!
if ! wait_attached "$tmp/rec.out" 30 $rec; then
	fail $T "record did not attach: $(tail -2 "$tmp/rec.out" | tr '\n' ' ')"
	exit 0
fi
kill -CONT $sim
python3 - $cpu >"$tmp/rt.out" 2>&1 <<'EOF' &
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
with open("/proc/self/comm", "w") as f:
    f.write("rt-burst")
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
except OSError as e:
    print("no SCHED_FIFO: %s" % e)
    sys.exit(3)
# rt-tick: 40 us every 2 ms, trips of the launcher short enough to fold
tick = os.fork()
if tick == 0:
    with open("/proc/self/comm", "w") as f:
        f.write("rt-tick")
    end = time.monotonic() + 3
    while time.monotonic() < end:
        t = time.monotonic()
        while time.monotonic() - t < 0.00004:
            pass
        time.sleep(0.002)
    os._exit(0)
for _ in range(6):
    t = time.monotonic()
    while time.monotonic() - t < 0.015:
        pass
    time.sleep(0.25)
os.waitpid(tick, 0)
EOF
rt=$!
wait $rt
rrc=$?
rt=
wait $sim
wait $rec
rc=$?
sim= rec=
if [ $rrc = 3 ]; then
	# a machine that gives root no real-time class (RT group scheduling without a budget)
	skip $T "$(cat "$tmp/rt.out")"
	exit 0
fi
if [ $rc != 0 ] || [ $rrc != 0 ]; then
	fail $T "record exited $rc, the real-time process $rrc: $(tail -2 "$tmp/rec.out" | tr '\n' ' ')"
	exit 0
fi
"$STEPBLAME" dump -f jsonl "$tmp/t.sbtrace" >"$tmp/dump.jsonl" 2>"$tmp/r.err" &&
	"$STEPBLAME" report "$tmp/t.sbtrace" >"$tmp/r.txt" 2>>"$tmp/r.err" &&
	"$STEPBLAME" report -f json "$tmp/t.sbtrace" -o "$tmp/r.json" 2>>"$tmp/r.err" ||
	{ fail $T "report: $(head -2 "$tmp/r.err")"; exit 0; }
[ -n "${STEPBLAME_KEEP:-}" ] && cp -r "$tmp" "$STEPBLAME_KEEP"
python3 - "$tmp/r.json" "$tmp/r.txt" "$tmp/dump.jsonl" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
T = "realtime_hog"
# the kernel's runs of short trips: those behind rt-tick flagged (schemas/trace.md, sched_run)
runs = [r for r in map(json.loads, open(sys.argv[3])) if r.get("type") == "sched_run"]
by = {}
for r in runs:
    k = by.setdefault(r["runner_comm"], [0, 0])
    k[0] += 1
    k[1] += r["flags"] & 1
tick, noisy = by.get("rt-tick", [0, 0]), by.get("noisy-neighbor", [0, 0])
if tick[0] < 10 or tick[1] != tick[0] or noisy[1]:
    print("FAIL %s_runs: runs behind rt-tick %d, flagged real-time %d; behind noisy-neighbor "
          "%d, flagged %d" % (T, tick[0], tick[1], noisy[0], noisy[1]))
else:
    print("PASS %s_runs (%d runs behind rt-tick, all flagged; %d behind noisy-neighbor, none)"
          % (T, tick[0], noisy[0]))
itf = {x["comm"]: x for x in d["summary"]["interferers"]}
rt, hog = itf.get("rt-burst"), itf.get("noisy-neighbor")
culprits = [b["culprit"] for s in d["steps"] for b in s.get("blame", [])
            if b.get("culprit", {}).get("comm") == "rt-burst"]
line = [l for l in text.splitlines() if l.strip().startswith("rt-burst[")]
if not rt or not rt.get("realtime"):
    print("FAIL %s_json: rt-burst among the interferers: %s" % (T, rt or sorted(itf)))
elif not hog or hog.get("realtime"):
    print("FAIL %s_json: noisy-neighbor (nice -10) among the interferers, not real-time: %s" % (T, hog))
elif not culprits or not all(c.get("realtime") for c in culprits):
    print("FAIL %s_json: %d blame entries name rt-burst, %d marked real-time"
          % (T, len(culprits), sum(1 for c in culprits if c.get("realtime"))))
else:
    print("PASS %s_json (rt-burst took %.1f ms in %d blame entries, noisy-neighbor %.1f ms)"
          % (T, rt["ns"] / 1e6, len(culprits), hog["ns"] / 1e6))
if not line or "(real-time" not in line[0]:
    print("FAIL %s_text: the interferers' line: %s" % (T, line))
elif "preempted by rt-burst[%d] (real-time)" % rt["pid"] not in text and \
        "itself preempted by rt-burst[%d] (real-time)" % rt["pid"] not in text:
    print("FAIL %s_text: no step says it was preempted by rt-burst (real-time)" % T)
else:
    print("PASS %s_text (%s)" % (T, " ".join(line[0].split())))
EOF
