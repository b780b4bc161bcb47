#!/usr/bin/env python3
"""Writes the seed inputs of the gather fuzz targets (seeds/TARGET/*), from
the protocol as docs/gather-protocol.md describes it. Run from fuzz/gather."""
import json, os, struct, zlib

def put(target, name, data):
    os.makedirs(f"seeds/{target}", exist_ok=True)
    with open(f"seeds/{target}/{name}", "wb") as f:
        f.write(data)

def preface(kind):
    return b"TAGP" + struct.pack(">HBB", 2, kind, 0)

def control(msg):
    body = json.dumps(msg, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body

session = bytes(range(0x30, 0x40))
token = bytes(range(0x50, 0x60))
digest = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

put("gather_control", "client", preface(1) + b"".join(control(m) for m in [
    {"type": "hello", "client_id": "a b/..", "class": "low", "target_bps": 1000000},
    {"type": "progress", "sent": 5, "app_limited": True},
    {"type": "end", "total": 5, "sha256": digest},
    {"type": "error", "code": "stream_lost", "message": "x"},
]))
put("gather_control", "server", preface(1) + b"".join(control(m) for m in [
    {"type": "welcome", "session": session.hex(), "token": token.hex(), "streams": 1,
     "chunk_size": 65536, "checksum": True, "interval_ms": 100, "target_bps": 8000000, "priority": 2},
    {"type": "set_streams", "streams": 3},
    {"type": "received", "bytes": 5},
    {"type": "done", "total": 5, "sha256": digest, "complete": True},
    {"type": "error", "code": "version", "message": "v", "server_version": 2},
]))
put("gather_control", "status", preface(3) + control({"type": "status_reply", "clients": [{
    "t": 1.25, "id": "a", "session": session.hex(), "class": "low", "priority": 1, "target_bps": 1000,
    "goodput_bps": 900, "streams": 1, "streams_wanted": 2, "allocation": 65536, "window_clamp": 65536,
    "rtt_us": 250, "received": 5, "sent": 5, "app_limited": False}]}))

def frame(kind, flags, stream, offset, data, tag):
    crc = zlib.crc32(data) if flags & 1 else 0
    return struct.pack(">BBHQQIII", kind, flags, stream, tag, offset, len(data), crc, 0) + data

tag = struct.unpack(">Q", session[:8])[0]
attach = session + token + struct.pack(">HH", 7, 0)
head = bytes([0, 2]) + preface(2) + attach  # 1 KiB chunks, a 32-byte reorder budget
put("gather_data", "in_order", head + frame(1, 1, 7, 0, b"hello", tag) + frame(1, 0, 7, 5, b" world", tag)
    + frame(2, 0, 7, 0, b"", tag) + struct.pack(">Q", 11))
put("gather_data", "reordered", head + frame(1, 0, 7, 6, b"world", tag) + frame(1, 0, 7, 11, b"!" * 40, tag)
    + frame(1, 0, 7, 0, b"hello ", tag) + frame(2, 0, 7, 0, b"", tag) + struct.pack(">Q", 51)
    + frame(1, 0, 7, 51, b"late", tag))

nums = struct.pack(">QBIIB", 1 << 20, 1, 16, 4, 1)
put("gather_class", "classes", nums + b"high=1mbit,2\nlow=500kbit\nbulk=60MB/s,0\nlow=1\nbad\n")
put("gather_class", "derived", struct.pack(">QBIIB", 256000, 0, 0, 4, 6) + b"x=20Mbit/s,4294967295\n")
