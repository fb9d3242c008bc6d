#!/usr/bin/env bash
# User stacks, real probes on a real program (tests/progs/sbstack, built with
# frame pointers): its slow fsync, fault burst and slow mallocs come from
# functions with known names, as do its long sleeps, and its JIT-like code region is named in its own
# /tmp/perf-PID.map. The report's stacks for those events name those functions.
set -u
. "$(dirname "$0")/../lib.sh"
T=stacks_record

need_bpf $T || exit 0
prog="${BUILD:-build}/tests/progs/sbstack"
if [ ! -x "$prog" ] || ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
	skip $T "no $prog or no stepblame that records"; exit 0
fi
# fsync must reach a disk: /var/tmp, not tmpfs
tmp=$(mktemp -d /var/tmp/stacks_record.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -f "/tmp/perf-$pid.map"; rm -rf "$tmp"; }
trap cleanup EXIT

mkfifo "$tmp/go"
"$prog" "$tmp" <"$tmp/go" >"$tmp/prog.out" 2>&1 &
pid=$!
exec 7>"$tmp/go"
# the allocator probes attached throughout (the overhead guard would start them
# sampled, and the one slow malloc could fall outside its windows)
"$STEPBLAME" record -p "$pid" -d 60 --max-overhead 0 -o "$tmp/trace.sbt" >"$tmp/record.out" 2>&1 &
rec=$!
# the probes are attached once record says so
wait_attached "$tmp/record.out" 30 $rec
echo go >&7
exec 7>&-
wait "$pid"; prc=$?
wait "$rec"; rc=$?
rm -f "/tmp/perf-$pid.map"; pid=
if [ $rc != 0 ] || [ $prc != 0 ]; then
	fail $T "record exited $rc, sbstack $prc: $(tail -2 "$tmp/record.out" | tr '\n' ' ')"; exit 0
fi
if ! "$STEPBLAME" report --format json "$tmp/trace.sbt" >"$tmp/report.json" 2>"$tmp/report.err"; then
	fail $T "report failed: $(head -1 "$tmp/report.err")"; exit 0
fi
"$STEPBLAME" report "$tmp/trace.sbt" >"$tmp/report.txt" 2>&1
out=$(python3 - "$tmp/report.json" "$tmp/report.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
hot = [h["stack"] for h in d.get("stacks", {}).get("hot", [])]
def funcs(h):
    return [f["function"] for f in h["frames"]]
def has(event, fn, module=None):
    for h in hot:
        if h["event"] != event:
            continue
        for f in h["frames"]:
            if f["function"] == fn and (module is None or f["module"] == module):
                return True
    return False
bad = []
# fsync is a leaf without a frame in libc: its caller's frame is skipped, the
# caller's caller (checkpoint_save, via flush_to_disk) is there
for ev, fn, mod in (("iosys", "checkpoint_save", None), ("fault", "arena_reserve", None),
                    ("alloc", "buffer_grow", None), ("off_cpu", "wait_for_loader", None),
                    ("off_cpu", "wait_for_worker", None),
                    ("iosys", "jit_hot_loop", "[jit]"),
                    ("iosys", "jit_region_run", None)):
    if not has(ev, fn, mod):
        bad.append("%s stack without %s%s" % (ev, fn, " in " + mod if mod else ""))
# the text's Stacks section shows the JSON's hottest stack of each kind
text = open(sys.argv[2]).read()
seen = set()
for h in hot:
    if h["event"] in seen:
        continue
    seen.add(h["event"])
    named = [f["function"] for f in h["frames"][:6] if f["function"]]
    if named and ("%s+0x" % named[0]) not in text:
        bad.append("text report lacks %s (top %s stack)" % (named[0], h["event"]))
for h in hot:
    for f in h["frames"]:
        if f["module"] and f["module"].endswith("/sbstack") and f["function"] is None:
            bad.append("a frame in sbstack without a function: %s" % f["addr"])
print("; ".join(bad) if bad else "ok")
if bad:
    for h in hot:
        print(h["event"], funcs(h), file=sys.stderr)
PY
)
if [ "$out" = ok ]; then pass $T; else fail $T "$out"; fi

