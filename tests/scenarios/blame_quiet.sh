#!/usr/bin/env bash
# No injection: the report must not invent blame. At most 5% of the steps may
# carry blame above the noise threshold (3 MAD of the step time) that no other
# task on the machine explains, and every interferer it names must have run
# during the capture (it is in the trace's runslices). The same trace reported
# twice gives the same bytes.
set -u
. "$(dirname "$0")/../lib.sh"
T=blame_quiet

need_bpf $T || exit 0
need_sim $T || exit 0
if ! command -v python3 >/dev/null; then skip $T "python3 is not installed"; exit 0; fi

tmp=$(mktemp -d /var/tmp/blame_quiet.XXXXXX)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$SIMTRAINER" --steps 150 --kernels 8 --kernel-us 500 --wait-agent 30 --start-delay-ms 200 \
	--quiet >"$tmp/sim.out" 2>&1 &
sim=$!
"$STEPBLAME" record -p "$sim" -d 90 -o "$tmp/trace.sbt" >"$tmp/record.out" 2>&1
rc=$?
wait "$sim"; simrc=$?; sim=
if [ $rc != 0 ] || [ $simrc != 0 ] || [ ! -s "$tmp/trace.sbt" ]; then
	fail $T "record exited $rc, simtrainer $simrc: $(tail -2 "$tmp/record.out" | tr '\n' ' ')"; exit 0
fi
"$STEPBLAME" report "$tmp/trace.sbt" --format json -o "$tmp/r1.json" &&
	"$STEPBLAME" report "$tmp/trace.sbt" --format json -o "$tmp/r2.json" &&
	"$STEPBLAME" dump "$tmp/trace.sbt" --jsonl >"$tmp/dump.jsonl" 2>/dev/null
if [ $? != 0 ]; then fail $T "report or dump failed"; exit 0; fi
if cmp -s "$tmp/r1.json" "$tmp/r2.json"; then pass ${T}_same_bytes; else fail ${T}_same_bytes "reports differ"; fi
python3 "$(dirname "$0")/blame_check.py" quiet $T "$tmp/r1.json" "$tmp/dump.jsonl"
