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
//! revocation) is [`muster_auth::oauth`]; this module keeps the state that joins it to the
//! gateway: the links, the client registrations by issuer and the grants by session.

pub mod challenge;
mod downstream;
mod grants;
pub mod outcome;
mod routes;
pub mod sso;
mod status;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use muster_auth::oauth::{
    AuthError,
    discovery::{AuthorizationServerMetadata, authorization_server_metadata, protected_resource_metadata},
    flow::{Callback, CompletedSignIn, SignInRequest, SignIns},
    grant::Grant,
    http::OAuthHttp,
    registration::{ClientMetadata, ClientRegistration, register},
    store::{EncryptedGrantStore, GrantStoreError, GrantStoreKey},
};
use muster_core::{
    CallContext, SessionId, ToolError,
    config::{McpClientConfig, MusterConfig},
    crd::MCPServerState,
};
use serde_json::{Value, json};

pub use downstream::DownstreamAuth;
pub use routes::routes;
pub use status::status_document;

use muster_auth::issuers;

use self::{
    challenge::{ChallengeSlot, SignInChallenge},
    grants::{GrantBook, Used, owner_of},
    outcome::{LinkOutcomes, Outcome, SIGN_IN_WAIT, Waited},
};
use crate::{
    events::{Event, reasons},
    registry::Registry,
    upstream::{Egress, UpstreamConnection},
};

/// The state of sign-ins: links, client registrations and grants.
pub struct SignInService {
    config: McpClientConfig,
    http: OAuthHttp,
    flows: SignIns,
    /// Authorization URL of each link, by state.
    links: Mutex<HashMap<String, String>>,
    /// Where to send the browser after the sign-in of a link, by state (allowlisted).
    redirects: Mutex<HashMap<String, String>>,
    /// The gateway's registration with each authorization server, by issuer.
    registrations: Mutex<HashMap<String, ClientRegistration>>,
    /// The grants people hold, and which one each session connection carries.
    book: GrantBook,
    /// One refresh at a time (a rotated refresh token must never be used twice).
    refreshing: tokio::sync::Mutex<()>,
    /// The link each (session, server) was last given, reused while it is valid.
    issued: Mutex<HashMap<(String, String), IssuedLink>>,
    /// When each person asked for new links, for the rate limit.
    attempts: Mutex<HashMap<String, std::collections::VecDeque<std::time::Instant>>>,
    /// What became of each link, for retries that wait for a sign-in.
    outcomes: LinkOutcomes,
    /// How the server described its authorization server when each link was issued, by state:
    /// a sign-in whose description changed before its callback is refused.
    described: Mutex<HashMap<String, Option<issuers::Description>>>,
}

/// A link given to a session: its state and when it expires.
type IssuedLink = (String, chrono::DateTime<chrono::Utc>);

/// At most this many new sign-in links per person a minute.
pub const LOGIN_ATTEMPTS_PER_MINUTE: usize = 10;

impl std::fmt::Debug for SignInService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInService")
            .field("public_url", &self.config.public_url)
            .field("flows", &self.flows)
            .finish_non_exhaustive()
    }
}

impl SignInService {
    /// The service `config` asks for, if sign-in is enabled, with the grants its grant store
    /// kept. Refused when the grant store is configured and cannot be opened (its key file is
    /// missing or not a key, its directory cannot be created).
    pub fn from_config(config: &MusterConfig) -> Result<Option<Arc<Self>>, GrantStoreError> {
        let client = &config.aggregator.oauth.mcp_client;
        if !client.enabled {
            return Ok(None);
        }
        let book = match &client.grant_store {
            Some(store) => {
                let key = GrantStoreKey::from_file(std::path::Path::new(&store.encryption_key_file))?;
                GrantBook::persisted(EncryptedGrantStore::open(std::path::Path::new(&store.path), key)?)?
            }
            None => GrantBook::default(),
        };
        Ok(Some(Arc::new(Self {
            config: client.clone(),
            http: OAuthHttp::new(),
            flows: SignIns::new(),
            links: Mutex::new(HashMap::new()),
            redirects: Mutex::new(HashMap::new()),
            registrations: Mutex::new(HashMap::new()),
            book,
            refreshing: tokio::sync::Mutex::new(()),
            issued: Mutex::new(HashMap::new()),
            attempts: Mutex::new(HashMap::new()),
            outcomes: LinkOutcomes::default(),
            described: Mutex::new(HashMap::new()),
        })))
    }

