#!/usr/bin/env bash
# A trainer whose main thread exits while a worker thread trains on (a zombie
# leader with a live thread) is still running: run traces it to its real end,
# every step and the 40 ms sleep in step 25 included (the build before took it
# for an exited process: 14 of 61 steps, no tail). record -p after the main
# thread is gone is refused with the reason (the mappings are read through it).
set -u
. "$(dirname "$0")/../lib.sh"
T=leader_exit

need_bpf $T || exit 0
prog="$PWD/$BUILD/tests/progs/sbleaderexit"
[ -x "$prog" ] || { fail $T "$prog not built"; exit 0; }
if ! command -v python3 >/dev/null; then skip $T "python3 is not installed"; exit 0; fi
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

check() { # name trace
	"$STEPBLAME" report "$2" -f json -o "$tmp/$1.json" 2>"$tmp/$1.err" ||
		{ fail ${T}_$1 "report: $(head -1 "$tmp/$1.err")"; return; }
	python3 - "$tmp/$1.json" "${T}_$1" "$3" <<'EOF'
import json, sys
d, name, least = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
steps = {s["step"]: s for s in d["steps"] if not s.get("incomplete")}
s25 = steps.get(25, {})
slept = sum(b["ns"] for b in s25.get("blame", []) if b["cause"] == "blocked")
if len(steps) < least or slept < 35e6 or d["capture"]["end_reason"] != "target_exit":
    print("FAIL %s: %d steps (at least %d wanted), step 25 blocked %.1f ms, ended by %s"
          % (name, len(steps), least, slept / 1e6, d["capture"]["end_reason"]))
else:
    print("PASS %s (%d steps; step 25 blocked %.1f ms; ended by %s)"
          % (name, len(steps), slept / 1e6, d["capture"]["end_reason"]))
EOF
}

"$STEPBLAME" run -q -o "$tmp/run.sbt" -- "$prog" 60 >"$tmp/run.out" 2>&1 ||
	{ fail ${T}_run "run: $(tail -2 "$tmp/run.out" | tr '\n' ' ')"; exit 0; }
check run "$tmp/run.sbt" 58

# attached after the main thread exited: refused, saying why (its mappings are
# read through the main thread), not taken for an exited process
"$prog" 300 >/dev/null 2>&1 &
pid=$!
sleep 0.6
"$STEPBLAME" record -p $pid -d 20 -o "$tmp/rec.sbt" >"$tmp/rec.out" 2>&1
rc=$?
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; pid=
if [ $rc != 0 ] && grep -q "its main thread has exited while other threads run on" "$tmp/rec.out"; then
	pass ${T}_record_refused
else
	fail ${T}_record_refused "record -p exited $rc: $(tail -2 "$tmp/rec.out" | tr '\n' ' ')"
fi
