#!/usr/bin/env bash
# attach's view on a terminal. simtrainer runs with a hog on its launcher's
# CPU (steps 100-130) and a loader stall (steps 200-202); attach runs on a
# pseudo-terminal (script(1)) 100 columns wide and 30 rows high. Cases: the
# screen is redrawn from home (ANSI), never a line per step; its last frame
# gives the percentiles, the tail episode, the causes, names the hog among
# who took the CPUs and the tracer's cost, and lists tail steps; no line is
# wider than the terminal and no frame taller; the report follows it. Piped,
# the same attach writes plain lines with no escape sequence; --lines on the
# terminal does too. A trainer named with terminal escapes (an OSC title
# sequence, a bell, a C1 CSI) cannot write them through the screen.
set -u
. "$(dirname "$0")/../lib.sh"
T=attach_top

need_bpf $T || exit 0
need_sim $T || exit 0
if ! command -v script >/dev/null; then
	fail $T "no script(1) (util-linux) to give attach a terminal"; exit 0
fi

tmp=$(mktemp -d)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

run() { # name, how: tty|pipe, attach options...
	local name=$1 how=$2; shift 2
	"$SIMTRAINER" --steps 400 --kernels 4 --kernel-us 300 --wait-agent 30 --quiet \
		--inject hog@100-130:-10 --inject stall@200-202:30 >"$tmp/sim.out" 2>&1 &
	sim=$!
	if [ "$how" = tty ]; then
		timeout 120 script -qec "stty cols 100 rows 30; $(printf '%q ' "$STEPBLAME") attach -q -p $sim $*" \
			/dev/null >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null
	else
		timeout 120 "$STEPBLAME" attach -q -p "$sim" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	fi
	local rc=$?
	wait "$sim" 2>/dev/null; sim=
	if [ $rc != 0 ]; then
		fail ${T}_$name "attach exited $rc: $(tail -2 "$tmp/$name.err" | tr '\n' ' ')"
		return 1
	fi
}

if run screen tty; then
	python3 - "$tmp/screen.out" <<'PY'
import re, sys
T = "attach_top"
raw = open(sys.argv[1], "rb").read().decode("utf-8", "replace").replace("\r\n", "\n")
def case(name, ok, why):
    print(("PASS %s_%s" % (T, name)) if ok else ("FAIL %s_%s: %s" % (T, name, why)))
frames = raw.split("\x1b[H")[1:]
plain = lambda s: re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", s)
if not frames:
    case("redrawn", False, "no frame drawn from home: %r" % raw[:200]); sys.exit(0)
last, report = frames[-1], ""
if "\x1b[J" in last:
    last, report = last.split("\x1b[J", 1)
lines = plain(last).split("\n")
# attach's line per step ("step N: ...") is not written: the frames hold the view only
steplines = sum(1 for f in frames for l in plain(f.split("\x1b[J")[0]).split("\n") if re.match(r"step \d+: ", l))
case("redrawn", len(frames) >= 3 and not steplines,
     "%d frames, %d lines of a step in them" % (len(frames), steplines))
text = "\n".join(lines)
want = [r"^step time   P50 \S+ \S+   P99 ", r"^(tail now|last tail)  +steps? \d+", r"^causes +\w+ \d+%",
        r"^took CPUs .*noisy-neighbor\[\d+\]", r"^tracer +median ", r"^step \d+  \S+ \S+  \+\S+ \S+: \w+ \+"]
miss = [w for w in want if not re.search(w, text, re.M)]
case("content", not miss, "the last frame lacks %s:\n%s" % (miss, text[:800]))
wide = [l for f in frames for l in plain(f.split("\x1b[J")[0]).split("\n") if len(l) > 100]
tall = max(len(plain(f.split("\x1b[J")[0]).rstrip("\n").split("\n")) for f in frames)
case("fits", not wide and tall <= 30, "%d lines wider than 100 (%r); tallest frame %d rows" %
     (len(wide), wide[:1], tall))
case("report_after", "Step time   P50" in plain(report), "no report after the last frame")
PY
fi
if run piped pipe; then
	n=$(grep -c '^step [0-9]*: ' "$tmp/piped.out")
	if grep -q $'\x1b' "$tmp/piped.out" || [ "$n" -lt 350 ]; then
		fail ${T}_piped "$n step lines; escape sequences: $(grep -c $'\x1b' "$tmp/piped.out")"
	else
		pass ${T}_piped
	fi
fi
# a hostile name: the process renames itself with escapes, attach draws it
python3 -c '
import ctypes, time
ctypes.CDLL(None).prctl(15, b"\x1b]0;pwn\x07\xc2\x9b2J", 0, 0, 0)
time.sleep(30)' &
evil=$!
sleep 0.3
timeout 60 script -qec "stty cols 100 rows 30; $(printf '%q ' "$STEPBLAME") attach -q -p $evil -d 2" \
	/dev/null >"$tmp/evil.out" 2>"$tmp/evil.err" </dev/null
kill $evil 2>/dev/null; wait $evil 2>/dev/null
if ! grep -q 'stepblame attach  ' "$tmp/evil.out"; then
	fail ${T}_hostile_name "no screen drawn: $(tail -2 "$tmp/evil.err" | tr '\n' ' ')"
elif grep -aq $'\x1b]0;\|\x07\|\xc2\x9b' "$tmp/evil.out"; then
	fail ${T}_hostile_name "the name's escapes reached the terminal: $(grep -ao $'\x1b][^\x07]*' "$tmp/evil.out" | head -1 | od -c | head -2)"
else
	pass ${T}_hostile_name
fi
if run lines tty --lines; then
	n=$(grep -c '^step [0-9]*: ' "$tmp/lines.out")
	if grep -q $'\x1b\[H' "$tmp/lines.out" || [ "$n" -lt 350 ]; then
		fail ${T}_lines "$n step lines on the terminal with --lines; redrawn: $(grep -c $'\x1b\[H' "$tmp/lines.out")"
	else
		pass ${T}_lines
	fi
fi
exit 0
