//! Kubernetes mode (`kubernetes: true` in config.yaml): the definitions are the MCPServer and
//! Workflow resources of muster's namespace (`namespace`, default `default`) and of
//! `additionalNamespaces`, read through the cluster's API server. The client is the one kube-rs
//! infers: in a pod, its ServiceAccount; elsewhere the current context of `KUBECONFIG` (or
//! `~/.kube/config`).
//!
//! The pieces, all from `muster-kube`:
//! - `KubeDefinitions` lists the definitions at start and then watches them; every change
//!   reaches the registry as a snapshot, so only the changed definitions are touched, and the
//!   last ones known are served while the API server is away;
//! - `KubernetesPolicy` refuses what does not run in Kubernetes mode (a stdio server reads
//!   Failed with the reason, and the core tools refuse to write one);
//! - `KubeDefinitionStore` writes the core tools' changes as resources, with the caller's own
//!   identity (`kubernetesWrites`).
//!
//! Not yet here: status written back to the resources, `core_service_*` as writes of the spec,
//! run records as WorkflowExecutions and events as Kubernetes Events (they are kept in memory).

use std::sync::Arc;

use muster::{
    core::config::MusterConfig,
    gateway::{Gateway, GatewayOptions, registry::RegistryOptions, supervisor::SupervisorConfig},
};
use muster_kube::{
    definitions::{KubeDefinitions, WatchHandle},
    policy::KubernetesPolicy,
    store::KubeDefinitionStore,
};

/// muster's namespace when config.yaml names none.
const DEFAULT_NAMESPACE: &str = "default";

/// The gateway of Kubernetes mode, and the watch that keeps its definitions current (while it
/// is held).
pub(crate) async fn gateway(
    config: MusterConfig,
    supervision: SupervisorConfig,
) -> Result<(Gateway, WatchHandle), Box<dyn std::error::Error>> {
    let namespace = config.namespace.clone().unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    let no_cluster =
        |e: &dyn std::fmt::Display| format!("Kubernetes mode: no API server to read the definitions from ({e})");
    let cluster = kube::Config::infer().await.map_err(|e| no_cluster(&e))?;
    let client = kube::Client::try_from(cluster.clone()).map_err(|e| no_cluster(&e))?;
    let definitions =
        KubeDefinitions::new(client, &namespace).with_namespaces(config.additional_namespaces.iter().cloned());
    let store = KubeDefinitionStore::new(cluster, &namespace, config.kubernetes_writes.clone());
    let registry = RegistryOptions::default()
        .with_supervision(supervision)
        .with_server_policy(Arc::new(KubernetesPolicy::new(&namespace)));
    let options = GatewayOptions::from(registry).with_definition_store(Arc::new(store));
    let gateway = Gateway::with_options(config, Vec::new(), Vec::new(), options)?;
    match definitions.list().await {
        Ok(snapshot) => {
            gateway.registry().apply_snapshot(snapshot);
        }
        // The watch below retries, with backoff, until the API server answers.
        Err(e) => {
            tracing::error!(error = %e, namespace, "cannot list the definitions yet; serving none until the API server answers")
        }
    }
    let registry = Arc::downgrade(gateway.registry());
    let watch = definitions.watch(move |snapshot| {
        if let Some(registry) = registry.upgrade() {
            registry.apply_snapshot(snapshot);
        }
    });
    Ok((gateway, watch))
}
