//! # muster for Rust
//!
//! An embeddable SDK for MCP (Model Context Protocol) gateways, and the reference gateway built
//! from it. This facade re-exports the crates of the family:
//!
//! | module | crate | what it is |
//! |---|---|---|
//! | [`core`] | `muster-core` | the shared model: entries, names, `ToolCall`/`ToolService`, CRDs, config, errors |
//! | [`catalog`] | `muster-catalog` | the catalogue: paging, discovery, description of tools, resources, prompts |
//! | [`workflow`] | `muster-workflow` | workflows: dependency analysis (the engine is to come) |
//! | [`auth`] | `muster-auth` | sign-in to downstream servers (to come) |
//! | [`gateway`] | `muster-gateway` | composition: upstream connections, registry, core tools, meta-tools, HTTP |
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use muster::gateway::{Gateway, config_dir};
//!
//! let loaded = config_dir::load(std::path::Path::new("examples/config"))?;
//! let gateway = Gateway::new(loaded.config, loaded.servers, loaded.workflows)?;
//! gateway.start().await;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, gateway.router()).await?;
//! # Ok(()) }
//! ```

pub use muster_auth as auth;
pub use muster_catalog as catalog;
pub use muster_core as core;
pub use muster_gateway as gateway;
pub use muster_workflow as workflow;
