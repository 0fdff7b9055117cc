//! [`KubeDefinitionStore`]: the core tools' writes of MCPServers and Workflows, as resources
//! written with the caller's own identity.
//!
//! `core_mcpserver_create`, `_update`, `_delete` and the same of `core_workflow_*` reach the API
//! server as the person who called them, never as muster's ServiceAccount: Kubernetes RBAC
//! decides, and the audit log names the person. How the identity gets there is
//! `kubernetesWrites.identity` ([`KubernetesWritesConfig`]):
//!
//! - `forwardToken`: the caller's bearer token, which the front door validated, is the request's
//!   credential;
//! - `impersonate`: muster's own credential, with `Impersonate-User` naming the caller as the
//!   API server would name them from their token, and `Impersonate-Group` for each group of
//!   their `groups` claim.
//!
//! `core_service_stop`, `_start` and `_restart` are writes too: of `spec.suspended` and
//! `spec.restartRequestedAt` (the one-shot restart request), as their caller.
//!
//! A call without a caller the front door authenticated is refused: there is nobody to write
//! as. A refusal by the API server (403 without the right, 409 when the resource changed
//! meanwhile, 422 when a CRD rule refuses it) is the tool's error, with the API server's reason.
//!
//! A write replaces the resource as the registry holds it (labels, annotations and spec; the
//! status is the reconciler's), from the resource version the API server has now, or creates it.
//! The definition the store answers is the one the API server stored; the watch then sees the
//! same change, which changes nothing more.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use muster_core::config::KubernetesWritesConfig;
//! use muster_gateway::GatewayOptions;
//! use muster_kube::store::KubeDefinitionStore;
//!
//! let config = kube::Config::infer().await?;
//! let store = KubeDefinitionStore::new(config, "muster", KubernetesWritesConfig::default());
//! let options = GatewayOptions::default().with_definition_store(Arc::new(store));
//! # let _ = options;
//! # Ok(()) }
//! ```

use futures::future::BoxFuture;
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, PostParams},
    config::AuthInfo,
};
use muster_core::{
    CallContext,
    config::{KubernetesWritesConfig, WriteIdentity},
    crd::{MCPServer, Workflow},
};
use muster_gateway::definitions::{DefinitionStore, DefinitionStoreError, Stored};
use serde::{Serialize, de::DeserializeOwned};

use crate::{definitions::Kind, naming::Naming};

/// Writes definitions to the cluster as the caller of each write.
#[derive(Clone)]
pub struct KubeDefinitionStore {
    config: kube::Config,
    naming: Naming,
    writes: KubernetesWritesConfig,
}

impl std::fmt::Debug for KubeDefinitionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeDefinitionStore")
            .field("cluster", &self.config.cluster_url)
            .field("muster_namespace", &self.naming.muster_namespace())
            .field("identity", &self.writes.identity)
            .finish_non_exhaustive()
    }
}

impl KubeDefinitionStore {
    /// Writes to the cluster of `config` (muster's own: its URL and certificate authority, and
    /// the credential `impersonate` uses), for a muster in `muster_namespace`, with the caller's
    /// identity as `writes` says.
    pub fn new(config: kube::Config, muster_namespace: impl Into<String>, writes: KubernetesWritesConfig) -> Self {
        Self {
            config,
            naming: Naming::new(muster_namespace),
            writes,
        }
    }

    /// A client that acts as the caller of `ctx`, or the refusal when it has no identity to
    /// act with.
    fn client_as(&self, ctx: &CallContext) -> Result<Client, DefinitionStoreError> {
        let nobody = || DefinitionStoreError::Refused {
            reason: "in Kubernetes mode a definition is written with its caller's identity, and this call \
                     has none: callers authenticate at the gateway's front door (aggregator.oauth.server)"
                .to_owned(),
        };
        let mut config = self.config.clone();
        match self.writes.identity {
            WriteIdentity::ForwardToken => {
                let bearer = ctx
                    .extensions
                    .get::<muster_auth::resource::ValidatedBearer>()
                    .ok_or_else(nobody)?;
                config.auth_info = AuthInfo {
                    token: Some(bearer.0.expose().to_owned().into()),
                    ..AuthInfo::default()
                };
            }
            _ => {
                let principal = ctx.principal.as_ref().ok_or_else(nobody)?;
                let user = self
                    .writes
                    .username(
                        principal.issuer.as_deref(),
                        &principal.subject,
                        principal.email.as_deref(),
                    )
                    .ok_or_else(|| DefinitionStoreError::Refused {
                        reason: format!(
                            "the caller {} has no {:?} claim to be impersonated by (kubernetesWrites.usernameClaim)",
                            principal.subject, self.writes.username_claim
                        ),
                    })?;
                config.auth_info.impersonate = Some(user);
                if !principal.groups.is_empty() {
                    config.auth_info.impersonate_groups = Some(self.writes.groups(&principal.groups));
                }
            }
        }
        Client::try_from(config).map_err(|e| DefinitionStoreError::failed("cannot reach the Kubernetes API server", e))
    }