# A frame pointer that points off the stack is not followed: the decoy phase
# spins with it on a fake frame in the heap whose return address names a
# function nothing calls. The CPU samples taken in the spin (their innermost
# frame in its loop) must not name that address.
T=stacks_record/no_frames_from_data
decoy=$(awk '$1 == "decoy" { print $2, $3 }' "$tmp/prog.out")
if [ "$decoy" = none ]; then
	skip $T "the decoy phase is x86-64 only"
elif [ -z "$decoy" ]; then
	fail $T "sbstack printed no decoy line: $(tail -2 "$tmp/prog.out" | tr '\n' ' ')"
else
	"$STEPBLAME" dump --jsonl "$tmp/trace.sbt" >"$tmp/dump.jsonl" 2>"$tmp/dump.err"
	out=$(python3 - "$tmp/dump.jsonl" $decoy <<'PY'
import json, sys
loop, ret = int(sys.argv[2], 16), int(sys.argv[3], 16)
spun = named = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") != "stack" or not r.get("frames"):
        continue
    frames = [int(f, 16) for f in r["frames"]]
    if r.get("event") == "stack" and loop <= frames[0] < loop + 16:
        spun += 1
    if ret in frames:
        named += 1
if named:
    print("%d stacks name the fake frame's return address %#x" % (named, ret))
elif spun < 3:
    print("only %d CPU samples in the decoy loop (400 ms of CPU at 99 Hz)" % spun)
else:
    print("ok %d" % spun)
PY
)
	case "$out" in
	ok*) echo "    (${out#ok } samples in the loop, none naming the fake frame)"; pass $T ;;
	*) fail $T "$out" ;;
	esac
fi

# A slow call that repeats has no stack of its own (docs/ARCHITECTURE.md,
# "Stacks"): fsync_repeat's 40 fsyncs come a few ms apart. Each recorded
# system call of the phase (the I/O and mmap-family probes share one rate
# table) must have a stack exactly where the rule gives it one, replayed from
# the records: none within 100 us of the last stack; none for a repeat of the
# last stacked call (same type and call, less than 16 ms after it, less than
# twice as slow); one for every other. And the phase must hold repeats.
T=stacks_record/repeats_sampled
[ -s "$tmp/dump.jsonl" ] || "$STEPBLAME" dump --jsonl "$tmp/trace.sbt" >"$tmp/dump.jsonl" 2>"$tmp/dump.err"
out=$(python3 - "$tmp/dump.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ios = [r for r in recs if r.get("type") == "iosys" and r.get("call") == "fsync"]
# fsync_repeat's: the last 40 recorded fsyncs at most, each less than 20 ms
# after the one before ends (a fast one, not recorded, between them), after
# the 400 ms of the decoy phase
loop = []
for r in reversed(ios):
    if len(loop) == 40 or (loop and loop[-1]["start_ns"] - r["ts"] > 20000000):
        break
    loop.append(r)
loop.reverse()
if len(loop) < 10:
    print("only %d fsyncs of the repeat phase recorded" % len(loop)); sys.exit()
tid, t0, t1 = loop[0]["tid"], loop[0]["start_ns"], loop[-1]["ts"]
stacked = {r["ts"] for r in recs if r.get("type") == "stack" and r["tid"] == tid
           and r.get("event") in ("iosys", "mmsys")}
# the thread's calls that reach emit_stack: every iosys record, mmsys of 50 us or more
calls = [r for r in recs if r.get("tid") == tid and t0 - 20000000 <= r["ts"] <= t1 and
         (r.get("type") == "iosys" or (r.get("type") == "mmsys" and r["dur_ns"] >= 50000))]
other_until = rep_until = rep_ns = 0
rep = None
bad, skipped, have = [], 0, 0
for r in calls:
    want = not (r["ts"] < other_until or
                (r["ts"] < rep_until and r["dur_ns"] < rep_ns and (r["type"], r["call"]) == rep))
    got = r["ts"] in stacked
    if r["ts"] >= t0:
        skipped += not want
        have += got
        if want != got:
            bad.append("%s %s at +%.1f ms (%.0f us): %s" % (
                r["type"], r["call"], (r["ts"] - t0) / 1e6, r["dur_ns"] / 1e3,
                "a stack where the rule gives none" if got else "no stack where the rule gives one"))
    if got:
        other_until, rep_until, rep_ns = r["ts"] + 100000, r["ts"] + 16000000, 2 * r["dur_ns"]
        rep = (r["type"], r["call"])
if not bad and skipped < 5:
    bad.append("only %d repeats in the phase: the rule was not exercised" % skipped)
print("; ".join(bad[:3]) + (" (%d in all)" % len(bad) if len(bad) > 3 else "") if bad
      else "ok %d of %d" % (have, len(loop)))
PY
)
case "$out" in
ok*) echo "    (${out#ok } fsyncs with their own stack)"; pass $T ;;
*) fail $T "$out" ;;
esac

