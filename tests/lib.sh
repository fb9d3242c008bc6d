# Shell helpers for scenario tests: same PASS/FAIL/SKIP lines as tests/test.h.
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "SKIP $1: $2"; }
need_bpf() { # name
	if [ "$(id -u)" != 0 ]; then
		if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then fail "$1" "STEPBLAME_REQUIRE_BPF is set but not root"; else skip "$1" "needs root for BPF"; fi
		return 1
	fi
	return 0
}
need_sim() { # name: $SIMTRAINER and a stepblame that records ($STEPBLAME); tests/run sets both
	if [ ! -x "${SIMTRAINER:-}" ]; then skip "$1" "no simtrainer at '${SIMTRAINER:-}'"; return 1; fi
	if ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
		skip "$1" "no stepblame that records at '${STEPBLAME:-}'"; return 1
	fi
	return 0
}
# A trainer just started in the background ($1, running the program $2) is held
# (SIGSTOP) once the shell has exec'd it, so that its steps begin only inside a capture
# started next: hold_trainer PID PROGRAM; then, with `stepblame record` running in the
# background (its pid and log): release_when_attached PID RECORD_PID LOG. On a loaded
# machine the probes take seconds to attach, and a fixed start delay misses steps.
hold_trainer() {
	local exe
	exe=$(readlink -f "$2")
	for _ in $(seq 200); do
		[ "$(readlink /proc/$1/exe 2>/dev/null)" = "$exe" ] && break
		sleep 0.01
	done
	kill -STOP "$1"
}
release_when_attached() {
	wait_attached "$3" 30 "$2"
	kill -CONT "$1"
}
# wait_attached LOG [SECONDS [AGENT_PID]]: until the agent writing LOG says its probes
# are attached (10 s at most, or until AGENT_PID exits); 1 if it did not say so
wait_attached() {
	local i
	for ((i = 0; i < ${2:-10} * 20; i++)); do
		grep -q "attached [0-9]* probes" "$1" 2>/dev/null && return 0
		[ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && break
		sleep 0.05
	done
	grep -q "attached [0-9]* probes" "$1" 2>/dev/null
}
# A program that waits for one byte on its stdin (tests/progs/sbwork) traced from its
# start: record_gated TEST NAME "RECORD OPTIONS" PROGRAM ARGS... runs it with a fifo for
# stdin, attaches `stepblame record -p` (60 s at most), and sends the byte once record
# says "attached". Leaves $tmp/NAME.prog (the program's output), $tmp/NAME.rec (record's)
# and $tmp/NAME.sbt; $pid is the program's while it runs (for the caller's cleanup).
# Fails TEST and returns 1 if either exits non-zero.
record_gated() {
	local t=$1 name=$2 opts=$3 rec rc prc
	shift 3
	rm -f "$tmp/go"
	mkfifo "$tmp/go"
	"$@" <"$tmp/go" >"$tmp/$name.prog" 2>&1 &
	pid=$!
	exec 7>"$tmp/go"
	# shellcheck disable=SC2086
	"$STEPBLAME" record -p "$pid" -d 60 $opts -o "$tmp/$name.sbt" >"$tmp/$name.rec" 2>&1 &
	rec=$!
	wait_attached "$tmp/$name.rec" 30 $rec
	echo go >&7
	exec 7>&-
	wait "$pid"; prc=$?
	wait "$rec"; rc=$?
	pid=
	if [ $rc != 0 ] || [ $prc != 0 ]; then
		fail "$t" "record exited $rc, $(basename "$1") $prc: $(tail -2 "$tmp/$name.rec" | tr '\n' ' ')"
		return 1
	fi
}
need_prometheus() { # name: Debian's prometheus (the server binary); in CI its absence fails
	if command -v prometheus >/dev/null; then return 0; fi
	if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then
		fail "$1" "no prometheus server: apt-get install prometheus (on a systemd machine it also starts its own service)"
	else
		skip "$1" "no prometheus server: apt-get install prometheus (on a systemd machine it also starts its own service)"
	fi
	return 1
}

need_torch() { # name: Debian's python3-torch for /usr/bin/python3; in CI its absence fails
	if /usr/bin/python3 -c 'import torch' 2>/dev/null; then return 0; fi
	if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then
		fail "$1" "/usr/bin/python3 cannot import torch: install python3-torch (sudo make deps)"
	else
		skip "$1" "/usr/bin/python3 cannot import torch: install python3-torch (sudo make deps)"
	fi
	return 1
}

need_pyvenv() { # name: venv, pip, setuptools and wheel for /usr/bin/python3; in CI their absence fails
	local why="/usr/bin/python3 lacks venv, pip, setuptools or wheel: install python3-venv python3-pip python3-setuptools python3-wheel (sudo make deps)"
	if /usr/bin/python3 -c 'import setuptools, wheel, venv, ensurepip, pip' 2>/dev/null; then return 0; fi
	if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then fail "$1" "$why"; else skip "$1" "$why"; fi
	return 1
}

need_chromium() { # name: Debian's chromium, for the HTML report's tests; in CI its absence fails
	if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then return 0; fi
	if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then
		fail "$1" "no chromium: apt-get install chromium (sudo make deps)"
	else
		skip "$1" "no chromium: apt-get install chromium (sudo make deps)"
	fi
	return 1
}

need_cmd() { # name, command, its Debian package: in CI its absence fails
	if command -v "$2" >/dev/null; then return 0; fi
	if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then
		fail "$1" "no $2: apt-get install $3 (sudo make deps)"
	else
		skip "$1" "no $2: apt-get install $3 (sudo make deps)"
	fi
	return 1
}
