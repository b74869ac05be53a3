"""The public OAuth door against anonymous floods (issue 37), on a real `zodex dev up` sprite:
while strangers flood consent pages, registrations, pages naming the operator's own client and
metadata documents on a host that never answers, the operator still connects a new client and
an already connected client still refreshes; state.db does not grow. Floods are bounded in count
and time, loopback only. Set ZODEX_DOOR_REPORT=FILE to keep the figures as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from test_oauth import REDIRECT, Sprite, form, pkce, request


@pytest.fixture
def door(tmp_path):
    s = Sprite(tmp_path / "home")
    text = s.config_path().read_text()
    s.config_path().write_text(text.replace("[mcp]\n", '[mcp]\noauth_cimd_private_hosts = ["localhost"]\n', 1))
    s.down()
    s.up()
    yield s
    s.down()
    shutil.rmtree(s.dir, ignore_errors=True)


class Tarpit:
    """Accepts connections and never says a word."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.open:
            try:
                conn, _ = self.sock.accept()
                self.held.append(conn)
            except OSError:
                return

    def close(self):
        self.open = False
        self.sock.close()
        for c in self.held:
            c.close()


def flood(count: int, one) -> tuple[threading.Thread, dict]:
    """Sends `count` anonymous requests (`one(i)`) from 8 threads, in the background."""
    stats = {"sent": 0, "statuses": {}}
    lock = threading.Lock()

    def run(i):
        try:
            status = one(i)
        except Exception as e:  # a refused connection is a status too
            status = type(e).__name__
        with lock:
            stats["sent"] += 1
            stats["statuses"][str(status)] = stats["statuses"].get(str(status), 0) + 1

    def all_of_them():
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(run, range(count)))

    t = threading.Thread(target=all_of_them)
    t.start()
    return t, stats


def state_bytes(sprite: Sprite) -> int:
    files = [p for p in sprite.dir.rglob("state.db*") if p.name in ("state.db", "state.db-wal")]
    assert files, f"no state.db under {sprite.dir}"
    return sum(p.stat().st_size for p in files)


def test_anonymous_floods_never_stop_the_operator_nor_a_connected_client(door):
    s = door
    token_url = f"{s.base}/oauth/token"
    connected = s.register("already connected")
    refresh = {"token": s.tokens(connected)["refresh_token"]}

    def refreshed() -> float:
        started = time.monotonic()
        status, body = form(token_url, {"grant_type": "refresh_token", "refresh_token": refresh["token"], "client_id": connected})
        assert status == 200, body
        refresh["token"] = body["refresh_token"]
        return time.monotonic() - started

    def operator_connects(name: str) -> float:
        started = time.monotonic()
        client = s.register(name)
        s.tokens(client)
        return time.monotonic() - started

    def register(i):
        return request("POST", f"{s.base}/oauth/register",
                       json.dumps({"redirect_uris": [REDIRECT], "client_name": f"ChatGPT {i}", "token_endpoint_auth_method": "none"}).encode(),
                       {"Content-Type": "application/json"})[0]

    def consent_for(client_id: str, state: str = "x") -> int:
        _, challenge = pkce()
        query = urllib.parse.urlencode({"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
                                        "state": state, "code_challenge": challenge, "code_challenge_method": "S256"})
        return request("GET", f"{s.base}/oauth/authorize?{query}")[0]

    report = {}
    strangers = [s.register(f"stranger {i}") for i in range(50)]
    before = state_bytes(s)
    tarpit = Tarpit()
    attacks = {
        # 1. Consent flood: pages for strangers' clients, a 60 kB state on every tenth.
        "consent": (600, lambda i: consent_for(strangers[i % 50], "s" * 60_000 if i % 10 == 0 else "x")),
        # 3. Registration flood.
        "registration": (2000, register),
        # 4. Supersede: pages naming the operator's own (public) client id.
        "supersede": (400, lambda i: consent_for(connected)),
        # 2. Metadata documents on a host that accepts and never answers.
        "tarpit": (200, lambda i: consent_for(f"https://localhost:{tarpit.port}/client-{i}.json")),
    }
    try:
        # First the floods alone: what strangers cost the state, with nothing else writing.
        for name, (count, one) in attacks.items():
            thread, _ = flood(count, one)
            thread.join(timeout=180)
            assert not thread.is_alive(), f"the {name} flood did not end"
        after = state_bytes(s)
        anonymous = sum(count for count, _ in attacks.values())
        report["state_db"] = {"before": before, "after": after, "anonymous_requests": anonymous,
                              "growth_per_10000": round((after - before) * 10_000 / anonymous)}
        print(f"state.db: {report['state_db']}")
        assert after - before < 64 * 1024, report["state_db"]

        # Then each flood again, while the operator connects a new client and the connected
        # client refreshes.
        for name, (count, one) in attacks.items():
            if name == "supersede":
                # The operator's page waits while strangers open pages for the same client.
                _, challenge = pkce()
                query = urllib.parse.urlencode({"response_type": "code", "client_id": connected, "redirect_uri": REDIRECT,
                                                "state": "st", "code_challenge": challenge, "code_challenge_method": "S256"})
                status, _, page = request("GET", f"{s.base}/oauth/authorize?{query}")
                assert status == 200
            thread, stats = flood(count, one)
            took_refresh = refreshed()
            took_connect = operator_connects(f"operator during {name}")
            if name == "supersede":
                location = s.approve_page(page.decode())
                assert "code=" in location, location
            thread.join(timeout=180)
            assert not thread.is_alive(), f"the {name} flood did not end"
            assert "500" not in stats["statuses"], stats
            report[name] = {"requests": stats["sent"], "statuses": stats["statuses"],
                            "refresh_s": round(took_refresh, 3), "operator_connect_s": round(took_connect, 3)}
            print(f"{name}: {report[name]}")
    finally:
        tarpit.close()
    # Only the operator's own clients are listed: no stranger.
    clients = json.loads(s.mcp_cli("clients", "--json").stdout)["result"]["clients"]
    assert all(c["name"] == "already connected" or c["name"].startswith("operator during") for c in clients), clients
    if os.environ.get("ZODEX_DOOR_REPORT"):
        with open(os.environ["ZODEX_DOOR_REPORT"], "w") as f:
            json.dump(report, f, indent=2)
