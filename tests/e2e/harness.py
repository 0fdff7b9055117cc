"""Shared pieces of the end-to-end suite: paths, the gateway process, and meta-tool helpers.

The suite drives the reference gateway (`target/debug/examples/gateway`) with the official
Python MCP SDK client (`mcp` 2.3.0) over streamable HTTP, with real third-party downstream
servers behind it: `@modelcontextprotocol/server-everything` (npm, stdio) and
`mcp-server-time` (PyPI, stdio). `scripts/test` installs both and builds the gateway first.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

ROOT = Path(__file__).resolve().parents[2]

#: The gateway binary; `MUSTER_E2E_GATEWAY` overrides it (e.g. a release build).
GATEWAY_BIN = Path(
    os.environ.get("MUSTER_E2E_GATEWAY")
    or Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "debug" / "examples" / "gateway"
)
EVERYTHING_JS = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
#: Installed into the same virtual environment as pytest by requirements.txt.
TIME_BIN = Path(sys.executable).parent / "mcp-server-time"

#: Seconds to wait for the gateway to serve and to list its downstream servers' tools.
START_TIMEOUT = float(os.environ.get("MUSTER_E2E_START_TIMEOUT", "60"))
#: Seconds any single MCP request may take before the client gives up.
REQUEST_TIMEOUT = 30.0

TOOL_META_KEY = "muster.giantswarm.io/tool"

META_TOOLS = frozenset(
    {
        "list_tools",
        "describe_tool",
        "filter_tools",
        "list_core_tools",
        "call_tool",
        "list_resources",
        "filter_resources",
        "describe_resource",
        "get_resource",
        "list_prompts",
        "filter_prompts",
        "describe_prompt",
        "get_prompt",
    }
)

# What the pinned downstream servers expose, read off them directly over stdio with the same SDK
# (server-everything 2026.8.31, mcp-server-time 2026.10.19).

#: server-everything's tools registered unconditionally. It registers more after initialize,
#: depending on the client's capabilities (get-roots-list, trigger-sampling-request,
#: trigger-elicitation-request, trigger-url-elicitation, simulate-research-query, the *-async ones).
EVERYTHING_TOOLS = frozenset(
    {
        "echo",
        "get-annotated-message",
        "get-env",
        "get-resource-links",
        "get-resource-reference",
        "get-structured-content",
        "get-sum",
        "get-tiny-image",
        "gzip-file-as-resource",
        "toggle-simulated-logging",
        "toggle-subscriber-updates",
        "trigger-long-running-operation",
    }
)
#: server-everything's static resources (resource templates demo://resource/dynamic/{text,blob}/{id}
#: are not listed here).
EVERYTHING_DOCS = (
    "architecture.md",
    "extension.md",
    "features.md",
    "how-it-works.md",
    "instructions.md",
    "startup.md",
    "structure.md",
)
EVERYTHING_RESOURCES = frozenset(f"demo://resource/static/document/{doc}" for doc in EVERYTHING_DOCS)
EVERYTHING_PROMPTS = frozenset({"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"})
TIME_TOOLS = frozenset({"get_current_time", "convert_time"})


def exposed(server: str, name: str) -> str:
    """The gateway's name for a downstream tool or prompt: `x_<server>_<name>`."""
    return f"x_{server}_{name}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Downstream servers for a gateway configuration, by name: a stdio server's command and
#: arguments, or a streamable-HTTP server's URL.
StdioServers = Mapping[str, "tuple[str, Sequence[str]] | str"]


def default_servers() -> dict[str, tuple[str, list[str]]]:
    """The suite's two downstream servers: server-everything as `everything`, mcp-server-time as `time`."""
    node = shutil.which("node") or "node"
    return {
        "everything": (node, [str(EVERYTHING_JS), "stdio"]),
        "time": (str(TIME_BIN), ["--local-timezone", "UTC"]),
    }


def write_config(
    config_dir: Path,
    port: int,
    servers: StdioServers | None = None,
    workflows: Mapping[str, str] | None = None,
    aggregator: Mapping[str, Any] | None = None,
) -> None:
    """Lay out a gateway configuration directory with `servers` (default: the two downstream servers).

    `workflows` maps a workflow name to the text of its Workflow document (YAML), written to
    `workflows/<name>.yaml`; `aggregator` adds keys to config.yaml's `aggregator` (JSON values).
    """
    (config_dir / "mcpservers").mkdir(parents=True, exist_ok=True)
    extra = "".join(f"  {key}: {json.dumps(value)}\n" for key, value in (aggregator or {}).items())
    (config_dir / "config.yaml").write_text(f"aggregator:\n  port: {port}\n{extra}")
    if servers is None:
        servers = default_servers()
    for name, server in servers.items():
        # JSON is YAML: quoting through json.dumps keeps odd paths safe.
        if isinstance(server, str):
            spec = f"  type: streamable-http\n  autoStart: true\n  url: {json.dumps(server)}\n"
        else:
            command, args = server
            spec = f"  type: stdio\n  autoStart: true\n  command: {json.dumps(command)}\n  args: {json.dumps(list(args))}\n"
        (config_dir / "mcpservers" / f"{name}.yaml").write_text(
            "apiVersion: muster.giantswarm.io/v1alpha1\n"
            "kind: MCPServer\n"
            "metadata:\n"
            f"  name: {name}\n"
            "spec:\n" + spec
        )
    if workflows:
        (config_dir / "workflows").mkdir(parents=True, exist_ok=True)
        for name, document in workflows.items():
            (config_dir / "workflows" / f"{name}.yaml").write_text(document)


