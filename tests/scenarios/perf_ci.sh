#!/usr/bin/env bash
# Performance in CI: a short, fixed benchmark of stepblame's observer
# effect. simtrainer's default scenario runs untraced (A) and traced by
# `stepblame record` (B, default probes) in interleaved pairs A B, B A, ...; the
# step times come from simtrainer's own step markers, read from its GPU channel
# by bench/stepclock.c in both runs (so stepblame runs with --no-gpu: the channel
# has one reader). Prints each pair's P50 and P99 and the medians of the
# traced/untraced ratios; fails only on a gross regression:
#   P50: median ratio above 1 + 3 x the 1% budget    -> > 1.03
#   P99: median ratio above 1 + PERF_CI_P99_GATE      (default 0.20; see below)
# and on any dropped event (this workload makes ~10k events/s; a drop there is a bug).
# Pinning: the launcher alone on the last CPU, simtrainer's other threads, the
# agent and the step reader on CPU 0 (on 2 vCPUs an unpinned trainer's helper
# threads land on the launcher's CPU differently under any tracer: see
# bench/RESULTS.md, "Observer effect").
# Why P99 gets a wider gate than 3 x 2%: with 250 steps P99 is the 3rd-longest
# step, and on a shared 2-vCPU VM one preemption of the launcher by another
# process moves it by 10-50%. Run with PERF_CI_AA=1 (both sides untraced) on
# the project's VM, the median of 4 P99 ratios came out 1.082, 0.944 and 0.959
# (bench/RESULTS.md, section 5): a 6% gate failed one of three runs with no
# tracer at all. 20% is still well under what a real regression in the probes
# does (the allocator probes on an allocating step: x2.4-4).
#   PERF_CI_PAIRS (4), PERF_CI_STEPS (250), PERF_CI_P50_GATE (0.03), PERF_CI_P99_GATE (0.20)
#   PERF_CI_AA=1: the "traced" runs are untraced too: the noise control behind the gates
set -u
. "$(dirname "$0")/../lib.sh"
T=perf_ci

need_bpf $T || exit 0
need_sim $T || exit 0
ncpu=$(nproc)
if [ "$ncpu" -lt 2 ]; then skip $T "needs 2 CPUs (launcher alone on one); this machine has $ncpu"; exit 0; fi
for c in cc taskset; do
	command -v $c >/dev/null || { skip $T "needs $c"; exit 0; }
done

