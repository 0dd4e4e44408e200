#!/usr/bin/env python3
"""Slow clients for the connection-bound tests (issue #52 item 6, ServeCommandTests): opens N
connections to 127.0.0.1:PORT and, by --mode,
  head   sends the start of a request head, then one more byte of it every --interval seconds,
         never finishing it (a "slowloris");
  body   sends a whole head announcing a large body (no credential: the service refuses it and
         drains the body), then one body byte every --interval seconds;
  stall  with a tiny receive buffer, sends 80 pipelined GET /openapi.yaml (6 MB of answers,
         more than the kernel buffers) and never reads;
  probe  sends a whole GET of --path (default /healthz), then another every --interval seconds on
         the same connection (keeping it open for good unless the server closes it), reading the
         answers.
--source binds the clients to that local address (127.0.0.2: a second host on loopback).
Runs --seconds, then prints one JSON line: how many connections were opened, how many the server
closed (seen by this side: in stall mode it cannot see it, the server's side is measured by the
test), how many were still open at the end, and how many could not connect.

usage: trickle-clients.py PORT [--mode head|body|stall|probe] [--connections N] [--seconds S] [--interval I]
                          [--source ADDRESS] [--path PATH]
"""
import argparse
import json
import socket
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--mode", choices=["head", "body", "stall", "probe"], default="head")
    parser.add_argument("--source", default=None)
    parser.add_argument("--path", default="/healthz")
    options = parser.parse_args()
    opening = {
        "head": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: ",
        "body": b"POST /v1/accounts/slow/sync HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000\r\n\r\n",
        "stall": b"GET /openapi.yaml HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 80,
        "probe": b"GET " + options.path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    }[options.mode]
    answers = {}
    start = time.monotonic()
    sockets, failed, closed = [], 0, 0
    for _ in range(options.connections):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if options.mode == "stall":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.settimeout(2)
            if options.source:
                s.bind((options.source, 0))
            s.connect(("127.0.0.1", options.port))
            s.setblocking(False)
            s.send(opening)
            sockets.append(s)
        except OSError:
            failed += 1
    while time.monotonic() - start < options.seconds:
        time.sleep(options.interval)
        if options.mode == "stall":
            continue  # never read, never send again
        still = []
        for s in sockets:
            try:
                try:
                    received = s.recv(65536)
                    if received == b"":
                        raise OSError("closed by the server")
                    for line in received.split(b"\r\n"):
                        if line.startswith(b"HTTP/1.1 "):
                            status = line[9:12].decode()
                            answers[status] = answers.get(status, 0) + 1
                except BlockingIOError:
                    pass
                s.send({"head": b"a", "body": b" ", "probe": opening}[options.mode])
                still.append(s)
            except OSError:
                closed += 1
                s.close()
        sockets = still
    print(json.dumps({"opened": options.connections - failed, "closed_by_server": closed, "open_at_end": len(sockets),
                      "failed_to_connect": failed, "answers": answers}), flush=True)
    for s in sockets:
        s.close()


if __name__ == "__main__":
    main()
