//! People signing in to downstream servers through the gateway (`aggregator.oauth.mcpClient`).
//!
//! A remote server that answers 401 is `Auth Required`: it contributes no tools to the shared
//! catalogue. `core_auth_login {server}` gives the calling session a link (under the gateway's
//! `publicUrl`, `/oauth/proxy/start`); the person signs in at the server's authorization server,
//! which redirects to the gateway's callback; the gateway then connects to the server with the
//! person's token, as that session only, and tells the session its tool list changed.
//! `core_auth_logout` revokes the grant at the authorization server and drops the connection.
//!
//! The OAuth client itself (discovery, registration, PKCE, the callback's checks, refresh,
//! revocation) is [`muster_auth::oauth`]. The state a sign-in leaves (pending sign-ins, client
//! registrations, grants, sign-in attempts, refreshes in flight) is in a
//! [`SignInStore`], which any replica may read: in memory, or in Valkey when
//! `aggregator.oauth.server.storage` says so, unless [`DownstreamAuth::with_store`] is given
//! another. What stays in this process is what only the
//! replica holding a session can use: which grant each of its connections carries, and who waits
//! for a link's outcome.

pub mod challenge;
mod downstream;
pub mod elicitation;
mod grant_index;
mod grants;
mod link;
mod notices;
pub mod outcome;
mod routes;
pub mod sso;
mod status;
mod storage;

use std::sync::Arc;

use muster_auth::{
    oauth::{
        AuthError,
        flow::{Callback, CompletedSignIn},
        grant::Grant,
        http::OAuthHttp,
    },
    state::{HeldGrant, SignInNotice, SignInNotices, SignInStore, SignInStoreError, is_durable_owner, owner_of},
};
use muster_core::{CallContext, SessionId, ToolError, config::McpClientConfig};
use serde_json::{Value, json};

pub use downstream::DownstreamAuth;
pub use link::LOGIN_ATTEMPTS_PER_MINUTE;
pub use routes::routes;
pub use status::status_document;

use muster_auth::issuers;

use self::{
    grants::{ConnectionGrants, Used},
    outcome::{LinkOutcomes, Outcome, SIGN_IN_WAIT, Waited},
};
use crate::{
    events::{Event, reasons},
    registry::Registry,
    upstream::{Egress, SharedConnection, UpstreamConnection},
};

/// Sign-in by link: the links, the callback, and the grants' use, over a sign-in state store.
pub struct SignInService {
    config: McpClientConfig,
    http: OAuthHttp,
    /// The sign-in state every replica shares.
    store: Arc<dyn SignInStore>,
    /// How the replica that completes a sign-in tells the one holding the session.
    notices: Arc<dyn SignInNotices>,
    /// Where the Secrets of the servers' `headersFrom` are read, on each connect.
    secrets: Arc<dyn crate::secrets::SecretSource>,
    /// Which grant each session connection of this process carries.
    connections: ConnectionGrants,
    /// Which servers each owner holds grants for, as last read from the store.
    grant_index: grant_index::GrantIndex,
    /// What became of each link issued here, for retries that wait for a sign-in.
    outcomes: LinkOutcomes,
}

