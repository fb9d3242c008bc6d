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
