#!/usr/bin/env python3
"""Scores a stepblame JSON report of tests/progs/torch_trainer.py against what
the trainer measured itself (its truth file). Prints PASS/FAIL lines.

    torch_check.py REPORT.json TRUTH.jsonl [NAME]

Time the report gives to other processes (tasks outside the trainer that took
its CPU, named as culprits) is real interference on a busy machine: a check on
an injected cause deducts it from what the injection is expected to explain.
"""
import json, os, statistics, sys

rep = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
T = sys.argv[3] if len(sys.argv) > 3 else "torch_real"
head, truth = lines[0], {r["step"]: r for r in lines[1:]}
pid, tid, workers = head["pid"], head["tid"], set(head["workers"])
steps = {s["step"]: s for s in rep["steps"] if not s["incomplete"]}
MS = 1e6


def out(ok, name, why):
    if ok == "skip":
        print("SKIP %s_%s: %s" % (T, name, why))
        return
    print(("PASS %s_%s" % (T, name)) if ok else ("FAIL %s_%s: %s" % (T, name, why)))


def cause_ns(s, causes):
    return sum(b["ns"] for b in s["blame"] if b["cause"] in causes)


def agent_ns(s, waited_for_cpu=False):
    """time the recorder's own threads took from the step (tracer entries with a culprit);
    waited_for_cpu: only where the critical thread itself waited for its CPU (the culprit
    has no via: not a thread it waited for, which the recorder preempted)"""
    return sum(b["ns"] for b in s["blame"] if b["cause"] == "tracer" and "culprit" in b
               and not (waited_for_cpu and "via" in b["culprit"]))


def outside(s, causes=None):
    """time in s given to culprits outside the trainer's process tree"""
    return sum(b["ns"] for b in s["blame"] if "culprit" in b and (causes is None or b["cause"] in causes)
               and b["culprit"]["pid"] not in (pid,) and b["culprit"]["pid"] not in workers)


def injected(step, kind):
    return [i for i in truth[step]["inject"] if i["kind"] == kind] if step in truth else []


# every step the trainer ran is in the report, complete, blamed on its marking thread
missing = [n for n in truth if n not in steps]
out(len(missing) <= 1, "steps", "steps missing or incomplete in the report: %s" % missing[:10])

# cpu_wait (with the waits that follow a move) is the kernel's run delay of the
# marking thread: per step, and over the run
diffs, tot_r, tot_k = [], 0, 0
for n, t in truth.items():
    s = steps.get(n)
    if not s:
        continue
    # (and vm_steal: the kernel counts a wait behind a task whose CPU the
    # hypervisor held as run delay too; cpu_throttle: a wait for its cgroup's CPU quota)
    # and the recorder's own threads' time on its CPU (tracer with a culprit: schemas/report.md;
    # not where they preempted a thread it waited for, which is no run delay of its own)
    mine = cause_ns(s, ("cpu_wait", "migration", "vm_steal", "cpu_throttle")) + agent_ns(s, True)
    # migration also holds the thread's own sched_setaffinity calls: on a CPU, not a run
    # queue. A step that writes a checkpoint is left out: there the kernel charges
    # preemptions more run delay than the thread spent off its CPU between its own
    # switch events (docs/ARCHITECTURE.md, "cpu_wait and the kernel's run delay")
    if injected(n, "migrate") or injected(n, "ckpt"):
        continue
    k = t["run_delay_ns"]
    tot_r += mine
    tot_k += k
    tol = max(2 * MS, 0.10 * k)
    # the kernel's readings cover less than the step: a wait of the thread that
    # ended before the first (a preemption on leaving the mark's trap or the read
    # itself) or after the last is the step's, and only the wall time there holds it
    outside_reads = (t["read0_ns"] - s["start_ns"]) + (s["end_ns"] - t["read1_ns"])
    # the kernel counting on-CPU time as run delay (its clock behind at a switch:
    # docs/ARCHITECTURE.md, "cpu_wait and the kernel's run delay") gives its run
    # delay an excess that its CPU time lacks: the report's on-CPU time in the step,
    # less what lay outside the readings, over the kernel's exec time
    on = cause_ns(s, ("host_compute", "page_fault", "alloc", "tracer", "mem_reclaim")) - agent_ns(s)
    moved = max(0, on - t["exec_ns"] - outside_reads)
    if mine - k > tol + outside_reads or k - mine > tol + moved:
        diffs.append("step %d: %.1f vs %.1f ms (%.1f ms outside the readings, kernel's CPU time "
                     "%.1f ms short)" % (n, mine / MS, k / MS, outside_reads / MS, moved / MS))
