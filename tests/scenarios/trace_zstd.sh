#!/usr/bin/env bash
# zstd-compressed traces (schemas/trace.md, "Compressed traces"), checked with
# the zstd command-line tool as the outside reader:
#  - record -z names the file stepblame-PID.sbtrace.zst, the file is zstd frames
#    that `zstd -t` verifies, several times smaller than the records in it,
#    and it decompresses to a trace that dumps and reports exactly as the
#    compressed file does; `report -` reads it from a pipe;
#  - -o NAME.zst compresses without -z; --compress-level compresses any name;
#    a plain trace compressed by the zstd tool (one frame, level 19) reads;
#  - a recorder killed with SIGKILL mid-capture leaves a compressed partial
#    file that reads as cut short, with the records of its whole frames;
#  - watch -z writes its snippets as .sbtrace.zst; attach refuses -z.
set -u
. "$(dirname "$0")/../lib.sh"
T=trace_zstd

need_bpf $T || exit 0
need_sim $T || exit 0
need_cmd $T zstd zstd || exit 0

tmp=$(mktemp -d /var/tmp/trace_zstd.XXXXXX)
sim= rec=
cleanup() {
	exec 2>/dev/null
	[ -n "$sim" ] && kill -9 $sim
	[ -n "$rec" ] && kill -9 $rec
	rm -rf "$tmp"
}
trap cleanup EXIT

