#!/usr/bin/env bash
# `stepblame record -p PID` on a program that runs "CUDA" (a stand-in
# libcuda.so.1, tests/progs/fakecuda.c) without the collector: the collector
# is loaded into it at attach (here the stand-in tests/libs/injtest.c, which
# speaks the channel the same way: $STEPBLAME_COLLECTOR), its GPU records
# reach the trace, a second capture finds it loaded and does not load it
# again, --no-inject and a program without libcuda are left alone, a program
# in its own pid and mount namespace, one that starts CUDA after the attach and
# one a shell started (record -p names the shell) get it too, and the programs'
# own checks of their sleeping threads pass.
set -u
. "$(dirname "$0")/../lib.sh"
T=inject_record

need_bpf $T || exit 0
need_cmd $T cc gcc || exit 0
B=${BUILD:-build}
prog=$B/tests/progs/sbinject
lib=$B/tests/libs/libinjtest.so
for f in $prog $lib; do
	[ -e $f ] || { fail $T "$f not built (make test-bin)"; exit 0; }
done

tmp=$(mktemp -d)
pids=
cleanup() {
	exec 2>/dev/null
	for p in $pids; do kill -9 $p; done
	rm -rf "$tmp"
}
trap cleanup EXIT
cc -shared -fPIC -O1 -DFAKECUDA_LIB tests/progs/fakecuda.c -o "$tmp/libcuda.so.1" || {
	fail $T "cannot build the stand-in libcuda"
	exit 0
}
export STEPBLAME_COLLECTOR=$PWD/$lib

start() { # out-file args...: the program's pid in $tp, once it said "ready"
	local out=$1; shift
	$prog "$@" >"$out" 2>&1 &
	tp=$!
	pids="$pids $tp"
	for _ in $(seq 50); do grep -q ready "$out" && return 0; sleep 0.1; done
	return 1
}
kernels() { "$STEPBLAME" dump "$1" 2>/dev/null | grep -c 'gpu kind=kernel .*name="injtest_kernel"'; }
memfds() { grep '/memfd:stepblame-cupti' /proc/$1/maps | awk '{print $5}' | sort -u | wc -l; } # copies loaded

# 1. loaded at attach; its records in the trace
start "$tmp/a.out" --lib "$tmp/libcuda.so.1" 20000 || { fail $T "sbinject did not start"; exit 0; }
a=$tp
"$STEPBLAME" record --no-alloc -p $a -d 1.5 -o "$tmp/1.sbtrace" >"$tmp/1.log" 2>&1
rc=$?
n1=$(kernels "$tmp/1.sbtrace")
if [ $rc != 0 ]; then
	fail ${T}_loaded "record exited $rc: $(tail -2 "$tmp/1.log" | tr '\n' ' ')"
elif ! grep -q "GPU collector loaded into running PID $a (thread [0-9]* held" "$tmp/1.log"; then
	fail ${T}_loaded "no line saying the collector was loaded: $(grep -i gpu "$tmp/1.log" | tr '\n' ' ')"
elif ! grep -q "reading the injtest channel of PID $a" "$tmp/1.log"; then
	fail ${T}_loaded "its channel was not read: $(grep -i gpu "$tmp/1.log" | tr '\n' ' ')"
elif [ "$n1" -lt 30 ]; then
	fail ${T}_loaded "$n1 kernels in a 1.5 s trace (one every 20 ms expected)"
elif [ "$(memfds $a)" != 1 ]; then
	fail ${T}_loaded "$(memfds $a) mappings of the loaded collector"
else
	pass ${T}_loaded
	echo "    ($(grep -o 'thread [0-9]* held [0-9.]* ms' "$tmp/1.log"); $n1 kernels)"
fi

# 2. a second capture reuses it: no second load
"$STEPBLAME" record --no-alloc -p $a -d 1.5 -o "$tmp/2.sbtrace" >"$tmp/2.log" 2>&1
rc=$?
n2=$(kernels "$tmp/2.sbtrace")
if [ $rc != 0 ]; then
	fail ${T}_reused "record exited $rc: $(tail -2 "$tmp/2.log" | tr '\n' ' ')"
elif grep -q 'GPU collector loaded' "$tmp/2.log"; then
	fail ${T}_reused "loaded a second time"
elif [ "$(memfds $a)" != 1 ] || [ "$n2" -lt 30 ]; then
	fail ${T}_reused "$(memfds $a) mappings of the collector, $n2 kernels"
else
	pass ${T}_reused
fi

# 3. --no-inject, and a program that does not run CUDA: nothing loaded
start "$tmp/b.out" --lib "$tmp/libcuda.so.1" 12000 || { fail $T "sbinject did not start"; exit 0; }
b=$tp
start "$tmp/c.out" 12000 || { fail $T "sbinject did not start"; exit 0; }
c=$tp
"$STEPBLAME" record -q --no-alloc --no-inject -p $b -d 0.5 -o "$tmp/3.sbtrace" >"$tmp/3.log" 2>&1
rc3=$?
"$STEPBLAME" record -q --no-alloc -p $c -d 0.5 -o "$tmp/4.sbtrace" >"$tmp/4.log" 2>&1
rc4=$?
if [ $rc3 != 0 ] || [ $rc4 != 0 ]; then
	fail ${T}_left_alone "record exited $rc3 / $rc4"
