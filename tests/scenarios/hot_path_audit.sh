#!/usr/bin/env bash
# The hot-path audit (schemas/report.md, "Hot-path audit") on simtrainer runs
# with a known per-step workload on its launcher thread: --busy SW,PF,MA makes
# PF minor page faults (one madvise per launch that has some) and MA malloc/free
# pairs in every step; migrate@S:M moves it M times in step S, faults@S:MIB
# touches MIB of fresh memory in step S. The audit must count them exactly
# (allocator calls over the steps the probes saw whole, a few calls a step as
# exactly as many), say that the thread allocates, maps and faults in every
# step, list the injected steps as jumps, and find nothing in a clean run of
# the same shape.
set -u
. "$(dirname "$0")/../lib.sh"
T=hot_path_audit

need_sim $T || exit 0
# the allocator probes see libc's malloc: a sanitizer's interceptors would hide it
if [ -x "${PLAIN_SIMTRAINER:-}" ]; then SIMTRAINER=$PLAIN_SIMTRAINER; fi
tmp=$(mktemp -d)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

one() { # name, simtrainer options...
	local name=$1 rc simrc
	shift
	"$SIMTRAINER" --steps 250 --kernels 10 --kernel-us 600 --start-delay-ms 200 --mark usdt \
		--quiet "$@" >"$tmp/$name.sim" 2>&1 &
	sim=$!
	# held until the probes are attached: the audit needs its steps (and the injected
	# ones) inside the capture. The guard off: every step seen whole (the guard's
	# sampling is tested apart); the counts, not the guard, are what is checked here
	hold_trainer "$sim" "$SIMTRAINER"
	"$STEPBLAME" record -p "$sim" -d 90 --no-gpu --max-overhead 0 -o "$tmp/$name.sbt" \
		>"$tmp/$name.rec" 2>&1 &
	local rec=$!
	release_when_attached "$sim" $rec "$tmp/$name.rec"
	wait $rec
	rc=$?
	wait "$sim"; simrc=$?; sim=
	if [ $rc != 0 ] || [ $simrc != 0 ]; then
		fail "$T/$name" "record exited $rc, simtrainer $simrc: $(tail -2 "$tmp/$name.rec" | tr '\n' ' ')"
		return 1
	fi
	if ! "$STEPBLAME" report "$tmp/$name.sbt" --format json -o "$tmp/$name.json" 2>"$tmp/err" ||
	   ! "$STEPBLAME" report "$tmp/$name.sbt" -o "$tmp/$name.txt" 2>>"$tmp/err"; then
		fail "$T/$name" "report: $(head -1 "$tmp/err")"
		return 1
	fi
}