trainer() { # steps, more simtrainer arguments
	local steps=$1; shift
	"$SIMTRAINER" --steps "$steps" --kernels 8 --kernel-us 300 --quiet --wait-agent 30 "$@" \
		>"$tmp/sim.out" 2>&1 &
	sim=$!
}
magic() { [ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' ')" = 28b52ffd ]; }
# the dump without its first line (which says whether the file was compressed)
body() { "$STEPBLAME" dump "$1" 2>&1 | tail -n +2; }

# ---- record -z: the default name, the frames, the size, the same content ----
trainer 400 --inject hog@100-120:-10
(cd "$tmp" && "$STEPBLAME" record -q -z -p $sim -d 60 >"$tmp/rec.out" 2>&1)
rc=$?
wait $sim; sim=
f=$tmp/stepblame-$(ls "$tmp" | sed -n 's/^stepblame-\([0-9]*\)\.sbtrace\.zst$/\1/p').sbtrace.zst
if [ $rc != 0 ] || [ ! -s "$f" ]; then
	fail ${T}_record "record -z exited $rc, files: $(ls "$tmp" | tr '\n' ' ') $(tail -2 "$tmp/rec.out" | tr '\n' ' ')"
	exit 0
fi
zstd -q -d -c "$f" >"$tmp/dec.sbt" 2>"$tmp/zstd.err"
zrc=$?
frames=$(zstd -lv "$f" 2>/dev/null | sed -n 's/^# Zstandard Frames: //p')
zsize=$(stat -c %s "$f") dsize=$(stat -c %s "$tmp/dec.sbt")
if ! magic "$f" || ! zstd -q -t "$f" || [ $zrc != 0 ]; then
	fail ${T}_record "$(basename "$f") is not zstd frames that zstd verifies: $(cat "$tmp/zstd.err")"
elif [ "$(head -c 7 "$tmp/dec.sbt")" != SBTRACE ]; then
	fail ${T}_record "decompressed, it does not start with the trace magic"
elif [ $((dsize)) -lt $((4 * zsize)) ]; then
	fail ${T}_record "$zsize bytes compressed for $dsize bytes of trace: not 4 times smaller"
elif [ "${frames:-0}" -lt 2 ] || [ "$frames" -gt $((dsize / 1048576 + 3)) ]; then
	fail ${T}_record "$frames frames for $dsize bytes (a header frame, then one per MiB written out)"
else
	pass ${T}_record
	echo "    ($zsize bytes, $frames frames, for $dsize bytes of trace: $((dsize / zsize))x)"
fi
head -1 <("$STEPBLAME" dump "$f") >"$tmp/h1"
if ! grep -q '^# stepblame trace version 1 (zstd-compressed), created' "$tmp/h1"; then
	fail ${T}_same_content "dump's first line: $(cat "$tmp/h1")"
elif ! cmp -s <(body "$f") <(body "$tmp/dec.sbt"); then
	fail ${T}_same_content "dump of the compressed file and of zstd -d's output differ: $(diff <(body "$f") <(body "$tmp/dec.sbt") | head -3 | tr '\n' ' ')"
elif ! "$STEPBLAME" report "$f" >"$tmp/r1" 2>&1 || ! "$STEPBLAME" report "$tmp/dec.sbt" >"$tmp/r2" 2>&1 ||
     ! cmp -s "$tmp/r1" "$tmp/r2" || ! grep -q 'preempted by noisy-neighbor' "$tmp/r1"; then
	fail ${T}_same_content "the reports differ or do not name the hog: $(diff "$tmp/r1" "$tmp/r2" | head -3 | tr '\n' ' ')"
elif ! "$STEPBLAME" dump --jsonl "$f" | head -1 | grep -q '"compression":"zstd"'; then
	fail ${T}_same_content "dump --jsonl's header does not say zstd"
else
	pass ${T}_same_content
fi
# from a pipe: the compressed bytes, and the plain trace zstd made
if zstd -q -c -d "$f" | zstd -q -c | "$STEPBLAME" report - >"$tmp/r3" 2>&1 && cmp -s "$tmp/r1" "$tmp/r3" &&
   cat "$f" | "$STEPBLAME" report - >"$tmp/r4" 2>&1 && cmp -s "$tmp/r1" "$tmp/r4"; then
	pass ${T}_stdin
else
	fail ${T}_stdin "report - differs: $(diff "$tmp/r1" "$tmp/r3" | head -2 | tr '\n' ' ') $(head -2 "$tmp/r4" | tr '\n' ' ')"
fi
# one big frame at level 19, as the zstd tool makes it
zstd -q -19 -c "$tmp/dec.sbt" >"$tmp/one.zst"
if cmp -s <(body "$tmp/one.zst") <(body "$tmp/dec.sbt"); then
	pass ${T}_zstd_tool_file
else
	fail ${T}_zstd_tool_file "a trace compressed by zstd -19 dumps differently: $(body "$tmp/one.zst" | tail -1)"
fi

# ---- the name asks for it, or the level does ----
trainer 100
"$STEPBLAME" record -q -p $sim -d 60 -o "$tmp/named.sbt.zst" >"$tmp/rec2.out" 2>&1
rc1=$?
wait $sim; sim=
trainer 100
"$STEPBLAME" record -q -p $sim -d 60 --compress-level 1 -o "$tmp/level.sbt" >"$tmp/rec3.out" 2>&1
rc2=$?
wait $sim; sim=
if [ $rc1 = 0 ] && [ $rc2 = 0 ] && magic "$tmp/named.sbt.zst" && magic "$tmp/level.sbt" &&
   "$STEPBLAME" report "$tmp/named.sbt.zst" >/dev/null 2>&1 && "$STEPBLAME" report "$tmp/level.sbt" >/dev/null 2>&1; then
	pass ${T}_by_name_or_level
else
	fail ${T}_by_name_or_level "exit $rc1/$rc2; $(head -c 4 "$tmp/named.sbt.zst" | od -An -tx1) / $(head -c 4 "$tmp/level.sbt" | od -An -tx1); $(tail -1 "$tmp/rec2.out" "$tmp/rec3.out" | tr '\n' ' ')"
fi
out=$("$STEPBLAME" record -p 1 --compress-level 20 2>&1); rc1=$?
out2=$("$STEPBLAME" attach -p 1 -z 2>&1); rc2=$?
if [ $rc1 = 2 ] && [[ $out == *"--compress-level wants a zstd level from 1 to 19, got '20'"* ]] &&
   [ $rc2 = 2 ] && [[ $out2 == *"-z is not an option of this command"* ]]; then
	pass ${T}_option_errors
else
	fail ${T}_option_errors "record --compress-level 20: $rc1 '$out'; attach -z: $rc2 '$out2'"
fi

# ---- killed mid-capture: the partial file reads up to its last whole frame ----
trainer 5000 --inject hog@1-5000:-10
"$STEPBLAME" record -q -z -p $sim -d 120 -o "$tmp/killed.sbt.zst" >"$tmp/rec4.out" 2>&1 &
rec=$!
part=
for ((i = 0; i < 300; i++)); do
	part=$(ls "$tmp"/killed.sbt.zst.partial.* 2>/dev/null | head -1)
	# three frames written out: the header's and two of records
	[ -n "$part" ] && [ "$(zstd -lv "$part" 2>/dev/null | sed -n 's/^# Zstandard Frames: //p')" -ge 3 ] 2>/dev/null && break
	sleep 0.1
done
kill -9 $rec; wait $rec 2>/dev/null; rec=
kill -9 $sim; wait $sim 2>/dev/null; sim=
if [ -z "$part" ] || [ ! -s "$part" ]; then
	fail ${T}_killed "no partial file after 30 s: $(ls "$tmp" | tr '\n' ' ')"
else
	"$STEPBLAME" dump "$part" >"$tmp/kd.out" 2>"$tmp/kd.err"
	rc=$?
	n=$(grep -c ' step ' "$tmp/kd.out")
	"$STEPBLAME" report "$part" >"$tmp/kr.out" 2>&1
	rrc=$?
	if [ $rc = 0 ] && grep -q 'was cut short after' "$tmp/kd.err" && [ "$n" -gt 0 ] && [ $rrc = 0 ] &&
	   grep -q 'cut short' "$tmp/kr.out"; then
		pass ${T}_killed
		echo "    ($(stat -c %s "$part") bytes: $(grep -o 'cut short after [0-9]* records' "$tmp/kd.err"), $n step marks)"
	else
		fail ${T}_killed "dump exit $rc ($(head -1 "$tmp/kd.err")), $n steps; report exit $rrc: $(grep -m1 -i 'cut' "$tmp/kr.out")"
	fi
fi

# ---- watch -z: its snippets compressed ----
trainer 400
timeout 120 "$STEPBLAME" watch -z -p $sim --dir "$tmp/w" --around 0.5 --idle-pct 1 --max-snippets 2 \
	>"$tmp/w.out" 2>"$tmp/w.err"
rc=$?
wait $sim; sim=
s=$(ls "$tmp"/w/idle-*.sbtrace.zst 2>/dev/null | head -1)
if [ $rc != 0 ] || [ -z "$s" ] || ls "$tmp"/w/*.sbtrace >/dev/null 2>&1; then
	fail ${T}_watch "exit $rc; files: $(ls "$tmp/w" | tr '\n' ' ') $(tail -1 "$tmp/w.err")"
elif ! magic "$s" || ! zstd -q -t "$s" || ! "$STEPBLAME" report "$s" >"$tmp/ws.out" 2>&1 ||
     ! grep -q "$(basename "$s")" "$tmp/w.out"; then
	fail ${T}_watch "$(basename "$s"): not zstd, not readable or not named in watch's output: $(head -2 "$tmp/ws.out" | tr '\n' ' ')"
else
	pass ${T}_watch
fi
