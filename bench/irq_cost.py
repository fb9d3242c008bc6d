#!/usr/bin/env python3
"""What the interrupt probes cost (docs/ARCHITECTURE.md, "Interrupts").

Each round: a busy loop pinned to CPU 1 is recorded for 5 s; after a second, a
UDP flood over the loopback device, sent and received on CPU 0, has its receive
processing steered to CPU 1 (lo's rps_cpus) for 1.5 s, so that NET_RX softirqs
and function-call IPIs land on the loop's time. The kernel's BPF statistics
(kernel.bpf_stats_enabled) give each probe's runs and time; the runs count every
interrupt of the machine (most return at the target filter). Prints per program
the runs and ns a run, per round and the median over the rounds.

usage: sudo python3 bench/irq_cost.py [ROUNDS]   (STEPBLAME=path, default build/stepblame)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SB = os.environ.get("STEPBLAME", "build/stepblame")
RPS = "/sys/class/net/lo/queues/rx-0/rps_cpus"
PROGS = ("btf_softirq_entry", "btf_softirq_exit", "btf_irq_entry", "btf_irq_exit",
         "btf_timer_entry", "btf_timer_exit", "btf_call1_entry", "btf_call1_exit",
         "btf_call_entry", "btf_call_exit", "btf_resched_entry", "btf_resched_exit",
         "btf_work_entry", "btf_work_exit", "btf_switch")
FLOOD = r'''
import socket, sys, time
mode, port, dur = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + dur
if mode == "recv":
    s.bind(("127.0.0.1", port)); s.settimeout(0.5)
    while time.monotonic() < end:
        try: s.recv(2048)
        except socket.timeout: pass
else:
    m = b"x" * 1400
    while time.monotonic() < end:
        for _ in range(100): s.sendto(m, ("127.0.0.1", port))
'''


def prog_stats():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout
    return {p["name"]: (p.get("run_cnt", 0), p.get("run_time_ns", 0))
            for p in json.loads(out) if p.get("name") in PROGS}


def one_round(tmp, port):
    loop = subprocess.Popen(["taskset", "-c", "1", "python3", "-c",
                             "import time\ne=time.time()+7\nwhile time.time()<e: pass"])
    log = open(os.path.join(tmp, "rec.log"), "w+")
    rec = subprocess.Popen([SB, "record", "-p", str(loop.pid), "-d", "5", "-o",
                            os.path.join(tmp, "t.sbt")], stdout=log, stderr=log)
    for _ in range(400):
        log.seek(0)
        if "attached" in log.read():
            break
        time.sleep(0.05)
    time.sleep(1)
    recv = subprocess.Popen(["taskset", "-c", "0", "python3", "-c", FLOOD, "recv", str(port), "2.5"])
    time.sleep(0.2)
    old = open(RPS).read().strip()
    try:
        open(RPS, "w").write("2")
        subprocess.run(["taskset", "-c", "0", "python3", "-c", FLOOD, "send", str(port), "1.5"])
    finally:
        open(RPS, "w").write(old)
    time.sleep(0.5)
    stats = prog_stats()  # while the programs are still loaded
    rec.wait()
    recv.wait()
    loop.kill()
    loop.wait()
    return stats


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    per = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            st = one_round(tmp, 41000 + r)
            line = []
            for name, (n, ns) in sorted(st.items()):
                if n:
                    per.setdefault(name, []).append((n, ns / n))
                    line.append("%s %d x %.0f ns" % (name[4:], n, ns / n))
            print("round %d: %s" % (r + 1, "; ".join(line)), flush=True)
    print("median over %d rounds: program, runs, ns a run" % rounds)
    for name in PROGS:
        if name in per:
            print("  %-20s %9.0f %6.0f" % (name, statistics.median(x[0] for x in per[name]),
                                          statistics.median(x[1] for x in per[name])))


if __name__ == "__main__":
    main()
