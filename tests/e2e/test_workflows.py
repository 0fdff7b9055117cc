"""Workflows run by the reference gateway against real downstream servers, driven by the Python SDK.

A gateway of its own (module scope) loads three Workflow documents from `<config_dir>/workflows/`
and aggregates server-everything as `everything` and mcp-server-time as `time`. Each workflow is
the tool `workflow_<name>`, called through the `call_tool` meta-tool: the result's first text item
is the envelope, whose `structuredContent` is the workflow's response document and whose `_meta`
names the execution. Every run is also recorded in `<config_dir>/workflow_executions/<id>.yaml`.

The exact texts below are what the pinned peers answer (server-everything 2026.8.31,
mcp-server-time 2026.10.19).
"""

from __future__ import annotations

import json
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import pytest
from harness import (
    Gateway,
    connect,
    envelope,
    meta,
    meta_error,
    start_gateway_or_fail,
)
from mcp import Client
from mcp.types import CallToolResult

pytestmark = pytest.mark.anyio

EXECUTION_META_KEY = "muster.giantswarm.io/execution"

CHAIN = "e2e-chain"
FANOUT = "e2e-fanout"
FAILING = "e2e-failing"
ARGS = "e2e-args"

#: server-everything's tools chained with templated arguments (a number passed on through a `jq`
#: step and a flat `{{ .results.<id> }}`), a template condition, a fromStep condition, a forEach with
#: parallelism, and an output template whose leaves keep their types.
CHAIN_YAML = textwrap.dedent(
    """\
    apiVersion: muster.giantswarm.io/v1alpha1
    kind: Workflow
    metadata:
      name: e2e-chain
    spec:
      description: Chains server-everything tools
      args:
        city: {type: string, required: true}
        a: {type: number, required: true}
        words: {type: array, required: true}
        loud: {type: boolean, default: false}
      steps:
        - id: weather
          tool: x_everything_get-structured-content
          args: {location: "{{ .input.city }}"}
        - id: temperature
          tool: x_everything_get-structured-content
          args: {location: "{{ .input.city }}"}
          jq: .temperature
        - id: sum
          tool: x_everything_get-sum
          args: {a: "{{ .input.a }}", b: "{{ .results.temperature }}"}
        - id: shout
          tool: x_everything_echo
          condition: {template: "{{ .input.loud }}"}
          args: {message: "{{ upper .input.city }}"}
        - id: rainy
          tool: x_everything_echo
          condition:
            fromStep: weather
            expect: {jsonPath: {conditions: "Light rain / drizzle"}}
          args: {message: "{{ .results.weather.conditions }}"}
        - id: each
          forEach:
            items: "{{ .input.words }}"
            as: word
            parallelism: 3
            steps:
              - id: say
                tool: x_everything_echo
                args: {message: "{{ .vars.word_index }}={{ .vars.word }}"}
      output:
        city: "{{ .input.city }}"
        temperature: "{{ .results.weather.temperature }}"
        humidity: "{{ .results.weather.humidity }}"
        sum: "{{ .results.sum }}"
        count: "{{ len .input.words }}"
        padded: '{{ printf "%02d" (len .input.words) }}'
        words: "{{ .input.words }}"
        first: "{{ .results.say_0 }}"
        last: "{{ .results.say }}"
        summary: "{{ .input.city }}: {{ .results.weather.conditions }}"
        loud: "{{ .input.loud }}"
        rainy: "{{ .results.rainy }}"
        each: "{{ .results.each }}"
    """
)

#: A loop whose iterations take different times: run at once, their results stay in item order.
FANOUT_YAML = textwrap.dedent(
    """\
    apiVersion: muster.giantswarm.io/v1alpha1
    kind: Workflow
    metadata:
      name: e2e-fanout
    spec:
      args:
        pauses: {type: array, required: true}
      steps:
        - id: naps
          forEach:
            items: "{{ .input.pauses }}"
            as: pause
            parallelism: 4
            steps:
              - id: nap
                tool: x_everything_trigger-long-running-operation
                args: {duration: "{{ .vars.pause }}", steps: 1}
      output:
        naps: "{{ .results.naps }}"
        last: "{{ .results.nap }}"
        second: "{{ .results.nap_1 }}"
    """
)

