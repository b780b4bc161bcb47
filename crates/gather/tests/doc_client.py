#!/usr/bin/env python3
"""A gather client written from docs/gather-protocol.md alone (version 2).

A manual conformance check of the document, not part of `cargo test`:

    tcpaccel gather serve --buffer-pool 4MB --class low=50mbit --checksum --out /tmp/g &
    python3 crates/gather/tests/doc_client.py 127.0.0.1:7070 'doc client' low FILE

Exits 0 when the server answers `done` with complete=true and the digest of
FILE, 1 on an `error` (printed), 2 on a timeout. Uses only the standard
library; one thread stripes chunks over the streams in offset order.
"""
import hashlib
import json
import os
import queue
import socket
import struct
import sys
import threading
import time
import zlib

MAGIC, VERSION = b"TAGP", 2
CONTROL, DATA = 1, 2
TIMEOUT = 30.0


def preface(kind):
    return MAGIC + struct.pack(">HBB", VERSION, kind, 0)


def send_msg(sock, obj):
    body = json.dumps(obj).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return buf


def reader(sock, q):
    while True:
        head = recv_exact(sock, 4)
        if head is None:
            q.put(None)
            return
        body = recv_exact(sock, struct.unpack(">I", head)[0])
        if body is None:
            q.put(None)
            return
        q.put(json.loads(body))


def frame(kind, flags, index, session, offset, length, crc):
    return struct.pack(">BBH8sQII4x", kind, flags, index, session[:8], offset, length, crc)


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    addr = (host, int(port))
    client_id, klass, path = sys.argv[2], sys.argv[3], sys.argv[4]
    data = open(path, "rb").read()

    ctl = socket.create_connection(addr)
    ctl.sendall(preface(CONTROL))
    send_msg(ctl, {"type": "hello", "client_id": client_id, "class": klass})
    q = queue.Queue()
    threading.Thread(target=reader, args=(ctl, q), daemon=True).start()
    w = q.get(timeout=TIMEOUT)
    if w is None or w["type"] != "welcome":
        print("refused:", w)
        return 1
    session, token = bytes.fromhex(w["session"]), bytes.fromhex(w["token"])
    chunk, crc_on, interval = w["chunk_size"], w["checksum"], w["interval_ms"] / 1000
    timeout = max(TIMEOUT, 3 * interval)

    next_index, streams, want = 0, [], w["streams"]

    def open_stream():
        nonlocal next_index
        s = socket.create_connection(addr)
        s.sendall(preface(DATA) + session + token + struct.pack(">HH", next_index, 0))
        streams.append((s, next_index))
        next_index += 1

    def close_stream(entry):
        s, index = entry
        s.sendall(frame(2, 0, index, session, 0, 0, 0))
        s.close()

    offset, sent, rr = 0, 0, 0
    last_progress = last_heard = time.monotonic()
    ended_at, confirmed, confirmed_at = None, 0, None
    while True:
        # Control messages first: obey set_streams, note the heartbeat.
        try:
            while True:
                m = q.get_nowait()
                last_heard = time.monotonic()
                if m is None:
                    print("server closed the control connection")
                    return 1
                if m["type"] == "set_streams":
                    want = m["streams"]
                elif m["type"] == "received":
                    if m["bytes"] > confirmed:
                        confirmed, confirmed_at = m["bytes"], last_heard
                elif m["type"] == "done":
                    ok = m["complete"] and m["total"] == len(data) and m["sha256"] == hashlib.sha256(data).hexdigest()
                    print("done:", m)
                    return 0 if ok else 1
                elif m["type"] == "error":
                    print("error:", m["code"], m["message"])
                    return 1
        except queue.Empty:
            pass
        if offset < len(data):
            while len(streams) < want:
                open_stream()
            while len(streams) > want:
                close_stream(streams.pop())
            s, index = streams[rr % len(streams)]
            rr += 1
            piece = data[offset:offset + chunk]
            crc = zlib.crc32(piece) if crc_on else 0
            s.sendall(frame(1, 1 if crc_on else 0, index, session, offset, len(piece), crc) + piece)
            offset += len(piece)
            sent += len(piece)
        elif ended_at is None:
            for e in streams:
                close_stream(e)
            streams.clear()
            send_msg(ctl, {"type": "end", "total": len(data), "sha256": hashlib.sha256(data).hexdigest()})
            ended_at = time.monotonic()
        else:
            time.sleep(0.01)
        now = time.monotonic()
        if now - last_progress >= interval:
            send_msg(ctl, {"type": "progress", "sent": sent, "app_limited": offset >= len(data)})
            last_progress = now
        if now - last_heard > timeout:
            print("timeout: the server sent nothing for", timeout, "s")
            return 2
        if ended_at is not None and now - max(ended_at, confirmed_at or 0) > timeout:
            print("timeout: confirmed", confirmed, "of", len(data))
            return 2


if __name__ == "__main__":
    sys.exit(main())
