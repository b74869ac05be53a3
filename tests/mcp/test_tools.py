"""The three tools through the real Python client, against a real server (both client modes):
exec_command exited/running/poll, write_stdin send/kill/unknown handle, the 64-session limit,
bad workdirs touching nothing, spill fields, apply_patch success and failure."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from mcp import Client

from conftest import run


async def poll_until(client, handle: str, needle: str, timeout: float = 20) -> dict:
    """Polls a running session until its output so far contains `needle`."""
    seen = ""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = await client.call_tool("write_stdin", {"session_handle": handle, "yield_time_ms": 200})
        assert not r.is_error, r.content[0].text
        seen += r.structured_content["output"]
        if needle in seen:
            return r.structured_content
        assert r.structured_content["status"] == "running", seen
    raise AssertionError(f"{needle!r} never appeared in {seen!r}")


def test_exec_exits_within_yield(server, mode, tmp_path):
    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool("exec_command", {"cmd": "echo hello; pwd; exit 3", "workdir": str(tmp_path)})
            assert not r.is_error
            s = r.structured_content
            assert s["status"] == "exited"
            assert s["exit_code"] == 3
            assert s["termination_reason"] == "exit"
            assert s["cwd"] == str(tmp_path)
            assert isinstance(s["wall_time_ms"], int)
            assert s["output"].replace("\r\n", "\n") == f"hello\n{tmp_path}\n"
            assert "hello" in r.content[0].text
            assert "session_handle" not in s or not s["session_handle"]

    run(body)


def test_exec_running_then_poll_to_exit(server, mode, tmp_path):
    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool(
                "exec_command",
                {"cmd": "echo start; sleep 1; echo done", "workdir": str(tmp_path), "yield_time_ms": 200},
            )
            s = r.structured_content
            assert s["status"] == "running"
            handle = s["session_handle"]
            assert len(handle) >= 22  # >= 128 random bits, URL-safe
            out = s["output"]
            while s["status"] == "running":
                r = await client.call_tool("write_stdin", {"session_handle": handle, "yield_time_ms": 5000})
                assert not r.is_error, r.content[0].text
                s = r.structured_content
                out += s["output"]
            assert s["exit_code"] == 0
            assert out.replace("\r\n", "\n") == "start\ndone\n"
            # The final result was read: the handle is gone now.
            r = await client.call_tool("write_stdin", {"session_handle": handle})
            assert r.is_error and handle in r.content[0].text

    run(body)


def test_write_stdin_sends_input(server, mode, tmp_path):
    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool(
                "exec_command",
                {"cmd": "echo ready; read line; echo got:$line", "workdir": str(tmp_path), "yield_time_ms": 300},
            )
            handle = r.structured_content["session_handle"]
            if "ready" not in r.structured_content["output"]:
                await poll_until(client, handle, "ready")
            r = await client.call_tool(
                "write_stdin", {"session_handle": handle, "chars": "hello\n", "yield_time_ms": 5000}
            )
            s = r.structured_content
            assert "got:hello" in s["output"]
            assert s["status"] == "exited" and s["exit_code"] == 0

    run(body)


def test_write_stdin_kills(server, mode, tmp_path):
    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool(
                "exec_command", {"cmd": "echo ready; sleep 300", "workdir": str(tmp_path), "yield_time_ms": 300}
            )
            handle = r.structured_content["session_handle"]
            if "ready" not in r.structured_content["output"]:
                await poll_until(client, handle, "ready")
            r = await client.call_tool("write_stdin", {"session_handle": handle, "kill_process": True})
            assert not r.is_error, r.content[0].text
            s = r.structured_content
            assert s["status"] == "exited"
            assert s["termination_reason"] == "killed"

    run(body)


def test_unknown_handle_is_a_clear_error(server, mode):
    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool("write_stdin", {"session_handle": "no-such-handle-42"})
            assert r.is_error
            assert "no-such-handle-42" in r.content[0].text

    run(body)


def test_bad_workdir_touches_nothing(server, mode, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    bad = [str(tmp_path / "missing"), "relative/dir", str(a_file), ""]

    async def body():
        async with Client(server.url, mode=mode) as client:
            for workdir in bad:
                r = await client.call_tool("exec_command", {"cmd": "touch marker", "workdir": workdir})
                assert r.is_error, workdir
                assert "workdir" in r.content[0].text
                r = await client.call_tool(
                    "apply_patch",
                    {"patch": "*** Begin Patch\n*** Add File: marker2\n+x\n*** End Patch\n", "workdir": workdir},
                )
                assert r.is_error, workdir

    run(body)
    for place in (server.cwd, server.home, tmp_path, Path("/")):
        assert not (place / "marker").exists(), place
        assert not (place / "marker2").exists(), place
    assert not (tmp_path / "missing").exists()


def test_long_output_spills_to_a_private_file(server, mode, tmp_path):
    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool("exec_command", {"cmd": "seq 1 100000", "workdir": str(tmp_path)})
            assert not r.is_error
            s = r.structured_content
            assert s["status"] == "exited"
            assert s["output_lines"] == 100000
            assert s["output_chars"] >= len("".join(f"{i}\n" for i in range(1, 100001)))
            assert s["output_file_truncated"] is False
            assert len(s["output"]) <= 4100
            assert s["output"].rstrip().endswith("100000")
            path = Path(s["output_file"])
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            lines = path.read_text().replace("\r\n", "\n").splitlines()
            assert lines[0] == "1" and lines[-1] == "100000"

    run(body)


def test_65th_session_is_refused_and_spawns_nothing(fresh_server, tmp_path):
    async def body():
        async with Client(fresh_server.url) as client:
            handles = []
            ready = set()
            for i in range(64):
                r = await client.call_tool(
                    "exec_command",
                    {"cmd": "echo ready; sleep 120", "workdir": str(tmp_path), "yield_time_ms": 50, "timeout_ms": 120000},
                )
                assert not r.is_error, (i, r.content[0].text)
                handles.append(r.structured_content["session_handle"])
                if "ready" in r.structured_content["output"]:
                    ready.add(handles[-1])
            assert len(set(handles)) == 64
            r = await client.call_tool("exec_command", {"cmd": "touch marker65", "workdir": str(tmp_path)})
            assert r.is_error
            assert "64" in r.content[0].text
            for h in handles:
                if h not in ready:
                    await poll_until(client, h, "ready")
                r = await client.call_tool("write_stdin", {"session_handle": h, "kill_process": True})
                assert not r.is_error
            # A slot is free again.
            r = await client.call_tool("exec_command", {"cmd": "echo ok", "workdir": str(tmp_path)})
            assert not r.is_error

    run(body)
    assert not (tmp_path / "marker65").exists()


ADD_AND_UPDATE = """*** Begin Patch
*** Add File: new/hello.txt
+hello
+world
*** Update File: existing.txt
@@
 one
