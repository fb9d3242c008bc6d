#!/usr/bin/env bash
# A hostile trainer attacks root through the ELF files it maps, which the
# recorder reads for build ids and the report for symbols (SECURITY.md, "The
# target's files, names and credentials"). Each attack is a copy of tests/progs/sbstack (whose slow
# calls come from functions with known names), changed, run and recorded:
#  - debuglink: stripped, with a .gnu_debuglink naming a FIFO beside it; the
#    report must not open it (libdwfl's standard lookup waited forever);
#  - swapped: no build id, and once it exited its name is a link to a
#    root-only program (the same code, its symbols renamed); the report names
#    sbstack's functions before the swap and never the root-only program's
#    after it;
#  - strtab_bomb: its .strtab compressed, 1 MiB inflating to 1 GiB; the report
#    must not inflate it (it took 1 GiB and more of root's memory);
#  - note_bomb: its note section claims 4 GiB (a sparse file); the recorder
#    must not read it for the build id (it took 4 GiB and 50 s).
set -u
. "$(dirname "$0")/../lib.sh"
T=robust_hostile_elf

need_bpf $T || exit 0
PROG=$PWD/$BUILD/tests/progs/sbstack
if [ ! -x "$PROG" ]; then skip $T "no $PROG (make test-bin)"; exit 0; fi
if [ ! -x "${STEPBLAME:-}" ]; then skip $T "no stepblame at '${STEPBLAME:-}'"; exit 0; fi
for c in objcopy strip cc; do
	command -v $c >/dev/null || { fail $T "$c is not installed (binutils, gcc)"; exit 0; }
done

