"""zodex_context through a real client: global AGENTS instructions and skills on the first result
of a conversation, the workdir hint and skills on the first success in a workdir, appended after
the original result, never changing it; switchable; capped."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from conftest import run, start_server


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def skill(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\nbody\n"


def setup_tree(home: Path, root: Path) -> tuple[Path, Path, Path]:
    write(home / ".codex/AGENTS.md", "GLOBAL-RULE-XYZ: always run the tests.\n")
    write(home / ".codex/skills/pdf/SKILL.md", skill("pdf", "Read and fill PDF forms"))
    write(home / ".agents/skills/deploy/SKILL.md", skill("deploy", "Ship to production"))
    w1, w2, w3 = root / "w1", root / "w2", root / "w3"
    write(w1 / "AGENTS.md", "project rules\n")
    write(w1 / ".agents/skills/lint/SKILL.md", skill("lint", "Run the project's linters"))
    write(w2 / "AGENTS.override.md", "override\n")
    w3.mkdir(parents=True)
    return w1, w2, w3


async def call(client, workdir, conversation=None, cmd="echo out"):
    meta = {"openai/session": conversation} if conversation else None
    return await client.call_tool("exec_command", {"cmd": cmd, "workdir": str(workdir)}, meta=meta)


def test_context_first_call_per_conversation_and_workdir(tmp_path):
    srv = start_server(tmp_path / "srv")
    w1, w2, w3 = setup_tree(srv.home, tmp_path)
    try:

        async def body():
            async with Client(srv.url, mode="legacy") as client:
                r = await call(client, w1, "conv-A")
                s = r.structured_content
                ctx = s["zodex_context"]
                assert "GLOBAL-RULE-XYZ" in ctx
                assert "pdf: Read and fill PDF forms" in ctx
                assert "deploy: Ship to production" in ctx
                assert "has AGENTS.md" in ctx and str(w1) in ctx
                assert "lint: Run the project's linters" in ctx
                # The original result is untouched and comes first in the text.
                assert s["output"].strip() == "out" and s["exit_code"] == 0 and s["status"] == "exited"
                text = r.content[0].text
                assert text.index("out") < text.index("GLOBAL-RULE-XYZ")

                r = await call(client, w1, "conv-A")
                assert "zodex_context" not in r.structured_content
                assert "GLOBAL-RULE-XYZ" not in r.content[0].text

                r = await call(client, w2, "conv-A")
                ctx = r.structured_content["zodex_context"]
                assert "AGENTS.override.md" in ctx and "GLOBAL-RULE-XYZ" not in ctx

                r = await call(client, w3, "conv-A")
                assert "zodex_context" not in r.structured_content

                # Another conversation starts over.
                r = await call(client, w3, "conv-B")
                assert "GLOBAL-RULE-XYZ" in r.structured_content["zodex_context"]

                # A failure is the first result: it gets the global part, not the workdir part.
                r = await call(client, tmp_path / "missing", "conv-C")
                assert r.is_error
                assert "GLOBAL-RULE-XYZ" in r.structured_content["zodex_context"]
                r = await call(client, w1, "conv-C")
                ctx = r.structured_content["zodex_context"]
                assert "GLOBAL-RULE-XYZ" not in ctx and "has AGENTS.md" in ctx

                # apply_patch counts as a call in its workdir too.
                r = await client.call_tool(
                    "apply_patch",
                    {"patch": "*** Begin Patch\n*** Add File: n.txt\n+n\n*** End Patch\n", "workdir": str(w2)},
                    meta={"openai/session": "conv-D"},
                )
                ctx = r.structured_content["zodex_context"]
                assert "GLOBAL-RULE-XYZ" in ctx and "AGENTS.override.md" in ctx

        run(body)
    finally:
        srv.stop()


def test_without_openai_session_the_connection_is_the_conversation(tmp_path):
    srv = start_server(tmp_path / "srv")
    w1, _, w3 = setup_tree(srv.home, tmp_path)
    try:

        async def body():
            for mode in ("auto", "legacy"):
                async with Client(srv.url, mode=mode) as client:
                    r = await call(client, w3)
                    assert "GLOBAL-RULE-XYZ" in r.structured_content["zodex_context"], mode
                    r = await call(client, w3)
                    assert "zodex_context" not in r.structured_content, mode

        run(body)
    finally:
        srv.stop()


def test_parts_switch_off_in_configuration(tmp_path):
    config = tmp_path / "zodex.toml"
    config.write_text("[mcp.context]\nglobal_agents = false\nworkdir_skills = false\n")
    srv = start_server(tmp_path / "srv", "--config", str(config))
    w1, _, _ = setup_tree(srv.home, tmp_path)
    try:

        async def body():
            async with Client(srv.url) as client:
                ctx = (await call(client, w1, "c")).structured_content["zodex_context"]
                assert "GLOBAL-RULE-XYZ" not in ctx
                assert "pdf:" in ctx
                assert "has AGENTS.md" in ctx
                assert "lint:" not in ctx

        run(body)
    finally:
        srv.stop()


def test_context_is_capped_with_a_note(tmp_path):
    srv = start_server(tmp_path / "srv")
    write(srv.home / ".codex/AGENTS.override.md", "word " * 5000)
    try:

        async def body():
            async with Client(srv.url) as client:
                ctx = (await call(client, tmp_path, "c")).structured_content["zodex_context"]
                assert len(ctx.encode()) <= 8192
                assert "cut at 8192 bytes" in ctx

        run(body)
    finally:
        srv.stop()
