"""Every protocol generation through every way in: the compatibility matrix.

A client negotiates a protocol version with whatever it talks to, and every answer it gets must be
valid for that version. The official Python SDK (`mcp` 2.3.0) checks that strictly: on the
stateless 2026-07-28 protocol a `tools/call`, `resources/read` or `prompts/get` result without
`resultType` does not validate. The matrix, one test per cell:

- ways in: the gateway over streamable HTTP (`http`), the agent bridge over stdio in front of it
  (`bridge`), and `gateway standalone` (both in one process, stdio);
- generations: 2025-11-25 with an initialize handshake and a session (`mode="legacy"`), and the
  stateless 2026-07-28 (`mode="auto"`, which negotiates it with each of the three);
- in each cell, all 13 meta-tools, and the aggregated tool called natively (the gateway runs
  `aggregator.exposure: both`); over HTTP also a native `resources/read` and `prompts/get` (the
  bridge serves tools only).

A cell runs every operation and fails naming each one that failed, so one run shows the whole
row. The downstream servers are the suite's real ones (server-everything and mcp-server-time over
stdio), which speak 2025-11-25 to the gateway: their results reach a 2026-07-28 client only
through the gateway's rewriting. `test_ts_matrix.py` runs the same operations with the TypeScript
SDK.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import (
    GATEWAY_BIN,
    REQUEST_TIMEOUT,
    Gateway,
    connect,
    exposed,
    free_port,
    write_config,
)
from conftest import EXPOSURE_BOTH, READY_TOOLS
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

pytestmark = pytest.mark.anyio

ECHO = exposed("everything", "echo")
NOW = exposed("time", "get_current_time")
FEATURES_URI = "demo://resource/static/document/features.md"
SIMPLE_PROMPT = exposed("everything", "simple-prompt")

#: Protocol generation -> the SDK client's `mode` that negotiates it.
GENERATIONS = {"2025-11-25": "legacy", "2026-07-28": "auto"}
WAYS = ("http", "bridge", "standalone")

def stdio_params(args: list[str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(GATEWAY_BIN), args=args, env={"RUST_LOG": "info", "NO_COLOR": "1"}
    )


@asynccontextmanager
async def open_client(way: str, mode: str, gateway: Gateway, tmp_path: Path) -> AsyncIterator[Client]:
    """A Python SDK client of `mode` that reaches the aggregated servers `way`."""
    if way == "http":
        async with connect(gateway.url, mode=mode) as c:
            yield c
        return
    if way == "bridge":
        params = stdio_params(["agent", "--mcp-server", "--endpoint", gateway.url])
    else:
        config = tmp_path / "standalone-config"
        write_config(config, free_port(), aggregator=EXPOSURE_BOTH)
        params = stdio_params(["standalone", "--config-path", str(config)])
    with open(tmp_path / f"{way}.stderr.log", "a") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode=mode, cache=None, read_timeout_seconds=REQUEST_TIMEOUT
        ) as c:
            yield c


async def wait_for_tools(c: Client, names: frozenset[str], seconds: float = 60.0) -> None:
    """Until `tools/list` has `names` (a standalone gateway starts its downstream servers first)."""
    deadline = time.monotonic() + seconds
    while True:
        listed = {t.name for t in (await c.list_tools()).tools}
        if names <= listed:
            return
        assert time.monotonic() < deadline, f"tools/list never had {sorted(names - listed)}"
        await anyio.sleep(0.5)


def texts(result: CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, TextContent)]


async def body_of(c: Client, tool: str, arguments: dict[str, Any]) -> Any:
    """A meta-tool's JSON answer; it must not be an error result."""
    result = await c.call_tool(tool, arguments)
    assert result.is_error is not True, f"error result: {texts(result)}"
    [text] = texts(result)
    return json.loads(text)


def names_in(body: Any, key: str, field: str = "name") -> set[str]:
    items = body[key] if isinstance(body, dict) else body
    return {item[field] for item in items}


# --- the operations of a cell: each raises when its answer is wrong or does not validate --------


async def list_tools(c: Client) -> None:
    assert ECHO in names_in(await body_of(c, "list_tools", {"limit": 1000}), "tools")


async def filter_tools(c: Client) -> None:
    assert names_in(await body_of(c, "filter_tools", {"pattern": "x_time_*"}), "tools") == {
        NOW,
        exposed("time", "convert_time"),
    }


async def describe_tool(c: Client) -> None:
    body = await body_of(c, "describe_tool", {"name": ECHO})
    assert body["name"] == ECHO and body["server"] == "everything", body


async def list_core_tools(c: Client) -> None:
    assert "core_mcpserver_list" in names_in(await body_of(c, "list_core_tools", {}), "tools")


