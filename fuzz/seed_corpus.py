#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into fuzz/corpus/<target>/seed-<hash>.

Run from anywhere: python3 fuzz/seed_corpus.py. Seeds come from the repository's tests and
examples and from the reference documents under /work/shared/reference when they are there
(muster-crds.txt, muster-mcp-tools.txt). Each file is named by the hash of its contents, so
running it again adds nothing twice. The input layouts are described in each target's header.
"""

import hashlib
import json
import os
import re
import sys

FUZZ = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(FUZZ)
REFERENCE = "/work/shared/reference"


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    folder = os.path.join(FUZZ, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def read(*parts):
    path = os.path.join(*parts)
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


def rust_strings(source):
    """The string literals of a Rust source: raw (r#"..."#) and plain ("...", unescaped)."""
    found = [m.group(2) for m in re.finditer(r'r(#+)"(.*?)"\1', source, re.S)]
    for m in re.finditer(r'(?<![r#\w])"((?:[^"\\\n]|\\.)*)"', source):
        try:
            found.append(json.loads('"' + m.group(1).replace("\\'", "'") + '"'))
        except ValueError:
            pass
    return found


def rust_files(*folders):
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in sorted(files):
                if f.endswith(".rs"):
                    yield read(dirpath, f)


def yaml_blocks(text):
    """The YAML documents of a reference page: from an `apiVersion:` or `aggregator:` line to
    the first unindented line that is not a top-level key of the document."""
    blocks, current = [], None
    keys = re.compile(r"^(apiVersion|kind|metadata|spec|status|aggregator|namespace|kubernetes|toolsetPresets):")
    for line in text.splitlines():
        if current is None:
            if re.match(r"^(apiVersion|aggregator):", line):
                current = [line]
            continue
        if line == "" or line[0] in " #-" or keys.match(line):
            current.append(line)
        else:
            blocks.append("\n".join(current).strip() + "\n")
            current = None
            if re.match(r"^(apiVersion|aggregator):", line):
                current = [line]
    if current:
        blocks.append("\n".join(current).strip() + "\n")
    return blocks


# ---------- toolset_selector: header lines, then "\n\n" and toolsetPresets as JSON ----------

PRESETS = {
    "infra": {
        "description": "Infra servers",
        "include": [{"label": "group=infra"}],
        "exclude": [{"tool": "x_k8s_delete_pod"}],
    },
    "delivery": {"include": [{"label": "category"}]},
    "ops": {"include": [{"preset": "infra"}, {"preset": "delivery"}, {"pattern": "x_prom_*"}]},
    "safe": {"include": [{"preset": "ops"}], "exclude": [{"readOnly": True}]},
    "empty-label": {"include": [{"label": "group="}]},
    "regional": {"include": [{"server": "db-eu"}, {"label": "region=eu"}, {"workflow": "deploy"}]},
}


def toolset_seeds():
    headers = [
        "preset:read-only, tool:x_nope",
        "preset:read-only",
        "preset:none",
        "preset:full",
        "server:k8s",
        "server:k8s, tool:x_prom_query",
        "server:prom, workflow:deploy, tool:core_service_list",
        "server:k8s, server:nope, workflow:nope",
        "server:db-eu",
        "server:db",
        "workflow:deploy",
        "tool:x_db_query",
        "preset:infra",
        "preset:ops",
        "preset:safe",
        "preset:delivery",
        "preset:empty-label",
        "preset:regional, preset:read-only",
        "preset:foo",
        "server:a, toolset:shared",
        "label:team=a",
        "kubernetes",
        "server:",
        " , ",
        "preset:read-only\nserver:k8s",
        "PRESET:full",
        ",".join("tool:t%d" % i for i in range(32)),
        ",".join("tool:t%d" % i for i in range(33)),
    ]
    for h in headers:
        write("toolset_selector", h)
        write("toolset_selector", h + "\n\n" + json.dumps(PRESETS))
    write("toolset_selector", "preset:a\n\n" + json.dumps({"a": {"include": [{"preset": "b"}]}, "b": {"include": [{"preset": "a"}]}}))
    write("toolset_selector", "preset:bad\n\n" + json.dumps({"bad": {"include": [{"tool": "x", "server": "y"}]}}))
    write("toolset_selector", "preset:glob\n\n" + json.dumps({"glob": {"include": [{"pattern": "x_[k*"}]}}))
    write("toolset_selector", "preset:read-only\n\n" + json.dumps({"read-only": {}}))


# ---------- workflow_template: a template, then optionally NUL and a JSON value ----------


def template_seeds():
    sources = set()
    for text in rust_files("muster-workflow/src/template", "muster-workflow/src/engine"):
        for s in rust_strings(text):
            if "{{" in s and len(s) < 400:
                sources.add(s)
    for line in (read(REFERENCE, "muster-crds.txt") + read(REFERENCE, "muster-mcp-tools.txt")).splitlines():
        for m in re.finditer(r'"([^"]*\{\{.*?\}\}[^"]*)"', line):
            sources.add(m.group(1).replace('\\"', '"'))
    sources.update(
        [
            "{{ .input.app_name }}-{{ .input.environment }}",
            "{{ .results.pods.items[0].status.phase }}",
            "{{ range $i, $p := .results.pods.items }}{{ $i }}={{ $p.name }} {{ end }}",
            '{{ if eq .input.environment "staging" }}yes{{ else }}no{{ end }}',
            '{{ with .vars.item }}{{ .name | upper }}{{ end }}',
            '{{ define "x" }}{{ . }}{{ end }}{{ template "x" .input.app_name }}',
            '{{ .input.json | fromJson | toJson }}',
            '{{ dict "a" 1 "b" (list 1 2) | toPrettyJson }}',
            '{{ "ab" | repeat 3 }}',
            '{{ .input.date | date "2006-01-02" }}',
            '{{ printf "%05.2f" .input.ratio }}',
            '{{ index .results.pods.items 1 }}',
            '{{ (index .result.items 0).name }}',
            "items[0].status.phase",
            "{{ .result.count }}",
        ]
    )
    for s in sorted(sources):
        write("workflow_template", s)
    write(
        "workflow_template",
        "{{ .input.replicas }}\0"
        + json.dumps({"name": "{{ .input.app_name }}", "n": "{{ len .input.tags }}", "list": ["{{ .vars.item }}", 1, None]}),
    )
    write("workflow_template", "x\0" + json.dumps(["{{ .results.events.items }}", {"k": "{{ .input.nothing }}"}]))


# ---------- definition_yaml: one YAML document ----------


def definition_seeds():
    docs = []
    for folder in ("examples/config", "tests"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in sorted(files):
                if f.endswith((".yaml", ".yml")):
                    docs.append(read(dirpath, f))
    for text in rust_files("muster-core/src", "muster-gateway/src/definitions", "muster-workflow/src", "tests"):
        for s in rust_strings(text):
            if re.search(r"^\s*(apiVersion|kind|aggregator|spec|toolsetPresets):", s, re.M) and len(s) < 20000:
                docs.append(s)
    for name in ("muster-crds.txt", "muster-mcp-tools.txt", "muster-facts.md"):
        docs.extend(yaml_blocks(read(REFERENCE, name)))
    for d in docs:
        if d.strip():
            write("definition_yaml", d)


# ---------- jsonrpc_meta: flags, tool index, [toolset header line], body ----------

META = [
    "list_tools", "describe_tool", "filter_tools", "list_core_tools", "call_tool", "list_resources",
    "filter_resources", "describe_resource", "get_resource", "list_prompts", "filter_prompts",
    "describe_prompt", "get_prompt",
]
INNER = [
    "core_service_list", "core_service_status", "core_service_start", "core_service_stop",
    "core_service_restart", "core_mcpserver_list", "core_mcpserver_get", "core_mcpserver_create",
    "core_mcpserver_update", "core_mcpserver_delete", "core_mcpserver_validate", "core_mcpserver_detect",
    "core_config_get", "core_config_get_aggregator", "core_config_update_aggregator", "core_config_save",
    "core_config_reload", "core_events", "core_workflow_list", "core_workflow_get", "core_workflow_available",
    "core_workflow_create", "core_workflow_update", "core_workflow_delete", "core_workflow_validate",
    "core_workflow_execution_list", "core_workflow_execution_get", "core_auth_login", "core_auth_logout",
    "core_auth_status", "workflow_inspect", "workflow_demo-tour", "workflow_fan-out",
]

STATELESS, TOOLSET, BOTH, ELICIT = 1, 2, 4, 8
RAW, META_CALL, CALL_TOOL, DIRECT = 0, 16, 32, 48

META_ARGS = {
    "list_tools": [{}, {"limit": 2}, {"limit": 1, "offset": 3}],
    "describe_tool": [{"name": "core_service_list"}, {"name": "workflow_inspect"}, {"name": "x_demo_echo"}],
    "filter_tools": [
        {"pattern": "core_*", "limit": 5},
        {"query": "deploy an app to a cluster", "limit": 5},
        {"labels": {"team": "platform"}},
        {"pattern": "*workflow*", "limit": 25, "offset": 25, "case_sensitive": True},
        {"description_filter": "service", "include_schema": True},
        {"toolset": ["preset:observability", "workflow:inspect"], "include_presets": True},
        {"toolset": ["preset:nope"]},
    ],
    "list_core_tools": [{}],
    "call_tool": [
        {"name": "core_service_list", "arguments": {}},
        {"name": "workflow_inspect", "arguments": {"name": "remote", "verbose": True}},
        {"name": "x_demo_echo", "arguments": {"message": "hi"}},
    ],
    "list_resources": [{}],
    "filter_resources": [{"pattern": "board://*", "server": "demo", "limit": 25}],
    "describe_resource": [{"uri": "demo://greeting", "server": "demo"}],
    "get_resource": [{"uri": "demo://greeting"}],
    "list_prompts": [{}],
    "filter_prompts": [{"pattern": "x_demo_*", "limit": 25}],
    "describe_prompt": [{"name": "x_demo_greet"}],
    "get_prompt": [{"name": "x_demo_greet", "arguments": {"name": "you"}}],
}

WORKFLOW_SPEC = {
    "name": "probe",
    "description": "List and inspect",
    "args": {"who": {"type": "string", "default": "demo"}},
    "steps": [
        {"id": "list", "tool": "core_service_list", "jq": "[.services[].name]"},
        {"id": "get", "tool": "core_mcpserver_get", "args": {"name": "{{ .input.who }}"}, "allowFailure": True},
    ],
    "output": {"names": "{{ .results.list }}"},
}

INNER_ARGS = {
    "core_service_status": [{"name": "demo"}, {"name": "muster-aggregator"}],
    "core_service_start": [{"name": "demo"}],
    "core_service_stop": [{"name": "remote"}],
    "core_service_restart": [{"name": "demo"}],
    "core_mcpserver_get": [{"name": "remote"}],
    "core_mcpserver_create": [
        {"name": "git", "type": "stdio", "command": ["npx", "mcp-git"], "autoStart": False},
        {"name": "api", "type": "streamable-http", "url": "https://api.example.com/mcp", "timeout": 30, "headers": {"X-Team": "a"}},
        {"name": "../evil", "type": "stdio", "command": "true"},
    ],
    "core_mcpserver_update": [{"name": "remote", "type": "streamable-http", "url": "https://other.invalid/mcp", "displayName": "Other"}],
    "core_mcpserver_delete": [{"name": "remote"}],
    "core_mcpserver_validate": [{"name": "x", "type": "sse", "url": "http://127.0.0.1:1/sse"}, {"name": "x", "type": "stdio"}],
    "core_mcpserver_detect": [{"url": "http://127.0.0.1:1/mcp", "timeout": 1}],
    "core_config_update_aggregator": [{"aggregator": {"musterPrefix": "y", "exposure": "both"}}, {"aggregator": {"port": 0, "Host": "::"}}],
    "core_events": [{"limit": 3}, {"resourceType": "MCPServer", "resourceName": "demo"}, {"since": "1h", "type": "Warning"}],
    "core_workflow_get": [{"name": "inspect"}],
    "core_workflow_available": [{"name": "demo-tour"}],
    "core_workflow_create": [WORKFLOW_SPEC, dict(WORKFLOW_SPEC, name="inspect")],
    "core_workflow_update": [dict(WORKFLOW_SPEC, name="inspect")],
    "core_workflow_delete": [{"name": "fan-out"}],
    "core_workflow_validate": [WORKFLOW_SPEC, {"name": "bad", "steps": [{"id": "a", "tool": "t", "args": {"x": "{{ nope }}"}}]}],
    "core_workflow_execution_list": [{"workflow_name": "inspect", "limit": 5}],
    "core_workflow_execution_get": [{"execution_id": "00000000-0000-0000-0000-000000000000", "include_steps": True}],
    "core_auth_login": [{"server": "remote"}],
    "core_auth_logout": [{"server": "remote"}],
    "core_auth_status": [{"auth_urls": True}],
    "workflow_inspect": [{}, {"name": "remote", "verbose": True}, {"name": ""}],
    "workflow_demo-tour": [{"who": "you"}],
    "workflow_fan-out": [{}, {"names": ["demo", "nope", "remote"]}],
}


def meta_input(flags, tool, body, toolset=None):
    data = bytes([flags, tool])
    if toolset is not None:
        data += toolset.encode() + b"\n"
    return data + (body if isinstance(body, bytes) else json.dumps(body).encode())


def rpc(method, params=None, id=1, stateless=False):
    message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None or stateless:
        params = dict(params or {})
        if stateless:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        message["params"] = params
    return message


def jsonrpc_seeds():
    t = "jsonrpc_meta"
    for name, examples in META_ARGS.items():
        for args in examples:
            write(t, meta_input(META_CALL, META.index(name), args))
            write(t, meta_input(META_CALL | STATELESS, META.index(name), args))
    for name in INNER:
        for args in INNER_ARGS.get(name, [{}]):
            write(t, meta_input(CALL_TOOL, INNER.index(name), args))
    write(t, meta_input(CALL_TOOL | ELICIT, INNER.index("core_auth_login"), {"server": "remote"}))
    write(t, meta_input(CALL_TOOL | ELICIT | STATELESS, INNER.index("core_auth_login"), {"server": "remote"}))
    for header in ["preset:observability", "preset:delivery, tool:core_events", "server:remote", "preset:nope", "label:x=y", ""]:
        write(t, meta_input(META_CALL | TOOLSET, META.index("list_tools"), {}, header))
        write(t, meta_input(CALL_TOOL | TOOLSET, INNER.index("core_service_list"), {}, header))
    # The native path: tools called by name directly, with exposure both.
    for i, name in enumerate(META + INNER):
        if i % 3 == 0:
            write(t, meta_input(DIRECT | BOTH, i, {}))
    write(t, meta_input(DIRECT, len(META), {}))
    # Raw messages, in a session and stateless.
    messages = [
        rpc("tools/list"),
        rpc("tools/list", {"cursor": "abc"}),
        rpc("tools/call", {"name": "filter_tools", "arguments": {"query": "list services", "limit": 3}}),
        rpc("tools/call", {"name": "call_tool", "arguments": {"name": "core_workflow_list"}, "_meta": {"progressToken": 5}}),
        rpc("tools/call", {"name": "nope"}),
        rpc("tools/call", {}),
        rpc("resources/list"),
        rpc("resources/templates/list"),
        rpc("resources/read", {"uri": "demo://greeting"}),
        rpc("resources/subscribe", {"uri": "demo://greeting"}),
        rpc("prompts/list"),
        rpc("prompts/get", {"name": "x_demo_greet", "arguments": {"name": "a"}}),
        rpc("completion/complete", {"ref": {"type": "ref/prompt", "name": "x_demo_greet"}, "argument": {"name": "name", "value": "a"}}),
        rpc("logging/setLevel", {"level": "debug"}),
        rpc("ping"),
        rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        rpc("server/discover", {}),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "x"}},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "id": 9, "result": {}},
        {"jsonrpc": "2.0", "id": 9, "error": {"code": -32601, "message": "no"}},
        [rpc("ping", id=1), rpc("tools/list", id=2)],
    ]
    for m in messages:
        write(t, meta_input(RAW, 0, m))
        if isinstance(m, dict) and "method" in m and "id" in m and m["method"] != "initialize":
            write(t, meta_input(RAW | STATELESS, 0, rpc(m["method"], m.get("params"), stateless=True)))
    write(t, meta_input(RAW, 0, b"{not json"))
    write(t, meta_input(RAW, 0, b""))


if __name__ == "__main__":
    toolset_seeds()
    template_seeds()
    definition_seeds()
    jsonrpc_seeds()
    for target in sorted(os.listdir(os.path.join(FUZZ, "corpus"))):
        folder = os.path.join(FUZZ, "corpus", target)
        print(target, len(os.listdir(folder)), "files", file=sys.stderr)
