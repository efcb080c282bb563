#!/usr/bin/env python3
"""A small S3-compatible server for walcut's tests (Python standard library only).

Path-style requests only (http://127.0.0.1:PORT/BUCKET/KEY). Supports PUT (with
If-None-Match: *, atomic under concurrent creators: 412 when the key exists),
GET (with Range), HEAD, DELETE, ListObjectsV2 (prefix, delimiter, max-keys,
continuation-token, start-after), multipart uploads (create, upload part,
complete, abort, list uploads with paging). Every request must carry a valid
AWS Signature Version 4 Authorization header for the configured key pair: the
canonical request is rebuilt from what arrived and the signature checked (403
SignatureDoesNotMatch otherwise); a signed payload hash is checked against the
body (400 XAmzContentSHA256Mismatch).

Objects are stored in files under --root; their index lives in memory, so a
server starts empty. It binds 127.0.0.1 on a free port, writes the port to
--port-file (atomically) and prints it, and exits after --max-seconds or as
soon as its parent process dies.

Fault injection, counted over all requests (the Nth, 2Nth, ... request):
  --fail-every N            answer 503 SlowDown (or --fail-status 500 InternalError)
  --drop-every N            reset the connection (RST) before doing anything
  --drop-after-commit-every N  do the request, then reset instead of answering
  --stall-every N           sleep --stall-seconds before answering
  --hostile-xml             every XML body (listings, multipart answers, errors)
                            is replaced by garbage, a different kind per request
  --deny-key-suffix S       writes (PUT, POST) of keys ending in S answer 403
                            AccessDenied: a writer interrupted at that object
"""
import argparse
import base64
import datetime
import hashlib
import hmac
import http.server
import os
import re
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse
import uuid

ARGS = None
LOCK = threading.Lock()
OBJECTS = {}  # (bucket, key) -> {"file", "etag", "size", "mtime"}
UPLOADS = {}  # upload id -> {"bucket", "key", "parts": {n: (file, etag, size)}, "initiated"}
COUNTER = [0]
HOSTILE_COUNTER = [0]
MAX_BODY = 64 << 20
XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

HOSTILE = [
    b"",
    b"not xml at all",
    b"<ListBucketResult><Contents><Key>abc",
    b"<" * 5000,
    b"<a>" * 100000,
    b"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
    b"<ListBucketResult><Contents><Key>&#xFFFFFFFF;&#0;&bogus;</Key><Size>-5</Size></Contents></ListBucketResult>",
    b"<ListBucketResult><Contents><Size>99999999999999999999999999</Size><Key>k</Key></Contents></ListBucketResult>",
    b"\x00\xff\xfe<\x00K\x00>" * 1000,
    b"<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'aaaa'><!ENTITY b '&a;&a;&a;'>]><ListBucketResult>&b;</ListBucketResult>",
    b"<InitiateMultipartUploadResult><UploadId></UploadId></InitiateMultipartUploadResult>",
    b"<Error><Code>" + b"A" * 300000 + b"</Code></Error>",
    b"<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken></NextContinuationToken></ListBucketResult>",
    b"<ListMultipartUploadsResult><IsTruncated>true</IsTruncated></ListMultipartUploadsResult>",
    b"<CompleteMultipartUploadResult><ETag>\"x\"</ETag></CompleteMultipartUploadResult" + b"]" * 10,
    b"<![CDATA[<Key>x</Key>",
]


def quote(s):
    return urllib.parse.quote(s, safe="-_.~")


def xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class Reply(Exception):
    """An S3 error answer: status, code, message."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def signing_key(secret, date, region):
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "walcut-s3-test"
    # An answer's headers and body go out in separate writes: with Nagle's
    # algorithm on, the body waits for the client's delayed ACK (40 ms) on a
    # kept-alive connection, which real S3 endpoints do not do.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        if ARGS.verbose:
            sys.stderr.write("s3_server: " + (fmt % args) + "\n")

    # --- plumbing -----------------------------------------------------------
    def send(self, status, body=b"", headers=None, xml=False):
        if xml and ARGS.hostile_xml:
            with LOCK:
                HOSTILE_COUNTER[0] += 1
                body = HOSTILE[HOSTILE_COUNTER[0] % len(HOSTILE)]
        headers = dict(headers or {})
        headers.setdefault("Content-Length", len(body))  # a HEAD's is the object's
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, str(v))
        if xml:
            self.send_header("Content-Type", "application/xml")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error_reply(self, e):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
                "<RequestId>%s</RequestId></Error>" % (e.code, xml_escape(e.message), uuid.uuid4().hex)).encode()
        if self.command == "HEAD":
            self.send_response(e.status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send(e.status, body, xml=True)

    def reset(self):
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding"):
            raise Reply(501, "NotImplemented", "Transfer-Encoding is not supported here")
        n = int(self.headers.get("Content-Length") or 0)
        if n < 0 or n > MAX_BODY:
            raise Reply(400, "EntityTooLarge", "body too large")
        return self.rfile.read(n) if n else b""

    # --- SigV4 ----------------------------------------------------------------
    def check_signature(self, raw_path, raw_query, body):
        auth = self.headers.get("Authorization", "")
        m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/,]+)/(\d{8})/([^/,]+)/s3/aws4_request,\s*"
                         r"SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})", auth)
        if not m:
            raise Reply(403, "AccessDenied", "missing or malformed AWS4-HMAC-SHA256 Authorization header")
        akid, date, region, signed, signature = m.groups()
        if akid != ARGS.access_key:
            raise Reply(403, "InvalidAccessKeyId", "unknown access key id")
        if region != ARGS.region:
            raise Reply(400, "AuthorizationHeaderMalformed", "region %s is wrong; expecting %s" % (region, ARGS.region))
        amz_date = self.headers.get("x-amz-date", "")
        try:
            t = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            raise Reply(403, "AccessDenied", "missing or malformed x-amz-date")
        if abs(t.timestamp() - time.time()) > 900 or not amz_date.startswith(date):
            raise Reply(403, "RequestTimeTooSkewed", "request time too skewed")
        names = signed.split(";")
        if "host" not in names or names != sorted(names):
            raise Reply(403, "AccessDenied", "SignedHeaders must be sorted and include host")
        for h in self.headers.keys():
            if h.lower().startswith("x-amz-") and h.lower() not in names:
                raise Reply(403, "AccessDenied", "header %s is not signed" % h.lower())
        if ARGS.session_token and self.headers.get("x-amz-security-token") != ARGS.session_token:
            raise Reply(403, "InvalidToken", "missing or wrong x-amz-security-token")
        payload = self.headers.get("x-amz-content-sha256")
        if payload is None:
            raise Reply(400, "InvalidRequest", "missing required header x-amz-content-sha256")
        if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
            raise Reply(400, "XAmzContentSHA256Mismatch", "the payload does not match x-amz-content-sha256")
        uri = "/".join(quote(urllib.parse.unquote(seg)) for seg in raw_path.split("/"))
        pairs = urllib.parse.parse_qsl(raw_query, keep_blank_values=True)
        query = "&".join("%s=%s" % (quote(k), quote(v)) for k, v in sorted(pairs))
        headers = ""
        for n in names:
            values = self.headers.get_all(n) or []
            if not values:
                raise Reply(403, "AccessDenied", "signed header %s is missing" % n)
            headers += "%s:%s\n" % (n, ",".join(" ".join(v.split()) for v in values))
        canonical = "\n".join([self.command, uri, query, headers, signed, payload])
        scope = "%s/%s/s3/aws4_request" % (date, region)
        to_sign = "AWS4-HMAC-SHA256\n%s\n%s\n%s" % (amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest())
        want = hmac.new(signing_key(ARGS.secret_key, date, region), to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, signature):
            if ARGS.verbose:
                sys.stderr.write("s3_server: canonical request was:\n%s\n" % canonical)
            raise Reply(403, "SignatureDoesNotMatch", "the request signature we calculated does not match")

    # --- dispatch -------------------------------------------------------------
    def handle_any(self):
        with LOCK:
            COUNTER[0] += 1
            n = COUNTER[0]

        def hit(every):
            return every and n % every == 0

        if hit(ARGS.drop_every):
            return self.reset()
        try:
            parsed = urllib.parse.urlsplit(self.path)
            body = self.read_body()
            if hit(ARGS.stall_every):
                time.sleep(ARGS.stall_seconds)
            if hit(ARGS.fail_every):
                if ARGS.fail_status == 503:
                    raise Reply(503, "SlowDown", "Please reduce your request rate.")
                raise Reply(500, "InternalError", "We encountered an internal error. Please try again.")
            self.check_signature(parsed.path, parsed.query, body)
            query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
            parts = parsed.path.split("/", 2)
            bucket = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
            key = urllib.parse.unquote(parts[2]) if len(parts) > 2 else ""
            if bucket not in ARGS.bucket:
                raise Reply(404, "NoSuchBucket", "The specified bucket does not exist")
            reply = self.route(bucket, key, query, body)
            if hit(ARGS.drop_after_commit_every):
                return self.reset()
            self.send(*reply[:3], xml=reply[3] if len(reply) > 3 else False)
        except Reply as e:
            self.error_reply(e)

    def route(self, bucket, key, q, body):
        m = self.command
        if not key:
            if m == "GET" and q.get("list-type") == "2":
                return list_objects(bucket, q)
            if m == "GET" and "uploads" in q:
                return list_uploads(bucket, q)
            raise Reply(501, "NotImplemented", "bucket operation not supported here")
        if m in ("PUT", "POST") and ARGS.deny_key_suffix and key.endswith(ARGS.deny_key_suffix):
            raise Reply(403, "AccessDenied", "writes of this key are denied (--deny-key-suffix)")
        if m == "PUT" and "uploadId" in q:
            return upload_part(bucket, key, q, body)
        if m == "PUT":
            return put_object(bucket, key, body, self.headers.get("If-None-Match"))
        if m == "POST" and "uploads" in q:
            return create_upload(bucket, key)
        if m == "POST" and "uploadId" in q:
            return complete_upload(bucket, key, q["uploadId"], body)
        if m == "DELETE" and "uploadId" in q:
            with LOCK:
                if UPLOADS.pop(q["uploadId"], None) is None:
                    raise Reply(404, "NoSuchUpload", "The specified upload does not exist")
            return (204, b"", {})
        if m == "DELETE":
            with LOCK:
                OBJECTS.pop((bucket, key), None)
            return (204, b"", {})
        if m in ("GET", "HEAD"):
            return get_object(bucket, key, self.headers.get("Range"), m == "HEAD")
        raise Reply(405, "MethodNotAllowed", "method not allowed")

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


def store(data):
    path = os.path.join(ARGS.root, uuid.uuid4().hex)
    with open(path, "wb") as f:
        f.write(data)
    return path


def put_object(bucket, key, body, if_none_match):
    if if_none_match not in (None, "*"):
        raise Reply(501, "NotImplemented", "only If-None-Match: * is supported")
    path = store(body)
    meta = {"file": path, "etag": '"%s"' % hashlib.md5(body).hexdigest(), "size": len(body), "mtime": time.time()}
    with LOCK:  # the check and the insert under one lock: one creator wins
        if if_none_match == "*" and (bucket, key) in OBJECTS:
            raise Reply(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
        OBJECTS[(bucket, key)] = meta
    return (200, b"", {"ETag": meta["etag"]})


def get_object(bucket, key, rng, head):
    with LOCK:
        meta = OBJECTS.get((bucket, key))
    if meta is None:
        raise Reply(404, "NoSuchKey", "The specified key does not exist.")
    headers = {"ETag": meta["etag"], "Last-Modified": http.server.BaseHTTPRequestHandler.date_time_string(None, meta["mtime"])}
    size = meta["size"]
    first, last, status = 0, size - 1, 200
    if rng:
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng)
        if not m or (not m.group(1) and not m.group(2)):
            raise Reply(400, "InvalidArgument", "bad Range")
        if m.group(1):
            first, last = int(m.group(1)), int(m.group(2)) if m.group(2) else size - 1
        else:
            first, last = max(0, size - int(m.group(2))), size - 1
        if first >= size or first > last:
            raise Reply(416, "InvalidRange", "The requested range is not satisfiable")
        last = min(last, size - 1)
        headers["Content-Range"] = "bytes %d-%d/%d" % (first, last, size)
        status = 206
    if head:
        headers["Content-Length"] = last + 1 - first
        return (status, b"", headers)
    # Only the bytes asked for are read (objects are written once, never changed).
    with open(meta["file"], "rb") as f:
        f.seek(first)
        data = f.read(max(0, last + 1 - first))
    return (status, data, headers)


def xml_doc(root, inner):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<%s xmlns="%s">%s</%s>' % (root, XMLNS, inner, root)).encode()


def el(name, value):
    return "<%s>%s</%s>" % (name, xml_escape(str(value)), name)


def list_objects(bucket, q):
    prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
    try:
        max_keys = min(1000, int(q.get("max-keys", "1000")))
    except ValueError:
        raise Reply(400, "InvalidArgument", "max-keys is not a number")
    token = q.get("continuation-token")
    after = q.get("start-after", "")
    if token is not None:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except Exception:
            raise Reply(400, "InvalidArgument", "The continuation token provided is incorrect")
    with LOCK:
        keys = sorted(k for (b, k), _ in OBJECTS.items() if b == bucket and k.startswith(prefix))
        metas = {k: OBJECTS[(bucket, k)] for k in keys}
    entries, last, truncated = [], None, False
    for k in keys:
        if k <= after or (delim and after.endswith(delim) and after.startswith(prefix) and k.startswith(after)):
            continue
        entry = k
        if delim:
            i = k.find(delim, len(prefix))
            if i >= 0:
                entry = k[:i + len(delim)]
        if entries and entries[-1] == entry:
            continue
        if len(entries) == max_keys:
            truncated = True
            break
        entries.append(entry)
        last = entry
    inner = el("Name", bucket) + el("Prefix", prefix) + el("KeyCount", len(entries)) + el("MaxKeys", max_keys)
    if delim:
        inner += el("Delimiter", delim)
    inner += el("IsTruncated", "true" if truncated else "false")
    for e in entries:
        if delim and e.endswith(delim) and e not in metas:
            inner += "<CommonPrefixes>%s</CommonPrefixes>" % el("Prefix", e)
        else:
            m = metas[e]
            inner += "<Contents>%s%s%s%s</Contents>" % (el("Key", e), el("LastModified", iso(m["mtime"])),
                                                         el("ETag", m["etag"]), el("Size", m["size"]))
    if truncated:
        inner += el("NextContinuationToken", base64.urlsafe_b64encode(last.encode()).decode())
    return (200, xml_doc("ListBucketResult", inner), {}, True)


def create_upload(bucket, key):
    uid = uuid.uuid4().hex
    with LOCK:
        UPLOADS[uid] = {"bucket": bucket, "key": key, "parts": {}, "initiated": time.time()}
    inner = el("Bucket", bucket) + el("Key", key) + el("UploadId", uid)
    return (200, xml_doc("InitiateMultipartUploadResult", inner), {}, True)


def upload_part(bucket, key, q, body):
    try:
        n = int(q.get("partNumber", ""))
    except ValueError:
        raise Reply(400, "InvalidArgument", "partNumber is not a number")
    if not 1 <= n <= 10000:
        raise Reply(400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive")
    path = store(body)
    etag = '"%s"' % hashlib.md5(body).hexdigest()
    with LOCK:
        up = UPLOADS.get(q["uploadId"])
        if up is None or up["bucket"] != bucket or up["key"] != key:
            raise Reply(404, "NoSuchUpload", "The specified upload does not exist")
        up["parts"][n] = (path, etag, len(body))
    return (200, b"", {"ETag": etag})


def complete_upload(bucket, key, uid, body):
    text = body.decode("utf-8", "replace")
    asked = re.findall(r"<Part>\s*<PartNumber>(\d+)</PartNumber>\s*<ETag>([^<]*)</ETag>\s*</Part>", text)
    if not asked:
        raise Reply(400, "MalformedXML", "The XML you provided was not well-formed")
    with LOCK:
        up = UPLOADS.get(uid)
        if up is None or up["bucket"] != bucket or up["key"] != key:
            raise Reply(404, "NoSuchUpload", "The specified upload does not exist")
        parts = dict(up["parts"])
    numbers = [int(n) for n, _ in asked]
    if numbers != sorted(set(numbers)):
        raise Reply(400, "InvalidPartOrder", "The list of parts was not in ascending order")
    chunks, md5s = [], b""
    for i, (n, etag) in enumerate(asked):
        have = parts.get(int(n))
        if have is None or have[1] != etag.replace("&quot;", '"'):
            raise Reply(400, "InvalidPart", "One or more of the specified parts could not be found")
        if i + 1 < len(asked) and have[2] < ARGS.min_part_size:
            raise Reply(400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size")
        with open(have[0], "rb") as f:
            chunk = f.read()
        chunks.append(chunk)
        md5s += hashlib.md5(chunk).digest()
    etag = '"%s-%d"' % (hashlib.md5(md5s).hexdigest(), len(asked))
    data = b"".join(chunks)
    path = store(data)
    with LOCK:
        if UPLOADS.pop(uid, None) is None:
            raise Reply(404, "NoSuchUpload", "The specified upload does not exist")
        OBJECTS[(bucket, key)] = {"file": path, "etag": etag, "size": len(data), "mtime": time.time()}
    inner = el("Location", "/%s/%s" % (bucket, key)) + el("Bucket", bucket) + el("Key", key) + el("ETag", etag)
    return (200, xml_doc("CompleteMultipartUploadResult", inner), {}, True)


def list_uploads(bucket, q):
    prefix = q.get("prefix", "")
    max_uploads = min(1000, int(q.get("max-uploads", "1000") or 1000))
    marker = (q.get("key-marker", ""), q.get("upload-id-marker", ""))
    with LOCK:
        ups = sorted((u["key"], uid) for uid, u in UPLOADS.items() if u["bucket"] == bucket and u["key"].startswith(prefix))
        initiated = {uid: u["initiated"] for uid, u in UPLOADS.items()}
    if marker[0]:
        ups = [u for u in ups if u > marker] if marker[1] else [u for u in ups if u[0] > marker[0]]
    page, truncated = ups[:max_uploads], len(ups) > max_uploads
    inner = el("Bucket", bucket) + el("Prefix", prefix) + el("MaxUploads", max_uploads)
    inner += el("IsTruncated", "true" if truncated else "false")
    if truncated:
        inner += el("NextKeyMarker", page[-1][0]) + el("NextUploadIdMarker", page[-1][1])
    for k, uid in page:
        inner += "<Upload>%s%s%s</Upload>" % (el("Key", k), el("UploadId", uid), el("Initiated", iso(initiated[uid])))
    return (200, xml_doc("ListMultipartUploadsResult", inner), {}, True)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def watchdog(parent, deadline):
    while time.time() < deadline and os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True, help="directory for the objects' files (created)")
    p.add_argument("--port-file", help="write the port here (atomically) once listening")
    p.add_argument("--bucket", action="append", default=[], help="a bucket that exists (repeatable; default: test)")
    p.add_argument("--access-key", default="AKIDWALCUTTEST")
    p.add_argument("--secret-key", default="walcut-test-secret")
    p.add_argument("--session-token", default="", help="when set, requests must carry it")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--max-seconds", type=float, default=600)
    p.add_argument("--min-part-size", type=int, default=5 << 20)
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--fail-status", type=int, default=503, choices=[500, 503])
    p.add_argument("--drop-every", type=int, default=0)
    p.add_argument("--drop-after-commit-every", type=int, default=0)
    p.add_argument("--stall-every", type=int, default=0)
    p.add_argument("--stall-seconds", type=float, default=3)
    p.add_argument("--hostile-xml", action="store_true")
    p.add_argument("--deny-key-suffix", default="", help="PUT/POST of a key ending so: 403 AccessDenied (not retried)")
    p.add_argument("--verbose", action="store_true")
    ARGS = p.parse_args()
    ARGS.bucket = ARGS.bucket or ["test"]
    os.makedirs(ARGS.root, exist_ok=True)
    threading.Thread(target=watchdog, args=(os.getppid(), time.time() + ARGS.max_seconds), daemon=True).start()
    srv = Server(("127.0.0.1", 0), Handler)
    port = srv.server_address[1]
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    print(port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
