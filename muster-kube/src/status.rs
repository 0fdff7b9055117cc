//! [`StatusWriter`]: the status of every MCPServer and Workflow, written back to its resource by
//! one replica.
//!
//! `kubectl get mcps` shows what `core_mcpserver_get` shows: the state, health, last error,
//! retry times and the `Ready` condition (`ServerRuntime::to_status`), and `lastRestartedAt`.
//! `kubectl get wf` shows whether a Workflow is valid (with its validation errors when it is not:
//! [`Rejections`]), its step count and the tools it names. The writer
//!
//! - writes through the status subresource with server-side apply, field manager `muster`, so
//!   the spec stays the author's and `managedFields` says who wrote what;
//! - writes a server's status only when it differs from what the resource holds (after a
//!   replica takes over, it reads what the resources hold first), so a steady gateway sends
//!   nothing;
//! - writes only while its replica holds the Lease `muster-status-writer` (coordination.k8s.io,
//!   in muster's namespace, through kube-lease-manager): replicas observe alike, one writes.
//!   When the holder stops renewing (killed), another replica takes over once the lease's
//!   duration has passed.
//!
//! ```no_run
//! # async fn run(registry: std::sync::Arc<muster_gateway::registry::Registry>) -> Result<(), kube::Error> {
//! use muster_kube::status::StatusWriter;
//!
//! let client = kube::Client::try_default().await?;
//! let writer = StatusWriter::new(client, "muster", "muster-7d9f-abcde");
//! let _writing = writer.start(std::sync::Arc::downgrade(&registry));
//! # Ok(()) }
//! ```

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Weak,
    time::Duration,
};

use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, Patch, PatchParams},
};
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use muster_core::crd::{API_VERSION, MCPServer, MCPServerStatus, Workflow, WorkflowStatus};
use muster_gateway::registry::Registry;
use serde_json::{Value, json};

use crate::{
    definitions::{Kind, Rejections},
    naming::Naming,
};

/// A resource muster writes the status of: its kind and gateway name.
type Target = (Kind, String);

/// The Lease whose holder writes status.
pub const STATUS_LEASE: &str = "muster-status-writer";
/// The field manager of muster's status writes.
pub const FIELD_MANAGER: &str = "muster";
/// How long a holder's lease lasts without renewal, by default: another replica takes over
/// this long after the holder stopped.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the servers' status is compared with what was written.
const TICK: Duration = Duration::from_secs(1);

/// Writes the status of every MCPServer while its replica holds the status Lease.
#[derive(Clone)]
pub struct StatusWriter {
    client: Client,
    naming: Naming,
    identity: String,
    lease_duration: Duration,
    rejections: Rejections,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter")
            .field("muster_namespace", &self.naming.muster_namespace())
            .field("identity", &self.identity)
            .field("lease_duration", &self.lease_duration)
            .finish_non_exhaustive()
    }
}

