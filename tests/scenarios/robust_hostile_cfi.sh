#!/usr/bin/env bash
# A hostile trainer attacks the agent (root) through the call-frame
# information of the code it maps (SECURITY.md, "User stacks"): its stacks
# pass through three shared objects built to make libdw, which walks the
# stack copies, take the agent's memory and time (tests/progs/sbcfi):
#  - remember.so: an FDE of a million DW_CFA_remember_state, each a copy of
#    the register rules that libdw allocates at every lookup;
#  - reg.so: a rule for register 20,000,000, which libdw grows its rules to
#    (320 MB, zeroed) at every lookup;
#  - noshdr.so: no section headers and a sparse 512 MiB file, so that libdw
#    would take .eh_frame from PT_GNU_EH_FRAME and read the file to its end.
# Before the check (capture/cficheck.c) one capture of 4 s reached 769 MB of
# agent memory and 2.3 s in walks. Now the capture's peak memory stays within
# 128 MB of the same capture of benign code, its walks within 1 s, the note
# names three refused files, and the benign object's stacks are still
# walked up to main. With 70 more benign objects in the stacks than the agent
# keeps files open (64), it lets them all go again and again: the refused ones
# are neither checked nor counted again (three files at most, walks within 1 s).
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_hostile_cfi

need_bpf $T || exit 0
prog="$PWD/${BUILD:-build}/tests/progs/sbcfi"
if [ ! -x "$prog" ] || ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
	skip $T "no $prog or no stepblame that records"; exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
	skip $T "stack copies are x86-64 only"; exit 0
fi
need_cmd $T "${CC:-cc}" gcc || exit 0
tmp=$(mktemp -d)
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

cat >"$tmp/benign.c" <<'EOF'
void sbcfi_call(void (*cb)(void)) { cb(); __asm__ volatile("" ::: "memory"); }
EOF
python3 - "$tmp" <<'PY'
import sys
d = sys.argv[1]
def uleb(v):
    out = []
    while True:
        b, v = v & 0x7f, v >> 7
        out.append(b | 0x80 if v else b)
        if not v:
            return out
head = """\t.text
\t.globl sbcfi_call
\t.type sbcfi_call, @function
sbcfi_call:
\t.cfi_startproc
\tpushq %rbp
\t.cfi_def_cfa_offset 16
\t.cfi_offset %rbp, -16
"""
tail = """\tmovq %rsp, %rbp
\tcall *%rdi
\tpopq %rbp
\t.cfi_def_cfa_offset 8
\tret
\t.cfi_endproc
\t.size sbcfi_call, .-sbcfi_call
\t.section .note.GNU-stack,"",@progbits
"""
open(d + "/remember.s", "w").write(head + "\t.rept 1000000\n\t.cfi_remember_state\n\t.endr\n" + tail)
# DW_CFA_offset_extended: register 20,000,000 saved at CFA-24
esc = ", ".join("0x%x" % b for b in [0x05] + uleb(20000000) + uleb(3))
open(d + "/reg.s", "w").write(head + "\t.cfi_escape " + esc + "\n" + tail)
PY
CC=${CC:-cc}
if ! { $CC -shared -o "$tmp/remember.so" "$tmp/remember.s" &&
	$CC -shared -o "$tmp/reg.so" "$tmp/reg.s" &&
	$CC -O2 -fPIC -shared -o "$tmp/benign.so" "$tmp/benign.c" &&
	$CC -O2 -fPIC -shared -o "$tmp/noshdr.so" "$tmp/benign.c"; } 2>"$tmp/cc.err"; then
	fail $T "could not build the objects: $(head -2 "$tmp/cc.err" | tr '\n' ' ')"; exit 0
fi
# no section headers (e_shoff, e_shnum, e_shstrndx zero; the loader needs none), then 512 MiB
python3 - "$tmp/noshdr.so" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    h = bytearray(f.read(64))
    struct.pack_into("<Q", h, 0x28, 0)
    struct.pack_into("<HHH", h, 0x3a, 0, 0, 0)
    f.seek(0)
    f.write(h)
PY
truncate -s 512M "$tmp/noshdr.so"

