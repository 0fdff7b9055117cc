//! The registry's part in the catalogue service ([`Discovery`](muster_catalog::discovery::Discovery)):
//! what the catalogue alone does not know.
//!
//! - Before a request's catalogue is read ([`OnRequest`]), the session is noted alive and the
//!   servers the caller's identity unlocks are connected for it: single sign-on servers, and
//!   servers it holds a grant for. Their tools are then in the session's catalogue.
//! - The servers a sign-in would unlock for the session ([`AuthHints`]): the registry's
//!   `servers_requiring_auth`.
//!
//! Without sign-in services ([`DownstreamAuth`]) only the session is noted alive.

use std::sync::Arc;

use muster_catalog::{
    discovery::{AuthHints, OnRequest},
    pattern::NamePattern,
    tools::ServerAuthHint,
};
use muster_core::{CallContext, SessionId};

use crate::{auth::DownstreamAuth, registry::Registry};

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
