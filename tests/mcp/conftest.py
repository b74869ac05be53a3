"""Fixtures for driving real Zodex binaries with real MCP clients (the Python `mcp` package).

The binaries are built by cargo before pytest runs (`scripts/mcp-peers` does it); point
ZODEX_BIN_DIR elsewhere to test other builds. Every server runs with HOME set to a fresh
temporary directory, so the test machine's dotfiles (and its slow login shell) stay out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("ZODEX_BIN_DIR", REPO / "target" / "debug"))
AGENT = BIN_DIR / "zodex-agent"
ZODEX = BIN_DIR / "zodex"


def run(fn, *args):
    """Runs an async test body."""
    return anyio.run(fn, *args)


def base_env(home: Path) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "ZODEX_HOME": str(home / ".zodex"),
    }
    if "RUST_LOG" in os.environ:
        env["RUST_LOG"] = os.environ["RUST_LOG"]
    return env


@dataclass
class Server:
    """A running `zodex-agent serve`."""

    proc: subprocess.Popen
    home: Path
    cwd: Path
    log: Path
    key: str
    addr: str
    extra: dict = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://{self.addr}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp?key={self.key}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        terminate(self.proc, 15)


def terminate(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM, then SIGKILL if `proc` is still there after `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_log(log: Path, pattern: str, proc: subprocess.Popen, timeout: float = 30) -> re.Match:
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        m = re.search(pattern, text)
        if m:
            return m
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}):\n{text}")
        time.sleep(0.02)
    raise RuntimeError(f"server did not log {pattern!r} in {timeout}s:\n{text}")


def start_server(tmp: Path, *extra_args: str, env_extra: dict | None = None) -> Server:
    assert AGENT.exists(), f"{AGENT} missing: run `cargo build` first"
    home = tmp / "home"
    cwd = tmp / "server-cwd"
    home.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(32)
    hash_file = tmp / "key.sha256"
    hash_file.write_text(hashlib.sha256(key.encode()).hexdigest() + "\n")
    log = tmp / "server.log"
    env = base_env(home)
    env.update(env_extra or {})
    with open(log, "wb") as log_fd:
        proc = subprocess.Popen(
            [str(AGENT), "serve", "--listen", "127.0.0.1:0", "--key-hash-file", str(hash_file), *extra_args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
        )
    m = wait_for_log(log, r"addr=(127\.0\.0\.1:\d+)", proc)
    return Server(proc=proc, home=home, cwd=cwd, log=log, key=key, addr=m.group(1))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("srv"))
    yield srv
    srv.stop()


@pytest.fixture
def fresh_server(tmp_path):
    srv = start_server(tmp_path)
    yield srv
    srv.stop()


@pytest.fixture(params=["auto", "legacy"])
def mode(request):
    """Both client modes: the default stateless probe (`server/discover`) and the handshake."""
    return request.param


def http_post(url: str, body: dict | str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """A raw POST; returns (status, headers, body) whatever the status."""
    data = body if isinstance(body, str) else json.dumps(body)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    req = urllib.request.Request(url, data=data.encode(), headers=h, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def jsonrpc_body(headers: dict, body: bytes) -> dict:
    """The JSON-RPC message of a response, whether sent as JSON or as an SSE stream."""
    content_type = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    if "text/event-stream" in content_type:
        for line in body.decode().splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        raise AssertionError(f"no data in SSE body {body!r}")
    return json.loads(body)


def http_get(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()
