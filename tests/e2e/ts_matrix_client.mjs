// The TypeScript SDK's side of the compatibility matrix (test_ts_matrix.py runs it).
//
// Connects to the gateway the way it is told (`--url URL`: streamable HTTP; `--stdio CMD ARG...`:
// a child process over stdio, the agent bridge or `gateway standalone`), runs every meta-tool and a
// native tool call with the official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// package.json), whose zod schemas check each answer, and prints one JSON line:
// {"protocolVersion": "...", "ran": N, "failures": ["operation: error", ...]}.
// Exits 0 when it could run the operations at all (the failures are the caller's to judge).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const ECHO = "x_everything_echo";
const NOW = "x_time_get_current_time";
const FEATURES_URI = "demo://resource/static/document/features.md";
const SIMPLE_PROMPT = "x_everything_simple-prompt";
const TIMEOUT_MS = 30_000;

function transportFromArgs(argv) {
  if (argv[0] === "--url") return new StreamableHTTPClientTransport(new URL(argv[1]));
  if (argv[0] === "--stdio") {
    return new StdioClientTransport({
      command: argv[1],
      args: argv.slice(2),
      env: { ...process.env, RUST_LOG: "info", NO_COLOR: "1" },
      stderr: "inherit",
    });
  }
  throw new Error("usage: ts_matrix_client.mjs --url URL | --stdio CMD [ARG...]");
}

function textsOf(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text);
}

function check(condition, what) {
  if (!condition) throw new Error(what);
}

async function body(client, tool, args) {
  const result = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: TIMEOUT_MS });
  check(result.isError !== true, `error result: ${textsOf(result).join(" ")}`);
  const texts = textsOf(result);
  check(texts.length === 1, `expected one text item, got ${JSON.stringify(result.content)}`);
  return JSON.parse(texts[0]);
}

const entries = (b, key) => (Array.isArray(b) ? b : b[key]);
const names = (b, key, field = "name") => new Set(entries(b, key).map((e) => e[field]));

const operations = {
  list_tools: async (c) => check(names(await body(c, "list_tools", { limit: 1000 }), "tools").has(ECHO), "no echo"),
  filter_tools: async (c) => {
    const found = names(await body(c, "filter_tools", { pattern: "x_time_*" }), "tools");
    check(found.has(NOW) && found.size === 2, `found ${[...found]}`);
  },
  describe_tool: async (c) => check((await body(c, "describe_tool", { name: ECHO })).name === ECHO, "wrong tool"),
  list_core_tools: async (c) =>
    check(names(await body(c, "list_core_tools", {}), "tools").has("core_mcpserver_list"), "no core tool"),
  call_tool: async (c) => {
    const result = await c.callTool({ name: "call_tool", arguments: { name: ECHO, arguments: { message: "ts" } } });
    check(result.isError !== true, textsOf(result).join(" "));
    check(textsOf(result).some((t) => t.includes("Echo: ts")), JSON.stringify(result.content));
  },
  list_resources: async (c) =>
    check(names(await body(c, "list_resources", {}), "resources", "uri").has(FEATURES_URI), "no features.md"),
  filter_resources: async (c) =>
    check(
      names(await body(c, "filter_resources", { server: "everything", limit: 50 }), "resources", "uri").has(FEATURES_URI),
      "no features.md",
    ),
  describe_resource: async (c) =>
    check((await body(c, "describe_resource", { uri: FEATURES_URI })).uri === FEATURES_URI, "wrong resource"),
  get_resource: async (c) => {
    const result = await c.callTool({ name: "get_resource", arguments: { uri: FEATURES_URI } });
    check(result.isError !== true && textsOf(result).some((t) => t.includes("# Everything Server - Features")), "no text");
  },
  list_prompts: async (c) => check(names(await body(c, "list_prompts", {}), "prompts").has(SIMPLE_PROMPT), "no prompt"),
  filter_prompts: async (c) =>
    check(names(await body(c, "filter_prompts", { pattern: "x_everything_*" }), "prompts").has(SIMPLE_PROMPT), "none"),
  describe_prompt: async (c) =>
    check((await body(c, "describe_prompt", { name: SIMPLE_PROMPT })).name === SIMPLE_PROMPT, "wrong prompt"),
  get_prompt: async (c) => {
    const messages = entries(await body(c, "get_prompt", { name: SIMPLE_PROMPT }), "messages");
    check(messages[0].content.text === "This is a simple prompt without arguments.", JSON.stringify(messages));
  },
  native_tool_call: async (c) => {
    const result = await c.callTool({ name: ECHO, arguments: { message: "native" } });
    check(JSON.stringify(textsOf(result)) === JSON.stringify(["Echo: native"]), JSON.stringify(result));
  },
  native_structured_tool_call: async (c) => {
    // listTools first: the SDK then checks structuredContent against the tool's outputSchema.
    await c.listTools();
    const result = await c.callTool({ name: NOW, arguments: { timezone: "UTC" } });
    check(result.structuredContent?.timezone === "UTC", JSON.stringify(result));
  },
};

async function main() {
  const transport = transportFromArgs(process.argv.slice(2));
  let negotiated = null;
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (version) => {
    negotiated = version;
    setVersion?.(version);
  };
  const client = new Client({ name: "muster-ts-matrix", version: "1.0.0" });
  await client.connect(transport, { timeout: TIMEOUT_MS });
  // A standalone gateway starts its downstream servers after it answers.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const listed = new Set((await client.listTools()).tools.map((t) => t.name));
    if (listed.has(ECHO) && listed.has(NOW)) break;
    if (Date.now() > deadline) throw new Error("tools/list never had the aggregated tools");
    await new Promise((r) => setTimeout(r, 500));
  }
  const failures = [];
  for (const [name, operation] of Object.entries(operations)) {
    try {
      await operation(client);
    } catch (e) {
      failures.push(`${name}: ${String(e?.message ?? e).split("\n")[0].slice(0, 400)}`);
    }
  }
  await client.close();
  console.log(JSON.stringify({ protocolVersion: negotiated, ran: Object.keys(operations).length, failures }));
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
