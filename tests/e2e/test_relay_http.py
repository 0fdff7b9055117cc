"""What a downstream sends while a call runs, relayed over a streamable-HTTP downstream.

The same peer as `test_relay` (server-everything 2026.8.31), run with its `streamableHttp`
transport on a loopback port, behind a gateway of its own. A call to an HTTP downstream goes
through the gateway's HTTP call lane, which posts the call itself and reads the response stream;
what the stream carries besides the call's answer and progress (server-everything's sampling and
elicitation requests, sent as part of the call) must still reach rmcp, which forwards it to the
calling client and posts the answer back. Progress must reach the caller under its own token, in
order, before the result.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from harness import EVERYTHING_JS, ROOT, Gateway, connect, exposed, start_gateway_or_fail
from mcp.types import CreateMessageRequestParams, ElicitRequestParams, ElicitResult
from test_relay import SAMPLED_ANSWER, SAMPLED_MODEL, call, fixed_sampler, texts

pytestmark = pytest.mark.anyio

LONG_OP = exposed("web", "trigger-long-running-operation")
SAMPLING = exposed("web", "trigger-sampling-request")
ELICITATION = exposed("web", "trigger-elicitation-request")
ECHO = exposed("web", "echo")


@pytest.fixture(scope="module")
def http_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway in front of server-everything over streamable HTTP (as `web`)."""
    node = shutil.which("node")
    if node is None or not EVERYTHING_JS.exists():
        pytest.fail(f"server-everything over HTTP needs node on PATH and {EVERYTHING_JS} (npm ci)", pytrace=False)
    workdir = tmp_path_factory.mktemp("http-gateway")
    log = open(workdir / "everything.log", "w+b")
    server = subprocess.Popen(
        [node, "-r", str(ROOT / "tests" / "fixtures" / "loopback-listen.cjs"), str(EVERYTHING_JS), "streamableHttp"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PORT": "0"},
        start_new_session=True,
    )
    try:
        port = None
        deadline = time.monotonic() + 30
        while port is None:
            log.seek(0)
            found = re.search(rb"listening on 127\.0\.0\.1:(\d+)", log.read())
            if found:
                port = int(found.group(1))
            elif server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"server-everything over HTTP did not start: {log.read().decode(errors='replace')}")
            else:
                time.sleep(0.1)
        gw = start_gateway_or_fail(
            workdir,
            frozenset({ECHO, SAMPLING, ELICITATION}),
            "the gateway in front of server-everything over HTTP",
            servers={"web": f"http://127.0.0.1:{port}/mcp"},
        )
        yield gw
        gw.stop()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


async def test_calls_are_answered(http_gateway: Gateway) -> None:
    async with connect(http_gateway.url) as client:
        for n in range(5):
            assert texts(await call(client, ECHO, {"message": f"hi {n}"})) == [f"Echo: hi {n}"]


async def test_progress_reaches_the_caller_in_order_before_the_result(http_gateway: Gateway) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with connect(http_gateway.url) as client:
        env = await call(client, LONG_OP, {"duration": 1, "steps": 4}, progress_callback=on_progress)
        with anyio.move_on_after(2):
            while len(seen) < 4:
                await anyio.sleep(0.05)
    assert texts(env) == ["Long running operation completed. Duration: 1 seconds, Steps: 4."]
    assert seen == [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)], seen


async def test_a_sampling_request_sent_during_the_call_is_answered_by_the_caller(http_gateway: Gateway) -> None:
    asked: list[CreateMessageRequestParams] = []
    async with connect(http_gateway.url, sampling_callback=fixed_sampler(asked)) as client:
        with anyio.fail_after(30):
            env = await call(client, SAMPLING, {"prompt": "say the fixed answer", "maxTokens": 42})
    assert len(asked) == 1 and asked[0].max_tokens == 42, asked
    [text] = texts(env)
    assert text.startswith("LLM sampling result: \n") and SAMPLED_ANSWER in text and SAMPLED_MODEL in text, text


async def test_an_elicitation_sent_during_the_call_is_answered_by_the_caller(http_gateway: Gateway) -> None:
    asked: list[ElicitRequestParams] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"name": "Ada Lovelace"})

    async with connect(http_gateway.url, elicitation_callback=elicit) as client:
        with anyio.fail_after(30):
            env = await call(client, ELICITATION, {})
    assert len(asked) == 1, asked
    got = texts(env)
    assert got[0] == "✅ User provided the requested information!", got
    assert "Name: Ada Lovelace" in got[1], got
