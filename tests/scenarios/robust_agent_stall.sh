#!/usr/bin/env bash
# The agent stopped (SIGSTOP) for 5 s in the middle of a capture of simtrainer,
# as a starved or debugged agent would be. When it runs again its ring buffer
# and the trainer's GPU channel both hold seconds of records, read one after
# the other: the window that puts them back in time order must wait for both
# (docs/ARCHITECTURE.md, "Reorder window"). Checked for `record` (the trace,
# then `report`) and for `attach` (its live step lines):
#  - no record came too late for the window (the report's late_records);
#  - every step from the first complete one to the last has its mark and a
#    duration (a mark swept late makes a step of zero length and lends its
#    time to the step before it);
#  - no step of the 5 ms ones lasts 2 s (a step that took in the next ones).
# And the stack copies the probes did not take while it was stopped are counted.
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_agent_stall

need_bpf $T || exit 0
need_sim $T || exit 0

tmp=$(mktemp -d)
sim= agent=
cleanup() {
	[ -n "$agent" ] && kill -9 $agent 2>/dev/null
	[ -n "$sim" ] && kill -9 $sim 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# run_stalled NAME COMMAND...: the agent started on a fresh trainer, stopped 5 s
run_stalled() {
	local name=$1; shift
	"$SIMTRAINER" --steps 2400 --kernels 4 --kernel-us 1000 --wait-agent 20 --quiet \
		>"$tmp/$name.sim" 2>&1 &
	sim=$!
	"$@" -p $sim -d 90 >"$tmp/$name.out" 2>"$tmp/$name.err" &
	agent=$!
	if ! wait_attached "$tmp/$name.err" 15 $agent; then
		fail ${T}_$name "the capture did not start: $(tail -2 "$tmp/$name.err" | tr '\n' ' ')"
		kill -9 $sim $agent 2>/dev/null; sim= agent=
		return 1
	fi
	sleep 2
	kill -STOP $agent
	sleep 5
	kill -CONT $agent
	wait $sim; sim=
	wait $agent; local rc=$?
	agent=
	if [ $rc != 0 ]; then
		fail ${T}_$name "the agent exited $rc: $(tail -2 "$tmp/$name.err" | tr '\n' ' ')"
		return 1
	fi
}

# check NAME STEPS-FILE: the steps (report JSON, or JSON lines)
check() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
name, path = sys.argv[1:3]
txt = open(path).read()
try:
    d = json.loads(txt)
    steps, late = d["steps"], d["loss"]["late_records"]
except ValueError:
    steps, late = [json.loads(l) for l in txt.splitlines() if l.strip()], None
done = sorted((s for s in steps if not s["incomplete"]), key=lambda s: s["step"])
if len(done) < 1000:
    print("%d complete steps of 2400" % len(done)); sys.exit()
nums = [s["step"] for s in done]
gaps = [n for n in range(nums[0], nums[-1]) if n not in set(nums)]
zero = [s["step"] for s in done if s["duration_ns"] == 0]
# the trainer does not wait for the agent (its channel goes dormant when the
# heartbeat stops): 5 ms steps, and none as long as the stop unless two merged
long = [(s["step"], s["duration_ns"] / 1e9) for s in done if s["duration_ns"] > 2e9]
why = []
if late:
    why.append("%d records came too late for the window" % late)
if gaps:
    why.append("%d steps missing between %d and %d: %s" % (len(gaps), nums[0], nums[-1], gaps[:5]))
if zero:
    why.append("%d steps of zero length: %s" % (len(zero), zero[:5]))
if long:
    why.append("steps longer than 2 s: %s" % long[:3])
print("; ".join(why) if why else "OK %d complete steps (%d..%d)" % (len(done), nums[0], nums[-1]))
EOF
}

if run_stalled record "$STEPBLAME" record -o "$tmp/t.sbt"; then
	if ! "$STEPBLAME" report --format json "$tmp/t.sbt" >"$tmp/t.json" 2>"$tmp/rep.err"; then
		fail ${T}_record "report failed: $(head -2 "$tmp/rep.err" | tr '\n' ' ')"
	else
		out=$(check record "$tmp/t.json" 2>&1)
		if [[ "$out" == OK* ]]; then pass ${T}_record; echo "    (${out#OK })"; else fail ${T}_record "$out"; fi
	fi
fi

if run_stalled attach "$STEPBLAME" attach --jsonl "$tmp/a.jsonl"; then
	out=$(check attach "$tmp/a.jsonl" 2>&1)
	# the report at the end counts the late records
	late=$(grep -o "[0-9,]* arrived too late" "$tmp/attach.out")
	[ -n "$late" ] && out="$late; ${out#OK*}"
	if [[ "$out" == OK* ]]; then pass ${T}_attach; echo "    (${out#OK })"; else fail ${T}_attach "$out"; fi
fi

# Stack copies while the agent is stopped (x86-64): tests/progs/sbcfi sleeps 20 ms in a
# loop, a copy at each sleep. With a 1 MiB ring the backlog passes its eighth (128 KiB,
# ten copies) within a second of the stop; the probes then take no copy (docs/ARCHITECTURE.md,
# "Stack copies"), and the capture's note says how many they did not take.
prog="$PWD/${BUILD:-build}/tests/progs/sbcfi"
if [ "$(uname -m)" != x86_64 ]; then
	skip ${T}_copies "stack copies are x86-64 only"
elif [ ! -x "$prog" ]; then
	skip ${T}_copies "no $prog (make test-bin)"
else
	"$prog" 60 >"$tmp/cfi.out" 2>&1 &
	sim=$!
	"$STEPBLAME" record -p $sim -d 8 --ring-mb 1 -o "$tmp/c.sbt" >"$tmp/c.out" 2>"$tmp/c.err" &
	agent=$!
	if ! wait_attached "$tmp/c.err" 15 $agent; then
		fail ${T}_copies "the capture did not start: $(tail -2 "$tmp/c.err" | tr '\n' ' ')"
	else
		sleep 1
		kill -STOP $agent
		sleep 3
		kill -CONT $agent
		wait $agent; rc=$?
		agent=
		n=$(sed -n 's/.*user stacks: \([0-9]*\) stack copies were not taken while the ring was backed up.*/\1/p' "$tmp/c.err" | head -1)
		if [ $rc != 0 ]; then
			fail ${T}_copies "the agent exited $rc: $(tail -2 "$tmp/c.err" | tr '\n' ' ')"
		elif [ -z "$n" ] || [ "$n" -lt 1 ]; then
			fail ${T}_copies "no note of the copies not taken: $(grep -m2 'user stacks' "$tmp/c.err" | tr '\n' ' ')"
		else
			pass ${T}_copies
			echo "    ($n stack copies not taken while stopped 3 s)"
		fi
	fi
	kill -9 $sim 2>/dev/null; wait $sim 2>/dev/null; sim=
fi
