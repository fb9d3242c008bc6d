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
for _ in $(seq 1 300); do grep -q "attached" "$tmp/record.out" && break; sleep 0.1; done
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
