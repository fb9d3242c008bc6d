#!/usr/bin/env bash
# A trainer that loads the marker library after the attach (a Python script that
# imports stepblame, or calls ctypes.CDLL, once it is set up) has its marks seen
# from soon after the load: the target's mapping of code makes the agent read its
# mappings at the next tick (docs/ARCHITECTURE.md, "Step marks"), not at the next
# second's pass. A python3 process waits for "go", sent as record says attached,
# loads libstepblame.so at once and marks 160 steps 5 ms apart (0.8 s), then
# sleeps 1.5 s. The trace must hold at least 60% of them: the second's pass alone,
# a second after the attach, finds the library after the last mark.
set -u
. "$(dirname "$0")/../lib.sh"
T=marks_late_lib

need_bpf $T || exit 0
need_sim $T || exit 0
need_cmd $T python3 python3 || exit 0

lib=$PWD/${BUILD:-build}/libstepblame.so
if [ -x "${PLAIN_SIMTRAINER:-}" ] && [ -f "$(dirname "$PLAIN_SIMTRAINER")/libstepblame.so" ]; then
	lib=$(dirname "$PLAIN_SIMTRAINER")/libstepblame.so
fi
[ -f "$lib" ] || { fail $T "no $lib (make all)"; exit 0; }
tmp=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

cat >"$tmp/late.py" <<'EOF'
import ctypes, sys, time
sys.stdin.readline()
lib = ctypes.CDLL(sys.argv[1])
lib.stepblame_step.argtypes = [ctypes.c_ulonglong]
t0 = time.monotonic()
for i in range(160):
    lib.stepblame_step(5000 + i)
    time.sleep(max(0.0, t0 + (i + 1) * 0.005 - time.monotonic()))
print("marks=160 in %.0f ms" % ((time.monotonic() - t0) * 1000))
sys.stdout.flush()
time.sleep(1.5)
EOF
record_gated $T late "" python3 "$tmp/late.py" "$lib" || exit 0
"$STEPBLAME" dump -f jsonl "$tmp/late.sbt" >"$tmp/dump.jsonl" 2>"$tmp/dump.err" ||
	{ fail $T "dump: $(head -2 "$tmp/dump.err")"; exit 0; }
python3 - "$tmp/dump.jsonl" "$tmp/late.prog" <<'EOF'
import json, sys
T = "marks_late_lib"
steps = sorted(r["step"] for r in map(json.loads, open(sys.argv[1]))
               if r.get("type") == "step" and 5000 <= r.get("step", -1) < 5160)
said = open(sys.argv[2]).read().strip()
if len(steps) < 96:
    print("FAIL %s: %d of the 160 marks in the trace (%s), the first step %s"
          % (T, len(steps), said, steps[0] if steps else "none"))
else:
    print("PASS %s (%d of 160 marks; the first seen: step %d, %d ms after the load; %s)"
          % (T, len(steps), steps[0], (steps[0] - 5000) * 5, said))
EOF
