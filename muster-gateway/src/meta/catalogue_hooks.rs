//! The registry's part in the meta-tools ([`MetaService`](muster_catalog::meta::MetaService)):
//! what the catalogue alone does not know.
//!
//! - Before a request's catalogue is read ([`OnRequest`]), the session is noted alive and the
//!   servers the caller's identity unlocks are connected for it: single sign-on servers, and
//!   servers it holds a grant for. Their tools are then in the session's catalogue.
//! - The servers a sign-in would unlock for the session ([`AuthHints`]): the registry's
//!   `servers_requiring_auth`.
//!
//! - Resources and prompts are read through the session's connection to their server
//!   ([`EntryReader`]).
//!
//! Without sign-in services ([`DownstreamAuth`]) only the session is noted alive.

use std::sync::Arc;

use futures::future::BoxFuture;
use muster_catalog::{
    discovery::{AuthHints, OnRequest},
    meta::{EntryError, EntryReader},
    pattern::NamePattern,
    tools::ServerAuthHint,
};
use muster_core::{CallContext, JsonObject, SessionId};
use rmcp::model::{GetPromptResult, ReadResourceResult};

use crate::{auth::DownstreamAuth, registry::Registry, upstream::SharedConnection};

/// The registry and the sign-in services as the catalogue service's hooks.
#[derive(Clone)]
pub(crate) struct RegistryHooks {
    pub(crate) registry: Arc<Registry>,
    pub(crate) auth: Option<DownstreamAuth>,
}

impl AuthHints for RegistryHooks {
    fn servers_requiring_auth(&self, session: &SessionId, pattern: Option<&NamePattern>) -> Vec<ServerAuthHint> {
        self.registry.servers_requiring_auth(session, pattern)
    }
}

impl OnRequest for RegistryHooks {
    async fn on_request(&self, ctx: &CallContext) {
        self.registry.touch_session(&ctx.session);
        if let Some(auth) = &self.auth {
            auth.adopt(&self.registry, ctx).await;
        }
    }
}

/// The registry's connections as the meta-tools' reader of resources and prompts: the session's
/// connection to the entry's server.
pub(crate) struct RegistryEntries(pub(crate) Arc<Registry>);

impl RegistryEntries {
    /// The connection `ctx`'s session holds to `server`.
    fn connection(&self, server: &str, ctx: &CallContext) -> Result<SharedConnection, EntryError> {
        self.0
            .connection_for(&ctx.session, server)
            .ok_or(EntryError::NotConnected)
    }
}

impl EntryReader for RegistryEntries {
    fn read_resource<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ReadResourceResult, EntryError>> {
        Box::pin(async move {
            self.connection(server, ctx)?
                .read_resource(uri, ctx)
                .await
                .map_err(|e| EntryError::Failed(e.into()))
        })
    }

    fn get_prompt<'a>(
        &'a self,
        server: &'a str,
        prompt: &'a str,
        arguments: Option<JsonObject>,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<GetPromptResult, EntryError>> {
        Box::pin(async move {
            self.connection(server, ctx)?
                .get_prompt(prompt, arguments, ctx)
                .await
                .map_err(|e| EntryError::Failed(e.into()))
        })
    }
}
