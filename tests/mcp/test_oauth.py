"""OAuth for the MCP endpoint, end to end on a `zodex dev up` sprite, with a client nobody here
wrote: the Python `mcp` SDK's own `OAuthClientProvider` discovers the metadata from the 401,
registers (dynamically, or by a client ID metadata document served over real TLS), sends the
consent page's code to the operator, gets tokens with PKCE and runs a tool. Then the attacks:
each is refused, and none reaches a tool (a marker file the attack's command would write never
appears).

The operator's side is the real CLI: `zodex sprite mcp approve|deny|clients|revoke|key`.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import re
import secrets
import shutil
import sqlite3
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import BIN_DIR, ZODEX, base_env, http_post, jsonrpc_body, run

REDIRECT = "http://127.0.0.1:1/callback"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: D102 - keep 3xx answers as they are
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def open_page(url: str) -> tuple[int, dict, bytes]:
    """GET a consent page as a browser does: while the server is still reading the client's
    metadata document it answers a page that reloads itself; follow it, as a browser would."""
    for _ in range(30):
        status, headers, body = request("GET", url)
        if b'http-equiv="refresh"' not in body:
            return status, headers, body
        time.sleep(int(headers.get("retry-after", "1")))
    return status, headers, body


def request(method: str, url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with OPENER.open(req, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def form(url: str, fields: dict, headers: dict | None = None) -> tuple[int, dict]:
    h = {"Content-Type": "application/x-www-form-urlencoded"}
    h.update(headers or {})
    status, _, body = request("POST", url, urllib.parse.urlencode(fields).encode(), h)
    return status, json.loads(body or b"{}")


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class Sprite:
    """A `zodex dev up` sprite and its operator's CLI."""

    def __init__(self, home: Path, extra_env: dict | None = None, store: str = "sqlite"):
        self.home = home
        # Short: the sockets' paths must fit in sun_path.
        self.dir = Path(tempfile.mkdtemp(prefix="zoa-", dir="/tmp"))
        # On PostgreSQL the private server keeps its cluster in the directory; as root it runs
        # as `postgres`, which must be able to reach it.
        self.dir.chmod(0o711)
        self.store = store
        self.env = dict(base_env(home), PATH=f"{BIN_DIR}:/usr/bin:/bin", **(extra_env or {}))
        self.up()

    def up(self) -> None:
        flags = ["--postgres"] if self.store == "postgres" else []
        r = self.zodex("dev", "up", "--dir", str(self.dir), "--json", *flags)
        assert r.returncode == 0, r.stdout + r.stderr
        url = json.loads(r.stdout)["result"]["mcp_url"]
        self.key_url = url
        self.base = url.split("/mcp")[0]
        self.mcp = f"{self.base}/mcp"

    def down(self) -> None:
        self.zodex("dev", "down", "--dir", str(self.dir))

    def zodex(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(ZODEX), *args], env=self.env, capture_output=True, text=True, timeout=120)

    def mcp_cli(self, *args: str) -> subprocess.CompletedProcess:
        return self.zodex("sprite", "mcp", *args, "--sprite", "dev")

    def config_path(self) -> Path:
        return self.dir / "zodex.toml"

    def log(self) -> str:
        return (self.dir / "logs" / "zodex-prd.log").read_text(errors="replace")

    # --- the consent dance, as a browser and the operator do it ---------------------------

    def consent_page(self, client_id: str, challenge: str, redirect: str = REDIRECT, state: str = "st") -> tuple[int, dict, str]:
        query = urllib.parse.urlencode(
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": redirect,
                "state": state,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": self.mcp,
            }
        )
        status, headers, body = open_page(f"{self.base}/oauth/authorize?{query}")
        return status, headers, body.decode(errors="replace")

    def poll(self, secret: str) -> dict:
        _, body = form(f"{self.base}/oauth/authorize/status", {"request": secret})
        return body

    def approve_page(self, html: str, approve: bool = True) -> str:
        """Reads the code and the page's secret, has the operator approve (or deny), and
        returns where the page would go."""
        code = re.search(r'id="user-code">([A-Z2-9]{4}-[A-Z2-9]{4})<', html).group(1)
        secret = re.search(r'data-request="([^"]+)"', html).group(1)
        assert self.poll(secret)["state"] == "waiting"
        r = self.mcp_cli("approve" if approve else "deny", code)
        assert r.returncode == 0, r.stdout + r.stderr
        answer = self.poll(secret)
        assert "location" in answer, answer
        return answer["location"]

    def register(self, name: str = "attack-suite client", redirect: str = REDIRECT) -> str:
        status, _, body = request(
            "POST",
            f"{self.base}/oauth/register",
            json.dumps({"redirect_uris": [redirect], "client_name": name, "token_endpoint_auth_method": "none"}).encode(),
            {"Content-Type": "application/json"},
        )
        assert status == 201, body
        return json.loads(body)["client_id"]

    def approved_code(self, client_id: str) -> tuple[str, str]:
        verifier, challenge = pkce()
        status, _, html = self.consent_page(client_id, challenge)
        assert status == 200, html
        location = self.approve_page(html)
        params = urllib.parse.parse_qs(urllib.parse.urlparse(location).query)
        assert params["iss"] == [f"{self.base}/oauth"] and params["state"] == ["st"]
        return params["code"][0], verifier

    def exchange(self, client_id: str, code: str, verifier: str | None) -> tuple[int, dict]:
        fields = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
        if verifier is not None:
            fields["code_verifier"] = verifier
        return form(f"{self.base}/oauth/token", fields)

    def tokens(self, client_id: str) -> dict:
        code, verifier = self.approved_code(client_id)
        status, body = self.exchange(client_id, code, verifier)
        assert status == 200, body
        return body


