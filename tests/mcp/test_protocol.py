"""The transport and protocol side, through the real Python client and raw HTTP: both protocol
eras, no reliance on Mcp-Session-Id, the capability key, /health, the Host check, stdio."""

from __future__ import annotations

import json
import subprocess

import pytest
from mcp import Client, StdioServerParameters

from conftest import AGENT, base_env, http_get, http_post, jsonrpc_body, run, start_server

TOOLS = ["exec_command", "write_stdin", "apply_patch"]


def test_three_tools_with_annotations_and_schemas(server, mode):
    async def body():
        async with Client(server.url, mode=mode) as client:
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == TOOLS
            for tool in listed:
                a = tool.annotations
                assert a.read_only_hint is False
                assert a.destructive_hint is True
                assert a.idempotent_hint is False
                assert a.open_world_hint is (tool.name != "apply_patch")
                assert tool.description and len(tool.description) > 80
                assert tool.input_schema["type"] == "object"
                assert tool.output_schema["type"] == "object"
                assert "zodex_context" in tool.output_schema["properties"]
            by_name = {t.name: t for t in listed}
            assert set(by_name["exec_command"].input_schema["required"]) == {"cmd", "workdir"}
            assert set(by_name["apply_patch"].input_schema["required"]) == {"patch", "workdir"}
            assert by_name["write_stdin"].input_schema["required"] == ["session_handle"]

    run(body)


def test_instructions_demand_an_absolute_workdir(server, mode):
    async def body():
        async with Client(server.url, mode=mode) as client:
            assert "workdir" in client.instructions
            assert "absolute" in client.instructions
            assert client.server_info.name == "zodex"

    run(body)


def test_protocol_versions_negotiated(server):
    async def body():
        async with Client(server.url, mode="legacy") as client:
            assert client.protocol_version in ("2025-11-25", "2025-06-18")
        async with Client(server.url) as client:
            assert client.protocol_version >= "2026-07-28"

    run(body)


def initialize(version: str) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }


def call(cmd: str, workdir: str = "/", id: int = 2, meta: dict | None = None) -> dict:
    params = {"name": "exec_command", "arguments": {"cmd": cmd, "workdir": workdir}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_initialize_handshake_versions_raw(server, version):
    status, headers, body = http_post(server.url, initialize(version))
    assert status == 200
    assert jsonrpc_body(headers, body)["result"]["protocolVersion"] == version
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    # A client that keeps the id is served in its session ...
    status, headers, body = http_post(server.url, call("echo kept"), headers={"Mcp-Session-Id": session})
    assert status == 200
    assert jsonrpc_body(headers, body)["result"]["structuredContent"]["output"].strip() == "kept"
    # ... and one that drops it (as ChatGPT has been seen to) is served all the same.
    status, headers, body = http_post(server.url, call("echo dropped"))
    assert status == 200
    assert jsonrpc_body(headers, body)["result"]["structuredContent"]["output"].strip() == "dropped"


def test_stale_session_id_is_still_served(server):
    status, headers, body = http_post(
        server.url, call("echo stale"), headers={"Mcp-Session-Id": "from-before-a-restart"}
    )
    assert status == 200
    assert jsonrpc_body(headers, body)["result"]["structuredContent"]["output"].strip() == "stale"


def test_mcp_session_labels_the_conversation(fresh_server):
    (fresh_server.home / ".codex").mkdir()
    (fresh_server.home / ".codex" / "AGENTS.md").write_text("SESSION-RULE\n")
    _, headers, _ = http_post(fresh_server.url, initialize("2025-11-25"))
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    results = []
    for i in range(2):  # each urllib request is a new TCP connection
        _, h, b = http_post(fresh_server.url, call("true", id=10 + i), headers={"Mcp-Session-Id": session})
        results.append(jsonrpc_body(h, b)["result"]["structuredContent"])
    assert "SESSION-RULE" in results[0]["zodex_context"]
    assert "zodex_context" not in results[1]
    # `_meta["openai/session"]` wins over everything else.
    for i in range(2):
        _, h, b = http_post(fresh_server.url, call("true", id=20 + i, meta={"openai/session": "chat-1"}))
        result = jsonrpc_body(h, b)["result"]["structuredContent"]
        assert ("zodex_context" in result) == (i == 0)


def test_stateless_requests_without_initialize_or_session(server):
    """A POST with no prior initialize and no Mcp-Session-Id works (ChatGPT drops the id)."""
    status, headers, body = http_post(server.url, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert status == 200, body
    assert [t["name"] for t in json.loads(body)["result"]["tools"]] == TOOLS
    # No handshake, no session: none is handed out.
    assert not any(k.lower() == "mcp-session-id" for k in headers)
    status, _, body = http_post(
        server.url,
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "exec_command", "arguments": {"cmd": "echo stateless", "workdir": "/"}},
        },
        headers={"Mcp-Session-Id": "made-up-id-the-server-never-issued"},
    )
    assert status == 200, body
    result = json.loads(body)["result"]
    assert result["structuredContent"]["output"].strip() == "stateless"
    assert result["isError"] is False


