#!/usr/bin/env bash
# Record simtrainer with every kind of injection and check that each one is
# visible in the trace, inside the steps where simtrainer says it injected it
# (its ground truth): the hog as the task that ran while the launcher waited,
# page faults, allocator calls, migrations, blocking I/O, the loader stall.
set -u
. "$(dirname "$0")/../lib.sh"
T=sim_record

need_bpf $T || exit 0
need_sim $T || exit 0

STEPS=50 K=8
tmp=$(mktemp -d /var/tmp/sim_record.XXXXXX)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# ckpt needs a disk: /var/tmp, not tmpfs, so that fsync really sleeps in D state
# its launcher's ids, one of them hostile (a quote and a newline): the identity check below
RANK=5 LOCAL_RANK=1 WORLD_SIZE=8 TORCHELASTIC_RUN_ID=$'job-42"\nx' \
"$SIMTRAINER" --steps $STEPS --kernels $K --kernel-us 500 --wait-agent 30 --start-delay-ms 200 \
	--truth "$tmp/truth.jsonl" --ckpt-dir "$tmp" --quiet \
	--inject hog@8-12:-10 --inject faults@16:64 --inject alloc@20:20000 \
	--inject migrate@24:20 --inject stall@28:60 --inject ckpt@32:64 \
	>"$tmp/sim.out" 2>&1 &
sim=$!
steal0=$(awk '/^cpu /{print $9}' /proc/stat)
# --max-overhead 0: the allocator probes attached throughout, so that the
# allocator storm of step 20 is in the trace whenever it comes (with a limit
# the guard starts them duty-cycled: a sample; tests/bpf/test_guard.c tests that)
"$STEPBLAME" record -p "$sim" -d 60 --max-overhead 0 -o "$tmp/trace.sbt" >"$tmp/record.out" 2>&1
rc=$?
steal1=$(awk '/^cpu /{print $9}' /proc/stat)
wait "$sim"; simrc=$?; sim=
if [ $rc != 0 ] || [ ! -s "$tmp/trace.sbt" ]; then
	fail $T "record exited $rc: $(tail -3 "$tmp/record.out" | tr '\n' ' ')"; exit 0
fi
# record hands its system-call tracepoints to a process that outlives it, whose
# exit is what the kernel's slow release waits for (docs/ARCHITECTURE.md,
# "System-call probes"): within 20 s no program of a capture may be left loaded
# (tests run one at a time; tp_enter_N and tp_exit are the recorder's names)
if command -v bpftool >/dev/null; then
	ours() { bpftool prog show 2>/dev/null | grep -cE '^[0-9]+: [a-z_]+ +name (tp_enter_[0-9]|tp_exit|btf_switch|raw_switch) '; }
	for i in $(seq 40); do [ "$(ours)" = 0 ] && break; sleep 0.5; done
	left=$(ours)
	if [ "$left" = 0 ]; then pass ${T}_released; echo "    (gone $(( (i - 1) * 500 )) ms after record exited)"
	else fail ${T}_released "$left of the capture's programs still loaded 20 s after record exited: $(bpftool prog show | grep -E 'tp_enter|tp_exit|switch' | head -3 | tr '\n' ' ')"; fi
elif [ "${STEPBLAME_REQUIRE_BPF:-}" = 1 ]; then
	fail ${T}_released "bpftool is not installed"
else
	skip ${T}_released "bpftool is not installed"
fi
if [ $simrc != 0 ] || [ ! -s "$tmp/truth.jsonl" ]; then
	fail $T "simtrainer exited $simrc: $(tail -3 "$tmp/sim.out" | tr '\n' ' ')"; exit 0
fi
if ! "$STEPBLAME" dump "$tmp/trace.sbt" --format jsonl >"$tmp/dump.jsonl" 2>"$tmp/dump.err"; then
	fail $T "dump failed: $(head -1 "$tmp/dump.err")"; exit 0
fi
ckpt_fs=$(stat -f -c %T "$tmp")
# an ASan simtrainer (make test) allocates through ASan, not the libc the probes watch
asan=0; ldd "$SIMTRAINER" 2>/dev/null | grep -q libasan && asan=1

