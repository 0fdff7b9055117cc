//! RFC 8693 token exchange: a caller's token traded at another authorization server for a token
//! of that server's issuer, for a downstream server that trusts that issuer and not the one the
//! caller signed in with (cross-cluster single sign-on; `auth.tokenExchange` of an MCPServer).
//!
//! - [`TokenExchange`]: one configured exchange (Dex's token endpoint, the connector that
//!   trusts the caller's issuer, scopes, audiences, client credentials) and the request itself:
//!   the issued token's `iss` is checked against the expected issuer in constant time;
//! - [`ExchangeCache`]: one exchanged token per key (the gateway's session and server), reused
//!   until shortly before it expires, one exchange at a time per key, failures remembered with
//!   backoff; the tokens are kept in a sign-in state store (`muster_auth::state`), in memory
//!   unless [`ExchangeCache::with_store`] is given another;
//! - [`ExchangeError`]: the failure, classified: the caller's own token, or one every caller
//!   shares (endpoint, credentials, connector, issuer).
//!
//! The request is a form post to the token endpoint:
//!
//! | field | value |
//! |---|---|
//! | `grant_type` | `urn:ietf:params:oauth:grant-type:token-exchange` |
//! | `subject_token` | the caller's validated bearer |
//! | `subject_token_type` | [`ID_TOKEN_TYPE`] unless [`TokenExchange::with_subject_token_type`] |
//! | `requested_token_type` | [`ID_TOKEN_TYPE`] |
//! | `connector_id` | the connector of the remote Dex that trusts the caller's issuer |
//! | `scope` | the scopes, then `audience:server:client_id:<aud>` per audience |
//!
//! with the client, when there is one, authenticated by HTTP Basic (`client_secret_basic`). The
//! answer's `access_token` is the issued token (Dex puts the ID token there). Its signature is
//! not checked here: the downstream server that receives it does that.
//!
//! ```no_run
//! # async fn run() -> Result<(), muster_auth::exchange::ExchangeError> {
//! use muster_auth::{Secret, exchange::{ExchangeCache, TokenExchange}, oauth::http::OAuthHttp};
//!
//! let exchange = TokenExchange::new("https://dex.remote.example.com/token", "remote-oidc")
//!     .with_audiences(vec!["dex-k8s-authenticator".to_owned()]);
//! let cache = ExchangeCache::default();
//! let bearer = Secret::new("eyJhbGciOi...");
//! let token = cache.token("session\0server", &exchange, &OAuthHttp::new(), &bearer).await?;
//! assert_eq!(token.issuer, "https://dex.remote.example.com");
//! # Ok(()) }
//! ```

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, TimeDelta, Utc};
use reqwest::StatusCode;
use serde::Deserialize;

use crate::{
    Secret, constant_time_eq,
    oauth::{AuthError, http::OAuthHttp},
};

mod cache;
mod error;

/// The token an exchange issued; kept with the sign-in state, where [`ExchangeCache`] caches it.
pub use crate::state::ExchangedToken;
pub use cache::{BACKOFF_INITIAL, BACKOFF_MAX, ExchangeCache, REFRESH_MARGIN};
pub use error::ExchangeError;

/// The RFC 8693 grant type.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// The token type of an OpenID Connect ID token (RFC 8693 §3).
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";

/// The token type of an OAuth access token (RFC 8693 §3).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The scopes requested when none are configured.
pub const DEFAULT_EXCHANGE_SCOPES: &str = "openid profile email groups";

/// The scope token prefix that asks Dex for an audience (its cross-client scope).
pub const AUDIENCE_SCOPE_PREFIX: &str = "audience:server:client_id:";

/// The longest server error description kept in an error message.
const MAX_DESCRIPTION: usize = 300;

/// One configured token exchange: where, through which connector, for which scopes and
/// audiences, as which client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchange {
    token_endpoint: String,
    expected_issuer: Option<String>,
    connector_id: String,
    scopes: String,
    audiences: Vec<String>,
    subject_token_type: String,
    client: Option<(String, Secret)>,
}

impl TokenExchange {
    /// An exchange at `token_endpoint` through `connector_id`, for [`DEFAULT_EXCHANGE_SCOPES`],
    /// without client authentication, expecting the issuer the endpoint names.
    pub fn new(token_endpoint: impl Into<String>, connector_id: impl Into<String>) -> Self {
        Self {
            token_endpoint: token_endpoint.into(),
            expected_issuer: None,
            connector_id: connector_id.into(),
            scopes: DEFAULT_EXCHANGE_SCOPES.to_owned(),
            audiences: Vec::new(),
            subject_token_type: ID_TOKEN_TYPE.to_owned(),
            client: None,
        }
    }

