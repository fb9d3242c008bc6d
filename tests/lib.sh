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
