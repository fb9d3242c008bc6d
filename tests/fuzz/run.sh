#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Build the libFuzzer targets (clang -fsanitize=fuzzer,address,undefined) and run
# each for N seconds; one PASS/FAIL/SKIP line per target, exit 1 on a crash.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     (default 10 s; targets: trace channel cupti)
#
# Binaries go to $BUILD/fuzz/ (rebuilt when a source is newer), the growing
# corpus to $BUILD/fuzz/corpus/TARGET (seeded from $BUILD/fuzz/seeds/TARGET, which
# tests/fuzz/make_corpus.sh makes from a real capture; run as root, it is made
# here when missing), crash inputs to $BUILD/fuzz/crashes/. Reproduce one with
#   $BUILD/fuzz/fuzz_TARGET $BUILD/fuzz/crashes/TARGET-crash-...
# Environment: FUZZ_FRESH (1: start from the seeds only, keep nothing found),
# FUZZ_CC (clang), FUZZ_JOBS (1; more: that many processes at once), FUZZ_ARGS
# (more libFuzzer flags), CUDA_HOME (/usr/local/cuda; the cupti target needs
# cupti.h and libcupti).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
secs=${1:-10}
[ $# -gt 0 ] && shift
targets=${*:-trace channel cupti jsonread cfi}
CC=${FUZZ_CC:-clang}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
dir=$BUILD/fuzz
mkdir -p "$dir/crashes"
FLAGS="-g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -D_GNU_SOURCE -I. -Iuser"
failed=0
fresh=()
trap 'rm -rf "${fresh[@]}"' EXIT

have_libfuzzer() {
	echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$dir/probe.c"
	$CC -fsanitize=fuzzer "$dir/probe.c" -o "$dir/probe" >/dev/null 2>&1
}

# sources and extra flags of each target
srcs() {
	case $1 in
	trace) echo "tests/fuzz/fuzz_trace.c user/format/trace.c user/base/outfile.c user/cmd/dump.c user/base/json.c user/base/util.c" ;;
	jsonread) echo "tests/fuzz/fuzz_jsonread.c user/base/jsonread.c" ;;
	cfi) echo "tests/fuzz/fuzz_cfi.c user/capture/cficheck.c" ;;
	channel) echo "tests/fuzz/fuzz_channel.c user/format/channel.c user/format/trace.c user/base/outfile.c user/base/util.c" ;;
	cupti) echo "tests/fuzz/fuzz_cupti.c cupti/translate.c user/format/channel.c user/format/trace.c user/base/outfile.c user/base/util.c" ;;
	esac
}
extra() {
	case $1 in
	cupti) echo "-Icupti -I$CUDA_HOME/include -L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcupti -lpthread -lzstd -lz" ;;
	cfi) echo "-ldw -lelf" ;;
	*) echo "-lzstd -lz" ;;
	esac
}