#: A tolerated failure (allowFailure), a step gated on it, a fatal failure, a step never reached,
#: and onFailure handlers of which the first fails too.
FAILING_YAML = textwrap.dedent(
    """\
    apiVersion: muster.giantswarm.io/v1alpha1
    kind: Workflow
    metadata:
      name: e2e-failing
    spec:
      args:
        zone: {type: string, default: Mars/Base}
      steps:
        - id: tolerated
          tool: x_time_convert_time
          allowFailure: true
          args: {source_timezone: "{{ .input.zone }}", time: "12:00", target_timezone: UTC}
        - id: after
          tool: x_everything_echo
          condition: {fromStep: tolerated, expect: {success: false}}
          args: {message: "tolerated: {{ .results.tolerated.error }}"}
        - id: broken
          tool: x_everything_get-sum
          args: {a: not a number, b: 1}
        - id: never
          tool: x_everything_echo
          args: {message: unreachable}
      onFailure:
        - id: undo
          tool: x_everything_get-sum
          args: {a: 1}
        - id: cleanup
          tool: x_everything_echo
          args: {message: "cleanup after {{ .results.broken.error }}"}
      output:
        never: "{{ .results.never }}"
    """
)

#: A nested path to a number in a step argument keeps its type (the issue's rule for step args and
#: output alike); `toString` makes it text for a tool that wants a string.
ARGS_YAML = textwrap.dedent(
    """\
    apiVersion: muster.giantswarm.io/v1alpha1
    kind: Workflow
    metadata:
      name: e2e-args
    spec:
      steps:
        - id: weather
          tool: x_everything_get-structured-content
          args: {location: Chicago}
        - id: typed
          tool: x_everything_get-sum
          args: {a: "{{ .results.weather.temperature }}", b: 1}
        - id: said
          tool: x_everything_echo
          args: {message: "{{ .results.weather.temperature | toString }}"}
      output:
        sum: "{{ .results.typed }}"
        said: "{{ .results.said }}"
    """
)

WORKFLOWS = {CHAIN: CHAIN_YAML, FANOUT: FANOUT_YAML, FAILING: FAILING_YAML, ARGS: ARGS_YAML}

MARS_ERROR = "Error executing tool convert_time: Invalid timezone: 'No time zone found with key Mars/Base'"
BROKEN_ERROR = (
    "MCP error -32602: Input validation error: Invalid arguments for tool get-sum: "
    "Invalid input: expected number, received string at a"
)
UNDO_ERROR = (
    "MCP error -32602: Input validation error: Invalid arguments for tool get-sum: "
    "Invalid input: expected number, received undefined at b"
)
RUN_ERROR = f"step broken failed: {BROKEN_ERROR}"
CLEANUP_TEXT = f"Echo: cleanup after {BROKEN_ERROR}"


def failure(error: str) -> dict[str, Any]:
    """What a failed step stores as its result."""
    return {"error": error, "success": False, "isError": True}


def wf_tool(name: str) -> str:
    return f"workflow_{name}"


# --- fixtures and helpers --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wf_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway of its own with the workflows above (kept apart from the session gateway, whose
    tool list other tests pin). Its readiness waits for the workflow tools, which the catalogue
    lists only once every tool they name is there."""
    workdir = tmp_path_factory.mktemp("workflows")
    gw = start_gateway_or_fail(
        workdir, frozenset(wf_tool(n) for n in WORKFLOWS), "the workflow gateway", workflows=WORKFLOWS
    )
    yield gw
    gw.stop()


@pytest.fixture
async def wf(wf_gateway: Gateway) -> AsyncIterator[Client]:
    async with connect(wf_gateway.url) as c:
        yield c


async def run(client: Client, name: str, arguments: dict[str, Any]) -> tuple[CallToolResult, dict[str, Any]]:
    """Call workflow `name` through call_tool; the result and its envelope."""
    result = await client.call_tool("call_tool", {"name": wf_tool(name), "arguments": arguments})
    return result, envelope(result)


def document(env: dict[str, Any]) -> dict[str, Any]:
    """The workflow's response document: the envelope's structuredContent, which its text mirrors."""
    doc = env.get("structuredContent")
    assert isinstance(doc, dict), f"no structured response document: {env!r}"
    assert [c["type"] for c in env["content"]] == ["text"], env
    assert json.loads(env["content"][0]["text"]) == doc, "the text item is the document as JSON"
    return doc


def execution(env: dict[str, Any], status: str) -> str:
    """The execution id named under the envelope's `_meta`, checked to be a UUID with `status`."""
    named = env.get("_meta", {}).get(EXECUTION_META_KEY)
    assert isinstance(named, dict), f"no {EXECUTION_META_KEY} in _meta: {env!r}"
    assert named["status"] == status, named
    assert str(uuid.UUID(named["id"])) == named["id"], named
    return named["id"]