# The vDSO: code the kernel maps into every process, with no file behind it.
# sbvdso reads the clock in a loop in steps 0-14 (its CPU time in the vDSO)
# and counts in spin_plain in steps 15-29. Each step's CPU samples are named:
# in [vdso] (with the vDSO's own function where its symbols cover the
# address), and in spin_plain.
T=stacks_record/vdso
vprog="${BUILD:-build}/tests/progs/sbvdso"
if [ ! -x "$vprog" ]; then
	fail $T "no $vprog"; exit 0
fi
record_gated $T vdso "" "$vprog" || exit 0
if ! "$STEPBLAME" report --format json "$tmp/vdso.sbt" >"$tmp/vdso.json" 2>"$tmp/vdso.err"; then
	fail $T "report: $(head -1 "$tmp/vdso.err")"; exit 0
fi
out=$(python3 - "$tmp/vdso.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = []
clock, plain = [], []
for s in d["steps"]:
    top = (s.get("cpu_samples") or {}).get("top")
    if s.get("incomplete") or not top or s["step"] in (14, 15):
        continue
    (clock if s["step"] < 15 else plain).append((s["step"], top))
    if top.get("function") and top.get("module") == "[vdso]" and "clock" not in top["function"] \
            and "time" not in top["function"]:
        bad.append("step %d: vDSO function %s" % (s["step"], top["function"]))
# about 3 samples a step: most steps' top sample, not every one, is where most of the time is
in_vdso = [n for n, t in clock if t.get("module") == "[vdso]"]
in_plain = [n for n, t in plain if t.get("function") == "spin_plain"]
if len(clock) < 10 or len(plain) < 10:
    bad.append("steps with CPU samples: %d reading the clock, %d counting" % (len(clock), len(plain)))
elif len(in_vdso) < 0.6 * len(clock):
    bad.append("%d of %d clock-reading steps have their top sample in [vdso]: %s" % (
        len(in_vdso), len(clock), ["%d: %s %s" % (n, t.get("module"), t.get("addr")) for n, t in clock][:4]))
if plain and len(in_plain) < 0.8 * len(plain):
    bad.append("%d of %d counting steps have their top sample in spin_plain" % (len(in_plain), len(plain)))
if any(t.get("module") == "[vdso]" for n, t in plain):
    bad.append("a counting step's top sample in [vdso]")
seen = len(clock) + len(plain)
print("; ".join(bad[:4]) if bad else "ok %d" % seen)
PY
)
case "$out" in
ok*) echo "    (${out#ok } steps' samples named)"; pass $T ;;
*) fail $T "$out" ;;
esac