build() { # target
	local t=$1 bin=$dir/fuzz_$1 s stale=0
	for s in $(srcs "$t") user/format/*.h user/base/*.h user/cmd/cmds.h user/capture/cficheck.h \
		 bpf/events.h cupti/collector.h; do
		[ "$s" -nt "$bin" ] && stale=1
	done
	[ -x "$bin" ] && [ $stale = 0 ] && return 0
	# built aside and renamed: another run may be using the old binary right now
	# shellcheck disable=SC2046
	$CC $FLAGS $(srcs "$t") $(extra "$t") -o "$bin.$$" 2>"$dir/build-$t.log" &&
		mv -f "$bin.$$" "$bin"
}

# seeds of the cfi target: small shared objects with .eh_frame and .eh_frame_hdr, one
# with .debug_frame and DWARF sections, one whose FDE names register 200 (refused)
cfi_seeds() { # dir
	[ -d "$1" ] && return 0
	mkdir -p "$1"
	printf '%s\n' 'int g(int);' 'int f(int x) { return g(x) + g(x + 1); }' \
		'static int h(int x) { return x * 3; }' 'int k(int x) { return h(x) + f(x); }' >"$dir/cfi.c"
	$CC -O1 -fPIC -shared -nostdlib -o "$1/eh.so" "$dir/cfi.c" 2>/dev/null
	$CC -O0 -g -fno-asynchronous-unwind-tables -fPIC -shared -nostdlib -o "$1/debug.so" "$dir/cfi.c" 2>/dev/null
	printf '%s\n' '.text' '.globl r' 'r:' '.cfi_startproc' 'push %rbp' '.cfi_def_cfa_offset 16' \
		'.cfi_offset 200, -16' 'pop %rbp' 'ret' '.cfi_endproc' >"$dir/cfi.s"
	$CC -shared -nostdlib -o "$1/reg.so" "$dir/cfi.s" 2>/dev/null
	return 0
}

if ! have_libfuzzer; then
	for t in $targets; do
		echo "SKIP fuzz_$t: $CC has no libFuzzer runtime (Debian: apt-get install libclang-rt-dev)"
	done
	exit 0
fi

if [ ! -d "$dir/seeds" ] && [ "$(id -u)" = 0 ] && [ -x "$BUILD/stepblame" ] && [ -x "$BUILD/simtrainer" ]; then
	BUILD=$BUILD tests/fuzz/make_corpus.sh "$dir/seeds" >/dev/null 2>&1 ||
		echo "note: no seed corpus (tests/fuzz/make_corpus.sh failed); starting from nothing"
fi

for t in $targets; do
	if [ "$t" = cupti ] && [ ! -f "$CUDA_HOME/include/cupti.h" ]; then
		echo "SKIP fuzz_cupti: no CUPTI headers under $CUDA_HOME (set CUDA_HOME)"
		continue
	fi
	if ! build "$t"; then
		echo "FAIL fuzz_$t: does not build: $(grep -m1 -i error "$dir/build-$t.log")"
		failed=1
		continue
	fi
	# FUZZ_FRESH=1: a throwaway corpus (seeds only), so that a short run does not
	# spend its time replaying what earlier long runs found
	corpus=$dir/corpus/$t
	[ -n "${FUZZ_FRESH:-}" ] && corpus=$(mktemp -d) && fresh+=("$corpus")
	mkdir -p "$corpus"
	seeds=()
	[ "$t" = cfi ] && cfi_seeds "$dir/seeds/cfi"
	[ -d "$dir/seeds/$t" ] && seeds=("$dir/seeds/$t")
	# an allocation of 64 MB at once on a file the check let through is a finding
	limit=
	[ "$t" = cfi ] && limit=-malloc_limit_mb=64
	# a log of our own (others may run this at the same time), kept as fuzz-TARGET.log
	log=$(mktemp "$dir/fuzz-$t.XXXXXX")
	# several jobs: libFuzzer forks workers, each logging to fuzz-N.log in the current dir
	jobs=
	[ "${FUZZ_JOBS:-1}" -gt 1 ] && jobs="-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS"
	start=$(date +%s)
	# -max_len: the largest seed (a slice of a real trace) plus room to grow
	# shellcheck disable=SC2086
	timeout -k 5 $((secs + 60)) "$dir/fuzz_$t" -max_total_time="$secs" -max_len=65536 \
		-timeout=10 -rss_limit_mb=4096 $limit -print_final_stats=1 $jobs \
		-artifact_prefix="$dir/crashes/$t-" ${FUZZ_ARGS:-} "$corpus" "${seeds[@]}" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	mv -f "$log" "$dir/fuzz-$t.log" && log=$dir/fuzz-$t.log
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	if [ $rc = 0 ]; then
		echo "PASS fuzz_$t: ${runs:-?} runs in ${took} s without a crash (${cov:-cov: ?})"
	else
		why=$(grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer)|runtime error|deadly signal' "$log")
		echo "FAIL fuzz_$t: exit $rc after ${took} s: ${why:-see $log}; input in $dir/crashes/"
		failed=1
	fi
done
exit $failed
