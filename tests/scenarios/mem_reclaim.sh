#!/usr/bin/env bash
# Memory reclaim on the real kernel: a marking program in a memory cgroup of
# 96 MiB reads 128 MiB of a file through the page cache in each of steps
# 30-33, so the kernel reclaims the cgroup's own page cache inside those reads
# (the memcg reclaim tracepoints). The report's mem_reclaim is in those steps
# and nowhere else, and the kernel's own count of limit hits (v1 failcnt, v2
# memory.events max) says the reclaim happened.
set -u
. "$(dirname "$0")/../lib.sh"
T=mem_reclaim

need_bpf $T || exit 0
if ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
	skip $T "no stepblame that records at '${STEPBLAME:-}'"; exit 0
fi
# the cgroup: v2 (a memory controller in the root's list) or v1 (a memory hierarchy)
cg= limit= hits=
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	cg=/sys/fs/cgroup/stepblame_reclaim.$$
	mkdir "$cg" 2>/dev/null && echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
	limit=$cg/memory.max hits="max"
elif [ -d /sys/fs/cgroup/memory ]; then
	cg=/sys/fs/cgroup/memory/stepblame_reclaim.$$
	mkdir "$cg" 2>/dev/null
	limit=$cg/memory.limit_in_bytes hits=failcnt
fi
if [ -z "$cg" ] || [ ! -w "$limit" ]; then
	if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then
		fail $T "no memory cgroup to limit the program with (cgroup v1 memory or v2 memory controller)"
	else
		skip $T "no memory cgroup to limit the program with"
	fi
	[ -n "$cg" ] && rmdir "$cg" 2>/dev/null
	exit 0
fi
limit_hits() {
	if [ "$hits" = failcnt ]; then cat "$cg/memory.failcnt"; else awk '$1 == "max" { print $2 }' "$cg/memory.events"; fi
}
# page cache must come from a disk, not tmpfs (whose pages are shared memory)
tmp=$(mktemp -d /var/tmp/mem_reclaim.XXXXXX)
prog=
cleanup() {
	[ -n "$prog" ] && kill -9 "$prog" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
	rmdir "$cg" 2>/dev/null
}
trap cleanup EXIT
echo $((96 << 20)) >"$limit"
dd if=/dev/zero of="$tmp/data.bin" bs=1M count=512 status=none
sync
echo 1 >/proc/sys/vm/drop_caches

# the marker library without sanitizers (an ASan build cannot be loaded into python3)
lib=$PWD/$BUILD/libstepblame.so
if [ -x "${PLAIN_SIMTRAINER:-}" ] && [ -f "$(dirname "$PLAIN_SIMTRAINER")/libstepblame.so" ]; then
	lib=$(dirname "$PLAIN_SIMTRAINER")/libstepblame.so
fi
mkfifo "$tmp/go"
# joins the cgroup, then waits for go; 60 steps of ~5 ms of compute, reads in 30-33
sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" "$3" "$4" "$5" "$6"' _ "$cg" python3 - "$lib" "$tmp" "$PWD/python" \
	>"$tmp/prog.out" 2>&1 <<'PY' &
import ctypes, os, sys, time
lib, tmp = sys.argv[1], sys.argv[2]
sb = ctypes.CDLL(lib)
sb.stepblame_step.argtypes = [ctypes.c_ulonglong]
open(os.path.join(tmp, "go")).read(1)
buf = bytearray(1 << 20)
for step in range(60):
    sb.stepblame_step(step)
    end = time.perf_counter() + 0.005
    while time.perf_counter() < end:
        pass
    if 30 <= step <= 33:
        fd = os.open(os.path.join(tmp, "data.bin"), os.O_RDONLY)
        os.lseek(fd, (step - 30) * (128 << 20), 0)
        left = 128 << 20
        while left > 0:
            n = os.readv(fd, [buf])
            if n <= 0:
                break
            left -= n
        os.close(fd)
sb.stepblame_step(60)
PY
prog=$!
"$STEPBLAME" record -p $prog -d 60 -o "$tmp/trace.sbt" >"$tmp/record.out" 2>&1 &
rec=$!
wait_attached "$tmp/record.out" 30 $rec
h0=$(limit_hits)
echo go >"$tmp/go"
wait $prog; prc=$?
prog=
wait $rec; rc=$?
h1=$(limit_hits)
if [ $rc != 0 ] || [ $prc != 0 ]; then
	fail $T "record exited $rc, the program $prc: $(tail -2 "$tmp/record.out" "$tmp/prog.out" | tr '\n' ' ')"; exit 0
fi
if ! "$STEPBLAME" report "$tmp/trace.sbt" --format json -o "$tmp/r.json" 2>"$tmp/err" ||
   ! "$STEPBLAME" report "$tmp/trace.sbt" -o "$tmp/r.txt" 2>>"$tmp/err"; then
	fail $T "report: $(head -1 "$tmp/err")"; exit 0
fi
if [ "$h1" -le "$h0" ]; then
	fail $T "the kernel counted no hit of the cgroup's limit ($hits $h0 -> $h1): nothing to reclaim"; exit 0
fi
python3 - "$tmp/r.json" "$tmp/r.txt" "$h0" "$h1" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
MS = 1e6
steps = {s["step"]: s for s in rep["steps"] if not s.get("incomplete")}
def rec(s):
    return sum(b["ns"] for b in s["blame"] if b["cause"] == "mem_reclaim")
reads = [n for n in range(30, 34) if n in steps]
inside = sum(rec(steps[n]) for n in reads)
# outside the reads (and the step after them, where the last read may end): none
outside = {n: rec(s) for n, s in steps.items() if not 30 <= n <= 34 and n < 60 and rec(s)}
bad = []
if len(reads) < 4:
    bad.append("read steps in the report: %s" % reads)
if inside < 0.3 * MS:
    bad.append("mem_reclaim in the read steps %.2f ms (the kernel hit the limit %d times)" %
               (inside / MS, int(sys.argv[4]) - int(sys.argv[3])))
if sum(outside.values()) > 0.1 * max(inside, 1):
    bad.append("mem_reclaim outside the reads: %s" % {n: round(v / MS, 2) for n, v in outside.items()})
if "mem_reclaim" not in text.split("Causes", 1)[-1]:
    bad.append("the text's Causes do not list mem_reclaim")
print("FAIL mem_reclaim: " + "; ".join(bad) if bad else
      "PASS mem_reclaim (%.2f ms of reclaim in steps 30-33; the kernel hit the limit %d times)" %
      (inside / MS, int(sys.argv[4]) - int(sys.argv[3])))
PY
