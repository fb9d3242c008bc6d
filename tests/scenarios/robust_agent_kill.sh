#!/usr/bin/env bash
# The agent killed with SIGKILL in the middle of a capture of simtrainer:
#  - the trainer runs on to the end of its steps and exits 0;
#  - every BPF program, link and map the agent held is gone (they lived only as
#    long as its file descriptors; checked by id, so other captures running on
#    the machine do not matter);
#  - the GPU channel producer goes dormant: once the heartbeat is older than its
#    timeout (2 s) the trainer writes nothing more into the channel;
#  - the partial trace FILE.partial.XXXXXX is readable by dump and report up to
#    its last whole record, and both say it was cut short.
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_agent_kill

need_bpf $T || exit 0
need_sim $T || exit 0
command -v bpftool >/dev/null || { skip $T "no bpftool"; exit 0; }

tmp=$(mktemp -d)
sim= agent=
cleanup() {
	[ -n "$agent" ] && kill -9 $agent 2>/dev/null
	[ -n "$sim" ] && kill -9 $sim 2>/dev/null && rm -f /dev/shm/stepblame-$sim-*.chan
	rm -rf "$tmp"
}
trap cleanup EXIT
u64_at() { od -An -tu8 -j"$2" -N8 "$1" 2>/dev/null | tr -d ' '; } # file offset

# at least 5000 x 4 x 400 us = 8 s of steps from the enable on: it outlives the checks below
"$SIMTRAINER" --steps 5000 --kernels 4 --kernel-us 400 --wait-agent 20 --quiet >"$tmp/sim.out" 2>&1 &
sim=$!
chan=
"$STEPBLAME" record -p $sim -d 60 -o "$tmp/t.sbt" >"$tmp/rec.out" 2>&1 &
agent=$!
# attached: the probes are loaded and the agent has turned the channel on
if ! wait_attached "$tmp/rec.out" 10 $agent; then
	fail $T "the capture did not start: $(tail -2 "$tmp/rec.out" | tr '\n' ' ')"; exit 0
fi
# the channel's name has a random part (schemas/channel.md)
chan=$(ls /dev/shm/stepblame-$sim-*.chan 2>/dev/null | head -1)
sleep 1
# what the agent holds, from its fd table
progs=$(cat /proc/$agent/fdinfo/* 2>/dev/null | sed -n 's/^prog_id:[[:space:]]*//p' | sort -u)
links=$(cat /proc/$agent/fdinfo/* 2>/dev/null | sed -n 's/^link_id:[[:space:]]*//p' | sort -u)
maps=$(cat /proc/$agent/fdinfo/* 2>/dev/null | sed -n 's/^map_id:[[:space:]]*//p' | sort -u)
nprogs=$(echo "$progs" | grep -c .)
ids() { bpftool "$1" show 2>/dev/null | sed -n 's/^\([0-9][0-9]*\): .*/\1/p'; }
# the same listing sees them while the agent lives (else the check below proves nothing)
alive=" $(ids prog | tr '\n' ' ') " seen=0
for id in $progs; do [[ "$alive" == *" $id "* ]] && seen=$((seen + 1)); done
w_before=$(u64_at "$chan" 192)
kill -9 $agent
wait $agent 2>/dev/null
agent=
t_kill=$(date +%s.%N)

# 1. every BPF object of the agent is freed
sleep 0.5
left=""
now_progs=" $(ids prog | tr '\n' ' ') " now_links=" $(ids link | tr '\n' ' ') " now_maps=" $(ids map | tr '\n' ' ') "
for id in $progs; do [[ "$now_progs" == *" $id "* ]] && left="$left prog:$id"; done
for id in $links; do [[ "$now_links" == *" $id "* ]] && left="$left link:$id"; done
for id in $maps; do [[ "$now_maps" == *" $id "* ]] && left="$left map:$id"; done
if [ "$nprogs" -lt 10 ] || [ "$seen" != "$nprogs" ]; then
	fail ${T}_detached "$nprogs BPF programs in the agent's fd table, $seen of them listed by bpftool"
elif [ -n "$left" ]; then
	fail ${T}_detached "still loaded after the agent died:$left"
else
	pass ${T}_detached
fi

# 2. the producer goes dormant once the heartbeat is stale (SBC_HEARTBEAT_TIMEOUT_NS = 2 s)
hb1=$(u64_at "$chan" 136)
sleep 2.5
w1=$(u64_at "$chan" 192); hb2=$(u64_at "$chan" 136)
sleep 1
w2=$(u64_at "$chan" 192)
ctl=$(od -An -tu4 -j128 -N4 "$chan" 2>/dev/null | tr -d ' ')
if [ -z "$w1" ] || [ -z "$w2" ]; then
	fail ${T}_dormant "the channel $chan vanished: did the trainer stop early?"
elif [ "$w1" != "$w2" ]; then
	fail ${T}_dormant "the trainer still writes into its channel 3.5 s after the agent died ($w1 -> $w2 records)"
elif [ "${w_before:-0}" -ge "$w1" ]; then
	fail ${T}_dormant "no records were written while the agent read ($w_before then $w1)"
elif [ "$hb1" != "$hb2" ]; then
	fail ${T}_dormant "the heartbeat moved after the agent died"
else
	pass ${T}_dormant
	echo "    (channel on=$ctl, heartbeat frozen, $w1 records written in all)"
fi

# 3. the trainer runs to the end of its steps
for _ in $(seq 300); do kill -0 $sim 2>/dev/null || break; sleep 0.1; done
if kill -0 $sim 2>/dev/null; then
	fail ${T}_trainer "simtrainer still running 30 s after the agent died"
else
	wait $sim; rc=$?; sim=
	if [ $rc = 0 ]; then pass ${T}_trainer; else fail ${T}_trainer "simtrainer exited $rc: $(tail -2 "$tmp/sim.out" | tr '\n' ' ')"; fi
fi
[ -e "$chan" ] && fail ${T}_chan_removed "the trainer left $chan behind at exit"

# 4. the partial trace
partial=$(ls "$tmp"/t.sbt.partial.* 2>/dev/null | head -1)
if [ -z "$partial" ] || [ -e "$tmp/t.sbt" ]; then
	fail ${T}_partial "want only t.sbt.partial.XXXXXX, found: $(ls "$tmp" | tr '\n' ' ')"; exit 0
fi
"$STEPBLAME" dump "$partial" >"$tmp/dump.out" 2>"$tmp/dump.err"; drc=$?
n=$(grep -c . "$tmp/dump.out")
if [ $drc != 0 ] || ! grep -q "cut short" "$tmp/dump.err" || [ "$n" -lt 1000 ]; then
	fail ${T}_partial_dump "dump exit $drc, $n lines, stderr: $(head -2 "$tmp/dump.err" | tr '\n' ' ')"
else
	pass ${T}_partial_dump
fi
"$STEPBLAME" report "$partial" --format json >"$tmp/rep.json" 2>"$tmp/rep.err"; rrc=$?
if [ $rrc != 0 ] || ! grep -q '"cut_short": *true' "$tmp/rep.json" || ! grep -q '"complete": *false' "$tmp/rep.json" ||
	! grep -q '"step":' "$tmp/rep.json"; then
	fail ${T}_partial_report "report exit $rrc, $(head -1 "$tmp/rep.err"); cut_short/complete/steps not as expected"
else
	pass ${T}_partial_report
fi
exit 0
