#!/usr/bin/env python3
"""A silent SOCKS5 newcomer under a handshake flood, from outside the project.

Standard-library Python, written from RFC 1928 alone: FLOOD connections from
SOURCES loopback networks (127.60.K.1) each send a greeting and stall, and are
reopened as soon as the relay closes them; meanwhile TRIES clients connect
from 127.0.0.9, stay silent SILENT_MS (a greeting still in flight on a long
path), then greet and CONNECT to a local echo server. Prints one JSON line.
Bounded: it stops after the tries (and at most --seconds).

  scripts/socks-newcomer.py --relay 127.0.0.1:1080 [--flood 2500 --sources 250 --tries 10 --silent-ms 100]
"""
import argparse, json, resource, selectors, socket, struct, threading, time

def echo_server():
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64)
    def serve():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=lambda c=c: [c.sendall(d) for d in iter(lambda: c.recv(4096), b"")], daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--flood", type=int, default=2500)
    ap.add_argument("--sources", type=int, default=250)
    ap.add_argument("--tries", type=int, default=10)
    ap.add_argument("--silent-ms", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    a = ap.parse_args()
    host, port = a.relay.rsplit(":", 1); relay = (host, int(port))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    echo = echo_server()
    sel = selectors.DefaultSelector()
    stop = threading.Event(); reopened = [0]
    def open_one(i):
        s = socket.socket(); s.setblocking(False)
        s.bind((f"127.60.{i % a.sources}.1", 0))
        try: s.connect(relay)
        except BlockingIOError: pass
        sel.register(s, selectors.EVENT_WRITE, (i, "connecting"))
    def flood():
        for i in range(a.flood): open_one(i)
        while not stop.is_set():
            for key, ev in sel.select(0.05):
                s = key.fileobj; i, state = key.data
                if state == "connecting":
                    try: s.send(b"\x05\x01\x00")
                    except OSError: pass
                    sel.modify(s, selectors.EVENT_READ, (i, "greeted"))
                else:
                    try: d = s.recv(64)
                    except OSError: d = b""
                    if not d:  # closed by the relay: displaced; reopen
                        sel.unregister(s); s.close(); reopened[0] += 1; open_one(i)
    t = threading.Thread(target=flood, daemon=True); t.start()
    time.sleep(1.0)
    ok, times = 0, []
    deadline = time.time() + a.seconds
    for _ in range(a.tries):
        if time.time() > deadline: break
        t0 = time.time()
        try:
            c = socket.socket(); c.bind(("127.0.0.9", 0)); c.settimeout(5); c.connect(relay)
            time.sleep(a.silent_ms / 1000)
            c.sendall(b"\x05\x01\x00")
            if c.recv(2) != b"\x05\x00": raise OSError("no method")
            c.sendall(b"\x05\x01\x00\x01" + socket.inet_aton(echo[0]) + struct.pack("!H", echo[1]))
            rep = c.recv(10)
            if len(rep) >= 2 and rep[1] == 0:
                c.sendall(b"x")
                if c.recv(1) == b"x":
                    ok += 1; times.append((time.time() - t0) * 1000)
            c.close()
        except OSError:
            pass
        time.sleep(0.2)
    stop.set(); t.join(2)
    times.sort()
    print(json.dumps({"type": "socks_newcomer", "flood": a.flood, "sources": a.sources, "silent_ms": a.silent_ms,
                      "through": ok, "tries": a.tries, "reopened": reopened[0],
                      "median_ms": round(times[len(times)//2], 1) if times else None,
                      "max_ms": round(times[-1], 1) if times else None}))

main()
