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

# A reader that goes away: `attach | head -3` ends the capture at once, the
# probes detached, exit 0, the reason said on stderr; it never traces on for
# the rest of -d. (The step lines come about a reorder window after the steps.)
"$SIMTRAINER" --steps 100000 --kernels 4 --kernel-us 300 --wait-agent 30 --quiet >"$tmp/sim.out" 2>&1 &
sim=$!
t0=$(date +%s%N)
timeout 120 "$STEPBLAME" attach -p "$sim" -d 60 2>"$tmp/pipe.err" | head -3 >"$tmp/pipe.out"
rcs=("${PIPESTATUS[@]}")
t1=$(date +%s%N)
kill -9 "$sim" 2>/dev/null; wait "$sim" 2>/dev/null; sim=
took=$(((t1 - t0) / 1000000))
lines=$(grep -c . "$tmp/pipe.out")
if [ "${rcs[0]}" != 0 ]; then
	fail ${T}_reader_gone "attach exited ${rcs[0]}: $(tail -2 "$tmp/pipe.err" | tr '\n' ' ')"
elif [ "$lines" != 3 ] || [ $took -gt 40000 ]; then
	fail ${T}_reader_gone "$lines lines to head, attach ran $took ms of its 60 s"
elif ! grep -q "detached after .* (standard output closed)" "$tmp/pipe.err"; then
	fail ${T}_reader_gone "stderr does not say standard output closed: $(tail -2 "$tmp/pipe.err" | tr '\n' ' ')"
else
	pass ${T}_reader_gone
	echo "    (3 lines to head, attach ended after $took ms of its 60 s)"
fi

# --jsonl -: the JSON lines alone on standard output (no file named "-"), one
# step object per line; the closing report on stderr
"$SIMTRAINER" --steps 300 --kernels 4 --kernel-us 300 --wait-agent 30 --quiet >"$tmp/sim.out" 2>&1 &
sim=$!
(cd "$tmp" && timeout 120 "$STEPBLAME" attach -q -p "$sim" --jsonl - >"$tmp/lines.out" 2>"$tmp/lines.err")
rc=$?
wait "$sim" 2>/dev/null; sim=
bad=$(python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    d = json.loads(l)
    assert "step" in d and "duration_ns" in d and "identity" in d, l[:80]
    n += 1
print(n)' "$tmp/lines.out" 2>&1)
if [ $rc != 0 ]; then
	fail ${T}_json_stdout "attach exited $rc: $(tail -2 "$tmp/lines.err" | tr '\n' ' ')"
elif [ -e "$tmp/-" ]; then
	fail ${T}_json_stdout "wrote a file named '-'"
elif ! [ "$bad" -ge 200 ] 2>/dev/null; then
	fail ${T}_json_stdout "standard output is not the step lines: $bad"
elif ! grep -q '^Capture     complete (ended by target_exit)' "$tmp/lines.err"; then
	fail ${T}_json_stdout "no closing report on stderr: $(tail -2 "$tmp/lines.err" | tr '\n' ' ')"
else
	pass ${T}_json_stdout
fi

# --tail-only: every step line printed is a tail step's, and a hog makes some
"$SIMTRAINER" --steps 400 --kernels 4 --kernel-us 300 --wait-agent 30 --quiet \
	--inject hog@100-130:-10 --inject stall@200-210:20 >"$tmp/sim.out" 2>&1 &
sim=$!
timeout 120 "$STEPBLAME" attach -q -p "$sim" --tail-only --json "$tmp/all.jsonl" --html "$tmp/live.html" \
	>"$tmp/tail.out" 2>"$tmp/tail.err"
rc=$?
wait "$sim" 2>/dev/null; sim=
steps=$(sed -n '/^$/q;p' "$tmp/tail.out" | grep -c '^step ')
tails=$(sed -n '/^$/q;p' "$tmp/tail.out" | grep '^step ' | grep -c '\[tail\]$')
all=$(grep -c . "$tmp/all.jsonl")
if [ $rc != 0 ]; then
	fail ${T}_tail_only "attach exited $rc: $(tail -2 "$tmp/tail.err" | tr '\n' ' ')"
elif [ "$steps" = 0 ] || [ "$steps" != "$tails" ] || [ "$all" -lt 300 ]; then
	fail ${T}_tail_only "$steps step lines, $tails of them tail steps; $all JSON lines"
else
	pass ${T}_tail_only
	echo "    ($steps tail step lines of $all steps)"
fi

# --html: the page written at the end holds every step the JSON lines had, and the
# hog's steps among its tail steps
if [ $rc = 0 ]; then
	got=$(python3 -c '
import base64, gzip, json, re, sys
m = re.search(r"data-encoding=.gzip.base64.>([A-Za-z0-9+/=]*)</script>", open(sys.argv[1]).read())
d = json.loads(gzip.decompress(base64.b64decode(m.group(1))))
first = d.get("step_first")
num = [first + i for i in range(len(d["dur"]))] if first is not None else d["step"]
lines = [json.loads(l)["step"] for l in open(sys.argv[2])]
hog = [num[i] for i in d["tail"] if 100 <= num[i] <= 130]
print("OK" if set(lines) <= set(num) and hog else "page steps %d (JSON lines %d), hog tail steps %s" % (len(num), len(lines), hog))
' "$tmp/live.html" "$tmp/all.jsonl" 2>&1 | tail -1)
	if [ "$got" = OK ]; then pass ${T}_html; else fail ${T}_html "$got"; fi
fi
