"""The agent bridge: `gateway agent --mcp-server`, an IDE's stdio MCP server in front of a gateway.

An IDE starts the agent as a child process and speaks MCP over its stdin/stdout; the agent forwards
the 13 meta-tools to a running gateway over streamable HTTP. Here the official Python SDK (`mcp`
2.3.0, `stdio_client`) plays the IDE, against a gateway of its own with the suite's two downstream
servers (server-everything, mcp-server-time). What is checked:

- tools/list is the gateway's, with call_tool documenting the `timeout` argument the agent takes;
- filter_tools and describe_tool answer as the gateway does;
- call_tool comes back unwrapped: the wrapped tool's own result (isError, content with native
  images, structuredContent) with the envelope's `tool` in `_meta["muster.giantswarm.io/tool"]`;
- call_tool's `timeout` (seconds) bounds one call: a long-running tool past it is a quick tool error
  naming the timeout; a generous one lets it finish;
- progress and tools/list_changed reach the IDE;
- an IDE on the stateless 2026-07-28 protocol gets the same answers; `--endpoint` defaults to
  MUSTER_ENDPOINT;
- a gateway that is down is a tool error naming the endpoint and `gateway serve`, and the agent
  connects again on the next call once the gateway is back.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import (
    GATEWAY_BIN,
    META_TOOLS,
    REQUEST_TIMEOUT,
    TOOL_META_KEY,
    Gateway,
    connect,
    envelope,
    exposed,
    free_port,
    meta,
    restart_gateway,
    start_gateway_or_fail,
)
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, ImageContent, TextContent, ToolListChangedNotification

pytestmark = pytest.mark.anyio

ECHO = exposed("everything", "echo")
NOW = exposed("time", "get_current_time")
TINY_IMAGE = exposed("everything", "get-tiny-image")
LONG_OP = exposed("everything", "trigger-long-running-operation")

#: The tools the agent's gateway must list before the tests start.
READY_TOOLS = frozenset({ECHO, NOW, LONG_OP})


@pytest.fixture(scope="module")
def agent_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway of this module's own: one test restarts a downstream server on it."""
    workdir = tmp_path_factory.mktemp("agent-gateway")
    gw = start_gateway_or_fail(workdir, READY_TOOLS, "the agent tests' gateway")
    yield gw
    gw.stop()


@asynccontextmanager
async def agent(endpoint: str | None, log: Path, *extra: str, **client: Any) -> AsyncIterator[Client]:
    """The agent as an IDE runs it: a stdio child process, driven by the SDK client.

    `endpoint` is passed as `--endpoint` (None: none is, and MUSTER_ENDPOINT is `client["env"]`'s);
    its stderr goes to `log`; `extra` are more command-line flags; `client` more `Client` options.
    """
    env = {"RUST_LOG": "info", "NO_COLOR": "1", **client.pop("env", {})}
    flags = ["--endpoint", endpoint] if endpoint is not None else []
    params = StdioServerParameters(
        command=str(GATEWAY_BIN),
        args=["agent", "--mcp-server", *flags, *extra],
        env=env,
    )
    client.setdefault("mode", "legacy")
    client.setdefault("read_timeout_seconds", REQUEST_TIMEOUT)
    with open(log, "a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None, **client) as c:
            yield c


def log_of(tmp_path: Path) -> Path:
    return tmp_path / "agent.stderr.log"


def texts(result: CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, TextContent)]


async def unwrapped(c: Client, name: str, arguments: dict[str, Any], **extra: Any) -> CallToolResult:
    """call_tool `name` through the agent; the result must be the tool's own, naming the tool."""
    result = await c.call_tool("call_tool", {"name": name, "arguments": arguments, **extra})
    assert result.meta is not None and TOOL_META_KEY in result.meta, f"no {TOOL_META_KEY} in {result!r}"
    assert result.meta[TOOL_META_KEY]["name"] == name, result.meta
    return result


# --- 1. discovery ---------------------------------------------------------------------------------


async def test_tools_list_is_the_gateways_meta_tools_with_the_timeout_argument(
    agent_gateway: Gateway, tmp_path: Path
) -> None:
    async with connect(agent_gateway.url) as direct:
        gateways = {t.name: t for t in (await direct.list_tools()).tools}
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        listed = {t.name: t for t in (await c.list_tools()).tools}

    assert set(listed) == META_TOOLS
    for name, tool in listed.items():
        mine = tool.model_dump(exclude={"input_schema"})
        assert mine == gateways[name].model_dump(exclude={"input_schema"}), name
        if name != "call_tool":
            assert tool.input_schema == gateways[name].input_schema, name
    schema = listed["call_tool"].input_schema
    timeout = schema["properties"].pop("timeout")
    assert timeout["type"] == "number"
    assert "5m" in timeout["description"], timeout
    assert schema == gateways["call_tool"].input_schema