async def call_tool(c: Client) -> None:
    result = await c.call_tool("call_tool", {"name": ECHO, "arguments": {"message": "matrix"}})
    assert result.is_error is not True, texts(result)
    # Over HTTP the gateway's envelope; through the bridge the tool's own result, unwrapped.
    assert any("Echo: matrix" in t for t in texts(result)), texts(result)


async def list_resources(c: Client) -> None:
    assert FEATURES_URI in names_in(await body_of(c, "list_resources", {}), "resources", "uri")


async def filter_resources(c: Client) -> None:
    body = await body_of(c, "filter_resources", {"server": "everything", "limit": 50})
    assert FEATURES_URI in names_in(body, "resources", "uri")


async def describe_resource(c: Client) -> None:
    assert (await body_of(c, "describe_resource", {"uri": FEATURES_URI}))["uri"] == FEATURES_URI


async def get_resource(c: Client) -> None:
    result = await c.call_tool("get_resource", {"uri": FEATURES_URI})
    assert result.is_error is not True, texts(result)
    assert any("# Everything Server - Features" in t for t in texts(result)), texts(result)


async def list_prompts(c: Client) -> None:
    assert SIMPLE_PROMPT in names_in(await body_of(c, "list_prompts", {}), "prompts")


async def filter_prompts(c: Client) -> None:
    assert SIMPLE_PROMPT in names_in(await body_of(c, "filter_prompts", {"pattern": "x_everything_*"}), "prompts")


async def describe_prompt(c: Client) -> None:
    assert (await body_of(c, "describe_prompt", {"name": SIMPLE_PROMPT}))["name"] == SIMPLE_PROMPT


async def get_prompt(c: Client) -> None:
    body = await body_of(c, "get_prompt", {"name": SIMPLE_PROMPT})
    messages = body["messages"] if isinstance(body, dict) else body
    assert messages[0]["content"]["text"] == "This is a simple prompt without arguments.", messages


async def native_tool_call(c: Client) -> None:
    result = await c.call_tool(ECHO, {"message": "native"})
    assert result.is_error is not True, texts(result)
    assert texts(result) == ["Echo: native"], result


async def native_structured_tool_call(c: Client) -> None:
    result = await c.call_tool(NOW, {"timezone": "UTC"})
    assert result.is_error is not True, texts(result)
    assert isinstance(result.structured_content, dict) and result.structured_content["timezone"] == "UTC", result


async def native_resource_read(c: Client) -> None:
    result = await c.read_resource(FEATURES_URI)
    [content] = result.contents
    assert "# Everything Server - Features" in getattr(content, "text", ""), content


async def native_prompt_get(c: Client) -> None:
    result = await c.get_prompt(SIMPLE_PROMPT)
    assert result.messages[0].content.text == "This is a simple prompt without arguments.", result


Operation = Callable[[Client], Awaitable[None]]

META_OPERATIONS: tuple[Operation, ...] = (
    list_tools,
    filter_tools,
    describe_tool,
    list_core_tools,
    call_tool,
    list_resources,
    filter_resources,
    describe_resource,
    get_resource,
    list_prompts,
    filter_prompts,
    describe_prompt,
    get_prompt,
)
#: Every way in serves tools; only the gateway itself serves resources and prompts.
NATIVE_TOOL_OPERATIONS: tuple[Operation, ...] = (native_tool_call, native_structured_tool_call)
NATIVE_HTTP_OPERATIONS: tuple[Operation, ...] = (native_resource_read, native_prompt_get)


def test_the_matrix_names_all_thirteen_meta_tools() -> None:
    from harness import META_TOOLS

    assert {op.__name__ for op in META_OPERATIONS} == META_TOOLS


@pytest.mark.parametrize("generation", list(GENERATIONS))
@pytest.mark.parametrize("way", WAYS)
async def test_every_answer_is_valid_for_the_negotiated_protocol(
    way: str, generation: str, both_gateway: Gateway, tmp_path: Path
) -> None:
    operations = META_OPERATIONS + NATIVE_TOOL_OPERATIONS
    if way == "http":
        operations += NATIVE_HTTP_OPERATIONS
    failures: list[str] = []
    async with open_client(way, GENERATIONS[generation], both_gateway, tmp_path) as c:
        assert c.protocol_version == generation, f"{way} negotiated {c.protocol_version}, not {generation}"
        await wait_for_tools(c, READY_TOOLS)
        for operation in operations:
            try:
                with anyio.fail_after(REQUEST_TIMEOUT):
                    await operation(c)
            except Exception as e:  # noqa: BLE001 - every operation of the cell is reported
                failures.append(f"{operation.__name__}: {type(e).__name__}: {e}".splitlines()[0][:400])
    assert not failures, f"{way} on {generation}: {len(failures)} of {len(operations)} failed:\n" + "\n".join(failures)
