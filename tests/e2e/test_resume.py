"""A call's stream lost mid-call, resumed by the MCP Python SDK through the gateway.

The gateway answers `tools/call` on an established session itself (in front of rmcp's
streamable-HTTP service). Its stream is primed with an event id and a `retry`, and each event has
an id, so a client that loses the stream asks for the rest with `GET` and `Last-Event-ID`
(SEP-1699), as it would from rmcp. Here a loopback TCP proxy between the SDK and the gateway cuts
the connection of one call right after the stream's first bytes (the priming event); the SDK
reconnects through the proxy, and must get the call's progress and its result. The proxy takes a
side resetting its connection in its stride.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.abc
import pytest
from harness import Gateway, connect
from test_relay import LONG_OP, call, texts

pytestmark = pytest.mark.anyio

# What a side resetting or closing its connection raises in the other direction's copy.
PEER_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError)


class CuttingProxy:
    """Forwards loopback TCP to the gateway; cuts the first connection that carries a request
    naming `marker`, once the answer's first bytes (the priming event) went back."""

    def __init__(self, target_port: int, marker: bytes) -> None:
        self.target_port = target_port
        self.marker = marker
        self.cut = False
        self.resumed_with: list[str] = []

    async def serve(self, listener: anyio.abc.SocketListener) -> None:
        await listener.serve(self.handle)

    async def handle(self, client: anyio.abc.SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", self.target_port) as upstream:
            marked = anyio.Event()
            async with anyio.create_task_group() as tg:

                async def up() -> None:
                    try:
                        async for chunk in client:
                            if not self.cut and self.marker in chunk:
                                marked.set()
                            for line in chunk.split(b"\r\n"):
                                if line.lower().startswith(b"last-event-id:"):
                                    self.resumed_with.append(line.split(b":", 1)[1].strip().decode())
                            await upstream.send(chunk)
                    except PEER_GONE:
                        pass  # a side reset its connection (an SDK closing one with bytes unread)
                    tg.cancel_scope.cancel()

                async def down() -> None:
                    try:
                        async for chunk in upstream:
                            await client.send(chunk)
                            if marked.is_set() and not self.cut and b"id: call-" in chunk:
                                self.cut = True
                                break
                    except PEER_GONE:
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(up)
                tg.start_soon(down)


async def test_a_call_whose_stream_is_cut_is_resumed_by_the_sdk(gateway: Gateway) -> None:
    proxy = CuttingProxy(int(gateway.base_url.rsplit(":", 1)[1]), b"trigger-long-running-operation")
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with anyio.create_task_group() as tg:
        tg.start_soon(proxy.serve, listener)
        async with connect(f"http://127.0.0.1:{port}/mcp") as client:
            started = time.monotonic()
            env: dict[str, Any] = await call(client, LONG_OP, {"duration": 2, "steps": 4}, progress_callback=on_progress)
            took = time.monotonic() - started
            with anyio.move_on_after(2):
                while len(seen) < 4:
                    await anyio.sleep(0.05)
        tg.cancel_scope.cancel()

    assert proxy.cut, "the call's stream was not cut: the test proves nothing"
    assert proxy.resumed_with and all(i.startswith("call-") for i in proxy.resumed_with), proxy.resumed_with
    assert texts(env) == ["Long running operation completed. Duration: 2 seconds, Steps: 4."]
    # What the call reported after the cut reached the client, in order, under its own token.
    assert seen == [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)], seen
    assert took < 20, f"the resumed call took {took:.1f}s"
