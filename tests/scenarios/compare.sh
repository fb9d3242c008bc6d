#!/usr/bin/env bash
# stepblame compare on real traces of simtrainer runs (schemas/report.md,
# "Compare"): runs of one configuration are never called a regression (every
# pair of seven runs: 21 tries), and --fail-over passes them, unless other
# processes preempted one run more than the other (a loaded machine): then the
# growth must be on cpu_wait, and what is left of it inside the gate; a checkpoint every
# 20 steps instead of every 150 (against the quietest of the seven), and a hog on the launcher's CPU for steps
# 40-280 (against a run without checkpoints), are found
# (slower, the gate fails with exit 3) and put on the right cause (io_wait;
# cpu_wait with the hog appearing among the interferers). A JSON report as one
# side gives the same verdict as its trace.
set -u
. "$(dirname "$0")/../lib.sh"
T=compare

need_sim $T || exit 0
if [ -x "${PLAIN_SIMTRAINER:-}" ]; then SIMTRAINER=$PLAIN_SIMTRAINER; fi
tmp=$(mktemp -d)
# checkpoints go to a disk (fsync on tmpfs costs nothing)
ckdir=$(mktemp -d /var/tmp/sb-compare.XXXXXX)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp" "$ckdir"; }
trap cleanup EXIT


one() { # name, simtrainer options...
	local name=$1 rc simrc
	shift
	"$SIMTRAINER" --steps 300 --kernels 8 --kernel-us 600 --jitter 5 --start-delay-ms 200 \
		--mark usdt --ckpt-dir "$ckdir" --quiet "$@" >"$tmp/$name.sim" 2>&1 &
	sim=$!
	# every step inside the capture, however long the probes take to attach
	hold_trainer "$sim" "$SIMTRAINER"
	"$STEPBLAME" record -p "$sim" -d 90 --no-gpu -o "$tmp/$name.sbt" >"$tmp/$name.rec" 2>&1 &
	local rec=$!
	release_when_attached "$sim" $rec "$tmp/$name.rec"
	wait $rec
	rc=$?
	wait "$sim"; simrc=$?; sim=
	if [ $rc != 0 ] || [ $simrc != 0 ]; then
		fail "$T/$name" "record exited $rc, simtrainer $simrc: $(tail -2 "$tmp/$name.rec" | tr '\n' ' ')"
		return 1
	fi
}

# compare BASE NEW [options]: the JSON in $tmp/cmp.json, the exit status in $crc
# (checked against its schema: a failure is counted in $invalid)
invalid=
cmp() {
	"$STEPBLAME" compare "$@" -f json -o "$tmp/cmp.json" 2>"$tmp/cmp.err"
	crc=$?
	if ! python3 "$(dirname "$0")/../schema_check.py" compare schemas/report.schema.json \
		"$tmp/cmp.json" >"$tmp/schema.out" 2>&1; then
		invalid="$invalid $(tail -1 "$tmp/schema.out");"
	fi
}

# runs of one configuration: every pair, both ways round for the gate
ok=1
for i in 1 2 3 4 5 6 7; do one "same$i" --inject ckpt/150 || ok=0; done
if [ $ok = 1 ]; then
	bad=
	tries=0
	for i in 1 2 3 4 5 6 7; do
		for j in 1 2 3 4 5 6 7; do
			[ $i -lt $j ] || continue
			cmp "$tmp/same$i.sbt" "$tmp/same$j.sbt" --fail-over 5
			tries=$((tries + 1))
			python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))["percentiles"]["mean"]; print(sys.argv[2], m["base_ns"]); print(sys.argv[3], m["new_ns"])' \
				"$tmp/cmp.json" "$i" "$j" >>"$tmp/means" 2>/dev/null
			v=$(python3 - "$tmp/cmp.json" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
slower = {k: v for k, v in d["percentiles"].items() if v.get("verdict") == "slower"}
what = " ".join("%s=%s[%s,%s]" % (k, v["ratio"], v.get("ci_low"), v.get("ci_high"))
                for k, v in slower.items())
if not d["regression"]:
    print("same", what)
    sys.exit(0)
# Other processes preempting one run more than the other (a loaded machine) make it
# slower for real; compare must then put it on cpu_wait. Net of cpu_wait's growth, a
# statistic that grew must stay inside the 5% gate.
cw = d["causes"].get("cpu_wait", {})
grew = {"p50": ("base_median_ns", "new_median_ns"), "mean": ("base_mean_ns", "new_mean_ns"),
        "p99": ("base_tail_mean_ns", "new_tail_mean_ns")}
unexplained = []
for k, v in slower.items():
    if k not in grew:
        continue
    b, n = grew[k]
    net = (v["new_ns"] - v["base_ns"]) - (cw.get(n, 0) - cw.get(b, 0))
    if d["grew_most"] != "cpu_wait" or net > 0.05 * v["base_ns"]:
        unexplained.append("%s: %+d ns, cpu_wait %+d ns" % (k, v["new_ns"] - v["base_ns"],
                                                            cw.get(n, 0) - cw.get(b, 0)))
print(("regression " if unexplained else "cpu_wait ") + what + " " + "; ".join(unexplained))
PY
)
			case "$crc:${v%% *}" in
			0:same) ;;
			[03]:cpu_wait) echo "# same$i->same$j: slower by other processes' preemption ($v)" ;;
			*) bad="$bad same$i->same$j: exit $crc, $v;" ;;
			esac
		done
	done
	if [ -z "$bad" ] && [ $tries = 21 ]; then pass "$T/same_config_21_tries"
	else fail "$T/same_config_21_tries" "$bad"; fi
