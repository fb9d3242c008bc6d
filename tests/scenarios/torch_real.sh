#!/usr/bin/env bash
# A real PyTorch training loop (Debian's python3-torch, CPU, a conv net, a
# DataLoader with two worker processes, steps marked through libstepblame.so),
# attached to by PID with the default flags, with interference injected at
# known steps: an outside CPU hog, a slow __getitem__ in a loader worker, a
# fresh 384 MiB tensor, a checkpoint with fsync, the marking thread moving
# itself between CPUs. Scored against what the trainer measured itself
# (tests/progs/torch_trainer.py): its schedstat run delay, its time in
# next(loader), its time inside each injection. Two loader injections more:
# a worker that writes and fsyncs a file, and one that faults fresh memory, in
# __getitem__: the wakeup chain says which file, and "faulting". And a thread of
# the trainer computing in Python: the loop's waits for the GIL are waits on it.
# Other processes on a busy
# machine are real interference: where the report names them, that time is
# deducted before a check, never excused by a looser bound.
set -u
. "$(dirname "$0")/../lib.sh"
T=torch_real

need_bpf $T || exit 0
need_sim $T || exit 0
need_torch $T || exit 0

tmp=$(mktemp -d /var/tmp/torch_real.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

# the hog: one spinner per CPU, not ours (the harness starts them), named
# noisy-hog, spinning while the trainer keeps $tmp/hog.on in place
for _ in $(seq "$(nproc)"); do
	/usr/bin/python3 -c '
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(15, b"noisy-hog", 0, 0, 0)
f = sys.argv[1]
while True:
    if os.path.exists(f):
        end = time.perf_counter() + 0.005
        while time.perf_counter() < end:
            pass
    else:
        time.sleep(0.0005)
' "$tmp/hog.on" &
	pids+=($!)
done

# the marker library without sanitizers (an ASan build cannot be loaded into python3)
lib=$PWD/$BUILD/libstepblame.so
if [ -x "${PLAIN_SIMTRAINER:-}" ] && [ -f "$(dirname "$PLAIN_SIMTRAINER")/libstepblame.so" ]; then
	lib=$(dirname "$PLAIN_SIMTRAINER")/libstepblame.so
fi
STEPS=76
/usr/bin/python3 tests/progs/torch_trainer.py --lib "$lib" --steps $STEPS \
	--ready "$tmp/ready" --go "$tmp/go" --truth "$tmp/truth.jsonl" \
	--hog 12-15 --hog-file "$tmp/hog.on" --slow-item 24-31:400 --tensor 34:384 \
	--ckpt 44:"$tmp" --migrate 54-55 --slow-item 62-63:600:io --slow-dir "$tmp" \
	--slow-item 70-71:600:fault --gil 47-49 >"$tmp/trainer.out" 2>&1 &
trainer=$!
pids+=($trainer)
# attach once torch is imported and the loader's workers are up; the loop
# starts once the probes are attached
for _ in $(seq 1200); do [ -e "$tmp/ready" ] || ! kill -0 $trainer 2>/dev/null && break; sleep 0.05; done
"$STEPBLAME" record -p $trainer -d 120 --no-gpu -o "$tmp/trace.sbt" >"$tmp/record.out" 2>&1 &
rec=$!
for _ in $(seq 1200); do grep -q 'attached' "$tmp/record.out" || ! kill -0 $rec 2>/dev/null && break; sleep 0.05; done
sleep 0.5
touch "$tmp/go"
wait $rec; rc=$?
wait $trainer; trc=$?
if [ $rc != 0 ] || [ $trc != 0 ] || [ ! -s "$tmp/trace.sbt" ]; then
	fail $T "record exited $rc, trainer $trc: $(tail -n 3 "$tmp/record.out" "$tmp/trainer.out" | tr '\n' ' ')"
	exit 0
fi
if ! "$STEPBLAME" report "$tmp/trace.sbt" --format json -o "$tmp/r.json" 2>"$tmp/err" ||
   ! "$STEPBLAME" report "$tmp/trace.sbt" -o "$tmp/r.txt" 2>>"$tmp/err"; then
	fail $T "report: $(head -1 "$tmp/err")"; exit 0
fi
[ -n "${STEPBLAME_KEEP:-}" ] && cp -r "$tmp" "$STEPBLAME_KEEP"
python3 tests/scenarios/torch_check.py "$tmp/r.json" "$tmp/truth.jsonl"
