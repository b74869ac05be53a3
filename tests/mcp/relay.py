"""A plain TCP relay for proxy tests: forwards every connection to an upstream address, and
optionally cuts some connections in the middle of a streamed answer.

`--cut-every K` cuts the K-th, 2K-th, … tool call (`tools/call`) whose answer is a server-sent
event stream, right after the first complete event has gone through: after the priming event,
before the result — the command has been started, its result not yet delivered. Both directions are closed at once, as when a proxy or a network
drops a connection. Prints `listening HOST:PORT` on stdout once it accepts connections, and
`cuts N` on every cut (to stderr) so a test can count them.

Usage: relay.py UPSTREAM_HOST:PORT [--cut-every K]
"""

from __future__ import annotations

import argparse
import asyncio
import sys

SSE_MARK = b"text/event-stream"


class Relay:
    def __init__(self, upstream: tuple[str, int], cut_every: int) -> None:
        self.upstream = upstream
        self.cut_every = cut_every
        self.streams = 0
        self.cuts = 0

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            return
        cut = asyncio.Event()
        # Whether the request last sent on this connection is a tool call (HTTP/1.1 sends one
        # request at a time per connection).
        tool_call = [False]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, watch: bool) -> None:
            seen = b""
            armed = False
            try:
                while not cut.is_set():
                    data = await src.read(65536)
                    if not data:
                        break
                    if not watch:
                        if b"POST " in data:
                            tool_call[0] = False  # a new request starts
                        if b'"tools/call"' in data:
                            tool_call[0] = True
                    if watch and self.cut_every:
                        seen += data
                        if not armed and SSE_MARK in seen:
                            if tool_call[0]:
                                self.streams += 1
                                armed = self.streams % self.cut_every == 0
                            seen = seen[seen.find(b"\r\n\r\n") + 4 :] if b"\r\n\r\n" in seen else b""
                        if armed:
                            # Pass on up to the end of the first event, then drop the connection.
                            end = seen.find(b"\n\n")
                            if end >= 0:
                                keep = len(data) - (len(seen) - (end + 2))
                                dst.write(data[: max(keep, 0)])
                                await dst.drain()
                                self.cuts += 1
                                print(f"cuts {self.cuts}", file=sys.stderr, flush=True)
                                cut.set()
                                break
                        elif len(seen) > 1 << 16:
                            seen = seen[-64:]
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                cut.set()
                for w in (dst, client_w, up_w):
                    try:
                        w.close()
                    except Exception:  # noqa: BLE001
                        pass

        await asyncio.gather(pump(client_r, up_w, False), pump(up_r, client_w, True))


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("upstream")
    p.add_argument("--cut-every", type=int, default=0)
    a = p.parse_args()
    host, port = a.upstream.rsplit(":", 1)
    relay = Relay((host, int(port)), a.cut_every)
    server = await asyncio.start_server(relay.handle, "127.0.0.1", 0)
    addr = server.sockets[0].getsockname()
    print(f"listening {addr[0]}:{addr[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