    /// Expects `issuer` in the issued token's `iss` (a token endpoint reached through a proxy).
    pub fn with_expected_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.expected_issuer = Some(issuer.into());
        self
    }

    /// Requests `scopes` (space separated) instead of [`DEFAULT_EXCHANGE_SCOPES`].
    pub fn with_scopes(mut self, scopes: impl Into<String>) -> Self {
        self.scopes = scopes.into();
        self
    }

    /// Requests these audiences, each as an `audience:server:client_id:<aud>` scope token. An
    /// empty audience, or one with whitespace (which would smuggle in another scope), is left
    /// out with a warning.
    pub fn with_audiences(mut self, audiences: Vec<String>) -> Self {
        self.audiences = audiences
            .into_iter()
            .filter(|aud| {
                let valid = !aud.is_empty() && !aud.chars().any(char::is_whitespace);
                if !valid {
                    tracing::warn!(audience = ?aud, "token exchange: an audience that is empty or has whitespace is not requested");
                }
                valid
            })
            .collect();
        self
    }

    /// Sends the caller's token as `token_type` ([`ACCESS_TOKEN_TYPE`], ...) instead of
    /// [`ID_TOKEN_TYPE`].
    pub fn with_subject_token_type(mut self, token_type: impl Into<String>) -> Self {
        self.subject_token_type = token_type.into();
        self
    }

    /// Authenticates as `client_id` with `secret` (HTTP Basic, `client_secret_basic`).
    pub fn with_client_credentials(mut self, client_id: impl Into<String>, secret: Secret) -> Self {
        self.client = Some((client_id.into(), secret));
        self
    }

    /// The token endpoint.
    pub fn token_endpoint(&self) -> &str {
        &self.token_endpoint
    }

    /// The connector id.
    pub fn connector_id(&self) -> &str {
        &self.connector_id
    }

    /// The client id, when the client authenticates.
    pub fn client_id(&self) -> Option<&str> {
        self.client.as_ref().map(|(id, _)| id.as_str())
    }

    /// The issuer the issued token must name: the configured one, else the token endpoint
    /// without its trailing `/token`.
    pub fn expected_issuer(&self) -> String {
        match &self.expected_issuer {
            Some(issuer) => issuer.clone(),
            None => self
                .token_endpoint
                .strip_suffix("/token")
                .unwrap_or(&self.token_endpoint)
                .to_owned(),
        }
    }

    /// The `scope` parameter: the scopes, then one scope token per audience.
    pub fn scope(&self) -> String {
        let mut scope: Vec<String> = self.scopes.split_whitespace().map(str::to_owned).collect();
        scope.extend(self.audiences.iter().map(|aud| format!("{AUDIENCE_SCOPE_PREFIX}{aud}")));
        scope.join(" ")
    }

    /// Exchanges `subject_token` (the caller's validated bearer) for a token of the expected
    /// issuer.
    pub async fn exchange(&self, http: &OAuthHttp, subject_token: &Secret) -> Result<ExchangedToken, ExchangeError> {
        let scope = self.scope();
        let form = [
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("subject_token", subject_token.expose()),
            ("subject_token_type", self.subject_token_type.as_str()),
            ("requested_token_type", ID_TOKEN_TYPE),
            ("connector_id", self.connector_id.as_str()),
            ("scope", scope.as_str()),
        ];
        let basic = self.client.as_ref().map(|(id, secret)| (id.as_str(), secret));
        let received = Utc::now();
        let result = match http.post_form_raw(&self.token_endpoint, &form, basic).await {
            Ok((status, body)) if status.is_success() => self.issued(status, &body, received),
            Ok((status, body)) => Err(classify(status, &body, &self.token_endpoint, &self.connector_id)),
            Err(e) => Err(unanswered(e)),
        };
        match &result {
            Ok(token) => tracing::debug!(
                endpoint = %self.token_endpoint,
                connector = %self.connector_id,
                client_id = self.client_id().unwrap_or("-"),
                expires_at = ?token.expires_at,
                "token exchanged"
            ),
            Err(e) => tracing::info!(
                endpoint = %self.token_endpoint,
                connector = %self.connector_id,
                client_id = self.client_id().unwrap_or("-"),
                error = %e,
                "token exchange failed"
            ),
        }
        result
    }

    /// The token of a successful answer, its issuer checked.
    fn issued(
        &self,
        status: StatusCode,
        body: &[u8],
        received: DateTime<Utc>,
    ) -> Result<ExchangedToken, ExchangeError> {
        // serde's messages may quote a value of the body: say only what is missing.
        let response: ExchangeResponse = serde_json::from_slice(body).map_err(|_| {
            ExchangeError::Endpoint(format!(
                "{} answered {status} without a token response (JSON with access_token)",
                self.token_endpoint
            ))
        })?;
        let claims = unverified_claims(&response.access_token).ok_or_else(|| {
            ExchangeError::Endpoint(format!("{} issued a token that is not a JWT", self.token_endpoint))
        })?;
        let expected = self.expected_issuer();
        let got = claims.iss.unwrap_or_default();
        if !constant_time_eq(&expected, &got) {
            return Err(ExchangeError::IssuerMismatch { expected, got });
        }
        let expires_at = match response.expires_in {
            Some(seconds) if seconds > 0 => Some(received + TimeDelta::seconds(seconds)),
            _ => claims.exp.and_then(|exp| DateTime::from_timestamp(exp, 0)),
        };
        Ok(ExchangedToken {
            token: Secret::new(response.access_token),
            issuer: got,
            expires_at,
        })
    }
}

