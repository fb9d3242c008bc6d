#!/usr/bin/env bash
# Who may see and switch on what, and what stepblame leaves on disk:
#  - the GPU channel is created 0600 by the trainer's user, whatever its umask;
#  - another user who is not root can neither read it nor turn collection on
#    (cannot open it; with CAP_BPF+CAP_PERFMON, is refused the target), while
#    root can; (the agent refusing a channel owned by someone else than the
#    target's user is tests/unit/test_channel.c: other_owner_refused)
#  - record, simtrainer and demo create nothing group- or world-writable, even
#    under umask 000;
#  - temporary files have unpredictable names (FILE.partial.XXXXXX,
#    truth.jsonl.partial.XXXXXX, stepblame-demo.XXXXXX) and a symlink at the
#    output name is replaced, never written through.
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_security

need_bpf $T || exit 0
need_sim $T || exit 0
if ! command -v setpriv >/dev/null || ! setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
	skip $T "no setpriv (util-linux) to run as other users"; exit 0
fi
TRAINER="setpriv --reuid=65534 --regid=65534 --clear-groups"  # the trainer's user
OTHER="setpriv --reuid=65533 --regid=65533 --clear-groups"    # someone else, not root
CAPS="--inh-caps +bpf,+perfmon --ambient-caps +bpf,+perfmon"

tmp=$(mktemp -d)
chmod 0711 "$tmp"
sim= agent=
cleanup() {
	exec 2>/dev/null
	[ -n "$agent" ] && kill -9 $agent
	[ -n "$sim" ] && kill -9 $sim && rm -f /dev/shm/stepblame-$sim-*.chan
	rm -rf "$tmp"
}
trap cleanup EXIT
home=$tmp/trainer
mkdir "$home" && chown 65534:65534 "$home"

# writable by group or others: the find expression for it
loose() { find "$@" \( -perm -0002 -o -perm -0020 \) ! -type l -printf '%M %u %p\n' 2>/dev/null; }

# the trainer, as its user, under umask 000
(umask 000; exec $TRAINER "$SIMTRAINER" --steps 100000 --kernels 4 --kernel-us 500 --wait-agent 30 \
	--truth "$home/truth.jsonl" --ckpt-dir "$home" --inject ckpt@3:1 --quiet) >"$tmp/sim.out" 2>&1 &
sim=$!
# the channel's name has a random part (schemas/channel.md)
chan=
for _ in $(seq 50); do chan=$(ls /dev/shm/stepblame-$sim-*.chan 2>/dev/null | head -1); [ -n "$chan" ] && break; sleep 0.1; done

# 1. the channel: 0600, the trainer's user
m=$(stat -c '%a %u %F' "$chan" 2>/dev/null)
if [ "$m" = "600 65534 regular file" ]; then pass ${T}_channel_mode; else fail ${T}_channel_mode "channel $chan: '${m:-missing}'"; fi

# 2. another user cannot read it or switch it on
if $OTHER dd if="$chan" of=/dev/null bs=512 count=1 2>/dev/null; then
	fail ${T}_other_cannot_read "uid 65533 read $chan"
elif $OTHER sh -c 'test -w "$1" || exec 3>>"$1"' sh "$chan" 2>/dev/null; then
	fail ${T}_other_cannot_read "uid 65533 can open $chan for writing"
else
	pass ${T}_other_cannot_read
fi
if $OTHER $CAPS true 2>/dev/null; then
	timeout 20 $OTHER $CAPS "$STEPBLAME" attach -p $sim -d 1 >/dev/null 2>"$tmp/other.err"; rc=$?
	if [ $rc != 0 ] && grep -q "not allowed: PID $sim belongs to uid 65534" "$tmp/other.err"; then
		pass ${T}_other_with_caps_refused
	else
		fail ${T}_other_with_caps_refused "exit $rc: $(head -1 "$tmp/other.err")"
	fi
else
	skip ${T}_other_with_caps_refused "setpriv cannot grant CAP_BPF/CAP_PERFMON here"
fi
ctl=$(od -An -tu4 -j128 -N4 "$chan" | tr -d ' ')
if [ "$ctl" = 0 ]; then pass ${T}_still_off; else fail ${T}_still_off "collection was turned on (control=$ctl) before root attached"; fi

