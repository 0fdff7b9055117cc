"""What a downstream server sends while a call runs, relayed by the gateway to the calling client.

The official Python SDK client (`mcp` 2.3.0) calls server-everything's tools through `call_tool`;
server-everything (2026.8.31) then sends progress and logging notifications and sampling and
elicitation requests, which the gateway must relay to that client. Last, a tool list change: a
downstream's `notifications/tools/list_changed` must reach the gateway's connected clients and its
catalogue.

What server-everything does, read off its dist source:

- `trigger-long-running-operation {duration, steps}` sleeps `duration/steps` seconds `steps` times and
  after each step sends `notifications/progress {progress: i, total: steps}` under the call's
  progressToken (only when the request carried one).
- `toggle-simulated-logging` starts (or stops) a timer sending one random-leveled
  `notifications/message` immediately and then every 5 s. It is per downstream session (the
  gateway's one stdio connection: "session undefined"), not tied to any request, and respects a
  level set by `logging/setLevel` (none is set, so every level is sent).
- `trigger-sampling-request {prompt, maxTokens}` and `trigger-elicitation-request {}` are registered
  in `oninitialized` only when the client (here: the gateway) declared sampling/elicitation; they
  send `sampling/createMessage` / `elicitation/create` as part of the call and put the answer into
  their result text.
- `simulate-research-query` (a task tool) and the other conditional tools are registered in
  `oninitialized`, which announces `notifications/tools/list_changed` right after the gateway's
  handshake, before any test client connects. No tool of server-everything registers or removes
  tools later, so the only way to make it announce a change while a client is connected is to
  restart it (`core_service_restart`). To test the gateway's reaction to a downstream
  `tools/list_changed` on its own, a small downstream (`late`, on the SDK server-everything uses)
  registers and removes a tool on request, behind a second gateway.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from harness import (
    ROOT,
    Gateway,
    connect,
    envelope,
    exposed,
    meta,
    start_gateway_or_fail,
)
from mcp import Client
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    LoggingMessageNotificationParams,
    ProgressNotification,
    TextContent,
    ToolListChangedNotification,
)

pytestmark = pytest.mark.anyio

LONG_OP = exposed("everything", "trigger-long-running-operation")
TOGGLE_LOGGING = exposed("everything", "toggle-simulated-logging")
SAMPLING = exposed("everything", "trigger-sampling-request")
ELICITATION = exposed("everything", "trigger-elicitation-request")
RESEARCH = exposed("everything", "simulate-research-query")
ECHO = exposed("everything", "echo")

#: server-everything's simulated log messages (stdio: no session id is appended), by level.
SIMULATED_LOGS = {
    "debug": "Debug-level message",
    "info": "Info-level message",
    "notice": "Notice-level message",
    "warning": "Warning-level message",
    "error": "Error-level message",
    "critical": "Critical-level message",
    "alert": "Alert level-message",
    "emergency": "Emergency-level message",
}


class Recorder:
    """Records what the gateway sends a client outside responses: notifications and log messages."""

    def __init__(self) -> None:
        self.notifications: list[tuple[float, Any]] = []
        self.logs: list[tuple[float, LoggingMessageNotificationParams]] = []

    async def on_message(self, message: Any) -> None:
        self.notifications.append((time.monotonic(), message))

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append((time.monotonic(), params))

    def of_type(self, kind: type) -> list[Any]:
        return [m for _, m in self.notifications if isinstance(m, kind)]

    def tools_changed(self) -> int:
        return len(self.of_type(ToolListChangedNotification))


async def catalogue(client: Client) -> set[str]:
    body = await meta(client, "list_tools", {"limit": 1000})
    return {t["name"] for t in body["tools"]}


async def wait_until(predicate: Any, what: str, timeout: float = 20.0) -> None:
    """Poll the async `predicate` until it is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if await predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await anyio.sleep(0.25)


