"""Real reverse proxies in front of `zodex-agent serve`, for the proxy tests: Debian's Caddy and
nginx with the configuration an operator would write from docs/deploy.md, and a plain TCP relay
(relay.py) that can cut connections in the middle of a streamed answer.

Each starter returns a `Proxy` whose `url(server)` is the MCP URL through it; `stop()` ends it.
A proxy that is not installed raises `Missing` (the test then skips locally and fails in CI,
where ZODEX_REQUIRE_PROXIES=1).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import terminate

HERE = Path(__file__).resolve().parent


class Missing(Exception):
    """The proxy's program is not installed here."""


@dataclass
class Proxy:
    name: str
    proc: subprocess.Popen
    addr: str
    log: Path

    def url(self, key: str) -> str:
        return f"http://{self.addr}/mcp?key={key}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        terminate(self.proc, 10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(addr: str, proc: subprocess.Popen, log: Path, timeout: float = 20) -> None:
    host, port = addr.rsplit(":", 1)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"proxy exited ({proc.returncode}):\n{log.read_text(errors='replace')}")
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"proxy did not listen on {addr}:\n{log.read_text(errors='replace')}")


def program(name: str) -> str:
    found = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
    if not found:
        raise Missing(f"{name} is not installed (apt-get install {name})")
    return found


def start_caddy(tmp: Path, upstream: str) -> Proxy:
    """Caddy as docs/deploy.md configures it (`reverse_proxy` and nothing else), over plain HTTP."""
    caddy = program("caddy")
    port = free_port()
    conf = tmp / "Caddyfile"
    # ZODEX_CADDY_DEBUG=1 makes Caddy log every request with its client's port (to diagnose).
    debug = "\tdebug\n" if os.environ.get("ZODEX_CADDY_DEBUG") == "1" else ""
    conf.write_text(
        "{\n\tadmin off\n\tauto_https off\n" + debug + "}\n"
        f"http://127.0.0.1:{port} {{\n\treverse_proxy {upstream}\n}}\n"
    )
    env = dict(os.environ, HOME=str(tmp), XDG_DATA_HOME=str(tmp / "data"), XDG_CONFIG_HOME=str(tmp / "config"))
    log = tmp / "caddy.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [caddy, "run", "--config", str(conf), "--adapter", "caddyfile"],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )
    addr = f"127.0.0.1:{port}"
    wait_listening(addr, proc, log)
    return Proxy("caddy", proc, addr, log)


def start_nginx(tmp: Path, upstream: str) -> Proxy:
    """nginx with a plain `proxy_pass` (its defaults: HTTP/1.0 upstream, buffering on)."""
    nginx = program("nginx")
    port = free_port()
    prefix = tmp / "nginx"
    prefix.mkdir(exist_ok=True)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    conf = prefix / "nginx.conf"
    conf.write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        "  access_log off;\n"
        f"  client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n"
        f"  fastcgi_temp_path {prefix}/fcgi;\n  uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n"
        f"  server {{\n    listen 127.0.0.1:{port};\n"
        f"    location / {{\n      proxy_pass http://{upstream};\n      proxy_set_header Host $host;\n    }}\n  }}\n"
        "}\n"
    )
    log = tmp / "nginx.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [nginx, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )
    addr = f"127.0.0.1:{port}"
    wait_listening(addr, proc, log)
    return Proxy("nginx", proc, addr, log)


def start_relay(tmp: Path, upstream: str, cut_every: int = 0) -> Proxy:
    """relay.py; with `cut_every` K it cuts every K-th streamed answer after its first event."""
    log = tmp / f"relay-{cut_every}.log"
    out = open(log, "wb")
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "relay.py"), upstream, "--cut-every", str(cut_every)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=out,
    )
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("listening "):
        raise RuntimeError(f"relay did not start: {line!r}\n{log.read_text(errors='replace')}")
    return Proxy("relay", proc, line.split()[1], log)


def cuts(proxy: Proxy) -> int:
    """How many connections the relay cut."""
    return sum(1 for line in proxy.log_text().splitlines() if line.startswith("cuts "))
