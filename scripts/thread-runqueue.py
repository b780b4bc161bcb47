#!/usr/bin/env python3
"""How long each tcpaccel thread ran and how long it waited for a CPU.

Runs a command and, while it runs, samples every thread of every process
named tcpaccel* every 0.2 s from /proc/<pid>/task/<tid>/schedstat (time
on the CPU, time runnable but waiting on a run queue, timeslices), then
prints the totals per thread name, most waited first. A thread that
waits about as long as it runs is on a host short of CPU: that is what
makes the lab's flows start late (docs/notes/2026-11-30-lanes-flow-starts.md).

Usage:
  scripts/thread-runqueue.py -- tcpaccel lab run lanes-buildup --set workload=rounds ...
The command's own output goes to thread-runqueue.out in the current directory.
"""
import collections
import os
import subprocess
import sys
import time


def threads():
    """Yields (thread name, pid, tid, [cpu ns, wait ns, slices]) of tcpaccel's threads."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if not open(f"/proc/{pid}/comm").read().startswith("tcpaccel"):
                continue
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
                stat = [int(x) for x in open(f"/proc/{pid}/task/{tid}/schedstat").read().split()]
            except OSError:
                continue
            yield name, pid, tid, stat


def main():
    if "--" not in sys.argv or sys.argv.index("--") == len(sys.argv) - 1:
        sys.exit(__doc__)
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    with open("thread-runqueue.out", "w") as out:
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        last, total = {}, collections.defaultdict(lambda: [0, 0, 0])
        while child.poll() is None:
            for name, pid, tid, stat in threads():
                before = last.get((pid, tid))
                if before is not None:
                    for i in range(3):
                        total[name][i] += stat[i] - before[i]
                last[(pid, tid)] = stat
            time.sleep(0.2)
    for name, (cpu, wait, slices) in sorted(total.items(), key=lambda kv: -kv[1][1]):
        if slices:
            print(
                f"{name:20} cpu {cpu / 1e6:9.1f} ms  run-queue wait {wait / 1e6:9.1f} ms"
                f"  slices {slices:7d}  wait per slice {wait / 1e3 / slices:7.1f} us"
            )
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
