//! The registry's part in the catalogue service ([`Discovery`](muster_catalog::discovery::Discovery)):
//! what the catalogue alone does not know.
//!
//! - Before a request's catalogue is read ([`OnRequest`]), the session is noted alive and the
//!   servers the caller's identity unlocks are connected for it: single sign-on servers, and
//!   servers it holds a grant for. Their tools are then in the session's catalogue.
//! - The servers a sign-in would unlock for the session ([`AuthHints`]): the registry's
//!   `servers_requiring_auth`.

use std::sync::Arc;

use muster_catalog::{
    discovery::{AuthHints, OnRequest},
    pattern::NamePattern,
    tools::ServerAuthHint,
};
use muster_core::{CallContext, SessionId};

use crate::registry::Registry;

/// The registry as the catalogue service's hooks.
#[derive(Clone)]
pub(crate) struct RegistryHooks(pub(crate) Arc<Registry>);

impl AuthHints for RegistryHooks {
    fn servers_requiring_auth(&self, session: &SessionId, pattern: Option<&NamePattern>) -> Vec<ServerAuthHint> {
        self.0.servers_requiring_auth(session, pattern)
    }
}

impl OnRequest for RegistryHooks {
    async fn on_request(&self, ctx: &CallContext) {
        let registry = &self.0;
        registry.touch_session(&ctx.session);
        registry.sso().adopt(registry, ctx).await;
        if let Some(service) = registry.sign_in() {
            service.adopt_grants(registry, ctx).await;
        }
    }
}