/// A token endpoint's answer to an exchange.
#[derive(Deserialize)]
struct ExchangeResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<i64>,
}

/// The claims of the issued token read here (its signature is the downstream's to check).
#[derive(Deserialize)]
struct IssuedClaims {
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    exp: Option<i64>,
}

/// The payload of a JWS compact token, unverified; `None` for anything else.
fn unverified_claims(token: &str) -> Option<IssuedClaims> {
    let mut parts = token.split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The failure of a request that got no answer.
fn unanswered(error: AuthError) -> ExchangeError {
    match error {
        AuthError::Unreachable { url, reason } => ExchangeError::Endpoint(format!("{reason} ({url})")),
        other => ExchangeError::Endpoint(other.to_string()),
    }
}

/// The class of an error answer of `endpoint`, by its status and OAuth error code.
fn classify(status: StatusCode, body: &[u8], endpoint: &str, connector: &str) -> ExchangeError {
    #[derive(Deserialize)]
    struct OAuthErrorBody {
        error: String,
        #[serde(default)]
        error_description: Option<String>,
    }
    let (code, description) = match serde_json::from_slice::<OAuthErrorBody>(body) {
        Ok(body) => (Some(body.error), body.error_description.map(|d| bounded(&d))),
        Err(_) => (None, None),
    };
    let said = match (&code, &description) {
        (Some(code), Some(description)) => format!(": {code} ({description})"),
        (Some(code), None) => format!(": {code}"),
        _ => String::new(),
    };
    let code = code.as_deref();
    let about_connector = description
        .as_deref()
        .is_some_and(|d| d.to_ascii_lowercase().contains("connector"));
    match code {
        _ if status.is_server_error() => ExchangeError::Endpoint(format!("{status} from {endpoint}{said}")),
        Some("invalid_grant") => caller(code, description),
        Some("invalid_client" | "unauthorized_client") => ExchangeError::Credentials(format!("{status}{said}")),
        _ if status == StatusCode::UNAUTHORIZED => ExchangeError::Credentials(format!("{status}{said}")),
        Some("invalid_request" | "invalid_target") if about_connector => {
            ExchangeError::Connector(format!("connector \"{connector}\" refused{said}"))
        }
        Some("unsupported_grant_type") => {
            ExchangeError::Endpoint(format!("{endpoint} does not support token exchange{said}"))
        }
        Some("server_error" | "temporarily_unavailable") => {
            ExchangeError::Endpoint(format!("{status} from {endpoint}{said}"))
        }
        Some(_)
            if status.is_client_error()
                && !matches!(
                    status,
                    StatusCode::NOT_FOUND
                        | StatusCode::METHOD_NOT_ALLOWED
                        | StatusCode::REQUEST_TIMEOUT
                        | StatusCode::TOO_MANY_REQUESTS
                ) =>
        {
            caller(code, description)
        }
        _ => ExchangeError::Endpoint(format!("{status} from {endpoint}{said}")),
    }
}

fn caller(code: Option<&str>, description: Option<String>) -> ExchangeError {
    ExchangeError::Caller {
        error: code.unwrap_or_default().to_owned(),
        description,
    }
}

/// A server's description, cut to [`MAX_DESCRIPTION`] characters and to one line.
fn bounded(description: &str) -> String {
    let line: String = description
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_DESCRIPTION)
        .collect();
    if description.chars().count() > MAX_DESCRIPTION {
        format!("{line}...")
    } else {
        line
    }
}

#[cfg(test)]
mod tests;
