#!/usr/bin/env bash
# Bad input on the command line: every case must end with a non-zero exit and
# ONE clear line on stderr ("stepblame: ..."), never a crash (signal), never a
# hang (each run has a timeout). Then the cases that need a capture: a target
# that is not a trainer (PID 1, a kernel thread, a zombie, no such PID), who may
# trace whom (no privileges; CAP_BPF+CAP_PERFMON without root, own and other
# user's target), output paths that cannot be written, and a full disk (the
# capture stops, the file is readable up to where it got).
set -u
. "$(dirname "$0")/../lib.sh"
T=cli_errors
SB=${STEPBLAME:-build/stepblame}
if [ ! -x "$SB" ]; then skip $T "no stepblame at '$SB'"; exit 0; fi

tmp=$(mktemp -d)
chmod 0711 "$tmp" # the unprivileged cases below must reach into it (not list it)
pids=()
cleanup() { exec 2>/dev/null; for p in "${pids[@]}"; do kill -9 "$p"; done; rm -rf "$tmp"; }
trap cleanup EXIT

# expect NAME RC REGEX -- CMD...   (RC: a number, or nz for any non-zero)
expect() {
	local name=$1 want=$2 re=$3 rc n line
	shift 4
	timeout -k 2 20 "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
	rc=$?
	n=$(grep -c . "$tmp/err")
	line=$(head -1 "$tmp/err")
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		fail "${T}_$name" "hung (killed after 20 s): $*"
	elif [ $rc -ge 128 ]; then
		fail "${T}_$name" "died of signal $((rc - 128)): $*"
	elif [ $rc = 0 ] || { [ "$want" != nz ] && [ $rc != "$want" ]; }; then
		fail "${T}_$name" "exit $rc, want $want: $* -> $line"
	elif [ "$n" != 1 ]; then
		fail "${T}_$name" "$n lines on stderr, want one: $(tr '\n' '|' <"$tmp/err" | cut -c1-300)"
	elif ! echo "$line" | grep -qE "^stepblame: .*($re)"; then
		fail "${T}_$name" "stderr '$line' does not match /$re/"
	else
		pass "${T}_$name"
	fi
}

# ---- usage errors: no privileges needed ----
p=$$
# the bare command prints its usage (many lines) on stderr and exits 2
"$SB" >/dev/null 2>"$tmp/err"; rc=$?
if [ $rc = 2 ] && grep -q "usage" "$tmp/err"; then pass ${T}_bare_usage; else fail ${T}_bare_usage "exit $rc"; fi
expect unknown_command 2 "unknown command 'frobnicate'" -- "$SB" frobnicate
expect help_unknown 2 "no command 'frobnicate' to help with" -- "$SB" help frobnicate
# help COMMAND is the command's own --help; -V the version
a=$("$SB" help record 2>&1); rc=$?; b=$("$SB" record --help 2>&1)
if [ $rc = 0 ] && [ -n "$a" ] && [ "$a" = "$b" ]; then pass ${T}_help_command
else fail ${T}_help_command "exit $rc; help record and record --help differ: $(echo "$a" | head -2 | tr '\n' '|')"; fi
v=$("$SB" -V 2>&1); rc=$?
if [ $rc = 0 ] && [ "$v" = "$("$SB" --version)" ] && echo "$v" | grep -qE '^stepblame [0-9]+\.[0-9]+\.[0-9]+$'; then
	pass ${T}_version