def record(gw: Gateway, execution_id: str) -> dict[str, Any]:
    """The execution's record file (indented JSON, Go muster's snake_case shape)."""
    path = gw.config_dir / "workflow_executions" / f"{execution_id}.yaml"
    assert path.exists(), f"no record {path}; have {sorted(p.name for p in path.parent.glob('*'))}"
    body = json.loads(path.read_text())
    assert body["execution_id"] == execution_id
    return body


def steps_by_id(rec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    by_id: dict[str, list[dict[str, Any]]] = {}
    for step in rec["steps"]:
        by_id.setdefault(step["step_id"], []).append(step)
    return by_id


def when(stamp: str) -> datetime:
    # Python 3.11 reads at most microseconds; the records carry nanoseconds.
    head, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac or '0')[:6]:0<6}+00:00")


def chain_output(words: list[str], loud: bool) -> dict[str, Any]:
    """The chain's rendered output for Chicago and a = 5 (Chicago is 36 degrees, 82 %, drizzling)."""
    return {
        "city": "Chicago",
        "temperature": 36,
        "humidity": 82,
        "sum": "The sum of 5 and 36 is 41.",
        "count": len(words),
        "padded": f"{len(words):02d}",
        "words": words,
        "first": f"Echo: 0={words[0]}",
        "last": f"Echo: {len(words) - 1}={words[-1]}",
        "summary": "Chicago: Light rain / drizzle",
        "loud": loud,
        "rainy": "Echo: Light rain / drizzle",
        "each": [
            {"index": i, "item": w, "results": {"say": f"Echo: {i}={w}"}, "status": "completed"}
            for i, w in enumerate(words)
        ],
    }


# --- (a) chaining, conditions, loops, typed output ---------------------------------------------------


async def test_workflow_tool_is_described_from_its_spec(wf: Client) -> None:
    described = await meta(wf, "describe_tool", {"name": wf_tool(CHAIN)})
    assert described["name"] == wf_tool(CHAIN)
    assert described["kind"] == "workflow"
    assert described["description"] == "Chains server-everything tools"
    # Every tool it names is read-only in server-everything, so the workflow is too.
    assert described["annotations"] == {"readOnlyHint": True}
    assert described["inputSchema"] == {
        "type": "object",
        "properties": {
            "a": {"type": "number"},
            "city": {"type": "string"},
            "loud": {"type": "boolean", "default": False},
            "words": {"type": "array", "items": {}},
        },
        "required": ["a", "city", "words"],
    }


async def test_chain_renders_arguments_conditions_loop_and_a_typed_output(wf: Client, wf_gateway: Gateway) -> None:
    words = ["alpha", "beta", "gamma"]
    result, env = await run(wf, CHAIN, {"city": "Chicago", "a": 5, "words": words})
    assert result.is_error is not True, env
    assert env["isError"] is False, env
    assert env["tool"] == {"name": wf_tool(CHAIN)}
    execution_id = execution(env, "completed")
    out = document(env)
    assert out == chain_output(words, loud=False)
    # Type preservation, leaf by leaf (== alone would let 36 == 36.0 or True == 1 through).
    assert type(out["temperature"]) is int and type(out["humidity"]) is int
    assert type(out["count"]) is int
    assert out["padded"] == "03" and type(out["padded"]) is str, "printf output stays a string"
    assert type(out["words"]) is list, "a bare path to a list stays a list"
    assert out["loud"] is False, "a bare path to a boolean stays a boolean"
    assert type(out["summary"]) is str

    rec = record(wf_gateway, execution_id)
    assert rec["workflow_name"] == CHAIN
    assert rec["status"] == "completed"
    assert rec["input"] == {"city": "Chicago", "a": 5, "words": words, "loud": False}, "defaults are applied"
    assert rec["result"] == out
    assert "error" not in rec
    steps = steps_by_id(rec)
    assert steps["weather"][0]["input"] == {"location": "Chicago"}
    assert steps["weather"][0]["result"] == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}
    # `{{ .input.a }}` and `{{ .results.temperature }}` (exactly one flat key) reach get-sum as
    # numbers (get-sum refuses strings, and it answered).
    assert steps["sum"][0]["input"] == {"a": 5, "b": 36}
    assert steps["sum"][0]["result"] == "The sum of 5 and 36 is 41."
    assert steps["temperature"][0]["result"] == 36, "jq reshaped the result to the bare number"
    assert steps["rainy"][0]["input"] == {"message": "Light rain / drizzle"}
    assert [s["status"] for s in steps.get("shout", [])] in ([], ["skipped"]), "shout did not run"
    assert sorted((s["stored_as"], s["input"]["message"]) for s in steps["say"]) == [
        ("say_0", "0=alpha"),
        ("say_1", "1=beta"),
        ("say_2", "2=gamma"),
    ]
    assert all(s["status"] == "completed" for s in rec["steps"] if s["step_id"] != "shout")


