#!/usr/bin/env bash
# A CPU quota on the real kernel (a container's CPU limit): a marking program
# that computes all the time, in a cgroup allowed 30 ms of CPU per 100 ms, is
# throttled for most of each period. The report blames cpu_throttle for about
# the time the kernel says the group was throttled (cpu.stat), within the
# program's own run delay (schedstat), and never the tasks that ran on its CPU
# meanwhile: a hog pinned beside it is a cpu_wait culprit only for the rest of
# that run delay, where the group was not throttled. Then the same work done by a
# worker thread that the main thread sleeps on: the main thread's wait is the
# quota's too, on the worker (cpu_throttle through a wakeup chain), not the hog's.
set -u
. "$(dirname "$0")/../lib.sh"
T=cpu_quota

need_bpf $T || exit 0
if ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
	skip $T "no stepblame that records at '${STEPBLAME:-}'"; exit 0
fi
# the cgroup: v2 (a cpu controller in the root's list) or v1 (a cpu hierarchy)
cg= v=
if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	cg=/sys/fs/cgroup/stepblame_quota.$$ v=2
	mkdir "$cg" 2>/dev/null && echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
	echo "30000 100000" >"$cg/cpu.max" 2>/dev/null || cg=
elif [ -d /sys/fs/cgroup/cpu ]; then
	cg=/sys/fs/cgroup/cpu/stepblame_quota.$$ v=1
	mkdir "$cg" 2>/dev/null
	{ echo 100000 >"$cg/cpu.cfs_period_us" && echo 30000 >"$cg/cpu.cfs_quota_us"; } 2>/dev/null || cg=
fi
if [ -z "$cg" ]; then
	if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then
		fail $T "no cgroup with a CPU quota (cgroup v1 cpu or v2 cpu controller)"
	else
		skip $T "no cgroup with a CPU quota"
	fi
	exit 0
fi
throttled_ns() {
	if [ $v = 1 ]; then awk '$1 == "throttled_time" { print $2 }' "$cg/cpu.stat"
	else awk '$1 == "throttled_usec" { print $2 * 1000 }' "$cg/cpu.stat"; fi
}
tmp=$(mktemp -d)
prog= hog=
cleanup() {
	for p in $prog $hog; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
	rmdir "$cg" 2>/dev/null
}
trap cleanup EXIT

lib=$PWD/$BUILD/libstepblame.so
if [ -x "${PLAIN_SIMTRAINER:-}" ] && [ -f "$(dirname "$PLAIN_SIMTRAINER")/libstepblame.so" ]; then
	lib=$(dirname "$PLAIN_SIMTRAINER")/libstepblame.so
fi
cpu=$(( $(nproc) > 1 ? 1 : 0 ))
# a hog of our own on the same CPU, outside the cgroup: it runs while the program is throttled
taskset -c $cpu python3 -c 'while True: pass' &
hog=$!
# MODE one: joins the cgroup, waits for go, marks 40 steps of 10 ms of CPU each
# (the quota stretches them), and writes its thread's run delay over the steps
# (schedstat). MODE chain: the main thread hands each step's 10 ms to a worker
# thread and sleeps until the worker is done; the delay is both threads'.
cat >"$tmp/prog.py" <<'PY'
import ctypes, os, sys, threading, time
lib, tmp, mode = sys.argv[1], sys.argv[2], sys.argv[3]
sb = ctypes.CDLL(lib)
sb.stepblame_step.argtypes = [ctypes.c_ulonglong]
tids = [threading.get_native_id()]
def delay():
    d = 0
    for t in tids:
        with open("/proc/self/task/%d/schedstat" % t) as f:
            d += int(f.read().split()[1])
    return d
def work():
    end = time.thread_time() + 0.010
    while time.thread_time() < end:
        pass
req, done = threading.Event(), threading.Event()
def worker():
    tids.append(threading.get_native_id())
    while True:
        req.wait()
        req.clear()
        work()
        done.set()
if mode == "chain":
    threading.Thread(target=worker, daemon=True).start()
    while len(tids) < 2:
        time.sleep(0.01)
    open(os.path.join(tmp, "worker"), "w").write(str(tids[1]))
open(os.path.join(tmp, "loaded"), "w").close()
open(os.path.join(tmp, "go")).read(1)
d0 = delay()
for step in range(40):
    sb.stepblame_step(step)
    if mode == "chain":
        req.set()
        done.wait()
        done.clear()
    else:
        work()
