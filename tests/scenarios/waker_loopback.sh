#!/usr/bin/env bash
# A packet sent to an address of this host is delivered by the receive
# softirq on the sender's CPU, inside its send: the receiver's wakeup runs in
# interrupt context, yet the sender is its waker (docs/ARCHITECTURE.md,
# "Wakers"). A receiver that marks a step per message and blocks on a socket
# in between, fed by another process (not followed: named "lo-sender") that
# sends every 20 ms: its wakeups must name the sender, and its steps must be
# blocked on it, not asleep with nobody to blame. TCP over 127.0.0.1, and UDP
# over ::1 where this host has IPv6.
set -u
. "$(dirname "$0")/../lib.sh"
T=waker_loopback

need_bpf $T || exit 0
need_cmd $T python3 python3 || exit 0
lib=$PWD/build/libstepblame.so # the plain build's: an ASan one cannot be loaded into python
if [ ! -f "$lib" ]; then
	fail $T "no $lib (make all)"; exit 0
fi

tmp=$(mktemp -d)
pids=
cleanup() {
	exec 2>/dev/null
	for p in $pids; do kill -9 $p; done
	rm -rf "$tmp"
}
trap cleanup EXIT

cat >"$tmp/recv.py" <<'PY'
import ctypes, socket, sys, time
kind, port, lib = sys.argv[1], int(sys.argv[2]), ctypes.CDLL(sys.argv[3])
fam = socket.AF_INET6 if kind == "udp6" else socket.AF_INET
host = "::1" if kind == "udp6" else "127.0.0.1"
typ = socket.SOCK_DGRAM if kind == "udp6" else socket.SOCK_STREAM
s = socket.socket(fam, typ)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port))
if typ == socket.SOCK_STREAM:
    s.listen(1)
    print(s.getsockname()[1], flush=True)
    s = s.accept()[0]
else:
    print(s.getsockname()[1], flush=True)
s.settimeout(2.0)
n = 0
end = time.monotonic() + 8
while time.monotonic() < end:
    lib.stepblame_step(ctypes.c_ulonglong(n))
    n += 1
    try:
        s.recv(16)
    except socket.timeout:
        pass
PY
cat >"$tmp/send.py" <<'PY'
import socket, sys, time
kind, port = sys.argv[1], int(sys.argv[2])
open("/proc/self/comm", "w").write("lo-sender")
fam = socket.AF_INET6 if kind == "udp6" else socket.AF_INET
host = "::1" if kind == "udp6" else "127.0.0.1"
typ = socket.SOCK_DGRAM if kind == "udp6" else socket.SOCK_STREAM
s = socket.socket(fam, typ)
s.connect((host, port))
end = time.monotonic() + 7
while time.monotonic() < end:
    time.sleep(0.02)
    s.send(b"x")
PY

kinds=tcp
if [ -f /proc/net/if_inet6 ] && grep -q '^0\{31\}1 ' /proc/net/if_inet6; then
	kinds="tcp udp6"
else
	echo "    (no ::1 on this host: TCP over 127.0.0.1 only)"
fi
for k in $kinds; do
	python3 "$tmp/recv.py" $k 0 "$lib" >"$tmp/port.$k" &
	recv=$!
	pids="$pids $recv"
	for _ in $(seq 50); do [ -s "$tmp/port.$k" ] && break; sleep 0.1; done
	port=$(head -1 "$tmp/port.$k")
	if [ -z "$port" ]; then
		fail ${T}_$k "the receiver did not start"; continue
	fi
	python3 "$tmp/send.py" $k $port &
	send=$!
	pids="$pids $send"
	sleep 0.5
	"$STEPBLAME" record -q --no-alloc -p $recv -d 3 -o "$tmp/$k.sbt" >"$tmp/rec.$k" 2>&1
	rc=$?
	"$STEPBLAME" dump "$tmp/$k.sbt" 2>/dev/null | grep " $recv/[0-9]* wakeup " >"$tmp/w.$k" || true
	n=$(wc -l <"$tmp/w.$k")
	named=$(grep -c "waker=lo-sender\[$send/" "$tmp/w.$k")
	"$STEPBLAME" report "$tmp/$k.sbt" --format json -o "$tmp/$k.json" >/dev/null 2>&1
	read -r steps blocked other <<<"$(python3 - "$tmp/$k.json" $send <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
send = int(sys.argv[2])
steps = [s for s in d["steps"] if not s.get("incomplete")][1:]
blocked = other = 0
for s in steps:
    top = max(s["blame"], key=lambda b: b["ns"]) if s["blame"] else {}
    c = top.get("culprit") or {}
    if top.get("cause") == "blocked" and c.get("pid") == send:
        blocked += 1
    elif other == 0:
        print(json.dumps(top)[:300], file=sys.stderr)
        other += 1
    else:
        other += 1
print(len(steps), blocked, other)
PY
)" 2>"$tmp/other.$k"
	if [ $rc != 0 ]; then
		fail ${T}_$k "record exited $rc: $(tail -2 "$tmp/rec.$k" | tr '\n' ' ')"
	elif [ "$n" -lt 100 ]; then
		fail ${T}_$k "only $n wakeups of the receiver in 3 s (a message every 20 ms)"
	elif [ $((named * 100)) -lt $((n * 90)) ]; then
		fail ${T}_$k "$named of $n wakeups name the sender (pid $send); e.g. $(grep -v "\[$send/" "$tmp/w.$k" | head -1)"
	elif [ "${steps:-0}" -lt 100 ] || [ $((blocked * 100)) -lt $((steps * 90)) ]; then
		fail ${T}_$k "${blocked:-0} of ${steps:-0} steps blocked on the sender; another: $(head -c 300 "$tmp/other.$k")"
	else
		pass ${T}_$k
		echo "    ($named of $n wakeups name the sender, $blocked of $steps steps blocked on it)"
	fi
	kill -9 $recv $send 2>/dev/null
	wait $recv $send 2>/dev/null || true
done
