//! # muster for Rust
//!
//! An embeddable SDK for MCP (Model Context Protocol) gateways, and the reference gateway built
//! from it. This facade re-exports the crates of the family:
//!
//! | module | crate | what it is |
//! |---|---|---|
//! | [`core`] | `muster-core` | the shared model: entries, names, `ToolCall`/`ToolService`, CRDs, config, errors |
//! | [`catalog`] | `muster-catalog` | the catalogue: paging, BM25F discovery, toolsets and their tower layers |
//! | [`workflow`] | `muster-workflow` | workflows: templates, the engine (through any `ToolService`), run records |
//! | [`auth`] | `muster-auth` | sign-in to downstream servers, the front door (`BearerAuthLayer`), token exchange |
//! | [`upstream`] | `muster-upstream` | connections to downstream servers: transports, call lanes, egress, call limits |
//! | [`gateway`] | `muster-gateway` | composition: supervision, registry, core tools, meta-tools, HTTP |
//!
//! A tool call is a tower `Service`: the gateway's whole stack can be called without HTTP.
//!
//! ```
//! use muster::core::{CallContext, JsonObject, ToolCall, config::MusterConfig};
//! use muster::gateway::Gateway;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let gateway = Gateway::new(MusterConfig::default(), Vec::new(), Vec::new())?;
//! gateway.start().await;
//! let call = ToolCall::new("core_service_list", JsonObject::new(), CallContext::default());
//! let services = gateway.tools().oneshot(call).await?;
//! assert!(!services.is_error());
//! gateway.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Serving it is one more step (`Gateway::serve` adds a graceful shutdown):
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use muster::gateway::{Gateway, definitions::config_dir};
//!
//! let loaded = config_dir::load(std::path::Path::new("examples/config"))?;
//! let gateway = Gateway::new(loaded.config, loaded.servers, loaded.workflows)?;
//! gateway.start().await;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, gateway.router()).await?;
//! # Ok(()) }
//! ```
//!
//! The guide `docs/composing.md` shows how to build a stack of your own from the pieces
//! (`examples/compose`) and how to write a layer; `docs/config-reference.md` lists every
//! `config.yaml` key and CRD field.

/// The Rust blocks of `docs/composing.md`, compiled and run as doc tests so the guide cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../docs/composing.md")]
pub struct ComposingGuide;

/// The Rust blocks of `README.md` (the SDK snippet), compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;

pub use muster_auth as auth;
pub use muster_catalog as catalog;
pub use muster_core as core;
pub use muster_gateway as gateway;
pub use muster_upstream as upstream;
pub use muster_workflow as workflow;
