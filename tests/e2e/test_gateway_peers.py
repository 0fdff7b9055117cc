"""The reference gateway, driven by the official Python MCP SDK, in front of real downstream servers.

Downstream: server-everything (npm, stdio) as `everything` and mcp-server-time (PyPI, stdio) as `time`.
Client: `mcp` 2.3.0 over streamable HTTP. Everything the gateway aggregates is reached through its 13
meta-tools, whose results are one JSON text item (call_tool: a JSON envelope first).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from harness import (
    EVERYTHING_DOCS,
    EVERYTHING_PROMPTS,
    EVERYTHING_RESOURCES,
    EVERYTHING_TOOLS,
    META_TOOLS,
    TIME_TOOLS,
    TOOL_META_KEY,
    Gateway,
    connect,
    entries,
    envelope,
    exposed,
    meta,
    meta_error,
    text_of,
)
from mcp import Client, MCPError
from mcp.types import ImageContent

pytestmark = pytest.mark.anyio

ECHO = exposed("everything", "echo")
NOW = exposed("time", "get_current_time")
FEATURES_URI = "demo://resource/static/document/features.md"
SIMPLE_PROMPT = exposed("everything", "simple-prompt")
ARGS_PROMPT = exposed("everything", "args-prompt")

#: server-everything declares these on echo (and on every read-only tool of its own).
EVERYTHING_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def hints(annotations: Any) -> dict[str, Any]:
    return {k: v for k, v in (annotations or {}).items() if k.endswith("Hint")}


# --- 1. the handshake and the native tool list ---------------------------------------------------


async def test_initialize_and_native_tools_are_the_13_meta_tools(client: Client) -> None:
    assert client.protocol_version in {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
    assert client.server_info is not None and client.server_info.name
    assert client.server_capabilities.tools is not None

    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    assert sorted(names) == sorted(META_TOOLS)
    assert len(names) == 13, f"duplicates in {names}"
    assert listed.next_cursor is None

    for tool in listed.tools:
        a = tool.annotations
        assert a is not None, f"{tool.name} has no annotations"
        assert a.open_world_hint is True, tool.name
        if tool.name == "call_tool":
            assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint) == (False, True, False)
        else:
            assert a.read_only_hint is True, tool.name
        assert tool.input_schema.get("type") == "object", tool.name
        assert tool.description, tool.name
        first_line = tool.description.strip().splitlines()[0]
        assert len(first_line) <= 120, f"{tool.name}: summary line of {len(first_line)} chars"

    by_name = {t.name: t for t in listed.tools}
    assert "name" in by_name["call_tool"].input_schema.get("required", [])
    assert {"name", "arguments"} <= set(by_name["call_tool"].input_schema["properties"])
    assert {"limit", "offset"} <= set(by_name["list_tools"].input_schema["properties"])


async def test_sdk_default_negotiation_reaches_the_gateway(gateway: Gateway) -> None:
    # The SDK's default mode probes `server/discover` first and falls back to initialize.
    async with connect(gateway.url, mode="auto") as c:
        assert sorted(t.name for t in (await c.list_tools()).tools) == sorted(META_TOOLS)
        assert await meta(c, "describe_tool", {"name": ECHO})


async def test_aggregated_tool_is_not_callable_by_name(client: Client) -> None:
    try:
        result = await client.call_tool(ECHO, {"message": "direct"})
    except MCPError:
        return  # a protocol error is fine too
    assert result.is_error is True


# --- 2. list_tools paging ------------------------------------------------------------------------


async def test_list_tools_pages_to_the_end(client: Client) -> None:
    limit = 7
    offset = 0
    pages: list[dict[str, Any]] = []
    while True:
        page = await meta(client, "list_tools", {"limit": limit, "offset": offset})
        pages.append(page)
        assert page["filters"]["limit"] == limit
        assert page["filters"]["offset"] == offset
        assert page["total"] == page["total_tools"] == pages[0]["total"]
        assert page["filtered_count"] == len(page["tools"]) <= limit
        offset += len(page["tools"])
        assert page["truncated"] is (offset < page["total"]), page
        if not page["truncated"]:
            break
        assert len(page["tools"]) == limit, "a page before the last one is full"
        assert len(pages) < 100, "list_tools never stopped paging"

    total = pages[0]["total"]
    tools = [t for p in pages for t in p["tools"]]
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names)) == total, "pages overlap or miss tools"
    assert [p["truncated"] for p in pages] == [True] * (len(pages) - 1) + [False]
    assert len(pages) == -(-total // limit)

    expected = {exposed("everything", t) for t in EVERYTHING_TOOLS} | {exposed("time", t) for t in TIME_TOOLS}
    assert expected <= set(names), f"missing {sorted(expected - set(names))}"
    assert not META_TOOLS & set(names), "meta-tools are not part of the catalogue"

    by_name = {t["name"]: t for t in tools}
    assert by_name[ECHO]["server"] == "everything"
    assert by_name[ECHO]["kind"] == "tool"
    assert by_name[ECHO]["summary"] == "Echoes back the input string"
    assert hints(by_name[ECHO].get("annotations")) == EVERYTHING_READ_ONLY
    assert by_name[NOW]["server"] == "time"
    assert by_name[NOW]["kind"] == "tool"
    assert by_name[NOW]["summary"] == "Get current time in a specific timezone"
    for t in tools:
        assert set(t) <= {"name", "summary", "server", "kind", "annotations", "labels"}, t
        assert t["kind"] in {"tool", "workflow", "core"}, t
        assert len(t["summary"]) <= 123, t
        assert "\n" not in t["summary"], t
        if len(t["summary"]) > 120:
            assert t["summary"].endswith("..."), t
        if t["name"].startswith("x_everything_"):
            assert t["server"] == "everything", t
        if t["name"].startswith("x_time_"):
            assert t["server"] == "time", t


async def test_list_tools_defaults_and_bounds(client: Client) -> None:
    page = await meta(client, "list_tools")
    assert page["filters"]["limit"] == 50
    assert page["filters"]["offset"] == 0
    assert page["filtered_count"] == len(page["tools"]) == min(50, page["total"])
    assert page["truncated"] is (page["total"] > 50)

    beyond = await meta(client, "list_tools", {"limit": 5, "offset": page["total"] + 10})
    assert beyond["tools"] == []
    assert beyond["truncated"] is False
    assert beyond["total"] == page["total"]

    assert "limit" in await meta_error(client, "list_tools", {"limit": 0})
    assert "offset" in await meta_error(client, "list_tools", {"offset": -1})


# --- 3. describe_tool and filter_tools -----------------------------------------------------------


async def test_describe_tool_echo(client: Client) -> None:
    d = await meta(client, "describe_tool", {"name": ECHO})
    assert d["name"] == ECHO
    assert d["title"] == "Echo Tool"
    assert d["description"] == "Echoes back the input string"
    assert d["server"] == "everything"
    assert d["kind"] == "tool"
    assert hints(d.get("annotations")) == EVERYTHING_READ_ONLY
    schema = d["inputSchema"]
    assert schema["type"] == "object"
    assert schema["properties"]["message"]["type"] == "string"
    assert schema["required"] == ["message"]
    assert "outputSchema" not in d
    assert "call_tool" in d["invocation"]
    assert ECHO in d["invocation"]


async def test_describe_tool_forwards_output_schema(client: Client) -> None:
    d = await meta(client, "describe_tool", {"name": NOW})
    assert d["server"] == "time"
    assert d["inputSchema"]["required"] == ["timezone"]
    out = d["outputSchema"]
    assert out["type"] == "object"
    assert set(out["required"]) == {"timezone", "datetime", "day_of_week", "is_dst"}

    # $defs and $ref of a downstream schema survive (mcp-server-time's convert_time uses them).
    conv = await meta(client, "describe_tool", {"name": exposed("time", "convert_time")})
    assert conv["outputSchema"]["properties"]["source"] == {"$ref": "#/$defs/TimeResult"}
    assert "TimeResult" in conv["outputSchema"]["$defs"]


async def test_describe_tool_unknown_is_an_error_naming_it(client: Client) -> None:
    text = await meta_error(client, "describe_tool", {"name": "x_everything_no_such_tool"})
    assert "x_everything_no_such_tool" in text


async def test_filter_tools_by_pattern(client: Client) -> None:
    body = await meta(client, "filter_tools", {"pattern": "x_time_*", "limit": 50})
    assert {t["name"] for t in body["tools"]} == {exposed("time", t) for t in TIME_TOOLS}
    assert body["total"] == 2
    assert body["truncated"] is False
    assert all(t["server"] == "time" and t["kind"] == "tool" for t in body["tools"])

    # default page of 5, paged by offset
    first = await meta(client, "filter_tools", {"pattern": "x_everything_*"})
    assert first["filters"]["limit"] == 5
    assert len(first["tools"]) == 5
    assert first["total"] >= len(EVERYTHING_TOOLS)
    assert first["truncated"] is True
    second = await meta(client, "filter_tools", {"pattern": "x_everything_*", "offset": 5})
    assert not {t["name"] for t in first["tools"]} & {t["name"] for t in second["tools"]}


async def test_filter_tools_query_ranks_echo_first(client: Client) -> None:
    body = await meta(client, "filter_tools", {"query": "echo the input string"})
    assert body["tools"], body
    assert body["tools"][0]["name"] == ECHO
    assert body["tools"][0]["score"] > 0


async def test_list_core_tools_lists_core_tools_with_schemas(client: Client) -> None:
    body = await meta(client, "list_core_tools")
    names = [t["name"] for t in body["tools"]]
    assert names, "no core tools"
    assert "core_mcpserver_list" in names
    assert body["total"] == body["filtered_count"] == len(names)
    assert body["truncated"] is False
    for t in body["tools"]:
        assert t["name"].startswith("core_"), t
        assert t["kind"] == "core", t
        assert "server" not in t, t
        assert t["inputSchema"]["type"] == "object", t
        assert t["description"], t


# --- 4. call_tool --------------------------------------------------------------------------------


async def test_call_tool_echo_envelope(client: Client) -> None:
    result = await client.call_tool("call_tool", {"name": ECHO, "arguments": {"message": "hello e2e"}})
    assert result.is_error is False
    env = envelope(result)
    assert env["isError"] is False
    texts = [c for c in env["content"] if c.get("type") == "text"]
    assert len(env["content"]) == 1 and len(texts) == 1, env
    assert "hello e2e" in texts[0]["text"]
    assert texts[0]["text"] == "Echo: hello e2e"
    expected_tool = {"name": ECHO, "server": "everything", "serverTool": "echo"}
    assert env["tool"] == expected_tool
    assert result.meta is not None, "call_tool result has no _meta"
    assert result.meta[TOOL_META_KEY] == expected_tool


async def test_call_tool_time_with_structured_content(client: Client) -> None:
    result = await client.call_tool("call_tool", {"name": NOW, "arguments": {"timezone": "UTC"}})
    assert result.is_error is False
    env = envelope(result)
    assert env["isError"] is False
    assert env["tool"] == {"name": NOW, "server": "time", "serverTool": "get_current_time"}
    now = json.loads(env["content"][0]["text"])
    assert now["timezone"] == "UTC"
    assert now["datetime"].endswith("+00:00")
    assert now["is_dst"] is False
    assert env["structuredContent"] == now
    # the native structuredContent mirrors the wrapped tool's
    assert result.structured_content == now


async def test_call_tool_image_is_size_only_in_envelope_and_native_after_it(client: Client) -> None:
    result = await client.call_tool("call_tool", {"name": exposed("everything", "get-tiny-image"), "arguments": {}})
    assert result.is_error is False
    env = envelope(result)
    assert [c["type"] for c in env["content"]] == ["text", "image", "text"]
    image = env["content"][1]
    assert image["mimeType"] == "image/png"
    assert isinstance(image["dataSize"], int) and image["dataSize"] > 0
    assert "data" not in image
    natives = [c for c in result.content[1:] if isinstance(c, ImageContent)]
    assert len(natives) == 1
    assert natives[0].mime_type == "image/png"
    assert len(natives[0].data) > 1000


async def test_call_tool_downstream_error_is_an_error_result(client: Client) -> None:
    result = await client.call_tool("call_tool", {"name": ECHO, "arguments": {}})
    assert result.is_error is True
    env = envelope(result)
    assert env["isError"] is True
    assert "message" in env["content"][0]["text"]
    assert env["tool"] == {"name": ECHO, "server": "everything", "serverTool": "echo"}


async def test_call_tool_without_name_is_an_error(client: Client) -> None:
    text = await meta_error(client, "call_tool", {"arguments": {}})
    assert "name" in text


async def test_call_tool_with_non_object_arguments_is_an_error(client: Client) -> None:
    for bad in ("message=hi", ["hi"], 3):
        text = await meta_error(client, "call_tool", {"name": ECHO, "arguments": bad})
        assert "arguments" in text, bad


async def test_call_tool_unknown_tool_is_an_error_naming_it(client: Client) -> None:
    text = await meta_error(client, "call_tool", {"name": "x_everything_no_such_tool", "arguments": {}})
    assert "x_everything_no_such_tool" in text


async def test_calls_run_concurrently_on_one_session(client: Client) -> None:
    results: dict[int, str] = {}

    async def one(i: int) -> None:
        r = await client.call_tool("call_tool", {"name": ECHO, "arguments": {"message": f"m{i}"}})
        results[i] = envelope(r)["content"][0]["text"]

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    assert results == {i: f"Echo: m{i}" for i in range(8)}


async def test_call_tool_core_tool_names_only_the_tool(client: Client) -> None:
    result = await client.call_tool("call_tool", {"name": "core_mcpserver_list", "arguments": {}})
    assert result.is_error is False
    env = envelope(result)
    assert env["isError"] is False
    assert env["tool"] == {"name": "core_mcpserver_list"}
    assert result.meta is not None and result.meta[TOOL_META_KEY] == {"name": "core_mcpserver_list"}
    listing = json.loads(env["content"][0]["text"])
    assert sorted(s["name"] for s in listing["mcpServers"]) == ["everything", "time"]
    assert listing["total"] == 2


# --- 5. resources and prompts through the meta-tools ---------------------------------------------


async def test_list_resources_has_everythings_documents(client: Client) -> None:
    resources = entries(await meta(client, "list_resources"), "resources")
    by_uri = {r["uri"]: r for r in resources}
    assert EVERYTHING_RESOURCES <= set(by_uri), f"missing {sorted(EVERYTHING_RESOURCES - set(by_uri))}"
    for doc in EVERYTHING_DOCS:
        r = by_uri[f"demo://resource/static/document/{doc}"]
        assert r["server"] == "everything"
        assert r["name"] == doc
        assert r["mimeType"] == "text/markdown"


async def test_get_resource_returns_its_text(client: Client) -> None:
    result = await client.call_tool("get_resource", {"uri": FEATURES_URI})
    assert result.is_error is not True, text_of(result)
    assert "# Everything Server - Features" in text_of(result)

    scoped = await client.call_tool("get_resource", {"uri": FEATURES_URI, "server": "everything"})
    assert scoped.is_error is not True, text_of(scoped)
    assert "# Everything Server - Features" in text_of(scoped)


async def test_describe_resource_and_unknown_resource(client: Client) -> None:
    d = await meta(client, "describe_resource", {"uri": FEATURES_URI})
    assert d["uri"] == FEATURES_URI
    assert d["name"] == "features.md"
    assert d["mimeType"] == "text/markdown"

    text = await meta_error(client, "get_resource", {"uri": "demo://resource/static/document/nope.md"})
    assert "nope.md" in text


async def test_filter_resources_by_server(client: Client) -> None:
    body = await meta(client, "filter_resources", {"server": "everything", "limit": 50})
    uris = {r["uri"] for r in body["resources"]}
    assert EVERYTHING_RESOURCES <= uris
    assert body["total"] == len(body["resources"])
    assert all(r["server"] == "everything" for r in body["resources"])
    none = await meta(client, "filter_resources", {"server": "time", "limit": 50})
    assert none["resources"] == [] and none["total"] == 0


async def test_list_prompts_has_everythings_prompts(client: Client) -> None:
    prompts = entries(await meta(client, "list_prompts"), "prompts")
    by_name = {p["name"]: p for p in prompts}
    expected = {exposed("everything", p) for p in EVERYTHING_PROMPTS}
    assert expected <= set(by_name), f"missing {sorted(expected - set(by_name))}"
    assert by_name[SIMPLE_PROMPT]["description"] == "A prompt with no arguments"


async def test_get_prompt_simple_and_with_arguments(client: Client) -> None:
    messages = entries(await meta(client, "get_prompt", {"name": SIMPLE_PROMPT}), "messages")
    assert len(messages) == 1
    assert messages[0]["role"] == "user"
    assert messages[0]["content"]["type"] == "text"
    assert messages[0]["content"]["text"] == "This is a simple prompt without arguments."

    messages = entries(
        await meta(client, "get_prompt", {"name": ARGS_PROMPT, "arguments": {"city": "Berlin"}}), "messages"
    )
    assert messages[0]["content"]["text"] == "What's weather in Berlin?"


async def test_describe_prompt_and_unknown_prompt(client: Client) -> None:
    d = await meta(client, "describe_prompt", {"name": ARGS_PROMPT})
    assert d["name"] == ARGS_PROMPT
    args = {a["name"]: a for a in d["arguments"]}
    assert args["city"]["required"] is True
    assert args["state"].get("required", False) is False

    text = await meta_error(client, "get_prompt", {"name": "x_everything_no_such_prompt"})
    assert "x_everything_no_such_prompt" in text


async def test_filter_prompts_by_pattern(client: Client) -> None:
    body = await meta(client, "filter_prompts", {"pattern": "x_everything_*", "limit": 50})
    assert {p["name"] for p in body["prompts"]} >= {exposed("everything", p) for p in EVERYTHING_PROMPTS}
    assert all(p["server"] == "everything" for p in body["prompts"])
