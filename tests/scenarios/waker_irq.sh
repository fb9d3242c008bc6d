#!/usr/bin/env bash
# A timer that ends a sleep fires in interrupt context: whatever task the
# interrupt found on the CPU did not wake the sleeper, and the trace must not
# name it as the waker (a report would blame it for the sleep). The hard case
# on x86-64: an interrupt that arrives while that task runs in user mode is
# handled on the task's own kernel stack. So a process that sleeps 1 ms at a
# time shares one CPU with a shell spinning in user mode, and none of its
# wakeups may name the spinner.
set -u
. "$(dirname "$0")/../lib.sh"
T=waker_irq

need_bpf $T || exit 0
need_cmd $T python3 python3 || exit 0

tmp=$(mktemp -d)
spin= sleeper=
cleanup() {
	exec 2>/dev/null
	[ -n "$spin" ] && kill -9 $spin
	[ -n "$sleeper" ] && kill -9 $sleeper
	rm -rf "$tmp"
}
trap cleanup EXIT

cpu=$(($(nproc) - 1))
taskset -c $cpu sh -c 'while :; do :; done' &
spin=$!
taskset -c $cpu python3 -c '
import time
end = time.monotonic() + 20
while time.monotonic() < end:
    time.sleep(0.001)' &
sleeper=$!
sleep 0.3
"$STEPBLAME" record -q --no-alloc -p $sleeper -d 3 -o "$tmp/t.sbtrace" >"$tmp/rec.out" 2>&1
rc=$?
"$STEPBLAME" dump "$tmp/t.sbtrace" 2>/dev/null | grep " $sleeper/[0-9]* wakeup " >"$tmp/w" || true
n=$(wc -l <"$tmp/w")
bad=$(grep -c "waker=[^ ]*\[$spin/" "$tmp/w")
named=$(grep -vc 'waker=""\[0/0\]' "$tmp/w")
if [ $rc != 0 ]; then
	fail $T "record exited $rc: $(tail -2 "$tmp/rec.out" | tr '\n' ' ')"
elif [ "$n" -lt 300 ]; then
	fail $T "only $n wakeups of the sleeper in 3 s (it sleeps 1 ms at a time)"
elif [ "$bad" != 0 ]; then
	fail $T "$bad of $n timer wakeups name the spinning shell (pid $spin) as their waker: $(grep -m1 "\[$spin/" "$tmp/w")"
else
	pass $T
	echo "    ($n wakeups on CPU $cpu, $named naming a waker, none the spinner)"
fi
