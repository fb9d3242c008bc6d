#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# The CUPTI collector on a real GPU: a small PyTorch training loop
# (tests/gpu/train.py, NVTX ranges "step N") under `stepblame run`, then checks
# on the trace. Prints PASS/FAIL/SKIP lines like the other tests and ends with
# a summary; exit status 1 on any failure. Takes about a minute.
#
# Where: a machine with an NVIDIA GPU whose driver supports CUDA 13 (the
# collector is built against CUPTI 13), PyTorch with CUDA, python3, root (BPF),
# no network needed. Nothing is built there: carry the static agent and the
# collector built here.
#
#   here:   make static && make            # build/static/stepblame, build/libstepblame-cupti.so
#   there:  sudo tests/gpu/check.sh        # from the repository root
#
# Settings (environment):
#   STEPBLAME   agent binary            (default build/static/stepblame)
#   COLLECTOR   the collector library   (default build/libstepblame-cupti.so)
#   PYTHON      python with torch       (default python3)
#   STEPS       training steps          (default 30)
#   OUT         where outputs go        (default tests/gpu/out); keep run.out,
#               report.txt and summary.txt there as the record of the run
#
# The collector needs libcupti.so.13 at run time. Its rpath names the CUDA
# directory of the build machine; if that is missing here, this script looks
# for libcupti.so.13 under /usr/local/cuda*, and in the Python packages
# (nvidia/cu13/lib, nvidia/cuda_cupti/lib), and puts its directory on
# LD_LIBRARY_PATH.
set -u
cd "$(dirname "$0")/../.."

