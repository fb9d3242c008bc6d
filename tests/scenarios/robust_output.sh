#!/usr/bin/env bash
# Files a root stepblame writes where others have a say (SECURITY.md):
#  - `sudo stepblame run -o OUT -- CMD`: CMD runs as the user and swaps the
#    temporary trace for a symlink to a root-only file; the file must keep its
#    owner and bytes (the old code chown'ed OUT by name after the rename);
#  - run refuses an OUT that the user could not create or replace themselves
#    (a root-owned file in a root directory, a name in a directory the user
#    cannot write, another user's file in a sticky directory), writes nothing
#    there and does not start CMD;
#  - run's trace belongs to the user from the first byte, and its report is
#    read from the file written, not from the name CMD controls;
#  - `attach --json OUT` and `report -o OUT` never write through a symlink
#    planted at OUT, and a name in a directory swapped for a symlink to a
#    root directory after the start is never created there.
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_output

need_bpf $T || exit 0
need_sim $T || exit 0

U=65534 G=65534
tmp=$(mktemp -d)
chmod 0711 "$tmp"
sim=
cleanup() {
	exec 2>/dev/null
	[ -n "$sim" ] && kill -9 $sim
	rm -rf "$tmp"
}
trap cleanup EXIT
home=$tmp/user          # the invoking user's own directory
mkdir "$home" && chown $U:$G "$home"
rootdir=$tmp/root       # root's, readable by all, writable by root only
mkdir -m 0755 "$rootdir"
secret=$rootdir/secret  # stands for /etc/shadow
printf 'root:$6$precious\n' >"$secret"
chmod 0600 "$secret"
sticky=$tmp/sticky      # stands for /tmp
mkdir -m 1777 "$sticky"

as_user() { env SUDO_UID=$U SUDO_GID=$G SUDO_USER=nobody "$@"; }
secret_ok() { [ "$(stat -c '%u:%g %a' "$secret")" = "0:0 600" ] && grep -q precious "$secret"; }

# 1. the traced command swaps the temporary trace for a symlink to the secret
cat >"$home/swap.sh" <<'EOF'
#!/bin/sh
# runs as the user, in their directory, while root writes the trace there
for i in $(seq 50); do
	for p in out.sbt.partial.*; do
		[ -f "$p" ] && [ ! -L "$p" ] && rm -f "$p" && ln -s "$1" "$p" && echo swapped
	done
	sleep 0.05
done
EOF
chmod 0755 "$home/swap.sh"
(cd "$home" && as_user timeout 60 "$STEPBLAME" run -q --no-alloc -o "$home/out.sbt" -- \
	./swap.sh "$secret") >"$tmp/swap.out" 2>&1
if ! grep -q swapped "$tmp/swap.out"; then
	fail ${T}_run_symlink_swap "the command never found the temporary trace to swap: $(tail -2 "$tmp/swap.out" | tr '\n' ' ')"
elif secret_ok; then
	pass ${T}_run_symlink_swap
else
	fail ${T}_run_symlink_swap "the root-only file is now $(stat -c '%U:%G %a' "$secret")"
fi

# 2. outputs the user could not make themselves: refused, nothing written, CMD not run
check_refused() { # name, output path, file that must not change or appear
	local name=$1 out=$2 before after
	before=$(stat -c '%u %s %Y' "$out" 2>/dev/null)
	rm -f "$home/ran"
	as_user timeout 30 "$STEPBLAME" run -q -o "$out" -- sh -c "touch $home/ran" >"$tmp/ref.out" 2>&1
	local rc=$?
	after=$(stat -c '%u %s %Y' "$out" 2>/dev/null)
	local left
	left=$(ls -a "$(dirname "$out")" | grep -c 'partial')
	if [ $rc = 0 ]; then
		fail ${T}_$name "run -o $out exited 0"
	elif ! grep -q "refusing to write $out: uid $U could not create or replace it" "$tmp/ref.out"; then
		fail ${T}_$name "message: $(head -1 "$tmp/ref.out")"
	elif [ "$before" != "$after" ] || [ "$left" != 0 ]; then
		fail ${T}_$name "$out changed ($before -> $after) or temporary left ($left)"
	elif [ -e "$home/ran" ]; then
		fail ${T}_$name "the command ran although its output was refused"
	else
		pass ${T}_$name
	fi
}
echo keep >"$rootdir/existing"; chmod 0644 "$rootdir/existing"
check_refused run_refuses_root_file "$rootdir/existing"
check_refused run_refuses_root_dir "$rootdir/new.sbt"
[ -e "$rootdir/new.sbt" ] && fail ${T}_run_refuses_root_dir "$rootdir/new.sbt was created"
echo other >"$sticky/theirs.sbt"; chown 65533:65533 "$sticky/theirs.sbt"; chmod 0666 "$sticky/theirs.sbt"
check_refused run_refuses_sticky_other "$sticky/theirs.sbt"

# 3. a normal run: the trace is the user's, and reported
(cd "$home" && as_user timeout 60 "$STEPBLAME" run -o "$home/good.sbt" -- "$SIMTRAINER" --steps 30 \
	--kernels 2 --kernel-us 300 --quiet) >"$tmp/good.out" 2>"$tmp/good.err"
