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
//! - `KubeSecrets` reads the Secrets an MCPServer names (`headersFrom`,
//!   `clientCredentialsSecretRef`) with muster's ServiceAccount, only while the admission policy
//!   `secretBinding.admissionPolicyBinding` is in force, never muster's own
//!   (`secretBinding.protectedSecrets`) nor of a type that holds something else;
//! - `KubeDefinitionStore` writes the core tools' changes as resources, with the caller's own
//!   identity (`kubernetesWrites`);
//! - `StatusWriter` writes the MCPServers' and Workflows' status back, from the one replica
//!   holding the Lease `muster-status-writer` (named by `POD_NAME`, else the host name; the
//!   Lease lasts `MUSTER_STATUS_LEASE_DURATION`, default 15s);
//! - `KubeExecutionStore` keeps each workflow run's record as a WorkflowExecution of muster's
//!   namespace, written with muster's own client and shared by every replica; at start, the
//!   runs this replica (`POD_NAME`, else the host name) left in progress are marked failed;
//! - `KubeEvents` writes each event as an `events.k8s.io/v1` Event on the MCPServer or Workflow
//!   it concerns (reported by this replica), and `core_events` reads every replica's back; while
//!   the API server does not answer, `core_events` answers with this replica's own events.
//!

use std::sync::Arc;

use muster::{
    core::config::MusterConfig,
    gateway::{
        Gateway, GatewayOptions,
        events::{EventLog, EventLogOptions},
        registry::RegistryOptions,
        supervisor::SupervisorConfig,
    },
};
use muster_kube::{
    definitions::{KubeDefinitions, WatchHandle},
    events::KubeEvents,
    executions::{KubeExecutionStore, replica_name},
    policy::KubernetesPolicy,
    secrets::KubeSecrets,
    status::{StatusHandle, StatusWriter},
    store::KubeDefinitionStore,
};

/// muster's namespace when config.yaml names none.
const DEFAULT_NAMESPACE: &str = "default";

/// What runs beside a gateway in Kubernetes mode, while it is held.
#[derive(Debug)]
pub(crate) struct ClusterTasks {
    /// The watch that keeps the definitions current.
    _definitions: WatchHandle,
    /// The status written back (while this replica holds the Lease).
    _status: StatusHandle,
}

/// The gateway of Kubernetes mode, and what keeps it and the cluster in step.
pub(crate) async fn gateway(
    config: MusterConfig,
    supervision: SupervisorConfig,
) -> Result<(Gateway, ClusterTasks), Box<dyn std::error::Error>> {
    let namespace = config.namespace.clone().unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    let no_cluster =
        |e: &dyn std::fmt::Display| format!("Kubernetes mode: no API server to read the definitions from ({e})");
    let cluster = kube::Config::infer().await.map_err(|e| no_cluster(&e))?;
    let client = kube::Client::try_from(cluster.clone()).map_err(|e| no_cluster(&e))?;
    let status = StatusWriter::new(client.clone(), &namespace, replica_name()).with_lease_duration(lease_duration());
    let definitions =
        KubeDefinitions::new(client.clone(), &namespace).with_namespaces(config.additional_namespaces.iter().cloned());
    let status = status.with_rejections(definitions.rejections());
    let store = KubeDefinitionStore::new(cluster, &namespace, config.kubernetes_writes.clone());
    let secrets = KubeSecrets::new(client.clone(), &namespace, config.secret_binding.clone());
    let events =
        KubeEvents::new(client.clone(), &namespace).with_namespaces(config.additional_namespaces.iter().cloned());
    let executions = executions(client, &namespace).await;
    let registry = RegistryOptions::default()
        .with_events(EventLog::with_backend(Arc::new(events), EventLogOptions::default()))
        .with_server_policy(Arc::new(KubernetesPolicy::new(&namespace)));
    let options = GatewayOptions::from(registry)
        .with_supervision(supervision)
        .with_secrets(Arc::new(secrets))
        .with_executions(executions)
        .with_definition_store(Arc::new(store));
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
    let status = status.start(registry.clone());
    let watch = definitions.watch(move |snapshot| {
        if let Some(registry) = registry.upgrade() {
            registry.apply_snapshot(snapshot);
        }
    });
    Ok((
        gateway,
        ClusterTasks {
            _definitions: watch,
            _status: status,
        },
    ))
}

/// `MUSTER_STATUS_LEASE_DURATION` (e.g. `15s`), else the default.
fn lease_duration() -> std::time::Duration {
    std::env::var("MUSTER_STATUS_LEASE_DURATION")
        .ok()
        .and_then(|d| muster::gateway::supervisor::parse_duration(&d))
        .unwrap_or(muster_kube::status::DEFAULT_LEASE_DURATION)
}

/// The run records as WorkflowExecutions of `namespace`, written with muster's own `client`,
/// after marking failed the runs this replica left in progress when it stopped. Runs of the
/// other replicas are theirs. An API server that does not answer yet is logged: the records
/// are then written as the runs go, and this replica's old runs stay in progress.
async fn executions(client: kube::Client, namespace: &str) -> Arc<dyn muster::workflow::record::ExecutionStore> {
    use muster::workflow::record::{ExecutionStore, INTERRUPTED_ERROR};

    let store = Arc::new(KubeExecutionStore::new(client, namespace));
    let recovering = Arc::clone(&store);
    // The store blocks on the API server: on a blocking thread, as the gateway calls it.
    match tokio::task::spawn_blocking(move || recovering.recover_interrupted(chrono::Utc::now())).await {
        Ok(Ok(ids)) => {
            for id in ids {
                tracing::warn!(execution_id = %id, replica = store.replica(), "{INTERRUPTED_ERROR}");
            }
        }
        Ok(Err(e)) => tracing::error!(error = %e, "cannot mark this replica's interrupted workflow runs failed"),
        Err(e) => tracing::error!(error = %e, "marking this replica's interrupted workflow runs failed did not finish"),
    }
    store
}