async def call(client: Client, name: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """call_tool `name`, which must succeed; return its envelope."""
    result = await client.call_tool("call_tool", {"name": name, "arguments": arguments}, **kwargs)
    env = envelope(result)
    assert result.is_error is False, f"{name}({arguments!r}) failed: {env}"
    assert env["isError"] is False, env
    return env


def texts(env: dict[str, Any]) -> list[str]:
    return [c["text"] for c in env["content"] if c.get("type") == "text"]


# --- 1. progress ---------------------------------------------------------------------------------


async def test_long_running_operation_schema_has_duration_and_steps(client: Client) -> None:
    d = await meta(client, "describe_tool", {"name": LONG_OP})
    props = d["inputSchema"]["properties"]
    assert props["duration"]["type"] == "number"
    assert props["steps"]["type"] == "number"


async def test_progress_is_relayed_under_the_clients_token(gateway: Gateway) -> None:
    seen: list[tuple[float, float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((time.monotonic(), progress, total, message))

    async with connect(gateway.url) as client:
        started = time.monotonic()
        env = await call(client, LONG_OP, {"duration": 2, "steps": 4}, progress_callback=on_progress)
        ended = time.monotonic()
        # The SDK runs progress callbacks in tasks of their own: let the last ones run.
        with anyio.move_on_after(2):
            while len(seen) < 4:
                await anyio.sleep(0.05)

    assert texts(env) == ["Long running operation completed. Duration: 2 seconds, Steps: 4."]
    assert ended - started >= 1.9, "the operation takes 2 s"
    # The SDK hands a notification to this callback only when its progressToken is the one it put
    # on this request, so every entry is the downstream's progress mapped back to the client's token.
    assert [(p, t) for _, p, t, _ in seen] == [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)], seen
    # Relayed as the steps happen (every 0.5 s), not all at the end.
    assert seen[0][0] <= ended - 1.0, f"first progress {ended - seen[0][0]:.2f}s before the result"


async def test_no_progress_is_sent_for_a_call_without_a_progress_token(gateway: Gateway) -> None:
    rec = Recorder()
    async with connect(gateway.url, message_handler=rec.on_message) as client:
        env = await call(client, LONG_OP, {"duration": 1, "steps": 2})
        await anyio.sleep(0.3)
    assert texts(env) == ["Long running operation completed. Duration: 1 seconds, Steps: 2."]
    # The gateway still stamps its own token downstream (server-everything reports progress), but the
    # client gave none, so nothing may reach it.
    assert rec.of_type(ProgressNotification) == []


# --- 2. logging ----------------------------------------------------------------------------------


async def test_downstream_logging_reaches_the_client_with_a_call_in_flight(gateway: Gateway) -> None:
    caller = Recorder()
    bystander = Recorder()
    async with (
        connect(gateway.url, logging_callback=caller.on_log) as client,
        connect(gateway.url, logging_callback=bystander.on_log) as other,
    ):
        assert await catalogue(other)  # the bystander is a live session of the gateway
        toggled = texts(await call(client, TOGGLE_LOGGING, {}))[0]
        if toggled.startswith("Stopped"):  # left on by an earlier run on this downstream: start it again
            toggled = texts(await call(client, TOGGLE_LOGGING, {}))[0]
        assert toggled.startswith("Started simulated, random-leveled logging"), toggled
        try:
            # The timer fires every 5 s: a 6 s call spans at least one message.
            started = time.monotonic()
            env = await call(client, LONG_OP, {"duration": 6, "steps": 3})
            ended = time.monotonic()
            assert texts(env) == ["Long running operation completed. Duration: 6 seconds, Steps: 3."]
        finally:
            stopped = texts(await call(client, TOGGLE_LOGGING, {}))[0]
        assert stopped.startswith("Stopped simulated logging"), stopped
        await anyio.sleep(0.3)

    during = [p for t, p in caller.logs if started <= t <= ended]
    assert during, f"no log message reached the caller during its 6 s call; all it got: {caller.logs}"
    for p in [p for _, p in caller.logs]:
        assert p.level in SIMULATED_LOGS, p
        assert p.data == SIMULATED_LOGS[p.level], p
    # Only clients with a call in flight on the server get its log messages.
    assert bystander.logs == [], f"a client without a call in flight got log messages: {bystander.logs}"


# --- 3. sampling and elicitation -----------------------------------------------------------------

SAMPLED_ANSWER = "The fixed sampled answer from the e2e client."
SAMPLED_MODEL = "e2e-fixed-model"


async def test_sampling_and_elicitation_tools_are_registered(client: Client) -> None:
    # server-everything registers them only when its client (the gateway) declares the capabilities.
    names = await catalogue(client)
    missing = {SAMPLING, ELICITATION} - names
    assert not missing, f"server-everything did not register {sorted(missing)}: the gateway did not declare them"


def fixed_sampler(asked: list[CreateMessageRequestParams]) -> Any:
    """A sampling callback that records each request in `asked` and answers with the fixed answer."""

    async def sample(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=SAMPLED_ANSWER),
            model=SAMPLED_MODEL,
            stop_reason="endTurn",
        )

    return sample


async def test_sampling_request_is_forwarded_to_the_calling_client(gateway: Gateway) -> None:
    asked: list[CreateMessageRequestParams] = []
    async with connect(gateway.url, sampling_callback=fixed_sampler(asked)) as client:
        names = await catalogue(client)
        if SAMPLING not in names:
            pytest.skip(f"{SAMPLING} is not in the catalogue: server-everything did not register it")
        with anyio.fail_after(30):
            env = await call(client, SAMPLING, {"prompt": "say the fixed answer", "maxTokens": 42})

    assert len(asked) == 1, asked
    p = asked[0]
    assert p.max_tokens == 42
    assert p.system_prompt == "You are a helpful test server."
    assert len(p.messages) == 1 and p.messages[0].role == "user"
    content = p.messages[0].content
    assert isinstance(content, TextContent), content
    assert content.text == "Resource trigger-sampling-request context: say the fixed answer"

    [text] = texts(env)
    prefix = "LLM sampling result: \n"
    assert text.startswith(prefix), text
    answered = json.loads(text[len(prefix) :])
    assert answered["content"] == {"type": "text", "text": SAMPLED_ANSWER}
    assert answered["model"] == SAMPLED_MODEL
    assert answered["role"] == "assistant"
    assert answered["stopReason"] == "endTurn"


async def test_sampling_request_to_a_client_without_sampling_fails_the_call(gateway: Gateway) -> None:
    async with connect(gateway.url) as client:  # no sampling callback: the SDK refuses sampling requests
        with anyio.fail_after(30):
            result = await client.call_tool("call_tool", {"name": SAMPLING, "arguments": {"prompt": "p"}})
    env = envelope(result)
    assert result.is_error is True and env["isError"] is True, env
    [text] = texts(env)
    assert "sampling" in text.lower(), text
    assert "LLM sampling result" not in text, text


async def test_elicitation_request_is_forwarded_to_the_calling_client(gateway: Gateway) -> None:
    asked: list[ElicitRequestParams] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(
            action="accept",
            content={"name": "Ada Lovelace", "check": True, "email": "ada@example.org", "integer": 7},
        )

    async with connect(gateway.url, elicitation_callback=elicit) as client:
        names = await catalogue(client)
        if ELICITATION not in names:
            pytest.skip(f"{ELICITATION} is not in the catalogue: server-everything did not register it")
        with anyio.fail_after(30):
            env = await call(client, ELICITATION, {})

    assert len(asked) == 1, asked
    p = asked[0]
    assert isinstance(p, ElicitRequestFormParams), p
    assert p.message == "Please provide inputs for the following fields:"
    schema = p.requested_schema if isinstance(p.requested_schema, dict) else p.requested_schema.model_dump()
    assert schema["required"] == ["name"]
    assert {"name", "check", "email", "integer"} <= set(schema["properties"])

    got = texts(env)
    assert got[0] == "✅ User provided the requested information!", got
    assert got[1] == (
        "User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Email: ada@example.org\n- Favorite Integer: 7"
    ), got
    raw = json.loads(got[2].split("Raw result: ", 1)[1])
    assert raw["action"] == "accept"
    assert raw["content"] == {"name": "Ada Lovelace", "check": True, "email": "ada@example.org", "integer": 7}


# --- 4. tool list changes ------------------------------------------------------------------------


async def test_restarted_downstream_tool_list_change_reaches_a_connected_client(gateway: Gateway) -> None:
    rec = Recorder()
    async with connect(gateway.url, message_handler=rec.on_message) as client:
        assert RESEARCH in await catalogue(client)
        await anyio.sleep(0.5)  # let notifications from before this test settle
        before = rec.tools_changed()
        try:
            restart = {"name": "core_service_restart", "arguments": {"name": "everything"}}
            result = await client.call_tool("call_tool", restart)
            assert result.is_error is False, envelope(result)

            async def back() -> bool:
                return rec.tools_changed() > before and {RESEARCH, ECHO} <= await catalogue(client)

            await wait_until(back, f"{RESEARCH} back in list_tools and a tools/list_changed after the restart")
        finally:
            # Leave the shared gateway as the other tests expect it: everything running and listed.
            async def listed() -> bool:
                return ECHO in await catalogue(client)

            if not await listed():
                await client.call_tool("call_tool", {"name": "core_service_start", "arguments": {"name": "everything"}})
                await wait_until(listed, f"{ECHO} listed again")
        # A call to the restarted downstream works.
        assert texts(await call(client, ECHO, {"message": "after restart"})) == ["Echo: after restart"]


LATE_SERVER_JS = """\
// A downstream that registers (and removes) a tool when asked, announcing tools/list_changed.
import {{ McpServer }} from {mcp};
import {{ StdioServerTransport }} from {stdio};

const server = new McpServer(
  {{ name: "e2e-late", version: "1.0.0" }},
  {{ capabilities: {{ tools: {{ listChanged: true }} }} }},
);
let late = null;
server.registerTool(
  "register-late-tool",
  {{ description: "Registers late-tool; the SDK announces notifications/tools/list_changed." }},
  async () => {{
    if (late === null) {{
      late = server.registerTool("late-tool", {{ description: "Registered after initialize." }}, async () => ({{
        content: [{{ type: "text", text: "late-tool answered" }}],
      }}));
    }}
    return {{ content: [{{ type: "text", text: "registered late-tool" }}] }};
  }},
);
server.registerTool(
  "remove-late-tool",
  {{ description: "Removes late-tool; the SDK announces notifications/tools/list_changed." }},
  async () => {{
    if (late !== null) {{
      late.remove();
      late = null;
    }}
    return {{ content: [{{ type: "text", text: "removed late-tool" }}] }};
  }},
);
await server.connect(new StdioServerTransport());
"""

REGISTER_LATE = exposed("late", "register-late-tool")
REMOVE_LATE = exposed("late", "remove-late-tool")
LATE_TOOL = exposed("late", "late-tool")


@pytest.fixture(scope="module")
def late_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A second gateway in front of only the `late` downstream."""
    node = shutil.which("node")
    sdk = ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "dist" / "esm" / "server"
    if node is None or not (sdk / "mcp.js").exists():
        pytest.fail(f"the late downstream needs node on PATH and {sdk} (npm ci)", pytrace=False)
    workdir = tmp_path_factory.mktemp("late-gateway")
    script = workdir / "late_server.mjs"
    script.write_text(
        LATE_SERVER_JS.format(mcp=json.dumps((sdk / "mcp.js").as_uri()), stdio=json.dumps((sdk / "stdio.js").as_uri()))
    )
    gw = start_gateway_or_fail(
        workdir, frozenset({REGISTER_LATE}), "the second gateway", servers={"late": (node, [str(script)])}
    )
    yield gw
    gw.stop()


async def test_downstream_tool_list_change_refreshes_catalogue_and_notifies_clients(late_gateway: Gateway) -> None:
    rec = Recorder()
    watcher = Recorder()  # a second connected session that makes no call
    async with (
        connect(late_gateway.url, message_handler=rec.on_message) as client,
        connect(late_gateway.url, message_handler=watcher.on_message) as other,
    ):
        names = await catalogue(client)
        assert REGISTER_LATE in names and LATE_TOOL not in names, sorted(names)
        assert await catalogue(other)
        await anyio.sleep(0.5)
        before, watcher_before = rec.tools_changed(), watcher.tools_changed()

        assert texts(await call(client, REGISTER_LATE, {})) == ["registered late-tool"]

        async def appeared() -> bool:
            return LATE_TOOL in await catalogue(client)

        await wait_until(appeared, f"{LATE_TOOL} in list_tools after the downstream's tools/list_changed")
        await wait_until(
            _async(lambda: rec.tools_changed() > before and watcher.tools_changed() > watcher_before),
            "notifications/tools/list_changed at both connected clients",
            timeout=5,
        )
        assert texts(await call(client, LATE_TOOL, {})) == ["late-tool answered"]
        d = await meta(other, "describe_tool", {"name": LATE_TOOL})
        assert d["server"] == "late" and d["description"] == "Registered after initialize."

        before, watcher_before = rec.tools_changed(), watcher.tools_changed()
        assert texts(await call(client, REMOVE_LATE, {})) == ["removed late-tool"]

        async def gone() -> bool:
            return LATE_TOOL not in await catalogue(client)

        await wait_until(gone, f"{LATE_TOOL} gone from list_tools after the downstream removed it")
        await wait_until(
            _async(lambda: rec.tools_changed() > before and watcher.tools_changed() > watcher_before),
            "notifications/tools/list_changed at both connected clients after the removal",
            timeout=5,
        )
        assert REGISTER_LATE in await catalogue(other)


def _async(predicate: Any) -> Any:
    async def check() -> bool:
        return bool(predicate())

    return check
