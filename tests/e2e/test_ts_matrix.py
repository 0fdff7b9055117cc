"""The compatibility matrix with the official TypeScript SDK (`@modelcontextprotocol/sdk` 1.32.2).

The TypeScript SDK speaks protocol versions up to 2025-11-25 (initialize and a session); it has no
2026-07-28 yet, so it covers that generation's column of the matrix in `test_protocol_matrix.py`:
every meta-tool and a native tool call (the gateway runs `exposure: both`), through each way in:
streamable HTTP, the agent bridge, and `gateway standalone`. Its zod schemas check every answer,
and it checks a native tool's structured content against the tool's output schema.
`ts_matrix_client.mjs` runs the operations and prints what failed; a cell fails naming each.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXPOSURE_BOTH
from harness import GATEWAY_BIN, ROOT, Gateway, free_port, write_config
from test_protocol_matrix import META_OPERATIONS

CLIENT = Path(__file__).with_name("ts_matrix_client.mjs")
SDK = ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
#: The operations the client runs: the 13 meta-tools and two native tool calls.
OPERATIONS = 13 + 2


def test_the_client_runs_every_meta_tool() -> None:
    source = CLIENT.read_text()
    for op in META_OPERATIONS:
        assert f"  {op.__name__}: async" in source, f"ts_matrix_client.mjs does not run {op.__name__}"
    assert len(META_OPERATIONS) == 13


@pytest.mark.parametrize("way", ["http", "bridge", "standalone"])
def test_every_answer_is_valid_for_the_typescript_sdk(way: str, both_gateway: Gateway, tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None and SDK.exists(), "node and node_modules/@modelcontextprotocol/sdk (scripts/test installs them)"
    if way == "http":
        target = ["--url", both_gateway.url]
    elif way == "bridge":
        target = ["--stdio", str(GATEWAY_BIN), "agent", "--mcp-server", "--endpoint", both_gateway.url]
    else:
        config = tmp_path / "standalone-config"
        write_config(config, free_port(), aggregator=EXPOSURE_BOTH)
        target = ["--stdio", str(GATEWAY_BIN), "standalone", "--config-path", str(config)]
    run = subprocess.run(
        [node, str(CLIENT), *target], cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert run.returncode == 0, f"the TypeScript client could not run ({run.returncode}):\n{run.stderr[-4000:]}"
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["protocolVersion"] == "2025-11-25", report
    assert report["ran"] == OPERATIONS, report
    assert not report["failures"], f"{way}: {len(report['failures'])} of {report['ran']} failed:\n" + "\n".join(
        report["failures"]
    )
