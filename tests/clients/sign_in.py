"""A person's MCP client for the sign-in tests: the official Python SDK (`mcp` 2.3.0) calling a
tool of a server the person has not signed in to, through the gateway's `call_tool`.

Driven by `tests/auth_elicitation.rs`, which reads what this client reports and plays the
person's browser (the authorization server's login and consent pages) when it is asked to open a
link. One JSON object per line on stdout:

  {"event": "elicitation", "mode", "url", "elicitation_id", "message"}  the SDK's elicitation callback ran
  {"event": "url_elicitation_required", "elicitations": [...]}         the call failed with -32042
  {"event": "elicitation_complete", "elicitation_id"}                   notifications/elicitation/complete
  {"event": "result", "is_error", "structured", "text"}                 the call's result
  {"event": "error", "code", "message"}                                  the call failed otherwise

Usage: sign_in.py URL --protocol 2026-07-28|2025-11-25 [--consent accept|decline|none]
                  [--bearer TOKEN] [--tool NAME] [--retries N]

--consent none declares no elicitation capability at all. With 2025-11-25, after a -32042 the
client waits for notifications/elicitation/complete and calls again, up to --retries times.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def report(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def result_event(result: types.CallToolResult) -> None:
    text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
    report("result", is_error=bool(result.is_error), structured=result.structured_content, text=text)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--protocol", required=True, choices=["2026-07-28", "2025-11-25"])
    parser.add_argument("--consent", default="accept", choices=["accept", "decline", "none"])
    parser.add_argument("--bearer")
    parser.add_argument("--tool", default="x_protected_whoami")
    parser.add_argument("--retries", type=int, default=1)
    args = parser.parse_args()

    completed = anyio.Event()

    async def on_elicitation(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        report(
            "elicitation",
            mode=getattr(params, "mode", None),
            url=getattr(params, "url", None),
            elicitation_id=getattr(params, "elicitation_id", None),
            message=params.message,
        )
        return types.ElicitResult(action=args.consent)

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if method == "notifications/elicitation/complete":
            report("elicitation_complete", elicitation_id=message.params.elicitation_id)
            completed.set()

    headers = {"Authorization": f"Bearer {args.bearer}"} if args.bearer else None
    transport = streamable_http_client(args.url, http_client=create_mcp_http_client(headers=headers))
    mode = "legacy" if args.protocol == "2025-11-25" else args.protocol
    client = Client(
        transport,
        mode=mode,
        cache=None,
        read_timeout_seconds=120,
        elicitation_callback=None if args.consent == "none" else on_elicitation,
        message_handler=on_message,
    )
    async with client:
        report("connected", protocol=client.protocol_version)
        for attempt in range(args.retries + 1):
            try:
                result = await client.call_tool("call_tool", {"name": args.tool, "arguments": {}})
            except MCPError as e:
                data = e.error.data if isinstance(e.error.data, dict) else {}
                if e.error.code == -32042:
                    report("url_elicitation_required", elicitations=data.get("elicitations"))
                    if attempt < args.retries:
                        with anyio.fail_after(60):
                            await completed.wait()
                        completed = anyio.Event()
                        continue
                else:
                    report("error", code=e.error.code, message=e.error.message)
                return 0
            result_event(result)
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
