#!/usr/bin/env bash
# The records a busy trainer's scheduler writes while the rest of the probes
# attach (the other families load, the mapped files are scanned for step
# marks and allocator functions) are read from the moment the scheduler probes
# are attached, not left to a ring that cannot hold them (docs/ARCHITECTURE.md,
# "Data flow"). simtrainer with a busy launch thread (tens of thousands of
# switches a second, every trip written: --fold 0, so that an attach of half a
# second writes several rings' worth) recorded with a 1 MiB ring: a ring that
# size holds at most 1 MiB / 48 bytes (the smallest record and the ring's
# header) of records, so a trace with more records dated before the capture
# began (its host record) than that read them while the probes attached.
set -u
. "$(dirname "$0")/../lib.sh"
T=attach_drain

need_bpf $T || exit 0
need_sim $T || exit 0
tmp=$(mktemp -d)
sim=
cleanup() { [ -n "$sim" ] && kill -9 $sim 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$SIMTRAINER" --steps 4000 --kernels 10 --kernel-us 100 --launch-us 200 --busy 60,60,57 \
	--quiet >"$tmp/sim.out" 2>&1 &
sim=$!
sleep 0.5
if ! "$STEPBLAME" record -p $sim -d 1 --ring-mb 1 --fold 0 -q -o "$tmp/t.sbt" 2>"$tmp/err" ||
   ! "$STEPBLAME" dump --jsonl "$tmp/t.sbt" >"$tmp/t.jsonl" 2>>"$tmp/err"; then
	fail $T "record or dump failed: $(head -2 "$tmp/err" | tr '\n' ' ')"
	exit 0
fi
python3 - "$tmp/t.jsonl" <<'EOF'
import json, sys

recs = [json.loads(l) for l in open(sys.argv[1])]
host = next(r["ts"] for r in recs if r.get("type") == "host")
kernel = ("switch_in", "switch_out", "wakeup", "sched_run", "runslice", "fault_run", "fault",
          "mmsys", "stack", "step", "migrate", "alloc", "alloc_burst")
early = [r for r in recs if r.get("type") in kernel and r["ts"] < host]
held = (1 << 20) // 48
span = (host - min(r["ts"] for r in early)) / 1e9 if early else 0
if len(early) > held:
    print("PASS attach_drain (%d kernel records in the %.2f s before the capture began; "
          "a 1 MiB ring holds at most %d)" % (len(early), span, held))
else:
    print("FAIL attach_drain: %d kernel records dated before the capture began (over %.2f s), "
          "no more than a 1 MiB ring holds (%d): were they read while the probes attached?"
          % (len(early), span, held))
EOF
