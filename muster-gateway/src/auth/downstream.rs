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
//! use std::sync::Arc;
//! use muster_core::config::MusterConfig;
//! use muster_gateway::{auth::DownstreamAuth, registry::{Registry, RegistryOptions}, secrets::NoSecrets};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
//! // No Secret to read: a server naming one in headersFrom fails to connect, saying so.
//! let auth = DownstreamAuth::for_registry(&registry, Arc::new(NoSecrets))?;
//! // Sign-in by link is off unless aggregator.oauth.mcpClient enables it; single sign-on is
//! // always there for the servers that ask for it.
//! assert!(auth.sign_in().is_none());
//! # Ok(()) }
//! ```
//!
//! The sign-in state (pending sign-ins, client registrations, grants, sign-in attempts,
//! refreshes in flight, exchanged tokens) is kept in a [`SignInStore`]: [`DownstreamAuth::for_registry`]
//! keeps it where `aggregator.oauth.server.storage` says, in memory by default (and people's
//! grants in the encrypted `grantStore`, when configured) or in Valkey;
//! [`DownstreamAuth::with_store`] keeps it in the store given, one that replicas share, so that
//! any of them can take a sign-in's callback:
//!
//! ```
//! use std::sync::Arc;
//! use muster_auth::state::{MemorySignInStore, SignInStore};
//! use muster_core::config::MusterConfig;
//! use muster_gateway::{auth::DownstreamAuth, registry::{Registry, RegistryOptions}, secrets::NoSecrets};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
//! let store: Arc<dyn SignInStore> = Arc::new(MemorySignInStore::new()); // or a shared one
//! let auth = DownstreamAuth::with_store(&registry, Arc::new(NoSecrets), store);
//! assert!(auth.sign_in().is_none());
//! # Ok(()) }
//! ```

use std::sync::Arc;

use futures::future::BoxFuture;
use muster_auth::state::{LocalSignInNotices, SignInNotices, SignInStore};
use muster_core::{CallContext, SessionId};
use tokio_util::sync::CancellationToken;

use super::{SignInService, elicitation::SignInWaiter, sso::SsoService, storage::configured_store};
use crate::{
    error::GatewayError,
    registry::{Registry, SessionObserver},
    secrets::SecretSource,
};

/// Sign-in by link (when configured) and single sign-on, for one registry.
#[derive(Debug, Clone)]
pub struct DownstreamAuth {
    sign_in: Option<Arc<SignInService>>,
    sso: Arc<SsoService>,
}

impl DownstreamAuth {
    /// The sign-in services `registry`'s configuration asks for, reading the Secrets servers
    /// name (`headersFrom`, client credentials) from `secrets`, with their state where
    /// `aggregator.oauth.server.storage` says: in memory (people's grants also in the `grantStore`, when configured), or in Valkey
    /// (then call it inside a Tokio runtime); from now on the registry tells them when it
    /// forgets a session. Refused when the configured grant store, the state key or the Valkey
    /// password file cannot be read, or the Valkey url names no server.
    pub fn for_registry(registry: &Arc<Registry>, secrets: Arc<dyn SecretSource>) -> Result<Self, GatewayError> {
        let (store, notices) = configured_store(&registry.config())?;
        Ok(Self::over(registry, secrets, store, notices))
    }

    /// The sign-in services `registry`'s configuration asks for, as [`Self::for_registry`], with
    /// their state in `store` (a `grantStore` configured is not used: `store` keeps the grants).
    pub fn with_store(registry: &Arc<Registry>, secrets: Arc<dyn SecretSource>, store: Arc<dyn SignInStore>) -> Self {
        Self::with_shared_store(registry, secrets, store, Arc::new(LocalSignInNotices::new()))
    }

    /// As [`Self::with_store`], with `store` shared by replicas that tell each other of the
    /// sign-ins they complete through `notices`: a sign-in completed on another replica connects
    /// the session here, tells its client and lets a waiting retry go on.
    pub fn with_shared_store(
        registry: &Arc<Registry>,
        secrets: Arc<dyn SecretSource>,
        store: Arc<dyn SignInStore>,
        notices: Arc<dyn SignInNotices>,
    ) -> Self {
        let client = registry.config().aggregator.oauth.mcp_client.clone();
        if client.enabled && client.grant_store.is_some() {
            tracing::warn!(
                ?store,
                "aggregator.oauth.mcpClient.grantStore is not used: the sign-in state store given keeps the grants"
            );
        }
        Self::over(registry, secrets, store, notices)
    }

    fn over(
        registry: &Arc<Registry>,
        secrets: Arc<dyn SecretSource>,
        store: Arc<dyn SignInStore>,
        notices: Arc<dyn SignInNotices>,
    ) -> Self {
        let config = registry.config();
        let client = &config.aggregator.oauth.mcp_client;
        let auth = Self {
            sign_in: client
                .enabled
                .then(|| SignInService::new(client, Arc::clone(&store), notices, Arc::clone(&secrets))),
            sso: Arc::new(SsoService::with_store(secrets, store)),
        };
        if let Some(service) = &auth.sign_in {
            service.hear_notices(Arc::downgrade(registry));
        }
        registry.observe_sessions(Arc::new(auth.clone()));
        auth
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

impl DownstreamAuth {
    /// What a call retried after its person accepted to sign in waits on: the completion of
    /// its sign-in by link (none without sign-in by link); for the URL elicitation layer
    /// ([`UrlElicitationLayer`](super::elicitation::UrlElicitationLayer)).
    pub fn sign_in_waiter(&self, registry: &Arc<Registry>) -> Option<Arc<dyn SignInWaiter>> {
        let service = Arc::clone(self.sign_in.as_ref()?);
        Some(Arc::new(LinkCompletion {
            registry: Arc::clone(registry),
            service,
        }))
    }
}

/// The completion of sign-ins by link, as the URL elicitation layer waits for it.
struct LinkCompletion {
    registry: Arc<Registry>,
    service: Arc<SignInService>,
}

impl SignInWaiter for LinkCompletion {
    fn wait<'a>(
        &'a self,
        session: &'a SessionId,
        server: &'a str,
        link: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.service
                .await_sign_in(&self.registry, session, server, link, cancel)
                .await;
        })
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
