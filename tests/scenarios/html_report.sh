#!/usr/bin/env bash
# The HTML report in a real browser. simtrainer is recorded with a hog on its
# launcher's CPU in steps 30-37 and its loaders stalled in steps 50-52; then
# `stepblame report --format html` of the trace is opened in headless Chromium
# (tests/browser.py, the DevTools protocol on a pipe) and checked against the
# JSON report of the same trace: it loads with no console error and fetches
# nothing; the timeline holds every step; the causes are the report's, in its
# order; every tail step is in one episode row; hovering and clicking the
# longest tail step on the canvas show that step and its top blame and
# culprit; the wheel zooms and the reset button shows all steps again; a
# screenshot is not blank and shows the top cause's colour. The same trace
# gives the same bytes twice; two traces as ranks give a heatmap of both ranks
# and the stragglers of the JSON ranks report.
set -u
. "$(dirname "$0")/../lib.sh"
T=html_report

need_bpf $T || exit 0
need_sim $T || exit 0
need_chromium $T || exit 0

tmp=$(mktemp -d /var/tmp/html_report.XXXXXX)
sim=
cleanup() { [ -n "$sim" ] && kill -9 "$sim" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

for r in 0 1; do
	inj=()
	[ $r = 0 ] && inj=(--inject hog@30-37:-10 --inject stall@50-52:30)
	"$SIMTRAINER" --steps 80 --kernels 6 --kernel-us 500 --wait-agent 30 --start-delay-ms 200 \
		--quiet "${inj[@]}" >"$tmp/sim$r.out" 2>&1 &
	sim=$!
	"$STEPBLAME" record -p "$sim" -d 60 -o "$tmp/run$r.sbt" >"$tmp/record$r.out" 2>&1
	rc=$?
	wait "$sim"; simrc=$?; sim=
	if [ $rc != 0 ] || [ $simrc != 0 ] || [ ! -s "$tmp/run$r.sbt" ]; then
		fail $T "run $r: record exited $rc, simtrainer $simrc: $(tail -2 "$tmp/record$r.out" | tr '\n' ' ')"
		exit 0
	fi
done

# -o NAME.html picks the format; --format html says it
if ! "$STEPBLAME" report "$tmp/run0.sbt" -o "$tmp/run.html" 2>"$tmp/err" ||
   ! "$STEPBLAME" report "$tmp/run0.sbt" --format html >"$tmp/again.html" 2>>"$tmp/err" ||
   ! "$STEPBLAME" report "$tmp/run0.sbt" --format json -o "$tmp/run.json" 2>>"$tmp/err" ||
   ! "$STEPBLAME" report "$tmp/run0.sbt" "$tmp/run1.sbt" --format html -o "$tmp/ranks.html" 2>>"$tmp/err" ||
   ! "$STEPBLAME" report "$tmp/run0.sbt" "$tmp/run1.sbt" --format json -o "$tmp/ranks.json" 2>>"$tmp/err"; then
	fail $T "report: $(head -2 "$tmp/err" | tr '\n' ' ')"; exit 0
fi
if cmp -s "$tmp/run.html" "$tmp/again.html"; then
	pass ${T}_deterministic
else
	fail ${T}_deterministic "two reports of one trace differ: $(cmp "$tmp/run.html" "$tmp/again.html" | head -1)"
fi
# self-contained: no script, style, image or font from anywhere else
if grep -Eqi '<(script|img|link|iframe)[^>]* (src|href)=|@import|url\(' "$tmp/run.html" "$tmp/ranks.html"; then
	fail ${T}_self_contained "$(grep -Eoi '<(script|img|link|iframe)[^>]* (src|href)=[^>]*|@import[^;]*|url\([^)]*' "$tmp/run.html" | head -1)"
else
	pass ${T}_self_contained
fi

here=$(dirname "$0")
python3 "$here/html_check.py" run "$tmp/run.html" "$tmp/run.json" "$tmp/run.png"
python3 "$here/html_check.py" ranks "$tmp/ranks.html" "$tmp/ranks.json" "$tmp/ranks.png"
# the screenshots, for a person to look at when the page changes
if [ -n "${STEPBLAME_KEEP_SHOTS:-}" ]; then cp "$tmp"/*.png "$STEPBLAME_KEEP_SHOTS"/; fi
exit 0