# Kernel threads (children of kthreadd): a wakeup from an interrupt (a timed wait's
# timer) names whatever task the interrupt found on the CPU, and a kernel thread
# found there is that, not a misattributed waker. A user task outside the trainer
# still fails the check (waker attribution from the wakee's CPU named the hog).
kthreads=","$(ps -e -o pid=,ppid= | awk '$1 == 2 || $2 == 2 { printf "%s,", $1 }')

# truth first, then the trace; one PASS/FAIL line per check
awk -v T=$T -v STEPS=$STEPS -v K=$K -v ckpt_fs="$ckpt_fs" -v asan=$asan -v kthreads="$kthreads" '
function num(k,   i, s) {
	i = index($0, "\"" k "\":"); if (!i) return -1
	s = substr($0, i + length(k) + 3); sub(/^"/, "", s)
	match(s, /^-?[0-9]+/); return RSTART ? substr(s, 1, RLENGTH) + 0 : -1
}
function str(k,   i, s) {
	i = index($0, "\"" k "\":\""); if (!i) return ""
	s = substr($0, i + length(k) + 4); return substr(s, 1, index(s, "\"") - 1)
}
function widen(kind, a, b) {
	if (!(kind in lo) || a < lo[kind]) lo[kind] = a
	if (!(kind in hi) || b > hi[kind]) hi[kind] = b
}
function inside(kind, t) { return (kind in lo) && t >= lo[kind] && t <= hi[kind] }
function overlaps(kind, a, b) { return (kind in lo) && a <= hi[kind] && b >= lo[kind] }
function check(name, ok, why) { if (ok) print "PASS " T "_" name; else print "FAIL " T "_" name ": " why }

FNR == NR {
	if (index($0, "{\"config\":") == 1) { pid = num("pid"); ltid = num("launcher_tid"); next }
	if (index($0, "{\"end\":") == 1) { run_lo = num("start_ns"); run_hi = num("end_ns"); next }
	kind = str("kind"); widen(kind, num("start_ns"), num("end_ns"))
	if (kind == "hog") hogpid = num("culprit_pid")
	if (kind == "faults") pages = num("pages")
	if (kind == "migrate") moves = num("moves")
	next
}
{
	type = str("type"); tid = num("tid"); ts = num("ts")
	if (type == "step" && str("source") == "usdt") { steps++; if (num("step") != steps - 1) stepgap++ }
	else if (type == "gpu" && str("kind") == "kernel") kernels++
	else if (type == "switch_in" && tid == ltid && inside("hog", ts) && num("wait_ns") > 0) {
		wlo[nw] = ts - num("wait_ns"); whi[nw++] = ts  # the launcher was runnable, not running
	}
	else if (type == "runslice" && num("pid") == hogpid && overlaps("hog", num("start_ns"), ts)) {
		hlo[hog_slices] = num("start_ns"); hhi[hog_slices++] = ts
		if (str("comm") == "noisy-neighbor") hog_named++
	}
	else if (type == "fault" && tid == ltid && inside("faults", ts)) faults++
	else if (type == "fault_run" && tid == ltid && inside("faults", num("start_ns"))) faults += num("count")
	else if (type == "alloc" && tid == ltid && inside("alloc", ts)) allocs++
	else if (type == "mmsys" && tid == ltid && inside("alloc", ts)) mmsys++
	else if (type == "migrate" && tid == ltid && inside("migrate", ts)) migrations++
	else if (type == "switch_out" && tid == ltid && inside("ckpt", ts) && str("state") == "disk") disk++
	else if (type == "switch_out" && tid == ltid && inside("stall", ts) && str("state") == "sleep") stall_sleep++
	else if (type == "wakeup" && tid == ltid && inside("stall", ts) && num("waker_pid") == pid &&
		 index(str("waker_comm"), "loader-") == 1) stall_woken++
	if (type == "host" && !agent) { i = index($0, "agent_pid="); if (i) agent = substr($0, i + 10) + 0 }
	if (type == "switch_out" && tid == ltid) lstate = str("state")
	# during the steps only simtrainer threads (futexes) and the CPU stopper wake the
	# launcher; I/O completion (the ckpt step) may come from any context. And the
	# agent itself, for real, from an uninterruptible sleep: its reads of
	# /proc/PID/maps hold the mmap lock of the trainer, and an mmap of the
	# launcher waits for it (a lock hand-off, not an interrupt)
	if (type == "wakeup" && tid == ltid && ts >= run_lo && ts <= run_hi && !inside("ckpt", ts)) {
		wakeups++
		if (agent && num("waker_pid") == agent && lstate == "disk")
			agent_locks++
		else if (num("waker_pid") != pid && index(str("waker_comm"), "migration/") != 1 &&
		    !index(kthreads, "," num("waker_pid") ",")) {
			alien++; if (!(str("waker_comm") in aliens)) aliens[str("waker_comm")] = 1
		}
	}
}
END {
	check("truth", pid > 0 && ltid > 0 && hogpid > 0, "truth file incomplete")
	check("steps", steps == STEPS && !stepgap, steps + 0 " USDT steps, want " STEPS)
	check("gpu", kernels == STEPS * K, kernels + 0 " kernel records, want " STEPS * K)
	for (i = 0; i < hog_slices; i++)
		for (j = 0; j < nw; j++)
			if (hlo[i] < whi[j] && hhi[i] > wlo[j]) { while_waiting++; break }
	check("hog", hog_slices > 0 && hog_named == hog_slices && while_waiting > 0,
	      hog_slices + 0 " runslices of the hog (pid " hogpid "), " hog_named + 0 \
	      " named noisy-neighbor, " while_waiting + 0 " while the launcher waited for its CPU")
	check("faults", faults >= pages / 4, faults + 0 " launcher faults in the faults step, " pages " pages touched")
	check("alloc", asan ? mmsys > 0 : allocs > 0 && mmsys > 0,
	      allocs + 0 " alloc + " mmsys + 0 " mmsys events in the alloc step" (asan ? " (ASan build)" : ""))
	check("migrate", migrations >= moves / 2, migrations + 0 " migrations of the launcher, " moves " moves made")
	if (ckpt_fs == "tmpfs" || ckpt_fs == "ramfs")
		print "SKIP " T "_ckpt: checkpoint dir is on " ckpt_fs ", fsync does not block"
	else
		check("ckpt", disk > 0, "no D-state switch_out of the launcher in the ckpt step")
	names = ""; for (a in aliens) names = names " " a
	check("wakers", wakeups > 0 && !alien, alien + 0 " of " wakeups + 0 \
	      " launcher wakeups name a waker that cannot wake it:" names)
	if (agent_locks) print "    (" agent_locks " wakeups of the launcher by the agent, from an uninterruptible sleep)"
	check("stall", stall_sleep > 0 && stall_woken > 0,
	      stall_sleep + 0 " sleeps of the launcher, " stall_woken + 0 " wakeups by a loader in the stall step")
}' "$tmp/truth.jsonl" "$tmp/dump.jsonl"

# The hypervisor's steal (docs/ARCHITECTURE.md, "Steal"): what the runslices say
# was stolen inside them is within their own time and at most what the kernel
# counted for the machine over the capture (/proc/stat, in clock ticks, plus a
# tick per CPU of rounding at each end); a count read from the wrong place (an
# absolute counter, another CPU's, garbage) breaks one or the other.
python3 - "$tmp/dump.jsonl" "$steal0" "$steal1" "$(getconf CLK_TCK)" "$(nproc --all)" <<'PY'
import json, sys
path, s0, s1, hz, ncpu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
total, bad, n, with_steal = 0, [], 0, 0
for line in open(path):
    r = json.loads(line)
    if r.get("type") != "runslice":
        continue
    n += 1
    st = r.get("steal_us", 0) * 1000
    if st:
        with_steal += 1
    total += st
    if st > r["dur_ns"] + 1000000:
        bad.append("%s: %d us stolen in a %d us slice" % (r["comm"], st // 1000, r["dur_ns"] // 1000))
limit = ((s1 - s0) + 2 * ncpu) * 1000000000 // hz
ok = not bad and total <= limit
print(("PASS" if ok else "FAIL") + " sim_record_steal: %d runslices, %d with steal, %.2f ms stolen in "
      "them; the kernel counted %.2f ms for the machine" % (n, with_steal, total / 1e6, (s1 - s0) * 1e3 / hz) +
      ("; " + "; ".join(bad[:3]) if bad else "") + ("" if total <= limit else "; more than the kernel's"))
PY

# The text report under a locale without UTF-8 (LANG=C) is ASCII, the same
# report as under C.UTF-8 with µs spelled us and the dash -.
LC_ALL=C "$STEPBLAME" report "$tmp/trace.sbt" >"$tmp/c.txt" 2>&1
LC_ALL=C.UTF-8 "$STEPBLAME" report "$tmp/trace.sbt" >"$tmp/u.txt" 2>&1
python3 - "$tmp/c.txt" "$tmp/u.txt" <<'PY'
import sys
c, u = open(sys.argv[1], "rb").read(), open(sys.argv[2], encoding="utf-8").read()
want = u
for a, b in (("\u00b5", "u"), ("\u2014", "-"), ("\u00b7", "*"), ("\u2248", "~"), ("\u2192", "->")):
    want = want.replace(a, b)
bad = [i for i, ch in enumerate(c) if ch >= 0x80]
ok = not bad and c.decode() == want and "\u2014" in u
print(("PASS" if ok else "FAIL") + " sim_record_ascii" + ("" if ok else
      ": %d non-ASCII bytes under LC_ALL=C, %s; the UTF-8 report %s a dash" %
      (len(bad), "the same report otherwise" if c.decode(errors="replace") == want else "a different report",
       "has" if "\u2014" in u else "lacks")))
PY

# report - reads the trace from standard input: the same report as from the file
"$STEPBLAME" report "$tmp/trace.sbt" -f json -o "$tmp/file.json" 2>/dev/null
cat "$tmp/trace.sbt" | "$STEPBLAME" report - -f json -o "$tmp/stdin.json" 2>"$tmp/stdin.err"
if [ -s "$tmp/file.json" ] && cmp -s "$tmp/file.json" "$tmp/stdin.json"; then
	pass ${T}_report_stdin
else
	fail ${T}_report_stdin "report - differs from report FILE: $(head -1 "$tmp/stdin.err")"
fi

# Whose trace it is (schemas/report.md, "Identity"): the host, its boot, the trainer,
# the ids its launcher set (tamed), the recorder; in the report and in every JSONL line
t_start=$(date +%s)
"$STEPBLAME" report "$tmp/trace.sbt" -f jsonl -o "$tmp/lines.jsonl" 2>/dev/null
python3 - "$tmp/file.json" "$tmp/lines.jsonl" "$(hostname)" "$(cat /proc/sys/kernel/random/boot_id)" \
	"$("$STEPBLAME" -V | cut -d' ' -f2)" "$t_start" <<'PY'
import json, sys
doc, lines = json.load(open(sys.argv[1])), [json.loads(l) for l in open(sys.argv[2])]
host, boot, ver, now = sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
i = doc.get("identity", {})
want = {"host": host, "boot_id": boot, "pid": doc["target"]["pid"], "rank": "5", "local_rank": "1",
        "world_size": "8", "job": "job-42__x", "stepblame_version": ver}
bad = [k for k, v in want.items() if i.get(k) != v]
if not (0 < i.get("agent_pid", 0) != i.get("pid")):
    bad.append("agent_pid")
if abs(i.get("start_realtime_ns", 0) / 1e9 - now) > 120:
    bad.append("start_realtime_ns")
if not lines or any(l.get("identity") != i for l in lines):
    bad.append("jsonl lines")
print(("PASS" if not bad else "FAIL") + " sim_record_identity" +
      ("" if not bad else ": %s wrong in %s" % (bad, json.dumps(i))))
PY
