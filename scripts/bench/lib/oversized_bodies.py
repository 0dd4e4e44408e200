#!/usr/bin/env python3
"""Bursts of oversized (2 MiB) sync requests from clients that send everything, half-close and
read the answer, against a running serve: after each burst, and again after the HTTP idle
timeout, the serve process's VmRSS and open descriptors (for scripts/bench/oversized).

usage: oversized_bodies.py PORT PID BURSTS IDLE_SECONDS CONCURRENCY ADMIN_KEY
"""
import os
import socket
import sys
import threading
import time

port, pid, bursts, idle, concurrency, key = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                             float(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
body = b"x" * (2 << 20)
head = (f"POST /v1/accounts/a1/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()


def rss_mib():
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def descriptors():
    return len(os.listdir(f"/proc/{pid}/fd"))


def one(answers, lock):
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        sock.sendall(head + body)
    except OSError:
        pass  # the server answered and stopped reading
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    data = b""
    try:
        while len(data) < 12:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    sock.close()
    status = data[9:12].decode() if len(data) >= 12 else "none"
    with lock:
        answers[status] = answers.get(status, 0) + 1


print(f"start: RSS {rss_mib():.1f} MiB, {descriptors()} descriptors", flush=True)
for burst in range(1, bursts + 1):
    answers, lock = {}, threading.Lock()
    per_client = 300 // concurrency
    threads = [threading.Thread(target=lambda: [one(answers, lock) for _ in range(per_client)]) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    right_after, open_after = rss_mib(), descriptors()
    time.sleep(idle * 2 + 1)
    print(f"burst {burst} ({per_client * concurrency} requests, {concurrency} at a time): answers {answers}; "
          f"RSS {right_after:.1f} MiB with {open_after} descriptors right after, "
          f"{rss_mib():.1f} MiB with {descriptors()} after the idle timeout", flush=True)
