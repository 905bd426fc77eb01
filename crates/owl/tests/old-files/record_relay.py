#!/usr/bin/env python3
"""A recording relay between an owl sender agent and its receiver agent.

usage: record_relay.py LISTEN_PORT RECEIVER_ADDR OUT_DIR CUT_KIND CUT_AT

Every connection the sender makes is relayed to RECEIVER_ADDR; the bytes relayed each way are
written to OUT_DIR/conn{n}-to-listener.bin and conn{n}-to-connector.bin (n = 1, 2, ...), exactly
as forwarded. The first connection is cut (both ways closed) when the sender sends its
CUT_AT-th frame of kind CUT_KIND: that frame is neither forwarded nor recorded. Frames are
u32 little-endian body length, then the body (u8 version, u8 kind, ...).
"""
import socket, sys, threading

port, to, out, cut_kind, cut_at = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
host, rport = to.rsplit(":", 1)

def read_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b

def pipe(src, dst, path, cut):
    seen = 0
    with open(path, "wb") as f:
        while True:
            if cut:
                ln = read_exact(src, 4)
                if ln is None:
                    break
                body = read_exact(src, int.from_bytes(ln, "little"))
                if body is None:
                    break
                if body[1] == cut_kind:
                    seen += 1
                    if seen == cut_at:
                        break
                chunk = ln + body
            else:
                try:
                    chunk = src.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
            try:
                dst.sendall(chunk)
            except OSError:
                break
            f.write(chunk)
            f.flush()
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR if cut else socket.SHUT_WR)
        except OSError:
            pass

l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", port))
l.listen(4)
n = 0
while True:
    a, _ = l.accept()
    n += 1
    b = socket.create_connection((host, int(rport)))
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pipe, args=(a, b, f"{out}/conn{n}-to-listener.bin", n == 1), daemon=True).start()
    threading.Thread(target=pipe, args=(b, a, f"{out}/conn{n}-to-connector.bin", False), daemon=True).start()