    fn public_url(&self) -> Result<&str, ToolError> {
        self.config
            .public_url
            .as_deref()
            .map(|u| u.trim_end_matches('/'))
            .ok_or_else(|| {
                ToolError::invalid_arguments(
                    "OAuth is not configured: set aggregator.oauth.mcpClient.publicUrl in config.yaml",
                )
            })
    }

    fn redirect_uri(&self) -> Result<String, ToolError> {
        Ok(format!("{}{}", self.public_url()?, self.config.callback_path))
    }

    /// A sign-in link for `session` to `server`: the answer of `core_auth_login`. The link a
    /// session was given is given again while it is valid; new links are limited to
    /// [`LOGIN_ATTEMPTS_PER_MINUTE`] a minute per person. `reset_registration` forgets the
    /// gateway's dynamic registration with the server's authorization server first.
    ///
    /// A link given is also left in the call's [`ChallengeSlot`], so the client can be asked to
    /// open it (URL elicitation) instead of the model reading it.
    pub async fn login(
        &self,
        registry: &Registry,
        ctx: &CallContext,
        server: &str,
        reset_registration: bool,
    ) -> Result<Value, ToolError> {
        self.count_attempt(&ctx.session, server, registry, reset_registration)?;
        let (answer, challenge) = self.link(registry, ctx, server, reset_registration).await?;
        if let Some(challenge) = challenge {
            ChallengeSlot::record(ctx, challenge);
        }
        Ok(answer)
    }