STEPBLAME=${STEPBLAME:-build/static/stepblame}
COLLECTOR=${COLLECTOR:-build/libstepblame-cupti.so}
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-30}
OUT=${OUT:-tests/gpu/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TRACE=$OUT/train.sbt
pass=0 fail=0 skip=0

say() { echo "$@" | tee -a "$OUT/summary.txt"; }
ok() { say "PASS $1"; pass=$((pass + 1)); }
bad() { say "FAIL $1: $2"; fail=$((fail + 1)); }
finish() {
	say "$pass passed, $fail failed, $skip skipped"
	[ "$fail" = 0 ]
	exit $?
}
: >"$OUT/summary.txt"

# ---- preflight: say exactly what is missing ----
if [ "$(id -u)" != 0 ]; then
	say "SKIP gpu: needs root for BPF (sudo tests/gpu/check.sh)"; skip=1; finish
fi
for f in "$STEPBLAME" "$COLLECTOR"; do
	if [ ! -f "$f" ]; then
		bad preflight "$f is missing (build it: make static && make, then carry it here)"
		finish
	fi
done
STEPBLAME=$(cd "$(dirname "$STEPBLAME")" && pwd)/$(basename "$STEPBLAME")
COLLECTOR=$(cd "$(dirname "$COLLECTOR")" && pwd)/$(basename "$COLLECTOR")
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
	say "SKIP gpu: no NVIDIA GPU here (nvidia-smi -L fails)"; skip=1; finish
fi
nvidia-smi | sed -n '1,4p' >>"$OUT/summary.txt"
if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	say "SKIP gpu: $PYTHON has no PyTorch with CUDA"; skip=1; finish
fi
say "torch $("$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"

if ldd "$COLLECTOR" | grep -q 'libcupti.*not found'; then
	dir=""
	for d in /usr/local/cuda*/lib64 /usr/local/cuda*/extras/CUPTI/lib64 \
		$("$PYTHON" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null |
		  xargs -n1 2>/dev/null | sed 's|$|/nvidia/cu13/lib /nvidia/cuda_cupti/lib|' | xargs -n1 2>/dev/null); do
		if [ -e "$d/libcupti.so.13" ]; then dir=$d; break; fi
	done
	if [ -z "$dir" ]; then
		bad preflight "the collector needs libcupti.so.13 and none was found (install CUDA 13 CUPTI, or set LD_LIBRARY_PATH)"
		finish
	fi
	export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export STEPBLAME_CUPTI_LIB="$dir/libcupti.so.13"
	say "libcupti.so.13 from $dir"
fi

# ---- the run ----
export STEPBLAME_COLLECTOR=$COLLECTOR
rm -f "$TRACE"
timeout 300 "$STEPBLAME" run --step-nvtx '^step [0-9]+$' -o "$TRACE" -- \
	"$PYTHON" tests/gpu/train.py "$STEPS" >"$OUT/run.out" 2>"$OUT/run.err"
rc=$?
cat "$OUT/run.err" >>"$OUT/summary.txt"
if [ "$rc" = 0 ] && grep -q "train.py: $STEPS steps done" "$OUT/run.out"; then
	ok "run: train.py finished under stepblame run, exit status passed through"
else
	bad run "stepblame run exited $rc (see $OUT/run.err, $OUT/run.out)"
fi
if grep -q '^stepblame collector:' "$OUT/run.err"; then
	bad collector "the collector complained: $(grep '^stepblame collector:' "$OUT/run.err" | head -3 | tr '\n' ' ')"
else
	ok "collector: no complaint on the trainer's stderr"
fi
if [ ! -s "$TRACE" ]; then
	bad trace "no trace file $TRACE"
	finish
fi

# ---- the trace ----
"$STEPBLAME" dump --jsonl "$TRACE" >"$OUT/train.jsonl" 2>"$OUT/dump.err" ||
	bad dump "stepblame dump --jsonl failed: $(head -1 "$OUT/dump.err")"
"$PYTHON" - "$OUT/train.jsonl" "$STEPS" >"$OUT/checks.txt" 2>&1 <<'EOF'
import bisect, json, re, sys
from collections import defaultdict

path, steps = sys.argv[1], int(sys.argv[2])
gpu, switches, first_ts, last_ts, created = [], defaultdict(list), None, None, None
for line in open(path):
    r = json.loads(line)
    t = r.get("type")
    if t == "header":
        created = r["created_mono_ns"]
        continue
    if t == "trailer":
        last_ts = r["ts"]
    if t == "gpu":
        gpu.append(r)
    elif t in ("switch_in", "switch_out"):
        switches[r["tid"]].append((r["ts"], t))

def res(ok, name, detail):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        res.failed = True
res.failed = False

kinds = defaultdict(int)
for g in gpu:
    kinds[g["kind"]] += 1
print("# gpu records by kind: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
res(kinds["kernel"] > 0 and kinds["api"] > 0, "timeline: kernels and API records arrived",
    f"kinds {dict(kinds)}")

# one clock, coarse: every GPU timestamp lies in the capture (a CLOCK_REALTIME
# timestamp would be ~1.7e18, decades away)
lo, hi = created, last_ts
outside = [g for g in gpu if not (lo <= g["ts"] <= hi and lo <= g["end_ns"] <= hi)]
res(not outside, "clock: every GPU record lies within the capture",
    f"{len(outside)} of {len(gpu)} outside [{lo}, {hi}], e.g. {outside[:1]}")

# steps: NVTX range push/pop pairs named "step N", innermost first per thread
stack, ranges = defaultdict(list), []
for g in sorted((g for g in gpu if g["kind"] == "marker"), key=lambda g: g["ts"]):
    if g.get("mark") == "range_push":
        stack[g["tid"]].append(g)
    elif g.get("mark") == "range_pop" and stack[g["tid"]]:
        p = stack[g["tid"]].pop()
        if re.fullmatch(r"step [0-9]+", p.get("name", "")):
            ranges.append((p["name"], p["tid"], p["ts"], g["ts"], g.get("name", "")))
names = sorted({r[0] for r in ranges})
res(len(ranges) == steps and len(names) == steps, "steps: one NVTX range per step",
    f"{len(ranges)} ranges, {len(names)} distinct names, want {steps}")
res(all(r[4] == r[0] for r in ranges), "steps: each pop carries its push's name",
    f"{[r for r in ranges if r[4] != r[0]][:2]}")

# every step has kernels: a kernel whose API call (correlation id) was made
# inside the step's range (by any thread: autograd launches from its own)
api_by_corr = {}
for g in gpu:
    if g["kind"] == "api" and g["correlation_id"]:
        api_by_corr.setdefault(g["correlation_id"], []).append(g)
per_step = []
for name, tid, a, b, _ in ranges:
    n = 0
    for k in gpu:
        if k["kind"] != "kernel":
            continue
        for c in api_by_corr.get(k["correlation_id"], []):
            if a <= c["ts"] <= b:
                n += 1
                break
    per_step.append((name, n))
empty = [s for s, n in per_step if n == 0]
res(ranges and not empty, "steps: every step has kernels",
    f"steps without kernels: {empty[:5]}")
if per_step:
    print("# kernels per step: min %d, max %d" % (min(n for _, n in per_step),
                                                   max(n for _, n in per_step)))

# one clock, fine: each cudaLaunchKernel call lies inside an on-CPU interval
# of the same thread, as the scheduler probes saw it
def on_cpu(tid):
    ev = sorted(switches.get(tid, []))
    iv, start = [], None
    if ev and ev[0][1] == "switch_out":
        start = 0
    for ts, t in ev:
        if t == "switch_in":
            start = ts
        elif start is not None:
            iv.append((start, ts))
            start = None
    if start is not None:
        iv.append((start, 1 << 64))
    return iv

ivs = {}
def inside(tid, a, b):
    if tid not in ivs:
        ivs[tid] = on_cpu(tid)
    iv = ivs[tid]
    i = bisect.bisect_right(iv, (a, 1 << 65)) - 1
    return i >= 0 and iv[i][0] <= a and b <= iv[i][1]

launches = [g for g in gpu if g["kind"] == "api" and g.get("name") == "cudaLaunchKernel"]
good = sum(1 for g in launches if inside(g["tid"], g["ts"], g["end_ns"]))
frac = good / len(launches) if launches else 0.0
print(f"# cudaLaunchKernel inside an on-CPU interval of its thread: {good} of {len(launches)}")
res(len(launches) >= steps and frac >= 0.95, "clock: launches lie inside their thread's on-CPU time",
    f"{good} of {len(launches)} ({frac:.1%}); want >= 95% of at least {steps}")
sys.exit(1 if res.failed else 0)
EOF
rc=$?
cat "$OUT/checks.txt" >>"$OUT/summary.txt"
cat "$OUT/checks.txt"
pass=$((pass + $(grep -c '^PASS ' "$OUT/checks.txt")))
fail=$((fail + $(grep -c '^FAIL ' "$OUT/checks.txt")))
if [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$OUT/checks.txt"; then
	bad checks "the trace checker crashed: $(tail -1 "$OUT/checks.txt")"
fi

# ---- dormant, then attach: the collector turns on and off in a live trainer ----
"$STEPBLAME" run --dormant -- "$PYTHON" tests/gpu/train.py 400 20 \
	>"$OUT/dormant.out" 2>"$OUT/dormant.err" &
dpid=$!
for _ in $(seq 600); do
	compgen -G "/dev/shm/stepblame-$dpid-*.chan" >/dev/null && break
	sleep 0.1
done
if ! compgen -G "/dev/shm/stepblame-$dpid-*.chan" >/dev/null; then
	bad dormant "no GPU channel from PID $dpid within 60 s (see $OUT/dormant.err)"
else
	sleep 1
	if "$STEPBLAME" record -q -p "$dpid" -d 3 -o "$OUT/dormant.sbt" 2>"$OUT/record.err"; then
		n=$("$STEPBLAME" dump --jsonl "$OUT/dormant.sbt" | grep -c '"type":"gpu".*"kind":"kernel"')
		if [ "$n" -gt 0 ]; then
			ok "dormant: attach turned the collector on ($n kernels in 3 s)"
		else
			bad dormant "record -p $dpid got no kernels: $(head -2 "$OUT/record.err" | tr '\n' ' ')"
		fi
	else
		bad dormant "record -p $dpid failed: $(head -2 "$OUT/record.err" | tr '\n' ' ')"
	fi
fi
wait "$dpid"
drc=$?
if [ "$drc" = 0 ] && ! grep -q '^stepblame collector:' "$OUT/dormant.err"; then
	ok "dormant: the trainer ran on after the agent left and exited 0"
else
	bad dormant "trainer exited $drc; $(grep '^stepblame collector:' "$OUT/dormant.err" | head -2 | tr '\n' ' ')"
fi

# ---- late injection: a trainer started without stepblame ----
STEP_TIMES="$OUT/late.times" "$PYTHON" tests/gpu/train.py 800 20 >"$OUT/late.out" 2>"$OUT/late.err" &
lpid=$!
for _ in $(seq 600); do
	grep -q 'libcuda\.so' /proc/$lpid/maps 2>/dev/null && break
	sleep 0.1
done
sleep 3 # past CUDA init and the first steps
n_before=$(wc -l <"$OUT/late.times" 2>/dev/null || echo 0)
"$STEPBLAME" record -p "$lpid" -d 4 -o "$OUT/late.sbt" 2>"$OUT/late-record.err"
lrec=$?
n_after=$(wc -l <"$OUT/late.times" 2>/dev/null || echo 0)
if [ $lrec = 0 ]; then
	if grep -q "GPU collector loaded into running PID $lpid" "$OUT/late-record.err"; then
		ok "late: $(grep -o 'GPU collector loaded into running PID [0-9]* (thread [0-9]* held [0-9.]* ms)' "$OUT/late-record.err")"
	else
		bad late "the collector was not loaded: $(grep -i -e gpu -e collector "$OUT/late-record.err" | head -3 | tr '\n' ' ')"
	fi
	"$STEPBLAME" dump --jsonl "$OUT/late.sbt" >"$OUT/late.jsonl" 2>/dev/null
	"$PYTHON" - "$OUT/late.jsonl" >"$OUT/late-checks.txt" 2>&1 <<'EOF2'
import json, sys
k = a = 0
lo = hi = None
out = early = paired = 0
recs = [json.loads(l) for l in open(sys.argv[1])]
launch = {}
for r in recs:
    if r.get("type") == "header":
        lo = r["created_mono_ns"]
    if r.get("type") == "trailer":
        hi = r["ts"]
    if r.get("type") == "gpu" and r.get("kind") == "api" and r.get("correlation_id"):
        launch[r["correlation_id"]] = r["ts"]
for r in recs:
    if r.get("type") != "gpu":
        continue
    k += r.get("kind") == "kernel"
    a += r.get("kind") == "api"
    if lo and hi and not (lo - 5e9 <= r["ts"] <= hi):
        out += 1
    # one clock: a kernel starts after the entry of the call that launched it
    if r.get("kind") == "kernel" and r.get("correlation_id") in launch:
        paired += 1
        early += r["ts"] < launch[r["correlation_id"]]
print(("PASS" if k and a and paired and not out and not early else "FAIL") +
      f" late_timeline: {k} kernels ({paired} with their launch call, {early} starting "
      f"before it), {a} API records, {out} outside the capture")
EOF2
	cat "$OUT/late-checks.txt" >>"$OUT/summary.txt"
	if grep -q '^PASS' "$OUT/late-checks.txt"; then ok "$(cut -c6- "$OUT/late-checks.txt")"; else bad late "$(cat "$OUT/late-checks.txt")"; fi
else
	bad late "record -p $lpid failed: $(tail -2 "$OUT/late-record.err" | tr '\n' ' ')"
fi
wait "$lpid"
lrc=$?
# the step time before the attach and after the agent left (the collector dormant)
"$PYTHON" - "$OUT/late.times" "$n_before" "$n_after" >"$OUT/late-steps.txt" 2>&1 <<'EOF2'
import statistics, sys
t = [int(l.split()[1]) for l in open(sys.argv[1]) if l.strip()]
b, a = int(sys.argv[2]), int(sys.argv[3])
pre, post = t[max(0, b - 100):b], t[a + 10:a + 110]
if len(pre) < 20 or len(post) < 20:
    print(f"FAIL late_speed: too few steps around the capture ({len(pre)} before, {len(post)} after)")
else:
    m0, m1 = statistics.median(pre), statistics.median(post)
    print(("PASS" if m1 <= m0 * 1.10 else "FAIL") +
          f" late_speed: median step {m0 / 1e6:.2f} ms before the attach, {m1 / 1e6:.2f} ms "
          f"after the detach ({m1 / m0:.3f}x)")
EOF2
cat "$OUT/late-steps.txt" >>"$OUT/summary.txt"
if grep -q '^PASS' "$OUT/late-steps.txt"; then ok "$(cut -c6- "$OUT/late-steps.txt")"; else bad late "$(cat "$OUT/late-steps.txt")"; fi
if [ "$lrc" = 0 ] && ! grep -q '^stepblame collector:' "$OUT/late.err"; then
	ok "late: the trainer ran on after the agent left and exited 0"
else
	bad late "trainer exited $lrc; $(grep '^stepblame collector:' "$OUT/late.err" | head -2 | tr '\n' ' ')"
fi

# ---- the report ----
if "$STEPBLAME" report --step-nvtx '^step [0-9]+$' "$TRACE" >"$OUT/report.txt" 2>"$OUT/report.err" &&
	[ -s "$OUT/report.txt" ]; then
	ok "report: $(head -1 "$OUT/report.txt")"
else
	bad report "stepblame report failed: $(head -2 "$OUT/report.err" | tr '\n' ' ')"
fi
if grep -q "stepblame report" "$OUT/run.out"; then
	ok "run: printed the report at exit"
else
	bad run "no report in the output of stepblame run"
fi
finish
