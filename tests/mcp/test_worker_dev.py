"""`zodex sprite proxy dev`: the embedded Worker on the real Workers runtime (workerd from
scripts/install-worker-peers) in front of a sprite, as an operator without a Cloudflare account
runs it — the real `zodex` binary, a real `zodex-agent serve`, and an HTTPS origin whose
certificate a private CA signed (test_oauth.make_tls, openssl).

Proves: it serves the MCP contract and checks it once it listens (the key from `connect`), a real
MCP client runs a command through it, Ctrl-C ends it and frees the port, nothing is recorded in
the registry; the private CA is trusted when named by --ca-file or NODE_EXTRA_CA_CERTS and only
then; it says what is missing (workerd, the origin, a usable CA file) before starting anything.
"""

from __future__ import annotations

import http.server
import json
import signal
import ssl
import subprocess
import threading
import urllib.request
from pathlib import Path

import worker as w
from conftest import ZODEX, run, start_server
from proxies import free_port
from test_oauth import make_tls
from test_worker_cli import Operator, listening, op  # noqa: F401 - `op` is a fixture here too


class Dev:
    """A running `zodex sprite proxy dev`."""

    def __init__(self, op: Operator, *args: str, env: dict | None = None):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [str(ZODEX), "sprite", "proxy", "dev", "--sprite", "s1", "--listen", f"127.0.0.1:{self.port}",
             "--workerd", str(w.WORKERD), *args],
            env=env or op.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # Ctrl-C as a terminal sends it, even when this suite runs as a background job
            # (which starts with SIGINT ignored, and a child inherits that).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        # The MCP URL on stdout is the sign it listens and was checked.
        self.url = self.proc.stdout.readline().strip()
        self.base = f"http://127.0.0.1:{self.port}"

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=20)
        return err


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_dev_serves_and_checks_the_contract_then_ends_on_ctrl_c_leaving_nothing_recorded(op, tmp_path):
    from mcp import Client

    sprite = start_server(tmp_path / "sprite")
    try:
        url_file = op.zodex_home / "sprites" / "s1" / "mcp-url"
        url_file.parent.mkdir(parents=True, exist_ok=True)
        url_file.write_text(f"{sprite.base}/mcp?key={sprite.key}\n")
        before = (op.zodex_home / "sprites.toml").read_text()
        dev = Dev(op, "--origin", sprite.base)
        try:
            assert dev.url == f"{dev.base}/mcp", dev.url
            ledger = tmp_path / "ran"

            async def body():
                async with Client(f"{dev.url}?key={sprite.key}") as client:
                    result = await client.call_tool("exec_command", {"cmd": f"echo via-dev >> {ledger}; echo done",
                                                                     "workdir": str(tmp_path)})
                    assert not result.is_error and "done" in result.structured_content["output"]

            run(body)
            assert ledger.read_text() == "via-dev\n"
            status, served = get(f"{dev.base}/status")
            assert status == 200 and served["sprite"] == "s1" and served["origin"] == sprite.base, served
        finally:
            err = dev.stop()
        for line in ["ok   status:", "ok   health:", "ok   tools:", "ok   wrong key: a wrong key is refused with 401"]:
            assert line in err, err
        assert sprite.key not in err
        assert not listening(dev.port), "Ctrl-C ended workerd"
        assert dev.proc.returncode in (0, -signal.SIGINT, 130), dev.proc.returncode
        assert (op.zodex_home / "sprites.toml").read_text() == before, "nothing recorded"
        config = op.zodex_home / "sprites" / "s1" / "worker" / "dev"
        assert (config / "config.capnp").exists() and oct(config.stat().st_mode & 0o777) == "0o700"
    finally:
        sprite.stop()


def https_origin(cert: Path, key: Path) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = b'{"status":"ok","server":"tls-origin"}'
            self.send_response(200 if self.path == "/health" else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_an_origin_with_a_private_ca_is_reached_only_when_the_ca_is_named(op, tmp_path):
    ca, cert, key = make_tls(tmp_path)
    server = https_origin(cert, key)
    origin = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        for how in ("--ca-file", "NODE_EXTRA_CA_CERTS"):
            args = ["--origin", origin] + (["--ca-file", str(ca)] if how == "--ca-file" else [])
            env = dict(op.env(), **({"NODE_EXTRA_CA_CERTS": str(ca)} if how != "--ca-file" else {}))
            dev = Dev(op, *args, env=env)
            try:
                status, answer = get(f"{dev.base}/health")
                assert status == 200 and answer.get("server") == "tls-origin", (how, status, answer)
            finally:
                err = dev.stop()
            assert f"trusting the CA in {ca}" in err, err
        # Not named: the origin's certificate is refused, so the Worker reaches nothing.
        dev = Dev(op, "--origin", origin)
        try:
            status, answer = get(f"{dev.base}/health")
            assert status == 502 and "did not answer GET /health" in answer["error"], (status, answer)
        finally:
            dev.stop()
    finally:
        server.shutdown()


def test_dev_says_what_is_missing_before_starting_anything(op, tmp_path):
    def dev(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return op.zodex("sprite", "proxy", "dev", "--listen", f"127.0.0.1:{free_port()}", *args, env=env)

    r = dev("--origin", "http://127.0.0.1:9")
    assert r.returncode == 1 and "workerd (the Workers runtime) is not installed: `npm install -g workerd`" in r.stderr, r.stderr
    r = dev("--workerd", str(w.WORKERD))
    assert r.returncode == 1 and "--origin URL" in r.stderr, r.stderr
    r = dev("--workerd", str(w.WORKERD), "--origin", "http://sprite.example.com")
    assert r.returncode == 1 and "invalid --origin" in r.stderr, r.stderr
    bad = tmp_path / "bad.pem"
    bad.write_text("nothing here\n")
    r = dev("--workerd", str(w.WORKERD), "--origin", "http://127.0.0.1:9", "--ca-file", str(bad))
    assert r.returncode == 1 and "holds no PEM certificate" in r.stderr, r.stderr
    r = dev("--workerd", str(w.WORKERD), "--origin", "http://127.0.0.1:9",
            env=dict(op.env(), NODE_EXTRA_CA_CERTS=str(tmp_path / "absent.pem")))
    assert r.returncode == 1 and "NODE_EXTRA_CA_CERTS" in r.stderr, r.stderr
    r = dev("--workerd", str(w.WORKERD), "--origin", "http://127.0.0.1:9", "--oauth-rate-limits", "token=0")
    assert r.returncode == 1 and "invalid --oauth-rate-limits" in r.stderr, r.stderr
    assert not (op.zodex_home / "sprites" / "s1" / "worker" / "dev").exists(), "nothing written"
