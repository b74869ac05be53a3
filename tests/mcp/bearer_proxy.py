"""A loopback proxy that adds `Authorization: Bearer KEY` to every request it passes to the
MCP server: the conformance suite's raw requests drop the URL's `?key=` query, and the server
accepts its capability key as a bearer token too. The key comes on stdin (never argv); the
proxy prints its port on stdout and serves until killed. Used by scripts/mcp-peers only.
"""

import http.server
import sys
import urllib.error
import urllib.request

UPSTREAM = sys.argv[1]
KEY = sys.stdin.readline().strip()
HOP = {"host", "content-length", "connection", "transfer-encoding", "authorization"}
# What the client sent as Host reaches the server as it is: the server's DNS-rebinding check
# must judge the client's Host, not the proxy's upstream address.
PASSED = {"host"}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: D102 - answers pass through as they are
        return None


OPENER = urllib.request.build_opener(NoRedirect)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def forward(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP or k.lower() in PASSED}
        headers["Authorization"] = f"Bearer {KEY}"
        request = urllib.request.Request(UPSTREAM + self.path, data=body, headers=headers, method=self.command)
        try:
            with OPENER.open(request, timeout=60) as answer:
                status, answer_headers, data = answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as e:
            status, answer_headers, data = e.code, e.headers, e.read()
        self.send_response(status)
        for k, v in answer_headers.items():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = forward

    def log_message(self, *args):  # the key never reaches a log
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
