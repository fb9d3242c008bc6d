#!/usr/bin/env bash
# The trainer killed with SIGKILL in the middle of a capture (in the middle of a
# step, almost surely: a step is ~2 ms of launches and waits): the capture ends
# by itself, cleanly (exit 0, a complete trace with its trailer saying the
# target exited), and the report marks the last step incomplete.
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_trainer_kill

need_bpf $T || exit 0
need_sim $T || exit 0

tmp=$(mktemp -d)
sim= agent=
chan=
# a trainer killed by a signal leaves its channel file behind (by design): ours goes
cleanup() {
	[ -n "$agent" ] && kill -9 $agent 2>/dev/null; [ -n "$sim" ] && kill -9 $sim 2>/dev/null
	[ -n "$chan" ] && rm -f "$chan"; rm -rf "$tmp"
}
trap cleanup EXIT

"$SIMTRAINER" --steps 100000 --kernels 4 --kernel-us 500 --wait-agent 20 --quiet >"$tmp/sim.out" 2>&1 &
sim=$!
"$STEPBLAME" record -p $sim -d 60 -o "$tmp/t.sbt" >"$tmp/rec.out" 2>&1 &
agent=$!
wait_attached "$tmp/rec.out" 10 $agent
chan=$(ls /dev/shm/stepblame-$sim-*.chan 2>/dev/null | head -1) # a random part in its name
sleep 1.5
t0=$(date +%s%N)
exec 3>&2 2>/dev/null # no "Killed" notice from bash
kill -9 $sim; wait $sim; sim=
exec 2>&3 3>&-
# the agent notices within a tick (100 ms) and drains what is left
for _ in $(seq 100); do kill -0 $agent 2>/dev/null || break; sleep 0.05; done
if kill -0 $agent 2>/dev/null; then
	fail $T "record still running 5 s after the trainer died"; exit 0
fi
wait $agent; rc=$?; agent=
took=$((($(date +%s%N) - t0) / 1000000))

if [ $rc != 0 ] || [ ! -s "$tmp/t.sbt" ] || ls "$tmp"/t.sbt.partial.* >/dev/null 2>&1; then
	fail ${T}_clean_end "record exited $rc ($(tail -1 "$tmp/rec.out")); files: $(ls "$tmp" | tr '\n' ' ')"; exit 0
fi
pass ${T}_clean_end
echo "    (record ended ${took} ms after the kill)"

"$STEPBLAME" dump "$tmp/t.sbt" --jsonl >"$tmp/dump.jsonl" 2>"$tmp/dump.err"; drc=$?
trailer=$(grep '"type":"trailer"' "$tmp/dump.jsonl")
if [ $drc != 0 ] || [ -s "$tmp/dump.err" ] || [ -z "$trailer" ]; then
	fail ${T}_trailer "dump exit $drc: $(head -1 "$tmp/dump.err"); trailer: ${trailer:-none}"
elif ! echo "$trailer" | grep -q '"end_reason":"target_exit"\|"end_reason":3\b'; then
	fail ${T}_trailer "trailer does not say the target exited: $trailer"
elif ! grep -q 'exited during the capture' "$tmp/dump.jsonl"; then
	fail ${T}_trailer "no note that the target exited"
else
	pass ${T}_trailer
fi

"$STEPBLAME" report "$tmp/t.sbt" --format jsonl >"$tmp/steps.jsonl" 2>"$tmp/rep.err"; rrc=$?
n=$(grep -c '"step"' "$tmp/steps.jsonl")
last=$(tail -1 "$tmp/steps.jsonl")
# the first step may be incomplete too: the capture began inside it
inc=$(sed '1d;$d' "$tmp/steps.jsonl" | grep -c '"incomplete":true')
if [ $rrc != 0 ] || [ "$n" -lt 50 ]; then
	fail ${T}_last_step "report exit $rrc, $n steps: $(head -1 "$tmp/rep.err")"
elif ! echo "$last" | grep -q '"incomplete":true'; then
	fail ${T}_last_step "the last step is not marked incomplete: $(echo "$last" | cut -c1-200)"
elif [ "$inc" != 0 ]; then
	fail ${T}_last_step "$inc steps between the first and the last marked incomplete"
else
	pass ${T}_last_step
fi
"$STEPBLAME" report "$tmp/t.sbt" --format json >"$tmp/rep.json" 2>/dev/null
if grep -q '"end_reason": *"target_exit"' "$tmp/rep.json" && grep -q '"complete": *true' "$tmp/rep.json"; then
	pass ${T}_report_capture
else
	fail ${T}_report_capture "report's capture section: $(grep -A6 '"capture"' "$tmp/rep.json" | tr -d '\n ' | cut -c1-200)"
fi
exit 0
