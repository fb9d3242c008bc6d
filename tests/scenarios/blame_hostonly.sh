#!/usr/bin/env bash
# Host-only mode (no GPU timeline: record --no-gpu): blame covers each whole
# step on the thread that marks it, sums to the step time, and still names the
# hog that took the launcher's CPU and the loader the launcher waited for.
set -u
. "$(dirname "$0")/../lib.sh"
T=blame_hostonly

need_bpf $T || exit 0
need_sim $T || exit 0
if ! command -v python3 >/dev/null; then skip $T "python3 is not installed"; exit 0; fi

tmp=$(mktemp -d /var/tmp/blame_hostonly.XXXXXX)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$SIMTRAINER" --steps 50 --kernels 8 --kernel-us 500 --start-delay-ms 200 --mark usdt \
	--truth "$tmp/truth.jsonl" --quiet --inject hog@10-14:-10 --inject stall@30:60 \
	>"$tmp/sim.out" 2>&1 &
sim=$!
# the injected steps inside the capture, however long the probes take to attach
hold_trainer "$sim" "$SIMTRAINER"
"$STEPBLAME" record -p "$sim" -d 90 --no-gpu -o "$tmp/trace.sbt" >"$tmp/record.out" 2>&1 &
rec=$!
release_when_attached "$sim" $rec "$tmp/record.out"
wait $rec
rc=$?
wait "$sim"; simrc=$?; sim=
if [ $rc != 0 ] || [ $simrc != 0 ] || [ ! -s "$tmp/trace.sbt" ]; then
	fail $T "record exited $rc, simtrainer $simrc: $(tail -2 "$tmp/record.out" | tr '\n' ' ')"; exit 0
fi
if ! "$STEPBLAME" report "$tmp/trace.sbt" --format json -o "$tmp/r.json" 2>"$tmp/err"; then
	fail $T "report: $(head -1 "$tmp/err")"; exit 0
fi
python3 - "$tmp/r.json" "$tmp/truth.jsonl" <<'PY'
import json, sys
T = "blame_hostonly"
rep = json.load(open(sys.argv[1]))
truth = [json.loads(l) for l in open(sys.argv[2])]
steps = {s["step"]: s for s in rep["steps"] if not s["incomplete"]}
bad = [s["step"] for s in steps.values() if s["gpu_timeline"] or sum(b["ns"] for b in s["blame"]) != s["duration_ns"]]
print(("PASS %s_whole_steps" % T) if steps and not bad and not rep["capture"]["gpu_timeline"] else
      "FAIL %s_whole_steps: steps whose blame is not their whole time, or a GPU timeline: %s" % (T, bad[:5]))
def named(step, pid, tid=None):
    s = steps.get(step)
    return s and any("culprit" in b and b["culprit"]["pid"] == pid and (tid is None or b["culprit"]["tid"] == tid)
                     for b in s["blame"])
hog = [t for t in truth if t.get("kind") == "hog"]
mid = [t for t in hog if hog[0]["step"] < t["step"] < hog[-1]["step"]]
durs = sorted(s["duration_ns"] for s in steps.values())
median = durs[len(durs) // 2] if durs else 0
me = rep["target"]["pid"]
miss, busy = [], []
for t in mid:
    if named(t["step"], t["culprit_pid"]):
        continue
    # on a loaded machine another process may have held the launcher's CPU in
    # the hog's place: the report is right to name it instead, where it took
    # most of the step's excess
    s = steps.get(t["step"])
    others = sum(b["ns"] for b in s["blame"] if b["cause"] == "cpu_wait" and "culprit" in b and
                 b["culprit"]["pid"] not in (me, t["culprit_pid"])) if s else 0
    if s and others > 0.5 * (s["duration_ns"] - median) > 0:
        busy.append(t["step"])
    else:
        miss.append(t["step"])
if not mid or miss:
    print("FAIL %s_hog_named: steps %s do not name noisy-neighbor" % (T, miss or "none"))
elif len(busy) == len(mid):
    print("SKIP %s_hog_named: other processes held the CPU in the hog's place in steps %s" % (T, busy))
else:
    print("PASS %s_hog_named" % T + (" (steps %s: other processes held the CPU in its place)" % busy if busy else ""))
for t in truth:
    if t.get("kind") == "stall":
        s = steps.get(t["step"])
        blocked = sum(b["ns"] for b in s["blame"] if b["cause"] == "blocked" and "culprit" in b and
                      b["culprit"]["tid"] == t["culprit_tid"]) if s else 0
        # the loaders held their batches t["ms"]; past that the launcher waits for a
        # CPU to take its batch (cpu_wait, another task's on a busy machine), not for them
        want = min(t["end_ns"] - t["start_ns"], t.get("ms", 1e12) * 1000000)
        ok = blocked >= 0.9 * want
        print(("PASS" if ok else "FAIL") + " %s_stall: %.1f of %.1f ms blocked on %s[%d]" %
              (T, blocked / 1e6, want / 1e6, t["culprit_comm"], t["culprit_tid"]))
PY
