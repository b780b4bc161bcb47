#!/usr/bin/env python3
"""A pre-hello flood against `tcpaccel gather serve`, and a legitimate client
timed under it (issue 50 item 1). Standard library only: a client the
project did not write.

Each flood connection sends the 8-byte control preface, a 4-byte length of
4096 (the legal pre-hello maximum) and one byte, then nothing. Connections
the server closes are opened again (from the same source) until the end,
so the flood keeps its hold. Sources: --sources N binds 127.50.K.1 for
K < N (N different /24 networks), or one --source address.

While the flood holds, at +1, +3, +6 and +9 s: a hello from 127.0.0.1 and
the time until its welcome (or the error), then `tcpaccel gather send
--bytes 1MB` (--tcpaccel) with its wall time and exit code. Prints one
JSON object.

  scripts/gather-prehello-flood.py --server 127.0.0.1:7393 --tcpaccel target/debug/tcpaccel \
      --class a [--connections 4100] [--source 127.0.9.1 | --sources 250] [--seconds 12]
"""
import argparse
import json
import selectors
import socket
import struct
import subprocess
import time

PREFACE = b"TAGP" + struct.pack(">H", 2) + bytes([1, 0])
MESSAGE = PREFACE + struct.pack(">I", 4096) + b"{"


def open_one(server, source):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(2)
    s.connect(server)
    s.sendall(MESSAGE)
    s.setblocking(False)
    return s


def admit_probe(server, klass, ident):
    """Seconds from connect to the welcome, or the server's answer."""
    t = time.monotonic()
    try:
        s = socket.create_connection(server, timeout=5)
        body = json.dumps({"type": "hello", "client_id": ident, "class": klass}).encode()
        s.sendall(PREFACE + struct.pack(">I", len(body)) + body)
        head = s.recv(4, socket.MSG_WAITALL)
        (n,) = struct.unpack(">I", head)
        reply = json.loads(s.recv(n, socket.MSG_WAITALL))
        s.close()
    except (OSError, ValueError, struct.error) as e:
        return {"error": str(e)}
    took = round(time.monotonic() - t, 4)
    if reply.get("type") == "welcome":
        return {"welcome_s": took}
    return {"refused_s": took, "code": reply.get("code"), "message": reply.get("message", "")[:120]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--tcpaccel", required=True)
    ap.add_argument("--class", dest="klass", required=True)
    ap.add_argument("--connections", type=int, default=4100)
    ap.add_argument("--source", default="127.0.9.1")
    ap.add_argument("--sources", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=12)
    a = ap.parse_args()
    host, port = a.server.rsplit(":", 1)
    server = (host, int(port))
    sources = [f"127.50.{k}.1" for k in range(a.sources)] if a.sources else [a.source]
    sel = selectors.DefaultSelector()
    opened = failed = reopened = 0
    t0 = time.monotonic()
    for i in range(a.connections):
        src = sources[i % len(sources)]
        try:
            sel.register(open_one(server, src), selectors.EVENT_READ, src)
            opened += 1
        except OSError:
            failed += 1
    flood_ready = time.monotonic() - t0
    sends = []
    starts = [1, 3, 6, 9]
    t1 = time.monotonic()
    while time.monotonic() - t1 < a.seconds:
        if starts and time.monotonic() - t1 >= starts[0]:
            at = starts.pop(0)
            probe = admit_probe(server, a.klass, f"probe-{at}")
            ts = time.monotonic()
            p = subprocess.run(
                [a.tcpaccel, "gather", "send", "--server", a.server, "--class", a.klass,
                 "--id", f"legit-{at}", "--bytes", "1MB", "--timeout", "10s", "--json"],
                capture_output=True, text=True, timeout=30)
            err = p.stderr.strip().splitlines()[-1:] if p.returncode else []
            sends.append({"at_s": at, "hello": probe, "exit": p.returncode, "wall_s": round(time.monotonic() - ts, 3),
                          "error": err[0][:200] if err else None})
            continue
        # Reopen what the server answered (an error) or closed, bounded by --seconds.
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                s.recv(4096)
                gone = True
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if gone:
                sel.unregister(s)
                s.close()
                try:
                    sel.register(open_one(server, key.data), selectors.EVENT_READ, key.data)
                    reopened += 1
                except OSError:
                    failed += 1
    held = len(sel.get_map())
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    print(json.dumps({"type": "gather_prehello_flood", "connections": a.connections,
                      "sources": len(sources), "opened": opened, "open_failed": failed,
                      "flood_ready_s": round(flood_ready, 2), "reopened": reopened,
                      "held_at_end": held, "sends": sends}))


if __name__ == "__main__":
    main()