elif [ "$(memfds $b)" != 0 ] || [ "$(memfds $c)" != 0 ]; then
	fail ${T}_left_alone "loaded anyway: $(memfds $b) with --no-inject, $(memfds $c) without libcuda"
elif [ "$(kernels "$tmp/3.sbtrace")" != 0 ]; then
	fail ${T}_left_alone "GPU records with --no-inject"
else
	pass ${T}_left_alone
fi

# 4. in its own pid and mount namespace (a container): it is PID 1 there
unshare -pmf --mount-proc $prog --lib "$tmp/libcuda.so.1" 5000 >"$tmp/d.out" 2>&1 &
up=$!
pids="$pids $up"
d=
for _ in $(seq 50); do
	d=$(pgrep -P $up -f sbinject)
	[ -n "$d" ] && grep -q ready "$tmp/d.out" && break
	sleep 0.1
done
if [ -z "$d" ]; then
	fail ${T}_container "sbinject did not start under unshare: $(head -2 "$tmp/d.out")"
else
	pids="$pids $d"
	nspid=$(grep NSpid /proc/$d/status | cut -f2-)
	# 2 s: a kernel every 20 ms, 20 wanted, with room for a loaded machine (18 came in 1 s beside a hog)
	"$STEPBLAME" record --no-alloc -p $d -d 2 -o "$tmp/5.sbtrace" >"$tmp/5.log" 2>&1
	rc=$?
	n5=$(kernels "$tmp/5.sbtrace")
	if [ $rc != 0 ] || ! grep -q "GPU collector loaded into running PID $d" "$tmp/5.log" ||
		[ "$n5" -lt 20 ]; then
		fail ${T}_container "record exited $rc, $n5 kernels: $(grep -i -e gpu -e error "$tmp/5.log" | tr '\n' ' ')"
	else
		pass ${T}_container
		echo "    (NSpid: $nspid; $n5 kernels)"
	fi
	wait $up # (PID 1 of its namespace: a SIGTERM from here would be ignored)
	grep -q 'sbinject: ok' "$tmp/d.out" || fail ${T}_container "the program's checks: $(tail -1 "$tmp/d.out")"
fi

# 5. CUDA started after the attach: loaded once the maps show libcuda
start "$tmp/e.out" --late-lib "$tmp/libcuda.so.1" 6000 || { fail $T "sbinject did not start"; exit 0; }
e=$tp
"$STEPBLAME" record --no-alloc -p $e -d 4 -o "$tmp/6.sbtrace" >"$tmp/6.log" 2>&1
rc=$?
n6=$(kernels "$tmp/6.sbtrace")
if [ $rc != 0 ] || ! grep -q "GPU collector loaded into running PID $e" "$tmp/6.log" ||
	[ "$n6" -lt 20 ]; then
	fail ${T}_cuda_later "record exited $rc, $n6 kernels: $(grep -i -e gpu -e error "$tmp/6.log" | tr '\n' ' ')"
else
	pass ${T}_cuda_later
	echo "    ($n6 kernels in the 4 s capture, CUDA from 1.5 s in)"
fi

# 6. the CUDA program a shell started (record -p names the shell): the collector is
#    loaded into the child whose marks are the steps, and its channel read
bash -c "$prog --marks --lib $tmp/libcuda.so.1 8000 >$tmp/f.out 2>&1; st=\$?; exit \$st" &
sh=$!
pids="$pids $sh"
for _ in $(seq 50); do grep -q ready "$tmp/f.out" 2>/dev/null && break; sleep 0.1; done
f=$(pgrep -P $sh | head -1)
"$STEPBLAME" record --no-alloc -p $sh -d 3 -o "$tmp/7.sbtrace" >"$tmp/7.log" 2>&1
rc=$?
n7=$(kernels "$tmp/7.sbtrace")
if [ $rc != 0 ] || [ -z "$f" ] || ! grep -q "GPU collector loaded into running PID $f " "$tmp/7.log" ||
	! grep -q "reading the injtest channel of PID $f (a descendant of the target)" "$tmp/7.log" ||
	[ "$n7" -lt 20 ]; then
	fail ${T}_launcher_child "record exited $rc, child ${f:-none}, $n7 kernels: $(grep -i -e gpu -e error "$tmp/7.log" | tr '\n' ' ')"
else
	pass ${T}_launcher_child
	echo "    ($n7 kernels from PID $f, a child of the shell $sh)"
fi

# 7. the programs' own checks (no EINTR, full sleeps, no lost data, no signal, masks kept)
kill -TERM $b $c 2>/dev/null
for p in $a $e $sh; do wait $p; done
if grep -q 'sbinject: ok' "$tmp/a.out" && grep -q 'sbinject: ok' "$tmp/e.out" &&
	grep -q 'sbinject: ok' "$tmp/f.out"; then
	pass ${T}_target_unharmed
	echo "    ($(grep 'sbinject:' "$tmp/a.out"))"
else
	fail ${T}_target_unharmed "$(tail -n 2 "$tmp/a.out" "$tmp/e.out" "$tmp/f.out" | tr '\n' ' ')"
fi
