//! A what-if: the reference gateway's `serve` (`examples/gateway/main.rs`: the same SDK calls,
//! the same logging, live reload and background start) with one difference, TCP_NODELAY on every
//! accepted connection. Run in its own process by `loadgen serve-gateway-nodelay`, so its CPU
//! time is measured like the reference gateway's.
//!
//! Why: `axum::serve` leaves Nagle's algorithm on, and a streamable-HTTP answer is written in
//! two parts (the SSE event, then the end of the chunked body); the second waits for the
//! client's delayed ACK, about 40 ms on Linux, on every call. The matrix measures the reference
//! gateway as it is and this variant next to it, so the cost of the hop itself can be read.

use std::path::Path;

use axum::serve::ListenerExt;
use muster::gateway::{Gateway, supervisor::SupervisorConfig};
use tracing_subscriber::EnvFilter;

use crate::BoxError;

/// Serves the gateway of `config_path` on 127.0.0.1:`port` with TCP_NODELAY.
pub(crate) async fn serve(config_path: &Path, port: u16) -> Result<(), BoxError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let (gateway, problems) = Gateway::from_config_dir(config_path, SupervisorConfig::from_env())
        .map_err(|e| format!("cannot start from {}: {e}", config_path.display()))?;
    for problem in &problems {
        tracing::error!("{problem} (file left out)");
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let _watch = gateway.watch_config_dir().ok();
    let starter = gateway.clone();
    tokio::spawn(async move { starter.start().await });
    tracing::info!("muster gateway (TCP_NODELAY) serving MCP at http://{addr}/mcp");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, gateway.router()).await?;
    Ok(())
}
