"""Runs many short tool calls through one MCP URL with the Python `mcp` client and counts what
came back: every call must return its own result exactly once, and every command must have
run exactly once (each call appends its own marker to a ledger file the server's shell writes).

Usage: proxy_calls.py URL WORKDIR N [--mode legacy|auto] [--concurrency C] [--timeout S]
Prints one JSON line: {"calls": N, "returned": R, "errors": [...], "ran_twice": [...],
"never_ran": [...], "seconds": T}; exits 0 only when all N returned and each ran once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
from mcp import Client


async def one_client(url: str, mode: str, workdir: str, ledger: Path, ids: list[int], timeout: float, out: dict) -> None:
    async with Client(url, mode=mode) as client:
        for i in ids:
            marker = f"call-{i:05d}"
            try:
                with anyio.fail_after(timeout):
                    r = await client.call_tool(
                        "exec_command",
                        {"cmd": f"echo {marker} >> {ledger}; echo {marker}", "workdir": workdir},
                    )
            except Exception as e:  # noqa: BLE001 - every failure is a finding
                out["errors"].append(f"{marker}: {type(e).__name__}: {e}")
                continue
            text = (r.structured_content or {}).get("output", "")
            if r.is_error or marker not in text:
                out["errors"].append(f"{marker}: unexpected result {text[:200]!r}")
                continue
            out["returned"] += 1


async def run_calls(url: str, workdir: str, n: int, mode: str = "legacy", concurrency: int = 4, timeout: float = 30.0) -> dict:
    """Runs `n` calls over `concurrency` clients; returns the counts (see the module doc)."""
    ledger = Path(workdir) / f"ledger-{time.time_ns()}.txt"
    out: dict = {"calls": n, "returned": 0, "errors": []}
    started = time.monotonic()
    chunks = [list(range(k, n, concurrency)) for k in range(concurrency)]
    async with anyio.create_task_group() as tg:
        for ids in chunks:
            tg.start_soon(one_client, url, mode, workdir, ledger, ids, timeout, out)
    out["seconds"] = round(time.monotonic() - started, 2)
    runs = Counter(ledger.read_text().split()) if ledger.exists() else Counter()
    out["ran_twice"] = sorted(m for m, c in runs.items() if c > 1)[:20]
    out["never_ran"] = sorted(f"call-{i:05d}" for i in range(n) if runs[f"call-{i:05d}"] == 0)[:20]
    out["errors"] = out["errors"][:20]
    out["ok"] = out["returned"] == n and not out["ran_twice"] and not out["never_ran"]
    return out


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("workdir")
    p.add_argument("n", type=int)
    p.add_argument("--mode", default="legacy")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args()
    out = await run_calls(a.url, a.workdir, a.n, a.mode, a.concurrency, a.timeout)
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
