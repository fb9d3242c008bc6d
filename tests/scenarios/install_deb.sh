#!/usr/bin/env bash
# Installed like a system tool: `make deb` builds the package from the plain
# build, dpkg installs it into a throwaway root (its own database: the machine's
# packages are not touched), and what it installed is used: the program says
# its version and runs the demo (simtrainer and the report found where `make
# install` puts them, BPF for real), the man pages render with their command's
# options, bash completion completes commands and options, the systemd unit of
# watch is valid for systemd, and the package's dependencies are installed
# packages of this machine. Then dpkg removes it and nothing of it is left.
set -u
. "$(dirname "$0")/../lib.sh"
T=install_deb

need_bpf $T || exit 0
for c in dpkg dpkg-deb man readelf systemd-analyze; do
	if ! command -v $c >/dev/null; then
		# CI installs them (.ci/run): there their absence fails
		if [ -n "${STEPBLAME_REQUIRE_BPF:-}" ]; then fail $T "no $c: apt-get install dpkg man-db binutils systemd"
		else skip $T "no $c: apt-get install dpkg man-db binutils systemd"; fi
		exit 0
	fi
done
# the package is of the plain build (tests/run's BUILD is the sanitized one)
if [ ! -x build/stepblame ] || [ ! -x build/simtrainer ]; then
	skip $T "no plain build (make all)"; exit 0
fi

tmp=$(mktemp -d /var/tmp/install_deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
if ! make -s deb BUILD=build >"$tmp/make.out" 2>&1; then
	fail $T "make deb: $(tail -3 "$tmp/make.out" | tr '\n' ' ')"; exit 0
fi
deb=$(tail -1 "$tmp/make.out")
version=$(sed -n 's/^#define STEPBLAME_VERSION "\(.*\)"/\1/p' user/base/util.h)
mkdir -p "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/info"
touch "$root/var/lib/dpkg/status"
dp=(dpkg --instdir="$root" --admindir="$root/var/lib/dpkg" --force-script-chrootless --force-not-root)
if ! "${dp[@]}" --force-depends -i "$deb" >"$tmp/dpkg.out" 2>&1; then
	fail $T "dpkg -i: $(tail -3 "$tmp/dpkg.out" | tr '\n' ' ')"; exit 0
fi

# the package's dependencies are packages this machine has
missing=
for p in $(dpkg-deb -f "$deb" Depends | tr -d ' ' | tr ',' ' '); do
	dpkg -s "${p%%(*}" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -z "$(dpkg-deb -f "$deb" Depends)" ] || [ -n "$missing" ]; then
	fail ${T}_depends "Depends '$(dpkg-deb -f "$deb" Depends)', not installed here:$missing"
else
	pass ${T}_depends
fi

sb=$root/usr/bin/stepblame
v=$("$sb" -V 2>&1)
if [ "$v" = "stepblame $version" ]; then pass ${T}_version; else fail ${T}_version "'$v'"; fi

# the demo from the installed tree: simtrainer from /usr/lib/stepblame, BPF, the report
if timeout 120 "$sb" demo --scenario hog --keep "$tmp/demo" >"$tmp/demo.out" 2>&1 &&
   grep -q "noisy-neighbor" "$tmp/demo.out" && [ -s "$tmp/demo/report.html" ]; then
	pass ${T}_demo
else
	fail ${T}_demo "$(tail -3 "$tmp/demo.out" | tr '\n' ' ')"
fi

# run --mark-optimizer-steps: the Python package from /usr/lib/stepblame/python, the
# library from /usr/lib, both first for the trainer
got=$(env -u STEPBLAME_LIB -u PYTHONPATH timeout 120 "$sb" run -q -o "$tmp/py.sbt" --no-gpu \
	--mark-optimizer-steps -- /usr/bin/python3 -c \
	'import os, stepblame; print(os.environ["PYTHONPATH"], stepblame.__file__, stepblame.library())' 2>&1 | head -1)
want="$root/usr/lib/stepblame/python/stepblame/_autorun:$root/usr/lib/stepblame/python $root/usr/lib/stepblame/python/stepblame/__init__.py $root/usr/lib/libstepblame.so"
if [ "$got" = "$want" ]; then pass ${T}_python; else fail ${T}_python "'$got', want '$want'"; fi

# a man page per command, each with its command's options, rendered by man
bad=
for c in record report attach watch run demo dump; do
	page=$root/usr/share/man/man1/stepblame-$c.1
	out=$(MANWIDTH=100 man -l "$page" 2>&1)
	want=$("$sb" $c --help | grep -oE -- '--[a-z][a-z-]+' | head -3)
	for w in $want; do
		grep -q -- "$w" <<<"$out" || bad="$bad $c:$w"
	done
	grep -q "^NAME" <<<"$out" || bad="$bad $c:NAME"
done
if [ -n "$bad" ] || [ ! -s "$root/usr/share/man/man1/stepblame.1" ]; then
	fail ${T}_man "missing from the rendered pages:$bad"
else
	pass ${T}_man
fi

# bash completion: a command, an option of that command
got=$(PATH="$root/usr/bin:$PATH" bash -c '
	shopt -s extglob
	. "$1"
	COMP_WORDS=(stepblame rep); COMP_CWORD=1; _stepblame; echo "${COMPREPLY[*]}"
	COMP_WORDS=(stepblame attach --ht); COMP_CWORD=2; _stepblame; echo "${COMPREPLY[*]}"
	COMP_WORDS=(stepblame report run.sbt --format h); COMP_CWORD=4; _stepblame; echo "${COMPREPLY[*]}"
' _ "$root/usr/share/bash-completion/completions/stepblame" 2>&1 | tr '\n' '|')
if [ "$got" = "report|--html|html|" ]; then pass ${T}_completion; else fail ${T}_completion "'$got'"; fi

# the unit: systemd's own check (a warning is a failure)
unit=$root/usr/lib/systemd/system/stepblame-watch.service
if ! grep -q "^ExecStart=/usr/bin/stepblame watch --dir /var/lib/stepblame " "$unit"; then
	fail ${T}_unit "ExecStart: $(grep ExecStart "$unit")"
else
	# a copy whose ExecStart is the installed binary, for systemd to find it
	mkdir -p "$tmp/unit"
	sed "s|/usr/bin/stepblame|$sb|" "$unit" >"$tmp/unit/stepblame-watch.service"
	if out=$(systemd-analyze verify --man=no "$tmp/unit/stepblame-watch.service" 2>&1) && [ -z "$out" ]; then
		pass ${T}_unit
	else
		fail ${T}_unit "systemd-analyze verify: $(head -3 <<<"$out" | tr '\n' ' ')"
	fi
fi

# removed: only what dpkg did not make (its own database) is left
"${dp[@]}" --purge stepblame >"$tmp/purge.out" 2>&1
left=$(cd "$root" && find . -path ./var/lib/dpkg -prune -o ! -type d -print | head -5)
if [ -z "$left" ]; then pass ${T}_purge; else fail ${T}_purge "left behind: $left"; fi
exit 0