@dataclass
class Gateway:
    """A running gateway process and where it writes its output."""

    proc: subprocess.Popen[bytes]
    port: int
    config_dir: Path
    stdout_path: Path
    stderr_path: Path
    startup_seconds: float = field(default=0.0)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"

    def logs(self, max_chars: int = 20_000) -> str:
        parts = []
        for label, path in (("stderr", self.stderr_path), ("stdout", self.stdout_path)):
            try:
                text = path.read_text(errors="replace")
            except OSError as e:
                text = f"<unreadable: {e}>"
            if len(text) > max_chars:
                text = "...\n" + text[-max_chars:]
            parts.append(f"----- gateway {label} ({path}) -----\n{text}")
        status = self.proc.poll()
        parts.append(f"----- gateway process: {'running' if status is None else f'exited with {status}'} -----")
        return "\n".join(parts)

    def stop(self) -> None:
        """SIGTERM the gateway, then SIGKILL what is left of its process group (its children)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        # The gateway was started in its own session, so its group holds it and the downstream
        # servers it spawned, and nothing else.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class GatewayStartError(RuntimeError):
    pass


def start_gateway(
    workdir: Path,
    expected_tools: frozenset[str],
    servers: StdioServers | None = None,
    workflows: Mapping[str, str] | None = None,
    aggregator: Mapping[str, Any] | None = None,
) -> Gateway:
    """Start the gateway on a free loopback port and wait until it lists `expected_tools`.

    `servers` replaces the default downstream servers (server-everything and mcp-server-time);
    `workflows` adds Workflow documents by name, `aggregator` config.yaml keys (see `write_config`).
    """
    needed = (GATEWAY_BIN, EVERYTHING_JS, TIME_BIN) if servers is None else (GATEWAY_BIN,)
    missing = [str(p) for p in needed if not p.exists()]
    if shutil.which("node") is None:
        missing.append("node (on PATH)")
    if missing:
        raise GatewayStartError(
            "missing: " + ", ".join(missing) + " — run scripts/test (it installs the peers and builds the gateway)"
        )
    config_dir = workdir / "config"
    port = free_port()
    write_config(config_dir, port, servers, workflows, aggregator)
    stdout_path = workdir / "gateway.stdout.log"
    stderr_path = workdir / "gateway.stderr.log"
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "info")
    env.setdefault("NO_COLOR", "1")
    env.setdefault("RUST_BACKTRACE", "1")
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [str(GATEWAY_BIN), "serve", "--config-path", str(config_dir), "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=workdir,
            env=env,
            start_new_session=True,
        )
    gw = Gateway(proc=proc, port=port, config_dir=config_dir, stdout_path=stdout_path, stderr_path=stderr_path)
    started = time.monotonic()
    try:
        _wait_healthy(gw, started + START_TIMEOUT)
        anyio.run(_wait_tools, gw, expected_tools, started + START_TIMEOUT)
    except BaseException:
        gw.stop()
        raise
    gw.startup_seconds = time.monotonic() - started
    return gw


def start_gateway_or_fail(
    workdir: Path,
    expected_tools: frozenset[str],
    what: str,
    servers: StdioServers | None = None,
    workflows: Mapping[str, str] | None = None,
    aggregator: Mapping[str, Any] | None = None,
) -> Gateway:
    """`start_gateway`, failing the calling test (with the gateway's logs) when it cannot start."""
    try:
        return start_gateway(workdir, expected_tools, servers=servers, workflows=workflows, aggregator=aggregator)
    except GatewayStartError as e:
        logs = ""
        for name in ("gateway.stderr.log", "gateway.stdout.log"):
            path = workdir / name
            if path.exists():
                logs += f"\n----- {name} -----\n{path.read_text(errors='replace')[-20_000:]}"
        pytest.fail(f"{what} did not come up: {e}{logs}", pytrace=False)


def _wait_healthy(gw: Gateway, deadline: float) -> None:
    last = "no answer yet"
    while True:
        if gw.proc.poll() is not None:
            raise GatewayStartError(f"gateway exited with {gw.proc.returncode} before it served /health")
        try:
            with urllib.request.urlopen(f"{gw.base_url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
                last = f"HTTP {resp.status}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}"
        except (urllib.error.URLError, OSError) as e:
            last = repr(e)
        if time.monotonic() > deadline:
            raise GatewayStartError(f"GET /health did not answer 200 within {START_TIMEOUT:.0f}s (last: {last})")
        time.sleep(0.2)


async def _wait_tools(gw: Gateway, expected: frozenset[str], deadline: float) -> None:
    last = "no answer yet"
    while True:
        if gw.proc.poll() is not None:
            raise GatewayStartError(f"gateway exited with {gw.proc.returncode} while starting its servers")
        try:
            with anyio.fail_after(max(1.0, deadline - time.monotonic())):
                async with connect(gw.url) as client:
                    result = await client.call_tool("list_tools", {"limit": 1000})
            body = json.loads(text_of(result))
            names = {t["name"] for t in body["tools"]}
            if expected <= names:
                return
            last = f"still missing {sorted(expected - names)}; have {len(names)} tools"
        except Exception as e:  # keep polling; report the last failure
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() > deadline:
            raise GatewayStartError(f"list_tools did not show {sorted(expected)} within {START_TIMEOUT:.0f}s (last: {last})")
        await anyio.sleep(0.5)


def connect(url: str, **kwargs: Any) -> Client:
    """An SDK client for the gateway: the classic initialize handshake unless `mode` is given."""
    kwargs.setdefault("mode", "legacy")
    kwargs.setdefault("read_timeout_seconds", REQUEST_TIMEOUT)
    kwargs.setdefault("cache", None)
    return Client(url, **kwargs)


def text_of(result: CallToolResult) -> str:
    """The text of a meta-tool result, which must be exactly one text content item."""
    assert len(result.content) == 1, f"expected one content item, got {result.content!r}"
    item = result.content[0]
    assert isinstance(item, TextContent), f"expected a text item, got {item!r}"
    return item.text


async def meta(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """Call a meta-tool that must succeed and return its JSON body."""
    result = await client.call_tool(tool, arguments if arguments is not None else {})
    text = text_of(result)
    assert not result.is_error, f"{tool}({arguments!r}) failed: {text}"
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise AssertionError(f"{tool}({arguments!r}) did not answer JSON: {text!r}") from e


async def meta_error(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    """Call a meta-tool that must answer an error result (isError true); return its text."""
    result = await client.call_tool(tool, arguments if arguments is not None else {})
    assert result.is_error is True, f"{tool}({arguments!r}) should be an error result, got {result!r}"
    assert result.content, f"{tool}({arguments!r}) error result has no content"
    texts = [c.text for c in result.content if isinstance(c, TextContent)]
    assert texts, f"{tool}({arguments!r}) error result has no text: {result!r}"
    return "\n".join(texts)


def envelope(result: CallToolResult) -> dict[str, Any]:
    """The call_tool envelope: the first content item of the result, as JSON."""
    assert result.content, f"call_tool answered no content: {result!r}"
    first = result.content[0]
    assert isinstance(first, TextContent), f"call_tool's first item is not text: {first!r}"
    body = json.loads(first.text)
    assert isinstance(body, dict), f"envelope is not an object: {body!r}"
    return body


def entries(body: Any, key: str) -> list[dict[str, Any]]:
    """A listing's entries: a bare JSON array, or the array under `key` of an object."""
    if isinstance(body, dict):
        assert key in body, f"no {key!r} in {sorted(body)}"
        body = body[key]
    assert isinstance(body, list), f"expected a list of {key}, got {type(body).__name__}"
    return body


def restart_gateway(gw: Gateway, expected_tools: frozenset[str]) -> Gateway:
    """Start a stopped gateway again: same configuration directory and port, output appended to
    the same log files; wait until it lists `expected_tools`."""
    assert gw.proc.poll() is not None, "restart_gateway: stop the gateway first"
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "info")
    env.setdefault("NO_COLOR", "1")
    env.setdefault("RUST_BACKTRACE", "1")
    with open(gw.stdout_path, "ab") as out, open(gw.stderr_path, "ab") as err:
        proc = subprocess.Popen(
            [str(GATEWAY_BIN), "serve", "--config-path", str(gw.config_dir), "--port", str(gw.port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=gw.config_dir.parent,
            env=env,
            start_new_session=True,
        )
    again = Gateway(
        proc=proc, port=gw.port, config_dir=gw.config_dir, stdout_path=gw.stdout_path, stderr_path=gw.stderr_path
    )
    started = time.monotonic()
    try:
        _wait_healthy(again, started + START_TIMEOUT)
        anyio.run(_wait_tools, again, expected_tools, started + START_TIMEOUT)
    except BaseException:
        again.stop()
        raise
    again.startup_seconds = time.monotonic() - started
    return again