    /// Creates or replaces `definition` (named `namespace`/`name`) as the caller of `ctx`, and
    /// answers it as the API server stored it.
    async fn put<T: Serialize + DeserializeOwned>(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        definition: &T,
        ctx: &CallContext,
    ) -> Result<T, DefinitionStoreError> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client_as(ctx)?, namespace, &kind.resource());
        let mut object: DynamicObject = serde_json::to_value(definition)
            .and_then(serde_json::from_value)
            .map_err(|e| DefinitionStoreError::failed("the definition does not serialize", e))?;
        object.data.as_object_mut().map(|data| data.remove("status"));
        let written = match api.get_opt(name).await.map_err(|e| refused(&e))? {
            Some(current) => {
                object.metadata.resource_version = current.metadata.resource_version;
                api.replace(name, &PostParams::default(), &object).await
            }
            None => api.create(&PostParams::default(), &object).await,
        }
        .map_err(|e| refused(&e))?;
        let mut value =
            serde_json::to_value(written).map_err(|e| DefinitionStoreError::failed("unreadable answer", e))?;
        value.as_object_mut().map(|v| v.remove("status"));
        serde_json::from_value(value).map_err(|e| DefinitionStoreError::failed("unreadable answer", e))
    }

    async fn delete(&self, kind: Kind, gateway_name: &str, ctx: &CallContext) -> Result<(), DefinitionStoreError> {
        let (namespace, name) = self.naming.resource(gateway_name);
        let api: Api<DynamicObject> = Api::namespaced_with(self.client_as(ctx)?, &namespace, &kind.resource());
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(refused(&e)),
        }
    }
}

/// The API server's refusal as the caller is told it; a failure to reach it as a failure.
fn refused(error: &kube::Error) -> DefinitionStoreError {
    match error {
        kube::Error::Api(status) if (400..500).contains(&status.code) => DefinitionStoreError::Refused {
            reason: format!(
                "the Kubernetes API server refused the write ({} {}): {}",
                status.code, status.reason, status.message
            ),
        },
        other => DefinitionStoreError::failed(
            format!("the Kubernetes API server did not take the write: {other}"),
            other.to_string(),
        ),
    }
}

impl DefinitionStore for KubeDefinitionStore {
    fn put_mcpserver<'a>(
        &'a self,
        server: MCPServer,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<Stored<MCPServer>, DefinitionStoreError>> {
        Box::pin(async move {
            let server = self.naming.server_for_cluster(server);
            let (namespace, name) = (
                server.metadata.namespace.clone().unwrap_or_default(),
                server.metadata.name.clone(),
            );
            let written: MCPServer = self.put(Kind::MCPServer, &namespace, &name, &server, caller).await?;
            Ok(Stored::new(self.naming.server_for_gateway(written)))
        })
    }

    fn delete_mcpserver<'a>(
        &'a self,
        name: &'a str,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<(), DefinitionStoreError>> {
        Box::pin(self.delete(Kind::MCPServer, name, caller))
    }

    fn put_workflow<'a>(
        &'a self,
        workflow: Workflow,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<Stored<Workflow>, DefinitionStoreError>> {
        Box::pin(async move {
            let workflow = self.naming.workflow_for_cluster(workflow);
            let (namespace, name) = (
                workflow.metadata.namespace.clone().unwrap_or_default(),
                workflow.metadata.name.clone(),
            );
            let written: Workflow = self.put(Kind::Workflow, &namespace, &name, &workflow, caller).await?;
            Ok(Stored::new(self.naming.workflow_for_gateway(written)))
        })
    }

    fn delete_workflow<'a>(
        &'a self,
        name: &'a str,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<(), DefinitionStoreError>> {
        Box::pin(self.delete(Kind::Workflow, name, caller))
    }

    /// `core_service_start`, `_stop` and `_restart` write `spec.suspended` and
    /// `spec.restartRequestedAt` as their caller.
    fn writes_lifecycle(&self) -> bool {
        true
    }
}
