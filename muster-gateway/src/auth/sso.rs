//! Single sign-on to downstream servers: servers used with each caller's own identity.
//!
//! - `auth.forwardToken`: the caller's bearer token, validated by the front door
//!   ([`ValidatedBearer`]), is sent to the server as it is. An opaque, unvalidated or absent
//!   bearer is never sent: such a caller does not reach the server.
//! - `auth.tokenExchange`: the validated bearer is exchanged (RFC 8693) at the configured token
//!   endpoint for a token of the server's issuer, cached per session and server until shortly
//!   before it expires; concurrent calls share one exchange ([`ExchangeCache`]). The exchanged
//!   tokens are kept in the sign-in state store; the one exchange at a time is this process's.
//!
//! Each session gets its own connection to such a server, made on its first request and made
//! again when its credential changes (a refreshed bearer, a new exchanged token). The gateway
//! holds no connection of its own: the server is `Awaiting Session` until a session connects,
//! then `Connected` while any session holds one. A failure of the caller's own token is that
//! session's (an `MCPServerTokenForwardingFailed` / `MCPServerTokenExchangeFailed` event); an
//! exchange failure every caller shares (the endpoint does not answer, the client credentials
//! are refused, the connector is unknown) puts the server in Failed with the class of failure as
//! its Ready reason, until an exchange succeeds again.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use muster_auth::{
    Secret,
    exchange::{DEFAULT_EXCHANGE_SCOPES, ExchangeCache, TokenExchange},
    oauth::http::OAuthHttp,
    resource::ValidatedBearer,
    state::{MemorySignInStore, SignInStore},
};
use muster_core::{
    CallContext, SessionId, ToolError,
    crd::{MCPServer, MCPServerState},
};

use crate::{
    events::{Event, reasons},
    registry::{Registry, ServerView},
    secrets::{
        HeadersFor, SecretError, SecretSource, TOKEN_EXCHANGE_CREDENTIALS, client_credentials, with_secret_headers,
    },
    upstream::{Egress, UpstreamConnection},
};

/// How `server` is served per session, for its Ready condition.
pub fn served_per_session(server: &MCPServer) -> String {
    let auth = server.spec.auth.as_ref();
    match auth.and_then(|a| a.token_exchange.as_ref()).filter(|t| t.enabled) {
        Some(exchange) => format!(
            "Served per session: each caller's token is exchanged (RFC 8693) at {} through connector {:?}; muster holds no connection of its own.",
            exchange.dex_token_endpoint.as_deref().unwrap_or("(no endpoint)"),
            exchange.connector_id.as_deref().unwrap_or_default()
        ),
        None => {
            "Served per session: each caller's validated token is forwarded; muster holds no connection of its own."
                .to_owned()
        }
    }
}

/// A session and a server.
type SessionServer = (String, String);

/// The per-session connections of single sign-on servers.
#[derive(Debug)]
pub struct SsoService {
    http: OAuthHttp,
    exchanges: ExchangeCache,
    secrets: Arc<dyn SecretSource>,
    /// One connect at a time per (session, server).
    connecting: Mutex<HashMap<SessionServer, Arc<tokio::sync::Mutex<()>>>>,
    /// The fingerprint of the credential each session connection carries.
    used: Mutex<HashMap<SessionServer, [u8; 32]>>,
    /// Why each session could not connect to a server, until it can.
    failures: Mutex<HashMap<SessionServer, String>>,
}

impl SsoService {
    /// The service, reading client credentials from `secrets`, with the exchanged tokens in
    /// memory.
    pub fn new(secrets: Arc<dyn SecretSource>) -> Self {
        Self::with_store(secrets, Arc::new(MemorySignInStore::new()))
    }