else fail ${T}_version "exit $rc: '$v'"; fi
expect record_unknown_long 2 "unknown option '--bogus'" -- "$SB" record --bogus -p $p -o "$tmp/x.sbt"
expect record_unknown_short 2 "unknown option '-x'" -- "$SB" record -x
expect attach_unknown 2 "unknown option '--frob'" -- "$SB" attach --frob
expect dump_unknown 2 "unknown option '--bogus'" -- "$SB" dump --bogus "$tmp/x.sbt"
expect dump_format 2 "--format is text or jsonl, not 'xml'" -- "$SB" dump --format xml "$tmp/x.sbt"
expect report_unknown 2 "bogus" -- "$SB" report "$tmp/x.sbt" --bogus
expect demo_unknown 2 "bogus" -- "$SB" demo --bogus
expect run_unknown 2 "unknown option '--bogus'" -- "$SB" run --bogus -- true
expect record_p_missing_value 2 "'-p' needs a value" -- "$SB" record -p
expect record_d_missing_value 2 "'-d' needs a value" -- "$SB" record -p $p -o "$tmp/x.sbt" -d
expect record_o_missing_value 2 "needs a value" -- "$SB" record -p $p -o
expect attach_p_missing_value 2 "needs a value" -- "$SB" attach -p
expect report_format_missing 2 "needs|value|format" -- "$SB" report "$tmp/x.sbt" --format
expect record_no_pid 2 "needs -p PID" -- "$SB" record -o "$tmp/x.sbt"
expect attach_no_pid 2 "needs -p PID" -- "$SB" attach
expect attach_rank_without_metrics 2 "label the metrics: give --metrics-addr" -- "$SB" attach -p $p --rank 3
expect attach_metrics_addr_bad 1 "wants HOST:PORT" -- "$SB" attach -p $p --metrics-addr 9464
expect record_metrics_addr 2 "--metrics-addr is not an option of this command" -- "$SB" record -p $p -o "$tmp/x.sbt" --metrics-addr 127.0.0.1:9464
expect report_ranks_jsonl 2 "not jsonl" -- "$SB" report "$tmp/x.sbt" "$tmp/y.sbt" --format jsonl
expect pid_not_a_number 2 "wants a process ID, got 'abc'" -- "$SB" record -p abc -o "$tmp/x.sbt"
expect pid_zero 2 "wants a process ID, got '0'" -- "$SB" record -p 0 -o "$tmp/x.sbt"
expect pid_negative 2 "wants a process ID, got '-5'" -- "$SB" record -p -5 -o "$tmp/x.sbt"
expect pid_huge 2 "wants a process ID" -- "$SB" record -p 99999999999999999999 -o "$tmp/x.sbt"
expect pid_trailing 2 "wants a process ID, got '12x'" -- "$SB" record -p 12x -o "$tmp/x.sbt"
expect duration_negative 2 "wants a duration" -- "$SB" record -p $p -o "$tmp/x.sbt" -d -3
expect duration_nan 2 "wants a duration" -- "$SB" record -p $p -o "$tmp/x.sbt" -d nan
expect duration_inf 2 "wants a duration" -- "$SB" record -p $p -o "$tmp/x.sbt" -d inf
expect duration_unit 2 "wants a duration" -- "$SB" record -p $p -o "$tmp/x.sbt" -d 5parsecs
expect ring_not_pow2 2 "power of two" -- "$SB" record -p $p -o "$tmp/x.sbt" --ring-mb 3
expect ring_zero 2 "power of two" -- "$SB" record -p $p -o "$tmp/x.sbt" --ring-mb 0
expect max_overhead_negative 2 "--max-overhead wants a percentage .*got '-1'" -- "$SB" record -p $p -o "$tmp/x.sbt" --max-overhead -1
expect max_overhead_word 2 "--max-overhead wants a percentage .*got 'abc'" -- "$SB" record -p $p -o "$tmp/x.sbt" --max-overhead abc
expect max_overhead_empty 2 "--max-overhead wants a percentage .*got ''" -- "$SB" record -p $p -o "$tmp/x.sbt" --max-overhead ""
expect max_overhead_over_100 2 "--max-overhead wants a percentage" -- "$SB" attach -p $p --max-overhead 150
expect max_overhead_missing_value 2 "'--max-overhead' needs a value" -- "$SB" record -p $p -o "$tmp/x.sbt" --max-overhead
expect fold_too_long 2 "--fold wants microseconds from 0 to 1000 .*got '2000'" -- "$SB" record -p $p -o "$tmp/x.sbt" --fold 2000
expect fold_word 2 "--fold wants microseconds .*got 'abc'" -- "$SB" attach -p $p --fold abc
expect agent_cpu_bad 2 "CPU number" -- "$SB" record -p $p -o "$tmp/x.sbt" --agent-cpu many
expect agent_cpu_absent 2 "this machine has CPUs 0 to" -- "$SB" record -p $p -o "$tmp/x.sbt" --agent-cpu 1023
expect step_uprobe_bad 2 "LIB:SYM" -- "$SB" record -p $p -o "$tmp/x.sbt" --step-uprobe nocolon
expect record_extra_arg 2 "unexpected argument 'extra'" -- "$SB" record -p $p -o "$tmp/x.sbt" extra
expect output_empty 2 "-o wants a file name" -- "$SB" record -p $p -o ""
# trace files that are not traces
: >"$tmp/empty.sbt"; echo "hello" >"$tmp/text.sbt"; mkdir "$tmp/dir.sbt"
printf 'SBTRACE\0\1\0' >"$tmp/short.sbt"
for c in dump report; do
	expect ${c}_no_file 1 "cannot open .*No such file" -- "$SB" $c "$tmp/none.sbt"
	expect ${c}_directory 1 "Is a directory" -- "$SB" $c "$tmp/dir.sbt"
	expect ${c}_empty 1 "empty" -- "$SB" $c "$tmp/empty.sbt"
	expect ${c}_not_trace 1 "not a stepblame trace" -- "$SB" $c "$tmp/text.sbt"
	expect ${c}_short_header 1 "cut short inside its file header" -- "$SB" $c "$tmp/short.sbt"
