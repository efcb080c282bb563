#!/usr/bin/env python3
"""A fault-injecting HTTP proxy between walcut and an S3-compatible server (standard library only).

    s3_fault_proxy.py --upstream http://127.0.0.1:PORT --fault KIND [--every N] [--limit K]
                      [--method M,...] [--query NAME] [--key-suffix S] [--seed S]
                      [--port-file F] [--stats-file F] [--max-seconds T]

It binds 127.0.0.1 on a free port (written to --port-file, atomically, and
printed), forwards every request as it arrived (method, path, query, headers,
body: the SigV4 signature covers the Host header, which is kept, so the
upstream sees the request the client signed) and every answer as the upstream
gave it, but for the faults below. It exits after --max-seconds, or as soon
as its parent process dies.

Schedule: a request is *eligible* when it matches every filter (--method: a
comma-separated list of HTTP methods; --query: the query names the parameter,
e.g. partNumber, uploads, uploadId, list-type; --key-suffix: the path ends so)
and the fault applies to it (reset-upload: a request body of at least 2
bytes; reset-download and truncate: a GET). Eligible requests are counted in
arrival order (1, 2, ...); the fault hits those whose count c has
(c + offset) % N == 0, offset = seed % N, at most --limit times (0: no limit).
Where a body is cut, the number of bytes let through is drawn from a
random.Random(seed) stream in [1, len - 1]. So a schedule is deterministic
for requests made one at a time; with parallel transfers which request is the
Nth depends on arrival order.

Faults (--fault):
  500           answer 500 InternalError without forwarding
  503           answer 503 ServiceUnavailable without forwarding
  slowdown      answer 503 SlowDown (S3's XML error body) without forwarding
  500-after     forward, let the upstream apply it, then answer 500 InternalError
  reset-upload  read part of the request body, then reset the connection (RST)
  reset-download  forward, send the answer's headers and part of its body, then reset
  truncate      forward, send the answer's headers (its full Content-Length) and
                part of its body, then close the connection (FIN)

--stats-file is rewritten (atomically) after every request: one JSON object
{"requests": total, "eligible": n, "faults": k, "log": [one line per fault]}.
"""
import argparse
import http.client
import json
import os
import random
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse

ARGS = None
LOCK = threading.Lock()
STATS = {"requests": 0, "eligible": 0, "faults": 0, "log": []}
RNG = None
HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade", "expect"}
ERRORS = {
    "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
    "500-after": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "Service Unavailable", "ServiceUnavailable", "Service is unable to handle request."),
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}


def write_stats():
    if not ARGS.stats_file:
        return
    tmp = ARGS.stats_file + ".tmp-%d" % threading.get_ident()
    with open(tmp, "w") as f:
        json.dump(STATS, f)
    os.replace(tmp, ARGS.stats_file)


def eligible(method, path, query, body_len):
    if ARGS.method and method not in ARGS.method:
        return False
    if ARGS.query and ARGS.query not in query:
        return False
    if ARGS.key_suffix and not path.endswith(ARGS.key_suffix):
        return False
    if ARGS.fault == "reset-upload":
        return body_len >= 2
    if ARGS.fault in ("reset-download", "truncate"):
        return method == "GET"
    return True


def schedule(method, path, query, body_len):
    """Counts the request; True when the fault hits it."""
    with LOCK:
        STATS["requests"] += 1
        hit = False
        if eligible(method, path, query, body_len):
            STATS["eligible"] += 1
            c = STATS["eligible"]
            limited = ARGS.fault == "none" or (ARGS.limit and STATS["faults"] >= ARGS.limit)
            if not limited and (c + ARGS.seed % ARGS.every) % ARGS.every == 0:
                STATS["faults"] += 1
                hit = True
        if not hit:
            write_stats()
        return hit


def note(line):
    with LOCK:
        STATS["log"].append(line)
        write_stats()
    sys.stderr.write("s3_fault_proxy: %s\n" % line)
    sys.stderr.flush()


def cut_point(n):
    with LOCK:
        return RNG.randint(1, n - 1) if n >= 2 else 0