    /// The answer of [`Self::login`] and the link it gives, if it gives one (the caller counted
    /// the attempt).
    async fn link(
        &self,
        registry: &Registry,
        ctx: &CallContext,
        server: &str,
        reset_registration: bool,
    ) -> Result<(Value, Option<SignInChallenge>), ToolError> {
        let session = &ctx.session;
        if session.is_anonymous() {
            return Err(ToolError::invalid_arguments(format!(
                "signing in to {server} needs a session of your own, and this request has none: it carries no \
                 bearer token (aggregator.oauth.server) and no MCP session (the stateless 2026-07-28 protocol has \
                 none), so a sign-in would be shared with every such caller. Connect with a bearer token, or with \
                 a protocol version that has sessions"
            )));
        }
        let view = registry
            .server(server)
            .ok_or_else(|| ToolError::invalid_arguments(format!("server {server} not found")))?;
        if view.definition.spec.suspended {
            return Err(ToolError::invalid_arguments(format!(
                "Server '{server}' is deactivated (spec.suspended=true); activate it with core_service_start before signing in."
            )));
        }
        let auth = view.definition.spec.auth.as_ref();
        if auth.is_some_and(|a| a.forward_token || a.token_exchange.as_ref().is_some_and(|t| t.enabled)) {
            return Err(ToolError::invalid_arguments(format!(
                "server {server} signs in with your muster sign-in (single sign-on); there is nothing to log in to"
            )));
        }
        if let Some(conflict) = registry.issuer_conflict(server) {
            return Err(ToolError::invalid_arguments(conflict.to_string()));
        }
        let owner = self.owner(registry, ctx, server);
        if registry.session_connection(session, server).is_some()
            || (self.book.get(&owner, server).is_some() && self.prepare_call(registry, ctx, server).await.is_ok())
        {
            return Ok((
                json!({"server": server, "status": "connected", "message": format!("already authenticated to {server}")}),
                None,
            ));
        }
        if view.runtime.state != MCPServerState::AuthRequired {
            return Ok((
                json!({
                    "server": server,
                    "status": view.runtime.state.to_string(),
                    "message": format!("server {server} does not require authentication"),
                }),
                None,
            ));
        }
        if !reset_registration && let Some((answer, challenge)) = self.issued_link(session, server) {
            return Ok((answer, Some(challenge)));
        }
        let resource = view.definition.spec.url.clone().unwrap_or_default();
        let pinned = auth.and_then(|a| a.authorization_server.as_ref());
        let mut advertised_scopes = Vec::new();
        let metadata = match pinned {
            Some(pin) => match (&pin.authorization_endpoint, &pin.token_endpoint) {
                (Some(authorize), Some(token)) => AuthorizationServerMetadata::pinned(
                    &pin.issuer,
                    authorize,
                    token,
                    pin.revocation_endpoint.as_deref(),
                ),
                _ => authorization_server_metadata(&self.http, &pin.issuer)
                    .await
                    .map_err(refused)?,
            },
            None => {
                let described =
                    protected_resource_metadata(&self.http, &resource, view.runtime.auth_challenge.as_deref())
                        .await
                        .map_err(refused)?;
                let issuer = described.authorization_servers.first().cloned().unwrap_or_default();
                advertised_scopes = described.scopes_supported;
                authorization_server_metadata(&self.http, &issuer)
                    .await
                    .map_err(refused)?
            }
        };
        // The pinned scopes, else the ones the server advertises, else the gateway's default.
        let scope = pinned
            .and_then(|p| p.scopes.clone())
            .or_else(|| (!advertised_scopes.is_empty()).then(|| advertised_scopes.join(" ")))
            .unwrap_or_else(|| self.config.cimd.scopes.clone());
        // An authorization server that lists its scopes refuses others (at registration too).
        let scope = if metadata.scopes_supported.is_empty() {
            scope
        } else {
            scope
                .split_whitespace()
                .filter(|s| metadata.scopes_supported.iter().any(|known| known == s))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if reset_registration {
            self.registrations
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&metadata.issuer);
        }
        let client = self.client_for(&metadata, Some(&scope)).await?;
        let started = self
            .flows
            .start(SignInRequest {
                session: session.as_str().to_owned(),
                owner,
                server: server.to_owned(),
                metadata: metadata.clone(),
                client,
                redirect_uri: self.redirect_uri()?,
                resource,
                scope: Some(scope),
                expected_issuer: pinned.and_then(|p| p.expected_issuer.clone()),
            })
            .map_err(refused)?;
        let link = format!("{}/oauth/proxy/start?state={}", self.public_url()?, started.state);
        self.links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(started.state.clone(), started.url.to_string());
        self.issued.lock().unwrap_or_else(|e| e.into_inner()).insert(
            (session.as_str().to_owned(), server.to_owned()),
            (started.state.clone(), started.expires_at),
        );
        self.outcomes.issue(&started.state, session.as_str(), server);
        {
            let mut described = self.described.lock().unwrap_or_else(|e| e.into_inner());
            described.retain(|state, _| self.flows.is_pending(state));
            described.insert(started.state.clone(), issuers::Description::of(&view.definition));
        }
        let answer = json!({
            "server": server,
            "status": "auth_required",
            "issuer": metadata.issuer,
            "authUrl": link,
            "expires_at": started.expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "message": format!("Open this link to sign in to {server}: {link}"),
        });
        Ok((answer, Some(SignInChallenge::new(server, started.state, link))))
    }

