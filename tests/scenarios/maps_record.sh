#!/usr/bin/env bash
# Mappings read from /proc/PID/maps, real probes on a real program
# (tests/progs/sbmaps, built with frame pointers): its page faults in 64 MiB of
# anonymous memory, in the brk heap and in a /dev/shm file whose name holds an
# escape sequence and a newline, all mapped before the tracer attached, are
# named with their kind and size as mapped before the capture (the hostile
# name with no control character left in either report); the heap
# grown by brk during the capture is still [heap]; and the stacks of its child
# process (forked and exec'd again before the attach: its own address layout)
# are symbolised with the child's own mappings (child_work_loop). Every
# executable file mapping of both processes carries its file's build id (as
# readelf reads it), the child's libraries too, which the agent reads once per file.
set -u
. "$(dirname "$0")/../lib.sh"
T=maps_record

need_bpf $T || exit 0
prog="${BUILD:-build}/tests/progs/sbmaps"
if [ ! -x "$prog" ] || ! "${STEPBLAME:-false}" record --help >/dev/null 2>&1; then
	skip $T "no $prog or no stepblame that records"; exit 0
fi
tmp=$(mktemp -d /tmp/maps_record.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	[ -n "$tpid" ] && rm -f /dev/shm/sbmaps-*-"$tpid"
	rm -rf "$tmp"
}
tpid=
trap cleanup EXIT

mkfifo "$tmp/go"
"$prog" 64 32 <"$tmp/go" >"$tmp/prog.out" 2>&1 &
pid=$!
tpid=$pid
exec 7>"$tmp/go"
# its child has exec'd once the addresses are printed
for _ in $(seq 1 100); do grep -q heap_start "$tmp/prog.out" && break; sleep 0.05; done
"$STEPBLAME" record -p "$pid" -d 60 --max-overhead 0 -o "$tmp/trace.sbt" >"$tmp/record.out" 2>&1 &
rec=$!
wait_attached "$tmp/record.out" 30 $rec
echo go >&7
exec 7>&-
wait "$pid"; prc=$?
pid=
wait "$rec"; rc=$?
if [ $rc != 0 ] || [ $prc != 0 ]; then
	fail $T "record exited $rc, sbmaps $prc: $(tail -2 "$tmp/record.out" | tr '\n' ' ')"; exit 0
fi
if ! "$STEPBLAME" report --format json "$tmp/trace.sbt" >"$tmp/report.json" 2>"$tmp/report.err"; then
	fail $T "report failed: $(head -1 "$tmp/report.err")"; exit 0
fi
"$STEPBLAME" report "$tmp/trace.sbt" >"$tmp/report.txt" 2>&1
out=$(python3 - "$tmp/report.json" "$tmp/report.txt" "$tmp/prog.out" "$tpid" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
addr = {}
for line in open(sys.argv[3]):
    k, _, v = line.strip().partition("=")
    if v:
        addr[k] = int(v, 16)
target = int(sys.argv[4])
steps = {s["step"]: s for s in d["steps"]}
bad = []
def region_at(step, a):
    for m in steps.get(step, {}).get("maps", []):
        if m["addr"] <= a < m["addr"] + m["len"]:
            return m
    return None
# step 4 touched the 64 MiB mapped before the attach
m = region_at(4, addr["pre_region"])
if not m:
    bad.append("step 4 names no region at pre_region: %s" % steps.get(4, {}).get("maps"))
elif not (m.get("region") == "anon" and m["anon"] and m["len"] == 64 << 20 and
          m.get("before_capture") is True and "mapped_in_step" not in m and m.get("pid") == target
          and m["faults"] > 0):
    bad.append("step 4 region: %s" % m)
# step 8 the heap grown by sbrk before the attach
m = region_at(8, addr["heap_start"])
if not m or m.get("region") != "heap" or m.get("name") != "[heap]" or not m.get("before_capture"):
    bad.append("step 8 region: %s" % (m or steps.get(8, {}).get("maps")))
# step 12 the heap grown by brk during the capture: [heap] reaches it
m = region_at(12, addr["heap2_start"])
if not m or m.get("region") != "heap":
    bad.append("step 12 region: %s" % (m or steps.get(12, {}).get("maps")))
# step 6 the shared file: named, its control characters made harmless
m = region_at(6, addr["shm_start"])
if not m or m.get("region") != "shm" or m["len"] != 4 << 20 or not m.get("before_capture"):
    bad.append("step 6 region: %s" % (m or steps.get(6, {}).get("maps")))
elif not m["path"].startswith("/dev/shm/sbmaps-") or any(ord(ch) < 0x20 for ch in m["path"]):
    bad.append("step 6 path %r" % m["path"])
if "\x1b" in text or "\x1b" in open(sys.argv[1]).read():
    bad.append("an escape character reached a report")
if "shared memory mapping 4.0 MiB of /dev/shm/sbmaps-" not in text:
    bad.append("the text report does not name the shared file")
if "in [heap] mapping" not in text or "(mapped before the capture)" not in text:
    bad.append("the text report does not name [heap] mapped before the capture")
# the child's off-CPU stacks, symbolised with its own mappings
hot = [h["stack"] for h in d.get("stacks", {}).get("hot", [])]
kid = [h for h in hot if h["tid"] != target]
if not any(f["function"] == "child_work_loop" for h in kid for f in h["frames"]):
    bad.append("no stack of the child names child_work_loop: %s" %
               [(h["event"], h["tid"], [f["function"] for f in h["frames"]]) for h in kid])
if "child_work_loop+0x" not in text:
    bad.append("the text report's stacks do not name child_work_loop")
print("; ".join(bad) if bad else "ok")
PY
)
if [ "$out" = ok ]; then
	"$STEPBLAME" dump --format jsonl "$tmp/trace.sbt" >"$tmp/dump.jsonl" 2>/dev/null
	out=$(python3 - "$tmp/dump.jsonl" "$tpid" <<'PY'
import json, subprocess, sys
target = int(sys.argv[2])
real, bad, seen = {}, [], set()
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") != "mapping":
        continue
    f = dict(kv.split("=", 1) for kv in r["text"].strip().split("\n") if "=" in kv)
    if f.get("kind") != "file" or f.get("perms", "")[2:3] != "x":
        continue
    path = f.get("path") or f.get("name")
    if path not in real:
        out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
        ids = [l.split(":", 1)[1].strip() for l in out.splitlines() if "Build ID:" in l]
        real[path] = ids[0] if ids else ""
    seen.add((r["pid"] == target, path))
    if f.get("build_id", "") != real[path]:
        bad.append("pid %d %s: build_id %r, readelf %r" % (r["pid"], path, f.get("build_id"), real[path]))
kids = {p for t, p in seen if not t}
if not kids or not {p for t, p in seen if t} & kids:
    bad.append("no executable file mapped by both processes: %s" % sorted(seen))
if not any(real.values()):
    bad.append("no file with a build id")
print("; ".join(bad[:4]) if bad else "ok")
PY
)
fi
if [ "$out" = ok ]; then pass $T; else fail $T "$out"; fi
