"""Fixtures of the end-to-end suite: one gateway for the session, one SDK client per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from harness import (
    EVERYTHING_TOOLS,
    TIME_TOOLS,
    Gateway,
    connect,
    exposed,
    start_gateway_or_fail,
)
from mcp import Client

#: The tools the gateway must list before the tests start.
READY_TOOLS = frozenset({exposed("everything", "echo"), exposed("time", "get_current_time")})
#: config.yaml's `aggregator` for `both_gateway`.
EXPOSURE_BOTH = {"exposure": "both"}

assert {"echo"} <= EVERYTHING_TOOLS and {"get_current_time"} <= TIME_TOOLS


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # anyio's pytest plugin (anyio ships with mcp) runs the `async def` tests and fixtures.
    return "asyncio"


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("gateway")
    gw = start_gateway_or_fail(workdir, READY_TOOLS, "the gateway")
    yield gw
    gw.stop()


@pytest.fixture(scope="session")
def both_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway with `aggregator.exposure: both` (the meta-tools and the aggregated tools, resources
    and prompts side by side), for the protocol matrices (test_protocol_matrix, test_ts_matrix)."""
    workdir = tmp_path_factory.mktemp("both-gateway")
    gw = start_gateway_or_fail(workdir, READY_TOOLS, "the exposure-both gateway", aggregator=EXPOSURE_BOTH)
    yield gw
    gw.stop()


@pytest.fixture
async def client(gateway: Gateway) -> AsyncIterator[Client]:
    async with connect(gateway.url) as c:
        yield c


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Attach the gateway's output to every failed test that used it (any fixture that is a Gateway)."""
    report = yield
    if report.failed and call.when == "call":
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, Gateway):
                label = "gateway output" if name == "gateway" else f"{name} output"
                report.sections.append((label, value.logs()))
    return report