async def test_filter_tools_and_describe_tool_answer_as_the_gateway(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        found = await meta(c, "filter_tools", {"pattern": "x_time_*", "limit": 50})
        described = await meta(c, "describe_tool", {"name": ECHO})
        ranked = await meta(c, "filter_tools", {"query": "echo the input string"})

    assert {t["name"] for t in found["tools"]} == {NOW, exposed("time", "convert_time")}
    assert ranked["tools"][0]["name"] == ECHO
    assert described["name"] == ECHO
    assert described["server"] == "everything"
    assert described["inputSchema"]["properties"]["message"]["type"] == "string"
    assert "call_tool" in described["invocation"]


# --- 2. call_tool, unwrapped ------------------------------------------------------------------------


async def test_call_tool_answers_the_wrapped_tools_own_result(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        result = await unwrapped(c, ECHO, {"message": "hello agent"})

    assert result.is_error is False
    assert result.content == [TextContent(type="text", text="Echo: hello agent")]
    assert result.meta[TOOL_META_KEY] == {"name": ECHO, "server": "everything", "serverTool": "echo"}


async def test_a_client_of_the_stateless_protocol_gets_the_same_answers(
    agent_gateway: Gateway, tmp_path: Path
) -> None:
    # mode="auto" negotiates 2026-07-28 (no initialize, no session) with the agent over stdio.
    async with agent(agent_gateway.url, log_of(tmp_path), mode="auto") as c:
        listed = {t.name for t in (await c.list_tools()).tools}
        result = await unwrapped(c, ECHO, {"message": "stateless"})

    assert listed == META_TOOLS
    assert texts(result) == ["Echo: stateless"]


async def test_the_endpoint_defaults_to_muster_endpoint(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(None, log_of(tmp_path), env={"MUSTER_ENDPOINT": agent_gateway.url}) as c:
        result = await unwrapped(c, ECHO, {"message": "via MUSTER_ENDPOINT"})

    assert texts(result) == ["Echo: via MUSTER_ENDPOINT"]


async def test_call_tool_keeps_structured_content(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        result = await unwrapped(c, NOW, {"timezone": "UTC"})

    assert result.is_error is False
    [text] = texts(result)
    now = json.loads(text)
    assert now["timezone"] == "UTC"
    assert result.structured_content == now
    assert result.meta[TOOL_META_KEY] == {"name": NOW, "server": "time", "serverTool": "get_current_time"}


async def test_call_tool_puts_native_images_back_in_place(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with connect(agent_gateway.url) as direct:
        env = envelope(await direct.call_tool("call_tool", {"name": TINY_IMAGE, "arguments": {}}))
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        result = await unwrapped(c, TINY_IMAGE, {})

    assert [item.type for item in result.content] == [item["type"] for item in env["content"]] == [
        "text",
        "image",
        "text",
    ]
    image = result.content[1]
    assert isinstance(image, ImageContent)
    assert image.mime_type == "image/png"
    assert len(image.data) == env["content"][1]["dataSize"]
    assert [c.text for c in result.content if isinstance(c, TextContent)] == [
        item["text"] for item in env["content"] if item["type"] == "text"
    ]


async def test_a_failing_tool_stays_an_error_result(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        result = await unwrapped(c, ECHO, {})  # `message` is required

    assert result.is_error is True
    assert any("message" in t for t in texts(result)), result
    assert result.meta[TOOL_META_KEY] == {"name": ECHO, "server": "everything", "serverTool": "echo"}


async def test_a_call_the_gateway_refuses_passes_through(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        result = await c.call_tool("call_tool", {"name": "x_everything_no_such_tool", "arguments": {}})

    assert result.is_error is True
    assert any("x_everything_no_such_tool" in t for t in texts(result)), result


# --- 3. the per-call timeout ------------------------------------------------------------------------


async def test_a_call_past_its_timeout_is_a_quick_error_naming_the_timeout(
    agent_gateway: Gateway, tmp_path: Path
) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        started = time.monotonic()
        result = await c.call_tool(
            "call_tool", {"name": LONG_OP, "arguments": {"duration": 30, "steps": 30}, "timeout": 1}
        )
        elapsed = time.monotonic() - started
        # The agent and the gateway are still fine afterwards.
        after = await unwrapped(c, ECHO, {"message": "after a timeout"})

    assert result.is_error is True
    [text] = texts(result)
    assert "timed out after 1s" in text, text
    assert "`timeout`" in text, text
    assert LONG_OP in text, text
    assert elapsed < 10, f"the 1 s timeout took {elapsed:.1f}s"
    assert texts(after) == ["Echo: after a timeout"]


async def test_a_generous_timeout_lets_the_call_finish(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        result = await unwrapped(c, LONG_OP, {"duration": 1, "steps": 2}, timeout=60)

    assert result.is_error is False, result
    assert texts(result) == ["Long running operation completed. Duration: 1 seconds, Steps: 2."]


async def test_the_agents_own_timeout_bounds_calls_without_one(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path), "--timeout", "1s") as c:
        started = time.monotonic()
        result = await c.call_tool("call_tool", {"name": LONG_OP, "arguments": {"duration": 30, "steps": 30}})
        elapsed = time.monotonic() - started

    assert result.is_error is True
    [text] = texts(result)
    assert "timed out after 1s" in text and "--timeout" in text, text
    assert elapsed < 10, f"the 1 s timeout took {elapsed:.1f}s"


async def test_a_timeout_that_is_not_a_number_of_seconds_is_refused(agent_gateway: Gateway, tmp_path: Path) -> None:
    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        result = await c.call_tool("call_tool", {"name": ECHO, "arguments": {"message": "x"}, "timeout": "soon"})

    assert result.is_error is True
    [text] = texts(result)
    assert "timeout" in text and "positive number of seconds" in text, text


# --- 4. what the gateway sends besides results ------------------------------------------------------


async def test_progress_reaches_the_ide_under_its_own_token(agent_gateway: Gateway, tmp_path: Path) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with agent(agent_gateway.url, log_of(tmp_path)) as c:
        result = await c.call_tool(
            "call_tool", {"name": LONG_OP, "arguments": {"duration": 2, "steps": 4}}, progress_callback=on_progress
        )
        # The SDK runs progress callbacks in tasks of their own: let the last ones run.
        with anyio.move_on_after(2):
            while len(seen) < 4:
                await anyio.sleep(0.05)

    assert result.is_error is False, result
    assert seen == [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)]


async def test_a_tool_list_change_at_the_gateway_reaches_the_ide(agent_gateway: Gateway, tmp_path: Path) -> None:
    changes: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changes.append(message)

    async def catalogue(c: Client) -> set[str]:
        return {t["name"] for t in (await meta(c, "list_tools", {"limit": 1000}))["tools"]}

    async with agent(agent_gateway.url, log_of(tmp_path), message_handler=on_message) as c:
        assert ECHO in await catalogue(c)
        await anyio.sleep(0.5)  # let anything from before this test settle
        before = len(changes)
        # Restarting a downstream server changes the gateway's catalogue twice (out, back in).
        restart = await unwrapped(c, "core_service_restart", {"name": "everything"})
        assert restart.is_error is False, restart
        deadline = time.monotonic() + 30
        while not (len(changes) > before and {ECHO, LONG_OP} <= await catalogue(c)):
            assert time.monotonic() < deadline, "no tools/list_changed reached the IDE after the restart"
            await anyio.sleep(0.25)


# --- 5. a gateway that is down ----------------------------------------------------------------------


async def test_a_gateway_that_is_down_is_an_error_naming_the_endpoint_and_how_to_start_it(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    async with agent(endpoint, log_of(tmp_path)) as c:
        # The IDE still gets the meta-tools to show; each call says what is wrong.
        listed = {t.name for t in (await c.list_tools()).tools}
        result = await c.call_tool("call_tool", {"name": ECHO, "arguments": {"message": "x"}})
        again = await c.call_tool("filter_tools", {"pattern": "x_*"})

    assert listed == META_TOOLS
    for answer in (result, again):
        assert answer.is_error is True, answer
        [text] = texts(answer)
        assert endpoint in text, text
        assert "gateway serve" in text, text
        assert "connection refused" in text, text


async def test_the_agent_connects_again_when_the_gateway_comes_back(tmp_path: Path) -> None:
    gw = await anyio.to_thread.run_sync(
        lambda: start_gateway_or_fail(tmp_path / "gw", frozenset(), "a gateway without servers", servers={})
    )
    try:
        async with agent(gw.url, log_of(tmp_path)) as c:
            assert (await meta(c, "list_core_tools"))["tools"]

            await anyio.to_thread.run_sync(gw.stop)
            down = await c.call_tool("list_core_tools", {})
            assert down.is_error is True, down
            [text] = texts(down)
            assert gw.url in text and "gateway serve" in text, text

            gw = await anyio.to_thread.run_sync(restart_gateway, gw, frozenset())
            assert (await meta(c, "list_core_tools"))["tools"]
            back = await unwrapped(c, "core_service_list", {})
            assert back.is_error is False, back

            # A gateway restarted between two calls: the agent's session there is gone, the next
            # call still goes through.
            await anyio.to_thread.run_sync(gw.stop)
            gw = await anyio.to_thread.run_sync(restart_gateway, gw, frozenset())
            assert (await meta(c, "list_core_tools"))["tools"]
    finally:
        await anyio.to_thread.run_sync(gw.stop)
