//! [`DownstreamAuth`]: how people reach the downstream servers that need their identity, as one
//! value the parts of a gateway that take part in it share.
//!
//! Two ways, each optional:
//!
//! - **sign-in by link** ([`SignInService`], `aggregator.oauth.mcpClient`): a person signs in at a
//!   server's authorization server and the session connects with the grant;
//! - **single sign-on** ([`SsoService`]): a server configured with `auth.forwardToken` or
//!   `auth.tokenExchange` is reached with the caller's own validated token, one connection per
//!   session.
//!
//! The registry knows nothing of either: it holds the servers and the session connections, and
//! tells this value when it forgets a session ([`SessionObserver`]), so that what the session
//! held goes too. The dispatcher (`Dispatcher::with_auth`), the meta-tools
//! (`MetaTools::with_auth`) and the HTTP routes of the sign-in callback, all above this module,
//! each hold a clone.
//!
//! ```
//! use muster_core::config::MusterConfig;
//! use muster_gateway::{auth::DownstreamAuth, registry::{Registry, RegistryOptions}};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
//! let auth = DownstreamAuth::for_registry(&registry)?;
//! // Sign-in by link is off unless aggregator.oauth.mcpClient enables it; single sign-on is
//! // always there for the servers that ask for it.
//! assert!(auth.sign_in().is_none());
//! # Ok(()) }
//! ```

use std::sync::Arc;

use muster_core::{CallContext, SessionId};

use super::{SignInService, sso::SsoService};
use crate::{
    error::GatewayError,
    registry::{Registry, SessionObserver},
};

/// Sign-in by link (when configured) and single sign-on, for one registry.
#[derive(Debug, Clone)]
pub struct DownstreamAuth {
    sign_in: Option<Arc<SignInService>>,
    sso: Arc<SsoService>,
}

impl DownstreamAuth {
    /// The sign-in services `registry`'s configuration asks for, reading client credentials
    /// from the registry's Secrets; from now on the registry tells them when it forgets a
    /// session. Refused when the configured grant store cannot be opened.
    pub fn for_registry(registry: &Registry) -> Result<Self, GatewayError> {
        let auth = Self {
            sign_in: SignInService::from_config(&registry.config())?,
            sso: Arc::new(SsoService::new(Arc::clone(registry.secrets()))),
        };
        registry.observe_sessions(Arc::new(auth.clone()));
        Ok(auth)
    }

    /// Sign-in by link, when `aggregator.oauth.mcpClient` is enabled.
    pub fn sign_in(&self) -> Option<&Arc<SignInService>> {
        self.sign_in.as_ref()
    }

    /// Single sign-on: the per-session connections of servers used with the caller's identity.
    pub fn sso(&self) -> &SsoService {
        &self.sso
    }

    /// Connects `ctx`'s session to what the caller's identity unlocks, before its request reads
    /// the catalogue: the single sign-on servers (with its validated bearer) and the servers it
    /// holds a grant for.
    pub async fn adopt(&self, registry: &Registry, ctx: &CallContext) {
        self.sso.adopt(registry, ctx).await;
        if let Some(service) = &self.sign_in {
            service.adopt_grants(registry, ctx).await;
        }
    }
}

impl SessionObserver for DownstreamAuth {
    fn session_forgotten(&self, session: &SessionId, ended: bool) {
        if let Some(service) = &self.sign_in {
            if ended {
                service.end_session(session);
            } else {
                service.disconnect_session(session);
            }
        }
        self.sso.end_session(session);
    }
}
