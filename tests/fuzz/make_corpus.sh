#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Seed corpora for the fuzz targets from a real capture: record simtrainer for
# 2 s (with a 16-slot GPU channel, so its ring is full of real records),
# snapshot the channel file meanwhile, then cut both up (split_corpus.py).
#   tests/fuzz/make_corpus.sh OUTDIR      (root; needs build/stepblame and build/simtrainer)
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
out=${1:-$BUILD/fuzz/seeds}
sb=${STEPBLAME:-$BUILD/stepblame}
sim=${SIMTRAINER:-$BUILD/simtrainer}
[ "$(id -u)" = 0 ] || { echo "make_corpus: recording needs root" >&2; exit 1; }
[ -x "$sb" ] && [ -x "$sim" ] || { echo "make_corpus: build first (make all)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "make_corpus: needs python3" >&2; exit 1; }

tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null && rm -f /dev/shm/stepblame-$pid-*.chan; rm -rf "$tmp"' EXIT
"$sim" --steps 2000 --kernels 6 --kernel-us 300 --channel-slots 16 --wait-agent 10 --quiet \
	--inject faults@5:4 --inject alloc@8:200 >/dev/null 2>&1 &
pid=$!
"$sb" record -q -p $pid -d 2 -o "$tmp/trace.sbt" &
rec=$!
# snapshots of the channel once the agent has turned it on (control word, offset 128)
snaps=() i=0
while kill -0 $rec 2>/dev/null && [ $i -lt 4 ]; do
	sleep 0.3
	cp /dev/shm/stepblame-$pid-*.chan "$tmp/chan$i" 2>/dev/null || continue
	if [ "$(od -An -tu4 -j128 -N4 "$tmp/chan$i" | tr -d ' ')" = 1 ]; then
		snaps+=("$tmp/chan$i"); i=$((i + 1))
	fi
done
wait $rec
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null || true
rm -f /dev/shm/stepblame-$pid-*.chan; pid=
rm -rf "$out"
python3 tests/fuzz/split_corpus.py "$out" "$tmp/trace.sbt" "${snaps[@]}"
