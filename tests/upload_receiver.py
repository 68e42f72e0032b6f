#!/usr/bin/env python3
# upload_receiver.py PORT DIR [NAME_REGEX]: a stand-in for Grafana Pyroscope's ingest
# endpoint on 127.0.0.1:PORT, for tests/upload-pyroscope.test. Each
# request is checked against the API luaspy follows (grafana/pyroscope
# pkg/ingester/pyroscope/ingest_handler.go: POST /ingest, query name,
# from, until, format=pprof, sampleRate, spyName; the body the pprof) and
# the headers the test asks for; the body is saved as DIR/req-N.pb.gz and
# one line goes to DIR/log: "ok N NAME FROM UNTIL" or "bad N WHY".
# NAME_REGEX (Python syntax) is what the name must match; the default is
# the one tests/upload-pyroscope.test sends.
import os, re, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import urlsplit, parse_qs

PORT, DIR = int(sys.argv[1]), sys.argv[2]
NAME = re.compile(sys.argv[3] if len(sys.argv) > 3 else
                  r"^myapp\{hostname=[A-Za-z0-9_.:/+-]+,pid=[0-9]+,runtime=[A-Za-z0-9_.:/+-]+,env=test,zone=eu_1\}$")
n = 0


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_error(405)

    def do_POST(self):
        global n
        n += 1
        why = []
        u = urlsplit(self.path)
        q = parse_qs(u.query, keep_blank_values=True)
        if u.path != "/ingest":
            why.append("path %r" % u.path)
        for k in ("name", "from", "until", "format", "sampleRate", "spyName"):
            if len(q.get(k, [])) != 1:
                why.append("query %s: %r" % (k, q.get(k)))
        g = lambda k: q.get(k, [""])[0]
        if not NAME.match(g("name")):
            why.append("name %r" % g("name"))
        if g("format") != "pprof" or g("spyName") != "luaspy" or g("sampleRate") != "100":
            why.append("format/spyName/sampleRate %r %r %r" % (g("format"), g("spyName"), g("sampleRate")))
        if not (g("from").isdigit() and g("until").isdigit() and int(g("from")) < int(g("until"))):
            why.append("from/until %r %r" % (g("from"), g("until")))
        if self.headers.get("Content-Type") != "application/octet-stream":
            why.append("content type %r" % self.headers.get("Content-Type"))
        if self.headers.get("X-Scope-OrgID") != "tenant1":
            why.append("X-Scope-OrgID %r" % self.headers.get("X-Scope-OrgID"))
        if self.headers.get("Authorization") != "Bearer s3cret":
            why.append("Authorization %r" % self.headers.get("Authorization"))
        ln = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(ln)
        if body[:2] != b"\x1f\x8b":
            why.append("body is not gzip")
        with open(os.path.join(DIR, "req-%d.pb.gz" % n), "wb") as f:
            f.write(body)
        with open(os.path.join(DIR, "log"), "a") as f:
            if why:
                f.write("bad %d %s\n" % (n, "; ".join(why)))
            else:
                f.write("ok %d %s %s %s\n" % (n, g("name"), g("from"), g("until")))
        self.send_response(400 if why else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()


HTTPServer(("127.0.0.1", PORT), H).serve_forever()