-two
+TWO
 three
*** End Patch
"""


def test_apply_patch_applies_and_lists_changes(server, mode, tmp_path):
    (tmp_path / "existing.txt").write_text("one\ntwo\nthree\n")

    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool("apply_patch", {"patch": ADD_AND_UPDATE, "workdir": str(tmp_path)})
            assert not r.is_error, r.content[0].text
            changes = {(c["kind"], c["path"]) for c in r.structured_content["changes"]}
            assert changes == {("A", str(tmp_path / "new/hello.txt")), ("M", str(tmp_path / "existing.txt"))}
            assert "hello.txt" in r.content[0].text

    run(body)
    assert (tmp_path / "new/hello.txt").read_text() == "hello\nworld\n"
    assert (tmp_path / "existing.txt").read_text() == "one\nTWO\nthree\n"


def test_apply_patch_failure_is_error_and_writes_nothing(server, mode, tmp_path):
    (tmp_path / "existing.txt").write_text("alpha\nbeta\n")
    patch = """*** Begin Patch
*** Add File: created.txt
+should not exist
*** Update File: existing.txt
@@
-this line is not there
+x
*** End Patch
"""

    async def body():
        async with Client(server.url, mode=mode) as client:
            r = await client.call_tool("apply_patch", {"patch": patch, "workdir": str(tmp_path)})
            assert r.is_error
            text = r.content[0].text
            assert "existing.txt" in text

    run(body)
    assert not (tmp_path / "created.txt").exists()
    assert (tmp_path / "existing.txt").read_text() == "alpha\nbeta\n"


def test_ansi_is_stripped_and_pagers_do_not_wait(server, tmp_path):
    async def body():
        async with Client(server.url) as client:
            r = await client.call_tool(
                "exec_command",
                {"cmd": "printf '\\033[31mred\\033[0m\\n'; echo pager=$PAGER", "workdir": str(tmp_path), "yield_time_ms": 5000},
            )
            out = r.structured_content["output"]
            assert "\x1b" not in out
            assert "red" in out

    run(body)
    assert os.path.isdir(tmp_path)