def reset(sock):
    # SO_LINGER 0: close sends RST instead of FIN.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Handler(socketserver.StreamRequestHandler):
    # Headers and body are separate writes: without this a kept-alive
    # connection waits 40 ms for the client's delayed ACK on every answer.
    disable_nagle_algorithm = True

    def setup(self):
        super().setup()
        self.upstream = None

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        if self.upstream is not None:
            self.upstream.close()

    def read_head(self):
        line = self.rfile.readline(65537)
        if not line:
            return None
        parts = line.decode("latin-1").rstrip("\r\n").split(" ")
        if len(parts) != 3:
            return None
        headers = []
        while True:
            h = self.rfile.readline(65537).decode("latin-1")
            if h in ("\r\n", "\n", ""):
                break
            name, _, value = h.partition(":")
            headers.append((name.strip(), value.strip()))
        return parts[0], parts[1], headers

    def handle(self):
        try:
            while self.one():
                pass
        except (ConnectionError, OSError, http.client.HTTPException) as e:
            sys.stderr.write("s3_fault_proxy: connection ended: %s\n" % e)

    def answer(self, status, reason, headers, body, send_bytes=None):
        out = "HTTP/1.1 %d %s\r\n" % (status, reason)
        for k, v in headers:
            out += "%s: %s\r\n" % (k, v)
        self.wfile.write(out.encode("latin-1") + b"\r\n")
        self.wfile.write(body if send_bytes is None else body[:send_bytes])
        self.wfile.flush()

    def error(self, fault, path):
        status, reason, code, message = ERRORS[fault]
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message>"
                "<Resource>%s</Resource><RequestId>walcut-fault-proxy</RequestId></Error>" %
                (code, message, path.split("?")[0])).encode()
        self.answer(status, reason, [("Content-Type", "application/xml"), ("Content-Length", len(body))], body)

    def forward(self, method, target, headers, body):
        # A kept-alive upstream connection the server closed meanwhile fails
        # at once: then once more on a new one (never an unscheduled fault).
        reused = self.upstream is not None
        try:
            return self.forward_once(method, target, headers, body)
        except (OSError, http.client.HTTPException):
            if not reused:
                raise
            return self.forward_once(method, target, headers, body)

    def forward_once(self, method, target, headers, body):
        if self.upstream is None:
            self.upstream = http.client.HTTPConnection(ARGS.upstream_host, ARGS.upstream_port, timeout=120)
        up = self.upstream
        try:
            up.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for k, v in headers:
                if k.lower() not in HOP and k.lower() != "content-length":
                    up.putheader(k, v)
            if body or method in ("PUT", "POST"):
                up.putheader("Content-Length", str(len(body)))
            up.endheaders(body)
            resp = up.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            up.close()
            self.upstream = None
            raise
        out = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP and k.lower() != "content-length"]
        if method == "HEAD":
            length = resp.getheader("Content-Length")
            if length is not None:
                out.append(("Content-Length", length))
        else:
            out.append(("Content-Length", str(len(data))))
        if resp.will_close:
            up.close()
            self.upstream = None
        return resp.status, resp.reason, out, data

    def one(self):
        head = self.read_head()
        if head is None:
            return False
        method, target, headers = head
        hmap = {k.lower(): v for k, v in headers}
        length = int(hmap.get("content-length", "0") or 0)
        path, _, qs = target.partition("?")
        query = dict(urllib.parse.parse_qsl(qs, keep_blank_values=True))
        hit = schedule(method, urllib.parse.unquote(path), query, length)
        what = "%s %s" % (method, target[:200])
        if hmap.get("expect", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.flush()
        if hit and ARGS.fault == "reset-upload":
            n = cut_point(length)
            self.rfile.read(n)
            note("reset-upload %s after %d of %d body bytes" % (what, n, length))
            reset(self.connection)
            return False
        body = self.rfile.read(length) if length else b""
        if hit and ARGS.fault in ("500", "503", "slowdown"):
            note("%s %s (not forwarded)" % (ARGS.fault, what))
            self.error(ARGS.fault, path)
            return True
        status, reason, out, data = self.forward(method, target, headers, body)
        if hit and ARGS.fault == "500-after":
            note("500-after %s (the upstream answered %d)" % (what, status))
            self.error(ARGS.fault, path)
            return True
        if hit and ARGS.fault in ("reset-download", "truncate"):
            n = cut_point(len(data))
            if not data:  # nothing to cut: claim one byte that never comes
                out = [(k, v) for k, v in out if k.lower() != "content-length"] + [("Content-Length", "1")]
            note("%s %s after %d of %d body bytes (HTTP %d)" % (ARGS.fault, what, n, len(data), status))
            self.answer(status, reason, out, data, n)
            if ARGS.fault == "reset-download":
                reset(self.connection)
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
            return False
        self.answer(status, reason, out, data)
        return True


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def watchdog(parent, deadline):
    while time.time() < deadline and os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


def main():
    global ARGS, RNG
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the S3 server")
    p.add_argument("--fault", default="none",
                   choices=["none", "500", "503", "slowdown", "500-after", "reset-upload", "reset-download",
                            "truncate"])
    p.add_argument("--every", type=int, default=1, help="every Nth eligible request (default 1: all)")
    p.add_argument("--limit", type=int, default=0, help="at most this many faults (0: no limit)")
    p.add_argument("--method", default="", help="comma-separated methods (default: any)")
    p.add_argument("--query", default="", help="only requests whose query names this parameter")
    p.add_argument("--key-suffix", default="", help="only requests whose path ends so")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port-file")
    p.add_argument("--stats-file")
    p.add_argument("--max-seconds", type=float, default=300)
    ARGS = p.parse_args()
    if ARGS.every < 1:
        p.error("--every must be at least 1")
    u = urllib.parse.urlsplit(ARGS.upstream)
    if u.scheme != "http" or u.hostname not in ("127.0.0.1", "localhost", "::1"):
        p.error("--upstream must be http:// on the loopback")
    ARGS.upstream_host, ARGS.upstream_port = u.hostname, u.port or 80
    ARGS.method = set(m for m in ARGS.method.upper().split(",") if m)
    RNG = random.Random(ARGS.seed)
    threading.Thread(target=watchdog, args=(os.getppid(), time.time() + ARGS.max_seconds), daemon=True).start()
    srv = Server(("127.0.0.1", 0), Handler)
    port = srv.server_address[1]
    write_stats()
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    print(port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
