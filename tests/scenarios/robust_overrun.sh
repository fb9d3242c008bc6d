#!/usr/bin/env bash
# Overrun of both paths into the agent under an event storm: a 1 MiB ring
# buffer and a 1024-slot GPU channel, with the agent stopped (SIGSTOP) for 1.5 s in the middle of a
# capture of simtrainer. Then:
#  - drops are counted per source: dump's last drops record has ring drops (by
#    event type) and GPU channel drops, the trailer's total matches, and the
#    report's loss section shows the same numbers;
#  - the agent keeps up once continued: records keep coming to the end of the
#    capture and the drop counters stop growing;
#  - the trainer never waits for the agent: its longest step (its own
#    measurement) stays far below the 1.5 s the agent was stopped.
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_overrun

need_bpf $T || exit 0
need_sim $T || exit 0

tmp=$(mktemp -d)
sim= agent=
cleanup() {
	[ -n "$agent" ] && kill -CONT $agent 2>/dev/null && kill -9 $agent 2>/dev/null
	[ -n "$sim" ] && kill -9 $sim 2>/dev/null && rm -f /dev/shm/stepblame-$sim-*.chan
	rm -rf "$tmp"
}
trap cleanup EXIT

# ~2-8 ms steps (4 kernels of 500 us, and 1 MiB of fresh memory touched every
# other step) and ~12 GPU records a step: a few hundred per 100 ms drain, inside
# 1024 slots. Back-to-back faults reach the ring as a few runs, so the storm is
# of switches: 20 round trips a step between the launcher and a peer thread
# (--busy), some 20k records a second, 1.5 MB/s. 1.5 s without a drain is
# thousands of GPU records and over a MiB of ring records
"$SIMTRAINER" --steps 100000 --kernels 4 --kernel-us 500 --channel-slots 1024 --wait-agent 20 \
	--inject faults/2:1 --busy 20,0,0 \
	>"$tmp/sim.out" 2>&1 &
sim=$!
"$STEPBLAME" record -p $sim -d 5 --ring-mb 1 -o "$tmp/t.sbt" >"$tmp/rec.out" 2>&1 &
agent=$!
wait_attached "$tmp/rec.out" 10 $agent
sleep 1
kill -STOP $agent
sleep 1.5
kill -CONT $agent
wait $agent; rc=$?; agent=
kill -TERM $sim # simtrainer prints its step-time summary and exits 128+15
wait $sim; simrc=$?; sim=

if [ $rc != 0 ] || [ ! -s "$tmp/t.sbt" ]; then
	fail $T "record exited $rc: $(tail -2 "$tmp/rec.out" | tr '\n' ' ')"; exit 0
fi
"$STEPBLAME" dump "$tmp/t.sbt" --jsonl >"$tmp/dump.jsonl" 2>"$tmp/dump.err" ||
	{ fail $T "dump failed: $(head -1 "$tmp/dump.err")"; exit 0; }

# per source, from the drops records (cumulative; one a second and one at the end)
awk -v T=$T '
function num(k,   i, s) {
	i = index($0, "\"" k "\":"); if (!i) return -1
	s = substr($0, i + length(k) + 3); match(s, /^-?[0-9]+/); return RSTART ? substr(s, 1, RLENGTH) + 0 : -1
}
function check(name, ok, why) { if (ok) print "PASS " T "_" name; else print "FAIL " T "_" name ": " why }
/"type":"drops"/ { nd++; ring[nd] = num("ring_total"); chan[nd] = num("gpu_channel"); dts[nd] = num("ts")
		   if (index($0, "\"switch_out\":")) sw = num("switch_out") }
/"type":"trailer"/ { total = num("drops_total"); end = num("ts") }
/"type":"(switch_in|switch_out|gpu)"/ { last = num("ts") }
/"type":"(switch_in|switch_out)"/ { sched[++ns] = num("ts") }
END {
	check("ring_counted", ring[nd] > 0 && sw > 0, "ring drops " ring[nd] ", of them switch_out " sw)
	check("channel_counted", chan[nd] > 0, "GPU channel drops " chan[nd])
	check("trailer_total", total >= ring[nd] + chan[nd] && total > 0,
	      "trailer drops_total " total " < ring " ring[nd] " + channel " chan[nd])
	# caught up: no drop in the last second (the snapshot before the last periodic
	# one, taken 1.5 s after SIGCONT, and the final one agree)
	check("keeps_up", nd >= 4 && ring[nd] == ring[nd - 2] && chan[nd] == chan[nd - 2],
	      "drops still growing at the end: ring " ring[nd - 2] " -> " ring[nd] ", channel " chan[nd - 2] " -> " chan[nd])
	late = 0; for (i = 1; i <= ns; i++) if (sched[i] > end - 1000000000) late++
	check("resumes", late > 100 && end - last < 200000000,
	      late " scheduler records in the last second, last record " (end - last) / 1e6 " ms before the end")
	printf "    (drops: ring %d, GPU channel %d, total %d)\n", ring[nd], chan[nd], total
}' "$tmp/dump.jsonl"

# the report shows the same loss, per source
"$STEPBLAME" report "$tmp/t.sbt" --format json >"$tmp/rep.json" 2>"$tmp/rep.err"
ring_total=$(grep '"type":"drops"' "$tmp/dump.jsonl" | tail -1 | sed -n 's/.*"ring_total":\([0-9]*\).*/\1/p')
chan_total=$(grep '"type":"drops"' "$tmp/dump.jsonl" | tail -1 | sed -n 's/.*"gpu_channel":\([0-9]*\).*/\1/p')
rep_chan=$(tr -d ' \n' <"$tmp/rep.json" | sed -n 's/.*"loss":{.*"gpu_channel":\([0-9]*\).*/\1/p')
rep_ring=$(tr -d ' \n' <"$tmp/rep.json" | sed -n 's/.*"loss":{[^}]*"ring":{\([^}]*\)}.*/\1/p' |
	tr ',' '\n' | awk -F: '{s += $2} END {print s + 0}')
if [ "$rep_chan" = "$chan_total" ] && [ "$rep_ring" = "$ring_total" ] && [ "${rep_ring:-0}" -gt 0 ]; then
	pass ${T}_report_loss
else
	fail ${T}_report_loss "report loss: ring ${rep_ring:-?} channel ${rep_chan:-?}; trace: ring $ring_total channel $chan_total"
fi

# the trainer did not wait for the stopped agent
line=$(grep -m1 "step time" "$tmp/sim.out")
max=$(echo "$line" | sed -n 's/.*max \([0-9.]*\).*/\1/p')
if [ $simrc != 143 ] || [ -z "$max" ]; then
	fail ${T}_trainer "simtrainer exited $simrc: $(tail -2 "$tmp/sim.out" | tr '\n' ' ')"
elif awk -v m="$max" 'BEGIN { exit !(m < 500) }'; then
	pass ${T}_trainer
	echo "    (trainer: $line)"
else
	fail ${T}_trainer "a step took $max ms while the agent was stopped for 1500 ms: $line"
fi
exit 0