    /// The service, reading client credentials from `secrets`, with the exchanged tokens kept
    /// in `store` (one exchange at a time per session and server stays this process's).
    pub(crate) fn with_store(secrets: Arc<dyn SecretSource>, store: Arc<dyn SignInStore>) -> Self {
        Self {
            http: OAuthHttp::new(),
            exchanges: ExchangeCache::with_store(store),
            secrets,
            connecting: Mutex::new(HashMap::new()),
            used: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Why `session` has no connection to `server`, when its last attempt failed.
    pub fn failure(&self, session: &SessionId, server: &str) -> Option<String> {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(session.as_str().to_owned(), server.to_owned()))
            .cloned()
    }

    /// Connects `ctx`'s session to every single sign-on server it has none to (or one with an
    /// outdated credential), with its validated bearer. Run before each meta-tool call; a caller
    /// without a validated bearer is left alone.
    pub async fn adopt(&self, registry: &Registry, ctx: &CallContext) {
        let Some(ValidatedBearer(bearer)) = ctx.extensions.get::<ValidatedBearer>() else {
            return;
        };
        for view in registry.servers_where(MCPServer::uses_callers_identity) {
            if view.definition.spec.suspended
                || !matches!(
                    view.runtime.state,
                    MCPServerState::AwaitingSession | MCPServerState::Connected | MCPServerState::Failed
                )
            {
                continue;
            }
            // A server Failed for another reason than its exchange is not tried per session.
            if view.runtime.state == MCPServerState::Failed && view.runtime.failure_class.is_none() {
                continue;
            }
            let key = (ctx.session.as_str().to_owned(), view.definition.metadata.name.clone());
            // Boxed: the exchange is large and rare; every request's future stays small without it.
            match Box::pin(self.connect(registry, &ctx.session, &view, bearer)).await {
                Ok(()) => {
                    self.failures.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
                }
                Err(e) => {
                    tracing::debug!(server = %key.1, error = %e, "no single sign-on connection for this session");
                    self.failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key, e.to_string());
                }
            }
        }
    }

    /// Makes sure `session` holds a connection to `view`'s server carrying the current
    /// credential derived from `bearer`.
    async fn connect(
        &self,
        registry: &Registry,
        session: &SessionId,
        view: &ServerView,
        bearer: &Secret,
    ) -> Result<(), ToolError> {
        let name = view.definition.metadata.name.clone();
        let key = (session.as_str().to_owned(), name.clone());
        let held = registry.session_connection(session, &name).is_some();
        let auth = view.definition.spec.auth.clone().unwrap_or_default();
        let exchange = auth.token_exchange.as_ref().filter(|t| t.enabled);
        // Forwarding needs nothing from anyone: skip the lock when the bearer is unchanged.
        if exchange.is_none() && held && self.used_by(&key) == Some(fingerprint(bearer)) {
            return Ok(());
        }
        let lock = Arc::clone(
            self.connecting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key.clone())
                .or_default(),
        );
        let _one_at_a_time = lock.lock().await;
        let credential = match exchange {
            None => bearer.clone(),
            Some(_) => match self.exchanged(registry, session, view, bearer).await {
                Ok(token) => token,
                Err(e) => return Err(e),
            },
        };
        let print = fingerprint(&credential);
        if registry.session_connection(session, &name).is_some() && self.used_by(&key) == Some(print) {
            return Ok(());
        }
        let mut definition = with_secret_headers(&*self.secrets, view.definition.clone(), HeadersFor::Session)
            .await
            .map_err(|reason| ToolError::ServerUnavailable {
                server: name.clone(),
                reason: reason.to_string(),
            })?;
        definition
            .spec
            .headers
            .insert("Authorization".to_owned(), format!("Bearer {}", credential.expose()));
        let (reason_ok, reason_failed) = if exchange.is_some() {
            (
                reasons::MCP_SERVER_TOKEN_EXCHANGED,
                reasons::MCP_SERVER_TOKEN_EXCHANGE_FAILED,
            )
        } else {
            (
                reasons::MCP_SERVER_TOKEN_FORWARDED,
                reasons::MCP_SERVER_TOKEN_FORWARDING_FAILED,
            )
        };
        let egress = Egress::of(&definition, &registry.config().aggregator);
        match UpstreamConnection::connect(&definition, None, egress).await {
            Ok(conn) => {
                registry.put_session_connection(session, &name, conn);
                self.used.lock().unwrap_or_else(|e| e.into_inner()).insert(key, print);
                if exchange.is_some() {
                    registry.note_exchange(&name);
                }
                registry.emit(Event::mcp_server(
                    &name,
                    reason_ok,
                    format!("a session connected to MCP server {name} with its own identity"),
                ));
                Ok(())
            }
            Err(e) => {
                // The server answered before; refusing this caller's credential is this caller's.
                let message = e.to_string();
                registry.emit(Event::mcp_server(
                    &name,
                    reason_failed,
                    format!("MCP server {name} refused a session's identity: {message}"),
                ));
                Err(ToolError::ServerUnavailable {
                    server: name,
                    reason: message,
                })
            }
        }
    }

    /// The token `view`'s exchange gives for `bearer` in `session`. A failure every caller
    /// shares puts the server in Failed; one of the caller's own is reported for the session.
    async fn exchanged(
        &self,
        registry: &Registry,
        session: &SessionId,
        view: &ServerView,
        bearer: &Secret,
    ) -> Result<Secret, ToolError> {
        let name = view.definition.metadata.name.as_str();
        let exchange = match exchange_of(&*self.secrets, &view.definition).await {
            Ok(exchange) => exchange,
            Err(problem) => {
                let reason = problem.to_string();
                registry.fail_shared(name, problem.ready_reason(TOKEN_EXCHANGE_CREDENTIALS), &reason);
                return Err(ToolError::ServerUnavailable {
                    server: name.to_owned(),
                    reason,
                });
            }
        };
        let cache_key = format!("{}\0{name}", session.as_str());
        match self.exchanges.token(&cache_key, &exchange, &self.http, bearer).await {
            Ok(token) => {
                if view.runtime.failure_class.is_some() {
                    registry.recover_shared(name);
                }
                Ok(token.token)
            }
            Err(e) => {
                let message = e.to_string();
                match e.ready_reason() {
                    Some(class) if e.is_shared() => registry.fail_shared(name, class, &message),
                    _ => registry.emit(Event::mcp_server(
                        name,
                        reasons::MCP_SERVER_TOKEN_EXCHANGE_FAILED,
                        format!("the token exchange for a session failed for MCP server {name}: {message}"),
                    )),
                }
                Err(ToolError::ServerUnavailable {
                    server: name.to_owned(),
                    reason: message,
                })
            }
        }
    }

    fn used_by(&self, key: &SessionServer) -> Option<[u8; 32]> {
        self.used.lock().unwrap_or_else(|e| e.into_inner()).get(key).copied()
    }

    /// Forgets what ended session `session` held.
    pub(crate) fn end_session(&self, session: &SessionId) {
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(s, _), _| s != session.as_str());
        self.connecting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(s, _), _| s != session.as_str());
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(s, _), _| s != session.as_str());
        self.exchanges.forget_prefix(&format!("{}\0", session.as_str()));
    }
}

