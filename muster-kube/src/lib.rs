//! muster in Kubernetes: the MCPServer, Workflow and WorkflowExecution custom resources as the
//! gateway's store.
//!
//! Filesystem mode (a config directory) is muster's embedded default. In Kubernetes mode
//! (`kubernetes: true` in config.yaml) the definitions are custom resources that GitOps and
//! `kubectl` manage, and this crate is what plugs them into the gateway's seams:
//!
//! - [`crd`]: the CustomResourceDefinitions, generated from muster-core's Rust types (the same
//!   types filesystem mode reads), with the short names, printer columns, status subresource and
//!   CEL rules `kubectl apply` enforces. `deploy/crds/` holds them, checked against this module
//!   by a test.
//! - [`definitions`]: MCPServer and Workflow resources as the gateway's definitions, read and
//!   watched (kube-rs' watcher), each change handed to the registry as a snapshot, so only the
//!   changed definitions are touched; the last ones known are served while the API server is
//!   away.
//! - [`policy`]: which MCPServers run in Kubernetes mode (no stdio server, the namespace
//!   rules), a `ServerPolicy` for the registry.
//! - [`secrets`]: the Secrets MCPServers name (`headersFrom`, `clientCredentialsSecretRef`),
//!   read with muster's ServiceAccount only while the admission policy that guards them is in
//!   force, never muster's own nor of a type that holds something else, a `SecretSource`.
//! - [`status`]: the MCPServers' status written back (server-side apply on the status
//!   subresource, only what changed) by the one replica holding the status Lease.
//! - [`store`]: the core tools' writes as resources written with the caller's own identity (their
//!   forwarded token, or impersonation), a `DefinitionStore`.
//! - [`executions`]: workflow run records as WorkflowExecution resources written with muster's
//!   own client, labelled by workflow, status and replica, an `ExecutionStore` every replica
//!   shares.
//! - [`events`]: the gateway's events as Kubernetes Events (`events.k8s.io/v1`) on the object
//!   they concern, written with muster's own client and read back by `core_events` on every
//!   replica, an `EventBackend`.
//!
//! It builds on kube-rs (`kube` with its runtime, and `k8s-openapi`). As kube-rs asks of
//! libraries, it enables no Kubernetes version feature of `k8s-openapi`: the binary does (the
//! reference gateway enables `earliest`).
//!
//! # Example
//!
//! The MCPServer definition, as `kubectl apply -f deploy/crds/` installs it:
//!
//! ```
//! let crd = muster_kube::crd::mcpserver();
//! assert_eq!(crd.metadata.name.as_deref(), Some("mcpservers.muster.giantswarm.io"));
//! assert_eq!(crd.spec.names.short_names, Some(vec!["mcps".to_owned()]));
//! ```

pub mod crd;
pub mod definitions;
pub mod events;
pub mod executions;
mod naming;
pub mod policy;
pub mod secrets;
pub mod status;
pub mod store;
/// A Kubernetes API server double for tests (feature `test-util`).
#[cfg(feature = "test-util")]
pub mod testing;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
