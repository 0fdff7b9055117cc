//! # muster-gateway
//!
//! The composition of muster: connections to downstream MCP servers, the registry that names
//! their tools and builds the catalogue, the core tools, the meta-tools MCP server, and the
//! HTTP front, assembled by [`Gateway`].
//!
//! - [`auth`]: people signing in to downstream servers, and their per-session connections.
//! - [`definitions`]: where the definitions live, behind a read seam and a write seam, and
//!   filesystem mode ([`definitions::config_dir`]), the muster config directory.
//! - [`upstream`]: the gateway as an MCP client of each downstream server.
//! - [`registry`]: servers, workflows, runtime state and the catalogue snapshot.
//! - [`dispatch`]: the innermost tool service, routing calls by exposed name.
//! - [`core_tools`]: muster's own `core_*` tools.
//! - [`meta`]: the 13 meta-tools as an rmcp server handler.
//! - [`http`]: `/mcp`, `/health` and `/metrics` as an axum router.
//! - [`metrics`]: Prometheus metrics, the tool-call layer that counts and traces calls.
//! - [`workflows`]: the `workflow_<name>` tools, their availability and their run events.
//!
//! A gateway is a tool service stack ([`Gateway::tools`]) and an axum router
//! ([`Gateway::router`]); both work without a listener:
//!
//! ```
//! use axum::body::Body;
//! use muster_core::{CallContext, JsonObject, ToolCall, config::MusterConfig};
//! use muster_gateway::Gateway;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // No downstream servers: the gateway's own core tools only.
//! let gateway = Gateway::new(MusterConfig::default(), Vec::new(), Vec::new())?;
//! gateway.start().await;
//!
//! let call = ToolCall::new("core_service_list", JsonObject::new(), CallContext::default());
//! let services = gateway.tools().oneshot(call).await?;
//! assert!(!services.is_error());
//!
//! let health = http::Request::get("/health").body(Body::empty())?;
//! assert_eq!(gateway.router().oneshot(health).await?.status(), http::StatusCode::OK);
//! gateway.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Served from a config directory:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let loaded = muster_gateway::definitions::config_dir::load(std::path::Path::new("examples/config"))?;
//! let gateway = muster_gateway::Gateway::new(loaded.config, loaded.servers, loaded.workflows)?;
//! gateway.start().await;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, gateway.router()).await?;
//! # Ok(()) }
//! ```

pub mod auth;
pub mod core_tools;
pub mod definitions;
pub mod dispatch;
mod error;
pub mod events;
mod gateway;
pub mod http;
pub mod meta;
pub mod metrics;
pub mod registry;
pub mod secrets;
mod server_entries;
pub mod supervisor;
pub mod workflows;

pub use error::GatewayError;
pub use gateway::{Gateway, GatewayOptions, ShutdownReport};
/// The downstream side: connections to downstream servers ([`muster_upstream`]).
pub use muster_upstream as upstream;

/// The Rust blocks of this crate's `README.md` (its crates.io page), compiled and run as doc tests
/// so that the page stays true to the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
