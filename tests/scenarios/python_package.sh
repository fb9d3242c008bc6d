#!/usr/bin/env bash
# The Python package (python/README.md), as a user gets it: `pip install ./python`
# and the wheel `make python` builds, each into a venv that sees Debian's
# python3-torch; its own cases (tests/python/test_stepblame.py); then real
# PyTorch loops (tests/progs/py_marks.py) marked each way it offers, traced by
# stepblame: every mark made after the tracer attached reaches the trace with the
# number the loop gave it. `stepblame run --mark-optimizer-steps` marks a script
# that never imports stepblame.
set -u
. "$(dirname "$0")/../lib.sh"
T=python_package

need_bpf $T || exit 0
need_torch $T || exit 0
# the plain build's library: an ASan one cannot be loaded into python
plain=$PWD/build
if [ ! -f "$plain/libstepblame.so" ]; then
	skip $T "no plain build (make all)"; exit 0
fi
need_pyvenv $T || exit 0
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
version=$("$STEPBLAME" --version | awk '{print $2}')

# ---- installed from the source tree (a copy: pip builds in the tree it is given) ----
cp -r python "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src"/*.egg-info
/usr/bin/python3 -m venv --system-site-packages "$tmp/v1" &&
	"$tmp/v1/bin/pip" install -q --no-index --no-build-isolation --no-deps "$tmp/src" >"$tmp/pip1" 2>&1
got=$(STEPBLAME_LIB=$plain/libstepblame.so "$tmp/v1/bin/python" -c \
	'import stepblame; print(stepblame.__version__, stepblame.__file__, stepblame.library())' 2>&1)
if [[ "$got" == "$version $tmp/v1/"*"/stepblame/__init__.py $plain/libstepblame.so" ]]; then
	pass ${T}_pip_source
else
	fail ${T}_pip_source "version $version, package in $tmp/v1, library from STEPBLAME_LIB wanted; got: $got $(tail -2 "$tmp/pip1" | tr '\n' ' ')"
fi

# ---- the wheel: it carries the library ----
if ! make -s python BUILD=build >"$tmp/make.out" 2>&1; then
	fail ${T}_wheel "make python: $(tail -3 "$tmp/make.out" | tr '\n' ' ')"
else
	whl=$(ls build/wheel/stepblame-"$version"-*.whl 2>/dev/null | head -1)
	/usr/bin/python3 -m venv --system-site-packages "$tmp/v2" &&
		"$tmp/v2/bin/pip" install -q --no-index --no-deps "$whl" >"$tmp/pip2" 2>&1
	got=$(env -u STEPBLAME_LIB "$tmp/v2/bin/python" -c \
		'import stepblame; print(stepblame.library())' 2>&1)
	if [ -n "$whl" ] && [[ "$got" == "$tmp/v2/"*"/stepblame/libstepblame.so" ]]; then
		pass ${T}_wheel
	else
		fail ${T}_wheel "wheel '$whl': library $got $(tail -2 "$tmp/pip2" | tr '\n' ' ')"
	fi
fi

# ---- the package's own cases ----
PYTHONPATH=$PWD/python STEPBLAME_LIB=$plain/libstepblame.so /usr/bin/python3 \
	tests/python/test_stepblame.py 2>"$tmp/unit.err" || echo "FAIL ${T}_cases: exited $?: $(tail -2 "$tmp/unit.err" | tr '\n' ' ')"

# the step numbers of a trace's report, in order, one line
numbers() {
	"$STEPBLAME" report --format json "$1" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
print(" ".join(str(s["step"]) for s in json.load(sys.stdin)["steps"]))'
}
# check NAME TRACE FIRST LAST: the marks FIRST..LAST, each once, in order
check() {
	local want got
	want=$(seq -s ' ' "$3" "$4")
	got=$(numbers "$2")
	if [ "$got" = "$want" ]; then
		pass "$1"
	else
		fail "$1" "steps [$got], want [$want]"
	fi
}

# ---- real loops, traced by PID: the trainer waits for the tracer ----
N=60
traced() { # mode, first, last: py_marks.py MODE in venv v1, recorded by PID
	local mode=$1 ready=$tmp/$1.ready i
	STEPBLAME_LIB=$plain/libstepblame.so "$tmp/v1/bin/python" tests/progs/py_marks.py \
		"$mode" $N "$ready" >"$tmp/$mode.out" 2>&1 &
	local py=$!
	pids+=($py)
	for ((i = 0; i < 600; i++)); do [ -e "$ready" ] && break; sleep 0.1; done
	"$STEPBLAME" record -p $py -o "$tmp/$mode.sbt" --no-gpu >"$tmp/$mode.rec" 2>&1 &
	local rec=$!
	pids+=($rec)
	wait_attached "$tmp/$mode.rec" 60 $rec
	touch "$ready.go"
	wait $py
	local rc=$?
	wait $rec
	if [ $rc != 0 ] || [ ! -s "$tmp/$mode.sbt" ]; then
		fail ${T}_$mode "trainer exited $rc: $(tail -2 "$tmp/$mode.out" "$tmp/$mode.rec" | tr '\n' ' ')"
		return
	fi
	check ${T}_$mode "$tmp/$mode.sbt" "$2" "$3"
}
traced explicit 0 $((N - 1))
traced with 0 $((N - 1))
traced lightning 0 $((N - 1))
# after the k-th optimizer step, mark k: iteration k runs from there
traced hook 1 $N
# an optimizer whose step() steps another: one mark each
traced nested 1 $N

# ---- no change to the script: stepblame run --mark-optimizer-steps ----
ready=$tmp/plain.ready
STEPBLAME_LIB=$plain/libstepblame.so "$STEPBLAME" run -o "$tmp/plain.sbt" --no-gpu \
	--mark-optimizer-steps -- /usr/bin/python3 tests/progs/py_marks.py plain $N "$ready" \
	>"$tmp/plain.out" 2>&1 &
run=$!
pids+=($run)
for ((i = 0; i < 600; i++)); do [ -e "$ready" ] && break; sleep 0.1; done
# the library was mapped as torch.optim was imported: the agent's next scan of the
# trainer's mappings (once a second) attaches to its probe
sleep 2.5
touch "$ready.go"
wait $run
rc=$?
if [ $rc != 0 ]; then
	fail ${T}_run_mark_optimizer "run exited $rc: $(tail -3 "$tmp/plain.out" | tr '\n' ' ')"
else
	check ${T}_run_mark_optimizer "$tmp/plain.sbt" 1 $N
fi
# and said clearly where the package is not
mkdir -p "$tmp/alone"
cp "$STEPBLAME" "$tmp/alone/stepblame"
"$tmp/alone/stepblame" run --mark-optimizer-steps -- true >"$tmp/alone.out" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "mark-optimizer-steps: the stepblame Python package was not found" "$tmp/alone.out"; then
	pass ${T}_run_no_package
else
	fail ${T}_run_no_package "exit $rc: $(head -2 "$tmp/alone.out" | tr '\n' ' ')"
fi
