"""Every tool call returns exactly once, whatever is in front of the server: Debian's Caddy and
nginx configured as docs/deploy.md says, a plain TCP relay, a relay that cuts streamed answers
in the middle, and nothing at all. Each run makes many short `exec_command` calls with the real
Python client in handshake mode (SSE answers, the mode that lost results behind Caddy) and in
its default mode, and checks three things: every call got its own result, no command ran twice
(each appends its marker to a ledger), none never ran.

Also, at the HTTP level: a resume (`Last-Event-ID`) after a cut replays the missed answer from
the server's bounded store, a resume the server cannot serve is refused with an error a client
can act on (never `200` with an empty stream), and `DELETE` of a session answers `204`.

ZODEX_PROXY_CALLS sets the number of calls per proxy (default 1000). A proxy that is not
installed skips its test here; CI sets ZODEX_REQUIRE_PROXIES=1 so that it fails instead.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

import proxies
from conftest import http_post, jsonrpc_body, run, start_server
from proxy_calls import run_calls

CALLS = int(os.environ.get("ZODEX_PROXY_CALLS", "1000"))
REQUIRE = os.environ.get("ZODEX_REQUIRE_PROXIES") == "1"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("upstream"))
    yield srv
    srv.stop()


def start(kind: str, tmp, upstream_addr: str, cut_every: int = 0):
    try:
        if kind == "caddy":
            return proxies.start_caddy(tmp, upstream_addr)
        if kind == "nginx":
            return proxies.start_nginx(tmp, upstream_addr)
        if kind == "relay":
            return proxies.start_relay(tmp, upstream_addr, cut_every)
    except proxies.Missing as e:
        if REQUIRE:
            pytest.fail(f"{e}; CI must install it")
        pytest.skip(str(e))
    raise AssertionError(kind)


def through(kind: str, tmp, upstream, cut_every: int = 0):
    """The MCP URL through `kind` and the proxy (None for `direct`)."""
    if kind == "direct":
        return upstream.url, None
    proxy = start(kind, tmp, upstream.addr, cut_every)
    return proxy.url(upstream.key), proxy


def assert_all_returned(result: dict, where: str, proxy) -> None:
    detail = json.dumps(result, indent=1)
    if proxy is not None and not result["ok"]:
        detail += "\n--- proxy log (tail) ---\n" + proxy.log_text()[-4000:]
    assert result["ok"], f"{where}: {detail}"
    print(f"{where}: {result['returned']}/{result['calls']} returned, none twice, in {result['seconds']} s")


@pytest.mark.parametrize("kind", ["direct", "caddy", "nginx", "relay"])
def test_every_tool_call_returns_exactly_once(kind, upstream, tmp_path):
    url, proxy = through(kind, tmp_path, upstream)
    try:
        work = tmp_path / "work"
        work.mkdir()
        handshake = run(run_calls, url, str(work), CALLS, "legacy")
        assert_all_returned(handshake, f"{kind} (handshake, SSE)", proxy)
        default = run(run_calls, url, str(work), max(CALLS // 5, 20), "auto")
        assert_all_returned(default, f"{kind} (default mode)", proxy)
    finally:
        if proxy:
            proxy.stop()


def test_answers_cut_mid_stream_are_replayed_not_rerun(upstream, tmp_path):
    """A relay drops every 4th streamed answer right after its first event: the client resumes
    with Last-Event-ID and the server replays the stored result; no command runs twice."""
    calls = max(CALLS // 4, 40)
    url, relay = through("relay", tmp_path, upstream, cut_every=4)
    try:
        work = tmp_path / "work"
        work.mkdir()
        result = run(run_calls, url, str(work), calls, "legacy")
        assert_all_returned(result, "relay cutting every 4th stream", relay)
        cut = proxies.cuts(relay)
        # Every call's answer is a stream (plus the initialize of each client): about calls/4.
        assert cut >= calls // 5, f"the relay cut only {cut} streams of {calls} calls"
        print(f"relay: {cut} streams cut mid-answer, all resumed")
    finally:
        relay.stop()


# --- the resume at the HTTP level -----------------------------------------------------------

def initialize() -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }


def tool_call(cmd: str, workdir: str, id: int = 2) -> dict:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "exec_command", "arguments": {"cmd": cmd, "workdir": workdir}}}


def sse_events(body: bytes) -> list[dict]:
    events, current = [], {}
    for line in body.decode().split("\n"):
        if not line:
            if current:
                events.append(current)
            current = {}
            continue
        field, _, value = line.partition(":")
        current[field] = current.get(field, "") + value.lstrip(" ")
    return events


def get(url: str, headers: dict) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers={"Accept": "text/event-stream", **headers}, method="GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def session_of(server) -> dict:
    _, headers, _ = http_post(server.url, initialize())
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    return {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}


def test_a_resume_replays_the_answer_it_missed(upstream, tmp_path):
    session = session_of(upstream)
    ledger = tmp_path / "ran"
    status, headers, body = http_post(upstream.url, tool_call(f"echo once >> {ledger}; echo result-7", str(tmp_path)), session)
    assert status == 200
    events = sse_events(body)
    first_id = events[0]["id"]  # the priming event: what a client cut right after it holds
    assert any("result-7" in e.get("data", "") for e in events)
    # Cut after the priming event: the resume gets the result, with its original id.
    status, headers, body = get(upstream.url, {**session, "Last-Event-ID": first_id})
    assert status == 200, body
    replayed = sse_events(body)
    assert [e["id"] for e in replayed] == [e["id"] for e in events[1:]]
    assert "result-7" in replayed[-1]["data"]
    assert ledger.read_text() == "once\n", "a replay must not run the command again"


def test_a_resume_that_cannot_be_served_is_refused_not_empty(upstream):
    session = session_of(upstream)
    for last in ["0/1", "0123456789abcdef0123456789abcdef.0", "not-an-id"]:
        status, headers, body = get(upstream.url, {**session, "Last-Event-ID": last})
        assert status == 404, (last, status, body)
        message = json.loads(body)["error"]["message"]
        assert "Last-Event-ID" in message or "replayed" in message, message
    # An ended session's stream is refused the same way.
    status, _, body = get(upstream.url, {"Mcp-Session-Id": "gone", "MCP-Protocol-Version": "2025-11-25",
                                         "Last-Event-ID": "0123456789abcdef0123456789abcdef.0"})
    assert status == 404, body
    assert "session" in json.loads(body)["error"]["message"]


def test_delete_ends_the_session_with_204(upstream):
    session = session_of(upstream)
    req = urllib.request.Request(upstream.url, headers=session, method="DELETE")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 204
    # The session is gone: a second DELETE is 404, as the transport specifies.
    try:
        urllib.request.urlopen(urllib.request.Request(upstream.url, headers=session, method="DELETE"), timeout=30)
        raise AssertionError("a second DELETE of the same session succeeded")
    except urllib.error.HTTPError as e:
        assert e.code == 404
    # And so is any other request naming it: the client must start a new session, not go on
    # statelessly under an id it ended itself.
    status, _, body = http_post(upstream.url, {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}, session)
    assert status == 404, body
    assert "ended" in json.loads(body)["error"]["message"], body
    # An id this server never issued (one from before a restart) is still served.
    status, _, _ = http_post(upstream.url, {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}},
                             {"Mcp-Session-Id": "from-before-a-restart", "MCP-Protocol-Version": "2025-11-25"})
    assert status == 200
