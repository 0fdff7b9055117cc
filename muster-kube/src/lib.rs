//! muster in Kubernetes: the MCPServer, Workflow and WorkflowExecution custom resources as the
//! gateway's store.
//!
//! Filesystem mode (a config directory) is muster's embedded default. In Kubernetes mode
//! (`kubernetes: true` in config.yaml) the definitions are custom resources that GitOps and
//! `kubectl` manage, and this crate is what plugs them into the gateway's seams.
//!
//! It builds on kube-rs (`kube` with its runtime, and `k8s-openapi`). As kube-rs asks of
//! libraries, it enables no Kubernetes version feature of `k8s-openapi`: the binary does (the
//! reference gateway enables `earliest`).

/// A Kubernetes API server double for tests (feature `test-util`).
#[cfg(feature = "test-util")]
pub mod testing;
