//! Sign-in links: `core_auth_login`'s answer (a new link, or the one the session was already
//! given), the rate limit on new ones, the gateway's client registration with each
//! authorization server, and what `/oauth/proxy/start` reads of a link.

use std::time::Duration;

use muster_auth::{
    issuers,
    oauth::{
        AuthError,
        discovery::{AuthorizationServerMetadata, authorization_server_metadata, protected_resource_metadata},
        flow::{PendingSignIn, STATE_TTL, SignInRequest},
        registration::{ClientMetadata, ClientRegistration, register},
    },
    state::{Attempt, SignInStoreError},
};
use muster_core::{CallContext, SessionId, ToolError, crd::MCPServerState};
use serde_json::{Value, json};

use super::{
    SignInService,
    challenge::{ChallengeSlot, SignInChallenge},
};
use crate::registry::Registry;

/// At most this many new sign-in links per person a minute.
pub const LOGIN_ATTEMPTS_PER_MINUTE: usize = 10;

/// The window of [`LOGIN_ATTEMPTS_PER_MINUTE`].
const ATTEMPT_WINDOW: Duration = Duration::from_secs(60);

impl SignInService {
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
        self.count_attempt(&ctx.session, server, registry, reset_registration)
            .await?;
        let (answer, challenge) = self.link(registry, ctx, server, reset_registration).await?;
        if let Some(challenge) = challenge {
            ChallengeSlot::record(ctx, challenge);
        }
        Ok(answer)
    }

    /// The answer of [`Self::login`] and the link it gives, if it gives one (the caller counted
    /// the attempt).
    pub(super) async fn link(
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
            || (self.store.grant(&owner, server).await.map_err(store_refused)?.is_some()
                && self.prepare_call(registry, ctx, server).await.is_ok())
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
        if !reset_registration && let Some((answer, challenge)) = self.issued_link(session, server).await? {
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
            self.store
                .remove_registration(&metadata.issuer)
                .await
                .map_err(store_refused)?;
        }
        let client = match pinned.and_then(|p| p.client_credentials_secret_ref.as_ref()) {
            // The client registered out of band with the pinned authorization server (GitHub).
            Some(reference) => {
                let (id, secret) = crate::secrets::client_credentials(&*self.secrets, &view.definition, reference)
                    .await
                    .map_err(|reason| ToolError::ServerUnavailable {
                        server: server.to_owned(),
                        reason: format!(
                            "the client registered with {} (auth.authorizationServer.clientCredentialsSecretRef) \
                             cannot be read: {reason}",
                            metadata.issuer
                        ),
                    })?;
                ClientRegistration::pre_registered(id, Some(secret))
            }
            None => self.client_for(&metadata, Some(&scope)).await?,
        };
        let request = SignInRequest {
            session: session.as_str().to_owned(),
            owner,
            server: server.to_owned(),
            metadata: metadata.clone(),
            client,
            redirect_uri: self.redirect_uri()?,
            resource,
            scope: Some(scope),
            expected_issuer: pinned.and_then(|p| p.expected_issuer.clone()),
        };
        let (started, mut pending) = PendingSignIn::start(request, STATE_TTL).map_err(refused)?;
        pending.described = issuers::Description::of(&view.definition);
        self.store
            .put_pending(&started.state, pending)
            .await
            .map_err(store_refused)?;
        let link = format!("{}/oauth/proxy/start?state={}", self.public_url()?, started.state);
        self.outcomes.issue(&started.state, session.as_str(), server);
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
    async fn issued_link(
        &self,
        session: &SessionId,
        server: &str,
    ) -> Result<Option<(Value, SignInChallenge)>, ToolError> {
        let latest = self
            .store
            .latest_pending(session.as_str(), server)
            .await
            .map_err(store_refused)?;
        let (Some((state, pending)), Ok(base)) = (latest, self.public_url()) else {
            return Ok(None);
        };
        let link = format!("{base}/oauth/proxy/start?state={state}");
        let answer = json!({
            "server": server,
            "status": "auth_required",
            "authUrl": link,
            "expires_at": pending.expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "message": format!("Open this link to sign in to {server}: {link}"),
        });
        Ok(Some((answer, SignInChallenge::new(server, state, link))))
    }

    /// Counts a request of `session`'s person for a new link to `server`; refused over the limit.
    /// A request that a connection or a valid link answers counts nothing.
    pub(super) async fn count_attempt(
        &self,
        session: &SessionId,
        server: &str,
        registry: &Registry,
        reset_registration: bool,
    ) -> Result<(), ToolError> {
        if !reset_registration
            && (registry.session_connection(session, server).is_some()
                || self.issued_link(session, server).await?.is_some())
        {
            return Ok(());
        }
        let attempt = self
            .store
            .count_attempt(session.as_str(), LOGIN_ATTEMPTS_PER_MINUTE, ATTEMPT_WINDOW)
            .await
            .map_err(store_refused)?;
        match attempt {
            Attempt::Counted(_) => Ok(()),
            Attempt::Refused { retry_in } => Err(ToolError::invalid_arguments(format!(
                "Rate limit exceeded: at most {LOGIN_ATTEMPTS_PER_MINUTE} sign-in attempts a minute. Remaining attempts: 0; try again in {}s",
                retry_in.as_secs() + 1
            ))),
        }
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
        if let Some(known) = self.store.registration(&metadata.issuer).await.map_err(store_refused)? {
            return Ok(known);
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
        self.store
            .put_registration(&metadata.issuer, registered.clone())
            .await
            .map_err(store_refused)?;
        Ok(registered)
    }

    /// Remembers where to send the browser after link `state`'s sign-in: `redirect` must start
    /// with an entry of `postLoginRedirectAllowlist` (scheme, host and port exactly, then a path
    /// prefix).
    pub(crate) async fn remember_redirect(&self, state: &str, redirect: &str) -> Result<(), String> {
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
        match self.store.set_browser_redirect(state, target.as_str()).await {
            Ok(true) => Ok(()),
            Ok(false) => Err("the sign-in link is unknown or expired".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The authorization URL of link `state`, while it is valid.
    pub(crate) async fn authorization_url(&self, state: &str) -> Result<Option<String>, SignInStoreError> {
        Ok(self
            .store
            .pending(state)
            .await?
            .map(|pending| pending.authorization_url.to_string()))
    }
}

fn refused(error: AuthError) -> ToolError {
    ToolError::invalid_arguments(format!("sign-in is not possible: {error}"))
}

fn store_refused(error: SignInStoreError) -> ToolError {
    ToolError::invalid_arguments(format!("sign-in is not possible: {error}"))
}
