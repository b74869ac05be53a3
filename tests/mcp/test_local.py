"""Local mode end to end: `zodex local start|status|stop|history` with a real client, a fresh
key per start, the TTL, stdio, and usage errors."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from conftest import ZODEX, base_env, http_post, run


class Local:
    def __init__(self, tmp: Path):
        self.home = tmp / "home"
        self.home.mkdir()
        self.project = tmp / "project"
        self.project.mkdir()
        self.env = base_env(self.home)
        self.state = self.home / ".zodex" / "local"

    def zodex(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(ZODEX), "local", *args], env=self.env, capture_output=True, text=True, timeout=120, cwd=self.project
        )
        if check:
            assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
        return result

    def json(self, *args: str):
        # The one `--json` envelope (docs/json.md): the answer is its `result`.
        out = json.loads(self.zodex(*args, "--json").stdout)
        assert out["version"] == 1 and out["ok"] is True, out
        return out["result"]


@pytest.fixture
def local(tmp_path):
    lm = Local(tmp_path)
    yield lm
    lm.zodex("stop", check=False)


def test_start_status_call_history_stop(local):
    started = local.json("start", str(local.project), "--listen", "127.0.0.1:0", "--ttl", "1h")
    url = started["url"]
    assert url.startswith("http://127.0.0.1:") and "/mcp?key=" in url
    key = url.split("key=", 1)[1]
    assert len(key) >= 22
    assert started["path"] == str(local.project.resolve())
    assert 3500 <= started["seconds_left"] <= 3600

    url_file = local.state / "url"
    assert url_file.read_text().strip() == url
    assert stat.S_IMODE(url_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(local.state.stat().st_mode) == 0o700

    status = local.json("status")
    assert status["running"] is True and status["url"] == url and status["pid"] == started["pid"]
    human = local.zodex("status").stdout
    assert "running" in human and url in human and "left" in human

    again = local.zodex("start", str(local.project), "--listen", "127.0.0.1:0", check=False)
    assert again.returncode == 1 and "already running" in again.stderr

    async def body():
        async with Client(url) as client:
            assert str(local.project.resolve()) in client.instructions
            r = await client.call_tool("exec_command", {"cmd": "echo from-local", "workdir": str(local.project)})
            assert r.structured_content["output"].strip() == "from-local"
            await client.call_tool("exec_command", {"cmd": "true", "workdir": "nope"})

    run(body)
    time.sleep(0.3)  # history rows are written by a background thread

    history = local.json("history")
    calls = [(h["tool"], h["summary"], h["outcome"]) for h in history]
    assert ("exec_command", "echo from-local", "exit 0") in calls
    assert any(h["is_error"] and h["workdir"] == "nope" for h in history)
    assert all(h["conversation"] for h in history)
    assert local.json("history", "--since", "1h") == history
    assert "echo from-local" in local.zodex("history").stdout

    log = (local.state / "server.log").read_text()
    assert key not in log

    stopped = local.json("stop")
    assert stopped["pid"] == started["pid"]
    assert local.json("status") == {"running": False}
    assert not url_file.exists()
    assert "not running" in local.zodex("stop").stdout
    # History outlives the server.
    assert len(local.json("history")) == len(history)


def test_each_start_has_a_fresh_key(local):
    first = local.json("start", "--listen", "127.0.0.1:0")["url"]
    local.zodex("stop")
    second = local.json("start", "--listen", "127.0.0.1:0")["url"]
    assert first.split("key=")[1] != second.split("key=")[1]
    base = second.split("?")[0]
    old_key_url = f"{base}?key={first.split('key=')[1]}"
    status, _, _ = http_post(old_key_url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert status == 401
    status, _, _ = http_post(second, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert status == 200


def test_ttl_stops_the_server(local):
    started = local.json("start", "--listen", "127.0.0.1:0", "--ttl", "2s")
    assert started["seconds_left"] <= 2
    deadline = time.time() + 20
    while time.time() < deadline and local.json("status")["running"]:
        time.sleep(0.2)
    assert local.json("status") == {"running": False}
    assert "TTL expired" in (local.state / "server.log").read_text()


def test_local_stdio(local):
    params = StdioServerParameters(
        command=str(ZODEX), args=["local", "start", str(local.project), "--stdio"], env=local.env, cwd=str(local.project)
    )

    async def body():
        async with Client(params) as client:
            assert str(local.project.resolve()) in client.instructions
            r = await client.call_tool("exec_command", {"cmd": "echo $HOME", "workdir": str(local.project)})
            assert r.structured_content["output"].strip() == str(local.home)

    run(body)
    assert local.json("status") == {"running": False}


def test_usage_errors_exit_2(local):
    bad_ttl = local.zodex("start", "--ttl", "soon", check=False)
    assert bad_ttl.returncode == 2 and "30s" in bad_ttl.stderr
    missing = local.zodex("start", str(local.project / "missing"), check=False)
    assert missing.returncode == 2
    bad_since = local.zodex("history", "--since", "-1h", check=False)
    assert bad_since.returncode == 2
    assert local.zodex("frobnicate", check=False).returncode == 2
    assert local.json("status") == {"running": False}
