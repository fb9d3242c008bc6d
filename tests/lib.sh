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
	for _ in $(seq 600); do
		grep -q "attached [0-9]* probes" "$3" 2>/dev/null && break
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
	done
	kill -CONT "$1"
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
