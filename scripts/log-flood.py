#!/usr/bin/env python3
"""Bounded connection floods against tcpaccel's services, from outside
(Python sockets only), for counting the lines a service writes to stderr
(issue 50 item 2; BENCHMARKS.md, "Reliability: log floods").

  log-flood.py relay ADDR N SECONDS THREADS
      N connections to the relay at ADDR, evenly spread over SECONDS, from
      THREADS threads; each is closed at once with a reset (SO_LINGER 0),
      so each ends in one per-connection record.
  log-flood.py gather ADDR N
      N control connections to a gathering server, one after the other,
      each sending the preface and a hello for a class the server does not
      have ("nosuch"), so each is refused `unknown_class`.

Prints what it did on stderr; the service's own stderr is what to count.
"""
import json, socket, struct, sys, threading, time


def relay(addr, n, secs, threads):
    host, port = addr.rsplit(":", 1)
    port = int(port)
    done = [0]
    lock = threading.Lock()
    t0 = time.time()
    end = t0 + secs + 5

    def worker():
        while time.time() < end:
            with lock:
                if done[0] >= n:
                    return
                done[0] += 1
                k = done[0]
            wait = t0 + k * secs / n - time.time()
            if wait > 0:
                time.sleep(wait)
            try:
                s = socket.create_connection((host, port), timeout=2)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(f"relay flood: {done[0]} connects in {time.time() - t0:.1f} s", file=sys.stderr)


def gather(addr, n):
    host, port = addr.rsplit(":", 1)
    port = int(port)
    # Preface: magic, version 2 (u16 BE), kind 1 = control, reserved
    # (docs/gather-protocol.md §1); then a u32 BE length and JSON.
    pre = b"TAGP" + struct.pack(">HBB", 2, 1, 0)
    refused = 0
    t0 = time.time()
    for i in range(n):
        body = json.dumps({"type": "hello", "client_id": f"c{i}", "class": "nosuch"}).encode()
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(pre + struct.pack(">I", len(body)) + body)
        data = b""
        try:
            while True:
                c = s.recv(4096)
                if not c:
                    break
                data += c
        except OSError:
            pass
        s.close()
        if b'"error"' in data:
            refused += 1
    print(f"gather flood: {refused} of {n} refused in {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "relay":
        relay(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) == 4 and sys.argv[1] == "gather":
        gather(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
