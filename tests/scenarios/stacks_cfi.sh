#!/usr/bin/env bash
# User stacks of code built without frame pointers, walked by call-frame
# information (docs/ARCHITECTURE.md, "Stacks"): tests/progs/sbstack built with
# -fomit-frame-pointer (sbstack-nofp), and a Python program run by the
# distribution's interpreter. The probes copy the top of the stack at the
# slow fsync, the slow malloc and the long sleeps; the agent walks the copy by
# the code's .eh_frame. The report's stacks name the callers the frame-pointer
# chain cannot reach; with --fp-stacks (no copies) they do not.
set -u
. "$(dirname "$0")/../lib.sh"
T=stacks_cfi

need_bpf $T || exit 0
prog="${BUILD:-build}/tests/progs/sbstack-nofp"
if [ ! -x "$prog" ] || ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
	skip $T "no $prog or no stepblame that records"; exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
	skip $T "stack copies are x86-64 only"; exit 0
fi
# fsync must reach a disk: /var/tmp, not tmpfs
tmp=$(mktemp -d /var/tmp/stacks_cfi.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -f "/tmp/perf-$pid.map"; rm -rf "$tmp"; }
trap cleanup EXIT

# the hot stacks of a trace: "EVENT fn<fn<fn..." a line each (a frame without a name: ?)
hot() {
	"$STEPBLAME" report --format json "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
for h in d.get("stacks", {}).get("hot", []):
    s = h["stack"]
    print(s["event"], "<".join(f["function"] or "?" for f in s["frames"]))'
}

# the allocator probes attached throughout: the one slow malloc could fall outside a window
for mode in cfi fp; do
	opts="--max-overhead 0"
	[ $mode = fp ] && opts="$opts --fp-stacks"
	record_gated $T "sb-$mode" "$opts" "$prog" "$tmp" || exit 0
	# its JIT phase leaves /tmp/perf-PID.map behind
	for f in /tmp/perf-*.map; do
		p=${f#/tmp/perf-}; p=${p%.map}
		[ -e "/proc/$p" ] || ! grep -q jit_hot_loop "$f" 2>/dev/null || rm -f "$f"
	done
	if ! hot "$tmp/sb-$mode.sbt" >"$tmp/sb-$mode.hot" 2>"$tmp/sb-$mode.err"; then
		fail $T "report ($mode): $(head -1 "$tmp/sb-$mode.err")"; exit 0
	fi
done
out=$(python3 - "$tmp/sb-cfi.hot" "$tmp/sb-fp.hot" <<'PY'
import sys
def stacks(path):
    out = []
    for line in open(path):
        ev, _, frames = line.rstrip("\n").partition(" ")
        out.append((ev, frames.split("<")))
    return out
cfi, fp = stacks(sys.argv[1]), stacks(sys.argv[2])
def chain(st, ev, *fns):
    """a stack of event ev holding fns in this order, innermost first"""
    for e, fr in st:
        if e != ev:
            continue
        i = 0
        for f in fr:
            if i < len(fns) and f == fns[i]:
                i += 1
        if i == len(fns):
            return True
    return False
bad = []
for ev, fns in (("iosys", ("flush_to_disk", "checkpoint_save", "main")),
                ("alloc", ("buffer_grow", "main")),
                ("off_cpu", ("usleep", "wait_for_loader", "main"))):
    if not chain(cfi, ev, *fns):
        bad.append("%s: no stack %s" % (ev, " < ".join(fns)))
# without copies the frame-pointer chain of this build ends in libc or its caller
if chain(fp, "iosys", "checkpoint_save"):
    bad.append("--fp-stacks: an iosys stack names checkpoint_save (was the copy walked?)")
if any(len(fr) > 2 for e, fr in fp if e == "iosys"):
    bad.append("--fp-stacks: an iosys stack of more than two frames in a build without frame pointers")
print("; ".join(bad) or "ok")
PY
)
if [ "$out" != ok ]; then
	# a copy left unwalked because the agent's time for walks was spent, or not
	# taken because the agent was behind (a loaded machine), is what the capture
	# says it did: not a wrong walk
	busy=$(grep -m1 -e "were not walked by call-frame information" \
		-e "were not taken while the ring was backed up" "$tmp/sb-cfi.rec")
	case "$out" in
	*--fp-stacks*) fail $T "$out" ;;
	*) if [ -n "$busy" ]; then skip $T "too busy to walk every copy: ${busy#stepblame: }"
	   else fail $T "$out"; fi ;;
	esac
	exit 0
fi
echo "    (sbstack without frame pointers: fsync, malloc and sleep named up to main)"

# The distribution's Python (no frame pointers in Debian's build): a nested
# function's fsync is named through the interpreter up to its entry point.
cat >"$tmp/ckpt.py" <<'EOF'
import os, sys, time
sys.stdin.readline()
def save_checkpoint(path):
    with open(path, "wb") as f:
        f.write(os.urandom(4 << 20))
        f.flush()
        os.fsync(f.fileno())
def train(path):
    for _ in range(6):
        save_checkpoint(path)
        time.sleep(0.05)
train(sys.argv[1])
EOF
record_gated $T py "" /usr/bin/python3 "$tmp/ckpt.py" "$tmp/ckpt.bin" || exit 0
if ! hot "$tmp/py.sbt" >"$tmp/py.hot" 2>"$tmp/py.err"; then
	fail $T "report (python): $(head -1 "$tmp/py.err")"; exit 0
fi
out=$(python3 - "$tmp/py.hot" <<'PY'
import sys
best = 0
for line in open(sys.argv[1]):
    ev, _, frames = line.rstrip("\n").partition(" ")
    fr = frames.split("<")
    if ev == "iosys" and fr[0] == "fsync" and any(f in ("Py_RunMain", "Py_BytesMain", "main") for f in fr):
        best = max(best, len(fr))
print("ok %d" % best if best else "no iosys stack from fsync up to the interpreter's entry point")
PY
)
case "$out" in
ok*) echo "    (python3: fsync named through ${out#ok } frames)"; pass $T ;;
*) fail $T "$out" ;;
esac