fi

# found, gated and attributed: python checks the JSON of compare BASE NEW
check() { # name, base, new, cause, interferer that must appear ("" none)
	local name=$1 base=$2 new=$3 cause=$4 who=$5
	cmp "$base" "$new" --fail-over 5
	if [ $crc != 3 ]; then
		# the statistics and their intervals say why: the text form's lines
		fail "$T/$name" "compare exited $crc, not 3 (the gate): $(head -1 "$tmp/cmp.err")
$("$STEPBLAME" compare "$base" "$new" --fail-over 5 2>&1 | sed -n '/^Step time/,/^Tracer/p;/^  io_wait/p;/^Verdict/p')"
		return
	fi
	# the two runs' own reports: the tail steps NEW's puts on the interferer, and the
	# steps BASE has (compare weighs the steps both runs have)
	if [ -n "$who" ] && ! { "$STEPBLAME" report "$new" -f json -o "$tmp/new.json" &&
		"$STEPBLAME" report "$base" -f json -o "$tmp/base.json"; } 2>"$tmp/err"; then
		fail "$T/$name" "report: $(head -1 "$tmp/err")"
		return
	fi
	python3 - "$T/$name" "$tmp/cmp.json" "$cause" "$who" "$tmp/new.json" "$tmp/base.json" <<'PY'
import json, sys
name, path, cause, who, newrep, baserep = sys.argv[1:7]
d = json.load(open(path))
note = ""
bad = []
if not d["regression"] or not d["gate_failed"]:
    bad.append("regression %s, gate_failed %s" % (d["regression"], d["gate_failed"]))
if d["grew_most"] != cause:
    bad.append("grew most: %s, not %s" % (d["grew_most"], cause))
c = d["causes"].get(cause)
if not c or c["new_mean_ns"] <= c["base_mean_ns"]:
    bad.append("%s mean per step did not grow: %s" % (cause, c))
if who and who not in [x["comm"] for x in d["interferers_appeared"]]:
    bad.append("%s not among the interferers that appeared: %s" % (who, d["interferers_appeared"]))
if who:
    # Every tail step of NEW whose largest excess its report puts on the interferer
    # lies in a new tail episode of that cause and culprit (BASE never ran it). A
    # hog that slows each step by the same few scheduler slices leaves no step past
    # the tail threshold: then there is no episode to find, and the line says so.
    # compare leaves out each run's warm-up (step 0 and the tail steps right after
    # it) and the steps the other run has not whole (schemas/report.md, "Compare")
    rep = json.load(open(newrep))
    def after_warmup(r):
        st = sorted((s for s in r["steps"] if not s.get("incomplete")), key=lambda s: s["step"])
        i = 1
        while i < len(st) and st[i].get("tail"):
            i += 1
        return st[i:] if i < len(st) else st[1:]
    both = {s["step"] for s in after_warmup(json.load(open(baserep)))}
    theirs = [s["step"] for s in after_warmup(rep) if s["step"] in both and s.get("tail") and
              s.get("excess") and s["excess"][0]["cause"] == cause and
              s["excess"][0].get("culprit", {}).get("comm") == who]
    eps = [e for e in d["new_episodes"] if e["cause"] == cause and e["culprit"] == who]
    missed = [x for x in theirs if not any(e["first_step"] <= x <= e["last_step"] for e in eps)]
    if missed:
        bad.append("tail steps %s on %s by %s are in no new episode of it: %s"
                   % (missed[:5], cause, who, d["new_episodes"][:3]))
    elif eps and not theirs:
        bad.append("new episodes of %s by %s where NEW's report has no such tail step: %s"
                   % (cause, who, eps[:3]))
    note = ("\n    (%d tail steps of NEW on %s by %s, in %d new episodes)" % (len(theirs), cause, who, len(eps))
            if theirs else "\n    (no tail step of NEW has %s by %s on top, of %d tail steps: the median moved)"
            % (cause, who, sum(1 for s in rep["steps"] if s.get("tail"))))
print("FAIL %s: %s" % (name, "; ".join(bad)) if bad else "PASS %s%s" % (name, note))
PY
}

