"""The edge Worker (worker/) in the real Workers runtime (`workerd`), end to end.

In front of a real `zodex-agent serve`: the real Python MCP client lists the three tools and runs
commands through the Worker in both client modes (handshake with SSE answers, and the default
stateless mode); a wrong key is the sprite's 401; the sprite killed in the middle of a tool call
gives a 502 that says nothing was retried, and the command ran at most once (its marker file).

In front of a fake sprite (tests/mcp/worker.py), for what a real sprite does not do on demand:
`/health` retried through a cold start, a `tools/call` whose connection is cut or answered 502
reaching the sprite exactly once, an SSE answer passed on before it ends, the 4 MiB cap, the
headers the sprite gets, `/status`, 404s, and the key absent from every answer and log line.

In front of a fake OAuth sprite (below): the OAuth metadata and `/oauth/authorize` answered as
the sprite answers them (a 303 with its `Location`, not followed by the Worker), the 401's
`WWW-Authenticate` challenge passed through, a token request whose connection is cut reaching the
sprite exactly once, and no query, token or code in the Worker's log.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from mcp import Client

import worker as w
from conftest import http_get, http_post, jsonrpc_body, run, start_server

REQUIRE = os.environ.get("ZODEX_REQUIRE_PROXIES") == "1"
TOOLS = ["exec_command", "write_stdin", "apply_patch"]
MAX_BODY = 4 * 1024 * 1024
FAKE_KEY = "fake-key-0123456789-abcdefghijklmnop"


def started(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except w.Missing as e:
        if REQUIRE:
            pytest.fail(f"{e}; CI must install it")
        pytest.skip(str(e))


def tool_call(cmd: str, workdir: str, id: int = 2) -> dict:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "exec_command", "arguments": {"cmd": cmd, "workdir": workdir}}}


def assert_our_headers(headers: dict, build: str) -> None:
    lower = {k.lower(): v for k, v in headers.items()}
    assert lower.get("cache-control") == "no-store", headers
    assert lower.get(w.BUILD_HEADER) == build, headers


# --- in front of a real sprite --------------------------------------------------------------

@pytest.fixture(scope="module")
def sprite(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("sprite"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def edge(sprite, tmp_path_factory):
    worker = started(w.start_worker, tmp_path_factory.mktemp("edge"), sprite.base, build="real-build")
    yield worker
    worker.stop()
    assert sprite.key not in worker.log_text(), "the key appears in the Worker's log"


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
def test_a_real_client_lists_the_tools_and_runs_a_command_through_the_worker(sprite, edge, mode, path, tmp_path):
    ledger = tmp_path / "ran"

    async def body():
        async with Client(edge.url(sprite.key, path), mode=mode) as client:
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == TOOLS
            by_name = {t.name: t for t in listed}
            assert set(by_name["exec_command"].input_schema["required"]) == {"cmd", "workdir"}
            assert "default" not in by_name["exec_command"].input_schema["properties"]["workdir"]
            r = await client.call_tool("exec_command", {"cmd": f"echo through-the-edge >> {ledger}; echo ok-7", "workdir": str(tmp_path)})
            assert not r.is_error, r
            assert "ok-7" in r.structured_content["output"]

    run(body)
    assert ledger.read_text() == "through-the-edge\n", "the command ran exactly once"
    print(f"real MCP client ({mode}) through workerd at {path}: tools listed, command ran once")


def test_a_wrong_key_is_the_sprites_401_and_health_and_status_answer(sprite, edge):
    status, headers, body = http_post(edge.url("not-the-key"), {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert status == 401, body
    assert_our_headers(headers, "real-build")
    assert b"not-the-key" not in body
    # Whatever challenge the sprite's 401 carries (OAuth's `Bearer resource_metadata=...` when it
    # is configured), the Worker passes it on as it is.
    _, direct, _ = http_post(f"{sprite.base}/mcp?key=not-the-key", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    challenge = lambda h: {k.lower(): v for k, v in h.items()}.get("www-authenticate")  # noqa: E731
    assert challenge(headers) == challenge(direct), (headers, direct)
    status, headers, body = http_get(f"{edge.base}/health")
    assert status == 200 and json.loads(body)["status"] == "ok", body
    assert_our_headers(headers, "real-build")
    status, headers, body = http_get(f"{edge.base}/status")
    assert status == 200
    assert json.loads(body) == {"worker": "zodex", "build": "real-build", "version": "0.0.0-test",
                                "sprite": "test-sprite", "origin": sprite.base}


def test_the_sprite_killed_mid_call_gives_a_502_and_the_command_ran_at_most_once(tmp_path):
    srv = start_server(tmp_path / "sprite")
    edge = started(w.start_worker, tmp_path / "edge", srv.base)
    marker = tmp_path / "marker"
    try:
        out: dict = {}

        def call():
            out["answer"] = http_post(edge.url(srv.key), tool_call(f"echo started >> {marker}; sleep 20; echo finished >> {marker}", str(tmp_path), id=41))

        caller = threading.Thread(target=call)
        caller.start()
        w.wait_until(lambda: marker.exists() and "started" in marker.read_text(), what="the command to start")
        srv.proc.kill()  # the sprite goes away mid-call: its connection is cut
        srv.proc.wait()
        caller.join(60)
        assert not caller.is_alive(), "the Worker never answered"
        status, headers, body = out["answer"]
        assert status == 502, body
        answer = json.loads(body)
        assert answer["id"] == 41
        assert "not retried" in answer["error"]["message"], answer
        assert answer["error"]["data"]["retried"] is False
        assert srv.key not in body.decode()
        assert_our_headers(headers, "test-build")
        time.sleep(1)
        assert marker.read_text().count("started") == 1, marker.read_text()
        assert "finished" not in marker.read_text()
        print(f"sprite killed mid-call: 502 {answer['error']['message']!r}; marker: {marker.read_text()!r}")
    finally:
        edge.stop()
        srv.stop()
    assert srv.key not in edge.log_text()


# --- in front of a fake sprite --------------------------------------------------------------

@pytest.fixture(scope="module")
def fake():
    sprite = w.start_fake_sprite()
    yield sprite
    sprite.stop()


@pytest.fixture(scope="module")
def fake_edge(fake, tmp_path_factory):
    worker = started(w.start_worker, tmp_path_factory.mktemp("fake-edge"), fake.origin, build="fake-build")
    yield worker
    worker.stop()
    assert FAKE_KEY not in worker.log_text(), "the key appears in the Worker's log"


def test_health_is_retried_through_a_cold_start(fake, fake_edge):
    fake.reset(health=[502, 503])
    status, headers, body = http_get(f"{fake_edge.base}/health")
    assert status == 200, body
    assert json.loads(body)["server"] == "fake"
    assert fake.hits("/health") == 3
    assert_our_headers(headers, "fake-build")
    fake.reset(health=[429, 500, 502, 504, 200])
    status, _, body = http_get(f"{fake_edge.base}/health")
    assert status == 504, "after four attempts, the last answer"
    assert fake.hits("/health") == 4


@pytest.mark.parametrize("failure", ["cut", 502])
def test_a_failed_tools_call_reaches_the_sprite_exactly_once(fake, fake_edge, failure):
    fake.reset(mcp=failure)
    status, headers, body = http_post(fake_edge.url(FAKE_KEY), tool_call("touch /tmp/x", "/tmp", id=99))
    assert status == 502, body
    answer = json.loads(body)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == 99
    assert "not retried" in answer["error"]["message"]
    assert FAKE_KEY not in body.decode()
    assert_our_headers(headers, "fake-build")
    assert fake.hits("/mcp") == 1, f"the tools/call reached the sprite {fake.hits('/mcp')} times"


def test_the_worker_wakes_a_cold_sprite_before_forwarding(fake, tmp_path):
    # A Worker of its own: a fresh isolate does not yet know the sprite is awake.
    edge = started(w.start_worker, tmp_path, fake.origin)
    try:
        fake.reset(health=[503, 502])
        status, _, body = http_post(edge.url(FAKE_KEY, "/mcp/"), tool_call("true", "/tmp", id=5))
        assert status == 200, body
        assert json.loads(body)["id"] == 5
        paths = [r["path"] for r in fake.requests]
        assert paths == ["/health", "/health", "/health", "/mcp"], paths
    finally:
        edge.stop()


def test_the_sprite_gets_its_own_host_and_the_workers_name_as_forwarded_host(fake, fake_edge):
    fake.reset()
    status, _, _ = http_post(fake_edge.url(FAKE_KEY) + "&x=1", tool_call("true", "/tmp"), {"Host": "edge.example.com", "X-Forwarded-Host": "evil.example"})
    assert status == 200
    seen = [r for r in fake.requests if r["path"] == "/mcp"][-1]
    assert seen["headers"]["host"] == fake.addr, seen["headers"]
    assert seen["headers"]["x-forwarded-host"] == "edge.example.com"
    assert seen["headers"]["x-forwarded-proto"] == "http"
    assert seen["target"] == f"/mcp?key={FAKE_KEY}&x=1", "the key goes to the sprite, which checks it"


def test_a_streamed_answer_passes_through_before_it_ends(fake, fake_edge):
    fake.reset(mcp="sse")
    req = urllib.request.Request(fake_edge.url(FAKE_KEY), data=json.dumps(tool_call("true", "/tmp", id=1)).encode(),
                                 headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
                                 method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert_our_headers(dict(resp.headers), "fake-build")
        first = b""
        while b"\n\n" not in first:
            first += resp.read1(65536)
        assert b'"first":true' in first
        assert not fake.release.is_set(), "the sprite has not ended the stream yet"
        fake.release.set()
        rest = resp.read()
    assert b'"last":true' in first + rest


def test_bodies_over_4_mib_are_refused_and_not_forwarded(fake, fake_edge):
    fake.reset()
    head = '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"apply_patch","arguments":{"workdir":"/tmp","patch":"'
    over = head + "x" * (MAX_BODY - len(head)) + '"}}}'
    status, headers, body = http_post(fake_edge.url(FAKE_KEY), over)
    assert status == 200, body[:200]
    answer = json.loads(body)
    assert answer["id"] == 12 and answer["result"]["isError"] is True
    assert "4194304 bytes" in answer["result"]["content"][0]["text"]
    assert_our_headers(headers, "fake-build")
    assert fake.hits("/mcp") == 0
    exact = '{"jsonrpc":"2.0","id":13,"method":"x","params":{"p":"'
    exact += "y" * (MAX_BODY - len(exact) - 3) + '"}}'
    assert len(exact) == MAX_BODY
    status, _, body = http_post(fake_edge.url(FAKE_KEY), exact)
    assert status == 200 and json.loads(body)["result"]["echo"] == MAX_BODY
    assert fake.hits("/mcp") == 1


def test_status_404s_and_headers(fake, fake_edge):
    fake.reset()
    status, headers, body = http_get(f"{fake_edge.base}/status?key={FAKE_KEY}")
    assert status == 200
    assert json.loads(body) == {"worker": "zodex", "build": "fake-build", "version": "0.0.0-test",
                                "sprite": "test-sprite", "origin": fake.origin}
    assert_our_headers(headers, "fake-build")
    for path in ["/", "/index.html", "/mcpx", "/health/", "/status/x", "/.git/config"]:
        status, headers, body = http_get(f"{fake_edge.base}{path}?key={FAKE_KEY}")
        assert status == 404, path
        assert FAKE_KEY not in body.decode()
        assert_our_headers(headers, "fake-build")
    assert fake.requests == [], "neither /status nor a 404 reaches the sprite"


def test_the_key_is_in_no_log_line(fake, fake_edge):
    fake.reset(mcp="cut")
    http_post(fake_edge.url(FAKE_KEY), tool_call("true", "/tmp"), {"Authorization": f"Bearer {FAKE_KEY}"})
    fake.reset()
    http_post(fake_edge.url(FAKE_KEY), tool_call("true", "/tmp"))
    log = fake_edge.log_text()
    assert re.search(r"POST /mcp -> 502", log), log[-2000:]
    assert re.search(r"POST /mcp -> 200", log), log[-2000:]
    assert FAKE_KEY not in log


# --- in front of a fake OAuth sprite --------------------------------------------------------

OAUTH_STATE = "state-af0ifjsldkj-0123456789"
OAUTH_CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
OAUTH_CODE = "auth-code-SjK29dLq0wPz7vB3nM5x"
OAUTH_JWT = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJvcGVyYXRvciJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def raw(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """A request that does not follow redirects; (status, lower-cased headers, body)."""
    opener = urllib.request.build_opener(_NoRedirect)
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data is not None else "GET")
    try:
        with opener.open(req, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


@pytest.fixture(scope="module")
def oauth_sprite():
    """A sprite's OAuth side, scripted: metadata, a consent page that answers 303 to its own
    `/callback` (a Worker that followed it would hit `/callback`), a 401 with the challenge on
    `/mcp`, and a `/oauth/token` that cuts its connection after reading the request."""
    requests: list = []
    lock = threading.Lock()
    holder: dict = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def send(self, status: int, body: bytes, headers: dict) -> None:
            self.send_response(status)
            for k, v in {"content-length": str(len(body)), "cache-control": "no-store", **headers}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def handle_one(self):
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            path = self.path.split("?")[0]
            with lock:
                requests.append({"method": self.command, "path": path, "target": self.path, "body": body,
                                 "authorization": self.headers.get("authorization")})
            origin = holder["origin"]
            if path == "/health":
                self.send(200, b'{"status":"ok"}', {"content-type": "application/json"})
            elif path.startswith("/.well-known/oauth-protected-resource"):
                meta = {"resource": f"{origin}/mcp", "authorization_servers": [f"{origin}/oauth"]}
                self.send(200, json.dumps(meta).encode(), {"content-type": "application/json"})
            elif path == "/oauth/authorize":
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                location = f"{origin}/callback?code={OAUTH_CODE}&state={query['state'][0]}"
                self.send(303, b"", {"location": location})
            elif path == "/oauth/token":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif path == "/mcp":
                challenge = f'Bearer resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="the token expired"'
                self.send(401, b"", {"www-authenticate": challenge})
            else:
                self.send(200 if path == "/callback" else 404, b"{}", {"content-type": "application/json"})

        do_GET = handle_one
        do_POST = handle_one

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    holder["origin"] = f"http://{host}:{port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.requests = requests  # type: ignore[attr-defined]
    server.origin = holder["origin"]  # type: ignore[attr-defined]
    yield server
    server.shutdown()
    server.server_close()


def test_oauth_paths_pass_through_the_worker_unchanged_and_a_token_request_goes_once(oauth_sprite, tmp_path):
    edge = started(w.start_worker, tmp_path, oauth_sprite.origin, build="oauth-build")
    try:
        authorize = (f"/oauth/authorize?response_type=code&client_id=c1&state={OAUTH_STATE}"
                     f"&code_challenge={OAUTH_CHALLENGE}&code_challenge_method=S256"
                     f"&redirect_uri={urllib.parse.quote('http://localhost:1/cb', safe='')}")
        for path in ["/.well-known/oauth-protected-resource/mcp", authorize]:
            direct = raw(f"{oauth_sprite.origin}{path}")
            through = raw(f"{edge.base}{path}")
            assert through[0] == direct[0], (path, through)
            assert through[1].get("location") == direct[1].get("location"), (path, through[1])
            assert through[2] == direct[2], path
            assert_our_headers(through[1], "oauth-build")
        status, headers, _ = raw(f"{edge.base}{authorize}")
        assert status == 303 and headers["location"].startswith(f"{oauth_sprite.origin}/callback?code={OAUTH_CODE}&state={OAUTH_STATE}")
        assert not any(r["path"] == "/callback" for r in oauth_sprite.requests), "the Worker followed the 303"
        assert [r["target"] for r in oauth_sprite.requests if r["path"] == "/oauth/authorize"][-1] == authorize
        # The 401's challenge, as the sprite wrote it.
        _, direct, _ = raw(f"{oauth_sprite.origin}/mcp", b"{}", {"Content-Type": "application/json"})
        status, headers, _ = raw(f"{edge.base}/mcp", b"{}", {"Content-Type": "application/json", "Authorization": f"Bearer {OAUTH_JWT}"})
        assert status == 401
        assert headers["www-authenticate"] == direct["www-authenticate"]
        assert [r["authorization"] for r in oauth_sprite.requests if r["path"] == "/mcp"][-1] == f"Bearer {OAUTH_JWT}"
        # A token request whose connection is cut: a 502 OAuth error, sent once, never again.
        before = sum(1 for r in oauth_sprite.requests if r["path"] == "/oauth/token")
        form = urllib.parse.urlencode({"grant_type": "authorization_code", "code": OAUTH_CODE, "code_verifier": "v" * 43}).encode()
        status, headers, body = raw(f"{edge.base}/oauth/token", form, {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 502, body
        answer = json.loads(body)
        assert answer["error"] == "temporarily_unavailable" and answer["error_description"].endswith("nothing was retried"), answer
        assert_our_headers(headers, "oauth-build")
        time.sleep(0.5)
        assert sum(1 for r in oauth_sprite.requests if r["path"] == "/oauth/token") == before + 1
        # Over 64 KiB: a 413, and nothing reaches the sprite.
        count = len(oauth_sprite.requests)
        status, _, body = raw(f"{edge.base}/oauth/register", b"{" + b" " * (64 * 1024) + b"}", {"Content-Type": "application/json"})
        assert status == 413 and json.loads(body)["error"] == "invalid_request"
        assert len(oauth_sprite.requests) == count
        status, _, _ = raw(f"{edge.base}/.well-known/security.txt")
        assert status == 404
        assert len(oauth_sprite.requests) == count
    finally:
        edge.stop()
    log = edge.log_text()
    assert re.search(r"GET /oauth/authorize -> 303", log), log[-2000:]
    assert re.search(r"POST /oauth/token -> 502", log), log[-2000:]
    for secret in [OAUTH_STATE, OAUTH_CHALLENGE, OAUTH_CODE, OAUTH_JWT, "code_challenge"]:
        assert secret not in log, secret
