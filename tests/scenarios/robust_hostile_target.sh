#!/usr/bin/env bash
# A hostile trainer attacks the agent (root) through the files it maps
# (tests/progs/sbhostile, run as nobody where setpriv allows):
#  - swap: it runs from a copy of itself and maps 8 copies of sbwork; in a loop
#    it exchanges the name of each of these files with a FIFO and with a
#    symlink to /etc/shadow, and it holds write leases on the copies. An open
#    by the name /proc/PID/maps gives, or any blocking open, waited forever
#    (a FIFO) or 45 s a file (a lease). `record -d 3` must end within seconds,
#    never open one of its FIFOs, and still put the step probe on the
#    executable, whose marks are recorded;
#  - names: it maps files whose names hold escape sequences and newlines,
#    named like libc and libcuda so that the agent reports on them: the
#    agent's stderr carries no ESC byte and every line of it is its own.
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_hostile_target

need_bpf $T || exit 0
HOSTILE=$PWD/$BUILD/tests/progs/sbhostile
SRC=$PWD/$BUILD/tests/progs/sbwork
if [ ! -x "$HOSTILE" ] || [ ! -x "$SRC" ]; then skip $T "no $HOSTILE or $SRC (make test-bin)"; exit 0; fi
if [ ! -x "${STEPBLAME:-}" ]; then skip $T "no stepblame at '${STEPBLAME:-}'"; exit 0; fi

tmp=$(mktemp -d)
dir=$(mktemp -d -p /dev/shm sbhostile.XXXXXX)
chmod 0755 "$tmp" "$dir"
AS=
if command -v setpriv >/dev/null &&
	setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$HOSTILE" -a -r "$SRC" 2>/dev/null; then
	AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
	chown 65534:65534 "$dir"
fi
pid= agent=
cleanup() {
	exec 2>/dev/null
	[ -n "$agent" ] && kill -9 $agent
	[ -n "$pid" ] && kill -9 $pid
	rm -rf "$tmp" "$dir"
}
trap cleanup EXIT

wait_ready() { # file
	for _ in $(seq 200); do grep -q '^ready' "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}

# ---- swap: FIFOs, symlinks and leases under the names of its mapped files ----
$AS "$HOSTILE" -t 60 -l swap "$dir" "$SRC" 8 >"$tmp/h.out" 2>&1 &
pid=$!
if ! wait_ready "$tmp/h.out"; then
	fail ${T}_swap "sbhostile did not start: $(head -2 "$tmp/h.out" | tr '\n' ' ')"
else
	t0=$(date +%s%N)
	timeout -s KILL 40 "$STEPBLAME" record -p $pid -d 3 -o "$tmp/t.sbt" >"$tmp/rec.out" 2>&1 &
	agent=$!
	wait $agent; rc=$?
	agent=
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	kill -TERM $pid; wait $pid 2>/dev/null; pid=
	"$STEPBLAME" dump "$tmp/t.sbt" >"$tmp/dump" 2>&1
	# the run-time limit: 3 s of capture, the load and the teardown of the probes
	if [ $rc != 0 ] || [ $ms -gt 20000 ]; then
		fail ${T}_swap "record -d 3 took $ms ms, exit $rc: $(tail -1 "$tmp/rec.out")"
	else
		pass ${T}_swap
	fi
	opened=$(sed -n 's/^fifo_opened=//p' "$tmp/h.out")
	if [ "$opened" = 0 ]; then pass ${T}_no_fifo_opened
	else fail ${T}_no_fifo_opened "its FIFOs were opened ${opened:-?} times"; fi
	# the executable, under whichever name it had then, got the step probe and its marks came
	if grep -q 'probe attached=1 text="usdt:stepblame:step '"$dir"'/' "$tmp/dump" &&
		grep -q 'step step=5[0-9]* source=usdt' "$tmp/dump"; then
		pass ${T}_swap_still_probed
	else
		fail ${T}_swap_still_probed "no step probe or no step marks: $(grep -c ' step ' "$tmp/dump") step lines"
	fi
fi

# ---- names: escape sequences and newlines in mapped names ----
rm -rf "${dir:?}"/*
$AS "$HOSTILE" -t 30 names "$dir" "$SRC" $'libc.so.6\e[31mX' $'libc.so.6\e[32m\nY' \
	$'libcuda.so.1\e]0;pwned\a\nZ' >"$tmp/h.out" 2>&1 &
pid=$!
if ! wait_ready "$tmp/h.out"; then
	fail ${T}_escaped "sbhostile did not start: $(head -2 "$tmp/h.out" | tr '\n' ' ')"
else
	timeout -s KILL 40 "$STEPBLAME" record -p $pid -d 1 -o "$tmp/n.sbt" >/dev/null 2>"$tmp/n.err"
	rc=$?
	kill -TERM $pid; wait $pid 2>/dev/null; pid=
	esc=$(tr -cd '\033' <"$tmp/n.err" | wc -c)
	foreign=$(grep -cv '^stepblame: ' "$tmp/n.err")
	if [ $rc != 0 ]; then
		fail ${T}_escaped "record exited $rc: $(tail -1 "$tmp/n.err")"
	elif [ "$esc" != 0 ] || [ "$foreign" != 0 ]; then
		fail ${T}_escaped "$esc ESC bytes, $foreign lines not the agent's on stderr"
	elif ! grep -qF 'libc.so.6\x1b[31mX' "$tmp/n.err" || ! grep -qF '\x07\x0aZ' "$tmp/n.err"; then
		# else the names were never printed, and the check above proves nothing
		fail ${T}_escaped "the mapped names are not on stderr, escaped: $(head -c 300 "$tmp/n.err")"
	else
		pass ${T}_escaped
	fi
fi