# the baseline: the quietest of the seven (the lowest mean step). A run that another
# process held up for a second on one step has a mean whose interval is rightly wide
# open, which is the base a user would not pick.
q=$(sort -k2,2n "$tmp/means" 2>/dev/null | head -1 | cut -d' ' -f1)
base=$tmp/same${q:-1}.sbt
if [ -s "$base" ] && one ckpt20 --inject ckpt/20; then
	check ckpt_every_20 "$base" "$tmp/ckpt20.sbt" io_wait ""
	# the same verdict from the JSON report of BASE
	if "$STEPBLAME" report "$base" -f json -o "$tmp/base.json.gz" 2>"$tmp/err"; then
		check ckpt_every_20_from_report "$tmp/base.json.gz" "$tmp/ckpt20.sbt" io_wait ""
	else
		fail "$T/ckpt_every_20_from_report" "report: $(head -1 "$tmp/err")"
	fi
fi
# without checkpoints: two 120 ms steps in each run would leave the mean's interval
# wide open, and a hog that slows most steps a little is what the gate must catch
if one plain && one hog --inject hog@40-280:-20; then
	check hog "$tmp/plain.sbt" "$tmp/hog.sbt" cpu_wait noisy-neighbor
fi

if [ -z "$invalid" ]; then pass "$T/json_schema"; else fail "$T/json_schema" "$invalid"; fi

# the page (--format html): opened in Chromium, it shows what the JSON says
if [ -s "$tmp/ckpt20.sbt" ] && need_chromium "$T/html"; then
	"$STEPBLAME" compare "$base" "$tmp/ckpt20.sbt" -f json -o "$tmp/c.json" 2>/dev/null
	if "$STEPBLAME" compare "$base" "$tmp/ckpt20.sbt" -o "$tmp/c.html" 2>"$tmp/err"; then
		PYTHONPATH="$(dirname "$0")/.." python3 - "$T/html" "$tmp/c.html" "$tmp/c.json" <<'PY'
import json, os, sys
from browser import Browser
name, page, jpath = sys.argv[1:4]
d = json.load(open(jpath))
bad = []
with Browser() as b:
    b.open("file://" + os.path.abspath(page))
    b.wait_for("document.readyState === 'complete'")
    if b.errors:
        bad.append("errors: %s" % b.errors[:3])
    others = [u for u in b.requests if u != "file://" + os.path.abspath(page)]
    if others:
        bad.append("the page asked for %s" % others[:3])
    rows = b.eval("Array.from(document.querySelectorAll('#stats tr')).slice(1).map(r => r.cells[0].textContent + '=' + r.cells[5].textContent).join(';')")
    want = ";".join("%s=%s" % (k, {"slower": "slower", "faster": "faster", "same": "no change beyond noise"}[v["verdict"]] if "verdict" in v else "one step: no interval") for k, v in d["percentiles"].items())
    if rows != want:
        bad.append("stats rows %r, the JSON %r" % (rows, want))
    verdict = b.eval("document.getElementById('verdict').textContent")
    if d["regression"] != verdict.startswith("NEW is slower") or (d["grew_most"] and d["regression"] and d["grew_most"] not in verdict):
        bad.append("verdict %r, JSON regression %s grew_most %s" % (verdict, d["regression"], d["grew_most"]))
    pts = b.eval("Array.from(document.querySelectorAll('#dist polyline')).map(p => p.points.numberOfItems).join(',')")
    n = [int(x) for x in pts.split(",") if x]
    if len(n) != 2 or min(n) < 50:
        bad.append("distribution curves with %s points" % pts)
    ep = b.eval("document.querySelectorAll('#episodes tr').length") - 1
    if ep != min(len(d["new_episodes"]), 200):
        bad.append("%d episode rows, the JSON has %d" % (ep, len(d["new_episodes"])))
print("FAIL %s: %s" % (name, "; ".join(bad)) if bad else "PASS %s" % name)
PY
	else
		fail "$T/html" "compare -o c.html: $(head -1 "$tmp/err")"
	fi
fi

# usage errors: one line, exit 2
"$STEPBLAME" compare "$tmp/same1.sbt" >/dev/null 2>"$tmp/u1"; r1=$?
"$STEPBLAME" compare "$tmp/same1.sbt" "$tmp/same2.sbt" --fail-over p42=3 >/dev/null 2>"$tmp/u2"; r2=$?
echo '{"not": "a report"}' >"$tmp/x.json"
"$STEPBLAME" compare "$tmp/x.json" "$tmp/same2.sbt" >/dev/null 2>"$tmp/u3"; r3=$?
if [ $r1 = 2 ] && [ $r2 = 2 ] && [ $r3 = 1 ] && [ "$(wc -l <"$tmp/u1")" = 1 ] &&
   grep -q 'not a stepblame JSON report' "$tmp/u3"; then
	pass "$T/errors"
else
	fail "$T/errors" "exits $r1 $r2 $r3: $(cat "$tmp/u1" "$tmp/u2" "$tmp/u3" | tr '\n' ' ')"
fi
