//! [`ServerPolicy`]: which MCPServer definitions may run where the gateway runs.
//!
//! A definition can be valid everywhere and still not belong where the gateway runs: in
//! Kubernetes mode a stdio server would start a command in muster's own pod under its
//! ServiceAccount, so it is refused there. A policy names such refusals; the registry asks it
//! before a server connects, and the server then reads Failed with the reason in
//! `status.lastError` and is not tried. The core tools ask it too, so that
//! `core_mcpserver_create`, `_update` and `_validate` fail with the same reason.
//!
//! The default, [`AnyServer`], refuses nothing (filesystem mode).
//!
//! ```
//! use std::sync::Arc;
//! use muster_core::crd::{MCPServer, MCPServerSpec, ServerType};
//! use muster_gateway::registry::{RegistryOptions, ServerPolicy};
//!
//! #[derive(Debug)]
//! struct RemoteOnly;
//!
//! impl ServerPolicy for RemoteOnly {
//!     fn refusal(&self, server: &MCPServer) -> Option<String> {
//!         let stdio = server.spec.server_type == Some(ServerType::Stdio);
//!         stdio.then(|| "only remote servers run here".to_owned())
//!     }
//! }
//!
//! let options = RegistryOptions::default().with_server_policy(Arc::new(RemoteOnly));
//! # let _ = options;
//! ```

use std::fmt;

use muster_core::crd::MCPServer;

/// Which MCPServer definitions may run where the gateway runs.
pub trait ServerPolicy: Send + Sync + fmt::Debug {
    /// Why `server` may not run here (the text of `status.lastError` and of the core tools'
    /// refusal), or `None` when it may.
    fn refusal(&self, server: &MCPServer) -> Option<String>;
}

/// The policy that refuses no server: filesystem mode's.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyServer;

impl ServerPolicy for AnyServer {
    fn refusal(&self, _server: &MCPServer) -> Option<String> {
        None
    }
}