async def test_loop_iterations_run_at_once_and_keep_item_order(wf: Client, wf_gateway: Gateway) -> None:
    pauses = [2.0, 0.5, 1.0, 1.5]
    started = time.monotonic()
    result, env = await run(wf, FANOUT, {"pauses": pauses})
    elapsed = time.monotonic() - started
    assert result.is_error is not True, env
    execution_id = execution(env, "completed")

    def said(pause: float) -> str:
        return f"Long running operation completed. Duration: {pause:g} seconds, Steps: 1."

    assert document(env) == {
        "naps": [
            {"index": i, "item": p, "results": {"nap": said(p)}, "status": "completed"} for i, p in enumerate(pauses)
        ],
        # The last iteration in item order, not the last to finish (index 0 took longest).
        "last": said(1.5),
        "second": said(0.5),
    }
    # One after another would take 5 s; at once, as long as the longest (2 s).
    assert elapsed < 4.5, f"the four iterations took {elapsed:.1f}s: they did not run at once"

    naps = steps_by_id(record(wf_gateway, execution_id))["nap"]
    assert [s["stored_as"] for s in naps] == ["nap_0", "nap_1", "nap_2", "nap_3"]
    assert [s["input"] for s in naps] == [{"duration": p, "steps": 1} for p in pauses]
    first_end = min(when(s["completed_at"]) for s in naps)
    assert all(when(s["started_at"]) < first_end for s in naps), "every iteration started before any ended"


async def test_arguments_that_do_not_fit_the_spec_are_refused_before_a_run(wf: Client, wf_gateway: Gateway) -> None:
    records = wf_gateway.config_dir / "workflow_executions"
    before = sorted(p.name for p in records.glob("*.yaml"))
    text = await meta_error(
        wf, "call_tool", {"name": wf_tool(CHAIN), "arguments": {"a": "five", "words": "alpha"}}
    )
    assert (
        "input validation failed: field 'a' has wrong type, expected number; "
        "required field 'city' is missing; field 'words' has wrong type, expected array"
    ) in text, text
    assert sorted(p.name for p in records.glob("*.yaml")) == before, "a refused call records no run"


async def test_a_nested_path_in_a_step_argument_keeps_its_type(wf: Client) -> None:
    """A bare path keeps its JSON type in step arguments as in the output template: get-sum
    accepts the number; `toString` turns it into the text echo wants."""
    _, env = await run(wf, ARGS, {})
    assert env["isError"] is False, env
    assert document(env) == {"sum": "The sum of 36 and 1 is 37.", "said": "Echo: 36"}


# --- (b) failures: allowFailure, a fatal step, onFailure ---------------------------------------------


async def test_a_fatal_step_fails_the_run_after_the_onfailure_handlers(wf: Client, wf_gateway: Gateway) -> None:
    result, env = await run(wf, FAILING, {})
    assert result.is_error is True, env
    assert env["isError"] is True, env
    execution_id = execution(env, "failed")
    assert document(env) == {
        "execution_id": execution_id,
        "workflow": FAILING,
        "status": "failed",
        "error": RUN_ERROR,
        "input": {"zone": "Mars/Base"},
        "steps": [
            # allowFailure: the failure is recorded and the run goes on.
            {
                "id": "tolerated",
                "tool": "x_time_convert_time",
                "status": "failed",
                "allow_failure": True,
                "error": MARS_ERROR,
            },
            # Its condition sees the tolerated failure.
            {
                "id": "after",
                "tool": "x_everything_echo",
                "status": "completed",
                "condition_evaluation": True,
                "condition_result": True,
                "condition_tool": "from_step:tolerated",
            },
            {"id": "broken", "tool": "x_everything_get-sum", "status": "failed", "error": BROKEN_ERROR},
            # `never` is not reached; the onFailure handlers run, the second despite the first failing.
            # onFailure handlers always allow failure.
            {"id": "undo", "tool": "x_everything_get-sum", "status": "failed", "allow_failure": True, "error": UNDO_ERROR},
            {"id": "cleanup", "tool": "x_everything_echo", "status": "completed", "allow_failure": True},
        ],
        "template_vars": ["input.zone"],
    }

    rec = record(wf_gateway, execution_id)
    assert rec["status"] == "failed"
    assert rec["error"] == RUN_ERROR
    assert "result" not in rec, "a failed run has an error, not a result"
    assert when(rec["completed_at"]) >= when(rec["started_at"])
    assert [s["step_id"] for s in rec["steps"]] == ["tolerated", "after", "broken", "undo", "cleanup"]
    steps = {s["step_id"]: s for s in rec["steps"]}
    assert steps["tolerated"]["result"] == failure(MARS_ERROR)
    assert steps["after"]["input"] == {"message": f"tolerated: {MARS_ERROR}"}
    assert steps["after"]["result"] == f"Echo: tolerated: {MARS_ERROR}"
    assert steps["broken"]["input"] == {"a": "not a number", "b": 1}
    assert steps["broken"]["result"] == failure(BROKEN_ERROR)
    assert steps["undo"]["result"] == failure(UNDO_ERROR)
    assert steps["cleanup"]["status"] == "completed"
    assert steps["cleanup"]["result"] == CLEANUP_TEXT, "the handler sees the failed step's error"