rc=$?
own=$(stat -c '%u:%g' "$home/good.sbt" 2>/dev/null)
if [ $rc = 0 ] && [ "$own" = "$U:$G" ] && grep -q '^Steps\|steps' "$tmp/good.out"; then
	pass ${T}_run_output_owned
else
	fail ${T}_run_output_owned "exit $rc, owner '$own', report: $(head -2 "$tmp/good.out" | tr '\n' ' ') $(tail -1 "$tmp/good.err")"
fi

# 4. CMD swaps the output's directory for a symlink to a root directory
mkdir "$home/d" && chown $U:$G "$home/d"
(cd "$home" && as_user timeout 60 "$STEPBLAME" run -q --no-alloc -o "$home/d/out.sbt" -- \
	sh -c "mv d d.old && ln -s $rootdir d && sleep 0.3") >"$tmp/dir.out" 2>&1
if [ -e "$rootdir/out.sbt" ] || ls "$rootdir" | grep -q partial; then
	fail ${T}_run_dir_swap "written into the root directory: $(ls "$rootdir" | tr '\n' ' ')"
elif [ ! -L "$home/d" ] || [ "$(stat -c %u "$home/d.old/out.sbt" 2>/dev/null)" != $U ]; then
	fail ${T}_run_dir_swap "the swap did not happen or the trace is not in the directory it started in: $(tail -1 "$tmp/dir.out")"
else
	pass ${T}_run_dir_swap
fi

# 5. attach --json and report -o over a planted symlink
"$SIMTRAINER" --steps 100000 --kernels 2 --kernel-us 300 --quiet >/dev/null 2>&1 &
sim=$!
sleep 0.3
ln -s "$secret" "$sticky/live.jsonl"
timeout 30 "$STEPBLAME" attach -q -p $sim -d 1 --json "$sticky/live.jsonl" >/dev/null 2>"$tmp/att.err"
rc=$?
if ! secret_ok; then
	fail ${T}_attach_json_symlink "the root-only file was written: $(stat -c '%U %a %s' "$secret")"
elif [ $rc != 0 ] || [ -L "$sticky/live.jsonl" ] || ! grep -q '"step"' "$sticky/live.jsonl"; then
	fail ${T}_attach_json_symlink "exit $rc, $(stat -c %F "$sticky/live.jsonl"): $(tail -1 "$tmp/att.err")"
else
	pass ${T}_attach_json_symlink
fi
kill $sim; wait $sim 2>/dev/null; sim=
if [ -f "$home/good.sbt" ]; then
	ln -s "$secret" "$sticky/r.json"
	"$STEPBLAME" report "$home/good.sbt" -f json -o "$sticky/r.json" >/dev/null 2>"$tmp/rep.err"
	rc=$?
	if secret_ok && [ $rc = 0 ] && [ ! -L "$sticky/r.json" ] && grep -q '"summary"' "$sticky/r.json"; then
		pass ${T}_report_o_symlink
	else
		fail ${T}_report_o_symlink "exit $rc, secret $(stat -c '%U %a %s' "$secret"): $(tail -1 "$tmp/rep.err")"
	fi
fi
# 6. record never replaces a trace silently: without -o it writes stepblame-PID.sbtrace
# in the current directory; a second capture to the same name keeps the first
# as NAME.old (byte for byte), and a symlink planted at NAME.old is replaced, not
# followed
kept=$tmp/kept
mkdir "$kept"
sleep 60 &
sim=$!
k=$sim
(cd "$kept" && "$STEPBLAME" record -p $sim -d 1 -q) >/dev/null 2>"$tmp/k1.err"; r1=$?
cp "$kept/stepblame-$sim.sbtrace" "$tmp/first.sbt" 2>/dev/null
ln -s "$secret" "$kept/stepblame-$sim.sbtrace.old"
(cd "$kept" && "$STEPBLAME" record -p $sim -d 1) >/dev/null 2>"$tmp/k2.err"; r2=$?
kill $sim; wait $sim 2>/dev/null; sim=
if [ $r1 != 0 ] || [ $r2 != 0 ]; then
	fail ${T}_record_keeps_old "record exited $r1, $r2: $(tail -1 "$tmp/k1.err") $(tail -1 "$tmp/k2.err")"
elif ! secret_ok || [ -L "$kept/stepblame-$k.sbtrace.old" ]; then
	fail ${T}_record_keeps_old "the symlink at NAME.old was followed or kept: secret $(stat -c '%U %a %s' "$secret")"
elif ! cmp -s "$tmp/first.sbt" "$kept/stepblame-$k.sbtrace.old" || cmp -s "$tmp/first.sbt" "$kept/stepblame-$k.sbtrace" ||
	! "$STEPBLAME" report "$kept/stepblame-$k.sbtrace" >/dev/null 2>&1; then
	fail ${T}_record_keeps_old "NAME.old is not the first capture, or NAME not a new readable one: $(ls -l "$kept" | tr '\n' ' ')"
elif ! grep -q "kept as .*stepblame-$k.sbtrace.old" "$tmp/k2.err"; then
	fail ${T}_record_keeps_old "record did not say it kept the old trace: $(tail -1 "$tmp/k2.err")"
else
	pass ${T}_record_keeps_old
fi
ls "$tmp" "$home" "$sticky" "$rootdir" | grep -q partial &&
	fail ${T}_no_partial_left "temporary files left: $(ls "$tmp" "$home" "$sticky" "$rootdir" | grep partial | tr '\n' ' ')"
exit 0
