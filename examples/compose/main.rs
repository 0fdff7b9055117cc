//! Composing your own gateway: an axum app with its own tower stack built from the SDK's pieces
//! (see `docs/composing.md`).
//!
//! ```text
//! cargo run --example compose                          # MCP on http://127.0.0.1:8091/mcp
//! COMPOSE_ADDR=127.0.0.1:0 cargo run --example compose # any free port
//! COMPOSE_TRUSTED_ISSUER=https://idp.example.com cargo run --example compose   # with a front door
//! ```
//!
//! It starts a downstream MCP server in this process (`notes`: `add_note`, `list_notes`,
//! `delete_note`), connects to it through muster-gateway's registry, and serves MCP with:
//!
//! - its own MCP server, listing the catalogue's tools directly and muster's `filter_tools`;
//! - the toolset layers of muster-catalog (`X-muster-Toolset: preset:read-only` hides and refuses
//!   `x_notes_add_note` and `x_notes_delete_note`);
//! - muster-auth's front door, when `COMPOSE_TRUSTED_ISSUER` names an issuer whose tokens are
//!   accepted (audience: the `/mcp` URL);
//! - a core tool of its own, `core_whoami`, next to the gateway's `core_*` tools;
//! - a layer of its own that logs every call with its outcome.

use std::error::Error;

mod app;
mod layers;
mod notes;
mod whoami;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,rmcp=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let addr = std::env::var("COMPOSE_ADDR").unwrap_or_else(|_| "127.0.0.1:8091".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let front_door = std::env::var("COMPOSE_TRUSTED_ISSUER")
        .ok()
        .map(|issuer| app::FrontDoor {
            issuer,
            resource: url.clone(),
        });
    let protected = front_door.is_some();
    let composed = app::compose(front_door).await?;

    // What a client sends, spelled out with curl (any MCP client over streamable HTTP will do).
    let post =
        format!("curl -s {url} -H 'content-type: application/json' -H 'accept: application/json, text/event-stream'");
    let mut howto = format!(
        "MCP on {url}\n\
         \n\
         Call it with any MCP client (streamable HTTP), or from bash with curl:\n\
         \x20 SID=$({post} -i -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{{}},\"clientInfo\":{{\"name\":\"curl\",\"version\":\"1\"}}}}}}' \\\n\
         \x20   | sed -n 's/^mcp-session-id: *//Ip' | tr -d '\\r')\n\
         \x20 {post} -H \"mcp-session-id: $SID\" -d '{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}'\n\
         \x20 {post} -H \"mcp-session-id: $SID\" -d '{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}}'\n\
         \x20 {post} -H \"mcp-session-id: $SID\" -d '{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{{\"name\":\"x_notes_add_note\",\"arguments\":{{\"text\":\"hello\"}}}}}}'\n\
         \x20 {post} -H \"mcp-session-id: $SID\" -d '{{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{{\"name\":\"filter_tools\",\"arguments\":{{\"query\":\"delete a note\"}}}}}}'\n\
         \x20 {post} -H \"mcp-session-id: $SID\" -d '{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{{\"name\":\"core_whoami\",\"arguments\":{{}}}}}}'\n\
         Add -H 'X-muster-Toolset: preset:read-only' to see and call only the read-only tools\n\
         (x_notes_add_note is then refused: it is outside the toolset).\n"
    );
    if protected {
        howto.push_str("The front door wants `Authorization: Bearer <token>` of the trusted issuer.\n");
    }
    howto.push_str("Ctrl-C stops it.");
    {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{howto}")?;
        stdout.flush()?;
    }

    let end_sessions = composed.end_sessions.clone();
    axum::serve(listener, composed.router.clone())
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            end_sessions.cancel();
        })
        .await?;
    tracing::info!(calls = composed.audit.records().len(), "stopped");
    composed.shutdown().await;
    Ok(())
}