impl StatusWriter {
    /// A writer through `client` for a muster in `muster_namespace`, whose replica holds the
    /// Lease as `identity` (its pod's name: unique among the replicas).
    pub fn new(client: Client, muster_namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            client,
            naming: Naming::new(muster_namespace),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            rejections: Rejections::default(),
        }
    }

    /// Reports the Workflows muster cannot serve as invalid, with why
    /// ([`KubeDefinitions::rejections`](crate::definitions::KubeDefinitions::rejections)).
    pub fn with_rejections(mut self, rejections: Rejections) -> Self {
        self.rejections = rejections;
        self
    }

    /// Sets how long the Lease lasts without renewal (at least 2 s).
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration.max(Duration::from_secs(2));
        self
    }

    /// Starts writing the status of `registry`'s servers whenever this replica holds the Lease,
    /// until the handle is dropped (the Lease is then released) or the registry is gone.
    pub fn start(self, registry: Weak<Registry>) -> StatusHandle {
        StatusHandle {
            task: tokio::spawn(self.run(registry)),
        }
    }

    async fn run(self, registry: Weak<Registry>) {
        let duration = self.lease_duration.as_secs();
        let grace = (duration / 3).max(1);
        let params = LeaseParams::new(&self.identity, duration, grace)
            .with_field_manager(format!("muster-lease-{}", self.identity));
        let manager = loop {
            let built = LeaseManagerBuilder::new(self.client.clone(), STATUS_LEASE)
                .with_namespace(self.naming.muster_namespace())
                .with_parameters(params.clone())
                .build()
                .await;
            match built {
                Ok(manager) => break manager,
                Err(error) => {
                    tracing::warn!(%error, lease = STATUS_LEASE, "cannot take part in the status Lease yet; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        };
        let (mut holding, _lease_task) = manager.watch().await;
        let mut written: Option<BTreeMap<Target, Value>> = None;
        let mut failing = BTreeSet::new();
        loop {
            let leading = *holding.borrow_and_update();
            if leading {
                if written.is_none() {
                    tracing::info!(identity = %self.identity, "holding the status Lease: writing MCPServer status");
                }
                let Some(registry) = registry.upgrade() else { return };
                let mut desired = server_statuses(&registry);
                desired.extend(workflow_statuses(&registry, &self.rejections));
                drop(registry);
                let known = match written.take() {
                    Some(known) => known,
                    None => self.statuses_held(desired.keys()).await,
                };
                written = Some(self.write_changed(desired, known, &mut failing).await);
            } else if written.take().is_some() {
                tracing::info!(identity = %self.identity, "the status Lease is another replica's now");
            }
            tokio::select! {
                changed = holding.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(TICK) => {}
            }
        }
    }

    /// What the resources of `targets` hold as status now.
    async fn statuses_held<'a>(&self, targets: impl Iterator<Item = &'a Target>) -> BTreeMap<Target, Value> {
        let lists: BTreeSet<(Kind, String)> = targets.map(|(kind, n)| (*kind, self.naming.resource(n).0)).collect();
        let mut held = BTreeMap::new();
        for (kind, namespace) in lists {
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &namespace, &kind.resource());
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    for object in list.items {
                        if let (Some(name), Some(status)) = (object.metadata.name.clone(), object.data.get("status")) {
                            held.insert((kind, self.naming.gateway_name(&namespace, &name)), status.clone());
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, namespace, ?kind, "cannot read the status held; writing it all"),
            }
        }
        held
    }

    /// Writes each status of `desired` that differs from `known`; what the resources hold
    /// afterwards, as far as the writer knows.
    async fn write_changed(
        &self,
        desired: BTreeMap<Target, Value>,
        mut known: BTreeMap<Target, Value>,
        failing: &mut BTreeSet<Target>,
    ) -> BTreeMap<Target, Value> {
        known.retain(|target, _| desired.contains_key(target));
        for (target, status) in desired {
            if known.get(&target) == Some(&status) {
                continue;
            }
            let (kind, name) = &target;
            let kind_name = match kind {
                Kind::MCPServer => MCPServer::KIND,
                Kind::Workflow => Workflow::KIND,
            };
            let (namespace, resource) = self.naming.resource(name);
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &namespace, &kind.resource());
            let patch = json!({"apiVersion": API_VERSION, "kind": kind_name, "status": status});
            let params = PatchParams::apply(FIELD_MANAGER).force();
            match api.patch_status(&resource, &params, &Patch::Apply(&patch)).await {
                Ok(_) => {
                    failing.remove(&target);
                    known.insert(target, status);
                }
                // Deleted meanwhile: the watch will say so.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(error) => {
                    if failing.insert(target.clone()) {
                        tracing::warn!(kind = kind_name, %name, %error, "cannot write the status; retrying");
                    }
                }
            }
        }
        known
    }
}

/// The status each server of `registry` should show, as the JSON its resource holds, by
/// gateway name. `lastRestartedAt` mirrors `spec.restartRequestedAt` once a connection attempt
/// made after it processed it, whatever its outcome (the reference's one-shot restart).
fn server_statuses(registry: &Registry) -> BTreeMap<Target, Value> {
    registry
        .servers()
        .into_iter()
        .filter_map(|view| {
            let mut status: MCPServerStatus = view.runtime.to_status(view.definition.spec.suspended);
            status.last_restarted_at = view
                .definition
                .spec
                .restart_requested_at
                .filter(|requested| view.runtime.last_attempt.is_some_and(|attempt| attempt >= *requested));
            let value = serde_json::to_value(status).ok()?;
            Some(((Kind::MCPServer, view.definition.metadata.name), value))
        })
        .collect()
}

/// The status each Workflow should show: valid with its step count and the tools it names, or,
/// for one muster cannot serve, invalid with why.
fn workflow_statuses(registry: &Registry, rejections: &Rejections) -> BTreeMap<Target, Value> {
    let valid = registry.workflows().into_iter().map(|workflow| {
        let status = WorkflowStatus {
            valid: true,
            referenced_tools: muster_workflow::referenced_tools(&workflow).into_iter().collect(),
            step_count: u32::try_from(workflow.spec.steps.len()).unwrap_or(u32::MAX),
            ..WorkflowStatus::default()
        };
        (workflow.metadata.name, status)
    });
    let invalid = rejections.workflows().into_iter().map(|(name, errors)| {
        let status = WorkflowStatus {
            valid: false,
            validation_errors: errors,
            ..WorkflowStatus::default()
        };
        (name, status)
    });
    valid
        .chain(invalid)
        .filter_map(|(name, status)| Some(((Kind::Workflow, name), serde_json::to_value(status).ok()?)))
        .collect()
}

/// Writes status while it is held; dropping it stops the writer and releases the Lease.
#[derive(Debug)]
pub struct StatusHandle {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StatusHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}