def test_discover_probe_gets_an_answer_not_a_dropped_connection(server):
    # Bare, as an old-style probe: a JSON-RPC error or a 4xx, never a reset.
    status, _, body = http_post(server.url, {"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
    assert 200 <= status < 500
    assert "jsonrpc" in json.loads(body)
    # With the 2026-07-28 request metadata: a proper answer.
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    status, _, body = http_post(
        server.url,
        {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": meta}},
        headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
    )
    assert status == 200, body
    assert "2026-07-28" in json.loads(body)["result"]["supportedVersions"]


def test_unknown_tool_is_a_protocol_error(server):
    status, _, body = http_post(
        server.url,
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "shell", "arguments": {}}},
    )
    error = json.loads(body)["error"]
    assert error["code"] == -32602
    assert "exec_command" in error["message"]


def test_invalid_arguments_are_tool_errors_that_say_how_to_recover(server, mode):
    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool("exec_command", {"cmd": "true"})
            assert r.is_error
            assert "`workdir` is required" in r.content[0].text
            r = await client.call_tool("exec_command", {"cmd": "true", "workdir": 5})
            assert r.is_error and "must be a string" in r.content[0].text
            r = await client.call_tool("write_stdin", {})
            assert r.is_error and "session_handle" in r.content[0].text
            r = await client.call_tool("apply_patch", {"patch": "x", "workdir": "rel/dir"})
            assert r.is_error and "absolute" in r.content[0].text

    run(body)


def test_health_is_open_and_names_the_version(server):
    status, _, body = http_get(f"{server.base}/health")
    assert status == 200
    health = json.loads(body)
    assert health["name"] == "zodex"
    assert health["version"]


def test_missing_or_wrong_key_gets_401_without_detail(server):
    list_tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for url in (f"{server.base}/mcp", f"{server.base}/mcp?key=wrong", f"{server.base}/mcp?key={server.key}x"):
        status, _, body = http_post(url, list_tools)
        assert status == 401
        assert body == b""
    status, _, body = http_post(f"{server.base}/mcp", list_tools, headers={"Authorization": "Bearer nope"})
    assert status == 401 and body == b""
    status, _, _ = http_post(f"{server.base}/mcp", list_tools, headers={"Authorization": f"Bearer {server.key}"})
    assert status == 200

    async def body():
        with pytest.raises(BaseException):
            async with Client(f"{server.base}/mcp?key=wrong") as client:
                await client.list_tools()

    run(body)


def test_host_check_rejects_foreign_hosts_and_accepts_configured_ones(tmp_path):
    srv = start_server(tmp_path, "--allowed-host", "sprite.example.com")
    try:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        status, _, _ = http_post(srv.url, ping, headers={"Host": "evil.example.com"})
        assert status == 403
        status, _, _ = http_post(srv.url, ping, headers={"Host": "sprite.example.com"})
        assert status == 200
        status, _, _ = http_post(srv.url, ping, headers={"Host": f"localhost:{srv.addr.split(':')[1]}"})
        assert status == 200
    finally:
        srv.stop()


def test_key_never_appears_in_logs(tmp_path):
    srv = start_server(tmp_path, env_extra={"RUST_LOG": "trace"})
    try:

        async def body():
            async with Client(srv.url, mode="legacy") as client:
                await client.list_tools()
                await client.call_tool("exec_command", {"cmd": "echo $HOME", "workdir": "/"})
            async with Client(srv.url) as client:
                await client.call_tool("exec_command", {"cmd": "true", "workdir": "/"})

        run(body)
        http_post(f"{srv.base}/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                  headers={"Authorization": f"Bearer {srv.key}"})
        http_post(f"{srv.base}/mcp?key={srv.key}&other=1", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        http_post(f"{srv.base}/mcp?key={srv.key}zz", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    finally:
        srv.stop()
    log = srv.log_text()
    assert "request" in log and "/mcp" in log, log[-2000:]
    assert srv.key not in log
    assert srv.key[:16] not in log


def test_stdio_transport(tmp_path, mode):
    home = tmp_path / "home"
    home.mkdir()
    params = StdioServerParameters(command=str(AGENT), args=["serve", "--stdio"], env=base_env(home), cwd=str(tmp_path))

    async def body():
        async with Client(params, mode=mode) as client:
            assert [t.name for t in (await client.list_tools()).tools] == TOOLS
            r = await client.call_tool("exec_command", {"cmd": "echo via-stdio", "workdir": str(tmp_path)})
            assert not r.is_error
            assert r.structured_content["output"].strip() == "via-stdio"

    run(body)


def test_serve_without_key_is_a_usage_error(tmp_path):
    result = subprocess.run(
        [str(AGENT), "serve", "--listen", "127.0.0.1:0"], env=base_env(tmp_path), capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "--key-hash-file" in result.stderr
