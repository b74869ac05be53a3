"""The edge Worker (worker/) in the real Workers runtime, for tests/mcp/test_worker*.py: `workerd`
from the npm registry (scripts/install-worker-peers puts it in .peers/worker/) serving
worker/src/ with the bindings `zodex sprite proxy deploy` gives it, in front of any origin.

Also a fake sprite (`FakeSprite`) for what a real one does not do on demand: answer 502 while
cold, cut a connection after reading a request, hold a stream open. It counts every request it
gets, so a test can prove a request reached it exactly once.

The runtime's outbound fetches are limited to loopback (`network = (allow = ["local"])`): the
tests need no network. A missing workerd raises `Missing` (skip locally, fail in CI, where
ZODEX_REQUIRE_PROXIES=1).
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from conftest import REPO, terminate
from proxies import Missing, free_port, wait_listening

WORKERD = REPO / ".peers" / "worker" / "node_modules" / "@cloudflare" / "workerd-linux-64" / "bin" / "workerd"
SOURCES = REPO / "worker" / "src"
# The compatibility date `zodex sprite proxy deploy` writes (crates/zodex-operator/src/worker/mod.rs).
COMPATIBILITY_DATE = "2026-11-01"
BUILD_HEADER = "x-zodex-worker-build"


@dataclass
class Worker:
    proc: subprocess.Popen
    addr: str
    log: Path
    build: str

    @property
    def base(self) -> str:
        return f"http://{self.addr}"

    def url(self, key: str, path: str = "/mcp") -> str:
        return f"{self.base}{path}?key={key}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        terminate(self.proc, 10)


def capnp_string(text: str) -> str:
    return json.dumps(text)


def start_worker(tmp: Path, origin: str, sprite: str = "test-sprite", build: str = "test-build",
                 version: str = "0.0.0-test", sources: Path = SOURCES, port: int | None = None,
                 compatibility_date: str = COMPATIBILITY_DATE, detach: bool = False) -> Worker:
    """workerd serving the modules of `sources` (default worker/src/) on a loopback port (default
    a free one), in front of `origin`. With `detach`, it outlives the caller (fake_wrangler.py)."""
    if not WORKERD.exists():
        raise Missing(f"workerd is not installed at {WORKERD} (run scripts/install-worker-peers)")
    port = port or free_port()
    conf_dir = tmp / f"workerd-{port}"
    conf_dir.mkdir(parents=True)
    modules = ",\n".join(
        f'    (name = {capnp_string(p.name)}, esModule = embed {capnp_string(os.path.relpath(p, conf_dir))})'
        # The first module is the Worker's entry.
        for p in sorted(sources.glob("*.js"), key=lambda p: (p.name != "index.js", p.name))
    )
    bindings = ",\n".join(
        f"    (name = {capnp_string(k)}, text = {capnp_string(v)})"
        for k, v in [("SPRITE_ORIGIN", origin), ("SPRITE_NAME", sprite), ("ZODEX_BUILD", build), ("ZODEX_VERSION", version)]
    )
    conf = conf_dir / "config.capnp"
    conf.write_text(
        'using Workerd = import "/workerd/workerd.capnp";\n'
        "const config :Workerd.Config = (\n"
        "  services = [\n"
        "    (name = \"main\", worker = .worker),\n"
        "    (name = \"loopback\", network = (allow = [\"local\"])),\n"
        "  ],\n"
        f"  sockets = [ (name = \"http\", address = \"127.0.0.1:{port}\", http = (), service = \"main\") ],\n"
        ");\n"
        "const worker :Workerd.Worker = (\n"
        f"  modules = [\n{modules}\n  ],\n"
        f"  compatibilityDate = \"{compatibility_date}\",\n"
        f"  bindings = [\n{bindings}\n  ],\n"
        "  globalOutbound = \"loopback\",\n"
        ");\n"
    )
    log = conf_dir / "workerd.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(WORKERD), "serve", str(conf), "--verbose"],
            cwd=conf_dir, env={**os.environ, "PWD": str(conf_dir)}, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            start_new_session=detach,
        )
    addr = f"127.0.0.1:{port}"
    wait_listening(addr, proc, log)
    return Worker(proc, addr, log, build)


# --- a fake sprite --------------------------------------------------------------------------

@dataclass
class FakeSprite:
    """A scripted origin. `health` is a list of statuses `/health` answers in turn (then 200);
    `mcp` says what `/mcp` does: "json" (answers a JSON-RPC result), "cut" (closes the
    connection after reading the request), a status code (answers it with an HTML page), or
    "sse" (sends one event, then holds the stream until `release` is set)."""

    server: http.server.ThreadingHTTPServer
    thread: threading.Thread
    health: list = field(default_factory=list)
    mcp: object = "json"
    requests: list = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def addr(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    @property
    def origin(self) -> str:
        return f"http://{self.addr}"

    def hits(self, path: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r["path"] == path)

    def reset(self, health=None, mcp="json") -> None:
        with self.lock:
            self.requests.clear()
            self.health = list(health or [])
            self.mcp = mcp
            self.release = threading.Event()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def start_fake_sprite() -> FakeSprite:
    holder: dict = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def record(self) -> bytes:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            fake: FakeSprite = holder["fake"]
            with fake.lock:
                fake.requests.append({
                    "method": self.command, "path": self.path.split("?")[0], "target": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()}, "body_len": len(body),
                })
            return body

        def send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.record()
            fake: FakeSprite = holder["fake"]
            if self.path.split("?")[0] == "/health":
                with fake.lock:
                    status = fake.health.pop(0) if fake.health else 200
                if status == 200:
                    self.send(200, b'{"status":"ok","server":"fake"}')
                else:
                    self.send(status, b"<html>cold</html>", "text/html")
                return
            self.send(404, b'{"error":"not here"}')

        def do_POST(self):
            body = self.record()
            fake: FakeSprite = holder["fake"]
            mode = fake.mcp
            if mode == "cut":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if isinstance(mode, int):
                self.send(mode, b"<html>Bad Gateway</html>", "text/html")
                return
            if mode == "sse":
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                self.close_connection = True
                self.wfile.write(b'id: 1\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"first":true}}\n\n')
                self.wfile.flush()
                fake.release.wait(30)
                self.wfile.write(b'id: 2\ndata: {"jsonrpc":"2.0","id":1,"result":{"last":true}}\n\n')
                self.wfile.flush()
                return
            try:
                id_ = json.loads(body).get("id")
            except ValueError:
                id_ = None
            self.send(200, json.dumps({"jsonrpc": "2.0", "id": id_, "result": {"echo": len(body)}}).encode())

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    fake = FakeSprite(server=server, thread=thread)
    holder["fake"] = fake
    thread.start()
    return fake


def wait_until(predicate, timeout: float = 20, what: str = "condition") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