done
[ -e "$tmp/x.sbt" ] && fail ${T}_no_litter "a usage error left $tmp/x.sbt behind"
ls "$tmp" | grep -q partial && fail ${T}_no_litter "a usage error left a partial trace: $(ls "$tmp")"

# ---- targets and privileges: root (the checks run before any BPF is loaded) ----
need_bpf ${T}_targets || exit 0

pid_max=$(cat /proc/sys/kernel/pid_max)
expect pid_absent 1 "no process with PID" -- "$SB" record -p $((pid_max + 1)) -o "$tmp/x.sbt"
expect attach_pid_absent 1 "no process with PID" -- "$SB" attach -p $((pid_max + 1))
expect pid_1 1 "PID 1 is the init process; stepblame traces a trainer" -- "$SB" record -p 1 -o "$tmp/x.sbt"
expect attach_pid_1 1 "PID 1 is the init process" -- "$SB" attach -p 1
kthread=2
if grep -q '^Name:.*kthreadd' /proc/2/status 2>/dev/null; then
	expect kernel_thread 1 "is a kernel thread" -- "$SB" record -p $kthread -o "$tmp/x.sbt"
else
	skip ${T}_kernel_thread "PID 2 is not kthreadd here (in a pid namespace?)"
fi
# a zombie: the child of a shell that exec'd into something that never waits
sh -c 'sleep 0.1 & echo $! >"$1"; exec sleep 30' sh "$tmp/zpid" &
pids+=($!)
sleep 0.4
z=$(cat "$tmp/zpid")
if grep -q '^State:.*Z' /proc/$z/status 2>/dev/null; then
	expect zombie 1 "has already exited \(zombie\)" -- "$SB" record -p "$z" -o "$tmp/x.sbt"
else
	skip ${T}_zombie "could not make a zombie"
fi
expect self 1 "stepblame itself|no process" -- sh -c 'exec "$0" record -p $$ -o "$1"' "$SB" "$tmp/x.sbt"