# --- (c) _debug shows every step result ---------------------------------------------------------------


async def test_debug_shows_every_step_result_and_the_output(wf: Client) -> None:
    words = ["x", "y"]
    result, env = await run(wf, CHAIN, {"city": "Chicago", "a": 5, "words": words, "_debug": True})
    assert result.is_error is not True, env
    execution_id = execution(env, "completed")
    assert document(env) == {
        "execution_id": execution_id,
        "workflow": CHAIN,
        "status": "completed",
        "input": {"city": "Chicago", "a": 5, "words": words, "loud": False},
        "steps": [
            {
                "id": "weather",
                "tool": "x_everything_get-structured-content",
                "status": "completed",
                "result": {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82},
            },
            {
                "id": "temperature",
                "tool": "x_everything_get-structured-content",
                "status": "completed",
                "result": 36,
            },
            {
                "id": "sum",
                "tool": "x_everything_get-sum",
                "status": "completed",
                "result": "The sum of 5 and 36 is 41.",
            },
            {
                "id": "shout",
                "tool": "x_everything_echo",
                "status": "skipped",
                "condition_evaluation": False,
                "condition_result": False,
                "condition_tool": "template",
            },
            {
                "id": "rainy",
                "tool": "x_everything_echo",
                "status": "completed",
                "condition_evaluation": True,
                "condition_result": True,
                "condition_tool": "from_step:weather",
                "result": "Echo: Light rain / drizzle",
            },
            {"id": "say", "tool": "x_everything_echo", "status": "completed", "result": "Echo: 0=x"},
            {"id": "say", "tool": "x_everything_echo", "status": "completed", "result": "Echo: 1=y"},
        ],
        "template_vars": ["input.a", "input.city", "input.loud", "input.words"],
        "output": chain_output(words, loud=False),
    }

    # With loud set, the gated step runs.
    _, env = await run(wf, CHAIN, {"city": "Chicago", "a": 5, "words": words, "loud": True, "_debug": "true"})
    shout = [s for s in document(env)["steps"] if s["id"] == "shout"]
    assert shout == [
        {
            "id": "shout",
            "tool": "x_everything_echo",
            "status": "completed",
            "condition_evaluation": True,
            "condition_result": True,
            "condition_tool": "template",
            "result": "Echo: CHICAGO",
        }
    ]
    assert document(env)["output"] == chain_output(words, loud=True)


async def test_debug_of_a_failed_run_shows_the_failure_results(wf: Client) -> None:
    result, env = await run(wf, FAILING, {"zone": "UTC", "_debug": True})
    assert result.is_error is True, env
    assert env["isError"] is True
    doc = document(env)
    assert doc["status"] == "failed" and doc["error"] == RUN_ERROR
    assert doc["input"] == {"zone": "UTC"}
    by_id = {s["id"]: s for s in doc["steps"]}
    assert list(by_id) == ["tolerated", "after", "broken", "undo", "cleanup"]
    tolerated = by_id["tolerated"]
    assert (tolerated["status"], tolerated["allow_failure"]) == ("completed", True)
    assert tolerated["result"]["time_difference"] == "+0.0h"
    assert tolerated["result"]["source"]["timezone"] == "UTC"
    assert tolerated["result"]["target"]["timezone"] == "UTC"
    assert tolerated["result"]["source"]["datetime"].endswith("T12:00:00+00:00")
    # The zone is valid now, so the step gated on its failure is skipped.
    assert by_id["after"] == {
        "id": "after",
        "tool": "x_everything_echo",
        "status": "skipped",
        "condition_evaluation": False,
        "condition_result": False,
        "condition_tool": "from_step:tolerated",
    }
    assert by_id["broken"]["result"] == failure(BROKEN_ERROR)
    assert by_id["undo"]["result"] == failure(UNDO_ERROR)
    assert by_id["cleanup"]["result"] == CLEANUP_TEXT