# 3. root attaches and reads it; the output name is a symlink to a file that must survive
echo "precious" >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/t.sbt"
(umask 000; exec "$STEPBLAME" record -p $sim -d 2 -o "$tmp/t.sbt") >"$tmp/rec.out" 2>&1 &
agent=$!
partial=
for _ in $(seq 100); do
	partial=$(cd "$tmp" && ls -d t.sbt.partial.* 2>/dev/null | head -1)
	[ -n "$partial" ] && grep -q attached "$tmp/rec.out" && break
	sleep 0.1
done
tpartial=$(cd "$home" && ls -d truth.jsonl.partial.* 2>/dev/null | head -1)
wait $agent; rc=$?; agent=
if [ $rc = 0 ] && grep -q "GPU timeline: reading the simtrainer channel" "$tmp/rec.out"; then
	pass ${T}_root_reads_channel
else
	fail ${T}_root_reads_channel "record exit $rc: $(grep -m1 -i 'channel\|error' "$tmp/rec.out")"
fi
if [ "$(cat "$tmp/victim")" = precious ] && [ -f "$tmp/t.sbt" ] && [ ! -L "$tmp/t.sbt" ]; then
	pass ${T}_symlink_replaced
else
	fail ${T}_symlink_replaced "victim: '$(head -c 40 "$tmp/victim")'; t.sbt: $(stat -c %F "$tmp/t.sbt")"
fi

# 4. temporary names: random suffixes, never a fixed name
"$STEPBLAME" record -q -p $sim -d 1 -o "$tmp/u.sbt" >/dev/null 2>&1 &
agent=$!
partial2=
for _ in $(seq 100); do
	partial2=$(cd "$tmp" && ls -d u.sbt.partial.* 2>/dev/null | head -1)
	[ -n "$partial2" ] && break
	sleep 0.05
done
wait $agent; agent=
rnd='partial\.[A-Za-z0-9]{6}$'
if echo "$partial" | grep -qE "^t\.sbt\.$rnd" && echo "$partial2" | grep -qE "^u\.sbt\.$rnd" &&
	[ "${partial#t.sbt}" != "${partial2#u.sbt}" ]; then
	pass ${T}_trace_temp_name
else
	fail ${T}_trace_temp_name "temporary names '$partial' and '$partial2'"
fi
if echo "$tpartial" | grep -qE "^truth\.jsonl\.$rnd"; then
	pass ${T}_truth_temp_name
else
	fail ${T}_truth_temp_name "simtrainer's truth file while running: '${tpartial:-none}'"
fi

# 5. nothing group- or world-writable, under umask 000
kill -TERM $sim; wait $sim 2>/dev/null; sim=
[ -e "$chan" ] && fail ${T}_channel_removed "$chan left behind"
(umask 000; TMPDIR=$tmp/demo; mkdir -m 0755 "$TMPDIR"; export TMPDIR
	exec timeout 60 "$STEPBLAME" demo --scenario clean) >"$tmp/demo.out" 2>&1
drc=$?
demo=$(ls -d "$tmp"/demo/stepblame-demo.* 2>/dev/null)
if [ $drc != 0 ] || [ -z "$demo" ]; then
	fail ${T}_demo_dir "demo exit $drc: $(tail -1 "$tmp/demo.out")"
elif ! basename "$demo" | grep -qE '^stepblame-demo\.[A-Za-z0-9]{6}$' || [ "$(stat -c %a "$demo")" != 700 ]; then
	fail ${T}_demo_dir "demo directory $demo, mode $(stat -c %a "$demo")"
else
	pass ${T}_demo_dir
fi
bad=$(loose "$tmp/t.sbt" "$tmp/u.sbt" "$home" "$tmp/demo"/stepblame-demo.*)
n=$(find "$tmp/t.sbt" "$tmp/u.sbt" "$home" "$tmp/demo" -newer "$tmp/victim" 2>/dev/null | grep -c .)
if [ -n "$bad" ]; then
	fail ${T}_no_world_writable "$(echo "$bad" | tr '\n' ';')"
elif [ "$n" -lt 5 ]; then
	fail ${T}_no_world_writable "only $n files to look at: did the runs write anything?"
else
	pass ${T}_no_world_writable
	echo "    (modes: $(stat -c '%n %a' "$tmp/t.sbt" "$home"/truth.jsonl "$demo" "$demo"/* 2>/dev/null | sed "s|$tmp/||g" | tr '\n' ' '))"
fi
if ls "$tmp" "$home" | grep -q partial; then
	fail ${T}_no_partial_left "temporary files left: $(ls "$tmp" "$home" | grep partial | tr '\n' ' ')"
fi
exit 0