/// Why `server`'s token exchange cannot run for anyone (it is not configured whole, or its client
/// credentials Secret cannot be read from `secrets`), if that is so.
pub async fn credentials_problem(secrets: &dyn SecretSource, server: &MCPServer) -> Option<SecretError> {
    let exchange = server.spec.auth.as_ref()?.token_exchange.as_ref()?;
    if !exchange.enabled || exchange.client_credentials_secret_ref.is_none() {
        return None;
    }
    exchange_of(secrets, server).await.err()
}

/// The exchange `server` configures, with its client credentials read from their Secret; a
/// configuration that is not whole is refused as its credentials are.
async fn exchange_of(secrets: &dyn SecretSource, server: &MCPServer) -> Result<TokenExchange, SecretError> {
    let incomplete = |what: &str| SecretError::Refused(what.to_owned());
    let auth = server.spec.auth.as_ref().ok_or_else(|| incomplete("no auth"))?;
    let config = auth
        .token_exchange
        .as_ref()
        .ok_or_else(|| incomplete("no tokenExchange"))?;
    let endpoint = config
        .dex_token_endpoint
        .clone()
        .ok_or_else(|| incomplete("tokenExchange.dexTokenEndpoint is not set"))?;
    let mut exchange = TokenExchange::new(endpoint, config.connector_id.clone().unwrap_or_default())
        .with_scopes(if config.scopes.trim().is_empty() {
            DEFAULT_EXCHANGE_SCOPES.to_owned()
        } else {
            config.scopes.clone()
        })
        .with_audiences(auth.required_audiences.clone());
    if let Some(issuer) = &config.expected_issuer {
        exchange = exchange.with_expected_issuer(issuer.clone());
    }
    if let Some(reference) = &config.client_credentials_secret_ref {
        let (id, secret) = client_credentials(secrets, server, reference).await?;
        exchange = exchange.with_client_credentials(id, secret);
    }
    Ok(exchange)
}

use super::grants::fingerprint;