# output paths, checked before any probe is loaded
sleep 30 &
tgt=$!; pids+=($tgt)
expect out_no_dir 1 "cannot write .*No such file or directory" -- "$SB" record -q -p $tgt -d 1 -o "$tmp/nodir/x.sbt"
expect out_is_dir 1 "is a directory" -- "$SB" record -q -p $tgt -d 1 -o "$tmp"
mknod "$tmp/null" c 1 3 2>/dev/null && {
	expect out_is_device 1 "not a regular file" -- "$SB" record -q -p $tgt -d 1 -o "$tmp/null"
	[ -c "$tmp/null" ] && pass ${T}_device_kept || fail ${T}_device_kept "the device node was replaced"
}
mkfifo "$tmp/fifo" && expect out_is_fifo 1 "not a regular file" -- "$SB" record -q -p $tgt -d 1 -o "$tmp/fifo"
expect attach_json_no_dir 1 "cannot write" -- "$SB" attach -q -p $tgt -d 1 --json "$tmp/nodir/x.json"

# ---- not root ----
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
CAPS="--inh-caps +bpf,+perfmon --ambient-caps +bpf,+perfmon"
if ! command -v setpriv >/dev/null || ! $NOBODY true 2>/dev/null; then
	skip ${T}_unprivileged "no setpriv (util-linux) to drop privileges"
else
	mine=$tmp/nobody; mkdir "$mine"; chown 65534:65534 "$mine"
	$NOBODY sleep 30 &
	own=$!; pids+=($own)
	expect nonroot_no_caps 1 "not allowed: loading BPF probes needs root or CAP_BPF and CAP_PERFMON" -- \
		$NOBODY "$SB" record -p $own -d 1 -o "$mine/x.sbt"
	expect nonroot_attach_no_caps 1 "not allowed" -- $NOBODY "$SB" attach -p $own -d 1
	if ! $NOBODY $CAPS true 2>/dev/null; then
		skip ${T}_caps "setpriv cannot grant CAP_BPF/CAP_PERFMON here"
	else
		expect caps_other_user 1 "not allowed: PID $tgt belongs to uid 0.*CAP_SYS_PTRACE" -- \
			$NOBODY $CAPS "$SB" record -p $tgt -d 1 -o "$mine/x.sbt"
		# a directory the user cannot write (root's, 0755)
		mkdir "$tmp/ro"
		expect caps_readonly_dir 1 "cannot write .*Permission denied" -- \
			$NOBODY $CAPS "$SB" record -q -p $own -d 1 -o "$tmp/ro/x.sbt"
		# own target with CAP_BPF+CAP_PERFMON only: the capture runs; uprobes need more
		timeout 30 $NOBODY $CAPS "$SB" record -p $own -d 1 -o "$mine/x.sbt" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		if [ $rc != 0 ] || [ ! -s "$mine/x.sbt" ]; then
			fail ${T}_caps_capture "exit $rc: $(tail -2 "$tmp/err" | tr '\n' ' ')"
		elif grep -q "alloc:malloc not attached.*not allowed: uprobes need CAP_SYS_ADMIN" "$tmp/err"; then
			pass ${T}_caps_capture
		elif grep -q "alloc:malloc not attached" "$tmp/err"; then
			fail ${T}_caps_capture "malloc probe refused without saying why: $(grep -m1 'alloc:malloc' "$tmp/err")"
		else
			pass ${T}_caps_capture
			echo "    (uprobes attached with CAP_BPF+CAP_PERFMON on this kernel)"
		fi
		[ "$(stat -c %U "$mine/x.sbt" 2>/dev/null)" = nobody ] || fail ${T}_caps_owner "trace not owned by its user"
		# and its GPU channel, found without /proc/PID/map_files (which wants CAP_SYS_ADMIN)
		if [ -x "${SIMTRAINER:-}" ]; then
			(cd "$mine" && exec $NOBODY "$SIMTRAINER" --steps 100000 --kernels 2 --kernel-us 300 \
				--wait-agent 30 --quiet) >/dev/null 2>&1 &
			ownsim=$!; pids+=($ownsim)
			for _ in $(seq 50); do ls /dev/shm | grep -q "^stepblame-$ownsim-" && break; sleep 0.1; done
			timeout 30 $NOBODY $CAPS "$SB" record -p $ownsim -d 1 -o "$mine/g.sbt" >"$tmp/out" 2>"$tmp/err"
			if grep -q "GPU timeline: reading the simtrainer channel" "$tmp/err"; then
				pass ${T}_caps_gpu_channel
			else
				fail ${T}_caps_gpu_channel "$(grep -m1 -i 'channel' "$tmp/err")"
			fi
			kill $ownsim 2>/dev/null
		fi
	fi