impl std::fmt::Debug for SignInService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInService")
            .field("public_url", &self.config.public_url)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl SignInService {
    /// Sign-in by link as `config` says, keeping its state in `store` and telling other
    /// replicas of sign-ins completed here through `notices`.
    pub(crate) fn new(
        config: &McpClientConfig,
        store: Arc<dyn SignInStore>,
        notices: Arc<dyn SignInNotices>,
        secrets: Arc<dyn crate::secrets::SecretSource>,
    ) -> Arc<Self> {
        Arc::new(Self {
            config: config.clone(),
            http: OAuthHttp::new(),
            store,
            notices,
            secrets,
            connections: ConnectionGrants::default(),
            grant_index: grant_index::GrantIndex::default(),
            outcomes: LinkOutcomes::default(),
        })
    }

    /// Waits until `session`'s sign-in to `server` through link `state` completed (at most
    /// [`SIGN_IN_WAIT`], or until `cancel`): `true` when the session is signed in then. A link
    /// that timed out is withdrawn, so the next answer gives a new one.
    pub async fn await_sign_in(
        &self,
        registry: &Registry,
        session: &SessionId,
        server: &str,
        state: &str,
        cancel: tokio_util::sync::CancellationToken,
    ) -> bool {
        let waited = self
            .outcomes
            .wait(state, session.as_str(), server, SIGN_IN_WAIT, cancel)
            .await;
        match waited {
            Waited::SignedIn => true,
            Waited::TimedOut => {
                self.withdraw(state).await;
                false
            }
            Waited::Refused(_) | Waited::Cancelled | Waited::Unknown => {
                registry.session_connection(session, server).is_some()
            }
        }
    }

    /// Withdraws link `state`: it no longer signs anyone in.
    async fn withdraw(&self, state: &str) {
        if let Err(e) = self.store.take_pending(state).await {
            tracing::warn!(error = %e, "a timed-out sign-in link could not be withdrawn; it expires by itself");
        }
        self.outcomes.forget(state);
    }

    /// Who owns a grant `ctx`'s caller gets for `server`: its session, or the person for a
    /// server whose authorization server says `grantScope: subject`.
    fn owner(&self, registry: &Registry, ctx: &CallContext, server: &str) -> String {
        let scope = registry
            .server(server)
            .and_then(|v| v.definition.spec.auth)
            .and_then(|a| a.authorization_server)
            .map(|a| a.grant_scope)
            .unwrap_or_default();
        owner_of(&ctx.session, ctx.principal.as_ref(), scope)
    }

    /// Completes the sign-in `callback` answers (with where to send the browser next, when its
    /// link asked for an allowed redirect): the grant is kept for the session that asked,
    /// which gets its own connection to the server.
    pub(crate) async fn complete(
        &self,
        registry: &Registry,
        callback: &Callback,
    ) -> Result<(CompletedSignIn, Option<String>), String> {
        let completed = self.complete_sign_in(registry, callback).await;
        if let Some(state) = &callback.state {
            self.outcomes.settle(
                state,
                match &completed {
                    Ok(_) => Outcome::SignedIn,
                    Err(reason) => Outcome::Refused(reason.clone()),
                },
            );
        }
        completed
    }

    async fn complete_sign_in(
        &self,
        registry: &Registry,
        callback: &Callback,
    ) -> Result<(CompletedSignIn, Option<String>), String> {
        let unknown = || AuthError::UnknownState.to_string();
        let state = callback.state.as_deref().ok_or_else(unknown)?;
        let pending = self
            .store
            .take_pending(state)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(unknown)?;
        let (redirect, described_then) = (pending.browser_redirect.clone(), pending.described.clone());
        let completed = pending
            .complete(&self.http, callback)
            .await
            .map_err(|e| e.to_string())?;
        let session = SessionId::new(&completed.session);
        let view = registry
            .server(&completed.server)
            .ok_or_else(|| format!("server {} is no longer defined", completed.server))?;
        if described_then != issuers::Description::of(&view.definition) {
            return Err(format!(
                "the authorization server of {} was described differently when this sign-in started; sign in again",
                completed.server
            ));
        }
        if let Some(conflict) = registry.issuer_conflict(&completed.server) {
            return Err(conflict.to_string());
        }
        if view.definition.spec.suspended {
            return Err(format!(
                "server {} was deactivated (spec.suspended=true) meanwhile; sign in again once it is started",
                completed.server
            ));
        }
        let egress = Egress::of(&view.definition, &registry.config().aggregator);
        let conn = connect_as(&*self.secrets, view.definition, &completed.grant, None, egress)
            .await
            .map_err(|e| format!("signed in, but the connection to {} failed: {e}", completed.server))?;
        let generation = self
            .store
            .put_grant(&completed.owner, &completed.server, completed.grant.clone())
            .await
            .map_err(|e| format!("signed in, but the grant for {} cannot be kept: {e}", completed.server))?;
        self.grant_index.forget(&completed.owner);
        if self.outcomes.issued_here(state) {
            let held = HeldGrant {
                grant: completed.grant.clone(),
                generation,
            };
            self.install_signed_in(registry, &session, &completed.server, &completed.owner, &held, conn);
            // The link's state is the elicitation id a 2025-11-25 client was given.
            registry.notify_elicitation_complete(&session, state);
            // The other replicas learn that the owner's grants changed (a person's sessions there).
            if let Err(e) = self
                .notices
                .publish(SignInNotice::grant_changed(&completed.owner, &completed.server))
                .await
            {
                tracing::warn!(server = completed.server, error = %e, "the other replicas cannot be told of a new grant; they see it within 30 s");
            }
        } else {
            // Another replica issued the link and holds the session: the connection only checked
            // the grant; that replica connects the session and tells its client.
            conn.close();
            let notice = SignInNotice::signed_in(&completed.session, &completed.owner, &completed.server, state);
            if let Err(e) = self.notices.publish(notice).await {
                tracing::warn!(
                    server = completed.server,
                    error = %e,
                    "the replica holding the session cannot be told of its sign-in; its next request uses the grant"
                );
            }
        }
        registry.emit(Event::mcp_server(
            &completed.server,
            reasons::MCP_SERVER_AUTHENTICATED,
            format!("a session signed in to MCP server {}", completed.server),
        ));
        Ok((completed, redirect))
    }

    /// Gives `session` the connection `conn` to `server`, opened with `owner`'s grant `held`.
    fn install_signed_in(
        &self,
        registry: &Registry,
        session: &SessionId,
        server: &str,
        owner: &str,
        held: &HeldGrant,
        conn: UpstreamConnection,
    ) {
        registry.install_session_connection(session, server, conn);
        self.connections.mark_used(
            session,
            server,
            Used {
                owner: owner.to_owned(),
                generation: held.generation,
                identity: None,
                expires_at: held.grant.expires_at,
            },
        );
    }

    /// Makes sure `ctx`'s session calls `server` with a fresh grant: a grant whose access token
    /// expires within a minute is refreshed first, and a session whose connection carries an
    /// older token than its grant (a person's `subject` grant another session refreshed, a grant
    /// kept across a restart) is reconnected with the current one. `Ok(())` when the caller holds
    /// no grant for the server, or when the grants cannot be read (the call goes on with the
    /// connection the session holds, unless the token it carries expired). A
    /// refresh the authorization server refuses signs the owner out.
    ///
    /// `Ok(Some(connection))` when the connection the call goes through was found on the way
    /// (the caller need not look it up again), `Ok(None)` when the caller looks it up.
    pub async fn prepare_call(
        &self,
        registry: &Registry,
        ctx: &CallContext,
        server: &str,
    ) -> Result<Option<SharedConnection>, ToolError> {
        let owner = self.owner(registry, ctx, server);
        // No round trip to the store for a server the caller holds no grant for and that the
        // session reaches already (a server without sign-in has one connection for all); without
        // a connection, the store is asked (a grant kept on another replica, not told yet).
        let indexed = match self.grant_index.holds(&*self.store, &owner, server).await {
            Ok(false) => match registry.connection_for(&ctx.session, server) {
                Some(connection) => return Ok(Some(connection)),
                None => false,
            },
            Ok(indexed) => indexed,
            Err(e) => return self.without_store(ctx, server, &e).map(|()| None),
        };
        let found = self.store.grant(&owner, server).await;
        if matches!(&found, Ok(held) if held.is_some() != indexed) {
            self.grant_index.forget(&owner); // changed on another replica, or expired
        }
        let mut held = match found {
            Ok(Some(held)) => held,
            Ok(None) => return Ok(None),
            Err(e) => return self.without_store(ctx, server, &e).map(|()| None),
        };
        if let Some(conflict) = registry.issuer_conflict(server) {
            registry.remove_session_connection(&ctx.session, server);
            return Err(ToolError::invalid_arguments(conflict.to_string()));
        }
        if held.grant.needs_refresh(chrono::Utc::now()) {
            // Boxed: refreshing is rare, and every call's future would carry it.
            match Box::pin(self.refreshed(registry, &owner, server)).await? {
                Some(current) => held = current,
                None => return Ok(None),
            }
        }
        let view = registry
            .server(server)
            .ok_or_else(|| ToolError::invalid_arguments(format!("server {server} not found")))?;
        // forwardIdentity: the caller's validated bearer goes along in X-Muster-Id-Token, and a
        // new one (a refreshed token) reconnects.
        let identity = view
            .definition
            .spec
            .auth
            .as_ref()
            .filter(|a| a.forward_identity)
            .and_then(|_| ctx.extensions.get::<muster_auth::resource::ValidatedBearer>())
            .map(|b| b.0.clone());
        let used = Used {
            owner: owner.clone(),
            generation: held.generation,
            identity: identity.as_ref().map(grants::fingerprint),
            expires_at: held.grant.expires_at,
        };
        let current = || {
            self.connections.used_by(&ctx.session, server).as_ref() == Some(&used)
                && registry.session_connection(&ctx.session, server).is_some()
        };
        if current() {
            return Ok(None);
        }
        // One call connects; the ones that waited for it use its connection.
        let _connecting = self.connections.connecting(&ctx.session, server).await;
        if current() {
            return Ok(None);
        }
        // Boxed, as the refresh above: connecting is rare, and every call's future would carry it.
        let egress = Egress::of(&view.definition, &registry.config().aggregator);
        let conn = Box::pin(connect_as(
            &*self.secrets,
            view.definition,
            &held.grant,
            identity.as_ref(),
            egress,
        ))
        .await
        .map_err(|reason| ToolError::ServerUnavailable {
            server: server.to_owned(),
            reason,
        })?;
        registry.put_session_connection(&ctx.session, server, conn);
        self.connections.mark_used(&ctx.session, server, used);
        Ok(None)
    }

    /// What a call of `ctx`'s session to `server` does when the grants cannot be read (the
    /// store failed with `error`): it goes on with the session's connection, unless the access
    /// token that connection carries has expired, since renewing it needs the store. (A
    /// transport session's grant, and a person's or principal's whose refresh token is known not
    /// to rotate, is still read, and refreshed, while Valkey is away: see
    /// [`GrantFallback`](muster_auth::state::GrantFallback); any other is not.)
    fn without_store(&self, ctx: &CallContext, server: &str, error: &SignInStoreError) -> Result<(), ToolError> {
        let expired = self
            .connections
            .used_by(&ctx.session, server)
            .is_some_and(|used| used.expired(chrono::Utc::now()));
        if !expired {
            tracing::warn!(server, error = %error, "grants cannot be read; the call goes on with the session's connection");
            return Ok(());
        }
        tracing::warn!(server, error = %error, "grants cannot be read and the session's token for the server expired");
        Err(ToolError::ServerUnavailable {
            server: server.to_owned(),
            reason: format!("{error}; the sign-in to {server} expired and cannot be renewed without it"),
        })
    }

    /// `owner`'s grant for `server` once no refresh of it is due: refreshed here (one refresh of
    /// a grant at a time: a rotated refresh token must never be used twice), or by the refresh
    /// this one waited for. `None` when the grant went meanwhile.
    async fn refreshed(&self, registry: &Registry, owner: &str, server: &str) -> Result<Option<HeldGrant>, ToolError> {
        let unavailable = |e: SignInStoreError| ToolError::ServerUnavailable {
            server: server.to_owned(),
            reason: e.to_string(),
        };
        let _one_at_a_time = self.store.refresh_guard(owner, server).await.map_err(unavailable)?;
        let Some(current) = self.store.grant(owner, server).await.map_err(unavailable)? else {
            return Ok(None);
        };
        if !current.grant.needs_refresh(chrono::Utc::now()) {
            return Ok(Some(current)); // refreshed while this call waited
        }
        match current.grant.refresh(&self.http).await {
            Ok(refreshed) => {
                let generation = self
                    .store
                    .put_grant(owner, server, refreshed.clone())
                    .await
                    .map_err(unavailable)?;
                Ok(Some(HeldGrant {
                    grant: refreshed,
                    generation,
                }))
            }
            Err(e) => {
                tracing::warn!(server, error = %e, "refresh refused; the owner must sign in again");
                if let Err(e) = self.sign_out(registry, owner, server).await {
                    tracing::warn!(server, error = %e, "the refused grant could not be forgotten");
                }
                Err(ToolError::invalid_arguments(format!(
                    "your sign-in to {server} expired and could not be renewed ({e}); sign in again with core_auth_login"
                )))
            }
        }
    }

    /// Connects `ctx`'s session to the servers its caller holds grants for but the session has
    /// no connection to yet: a person's `subject` grants in a new session of theirs, and a
    /// principal's grants kept across a restart. Run before each meta-tool call; answered from
    /// the grant index (no store lookup) while it is fresh.
    pub async fn adopt_grants(&self, registry: &Registry, ctx: &CallContext) {
        let mut owners = vec![ctx.session.as_str().to_owned()];
        if ctx.principal.is_some() {
            owners.push(owner_of(
                &ctx.session,
                ctx.principal.as_ref(),
                muster_core::crd::GrantScope::Subject,
            ));
        }
        for owner in owners {
            let servers = match self.grant_index.servers_of(&*self.store, &owner).await {
                Ok(servers) => servers,
                Err(e) => {
                    tracing::warn!(error = %e, "grants cannot be read; none adopted");
                    return;
                }
            };
            for server in servers.iter() {
                let server = server.as_str();
                if self.owner(registry, ctx, server) != owner
                    || registry.session_connection(&ctx.session, server).is_some()
                {
                    continue;
                }
                if let Err(e) = self.prepare_call(registry, ctx, server).await {
                    tracing::warn!(server, error = %e, "a held grant could not connect this session");
                }
            }
        }
    }

    /// Forgets `owner`'s grant for `server` and drops the connections of every session that
    /// used it; the grant, for revocation. The connections go even when the store fails.
    async fn sign_out(
        &self,
        registry: &Registry,
        owner: &str,
        server: &str,
    ) -> Result<Option<Grant>, SignInStoreError> {
        let grant = self.store.remove_grant(owner, server).await;
        self.grant_index.forget(owner);
        for session in self.connections.take_users(owner, server) {
            registry.remove_session_connection(&session, server);
        }
        grant
    }

    /// Signs the caller out of `server`: revokes the grant where the authorization server can
    /// and drops the connections that carried it (every session of the person's, for a
    /// `subject` grant). The answer of `core_auth_logout`.
    pub async fn logout(&self, registry: &Registry, ctx: &CallContext, server: &str) -> Result<Value, ToolError> {
        let owner = self.owner(registry, ctx, server);
        let signed_out = self.sign_out(registry, &owner, server).await;
        let dropped = registry.remove_session_connection(&ctx.session, server);
        let grant = signed_out.map_err(|e| ToolError::invalid_arguments(format!("sign-out is not complete: {e}")))?;
        let revoked = match &grant {
            Some(grant) => match grant.revoke(&self.http).await {
                Ok(revoked) => revoked,
                Err(e) => {
                    tracing::warn!(server, error = %e, "revocation failed; the grant is forgotten here");
                    false
                }
            },
            None => false,
        };
        Ok(json!({
            "server": server,
            "signed_out": grant.is_some() || dropped,
            "revoked": revoked,
            "message": if grant.is_some() || dropped {
                format!("signed out of {server}")
            } else {
                format!("not signed in to {server}")
            },
        }))
    }

    /// Forgets which grants idle session `session`'s connections carried (they were closed);
    /// its grants stay, and its next request connects it again.
    pub(crate) fn disconnect_session(&self, session: &SessionId) {
        self.connections.forget(session);
    }

    /// Forgets what ended session `session` held: its connections' grants, and the grants only
    /// it owned (a transport session's own), which are revoked, both in the background.
    pub(crate) fn end_session(self: &Arc<Self>, session: &SessionId) {
        self.connections.forget(session);
        if is_durable_owner(session.as_str()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (service, session) = (Arc::clone(self), session.as_str().to_owned());
        runtime.spawn(async move { service.revoke_grants_of(&session).await });
    }

    /// Removes and revokes every grant `owner` holds.
    async fn revoke_grants_of(&self, owner: &str) {
        self.grant_index.forget(owner);
        let servers = match self.store.servers_of(owner).await {
            Ok(servers) => servers,
            Err(e) => {
                tracing::warn!(error = %e, "an ended session's grants cannot be read; they stay");
                return;
            }
        };
        for server in servers {
            match self.store.remove_grant(owner, &server).await {
                Ok(Some(grant)) => {
                    if let Err(e) = grant.revoke(&self.http).await {
                        tracing::debug!(server, error = %e, "revoking an ended session's grant failed");
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(server, error = %e, "an ended session's grant cannot be removed"),
            }
        }
    }
}

/// A connection to `definition`'s server carrying `grant`'s access token, its `headersFrom`
/// values but `Authorization` read from `secrets`, and `identity` (the caller's validated
/// bearer) in `X-Muster-Id-Token` when the server asks for it (`forwardIdentity`), on
/// connections `egress` allows.
async fn connect_as(
    secrets: &dyn crate::secrets::SecretSource,
    definition: muster_core::crd::MCPServer,
    grant: &Grant,
    identity: Option<&muster_auth::Secret>,
    egress: Egress,
) -> Result<UpstreamConnection, String> {
    let mut definition = crate::secrets::with_secret_headers(secrets, definition, crate::secrets::HeadersFor::Session)
        .await
        .map_err(|e| e.to_string())?;
    definition.spec.headers.insert(
        "Authorization".to_owned(),
        format!("Bearer {}", grant.access_token.expose()),
    );
    if let Some(identity) = identity {
        definition
            .spec
            .headers
            .insert(ID_TOKEN_HEADER.to_owned(), identity.expose().to_owned());
    }
    UpstreamConnection::connect(&definition, None, egress)
        .await
        .map_err(|e| e.to_string())
}

/// The header a `forwardIdentity` server receives the session's ID token in.
pub const ID_TOKEN_HEADER: &str = "X-Muster-Id-Token";

#[cfg(test)]
mod tests {
    use muster_auth::state::{MemorySignInStore, contract::sample_grant};

    use super::*;

    #[tokio::test]
    async fn an_ended_transport_session_loses_its_own_grants_only() {
        let store = Arc::new(MemorySignInStore::new());
        for (owner, server) in [("a", "github"), ("subject-x", "slack"), ("principal-1", "jira")] {
            store.put_grant(owner, server, sample_grant("t")).await.expect("put");
        }
        let notices = Arc::new(muster_auth::state::LocalSignInNotices::new());
        let service = SignInService::new(
            &McpClientConfig::default(),
            store.clone(),
            notices,
            Arc::new(crate::secrets::NoSecrets),
        );
        service.end_session(&SessionId::new("principal-1"));
        service.end_session(&SessionId::new("a"));
        let mut gone = false;
        for _ in 0..100 {
            gone = store.grant("a", "github").await.expect("get").is_none();
            if gone {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(gone, "the transport session's grant went with it");
        assert!(store.grant("principal-1", "jira").await.expect("get").is_some());
        assert!(store.grant("subject-x", "slack").await.expect("get").is_some());
    }
}