tmp=$(mktemp -d -p /var/tmp sbhostile_elf.XXXXXX)
chmod 0755 "$tmp"
pid= rec=
cleanup() {
	exec 2>/dev/null
	for p in $pid $rec; do kill -9 $p; rm -f "/tmp/perf-$p.map"; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# run DIR: DIR/prog gated, recorded to DIR/t.sbt; then the report's JSON and
# text (DIR/r.json, DIR/r.txt) and the peak memory of record and of report
# (DIR/rss: "RECORD_KB REPORT_KB"). False if record or the report failed.
run() {
	local d=$1 prc rc
	rm -f "$d/go"
	mkfifo "$d/go"
	"$d/prog" "$d" <"$d/go" >"$d/prog.out" 2>&1 &
	pid=$!
	exec 7>"$d/go"
	python3 - "$STEPBLAME" "$pid" "$d" <<'PY' &
import resource, subprocess, sys
sb, pid, d = sys.argv[1:4]
with open(d + "/record.out", "w") as out:
    rc = subprocess.call([sb, "record", "-p", pid, "-d", "60", "--max-overhead", "0",
                          "-o", d + "/t.sbt"], stdout=out, stderr=subprocess.STDOUT)
open(d + "/rec.rss", "w").write("%d %d\n" % (rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
PY
	rec=$!
	wait_attached "$d/record.out" 30 $rec
	echo go >&7
	exec 7>&-
	wait $pid; prc=$?
	rm -f "/tmp/perf-$pid.map"
	pid=
	wait $rec
	rec=
	read -r rc rkb <"$d/rec.rss"
	if [ "$rc" != 0 ] || [ $prc != 0 ]; then
		echo "record exited $rc, the program $prc: $(tail -2 "$d/record.out" | tr '\n' ' ')"
		return 1
	fi
	# the report, killed if it hangs (the FIFO): its memory and its time
	python3 - "$STEPBLAME" "$d" "$rkb" <<'PY'
import resource, subprocess, sys, time
sb, d, rkb = sys.argv[1:4]
t0 = time.time()
try:
    rc = subprocess.call([sb, "report", "--format", "json", d + "/t.sbt", "-o", d + "/r.json"],
                         stderr=open(d + "/report.err", "w"), timeout=int(__import__("os").environ.get("SB_REPORT_TIMEOUT", "60")))
    if rc == 0:
        rc = subprocess.call([sb, "report", d + "/t.sbt", "-o", d + "/r.txt"], timeout=int(__import__("os").environ.get("SB_REPORT_TIMEOUT", "60")))
except subprocess.TimeoutExpired:
    rc = "timeout"
open(d + "/rss", "w").write("%s %s %d %.1f\n" % (rc, rkb, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                                                 time.time() - t0))
PY
	read -r rc rkb pkb secs <"$d/rss"
	if [ "$rc" != 0 ]; then
		echo "report: $rc after ${secs} s: $(head -1 "$d/report.err")"
		return 1
	fi
}

# the functions the report's stacks name (one a line)
funcs() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for h in d.get("stacks", {}).get("hot", []):
    for f in h["stack"]["frames"]:
        print(f.get("function", ""))
PY
}

# ---- debuglink: a FIFO where the stripped program's debugging symbols would be ----
d=$tmp/debuglink
mkdir "$d"
cp "$PROG" "$d/prog.full"
objcopy --only-keep-debug "$d/prog.full" "$d/prog.dbg"
cp "$d/prog.full" "$d/prog"
strip --strip-all "$d/prog"
objcopy --add-gnu-debuglink="$d/prog.dbg" "$d/prog"
rm "$d/prog.dbg" "$d/prog.full"
mkfifo "$d/prog.dbg"
if why=$(run "$d"); then
	read -r _ _ _ secs <"$d/rss"
	pass ${T}_debuglink
	echo "    (the report took ${secs} s; the FIFO was not opened)"
else
	fail ${T}_debuglink "$why"
fi

# ---- swapped: no build id; its name a link to a root-only program once it exited ----
d=$tmp/swapped
mkdir -m 0700 "$d/secret" -p
# the same program, every symbol renamed: its addresses name root's secrets
objcopy --prefix-symbols=ROOT_ONLY_SECRET_ "$PROG" "$d/secret/prog"
objcopy --remove-section=.note.gnu.build-id "$PROG" "$d/prog"
if ! why=$(run "$d"); then
	fail ${T}_swapped "$why"
elif funcs "$d/r.json" >"$d/funcs" && ! grep -qx checkpoint_save "$d/funcs"; then
	fail ${T}_swapped "no stack names checkpoint_save before the swap: $(sort -u "$d/funcs" | head -5 | tr '\n' ' ')"
else
	mv "$d/prog" "$d/prog.orig"
	ln -s "$d/secret/prog" "$d/prog"
	"$STEPBLAME" report --format json "$tmp/swapped/t.sbt" -o "$d/r2.json" 2>/dev/null
	"$STEPBLAME" report "$tmp/swapped/t.sbt" -o "$d/r2.txt" 2>/dev/null
	if grep -q ROOT_ONLY_SECRET "$d/r2.json" "$d/r2.txt"; then
		fail ${T}_swapped "the report names the root-only program's function: $(grep -ho 'ROOT_ONLY_SECRET[a-z_]*' "$d/r2.txt" | head -1)"
	else
		pass ${T}_swapped
	echo "    (checkpoint_save named before, nothing of the linked file after)"
	fi
fi

# ---- strtab_bomb: .strtab compressed, inflating 1,000 to 1 ----
d=$tmp/strtab
mkdir "$d"
python3 - "$PROG" "$d/prog" <<'PY'
import struct, sys, zlib
src, dst = sys.argv[1:3]
b = bytearray(open(src, "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
def sh(i):
    return struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize)
names = sh(shstrndx)[4]
for i in range(shnum):
    name, typ, flags, addr, off, size, link, info, align, ent = sh(i)
    n = bytes(b[names + name:b.index(0, names + name)]).decode()
    if n == ".strtab":
        break
else:
    sys.exit("no .strtab")
z = zlib.compressobj(9)
blob = b"".join(z.compress(bytes(64 << 20)) for _ in range(16)) + z.flush()
chdr = struct.pack("<IIQQ", 1, 0, 1 << 30, 1)  # ELFCOMPRESS_ZLIB, 1 GiB
new_off = (len(b) + 7) & ~7
b += bytes(new_off - len(b)) + chdr + blob
struct.pack_into("<IIQQQQIIQQ", b, shoff + i * shentsize, name, typ, flags | 0x800, addr,
                 new_off, len(chdr) + len(blob), link, info, 8, ent)
open(dst, "wb").write(b)
PY
chmod 0755 "$d/prog"
if why=$(run "$d"); then
	read -r _ _ pkb secs <"$d/rss"
	if [ "$pkb" -gt $((400 * 1024)) ]; then
		fail ${T}_strtab_bomb "the report peaked at $((pkb / 1024)) MiB (${secs} s): it inflated the table"
	else
		pass ${T}_strtab_bomb
	echo "    (the report peaked at $((pkb / 1024)) MiB in ${secs} s)"
	fi
else
	fail ${T}_strtab_bomb "$why"
fi

# ---- note_bomb: a note section of 4 GiB in a sparse file ----
d=$tmp/note
mkdir "$d"
python3 - "$PROG" "$d/prog" <<'PY'
import os, struct, sys
src, dst = sys.argv[1:3]
b = bytearray(open(src, "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum, _ = struct.unpack_from("<HHH", b, 0x3a)
for i in range(shnum):
    f = list(struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize))
    if f[1] == 7:  # SHT_NOTE: at 1 MiB past the file's end, 4 GiB long
        f[4] = (len(b) + (1 << 20)) & ~4095
        f[5] = 4 << 30
        struct.pack_into("<IIQQQQIIQQ", b, shoff + i * shentsize, *f)
        break
open(dst, "wb").write(b)
os.truncate(dst, f[4] + f[5])
PY
chmod 0755 "$d/prog"
if why=$(run "$d"); then
	read -r _ rkb _ secs <"$d/rss"
	if [ "$rkb" -gt $((400 * 1024)) ]; then
		fail ${T}_note_bomb "record peaked at $((rkb / 1024)) MiB: it read the note section"
	else
		pass ${T}_note_bomb
	echo "    (record peaked at $((rkb / 1024)) MiB)"
	fi
else
	fail ${T}_note_bomb "$why"
fi