fi

# ---- a full disk: a 256 KiB tmpfs in a private mount namespace ----
if ! unshare -m true 2>/dev/null; then
	skip ${T}_disk_full "cannot make a mount namespace (unshare -m)"
	exit 0
fi
mkdir "$tmp/full"
"${SIMTRAINER:-build/simtrainer}" --steps 100000 --kernels 4 --kernel-us 300 --wait-agent 20 --quiet >/dev/null 2>&1 &
sim=$!; pids+=($sim)
unshare -m sh -c '
	mount -t tmpfs -o size=256k,mode=0700 tmpfs "$1" || exit 99
	timeout -k 2 30 "$2" record -q -p "$3" -d 20 -o "$1/t.sbt" 2>"$4/rec.err"; echo $? >"$4/rec.rc"
	"$2" dump "$1"/t.sbt >/dev/null 2>"$4/dump.err"; echo $? >"$4/dump.rc"
	"$2" report "$1"/t.sbt >"$4/rep.out" 2>"$4/rep.err"; echo $? >"$4/rep.rc"
	"$2" report "$1"/t.sbt --format json >"$4/rep.json" 2>/dev/null
	ls "$1" >"$4/ls"
' sh "$tmp/full" "$SB" $sim "$tmp"
urc=$?
{ kill -9 $sim; wait $sim; } 2>/dev/null
rm -f /dev/shm/stepblame-$sim-*.chan # killed by a signal, it left its channel behind
if [ $urc = 99 ]; then
	skip ${T}_disk_full "cannot mount a tmpfs in the namespace"
else
	rc=$(cat "$tmp/rec.rc" 2>/dev/null)
	n=$(grep -c . "$tmp/rec.err")
	if [ "$rc" != 1 ] || [ "$n" != 1 ] || ! grep -q "No space left on device; the trace is readable up to its last whole record" "$tmp/rec.err"; then
		fail ${T}_disk_full_record "record exit ${rc:-?}, stderr: $(tr '\n' '|' <"$tmp/rec.err")"
	else
		pass ${T}_disk_full_record
	fi
	if [ "$(cat "$tmp/ls")" != t.sbt ]; then
		fail ${T}_disk_full_file "want just t.sbt on the full disk, found: $(tr '\n' ' ' <"$tmp/ls")"
	fi
	if [ "$(cat "$tmp/dump.rc")" = 0 ] && grep -q "cut short" "$tmp/dump.err"; then
		pass ${T}_disk_full_dump
	else
		fail ${T}_disk_full_dump "dump exit $(cat "$tmp/dump.rc"): $(head -1 "$tmp/dump.err")"
	fi
	if [ "$(cat "$tmp/rep.rc")" = 0 ] && grep -qi "cut short" "$tmp/rep.out" && grep -q '"cut_short": *true' "$tmp/rep.json"; then
		pass ${T}_disk_full_report
	else
		fail ${T}_disk_full_report "report exit $(cat "$tmp/rep.rc"): $(head -1 "$tmp/rep.err"); $(grep -i -m1 capture "$tmp/rep.out")"
	fi
fi
exit 0