# capture NAME LIB...: record 4 s of sbcfi through LIBs; NAME.err (stderr), NAME.sbt, and
# "MAXRSS_MB WALK_MS REFUSED RESETS" on stdout (REFUSED: the note's count, 0 if none;
# RESETS: how often the agent let every file go to stay in its bounds)
capture() {
	local name=$1
	shift
	python3 - "$STEPBLAME" "$prog" "$tmp/$name" "$@" <<'PY'
import os, re, resource, subprocess, sys, time
sb, prog, out, libs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
late = os.environ.get("SBCFI_LATE")
p = subprocess.Popen([prog, "60"] + libs, stdout=subprocess.PIPE, text=True)
try:
    if p.stdout.readline().strip() != "ready":
        sys.exit("sbcfi did not start")
    r = subprocess.Popen([sb, "record", "-p", str(p.pid), "-d", "4", "-v", "-o", out + ".sbt"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines = []
    # SBCFI_LATE: the objects loaded a second after the capture says it is attached
    for line in r.stderr:
        lines.append(line)
        if late and "attached" in line:
            time.sleep(1)
            open(late, "w").close()
            late = None
    r.wait(timeout=120)
finally:
    p.kill()
    p.wait()
err = "\n".join(l.rstrip("\n") for l in lines if l.startswith("stepblame:"))
open(out + ".err", "w").write(err + "\n")
if r.returncode:
    sys.exit("record exited %d: %s" % (r.returncode, err[-300:]))
walk = re.search(r"in ([0-9.]+) ms of the agent's time", err)
refused = re.search(r"call-frame information of ([0-9]+) mapped file", err)
resets = re.search(r"; ([0-9]+) resets", err)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024,
      walk.group(1) if walk else "nan", refused.group(1) if refused else 0,
      resets.group(1) if resets else "nan")
PY
}

# does a trace hold a stack nap < sbcfi_call < main (a walk through the object's code)?
stack_through() {
	"$STEPBLAME" report --format json "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
for h in d.get("stacks", {}).get("hot", []):
    fr = [f["function"] for f in h["stack"]["frames"]]
    if "nap" in fr and fr[fr.index("nap"):][:3] == ["nap", "sbcfi_call", "main"]:
        sys.exit(0)
sys.exit(1)'
}

if ! ctl=$(capture benign "$tmp/benign.so" 2>"$tmp/ctl.py"); then
	fail $T "benign capture: $(tail -1 "$tmp/ctl.py")"; exit 0
fi
if ! bad=$(capture hostile "$tmp/benign.so" "$tmp/remember.so" "$tmp/reg.so" "$tmp/noshdr.so" 2>"$tmp/bad.py"); then
	fail $T "hostile capture: $(tail -1 "$tmp/bad.py")"; exit 0
fi
read -r ctl_rss _ _ _ <<<"$ctl"
read -r rss walk refused _ <<<"$bad"
echo "    (peak memory $ctl_rss MB benign, $rss MB hostile; hostile walks ${walk} ms; $refused files refused)"
errs=()
[ "$rss" -le $((ctl_rss + 128)) ] || errs+=("the agent's peak memory $rss MB, $ctl_rss MB for benign code")
python3 -c "import sys; sys.exit(not float('$walk') < 1000)" ||
	errs+=("walks took ${walk} ms of the agent's time in 4 s")
[ "$refused" = 3 ] || errs+=("refused files: $refused, not 3: $(grep -m1 'was not used' "$tmp/hostile.err")")
# the benign object's stacks still walked past it, up to main
if ! stack_through "$tmp/hostile.sbt" 2>"$tmp/rep.err"; then
	errs+=("no stack nap < sbcfi_call < main in the hostile capture $(head -1 "$tmp/rep.err")")
fi
if [ ${#errs[@]} -eq 0 ]; then
	pass $T
else
	fail $T "$(printf '%s; ' "${errs[@]}")"
fi

# a library loaded after the agent built the process's session: a walk that meets its code
# builds the session again (its maps changed) and goes through it, up to main
# (SBCFI_LATE: sbcfi naps on its own until a second after the attach, then loads it)
if ! SBCFI_LATE="$tmp/load" capture late "$tmp/benign.so" >/dev/null 2>"$tmp/late.py"; then
	fail ${T}_late_load "capture: $(tail -1 "$tmp/late.py")"
elif ! stack_through "$tmp/late.sbt" 2>"$tmp/rep.err"; then
	fail ${T}_late_load "no stack nap < sbcfi_call < main: $(grep -m1 'stack copies walked' "$tmp/late.err") $(head -1 "$tmp/rep.err")"
else
	pass ${T}_late_load
fi

# more files than the agent keeps open: resets, and the refused files remembered across them
# (the hostile objects twice a round, so that walks come to them again after a reset)
hostile=("$tmp/remember.so" "$tmp/reg.so" "$tmp/noshdr.so")
libs=("${hostile[@]}")
for i in $(seq 1 70); do
	cp "$tmp/benign.so" "$tmp/b$i.so" && libs+=("$tmp/b$i.so")
	[ "$i" != 35 ] || libs+=("${hostile[@]}")
done
if ! many=$(capture many "${libs[@]}" 2>"$tmp/many.py"); then
	fail ${T}_resets "capture: $(tail -1 "$tmp/many.py")"; exit 0
fi
read -r _ walk refused resets <<<"$many"
echo "    (70 more objects: $resets resets, walks ${walk} ms, $refused files refused)"
if [ "$resets" = nan ] || [ "$resets" -lt 1 ]; then
	fail ${T}_resets "no reset with 73 objects in the stacks: $(grep -m1 'stack copies walked' "$tmp/many.err")"
# three at most: a walk the budget left out may never come to one of them (a loaded machine)
elif [ "$refused" -lt 1 ] || [ "$refused" -gt 3 ] ||
	! python3 -c "import sys; sys.exit(not float('$walk') < 1000)"; then
	fail ${T}_resets "after $resets resets: $refused files refused (not 1-3), walks ${walk} ms"
else
	pass ${T}_resets
fi
