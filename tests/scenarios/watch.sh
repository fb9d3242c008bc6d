#!/usr/bin/env bash
# stepblame watch, as a user leaves it running: it finds the trainer by its
# command line, writes a line per step, keeps the detail around slow steps as
# trace files whose reports blame the injected interference right, follows
# the trainer when it restarts, and holds its files to the caps, the oldest
# removed first (snippets an earlier watch left included).
set -u
. "$(dirname "$0")/../lib.sh"
T=watch

need_bpf $T || exit 0
need_sim $T || exit 0

tmp=$(mktemp -d)
sim= w= cg=
cleanup() {
	[ -n "$sim" ] && kill -9 "$sim" 2>/dev/null
	[ -n "$w" ] && kill -9 "$w" 2>/dev/null
	[ -n "$cg" ] && { sleep 0.2; rmdir "$cg" 2>/dev/null; }
	rm -rf "$tmp"
}
trap cleanup EXIT

# the trainer's command line carries this directory: the pattern matches it alone
mkdir -p "$tmp/ckpt"
pat="--ckpt-dir $tmp/ckpt"
trainer() { # steps, truth file, more simtrainer arguments
	local steps=$1 truth=$2; shift 2
	"$SIMTRAINER" --steps "$steps" --kernels 4 --kernel-us 1000 --quiet --wait-agent 30 \
		--ckpt-dir "$tmp/ckpt" --truth "$truth" "$@" >"$tmp/sim.out" 2>&1 &
	sim=$!
}
# wait until FILE has a line matching REGEX (up to SEC seconds)
wait_line() {
	local file=$1 re=$2 sec=$3 i
	for ((i = 0; i < sec * 10; i++)); do
		grep -qE -- "$re" "$file" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# ---- a trainer with three injections, then a restart ----
timeout 300 "$STEPBLAME" watch -n "$pat" --dir "$tmp/a" --around 1 >"$tmp/a.out" 2>"$tmp/a.err" &
w=$!
wait_line "$tmp/a.out" '^waiting for a process' 20 || true
trainer 1700 "$tmp/truth1.jsonl" --inject hog@500-509:-10 --inject ckpt@900 --inject faults@1300:256
pid1=$sim
wait "$sim"; sim=
if ! wait_line "$tmp/a.out" "^PID $pid1 exited" 60; then
	fail ${T}_snippets "watch did not say that PID $pid1 exited: $(tail -3 "$tmp/a.out" "$tmp/a.err" | tr '\n' ' ')"
	exit 0
fi
# a run that matches and ends within a second (a `--help`, a crash at start): it
# ends while the watch attaches, or is watched to its end; the watch goes on
"$SIMTRAINER" --steps 5 --kernels 1 --quiet --start-delay-ms 800 --ckpt-dir "$tmp/ckpt" \
	>"$tmp/short.out" 2>&1 &
sim=$!
pid_short=$sim
wait "$sim"; sim=
wait_line "$tmp/a.out" "^PID $pid_short exited|^waiting for a process" 30 || true
sleep 1
# the restarted trainer: a new process with the same command line
trainer 300 "$tmp/truth2.jsonl"
pid2=$sim
restarted=yes
wait_line "$tmp/a.out" "^watching PID $pid2:" 30 || restarted=no
wait "$sim"; sim=
wait_line "$tmp/a.out" "^PID $pid2 exited" 60 || restarted="no exit line"
kill -INT "$w"
wait "$w"
rc=$?
w=

for f in "$tmp"/a/*.sbtrace; do
	[ -e "$f" ] || continue
	"$STEPBLAME" report --format json "$f" >"$f.json" 2>"$f.err" || echo "report of $f failed: $(head -2 "$f.err")" >>"$tmp/reports.err"
done

out=$(python3 "$(dirname "$0")/watch_check.py" "$tmp/a" "$tmp/truth1.jsonl" "$pid1" 2>&1)
nsnips=$(ls "$tmp"/a/tail-"$pid1"-step*.sbtrace 2>/dev/null | wc -l)
wrote=$(grep -c "^wrote $tmp/a/tail-$pid1-" "$tmp/a.out")
if [ $rc != 0 ]; then
	fail ${T}_snippets "watch exited $rc after SIGINT: $(tail -2 "$tmp/a.err" | tr '\n' ' ')"
elif [ -s "$tmp/reports.err" ]; then
	fail ${T}_snippets "$(head -3 "$tmp/reports.err" | tr '\n' ' ')"
# the hog is judged where it kept the launcher waiting (watch_check.py); a
# loaded machine's scheduler can keep it from ever doing so, which is said
elif grep -q FAILED <<<"$out" || [ "$nsnips" = 0 ] ||
	! grep -qE "^    hog(: | \(steps [0-9-]+\): it never kept the launcher waiting)" <<<"$out"; then
	fail ${T}_snippets "$nsnips snippets of PID $pid1: $(tr '\n' ' ' <<<"$out")"
elif [ "$wrote" != "$nsnips" ]; then
	fail ${T}_snippets "$nsnips snippet files, but $wrote 'wrote' lines"
else
	pass ${T}_snippets
	echo "    ($nsnips snippets of PID $pid1)"
	echo "$out"
fi

if [ "$restarted" != yes ]; then
	fail ${T}_restart "the restarted trainer (PID $pid2) was not watched ($restarted): $(tail -3 "$tmp/a.out" | tr '\n' ' ')"
else
	pass ${T}_restart
fi

# the step stream: one line per step of each trainer, each a step object read alone
bad=$(python3 - "$tmp/a/steps.jsonl" "$pid1" "$pid2" <<'EOF' 2>&1
import json, sys
path, p1, p2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = {p1: set(), p2: set()}
for l in open(path):
    d = json.loads(l)
    for k in ("step", "duration_ns", "tracer_ns", "loss_total", "identity", "blame"):
        if k not in d:
            print("a line without %s: %s" % (k, l[:100])); sys.exit()
    if d["identity"]["pid"] not in n:
        print("a line of PID %d" % d["identity"]["pid"]); sys.exit()
    if not d["incomplete"]:
        n[d["identity"]["pid"]].add(d["step"])
# steps 1..N-2 complete: the first starts at the first mark seen, the last is cut
for p, want in ((p1, 1700), (p2, 300)):
    missing = [s for s in range(5, want - 2) if s not in n[p]]
    if missing:
        print("PID %d: %d complete steps in the stream, missing %s" % (p, len(n[p]), missing[:5]))
EOF
)
if [ -n "$bad" ]; then
	fail ${T}_stream "$bad"
else
	pass ${T}_stream
fi

# ---- the caps: 2 snippets (those left above count), a 1 MiB stream ----
# one of them as an earlier version named it (.sbt): counted, and removed, all the same
old=$(ls "$tmp"/a/*.sbtrace | head -1)
mv "$old" "${old%.sbtrace}.sbt"
before=$(ls "$tmp"/a/*.sbt "$tmp"/a/*.sbtrace 2>/dev/null | wc -l)
trainer 1500 "$tmp/truth3.jsonl" --inject hog/200:-5
pid3=$sim
timeout 120 "$STEPBLAME" watch -p "$pid3" --dir "$tmp/a" --around 1 --max-snippets 2 --rotate-mb 1 \
	>"$tmp/c.out" 2>"$tmp/c.err"
rc=$?
wait "$sim"; sim=
left=$(ls "$tmp"/a/*.sbt "$tmp"/a/*.sbtrace 2>/dev/null | wc -l)
mine=$(ls "$tmp"/a/tail-"$pid3"-*.sbtrace 2>/dev/null | wc -l)
wrote=$(grep -c "^wrote " "$tmp/c.out")
# this watch's files: the stream and its first rotation (the older ones are the first watch's)
big=$(find "$tmp/a" \( -name steps.jsonl -o -name steps.jsonl.1 \) -size +1040k | head -1)
if [ $rc != 0 ]; then
	fail ${T}_caps "watch -p exited $rc: $(tail -2 "$tmp/c.err" | tr '\n' ' ')"
elif [ "$wrote" -lt 3 ]; then
	fail ${T}_caps "only $wrote snippets written for 7 hog steps: $(tail -3 "$tmp/c.out" | tr '\n' ' ')"
elif [ "$left" != 2 ] || [ "$mine" != 2 ]; then
	fail ${T}_caps "$left snippets left ($mine of PID $pid3), want the newest 2 (there were $before)"
elif [ ! -e "$tmp/a/steps.jsonl.1" ] || [ -n "$big" ]; then
	fail ${T}_caps "the stream was not rotated at 1 MiB: $(ls -l "$tmp"/a/steps.jsonl* | tr '\n' ' ')"
elif ! grep -q "^PID $pid3 exited" "$tmp/c.out"; then
	fail ${T}_caps "watch -p did not end with its trainer: $(tail -2 "$tmp/c.out" | tr '\n' ' ')"
else
	pass ${T}_caps
	echo "    ($wrote snippets written, the newest 2 kept of $((before + wrote)); stream: $(ls "$tmp"/a/steps.jsonl* | wc -l) files)"
fi
# DIR/report.html: the page of the trainer that ended last, every one of its steps
got=$(python3 -c '
import base64, gzip, json, re, sys
m = re.search(r"data-encoding=.gzip.base64.>([A-Za-z0-9+/=]*)</script>", open(sys.argv[1]).read())
d = json.loads(gzip.decompress(base64.b64decode(m.group(1))))
print("OK" if d["target"]["pid"] == int(sys.argv[2]) and len(d["dur"]) >= 1500 else "PID %d, %d steps" % (d["target"]["pid"], len(d["dur"])))
' "$tmp/a/report.html" "$pid3" 2>&1 | tail -1)
if [ "$got" = OK ] && grep -q "^HTML report of PID $pid3 in " "$tmp/c.out"; then
	pass ${T}_html
else
	fail ${T}_html "report.html: $got; $(grep '^HTML' "$tmp/c.out")"
fi

# ---- --idle-pct: a step whose GPU idled more than that gets a snippet of its own ----
# (simtrainer's GPU idles a few percent of every step: 1% catches steps that are not slow)
trainer 600 "$tmp/truth4.jsonl"
timeout 120 "$STEPBLAME" watch -p "$sim" --dir "$tmp/i" --around 0.5 --idle-pct 1 --max-snippets 3 \
	>"$tmp/i.out" 2>"$tmp/i.err"
rc=$?
wait "$sim"; sim=
f=$(ls "$tmp"/i/idle-*.sbtrace 2>/dev/null | head -1)
if [ $rc != 0 ] || [ -z "$f" ]; then
	fail ${T}_idle "exit $rc, no idle snippet: $(ls "$tmp/i" | tr '\n' ' ') $(tail -2 "$tmp/i.err" | tr '\n' ' ')"
else
	step=$(basename "$f" | sed -E 's/^idle-[0-9]+-step([0-9]+).*/\1/')
	share=$("$STEPBLAME" report --format json "$f" 2>/dev/null | python3 -c '
import json, sys
step = int(sys.argv[1])
for s in json.load(sys.stdin)["steps"]:
    if s["step"] == step:
        print("%.4f" % (s["gpu_idle_ns"] / s["duration_ns"]))' "$step")
	if [ -z "$share" ] || ! python3 -c "import sys; sys.exit(not float('$share') > 0.01)"; then
		fail ${T}_idle "$(basename "$f"): step $step's GPU idle share in its report is '${share}', not over 1%"
	else
		pass ${T}_idle
		echo "    ($(basename "$f"): step $step idle $share of it)"
	fi
fi

# ---- --cgroup: the trainer is the root process of a cgroup ----
cgroot=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -z "$cgroot" ] || ! mkdir "$cgroot/sbwatch.$$" 2>/dev/null; then
	fail ${T}_cgroup "cannot make a cgroup v2 directory (mount: '${cgroot:-none}')"
else
	cg="$cgroot/sbwatch.$$"
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$SIMTRAINER" --steps 500 \
		--kernels 4 --kernel-us 1000 --quiet --wait-agent 30 >/dev/null 2>&1 &
	sim=$!
	timeout 120 "$STEPBLAME" watch --cgroup "$cg" --dir "$tmp/g" -d 60 >"$tmp/g.out" 2>"$tmp/g.err" &
	w=$!
	wait "$sim"; sim=
	wait_line "$tmp/g.out" "exited after" 30 || true
	kill -INT "$w" 2>/dev/null
	wait "$w"; rc=$?; w=
	rmdir "$cg" 2>/dev/null
	lines=$(python3 -c '
import json, sys
print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["identity"]["pid"] == int(sys.argv[2])))' \
		"$tmp/g/steps.jsonl" "$(sed -n 's/^watching PID \([0-9]*\):.*/\1/p' "$tmp/g.out" | head -1)" 2>/dev/null)
	if [ $rc != 0 ] || ! grep -q "^watching PID [0-9]*:" "$tmp/g.out" || [ "${lines:-0}" -lt 400 ]; then
		fail ${T}_cgroup "exit $rc, ${lines:-no} step lines: $(tail -3 "$tmp/g.out" "$tmp/g.err" | tr '\n' ' ')"
	else
		pass ${T}_cgroup
		echo "    ($lines step lines of the trainer in $cg)"
	fi
fi

# ---- refusals: one line each ----
ln -s "$tmp/a" "$tmp/link"
for c in "watch" "watch -p 1 -n x" "watch -n (" "watch -p $$ --dir $tmp/link" "watch -p $$ --json x" \
	"watch --cgroup /proc/self"; do
	mkdir -p "$tmp/cwd"
	(cd "$tmp/cwd" && $STEPBLAME $c >"$tmp/r.out" 2>"$tmp/r.err")
	r=$?
	if [ $r = 0 ] || [ "$(wc -l <"$tmp/r.err")" != 1 ]; then
		fail ${T}_refuse "'$c' exited $r with: $(head -3 "$tmp/r.err" | tr '\n' ' ')"
		exit 0
	fi
	# refused before anything is made (no stepblame-watch directory here)
	if [ -n "$(ls -A "$tmp/cwd")" ]; then
		fail ${T}_refuse "'$c' left $(ls -A "$tmp/cwd") behind"
		exit 0
	fi
done
pass ${T}_refuse