PAIRS=${PERF_CI_PAIRS:-4} STEPS=${PERF_CI_STEPS:-250}
G50=${PERF_CI_P50_GATE:-0.03} G99=${PERF_CI_P99_GATE:-0.20}
AG=0 LC=$((ncpu - 1))
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/perf_ci.XXXXXX)
sim= rec=
cleanup() {
	[ -n "$rec" ] && kill -INT "$rec" 2>/dev/null
	[ -n "$sim" ] && kill -9 "$sim" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# the step reader, never sanitized (an ASan build's channel.o would need libasan)
if ! cc -O2 -std=gnu11 -D_GNU_SOURCE -I"$root" -I"$root/user" "$root/bench/stepclock.c" \
	"$root/user/format/channel.c" -lpthread -o "$tmp/stepclock" 2>"$tmp/cc.err"; then
	fail $T "cannot build bench/stepclock.c: $(head -1 "$tmp/cc.err")"; exit 0
fi

# run_one traced(0|1): "p50_ns p99_ns drops" into $tmp/res, or returns 1 with $why set
run_one() {
	local traced=$1 i
	why=
	rm -f "$tmp/steps" "$tmp/t.sbt" "$tmp/rec.log"
	taskset -c $AG "$SIMTRAINER" --steps "$STEPS" --launcher-cpu $LC --wait-agent 30 \
		--start-delay-ms 300 --quiet >"$tmp/sim.log" 2>&1 &
	sim=$!
	for i in $(seq 200); do compgen -G "/dev/shm/stepblame-$sim-*.chan" >/dev/null && break; sleep 0.05; done
	if [ "$traced" = 1 ] && [ "${PERF_CI_AA:-0}" != 1 ]; then
		"$STEPBLAME" record -p "$sim" -o "$tmp/t.sbt" --no-gpu --agent-cpu $AG >"$tmp/rec.log" 2>&1 &
		rec=$!
		for i in $(seq 300); do grep -q 'stepblame: attached' "$tmp/rec.log" && break; sleep 0.1; done
		if ! grep -q 'stepblame: attached' "$tmp/rec.log"; then
			why="record did not attach: $(tail -2 "$tmp/rec.log" | tr '\n' ' ')"; return 1
		fi
	fi
	if ! taskset -c $AG "$tmp/stepclock" -p "$sim" -o "$tmp/steps" >"$tmp/clock.out" 2>&1; then
		why="stepclock: $(tail -1 "$tmp/clock.out")"; return 1
	fi
	wait "$sim" || { why="simtrainer exited $?: $(tail -1 "$tmp/sim.log")"; sim=; return 1; }
	sim=
	local drops=0
	if [ "$traced" = 1 ] && [ "${PERF_CI_AA:-0}" != 1 ]; then
		wait "$rec" || { why="record exited $?: $(tail -2 "$tmp/rec.log" | tr '\n' ' ')"; rec=; return 1; }
		rec=
		drops=$("$STEPBLAME" dump "$tmp/t.sbt" | tail -1 | sed -n 's/.* drops_total=\([0-9]*\).*/\1/p')
		[ -n "$drops" ] || { why="no trailer in the trace"; return 1; }
	fi
	# steps 0-4 warm up; nearest-rank percentiles of the rest
	awk '$1 >= 5 { print $2 }' "$tmp/steps" | sort -n | awk -v d="$drops" >"$tmp/res" '
		{ v[NR] = $1 }
		END { if (NR < 20) exit 1
		      k50 = int(0.50 * NR + 0.999999); k99 = int(0.99 * NR + 0.999999)
		      print v[k50], v[k99], d }' || { why="too few steps: $(tail -1 "$tmp/clock.out")"; return 1; }
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

t0=$(date +%s)
: >"$tmp/pairs"
totdrops=0
for p in $(seq 0 $((PAIRS - 1))); do
	order="0 1"; [ $((p % 2)) = 1 ] && order="1 0"
	for side in $order; do
		if ! run_one $side; then
			fail $T "pair $p, $([ $side = 1 ] && echo traced || echo untraced) run: $why"; exit 0
		fi
		read -r "r${side}_50" "r${side}_99" "r${side}_d" <"$tmp/res"
	done
	a50=$r0_50 a99=$r0_99 b50=$r1_50 b99=$r1_99 d=$r1_d
	totdrops=$((totdrops + d))
	echo "$a50 $a99 $b50 $b99 $d" >>"$tmp/pairs"
	awk -v p=$p -v a50=$a50 -v a99=$a99 -v b50=$b50 -v b99=$b99 -v d=$d 'BEGIN {
		printf "perf_ci: pair %d  untraced P50 %.3f ms P99 %.3f ms | traced P50 %.3f ms P99 %.3f ms | ratios %.4f %.4f | drops %d\n",
		       p, a50 / 1e6, a99 / 1e6, b50 / 1e6, b99 / 1e6, b50 / a50, b99 / a99, d }'
done
m50=$(awk '{ print $3 / $1 }' "$tmp/pairs" | median)
m99=$(awk '{ print $4 / $2 }' "$tmp/pairs" | median)
echo "perf_ci: $PAIRS pairs of $STEPS steps in $(( $(date +%s) - t0 )) s; median traced/untraced ratio: P50 $m50, P99 $m99 (budget 1.01 / 1.02; gates $(awk -v g=$G50 'BEGIN{print 1+g}') / $(awk -v g=$G99 'BEGIN{print 1+g}'))"
if awk -v m=$m50 -v g=$G50 'BEGIN { exit !(m <= 1 + g) }'; then pass ${T}_p50
else fail ${T}_p50 "median P50 ratio $m50 is above 1 + $G50 (3 x the 1% budget)"; fi
if awk -v m=$m99 -v g=$G99 'BEGIN { exit !(m <= 1 + g) }'; then pass ${T}_p99
else fail ${T}_p99 "median P99 ratio $m99 is above 1 + $G99"; fi
if [ "$totdrops" = 0 ]; then pass ${T}_drops
else fail ${T}_drops "$totdrops events dropped at ~10k events/s"; fi
