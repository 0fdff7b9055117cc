//! Serving the gateway's router on a TCP listener: HTTP/1.1 connections (no protocol upgrades:
//! the gateway has no WebSocket route), answers without Nagle's delay, request heads bounded, and
//! a graceful stop.
//!
//! It does what `axum::serve` (without axum's `http2` feature, as the gateway had it) does, with
//! two differences that matter in front of many idle sessions, each of which an MCP client may
//! keep on a connection of its own:
//!
//! - A connection's read buffer is at most twice `aggregator.limits.maxRequestHeadBytes` (8 KiB
//!   by default), which is also the largest request head it reads: a head over the limit is
//!   refused by the [`Front`](super::Front) with a 431 whose body names the key, and one over
//!   twice the limit by hyper, with a bare 431, and the connection closes. The buffer starts at
//!   8 KiB and grows only when a read fills it (with hyper's default it could grow to 400 KiB);
//!   bodies are not bound by it (they are read as they come).
//! - A connection is one task running hyper's HTTP/1.1 connection future (650 bytes), without
//!   the HTTP/2 half of hyper-util's protocol-detecting connection (1.5 KB in all) and the
//!   per-connection channels and `select!` of `axum::serve`.
//!
//! Together these took an idle session with its own connection from 44 to 38 KB.
//!
//! `Gateway::serve` runs it with the gateway's `Front` until its shutdown signal.

use std::{convert::Infallible, time::Duration};

use axum::{body::Body, response::Response};
use hyper::body::Incoming;
use hyper_util::{rt::TokioIo, server::graceful::GracefulShutdown, service::TowerToHyperService};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use muster_upstream::in_task_wakes::Driven;

/// How long accepting pauses after an error that is not the connection's own (out of file
/// descriptors, for one), so that a full table does not spin the accept loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `service` (a [`Front`](super::Front), or any axum router) on `listener` until `stop`
/// is cancelled; then stops accepting, asks every open connection to close once its requests
/// are answered (keep-alive ends), and returns when they have. Twice `max_head_bytes` bounds a
/// connection's read buffer and request head (at least 8192: hyper's smallest buffer; a smaller
/// value is raised); the service refuses a head over `max_head_bytes` itself, as a [`Front`](super::Front)
/// does, naming the limit.
pub(crate) async fn serve<S>(
    listener: tokio::net::TcpListener,
    service: S,
    max_head_bytes: usize,
    stop: CancellationToken,
) -> std::io::Result<()>
where
    S: tower::Service<http::Request<Body>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let mut connections = hyper::server::conn::http1::Builder::new();
    connections.max_buf_size(
        max_head_bytes
            .saturating_mul(2)
            .max(muster_core::config::DEFAULT_MAX_REQUEST_HEAD_BYTES),
    );
    let graceful = GracefulShutdown::new();
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(error) if connection_error(&error) => continue,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        // Without it every small answer waited for the client's delayed ACK (~40 ms).
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(
            service
                .clone()
                .map_request(|r: http::Request<Incoming>| r.map(Body::new)),
        );
        let connection = graceful.watch(connections.serve_connection(TokioIo::new(tcp), service));
        // Driven: hyper's connection and the request's body, in the one task, wake each other.
        tokio::spawn(Driven::new(async move {
            if let Err(error) = connection.await {
                log_connection_error(&error, max_head_bytes);
            }
        }));
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Whether `error` is about the one connection being accepted (the peer reset it first), not the
/// listener.
fn connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// A connection that ended in an error: a request head over twice the limit names the limit (the
/// client got a bare 431); the rest (a peer gone mid-request, a malformed request, which got 400) at `debug`.
fn log_connection_error(error: &hyper::Error, max_head_bytes: usize) {
    if error.is_parse_too_large() {
        tracing::warn!(
            "a request head over twice {max_head_bytes} bytes (aggregator.limits.maxRequestHeadBytes) was cut off \
             with 431"
        );
    } else {
        tracing::debug!(%error, "connection ended");
    }
}
