#!/usr/bin/env bash
# A short libFuzzer run of every fuzz target (tests/fuzz/run.sh): the trace
# reader and dump, the agent's side of the GPU channel, the CUPTI record
# translation, the JSON reader, the check of a target's call-frame
# information. FUZZ_SHORT_SECONDS each (default 5); a crash is a FAIL with the
# input saved under $BUILD/fuzz/crashes/. SKIP when clang has no libFuzzer
# runtime (Debian: libclang-rt-14-dev) or, for cupti, no CUPTI headers.
set -u
. "$(dirname "$0")/../lib.sh"
cd "$(dirname "$0")/../.."
export BUILD=${BUILD:-build}
# the fuzz targets carry their own sanitizers: build them from the sources,
# whatever flavour of the rest ($BUILD may be build/san)
BUILD=${BUILD%/san} FUZZ_FRESH=1 tests/fuzz/run.sh "${FUZZ_SHORT_SECONDS:-5}"
