//! The echo downstream of the load benchmark (`examples/loadgen`): an rmcp server whose `echo`
//! tool returns its `message` argument, over stdio (the default) or streamable HTTP.
//!
//! ```text
//! echo_server                          # stdio
//! echo_server --http 127.0.0.1:0       # streamable HTTP; prints `listening on http://ADDR/mcp`
//! echo_server --tools 200 --seed 7     # `echo` and 199 synthetic tools (a big catalogue)
//! echo_server --http 127.0.0.1:0 --nagle   # without TCP_NODELAY (`axum::serve`'s default)
//! echo_server --blocking-stdio         # stdio through tokio's blocking pool, as rmcp's stdio()
//! ```
//!
//! It is the cost of one MCP hop that the gateway is measured against, so it does nothing but
//! that: the tool router is built once (not per request, as `#[tool_handler]` does by default),
//! and `echo` deserializes its argument and answers one text item: the `message`, followed by
//! `pad` bytes of a JSON listing (`{"name":"pod-0",...},...`, built once) when the call asks for a
//! larger result, as tools that answer JSON as text write it. The synthetic tools
//! (`--tools N` makes N tools in all) have seeded names and one-line descriptions drawn from a
//! small vocabulary, so that `filter_tools` has something to rank; calling one answers its name.
//! Over HTTP it sets TCP_NODELAY on every connection (see `--nagle`).
//!
//! Over stdio, when its stdin and stdout are pipes (as a gateway starts it), it reads and writes
//! them as non-blocking pipes on tokio's reactor. rmcp's `stdio()` goes through tokio's `Stdin`
//! and `Stdout`, which hand every read and every write to a thread of the blocking pool: 54 µs
//! of the echo server's CPU and 6.3 context switches a call at 50 sessions, against 34 µs and
//! 0.3 over HTTP. That measured tokio's blocking pool more than an MCP hop. Otherwise (a
//! terminal, a file, or `--blocking-stdio`) it uses rmcp's `stdio()`.

use std::{
    fmt::Write as _,
    net::SocketAddr,
    sync::{Arc, OnceLock},
};

use axum::serve::ListenerExt;
use clap::Parser;
use futures::future::BoxFuture;
use rmcp::{
    ErrorData as McpError, ServerHandler, ServiceExt,
    handler::server::{
        common::schema_for_type,
        router::tool::{ToolRoute, ToolRouter},
        tool::ToolCallContext,
        wrapper::Parameters,
    },
    model::{CallToolResponse, CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig, Tool},
    schemars::{self, JsonSchema},
    tool, tool_handler, tool_router,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde::Deserialize;

#[derive(Debug, Parser)]
#[command(name = "echo_server", about = "The echo MCP server of the load benchmark")]
struct Cli {
    /// Serve streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:0).
    #[arg(long)]
    http: Option<SocketAddr>,
    /// How many tools to expose in all: `echo` and N-1 synthetic ones.
    #[arg(long, default_value_t = 1)]
    tools: usize,
    /// Seed of the synthetic tools' names and descriptions (give each server its own).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Give every synthetic tool a schema of its own (its `id` argument described in its own
    /// words), as most real servers do, instead of one schema shared by all.
    #[arg(long)]
    distinct_schemas: bool,
    /// Leave Nagle's algorithm on for accepted connections (`axum::serve`'s default), instead of
    /// setting TCP_NODELAY.
    #[arg(long)]
    nagle: bool,
    /// Over stdio, use rmcp's `stdio()` (tokio's blocking pool) even when stdin and stdout are
    /// pipes.
    #[arg(long)]
    blocking_stdio: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to echo back.
    message: String,
    /// Bytes of a JSON listing to add after the message, for a larger result (at most 1 MiB).
    #[serde(default)]
    pad: usize,
}

/// The most `pad` bytes an echo adds.
const MAX_PAD: usize = 1 << 20;

/// The listing an echo's `pad` is taken from: [`MAX_PAD`] bytes of JSON objects, ASCII only.
fn listing() -> &'static str {
    static LISTING: OnceLock<String> = OnceLock::new();
    LISTING.get_or_init(|| {
        let mut listing = String::with_capacity(MAX_PAD + 64);
        for i in 0.. {
            if listing.len() >= MAX_PAD {
                break;
            }
            let _ = write!(
                listing,
                r#"{{"name":"pod-{i}","namespace":"default","ready":{}}},"#,
                i % 3 != 0
            );
        }
        listing.truncate(MAX_PAD);
        listing
    })
}

/// The arguments every synthetic tool declares (and ignores).
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct SyntheticArgs {
    /// The object to act on.
    id: Option<String>,
    /// At most this many results.
    limit: Option<u32>,
}

/// The echo server; the router is shared by every session.
#[derive(Debug, Clone)]
struct Echo {
    tools: Arc<ToolRouter<Echo>>,
}

#[tool_router(router = echo_router)]
impl Echo {
    #[tool(
        description = "Echo a message back.\nReturns the message unchanged.",
        annotations(read_only_hint = true)
    )]
    fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        let mut text = args.message;
        if args.pad > 0 {
            text.push_str(&listing()[..args.pad.min(MAX_PAD)]);
        }
        text
    }
}

impl Echo {
    fn new(tools: usize, seed: u64, distinct_schemas: bool) -> Self {
        let mut router = Self::echo_router();
        for tool in synthetic_tools(tools.saturating_sub(1), seed, distinct_schemas) {
            router.add_route(ToolRoute::new_dyn(tool, synthetic_call));
        }
        Self {
            tools: Arc::new(router),
        }
    }
}

