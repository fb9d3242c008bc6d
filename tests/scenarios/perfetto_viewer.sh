#!/usr/bin/env bash
# The Perfetto output read by a real Trace Event Format consumer. simtrainer
# (its simulated GPU on the channel) is recorded with a hog pinned to its
# launcher's CPU in steps 20-27; `stepblame report --format perfetto` of the
# trace is parsed by the trace engine of Chromium's DevTools (headless,
# tests/scenarios/perfetto_check.py) and checked against the JSON report of the
# same trace: it parses as a generic trace with no console error; every track
# is named (each GPU device and stream by its number); the steps track holds
# every step; each launch is tied by a flow to its GPU operation; the counters
# give each step's GPU busy share and tracer cost; the hog is on the track of
# the CPU it took, whose slices never overlap; the metadata says whose trace
# it is. The .json.gz output is the same document, compressed.
set -u
. "$(dirname "$0")/../lib.sh"
T=perfetto_viewer

need_bpf $T || exit 0
need_sim $T || exit 0
need_chromium $T || exit 0

tmp=$(mktemp -d /var/tmp/perfetto_viewer.XXXXXX)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$SIMTRAINER" --steps 60 --kernels 6 --kernel-us 500 --wait-agent 30 --start-delay-ms 200 \
	--quiet --inject hog@20-27:-10 >"$tmp/sim.out" 2>&1 &
sim=$!
"$STEPBLAME" record -p "$sim" -d 60 -o "$tmp/run.sbt" >"$tmp/record.out" 2>&1
rc=$?
wait "$sim"; simrc=$?; sim=
if [ $rc != 0 ] || [ $simrc != 0 ] || [ ! -s "$tmp/run.sbt" ]; then
	fail $T "record exited $rc, simtrainer $simrc: $(tail -2 "$tmp/record.out" | tr '\n' ' ')"
	exit 0
fi
if ! "$STEPBLAME" report "$tmp/run.sbt" --format perfetto -o "$tmp/run.json" 2>"$tmp/err" ||
   ! "$STEPBLAME" report "$tmp/run.sbt" -o "$tmp/run.perfetto.json.gz" 2>>"$tmp/err" ||
   ! "$STEPBLAME" report "$tmp/run.sbt" --format json -o "$tmp/report.json" 2>>"$tmp/err"; then
	fail $T "report: $(head -2 "$tmp/err" | tr '\n' ' ')"; exit 0
fi
if gzip -dc "$tmp/run.perfetto.json.gz" | cmp -s - "$tmp/run.json"; then
	pass ${T}_gzip
else
	fail ${T}_gzip "the .json.gz output does not decompress to the --format perfetto document"
fi
python3 "$(dirname "$0")/perfetto_check.py" "$tmp/run.json" "$tmp/report.json" noisy-neighbor
exit 0
