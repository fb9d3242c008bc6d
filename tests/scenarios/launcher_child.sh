#!/usr/bin/env bash
# The trainer is not the process stepblame is given but its child: a shell
# script, torchrun or a job launcher started it. The child's step marks are
# the steps (their USDT note gets probes when the child's mappings are first
# read), its GPU channel is the timeline, and its interference is blamed as in
# a direct capture (scored against simtrainer's ground truth). Two trainers
# under one launcher (two ranks): the report is the ranks' report, each rank
# its own steps and GPU timeline, never a mix. The shell's environment has no
# RANK: the trainer's is the capture's identity and the live metrics' label.
set -u
. "$(dirname "$0")/../lib.sh"
T=launcher_child

need_bpf $T || exit 0
if [ -x "${PLAIN_SIMTRAINER:-}" ]; then SIMTRAINER=$PLAIN_SIMTRAINER; fi
need_sim $T || exit 0
if ! command -v python3 >/dev/null; then skip $T "python3 is not installed"; exit 0; fi

tmp=$(mktemp -d /var/tmp/launcher_child.XXXXXX)
pids=
cleanup() {
	exec 2>/dev/null
	for p in $pids; do pkill -9 -P $p; kill -9 $p; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# the shell's children, once one is there
child_of() { # pid: its first child's pid
	for _ in $(seq 50); do
		c=$(pgrep -P "$1" | head -1)
		[ -n "$c" ] && { echo "$c"; return 0; }
		sleep 0.1
	done
	return 1
}

# 1. record -p on the shell that runs the trainer (the `; st=$?` keeps bash
#    from exec'ing it: a real child), interference injected at known steps
env -u RANK -u LOCAL_RANK -u WORLD_SIZE -u TORCHELASTIC_RUN_ID -u SLURM_JOB_ID -u JOB_ID \
	-u SLURM_PROCID -u SLURM_LOCALID -u SLURM_NTASKS \
	bash -c "RANK=3 LOCAL_RANK=1 TORCHELASTIC_RUN_ID=job-a \"$SIMTRAINER\" --steps 140 --kernels 8 --kernel-us 500 --start-delay-ms 200 \
	--truth \"$tmp/truth.jsonl\" --ckpt-dir \"$tmp\" --quiet \
	--inject hog@40-46:-20 --inject stall@70:60 --inject ckpt@100:64; st=\$?; exit \$st" \
	>"$tmp/sim1.out" 2>&1 &
sh1=$!
pids="$pids $sh1"
kid=$(child_of $sh1) || { fail $T "the shell started no trainer"; exit 0; }
# the trainer held until the probes are attached: its injected steps inside the capture
hold_trainer $kid "$SIMTRAINER"
"$STEPBLAME" record -p $sh1 -d 60 -o "$tmp/1.sbtrace" >"$tmp/1.log" 2>&1 &
rec=$!
release_when_attached $kid $rec "$tmp/1.log"
wait $rec
rc=$?
wait $sh1
if [ $rc != 0 ] || [ ! -s "$tmp/truth.jsonl" ]; then
	fail $T "record exited $rc, truth $(ls "$tmp" | tr '\n' ' '): $(tail -2 "$tmp/1.log" | tr '\n' ' ')"
	exit 0
fi
"$STEPBLAME" report "$tmp/1.sbtrace" -f json -o "$tmp/1.json" 2>"$tmp/1.err" &&
	"$STEPBLAME" report "$tmp/1.sbtrace" >"$tmp/1.txt" 2>&1 ||
	{ fail $T "report: $(head -2 "$tmp/1.err")"; exit 0; }
python3 - "$tmp/1.json" $sh1 $kid <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
sh, kid = int(sys.argv[2]), int(sys.argv[3])
c, steps = d["capture"], [s for s in d["steps"] if not s.get("incomplete")]
nums = [s["step"] for s in steps]
# the steps that ended before the child's GPU channel was read (its first
# records come up to a tick and the collector's 100 ms look after the first
# mark) are left out, and only those: the first few. How few is a time, not a
# count (the steps are about 5 ms): the records begin within half a second of
# the first step, where a look once a second would lose a second's steps
before, nb = c.get("gpu_from_ns"), c.get("gpu_before_steps", 0)
lead = [s for s in d["steps"] if before and s["end_ns"] <= before and not s.get("incomplete")]
late_ms = (before - d["steps"][0]["start_ns"]) / 1e6 if before and d["steps"] else 0
if d["target"]["pid"] != sh:
    print("FAIL launcher_child_steps: the report's target is %d, not the shell %d" % (d["target"]["pid"], sh))
elif c.get("mark_pid") != kid or len(steps) + nb < 138 or late_ms > 500 or lead:
    print("FAIL launcher_child_steps: %d complete steps marked by pid %s (the trainer is %d; 140 steps "
          "run), %d before the GPU records (which began %.0f ms after the first step), %d complete "
          "before them" % (len(steps), c.get("mark_pid"), kid, nb, late_ms, len(lead)))
elif nums != list(range(nums[0], nums[0] + len(nums))):
    print("FAIL launcher_child_steps: step numbers not consecutive: %s" % nums[:20])
else:
    print("PASS launcher_child_steps (%d steps of the trainer, pid %d, under the shell %d; %d before "
          "its GPU records, which began %.0f ms after the first step)" % (len(steps), kid, sh, nb, late_ms))
# the probes' cost is estimated on the marking child's events, as on a trainer
# attached directly: a step of 8 launches, a loader hand-off and a GPU wait
# switches a few times at least
counted = [s for s in steps if s.get("tracer_events", 0) > 0 and s.get("tracer_ns", 0) > 0]
if len(counted) < 0.9 * len(steps):
    print("FAIL launcher_child_tracer: %d of %d steps have a tracer estimate (events %s)"
          % (len(counted), len(steps), [s.get("tracer_events") for s in steps[:8]]))
else:
    print("PASS launcher_child_tracer (%d of %d steps; median %d events)" % (
        len(counted), len(steps), sorted(s["tracer_events"] for s in steps)[len(steps) // 2]))
# the shell's environment has no ids; the trainer's RANK and job are the capture's
idn = d.get("identity", {})
if (idn.get("rank"), idn.get("local_rank"), idn.get("job")) == ("3", "1", "job-a"):
    print("PASS launcher_child_ids (rank, local_rank and job of the marking child)")
else:
    print("FAIL launcher_child_ids: identity %s" % idn)
EOF
if grep -q "marked by usdt in simtrainer, rank 3 of bash\[$sh1\] (pid $kid)" "$tmp/1.txt"; then
	pass ${T}_text_says_whose
else
	fail ${T}_text_says_whose "the header does not name the marking child: $(head -1 "$tmp/1.txt")"
fi
# the marking process's own threads are named as the trainer's ("loader-1[TID]"),
# not as threads of some child of the shell; the stall of step 70 is a wait on one
line70=$(grep "^  step 70:" "$tmp/1.txt")
if [ -z "$line70" ] || ! echo "$line70" | grep -q "waited for"; then
	fail ${T}_own_threads "no wait in step 70's line: ${line70:-(no line)}"
elif grep -q "(pid $kid) thread" "$tmp/1.txt"; then
	fail ${T}_own_threads "the trainer's threads named as another process's: $(grep -m1 "(pid $kid) thread" "$tmp/1.txt" | cut -c1-200)"
else
	pass ${T}_own_threads
fi
python3 "$(dirname "$0")/blame_check.py" accuracy ${T}_blame "$tmp/1.json" "$tmp/truth.jsonl"

# 2. two trainers under one launcher, two ranks (RANK 1 started first): the
#    report of the one trace is the ranks' report, each rank its own process's
#    steps and GPU channel, never a mix; rank 1's loaders stall 20 ms in steps
#    200-209, and there it is last, by the stall (with two ranks the median
#    rank is the other), blocked on a loader. The per-step stream keeps the
#    first marking process's steps.
#    (each waits for its GPU channel to be read before its first step: however
#    long the attach takes on a loaded machine, the stalled steps are recorded)
bash -c "RANK=1 \"$SIMTRAINER\" --steps 1500 --kernels 8 --wait-agent 30 --inject stall@200-209:20 --quiet & RANK=0 \"$SIMTRAINER\" --steps 1500 --kernels 8 --wait-agent 30 --quiet; wait" \
	>"$tmp/sim2.out" 2>&1 &
sh2=$!
pids="$pids $sh2"
sleep 0.5
kids2=$(pgrep -P $sh2 | tr '\n' ' ')
"$STEPBLAME" record -p $sh2 -d 9 -o "$tmp/2.sbtrace" >"$tmp/2.log" 2>&1
rc=$?
wait $sh2
"$STEPBLAME" report "$tmp/2.sbtrace" -f json -o "$tmp/2.json" 2>"$tmp/2.err" &&
	"$STEPBLAME" report "$tmp/2.sbtrace" >"$tmp/2.txt" 2>&1 &&
	"$STEPBLAME" report "$tmp/2.sbtrace" -f jsonl -o "$tmp/2.jsonl" 2>>"$tmp/2.err" ||
	{ fail ${T}_two_ranks "record $rc, report: $(head -2 "$tmp/2.err")"; exit 0; }
python3 - "$tmp/2.json" "$kids2" "$tmp/2.jsonl" <<'EOF'
import json, sys
T = "launcher_child_two_ranks"
d = json.load(open(sys.argv[1]))
kids = {int(k) for k in sys.argv[2].split()}
if d.get("schema", {}).get("name") != "stepblame-ranks":
    print("FAIL %s: not the ranks' report: %s" % (T, json.dumps(d)[:300])); sys.exit(0)
ranks = d["ranks"]
procs = [r.get("process", {}).get("pid") for r in ranks]
ids = [r.get("identity", {}).get("rank") for r in ranks]
both = [s for s in d["steps"] if None not in s["own_ns"]]
nums = [s["step"] for s in both]
if set(procs) != kids or ids != ["0", "1"]:
    print("FAIL %s: ranks %s with RANK %s; the trainers %s" % (T, procs, ids, sorted(kids)))
elif len(both) < 100 or nums != list(range(nums[0], nums[0] + len(nums))):
    print("FAIL %s: %d steps both ranks have, numbers %s" % (T, len(both), nums[:20]))
elif not all(r["collectives_seen"] for r in ranks):
    print("FAIL %s: a rank without its GPU timeline (collectives seen: %s)"
          % (T, [r["collectives_seen"] for r in ranks]))
else:
    print("PASS %s (%d steps aligned; ranks %s, each with its GPU timeline)" % (T, len(both), procs))
# the stalled steps: rank 1 last by most of the 20 ms, blocked on a loader
stalled = [s for s in both if 200 <= s["step"] <= 209]
bad = [s["step"] for s in stalled if not (
    s.get("last_rank") == 1 and s["straggle"] and s["behind_ns"] > 15e6 and
    s["blame"] and s["blame"][0]["cause"] == "blocked" and
    s["blame"][0].get("culprit", {}).get("comm", "").startswith("loader-"))]
if len(stalled) != 10 or bad:
    print("FAIL %s_stall: %d stalled steps aligned; wrong: %s" % (T, len(stalled),
          "; ".join(json.dumps(s)[:250] for s in stalled if s["step"] in bad[:2])))
else:
    print("PASS %s_stall (rank 1 last in the 10 stalled steps, by %.1f-%.1f ms, blocked on a loader)"
          % (T, min(s["behind_ns"] for s in stalled) / 1e6, max(s["behind_ns"] for s in stalled) / 1e6))
# the per-step stream keeps one process's steps, never a mix
lines = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
steps = [l for l in lines if "step" in l and "duration_ns" in l and not l.get("incomplete")]
sn = [s["step"] for s in steps]
if len(steps) < 100 or sn != list(range(sn[0], sn[0] + len(sn))):
    print("FAIL %s_jsonl: %d steps, numbers %s" % (T, len(steps), sn[:20]))
else:
    print("PASS %s_jsonl (%d steps of one process)" % (T, len(steps)))
EOF
if grep -q "^stepblame report: 2 ranks" "$tmp/2.txt" && grep -q "^  rank 1 (simtrainer\[" "$tmp/2.txt"; then
	pass ${T}_two_ranks_text
else
	fail ${T}_two_ranks_text "not the ranks' report: $(head -3 "$tmp/2.txt" | tr '\n' ' ')"
fi

# 3. stepblame run on a launcher: the collector reaches the trainer through the
#    environment, and its channel, the child's, is the GPU timeline from the first step.
#    The child's program is read at the first tick after its exec (100 ms): a trainer
#    that marks its first step half a second after its start (a Python trainer takes
#    seconds to import) has all its steps; one read at the second's tick would not
"$STEPBLAME" run -o "$tmp/3.sbtrace" -- bash -c "\"$SIMTRAINER\" --steps 600 --kernels 8 --start-delay-ms 500 --quiet; st=\$?; exit \$st" \
	>"$tmp/3.log" 2>&1
rc=$?
"$STEPBLAME" report "$tmp/3.sbtrace" -f json -o "$tmp/3.json" 2>"$tmp/3.err" ||
	{ fail ${T}_run "run exited $rc; report: $(head -2 "$tmp/3.err")"; exit 0; }
python3 - "$tmp/3.json" "$tmp/3.log" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
m = re.search(r"reading the simtrainer channel of PID (\d+) \(a descendant of the target\)", log)
steps = [s for s in d["steps"] if not s.get("incomplete")]
gpu = sum(1 for s in steps if s.get("gpu_busy_ns", 0) > 0)
if not m:
    print("FAIL launcher_child_run: the child's channel was not read: %s" % [l for l in log.splitlines() if "GPU" in l])
elif not d["capture"]["gpu_timeline"] or d["capture"].get("mark_pid") != int(m.group(1)):
    print("FAIL launcher_child_run: gpu_timeline %s, steps marked by %s, channel of %s"
          % (d["capture"]["gpu_timeline"], d["capture"].get("mark_pid"), m.group(1)))
elif len(steps) < 598 or gpu < len(steps) * 0.8:
    print("FAIL launcher_child_run: %d complete steps of 600, %d with GPU work" % (len(steps), gpu))
else:
    print("PASS launcher_child_run (%d steps, %d with GPU work, channel of the child %s)" % (len(steps), gpu, m.group(1)))
EOF

# 4. live metrics of a shell: its environment has no RANK; the trainer's labels them
#    from its first step (what a torchrun worker's environment carries). Steps are
#    counted once the GPU timeline's 3 s window has passed them: the first about
#    5.5 s after the attach starts on a quiet machine, 6.3 s beside a CPU hog
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
env -u RANK -u LOCAL_RANK -u WORLD_SIZE -u TORCHELASTIC_RUN_ID -u SLURM_JOB_ID -u JOB_ID \
	-u SLURM_PROCID -u SLURM_LOCALID -u SLURM_NTASKS \
	bash -c "RANK=5 \"$SIMTRAINER\" --steps 3000 --kernels 8 --quiet; st=\$?; exit \$st" \
	>"$tmp/sim4.out" 2>&1 &
sh4=$!
pids="$pids $sh4"
sleep 0.3
"$STEPBLAME" attach -p $sh4 -d 12 --metrics-addr "127.0.0.1:$port" >"$tmp/4.out" 2>"$tmp/4.log" &
att=$!
python3 - "$port" <<'PY'
import re, sys, time, urllib.request
url, last = "http://127.0.0.1:%s/metrics" % sys.argv[1], ""
deadline = time.monotonic() + 11.5
while time.monotonic() < deadline:
    try:
        last = urllib.request.urlopen(url, timeout=1).read().decode()
    except OSError:
        pass
    m = re.search(r"^stepblame_steps_total\{([^}]*)\} (\d+)", last, re.M)
    if m and 'rank="5"' in m.group(1) and int(m.group(2)) > 0:
        print("PASS launcher_child_metrics_rank (%s, %s steps)" % (m.group(1), m.group(2)))
        break
    time.sleep(0.2)
else:
    print("FAIL launcher_child_metrics_rank: %s" % [l for l in last.splitlines() if l.startswith("stepblame_steps_total")])
PY
# done with it (an interrupted attach ends as at its deadline)
kill -INT $att 2>/dev/null
wait $att
kill $sh4 2>/dev/null
wait $sh4 2>/dev/null || true

# 5. a launcher that execs the trainer (env, taskset, nice): the process is the same,
#    its name changes; the report names it by the trainer's name, and says the first
"$STEPBLAME" run -o "$tmp/5.sbtrace" -- env SB_LAUNCHED=1 "$SIMTRAINER" --steps 120 --kernels 4 --quiet \
	>"$tmp/5.txt" 2>"$tmp/5.log"
rc=$?
"$STEPBLAME" report "$tmp/5.sbtrace" -f json -o "$tmp/5.json" 2>"$tmp/5.err" ||
	{ fail ${T}_exec "run exited $rc; report: $(head -2 "$tmp/5.err")"; exit 0; }
python3 - "$tmp/5.json" "$tmp/5.txt" <<'EOF'
import json, re, sys
t = json.load(open(sys.argv[1]))["target"]
first = open(sys.argv[2]).readline()
want = r"^stepblame report: simtrainer\[%d\] \(env when attached\)" % t["pid"]
if t.get("comm") != "env" or t.get("comm_end") != "simtrainer" or not re.match(want, first):
    print("FAIL launcher_child_exec: target %s; first line %r" % (t, first))
else:
    print("PASS launcher_child_exec (%s)" % first.split(",")[0])
EOF
