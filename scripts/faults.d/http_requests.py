"""HTTP: one request through http.client, raw bytes on a socket, device tokens, the JSON error body."""
import base64
import hashlib
import hmac
import http.client
import json
import re
import socket
import time

from common import CLIENT_TIMEOUT, TOKEN_SECRET


def http_request(port, method, path, body=None, headers=None, timeout=CLIENT_TIMEOUT, connection=None):
    """One request; returns (status, headers dict, body bytes), status None on a connection
    error ('error') and 'timeout' when no answer came in time."""
    own = connection is None
    conn = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    except socket.timeout:
        conn.close()
        return "timeout", {}, b""
    except (OSError, http.client.HTTPException):
        conn.close()
        return None, {}, b""
    finally:
        if own:
            conn.close()


def raw_request(port, payload, timeout=CLIENT_TIMEOUT):
    """Sends raw bytes on a fresh connection (Connection: close) and parses the answer; the
    server may answer and close before reading everything (413), so send errors are ignored."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return None, {}, b""
    sock.settimeout(timeout)
    try:
        try:
            sock.sendall(payload)
        except OSError:
            pass
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                return "timeout", {}, b""
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        data = b"".join(chunks)
    finally:
        sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.[01] (\d{3})", lines[0]) if lines else None
    if not match:
        return None, {}, b""
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            return None, {}, b""
        if len(body) < length:
            # Cut off mid-answer (the process was killed between writing the head and the
            # body): a connection error, as http.client's IncompleteRead is for the load.
            return None, {}, b""
        body = body[:length]
    return int(match.group(1)), headers, body


def dechunk(data):
    out, rest = b"", data
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            break
        if size == 0:
            break
        out, rest = out + rest[:size], rest[size + 2:]
    return out


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint(account, secret=TOKEN_SECRET, ttl=3600, alg="HS256"):
    header = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    now = int(time.time())
    payload = b64url(json.dumps({"sub": account, "exp": now + ttl, "iat": now - 5}).encode())
    if alg == "none":
        return f"{header}.{payload}."
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


def is_error_body(data):
    try:
        document = json.loads(data)
        error = document["error"]
        return isinstance(error["code"], str) and isinstance(error["message"], str)
    except (ValueError, KeyError, TypeError):
        return False