#[tool_handler(router = self.tools)]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("muster-echo", env!("CARGO_PKG_VERSION")))
    }
}

/// A synthetic tool answers its own name.
fn synthetic_call(ctx: ToolCallContext<'_, Echo>) -> BoxFuture<'_, Result<CallToolResponse, McpError>> {
    let name = ctx.name.to_string();
    Box::pin(async move { Ok(CallToolResult::success(vec![ContentBlock::text(name)]).into()) })
}

/// SplitMix64: a tiny seeded generator, so a server's catalogue is the same on every run.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// One of `words`, skewed towards the front (the minimum of two draws), so some words are
    /// common and most are rare.
    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        let len = words.len() as u64;
        let a = self.next() % len;
        let b = self.next() % len;
        words[a.min(b) as usize]
    }
}

const VERBS: &[&str] = &[
    "get", "list", "create", "delete", "update", "describe", "scale", "restart", "search", "watch", "export", "import",
    "sync", "rotate", "approve", "cancel", "retry", "archive", "tag", "query",
];
const NOUNS: &[&str] = &[
    "pod",
    "deployment",
    "service",
    "node",
    "cluster",
    "secret",
    "volume",
    "alert",
    "metric",
    "dashboard",
    "invoice",
    "payment",
    "customer",
    "order",
    "ticket",
    "issue",
    "branch",
    "commit",
    "release",
    "user",
    "group",
    "role",
    "policy",
    "bucket",
    "object",
    "queue",
    "topic",
    "table",
    "index",
    "backup",
    "certificate",
    "domain",
    "record",
    "log",
    "trace",
    "event",
    "incident",
    "schedule",
    "report",
    "budget",
];
const PHRASES: &[&str] = &[
    "in the given namespace",
    "for the current account",
    "with its error rate",
    "across all regions",
    "and return the latest status",
    "by label selector",
    "from the audit trail",
    "with pagination",
    "including usage metrics",
    "for the payment services",
    "older than the retention period",
    "owned by a team",
];

/// `count` synthetic tools: `<verb>_<noun>_<k>` with a one-line description; with
/// `distinct_schemas`, each describes its `id` argument in its own words.
fn synthetic_tools(count: usize, seed: u64, distinct_schemas: bool) -> Vec<Tool> {
    let mut rng = SplitMix64(seed.wrapping_mul(0x2545_F491_4F6C_DD1D).wrapping_add(1));
    let schema = schema_for_type::<SyntheticArgs>();
    (0..count)
        .map(|k| {
            let verb = rng.pick(VERBS);
            let noun = rng.pick(NOUNS);
            let other = rng.pick(NOUNS);
            let phrase = rng.pick(PHRASES);
            let description = format!("{verb} the {noun} of a {other} {phrase}.");
            let schema = if distinct_schemas {
                let mut own = (*schema).clone();
                if let Some(id) = own
                    .get_mut("properties")
                    .and_then(|p| p.get_mut("id"))
                    .and_then(|id| id.as_object_mut())
                {
                    id.insert(
                        "description".into(),
                        format!("The {noun} of the {other} to {verb} (seed {seed}, tool {k}).").into(),
                    );
                }
                Arc::new(own)
            } else {
                Arc::clone(&schema)
            };
            Tool::new(format!("{verb}_{noun}_{k}"), description, schema)
        })
        .collect()
}

/// Stdin and stdout as non-blocking pipes on tokio's reactor, when both are pipes.
#[cfg(unix)]
fn pipes() -> Option<(tokio::net::unix::pipe::Receiver, tokio::net::unix::pipe::Sender)> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    // Each checks that its descriptor is a pipe, and makes it non-blocking.
    let read = tokio::net::unix::pipe::Receiver::from_owned_fd(stdin).ok()?;
    let write = tokio::net::unix::pipe::Sender::from_owned_fd(stdout).ok()?;
    Some((read, write))
}

#[cfg(not(unix))]
fn pipes() -> Option<(tokio::io::Stdin, tokio::io::Stdout)> {
    None
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let echo = Echo::new(cli.tools.max(1), cli.seed, cli.distinct_schemas);
    match cli.http {
        None => match pipes().filter(|_| !cli.blocking_stdio) {
            Some(pipes) => {
                echo.serve(pipes).await?.waiting().await?;
            }
            None => {
                echo.serve(rmcp::transport::stdio()).await?.waiting().await?;
            }
        },
        Some(addr) => {
            let service = StreamableHttpService::new(
                move || Ok(echo.clone()),
                LocalSessionManager::default().into(),
                StreamableHttpServerConfig::default(),
            );
            let app = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(addr).await?;
            let local = listener.local_addr()?;
            // The one line the load generator reads to find the server.
            #[allow(clippy::print_stdout)]
            {
                println!("listening on http://{local}/mcp");
            }
            // Without TCP_NODELAY, a response written in two parts (an SSE event, then the end of
            // the chunked body) waits for the client's delayed ACK: about 40 ms on Linux.
            let nodelay = !cli.nagle;
            let listener = listener.tap_io(move |tcp| {
                if nodelay {
                    let _ = tcp.set_nodelay(true);
                }
            });
            axum::serve(listener, app).await?;
        }
    }
    Ok(())
}
