"""Stateless clients for the replica failover test: the official Python SDK (`mcp` 2.3.0) in
2026-07-28 mode, where no request belongs to a session, so a load balancer may send each one to
any replica. Driven by `tests/replicas_failover.rs`, which kills a replica while they call.

Each of --clients clients calls the gateway's `call_tool` meta-tool --calls times, with the
tool --tool and {"text": "client C call I"} (or, with --seconds S, the demo server's sleep tool
with {"seconds": S}); a call that fails (a refused or cut connection, a
502 from the load balancer, a wrong answer) is sent again, up to five tries. One JSON object per
line on stdout:

  {"event": "ready", "protocol"}                      every client is connected
  {"event": "done", "answered", "retries", "unanswered": [...], "errors": [...]}

Usage: stateless_load.py URL [--clients N] [--calls N] [--tool NAME] [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TRIES = 5


def report(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions an exception group holds, however deep; else the exception itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def described(error: BaseException) -> str:
    return "; ".join(f"{type(e).__name__}: {str(e)[:160]}" for e in leaves(error))


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--tool", default="x_plain_echo")
    parser.add_argument("--seconds", help="call the demo server's sleep tool for this long instead")
    args = parser.parse_args()

    def call_of(expected: str) -> tuple[dict[str, Any], str]:
        """The tool's arguments, and what its answer must contain."""
        if args.seconds:
            return {"seconds": float(args.seconds)}, f"slept {args.seconds}s"
        return {"text": expected}, expected

    answered = 0
    retries = 0
    unanswered: list[str] = []
    errors: list[str] = []
    connected = 0
    all_connected = anyio.Event()
    protocol: list[str] = []

    def connection() -> Client:
        transport = streamable_http_client(args.url, http_client=create_mcp_http_client())
        return Client(transport, mode="2026-07-28", cache=None, read_timeout_seconds=20)

    async def run(c: int) -> None:
        """Client c's calls. A failed call is sent again; a client whose connection broke
        (its transport gave up) connects again, as an application would."""
        nonlocal answered, retries, connected
        i, tries, first = 0, 0, True
        while i < args.calls:
            try:
                async with connection() as client:
                    if first:
                        first = False
                        protocol.append(client.protocol_version)
                        connected += 1
                        if connected == args.clients:
                            all_connected.set()
                        await all_connected.wait()
                    while i < args.calls:
                        expected = f"client {c} call {i}"
                        arguments, answer = call_of(expected)
                        try:
                            with anyio.fail_after(20):
                                result = await client.call_tool(
                                    "call_tool", {"name": args.tool, "arguments": arguments}
                                )
                            ok = not result.is_error and answer in text_of(result)
                            if not ok:
                                errors.append(f"{expected}: {text_of(result)[:200]}")
                        except Exception as e:  # noqa: BLE001 - every failure is retried, and counted
                            ok = False
                            errors.append(f"{expected}: {described(e)}")
                        if ok:
                            answered += 1
                            i, tries = i + 1, 0
                            await anyio.sleep(0.1)
                            continue
                        retries += 1
                        tries += 1
                        if tries >= TRIES:
                            unanswered.append(expected)
                            i, tries = i + 1, 0
                        await anyio.sleep(0.3)
            except Exception as e:  # noqa: BLE001 - the connection broke: connect again
                errors.append(f"client {c} connection: {described(e)}")
                retries += 1
                tries += 1
                if tries >= TRIES:
                    unanswered.append(f"client {c} call {i}")
                    i, tries = i + 1, 0
                await anyio.sleep(0.3)

    async def ready() -> None:
        await all_connected.wait()
        report("ready", protocol=protocol[0])

    async with anyio.create_task_group() as group:
        group.start_soon(ready)
        for c in range(args.clients):
            group.start_soon(run, c)

    report("done", answered=answered, retries=retries, unanswered=unanswered, errors=errors[:20])
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
