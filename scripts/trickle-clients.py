#!/usr/bin/env python3
"""Slow clients for the connection-bound test (issue #52 item 6, ServeCommandTests): opens N
connections to 127.0.0.1:PORT, sends each the start of a request head, and then one more byte of
it every --interval seconds, never finishing it (a "slowloris"). Runs --seconds, then prints one
JSON line: how many connections were opened, how many the server closed, how many were still open
at the end, and how many could not connect.

usage: trickle-clients.py PORT [--connections N] [--seconds S] [--interval I]
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
    options = parser.parse_args()
    start = time.monotonic()
    sockets, failed, closed = [], 0, 0
    for _ in range(options.connections):
        try:
            s = socket.create_connection(("127.0.0.1", options.port), timeout=2)
            s.setblocking(False)
            s.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: ")
            sockets.append(s)
        except OSError:
            failed += 1
    while time.monotonic() - start < options.seconds:
        time.sleep(options.interval)
        still = []
        for s in sockets:
            try:
                try:
                    if s.recv(4096) == b"":
                        raise OSError("closed by the server")
                except BlockingIOError:
                    pass
                s.send(b"a")
                still.append(s)
            except OSError:
                closed += 1
                s.close()
        sockets = still
    print(json.dumps({"opened": options.connections - failed, "closed_by_server": closed, "open_at_end": len(sockets),
                      "failed_to_connect": failed}), flush=True)
    for s in sockets:
        s.close()


if __name__ == "__main__":
    main()
