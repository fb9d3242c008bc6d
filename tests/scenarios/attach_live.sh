#!/usr/bin/env bash
# attach keeps up: its step lines come while the trainer runs, soon after each
# step ends. simtrainer (host-only: attach --no-gpu) runs 400 steps of about
# 8 ms; tests/scenarios/attach_live.py reads `attach --jsonl -` and stamps
# each line as it arrives. Cases: a line for every complete step; most lines
# of the steps before the last half second came before the trainer exited;
# the median line came less than 1.5 s after its step ended (the engine's
# window for GPU batches is 3 s: host-only the lines do not wait for it, and
# the old window gave none before the trainer exited). The delays are the
# optimised build's: the plain stepblame where the sanitizer build is tested
# (ASan's agent drains several times slower).
# With the GPU timeline, each text line says how long the GPU's batches
# hold it. bench/RESULTS.md has the delays measured ("attach, live").
set -u
. "$(dirname "$0")/../lib.sh"
T=attach_live

need_bpf $T || exit 0
need_sim $T || exit 0

tmp=$(mktemp -d)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

plain=$STEPBLAME
if [ -n "${PLAIN_SIMTRAINER:-}" ] && [ -x "$(dirname "$PLAIN_SIMTRAINER")/stepblame" ]; then
	plain=$(dirname "$PLAIN_SIMTRAINER")/stepblame
fi
python3 "$(dirname "$0")/attach_live.py" "$plain" "$SIMTRAINER" "$tmp"

# with a GPU timeline: the lines wait for its batches, and say so
"$SIMTRAINER" --steps 300 --kernels 4 --kernel-us 300 --wait-agent 30 --quiet >"$tmp/sim.out" 2>&1 &
sim=$!
timeout 120 "$STEPBLAME" attach -q -p "$sim" >"$tmp/gpu.out" 2>"$tmp/gpu.err"
rc=$?
wait "$sim" 2>/dev/null; sim=
lines=$(grep -cE '^step [0-9]+: .*\(\+3\.0 s: GPU batches\)(  \[tail\])?$' "$tmp/gpu.out")
if [ $rc != 0 ]; then
	fail ${T}_gpu_note "attach exited $rc: $(tail -2 "$tmp/gpu.err" | tr '\n' ' ')"
elif ! grep -q '^GPU timeline: step lines now come 3\.0 s after the step ends' "$tmp/gpu.out" ||
     [ "$lines" -lt 250 ]; then
	fail ${T}_gpu_note "$lines step lines say the GPU delay; $(grep -c '^step ' "$tmp/gpu.out") step lines; $(grep -m1 '^GPU timeline' "$tmp/gpu.out" || echo 'no GPU timeline line')"
else
	pass ${T}_gpu_note
fi
exit 0
