#!/usr/bin/env python3
"""Where the lanes daemons' CPU goes, from a system-wide perf recording.

Reads `perf script -F comm,tid,ip,sym` output on stdin, keeps the samples
of threads whose name starts with the given prefix (the lab names each
daemon thread lanes-h<N>), and sorts each sample's call chain into one
bucket, first match wins:

  softirq at interrupt exit   packet processing that ran on the daemon's
                              thread because an interrupt ended while it
                              was on the CPU (charged to whichever thread
                              that is)
  path-manager commands       SUBFLOW_CREATE / SET_FLAGS, including the
                              softirq their own transmit runs on the way out
  program load                verifier and JIT at start
  wait (poll)                 poll(2) and the scheduler around it
  event reads                 recv(2) of mptcp_pm events
  record writes               write(2) of the JSON lines
  other kernel / user space   the rest

Usage:
  perf record -F 999 -a -g -o perf.data -- tcpaccel lab run lanes-websearch ...
  perf script -i perf.data -F comm,tid,ip,sym | scripts/daemon-cpu-breakdown.py [prefix] [hz]
"""
import collections
import sys


def samples(lines, prefix):
    """Yields each kept sample's frames, innermost first."""
    frames, keep = [], False
    for line in lines:
        if not line.strip():
            if keep and frames:
                yield frames
            frames, keep = [], False
            continue
        if not frames and not line[0].isspace():
            keep = line.split()[0].startswith(prefix)
            frames.append(line)
            continue
        parts = line.split(None, 1)
        frames.append(parts[1].strip() if len(parts) > 1 else "")
    if keep and frames:
        yield frames


def bucket(frames):
    chain = " ".join(frames)
    if "handle_softirqs" in chain and "netlink_sendmsg" not in chain:
        return "softirq at interrupt exit"
    if "netlink_sendmsg" in chain:
        return "path-manager commands"
    if "bpf_prog_load" in chain or "bpf_check" in chain or "bpf_int_jit" in chain:
        return "program load"
    if "do_sys_poll" in chain or "__schedule" in chain:
        return "wait (poll)"
    if "netlink_recvmsg" in chain:
        return "event reads"
    if "vfs_write" in chain or "ksys_write" in chain:
        return "record writes"
    if "entry_SYSCALL" in chain or "do_syscall_64" in chain or "asm_sysvec" in chain:
        return "other kernel"
    return "user space"


def main():
    prefix = sys.argv[1] if len(sys.argv) > 1 else "lanes-h"
    hz = float(sys.argv[2]) if len(sys.argv) > 2 else 999.0
    counts = collections.Counter(bucket(f) for f in samples(sys.stdin, prefix))
    total = sum(counts.values())
    if total == 0:
        sys.exit(f"no samples of threads named {prefix}*")
    print(f"{total} samples of {prefix}* threads at {hz:g} Hz = {total / hz:.3f} CPU-s")
    for name, n in counts.most_common():
        print(f"{100 * n / total:5.1f} %  {n:5d}  {name}")


if __name__ == "__main__":
    main()