check() { # name, expectations (python literal)
	python3 - "$T/$1" "$tmp/$1.json" "$tmp/$1.txt" "$2" <<'PY'
import ast, json, sys

name, jpath, tpath, want = sys.argv[1], sys.argv[2], sys.argv[3], ast.literal_eval(sys.argv[4])
r = json.load(open(jpath))
text = open(tpath).read()
hp = r["hot_path"]
bad = []
th = [t for t in hp["threads"] if t["comm"] == "launcher"]
if len(th) != 1:
    bad.append("launcher threads audited: %s" % [t["comm"] for t in hp["threads"]])
    print("FAIL %s: %s" % (name, "; ".join(bad)))
    sys.exit(0)
t = th[0]
c = t["counts"]
if t["steps"] < 150:
    bad.append("only %d steady-state steps audited" % t["steps"])
# per-step counts in the step objects agree with the audit's summary
per = {}
for s in r["steps"]:
    for h in s["hot_path"]:
        if h["tid"] == t["tid"]:
            per[s["step"]] = (s, h)
for kind, med in want["median"].items():
    if c[kind]["median"] != med:
        bad.append("%s median %d, want %d" % (kind, c[kind]["median"], med))
if c["alloc_calls"]["steps"] < 50:
    bad.append("allocator calls seen whole in only %d steps" % c["alloc_calls"]["steps"])
# the launcher marks the steps: its allocator count is exact in every step counted
if t["alloc_exact_steps"] != c["alloc_calls"]["steps"]:
    bad.append("allocator calls exact in %d of %d steps" % (t["alloc_exact_steps"], c["alloc_calls"]["steps"]))
# in every steady step the probes saw whole, the exact per-step workload
for step, (s, h) in per.items():
    if step in want["injected"] or step < hp["warmup_steps"] or s["incomplete"]:
        continue
    for kind, med in want["exact"].items():
        if kind == "alloc_calls":
            if s["alloc_observed"] and (h[kind] != med or not h["alloc_exact"]):
                bad.append("step %d: %d allocator calls (%s), the trainer made %d"
                           % (step, h[kind], "exact" if h["alloc_exact"] else "not exact", med))
            continue
        # the trainer's own odd fault (a stack page, a libc page) is real: a few more
        if not med <= h[kind] <= med + (3 if kind == "page_faults" else 0):
            bad.append("step %d: %s %d, want %d" % (step, kind, h[kind], med))
            break
finds = sorted(f["kind"] for f in t["findings"])
if finds != sorted(want["findings"]):
    bad.append("findings %s, want %s" % (finds, sorted(want["findings"])))
jumps = {(j["step"], j["kind"]): j["count"] for j in t["jumps"]}
for (step, kind), n in want["jumps"].items():
    got = jumps.get((step, kind))
    if got is None or not n <= got <= n + 3:
        bad.append("jump step %d %s: %s, want %d (jumps %s)" % (step, kind, got, n, sorted(jumps)))
extra = [k for k in jumps if k not in want["jumps"] and k[1] in ("page_faults", "migrations", "mmap_calls", "alloc_calls")]
if extra:
    bad.append("unexpected jumps %s" % extra)
for line in want["text"]:
    if line not in text:
        bad.append("text report lacks %r" % line)
print("FAIL %s: %s" % (name, "; ".join(bad[:6])) if bad else "PASS %s" % name)
PY
}

if one busy --busy 0,150,150 --inject migrate@50:12 --inject faults@70:8; then
	# 150 faults and 10 madvise calls (one per launch) a step; 300 allocator calls;
	# step 70: 8 MiB touched (2048 faults) and its mmap + munmap; step 50: 12 moves
	check busy "{'median': {'page_faults': 150, 'mmap_calls': 10, 'alloc_calls': 300, 'migrations': 0,
	             'io_calls': 0},
	 'exact': {'page_faults': 150, 'mmap_calls': 10, 'alloc_calls': 300, 'migrations': 0},
	 'injected': {50, 70},
	 'findings': ['alloc_calls', 'mmap_calls', 'page_faults'],
	 'jumps': {(70, 'page_faults'): 2198, (50, 'migrations'): 12},
	 'text': ['allocates in every step: 300 allocator calls a step',
	          'page-faults in every step: 150 page faults a step',
	          'step 70: 2,198 page faults vs median 150', 'step 50: 12 migrations vs median 0']}"
fi
# 20 malloc/free pairs a step: far fewer than a run of fast calls needs to be
# recorded as such (schemas/trace.md, alloc_burst), counted from the step marks
if one few --busy 0,0,20; then
	check few "{'median': {'page_faults': 0, 'mmap_calls': 0, 'alloc_calls': 40, 'migrations': 0,
	            'io_calls': 0},
	 'exact': {'page_faults': 0, 'mmap_calls': 0, 'alloc_calls': 40, 'migrations': 0},
	 'injected': set(), 'findings': ['alloc_calls'], 'jumps': {},
	 'text': ['allocates in every step: 40 allocator calls a step']}"
fi
if one clean; then
	check clean "{'median': {'page_faults': 0, 'mmap_calls': 0, 'alloc_calls': 0, 'migrations': 0,
	              'io_calls': 0},
	 'exact': {'page_faults': 0, 'mmap_calls': 0, 'alloc_calls': 0, 'migrations': 0},
	 'injected': set(), 'findings': [], 'jumps': {},
	 'text': ['clean: no allocation, mapping, fault, migration or slow I/O in most steps']}"
fi
