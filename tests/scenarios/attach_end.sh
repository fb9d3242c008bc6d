#!/usr/bin/env bash
# How a live capture ended, as attach's closing report says it: a trainer that
# exits and a duration that runs out are a complete capture, ended by
# target_exit and by duration, as a trace file's trailer would say; never
# "CUT SHORT", which is for captures that lost their end.
set -u
. "$(dirname "$0")/../lib.sh"
T=attach_end

need_bpf $T || exit 0
need_sim $T || exit 0

tmp=$(mktemp -d)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# case, simtrainer steps, attach's own arguments, the end the report must name
check() {
	local name=$1 steps=$2 want=$3; shift 3
	"$SIMTRAINER" --steps "$steps" --kernels 4 --kernel-us 300 --wait-agent 30 --quiet \
		>"$tmp/sim.out" 2>&1 &
	sim=$!
	timeout 120 "$STEPBLAME" attach -q -p "$sim" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	local rc=$?
	kill -9 "$sim" 2>/dev/null; wait "$sim" 2>/dev/null; sim=
	local line
	line=$(grep '^Capture ' "$tmp/$name.out")
	if [ $rc != 0 ]; then
		fail ${T}_$name "attach exited $rc: $(tail -2 "$tmp/$name.err" | tr '\n' ' ')"
	elif [ "$line" != "Capture     complete (ended by $want)" ]; then
		fail ${T}_$name "the report says '${line:-no Capture line}', not ended by $want"
	else
		pass ${T}_$name
	fi
}

check target_exit 150 target_exit
check duration 100000 duration -d 1