sb.stepblame_step(40)
open(os.path.join(tmp, "delay"), "w").write(str(delay() - d0))
PY
# quota MODE: the program in the cgroup, recorded; checks the report against the
# kernel's throttled time and the program's run delay
quota() {
	local mode=$1 name=$2 t0 t1 rc prc rec
	rm -f "$tmp/go" "$tmp/loaded" "$tmp/delay" "$tmp/worker"
	mkfifo "$tmp/go"
	sh -c 'echo $$ >"$1/cgroup.procs" && exec taskset -c "$2" python3 "$3/prog.py" "$4" "$3" "$5"' \
		_ "$cg" $cpu "$tmp" "$lib" "$mode" >"$tmp/prog.out" 2>&1 &
	prog=$!
	# attached once the program runs with the library mapped: a library loaded after the
	# attach gets its probe only at the next rescan, a second later (docs/ARCHITECTURE.md)
	for _ in $(seq 300); do [ -e "$tmp/loaded" ] && break; sleep 0.05; done
	"$STEPBLAME" record -p $prog -d 60 -o "$tmp/trace.sbt" >"$tmp/record.out" 2>&1 &
	rec=$!
	wait_attached "$tmp/record.out" 30 $rec
	t0=$(throttled_ns)
	echo go >"$tmp/go"
	wait $prog; prc=$?
	prog=
	t1=$(throttled_ns)
	wait $rec; rc=$?
	if [ $rc != 0 ] || [ $prc != 0 ] || [ ! -s "$tmp/delay" ]; then
		fail $name "record exited $rc, the program $prc: $(tail -2 "$tmp/record.out" "$tmp/prog.out" | tr '\n' ' ')"
		return 1
	fi
	if ! "$STEPBLAME" report "$tmp/trace.sbt" --format json -o "$tmp/r.json" 2>"$tmp/err" ||
	   ! "$STEPBLAME" report "$tmp/trace.sbt" -o "$tmp/r.txt" 2>>"$tmp/err"; then
		fail $name "report: $(head -1 "$tmp/err")"
		return 1
	fi
	[ -n "${STEPBLAME_KEEP:-}" ] && cp -r "$tmp" "$STEPBLAME_KEEP.$mode"
	python3 - "$tmp/r.json" "$((t1 - t0))" "$(cat "$tmp/delay")" "$hog" "$name" \
		"$(cat "$tmp/worker" 2>/dev/null)" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
kernel, delay, hog, name = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
worker = int(sys.argv[6]) if sys.argv[6] else None
MS = 1e6
steps = [s for s in rep["steps"] if not s.get("incomplete")]
thr = sum(b["ns"] for s in steps for b in s["blame"] if b["cause"] == "cpu_throttle")
# the hog's: its preemptions of the program's threads, directly or through the
# worker the main thread waited for
by_hog = sum(b["ns"] for s in steps for b in s["blame"]
             if b["cause"] in ("cpu_wait", "blocked") and b.get("culprit", {}).get("pid") == hog)
bad = []
if kernel < 300 * MS:
    bad.append("the kernel throttled the group only %.1f ms: no quota to measure" % (kernel / MS))
# the kernel's throttled time covers the capture's edges too (before the first mark,
# after the last): what the steps hold is at most that, and most of it
if thr < 0.8 * kernel - 20 * MS:
    bad.append("cpu_throttle %.1f ms, the kernel throttled the group %.1f ms" % (thr / MS, kernel / MS))
if thr > delay * 1.05 + 5 * MS:
    bad.append("cpu_throttle %.1f ms is more than the threads' run delay %.1f ms" % (thr / MS, delay / MS))
# the hog competes for the CPU when the group is not throttled: that wait is its
# cpu_wait (or blocked, through the worker), the rest of the run delay; none of
# the throttled time is
if by_hog > max(0, delay - thr) + 0.05 * delay + 5 * MS:
    bad.append("the hog blamed for %.1f ms, of the %.1f ms run delay outside cpu_throttle"
               % (by_hog / MS, max(0, delay - thr) / MS))
if worker is not None:
    # the main thread slept while the worker sat throttled: the worker is named
    on_worker = sum(b["ns"] for s in steps for b in s["blame"] if b["cause"] == "cpu_throttle"
                    and b.get("culprit", {}).get("tid") == worker)
    if on_worker < 0.8 * thr:
        bad.append("of %.1f ms cpu_throttle, %.1f ms names the worker thread it waited for"
                   % (thr / MS, on_worker / MS))
print("FAIL %s: " % name + "; ".join(bad) if bad else
      "PASS %s (cpu_throttle %.1f ms; the kernel: %.1f ms throttled, %.1f ms run delay; the hog %.1f ms)"
      % (name, thr / MS, kernel / MS, delay / MS, by_hog / MS))
PY
}
quota one $T || exit 0
if ! grep -q "cpu_throttle .* throttled: its cgroup's CPU quota" "$tmp/r.txt"; then
	fail ${T}_text "no tail line says the quota: $(grep -m1 '^  step' "$tmp/r.txt")"
else
	pass ${T}_text
fi
# the main thread asleep on a worker that sits throttled: the quota's, through the worker
quota chain ${T}_chain || exit 0
if ! grep -q "cpu_throttle .* waited for .*, runnable, throttled: its cgroup's CPU quota" "$tmp/r.txt"; then
	fail ${T}_chain_text "no tail line names the throttled worker: $(grep -m1 '^  step' "$tmp/r.txt")"
else
	pass ${T}_chain_text
fi
