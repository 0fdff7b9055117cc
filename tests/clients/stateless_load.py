"""Stateless clients for the replica failover test: the official Python SDK (`mcp` 2.3.0) in
2026-07-28 mode, where no request belongs to a session, so a load balancer may send each one to
any replica. Driven by `tests/replicas_failover.rs`, which kills a replica while they call.

Each of --clients clients calls the gateway's `call_tool` meta-tool --calls times, with the
tool --tool and {"text": "client C call I"}; a call that fails (a refused or cut connection, a
502 from the load balancer, a wrong answer) is sent again, up to five tries. One JSON object per
line on stdout:

  {"event": "ready", "protocol"}                      every client is connected
  {"event": "done", "answered", "retries", "unanswered": [...], "errors": [...]}

Usage: stateless_load.py URL [--clients N] [--calls N] [--tool NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import AsyncExitStack
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


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--tool", default="x_plain_echo")
    args = parser.parse_args()

    answered = 0
    retries = 0
    unanswered: list[str] = []
    errors: list[str] = []

    async with AsyncExitStack() as stack:
        clients = []
        for _ in range(args.clients):
            transport = streamable_http_client(args.url, http_client=create_mcp_http_client())
            client = Client(transport, mode="2026-07-28", cache=None, read_timeout_seconds=20)
            clients.append(await stack.enter_async_context(client))
        report("ready", protocol=clients[0].protocol_version)

        async def run(c: int, client: Client) -> None:
            nonlocal answered, retries
            for i in range(args.calls):
                expected = f"client {c} call {i}"
                for _ in range(TRIES):
                    try:
                        with anyio.fail_after(20):
                            result = await client.call_tool(
                                "call_tool", {"name": args.tool, "arguments": {"text": expected}}
                            )
                        if not result.is_error and expected in text_of(result):
                            answered += 1
                            break
                        errors.append(f"{expected}: {text_of(result)[:200]}")
                    except Exception as e:  # noqa: BLE001 - every failure is retried, and counted
                        errors.append(f"{expected}: {type(e).__name__}: {str(e)[:200]}")
                    retries += 1
                    await anyio.sleep(0.3)
                else:
                    unanswered.append(expected)
                await anyio.sleep(0.1)

        async with anyio.create_task_group() as group:
            for c, client in enumerate(clients):
                group.start_soon(run, c, client)

    report("done", answered=answered, retries=retries, unanswered=unanswered, errors=errors[:20])
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