out(len(diffs) <= max(1, len(truth) // 20), "cpu_wait_schedstat",
    "cpu_wait+migration+vm_steal differs from the kernel's run delay (schedstat) in %d steps: %s" % (len(diffs), diffs[:6]))
# over the run the kernel's sum is the larger by up to 7% on a machine loaded by a
# CPU hog: its charging of short preemptions (docs/ARCHITECTURE.md) adds up
out(tot_k == 0 or abs(tot_r - tot_k) <= 0.10 * tot_k + 2 * MS, "cpu_wait_schedstat_total",
    "cpu_wait+migration+vm_steal %.1f ms vs run delay %.1f ms over the run" % (tot_r / MS, tot_k / MS))

# the hog: named in every hog step but the first and last (where it starts and
# stops), for at least half of the run delay that no other task explains (other
# outsiders, and the trainer's own threads: its loader workers, its intra-op threads)
hog = sorted(n for n in truth if injected(n, "hog"))
named = []
for n in hog[1:-1]:
    s = steps.get(n)
    if not s:
        continue
    hog_ns = sum(b["ns"] for b in s["blame"] if "culprit" in b and b["culprit"].get("comm") == "noisy-hog")
    others = (sum(b["ns"] for b in s["blame"] if b["cause"] in ("cpu_wait", "migration") and "culprit" in b)
              + cause_ns(s, ("vm_steal",)) + agent_ns(s, True) - hog_ns)
    left = truth[n]["run_delay_ns"] - others
    if hog_ns < 0.5 * left - 1 * MS:
        named.append("step %d: noisy-hog %.1f ms of the %.1f ms run delay other tasks leave" % (n, hog_ns / MS, left / MS))
out(hog and not named, "hog_named", "; ".join(named) or "no hog steps")


# the slow loader: over the steps around the slow batches, the time in
# next(loader) beyond the usual is blocked on a loader worker (or, where an
# outsider preempted the worker, on that outsider via the worker)
def on_worker(b):
    c = b.get("culprit", {})
    return c.get("pid") in workers or c.get("via", {}).get("pid") in workers


usual_next = statistics.median(t["next_ns"] for t in truth.values())
slow = [n for n in truth if any(n - 6 <= k <= n + 1 for k in slow_items)] if (slow_items := head.get("slow_items")) else []
want = sum(max(0, truth[n]["next_ns"] - usual_next) for n in slow)
got = sum(b["ns"] for n in slow if n in steps for b in steps[n]["blame"] if b["cause"] == "blocked" and on_worker(b))
out(slow and want > 100 * MS and got >= 0.8 * want, "loader_stall",
    "steps %s: %.1f ms blocked on loader workers, %.1f ms more than usual in next(loader)" %
    (slow[:1] + slow[-1:], got / MS, want / MS))

# the chain goes on into the worker: named by its role, and what it did meanwhile
bad = []
for n in slow:
    s = steps.get(n)
    waits = [b for b in s["blame"] if b["cause"] == "blocked" and b.get("culprit", {}).get("pid") in workers] if s else []
    if not waits:
        continue
    b = max(waits, key=lambda b: b["ns"])
    if b["ns"] < 50 * MS:
        continue
    c, act = b["culprit"], b["culprit"].get("waker_activity", {})
    told = sum(v for k, v in act.items() if k.endswith("_ns"))
    # named by their role: from 2.3 on PyTorch calls them pt_data_worker; before,
    # they are known by the shared tensors their parent maps
    if not c.get("process", "").startswith("DataLoader worker ") or told < 0.9 * b["ns"]:
        bad.append("step %d: %s blocked on %s, activity %.1f of %.1f ms" % (n, c.get("comm"), c.get("process"), told / MS, b["ns"] / MS))
out(not bad, "loader_chain", "; ".join(bad))


# a worker whose __getitem__ writes and fsyncs a file (:io), or fills fresh
# memory (:fault): the launcher's longest wait on a worker around those steps
# says the worker was in I/O on that file, or faulting, for most of the wait
def chain_kind(how, key):
    items = sorted(int(k) for k, v in head.get("slow_how", {}).items() if v == how)
    others = [int(k) for k, v in head.get("slow_how", {}).items() if v != how]
    if not items:
        return None, "no %s items" % how

    # the steps whose batch may have waited for those items (prefetching reaches 6 ahead),
    # not those that may have waited for another kind's (on a busy machine the loop runs
    # behind and the windows of the io and fault items meet)
    def near(n, ks):
        return any(n - 6 <= k <= n + 1 for k in ks)

    window = [n for n in truth if near(n, items) and not near(n, others)]
    waits = [b for n in window if n in steps
             for b in steps[n]["blame"] if b["cause"] == "blocked" and b.get("culprit", {}).get("pid") in workers
             and "via" not in b["culprit"]]
    # what the trainer measured itself: its longest time in next(loader) there
    stalled = max((truth[n].get("next_ns", 0) for n in window), default=0)
    if stalled < 100 * MS:
        # prefetching hid the slow items (a busy machine slows the loop too): no wait to
        # explain. The items take 400-600 ms (torch_real.sh); a loop that waited for one
        # spent 180-470 ms in next(loader) on a quiet machine, one running behind under
        # a CPU hog at most 21 ms, most of it preempted inside next()
        return "skip", "steps %s: the loop waited at most %.1f ms in next(loader)" % (items, stalled / MS)
    if not waits:
        return False, "no wait on a loader worker around steps %s" % items
    b = max(waits, key=lambda b: b["ns"])
    act = b["culprit"].get("waker_activity", {})
    # the waker's own account, its sleeps on other followed threads replaced by
    # what those did (a queue's feeder thread waits for the worker's main thread)
    inner = act.get("blocked_on_activity", {})
    eff = {k: v for k, v in act.items() if k.endswith("_ns")}
    eff["blocked_ns"] = eff.get("blocked_ns", 0) - sum(inner.values())
    for k, v in inner.items():
        eff[k] = eff.get(k, 0) + v
    # the time other tasks held its CPU is theirs (a busy machine), not the worker's doing
    told = sum(eff.values()) - eff.get("preempted_ns", 0) - eff.get("runnable_ns", 0)
    ok = b["ns"] >= 20 * MS and told > 0 and eff.get(key, 0) >= 0.5 * told
    return ok, "steps %s: longest wait on a worker %.1f ms, waker_activity %s" % (items, b["ns"] / MS, act)


ok, why = chain_kind("io", "io_ns")
if ok == "skip":
    out(ok, "loader_chain_io", why)
elif ok is not None:
    b_act = why
    files = {os.path.join(head["slow_dir"], "shard%s.bin" % k) for k, v in head["slow_how"].items() if v == "io"}
    # the worker's longest I/O piece is one of its writes (throttled by writeback) or fsyncs of the file
    named = [b for s in steps.values() for b in s["blame"]
             if b.get("culprit", {}).get("waker_activity", {}).get("io_file") in files
             and b["culprit"]["waker_activity"].get("io_call") in ("write", "fsync")]
    out(ok and named, "loader_chain_io", "%s; entries naming %s: %d" % (why, sorted(files), len(named)))
ok, why = chain_kind("fault", "faulting_ns")
if ok is not None:
    out(ok, "loader_chain_faulting", why)

# a thread of the trainer computing in Python holds the GIL the loop takes back
# after every torch call: CPython's timed waits for it (5 ms, ended by a timer)
# and their retries (ended by the holder) are one wait on the holder, and the
# steps' blocked time is on it, not "asleep" (docs/ARCHITECTURE.md, "Timed waits")
gil = [n for n in truth if injected(n, "gil")]
if gil:
    holder = injected(gil[0], "gil")[0]["tid"]
    usual = statistics.median(t["end_ns"] - t["start_ns"] for t in truth.values() if not t["inject"])

    def on_holder(b):
        c = b.get("culprit", {})
        return c.get("tid") == holder or c.get("via", {}).get("tid") == holder

    on = sum(b["ns"] for n in gil if n in steps for b in steps[n]["blame"] if b["cause"] == "blocked" and on_holder(b))
    alone = sum(b["ns"] for n in gil if n in steps for b in steps[n]["blame"] if b["cause"] == "blocked" and "culprit" not in b)
    extra = sum(max(0, truth[n]["end_ns"] - truth[n]["start_ns"] - usual) - outside(steps[n]) for n in gil if n in steps)
    out(on >= 0.3 * extra and on >= 3 * alone and on >= 10 * MS, "gil_holder",
        "steps %s: %.1f ms blocked on the GIL holder (tid %d), %.1f ms asleep, %.1f ms longer than usual less other processes' time" %
        (gil[:1] + gil[-1:], on / MS, holder, alone / MS, extra / MS))

# the fresh tensor: its faults
bad = []
for n in truth:
    for i in injected(n, "tensor"):
        s = steps.get(n)
        want = i["end_ns"] - i["start_ns"]
        pf = cause_ns(s, ("page_fault", "mem_reclaim")) if s else 0
        if pf < 0.5 * (want - outside(s)):
            bad.append("step %d: page_fault %.1f of %.1f ms in the injection" % (n, pf / MS, want / MS))
out(not bad, "tensor_faults", "; ".join(bad))

# the checkpoint: the fsync is io_wait
bad = []
for n in truth:
    for i in injected(n, "ckpt"):
        s = steps.get(n)
        want = i["end_ns"] - i["save_end_ns"]
        io = cause_ns(s, ("io_wait",)) if s else 0
        if io < 0.9 * (want - outside(s)):
            bad.append("step %d: io_wait %.1f ms, fsync took %.1f ms" % (n, io / MS, want / MS))
out(not bad, "ckpt_io", "; ".join(bad))

# the checkpoint's file: its path, the fsync, the bytes the step wrote to it. The
# fsync is among the step's top I/O calls when it took a while (5 ms as the loop
# measured it); the writeback may have been done during the save, leaving the
# fsync too little to outrank the loader's pipe traffic.
bad = []
for n in truth:
    for i in injected(n, "ckpt"):
        s = steps.get(n)
        io = [x for x in (s or {}).get("io", []) if x["path"] == i["path"]]
        fs = [x for x in io if x["call"] == "fsync"]
        wrote = max((x["written_bytes"] for x in io), default=0)
        took = i["end_ns"] - i["save_end_ns"]
        if (took >= 5 * MS and (not fs or fs[0]["ns"] < 0.5 * took)) or not 0.9 * i["bytes"] <= wrote <= 1.1 * i["bytes"]:
            bad.append("step %d: io %s; want fsync of %s (it took %.1f ms), %d bytes written" %
                       (n, [(x["call"], x["path"], x["written_bytes"], round(x["ns"] / MS, 2))
                            for x in (s or {}).get("io", [])], i["path"], took / MS, i["bytes"]))
out(not bad, "ckpt_file", "; ".join(bad))

# the fresh tensor's mapping: anonymous, its size, mapped in that step
bad = []
for n in truth:
    for i in injected(n, "tensor"):
        s = steps.get(n)
        big = [m for m in (s or {}).get("maps", []) if m["anon"] and m["len"] >= i["mib"] << 20]
        if not big or big[0].get("mapped_in_step") != n or big[0]["ns"] < 0.5 * cause_ns(s, ("page_fault",)):
            bad.append("step %d: maps %s" % (n, [(m["len"] >> 20, m["anon"], m.get("mapped_in_step"), round(m["ns"] / MS, 1))
                                                  for m in (s or {}).get("maps", [])]))
out(not bad, "tensor_mapping", "; ".join(bad))

# the thread that moved itself: the migration time is said to be its own calls'
bad = []
for n in truth:
    if injected(n, "migrate"):
        s = steps.get(n)
        mv = (s or {}).get("moves", [])
        if cause_ns(s, ("migration",)) > 1 * MS and (not mv or mv[0]["by"] != "self"):
            bad.append("step %d: migration %.1f ms, moves %s" % (n, cause_ns(s, ("migration",)) / MS, mv))
out(not bad, "moved_itself", "; ".join(bad))

# the tracer never makes a clean step a tail step: the tail is judged without
# its own time, and what its probes cost in place is not left in alloc, so no
# tail step without an injection has alloc as its largest excess
inj_steps = {n for n in truth if truth[n]["inject"]} | set(slow) | set(hog)
bad = []
for n, s in sorted(steps.items()):
    if not s["tail"] or n in inj_steps or n - 1 in inj_steps:
        continue
    ex = s.get("excess") or []
    if ex and ex[0]["cause"] in ("alloc", "tracer"):
        bad.append("step %d (%s +%.1f ms; tracer %.1f ms in the step)" %
                   (n, ex[0]["cause"], ex[0]["ns"] / MS, cause_ns(s, ("tracer",)) / MS))
out(not bad, "no_tracer_tails", "clean steps in the tail because of the tracer's allocator probes: %s" % bad)