def run_tool(url: str, cmd: str, token: str | None = None) -> int:
    """A stateless tools/call of exec_command; returns the HTTP status."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, h, body = http_post(
        url,
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "exec_command", "arguments": {"cmd": cmd, "workdir": "/"}}},
        headers,
    )
    if status == 200:
        assert jsonrpc_body(h, body)["result"]["isError"] is False, body
    return status


@pytest.fixture
def sprite(tmp_path, request):
    """A `zodex dev up` sprite; parametrised indirectly with "postgres" it keeps its state in a
    private PostgreSQL server (`--postgres`) instead of SQLite."""
    s = Sprite(tmp_path / "home", store=getattr(request, "param", "sqlite"))
    yield s
    s.down()
    shutil.rmtree(s.dir, ignore_errors=True)


class Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


def sdk_session(sprite: Sprite, ledger: Path, client_metadata_url: str | None = None) -> dict:
    """Connects with the SDK's OAuth provider, lists the tools and runs one command."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    seen: dict = {}

    async def redirect_handler(url: str) -> None:
        seen["authorize_url"] = url

        def browser_and_operator() -> str:
            status, _, body = open_page(url)
            html = body.decode()
            assert status == 200, html
            seen["page"] = html
            return sprite.approve_page(html)

        seen["location"] = await anyio.to_thread.run_sync(browser_and_operator)

    async def callback_handler() -> AuthorizationCodeResult:
        params = urllib.parse.parse_qs(urllib.parse.urlparse(seen["location"]).query)
        return AuthorizationCodeResult(code=params["code"][0], state=params["state"][0], iss=params["iss"][0])

    storage = Memory()
    provider = OAuthClientProvider(
        server_url=sprite.mcp,
        client_metadata=OAuthClientMetadata(
            client_name="pytest: the MCP SDK's OAuth client",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=client_metadata_url,
    )

    async def body():
        async with httpx2.AsyncClient(auth=provider, timeout=60) as http:
            async with Client(streamable_http_client(sprite.mcp, http_client=http)) as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                assert tools == ["exec_command", "write_stdin", "apply_patch"]
                result = await client.call_tool("exec_command", {"cmd": f"echo via-oauth >> {ledger}; echo done", "workdir": "/"})
                assert not result.is_error and "done" in result.structured_content["output"]

    run(body)
    seen["tokens"] = storage.tokens
    seen["client"] = storage.client
    return seen


@pytest.mark.parametrize("sprite", ["sqlite", "postgres"], indirect=True)
def test_the_sdks_oauth_client_registers_gets_approved_and_runs_a_tool(sprite, tmp_path):
    # Without a token: the challenge that starts the flow.
    status, headers, _ = request("POST", sprite.mcp, b"{}", {"Content-Type": "application/json"})
    assert status == 401
    assert headers["www-authenticate"] == f'Bearer resource_metadata="{sprite.base}/.well-known/oauth-protected-resource/mcp"'
    ledger = tmp_path / "ran"
    seen = sdk_session(sprite, ledger)
    assert ledger.read_text() == "via-oauth\n"
    # Dynamic registration, PKCE S256 and the resource indicator were all used.
    query = urllib.parse.parse_qs(urllib.parse.urlparse(seen["authorize_url"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [sprite.mcp]
    client_id = seen["client"].client_id
    # A sealed registration (nothing stored until the approval), as the SDK keeps it.
    assert client_id.startswith("zc1.") and len(client_id) <= 1500, client_id
    # The page named the client for the operator.
    assert "pytest: the MCP SDK&#39;s OAuth client" in seen["page"] and "127.0.0.1:1" in seen["page"]
    # The operator sees it, with its grant; the audit has the approval and the token.
    r = sprite.mcp_cli("clients", "--json")
    clients = json.loads(r.stdout)["result"]["clients"]
    assert [(c["client_id"], c["live_grants"]) for c in clients] == [(client_id, 1)], r.stdout
    audit = sprite.zodex("sprite", "github", "audit", "--sprite", "dev", "--json")
    actions = [row["action"] for row in json.loads(audit.stdout)["result"]]
    assert "McpOAuthApprove" in actions and "McpOAuthToken" in actions, actions
    # The token is a bearer for /mcp only from the header.
    token = seen["tokens"].access_token
    marker = tmp_path / "attack"
    assert run_tool(f"{sprite.mcp}?access_token={urllib.parse.quote(token)}", f"touch {marker}") == 401
    assert run_tool(f"{sprite.mcp}?key={urllib.parse.quote(token)}", f"touch {marker}") == 401
    assert not marker.exists()
    assert run_tool(sprite.mcp, f"echo header >> {ledger}", token) == 200
    assert ledger.read_text() == "via-oauth\nheader\n"
    # Revoked by the operator: refused at once, refresh included.
    r = sprite.mcp_cli("revoke", client_id)
    assert r.returncode == 0 and "1 grant(s) ended" in r.stdout, r.stdout + r.stderr
    assert run_tool(sprite.mcp, f"touch {marker}", token) == 401
    status, body = form(
        f"{sprite.base}/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": seen["tokens"].refresh_token, "client_id": client_id},
    )
    assert status == 401 and body["error"] == "invalid_client", body
    assert not marker.exists()


def test_attacks_on_codes_tokens_and_redirects_are_refused_and_reach_no_tool(sprite, tmp_path):
    marker = tmp_path / "attack"
    client = sprite.register()

    # A redirect URI one character off: an error page, never a redirect to it.
    verifier, challenge = pkce()
    status, headers, html = sprite.consent_page(client, challenge, redirect=REDIRECT + "x")
    assert status == 400 and "location" not in headers and "not this client" in html

    # A code without its PKCE verifier, then with it: both refused (one attempt per code).
    code, verifier = sprite.approved_code(client)
    status, body = sprite.exchange(client, code, None)
    assert status == 400 and body["error"] == "invalid_grant", body
    status, body = sprite.exchange(client, code, verifier)
    assert status == 400 and body["error"] == "invalid_grant", body

    # A replayed code: refused, and the tokens it was exchanged for are revoked.
    code, verifier = sprite.approved_code(client)
    status, tokens = sprite.exchange(client, code, verifier)
    assert status == 200, tokens
    assert run_tool(sprite.mcp, "true", tokens["access_token"]) == 200
    status, body = sprite.exchange(client, code, verifier)
    assert status == 400 and body["error"] == "invalid_grant", body
    assert run_tool(sprite.mcp, f"touch {marker}", tokens["access_token"]) == 401

    # A refresh token used twice: the second use revokes the family, the newest tokens too.
    tokens = sprite.tokens(client)
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": client}
    status, rotated = form(f"{sprite.base}/oauth/token", refresh)
    assert status == 200 and rotated["refresh_token"] != tokens["refresh_token"], rotated
    assert run_tool(sprite.mcp, "true", rotated["access_token"]) == 200
    status, body = form(f"{sprite.base}/oauth/token", refresh)
    assert status == 400 and body["error"] == "invalid_grant", body
    assert run_tool(sprite.mcp, f"touch {marker}", rotated["access_token"]) == 401
    status, body = form(f"{sprite.base}/oauth/token", dict(refresh, refresh_token=rotated["refresh_token"]))
    assert status == 400 and body["error"] == "invalid_grant", body

    # Tokens the server did not issue as they are: signed with the real key (read from the
    # publisher's state, which only the publisher user can read on a sprite) but for another
    # audience, or expired; and a well-formed token signed with another key.
    import jwt
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    with sqlite3.connect(sprite.dir / "state" / "state.db") as db:
        kid, pkcs8 = db.execute("SELECT kid, pkcs8 FROM mcp_oauth_keys WHERE retired_at IS NULL").fetchone()
    # ring's PKCS#8 v2 (which `cryptography` does not read): the seed is the 32 bytes after
    # the inner OCTET STRING's header.
    assert pkcs8[12:16] == bytes.fromhex("04220420"), pkcs8[:16].hex()
    real_key = Ed25519PrivateKey.from_private_bytes(pkcs8[16:48])
    live = jwt.decode(tokens["access_token"], options={"verify_signature": False})
    live_family = jwt.decode(sprite.tokens(client)["access_token"], options={"verify_signature": False})

    def forged(key, **changes) -> str:
        claims = dict(live_family, **changes)
        return jwt.encode(claims, key, algorithm="EdDSA", headers={"kid": kid, "typ": "at+jwt"})

    now = int(time.time())
    assert run_tool(sprite.mcp, "true", forged(real_key)) == 200, "the forging itself is right"
    assert run_tool(sprite.mcp, f"touch {marker}", forged(real_key, aud="https://other.example/mcp")) == 401
    assert run_tool(sprite.mcp, f"touch {marker}", forged(real_key, exp=now - 5, iat=now - 3605)) == 401
    assert run_tool(sprite.mcp, f"touch {marker}", forged(Ed25519PrivateKey.generate())) == 401
    assert run_tool(sprite.mcp, f"touch {marker}", forged(real_key, fam=live["fam"])) == 401, "a revoked family"
    status, headers, _ = request(
        "POST", sprite.mcp, b"{}", {"Content-Type": "application/json", "Authorization": f"Bearer {forged(real_key, exp=now - 5)}"}
    )
    assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"], headers
    assert not marker.exists()


def test_the_key_url_can_be_turned_off_and_on(sprite, tmp_path):
    ledger = tmp_path / "ran"
    assert run_tool(sprite.key_url, f"echo key >> {ledger}") == 200
    token = sprite.tokens(sprite.register())["access_token"]
    r = sprite.mcp_cli("key", "off")
    assert r.returncode == 0 and "off" in r.stdout, r.stdout + r.stderr
    assert run_tool(sprite.key_url, f"echo refused >> {ledger}") == 401
    key = urllib.parse.parse_qs(urllib.parse.urlparse(sprite.key_url).query)["key"][0]
    assert run_tool(sprite.mcp, f"echo refused >> {ledger}", key) == 401, "a bearer key is the key URL too"
    assert run_tool(sprite.mcp, f"echo oauth >> {ledger}", token) == 200
    r = sprite.mcp_cli("clients")
    assert "key URL off" in r.stdout, r.stdout
    assert sprite.mcp_cli("key", "on").returncode == 0
    assert run_tool(sprite.key_url, f"echo key-again >> {ledger}") == 200
    assert ledger.read_text() == "key\noauth\nkey-again\n"
    audit = sprite.zodex("sprite", "github", "audit", "--sprite", "dev", "--json")
    assert [r["outcome"] for r in json.loads(audit.stdout)["result"] if r["action"] == "McpKeyUrl"] == ["off", "on"]


# --- client ID metadata documents, over real TLS --------------------------------------------


def make_tls(dir: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate for localhost it signed (openssl)."""

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=dir, check=True, capture_output=True)

    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
         "-subj", "/CN=zodex test CA", "-keyout", "ca.key", "-out", "ca.pem",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost",
         "-keyout", "server.key", "-out", "server.csr")
    (dir / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")
    return dir / "ca.pem", dir / "server.pem", dir / "server.key"


class Documents:
    """An HTTPS server of client metadata documents: good, too large, a redirect, a liar."""

    def __init__(self, cert: Path, key: Path):
        documents = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                documents.fetched.append(self.path)
                url = f"https://localhost:{documents.port}{self.path}"
                if self.path == "/client.json":
                    body = json.dumps({"client_id": url, "client_name": "pytest CIMD client", "redirect_uris": [REDIRECT],
                                       "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                                       "token_endpoint_auth_method": "none"}).encode()
                elif self.path == "/big.json":
                    body = json.dumps({"client_id": url, "redirect_uris": [REDIRECT], "pad": "x" * 20000}).encode()
                elif self.path == "/liar.json":
                    body = json.dumps({"client_id": "https://elsewhere.example/c.json", "redirect_uris": [REDIRECT]}).encode()
                elif self.path == "/moved.json":
                    self.send_response(302)
                    self.send_header("Location", f"https://localhost:{documents.port}/client.json")
                    self.end_headers()
                    return
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.fetched: list[str] = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"https://localhost:{self.port}/{name}"

    def stop(self) -> None:
        self.server.shutdown()


@pytest.fixture
def cimd_sprite(tmp_path):
    tls = tmp_path / "tls"
    tls.mkdir()
    ca, cert, key = make_tls(tls)
    docs = Documents(cert, key)
    # The publisher trusts the test CA (SSL_CERT_FILE, read by its TLS roots), and may fetch
    # documents from `localhost` although it is a private address: a setting for tests and
    # intranets, off by default.
    s = Sprite(tmp_path / "home", {"SSL_CERT_FILE": str(ca)})
    text = s.config_path().read_text()
    s.config_path().write_text(text.replace("[mcp]\n", '[mcp]\noauth_cimd_private_hosts = ["localhost"]\n', 1))
    s.down()
    s.up()
    yield s, docs
    s.down()
    docs.stop()
    shutil.rmtree(s.dir, ignore_errors=True)


def test_a_client_metadata_document_client_connects_and_bad_documents_are_refused(cimd_sprite, tmp_path):
    sprite, docs = cimd_sprite
    ledger = tmp_path / "ran"
    seen = sdk_session(sprite, ledger, client_metadata_url=docs.url("client.json"))
    assert ledger.read_text() == "via-oauth\n"
    assert seen["client"].client_id == docs.url("client.json"), "no registration: the URL is the id"
    assert "/client.json" in docs.fetched
    assert "pytest CIMD client" in seen["page"]
    clients = json.loads(sprite.mcp_cli("clients", "--json").stdout)["result"]["clients"]
    assert [(c["client_id"], c["kind"]) for c in clients] == [(docs.url("client.json"), "cimd")]

    _, challenge = pkce()
    for client_id, why in [
        (docs.url("big.json"), "larger than 16384 bytes"),
        (docs.url("moved.json"), "redirects are not followed"),
        (docs.url("liar.json"), "names another client_id"),
        (f"https://127.0.0.1:{docs.port}/client.json", "private address"),
        (f"https://127.0.0.2:{docs.port}/client.json", "private address"),
        ("https://169.254.169.254/latest/meta-data", "private address"),
    ]:
        status, headers, html = sprite.consent_page(client_id, challenge)
        assert status == 400 and "location" not in headers, (client_id, status, html)
        assert why in html, (client_id, html)
    assert "/latest/meta-data" not in docs.fetched
