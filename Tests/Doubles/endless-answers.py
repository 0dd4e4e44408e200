#!/usr/bin/env python3
"""A hostile HTTP server for SubsyncClient's answer limit (issue #52, item 8): every request, of
any method, is answered 200 with a body of --size bytes (default 1 GiB), streamed in 64 KiB
blocks, so a client that reads it all runs out of memory. The first path segment chooses how:

  /length/...          with Content-Length: the size is known from the head
  /chunked/...         chunked: the size is known only by reading
  /silent/...          Content-Length of the size, then no body at all (the connection stays open)
  /trickle/...         chunked, one byte every half second for 10 minutes: an answer that
                       never ends soon but is never silent for long
  /exact-length/N/...  exactly N bytes with Content-Length
  /exact-chunked/N/... exactly N bytes, chunked

GET /_sent answers {"requests": n, "sent": [bytes written per finished answer]}: how far each
answer got before the client hung up (the whole size if it never did).

Usage: endless-answers.py [--port N] [--size BYTES]; prints "PORT <n>" when listening.
"""
import argparse
import http.server
import json
import threading
import time

lock = threading.Lock()
sent = []
requests = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    size = 1 << 30

    def answer(self):
        global requests
        if self.path == "/_sent":
            with lock:
                body = json.dumps({"requests": requests, "sent": sent}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with lock:
            requests += 1
        parts = self.path.split("/")
        mode = parts[1] if len(parts) > 1 else ""
        size = self.size
        if mode.startswith("exact-"):
            size = int(parts[2])
        chunked = mode in ("chunked", "trickle", "exact-chunked")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        written = 0
        block = b"[" + b"0," * 32767 + b"0"  # 64 KiB of a JSON array that never closes
        try:
            if mode == "silent":
                self.wfile.flush()
                time.sleep(600)
            elif mode == "trickle":
                for _ in range(1200):
                    self.wfile.write(b"1\r\n0\r\n")
                    self.wfile.flush()
                    written += 1
                    time.sleep(0.5)
            else:
                while written < size:
                    piece = block[: size - written]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                    written += len(piece)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        finally:
            with lock:
                sent.append(written)
        self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *arguments):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--size", type=int, default=1 << 30)
    options = parser.parse_args()
    Handler.size = options.size
    server = http.server.ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