    /// The answer with the link `session` was already given for `server`, while it is valid.
    fn issued_link(&self, session: &SessionId, server: &str) -> Option<(Value, SignInChallenge)> {
        let (state, expires_at) = self
            .issued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(session.as_str().to_owned(), server.to_owned()))
            .cloned()?;
        if expires_at <= chrono::Utc::now() || self.authorization_url(&state).is_none() {
            return None;
        }
        let link = format!("{}/oauth/proxy/start?state={state}", self.public_url().ok()?);
        let answer = json!({
            "server": server,
            "status": "auth_required",
            "authUrl": link,
            "expires_at": expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "message": format!("Open this link to sign in to {server}: {link}"),
        });
        Some((answer, SignInChallenge::new(server, state, link)))
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
                self.withdraw(session, server, state);
                false
            }
            Waited::Refused(_) | Waited::Cancelled | Waited::Unknown => {
                registry.session_connection(session, server).is_some()
            }
        }
    }

    /// Withdraws link `state` of `session` for `server`: it no longer signs anyone in.
    fn withdraw(&self, session: &SessionId, server: &str, state: &str) {
        self.links.lock().unwrap_or_else(|e| e.into_inner()).remove(state);
        self.redirects.lock().unwrap_or_else(|e| e.into_inner()).remove(state);
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        let key = (session.as_str().to_owned(), server.to_owned());
        if issued.get(&key).is_some_and(|(s, _)| s == state) {
            issued.remove(&key);
        }
        drop(issued);
        self.flows.forget(state);
        self.outcomes.forget(state);
    }

    /// Counts a request of `session`'s person for a new link to `server`; refused over the limit.
    /// A request that a connection or a valid link answers counts nothing.
    fn count_attempt(
        &self,
        session: &SessionId,
        server: &str,
        registry: &Registry,
        reset_registration: bool,
    ) -> Result<(), ToolError> {
        if !reset_registration
            && (registry.session_connection(session, server).is_some() || self.issued_link(session, server).is_some())
        {
            return Ok(());
        }
        let window = std::time::Duration::from_secs(60);
        let mut attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        let mine = attempts.entry(session.as_str().to_owned()).or_default();
        while mine.front().is_some_and(|at| at.elapsed() >= window) {
            mine.pop_front();
        }
        if mine.len() >= LOGIN_ATTEMPTS_PER_MINUTE {
            let wait = mine
                .front()
                .map_or(60, |at| window.saturating_sub(at.elapsed()).as_secs() + 1);
            return Err(ToolError::invalid_arguments(format!(
                "Rate limit exceeded: at most {LOGIN_ATTEMPTS_PER_MINUTE} sign-in attempts a minute. Remaining attempts: 0; try again in {wait}s"
            )));
        }
        mine.push_back(std::time::Instant::now());
        Ok(())
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

    /// The gateway's client with `metadata`'s issuer: the configured client id, else a stored
    /// dynamic registration, else a new one.
    async fn client_for(
        &self,
        metadata: &AuthorizationServerMetadata,
        scope: Option<&str>,
    ) -> Result<ClientRegistration, ToolError> {
        if let Some(id) = &self.config.client_id {
            return Ok(ClientRegistration::pre_registered(id.clone(), None));
        }
        if metadata.client_id_metadata_document_supported {
            // The gateway's client id is the URL of the document it serves.
            return Ok(ClientRegistration::metadata_document(format!(
                "{}{}",
                self.public_url()?,
                self.config.cimd.path
            )));
        }
        if let Some(known) = self
            .registrations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&metadata.issuer)
        {
            return Ok(known.clone());
        }
        let registered = register(
            &self.http,
            metadata,
            &ClientMetadata {
                client_name: "muster".to_owned(),
                redirect_uri: self.redirect_uri()?,
                scope: scope.map(str::to_owned),
            },
        )
        .await
        .map_err(refused)?;
        self.registrations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(metadata.issuer.clone(), registered.clone());
        Ok(registered)
    }

    /// Remembers where to send the browser after link `state`'s sign-in: `redirect` must start
    /// with an entry of `postLoginRedirectAllowlist` (scheme, host and port exactly, then a path
    /// prefix).
    pub(crate) fn remember_redirect(&self, state: &str, redirect: &str) -> Result<(), String> {
        let target = url::Url::parse(redirect).map_err(|e| format!("{redirect:?} is not a URL: {e}"))?;
        let allowed = self.config.post_login_redirect_allowlist.iter().any(|entry| {
            url::Url::parse(entry)
                .is_ok_and(|allowed| allowed.origin() == target.origin() && target.path().starts_with(allowed.path()))
        });
        if !allowed {
            return Err(format!(
                "{redirect} is not in aggregator.oauth.mcpClient.postLoginRedirectAllowlist"
            ));
        }
        if self.authorization_url(state).is_none() {
            return Err("the sign-in link is unknown or expired".to_owned());
        }
        self.redirects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(state.to_owned(), target.to_string());
        Ok(())
    }

    /// The authorization URL of link `state`, while it is valid.
    pub(crate) fn authorization_url(&self, state: &str) -> Option<String> {
        self.links.lock().unwrap_or_else(|e| e.into_inner()).get(state).cloned()
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
        let redirect = callback.state.as_ref().and_then(|state| {
            self.links.lock().unwrap_or_else(|e| e.into_inner()).remove(state);
            self.redirects.lock().unwrap_or_else(|e| e.into_inner()).remove(state)
        });
        let completed = self
            .flows
            .complete(&self.http, callback)
            .await
            .map_err(|e| e.to_string())?;
        self.issued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(completed.session.clone(), completed.server.clone()));
        let session = SessionId::new(&completed.session);
        let view = registry
            .server(&completed.server)
            .ok_or_else(|| format!("server {} is no longer defined", completed.server))?;
        let described_then = callback
            .state
            .as_ref()
            .and_then(|state| self.described.lock().unwrap_or_else(|e| e.into_inner()).remove(state))
            .flatten();
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
        let conn = connect_as(view.definition, &completed.grant, None, egress)
            .await
            .map_err(|e| format!("signed in, but the connection to {} failed: {e}", completed.server))?;
        let generation = self
            .book
            .put(&completed.owner, &completed.server, completed.grant.clone());
        registry.install_session_connection(&session, &completed.server, registry.limited(conn));
        self.book.mark_used(
            &session,
            &completed.server,
            Used {
                owner: completed.owner.clone(),
                generation,
                identity: None,
            },
        );
        if let Some(state) = &callback.state {
            // The link's state is the elicitation id a 2025-11-25 client was given.
            registry.notify_elicitation_complete(&session, state);
        }
        registry.emit(Event::mcp_server(
            &completed.server,
            reasons::MCP_SERVER_AUTHENTICATED,
            format!("a session signed in to MCP server {}", completed.server),
        ));
        Ok((completed, redirect))
    }

    /// Makes sure `ctx`'s session calls `server` with a fresh grant: a grant whose access token
    /// expires within a minute is refreshed first, and a session whose connection carries an
    /// older token than its grant (a person's `subject` grant another session refreshed, a grant
    /// kept across a restart) is reconnected with the current one. `Ok(())` when the caller holds
    /// no grant for the server. A refresh the authorization server refuses signs the owner out.
    pub async fn prepare_call(&self, registry: &Registry, ctx: &CallContext, server: &str) -> Result<(), ToolError> {
        let owner = self.owner(registry, ctx, server);
        let Some(mut held) = self.book.get(&owner, server) else {
            return Ok(());
        };
        if let Some(conflict) = registry.issuer_conflict(server) {
            registry.remove_session_connection(&ctx.session, server);
            return Err(ToolError::invalid_arguments(conflict.to_string()));
        }
        if held.grant.needs_refresh(chrono::Utc::now()) {
            let _one_at_a_time = self.refreshing.lock().await;
            match self.book.get(&owner, server) {
                Some(current) if current.grant.needs_refresh(chrono::Utc::now()) => {
                    match Box::pin(current.grant.refresh(&self.http)).await {
                        Ok(refreshed) => {
                            let generation = self.book.put(&owner, server, refreshed.clone());
                            held = grants::Held {
                                grant: refreshed,
                                generation,
                            };
                        }
                        Err(e) => {
                            tracing::warn!(server, error = %e, "refresh refused; the owner must sign in again");
                            self.sign_out(registry, &owner, server);
                            return Err(ToolError::invalid_arguments(format!(
                                "your sign-in to {server} expired and could not be renewed ({e}); sign in again with core_auth_login"
                            )));
                        }
                    }
                }
                Some(current) => held = current, // refreshed while this call waited
                None => return Ok(()),
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
        };
        if self.book.used_by(&ctx.session, server).as_ref() == Some(&used)
            && registry.session_connection(&ctx.session, server).is_some()
        {
            return Ok(());
        }
        // Boxed, as the refresh above: connecting is rare, and every call's future would carry it.
        let egress = Egress::of(&view.definition, &registry.config().aggregator);
        let conn = Box::pin(connect_as(view.definition, &held.grant, identity.as_ref(), egress))
            .await
            .map_err(|reason| ToolError::ServerUnavailable {
                server: server.to_owned(),
                reason,
            })?;
        let conn = registry.limited(conn);
        if registry.session_connection(&ctx.session, server).is_some() {
            registry.replace_session_connection(&ctx.session, server, conn);
        } else {
            registry.install_session_connection(&ctx.session, server, conn);
        }
        self.book.mark_used(&ctx.session, server, used);
        Ok(())
    }

    /// Connects `ctx`'s session to the servers its caller holds grants for but the session has
    /// no connection to yet: a person's `subject` grants in a new session of theirs, and a
    /// principal's grants kept across a restart. Run before each meta-tool call; costs two map
    /// lookups when there is nothing to do.
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
            for server in self.book.servers_of(&owner) {
                if self.owner(registry, ctx, &server) != owner
                    || registry.session_connection(&ctx.session, &server).is_some()
                {
                    continue;
                }
                if let Err(e) = self.prepare_call(registry, ctx, &server).await {
                    tracing::warn!(server, error = %e, "a held grant could not connect this session");
                }
            }
        }
    }

    /// Forgets `owner`'s grant for `server` and drops the connections of every session that
    /// used it; the grant, for revocation.
    fn sign_out(&self, registry: &Registry, owner: &str, server: &str) -> Option<Grant> {
        let (grant, sessions) = self.book.take(owner, server);
        for session in sessions {
            registry.remove_session_connection(&session, server);
        }
        grant
    }

    /// Signs the caller out of `server`: revokes the grant where the authorization server can
    /// and drops the connections that carried it (every session of the person's, for a
    /// `subject` grant). The answer of `core_auth_logout`.
    pub async fn logout(&self, registry: &Registry, ctx: &CallContext, server: &str) -> Result<Value, ToolError> {
        let owner = self.owner(registry, ctx, server);
        let grant = self.sign_out(registry, &owner, server);
        let dropped = registry.remove_session_connection(&ctx.session, server);
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
        self.book.forget_used(session);
    }

    /// Forgets what ended session `session` held: its connections' grants, and the grants only
    /// it owned, which are revoked in the background.
    pub(crate) fn end_session(self: &Arc<Self>, session: &SessionId) {
        let orphaned = self.book.end_session(session);
        if orphaned.is_empty() {
            return;
        }
        let service = Arc::clone(self);
        tokio::spawn(async move {
            for (server, grant) in orphaned {
                if let Err(e) = grant.revoke(&service.http).await {
                    tracing::debug!(server, error = %e, "revoking an ended session's grant failed");
                }
            }
        });
    }
}

/// A connection to `definition`'s server carrying `grant`'s access token, and `identity` (the
/// caller's validated bearer) in `X-Muster-Id-Token` when the server asks for it
/// (`forwardIdentity`), on connections `egress` allows.
async fn connect_as(
    mut definition: muster_core::crd::MCPServer,
    grant: &Grant,
    identity: Option<&muster_auth::Secret>,
    egress: Egress,
) -> Result<UpstreamConnection, String> {
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

fn refused(error: AuthError) -> ToolError {
    ToolError::invalid_arguments(format!("sign-in is not possible: {error}"))
}
