//! The sign-in flow: an authorization URL with PKCE (S256), a `state` that expires after 10
//! minutes and remembers who asked, and the callback that turns the code into a [`Grant`].
//!
//! [`PendingSignIn::start`] makes the link and the record its callback needs;
//! [`PendingSignIn::complete`] checks the callback and exchanges the code. Where the records are
//! kept between the two is the caller's: [`SignIns`] keeps them in this process; a gateway keeps
//! them in its sign-in state store (`muster_auth::state`), so that any replica can take the
//! callback.
//!
//! ```
//! use muster_auth::oauth::{
//!     discovery::AuthorizationServerMetadata, flow::{SignInRequest, SignIns},
//!     registration::ClientRegistration,
//! };
//!
//! let server = AuthorizationServerMetadata::pinned(
//!     "https://idp.example.com", "https://idp.example.com/authorize", "https://idp.example.com/token", None,
//! );
//! let sign_ins = SignIns::new();
//! let started = sign_ins.start(SignInRequest {
//!     session: "s-1".into(),
//!     owner: "s-1".into(),
//!     server: "github".into(),
//!     metadata: server,
//!     client: ClientRegistration::pre_registered("muster", None),
//!     redirect_uri: "https://muster.example.com/oauth/proxy/callback".into(),
//!     resource: "https://mcp.github.example/mcp".into(),
//!     scope: Some("repo".into()),
//!     expected_issuer: None,
//! })?;
//! let query: std::collections::HashMap<_, _> = started.url.query_pairs().into_owned().collect();
//! assert_eq!(query["code_challenge_method"], "S256");
//! assert_eq!(query["resource"], "https://mcp.github.example/mcp");
//! assert_eq!(query["state"], started.state);
//! # Ok::<(), muster_auth::oauth::AuthError>(())
//! ```

use std::time::Duration;

use chrono::{DateTime, Utc};
use oauth2::{AuthUrl, AuthorizationCode, CsrfToken, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope};
use url::Url;

use super::{
    discovery::AuthorizationServerMetadata,
    error::{AuthError, Result},
    grant::{Grant, TOKEN_ENDPOINT},
    http::{OAuthHttp, oauth2_failure},
    registration::ClientRegistration,
};
use crate::{Secret, issuers::Description, secret::constant_time_eq};

mod pending;

pub(crate) use pending::PendingTable;

/// Random bytes in a `state` (43 characters of base64url): as many as in a PKCE verifier.
const STATE_BYTES: u32 = 32;

/// How long a sign-in link stays valid.
pub const STATE_TTL: Duration = Duration::from_secs(10 * 60);

/// Everything needed to start one person's sign-in to one server.
#[derive(Debug, Clone)]
pub struct SignInRequest {
    /// The MCP session that asked (it is told when the sign-in completes).
    pub session: String,
    /// Whom the grant will belong to: the session, or the person's subject (`grantScope:
    /// subject`).
    pub owner: String,
    /// The MCPServer.
    pub server: String,
    /// Its authorization server.
    pub metadata: AuthorizationServerMetadata,
    /// The gateway's client there.
    pub client: ClientRegistration,
    /// The gateway's callback URL.
    pub redirect_uri: String,
    /// The MCP endpoint the token is for (RFC 8707 `resource`).
    pub resource: String,
    /// The `scope` to ask for.
    pub scope: Option<String>,
    /// The issuer expected in the RFC 9207 `iss` parameter, when not the metadata's issuer.
    pub expected_issuer: Option<String>,
}

/// A started sign-in: the link to open and when it stops working.
#[derive(Debug, Clone)]
pub struct StartedSignIn {
    /// The authorization URL.
    pub url: Url,
    /// Its `state`.
    pub state: String,
    /// When the link expires.
    pub expires_at: DateTime<Utc>,
}

/// What the authorization server sent to the callback.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Callback {
    /// `code`.
    pub code: Option<String>,
    /// `state`.
    pub state: Option<String>,
    /// RFC 9207 `iss`.
    pub iss: Option<String>,
    /// `error`, when the person or the server refused.
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
}

impl Callback {
    /// The callback parameters of a query string.
    pub fn from_query(query: &str) -> Self {
        let mut callback = Self::default();
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let slot = match key.as_ref() {
                "code" => &mut callback.code,
                "state" => &mut callback.state,
                "iss" => &mut callback.iss,
                "error" => &mut callback.error,
                "error_description" => &mut callback.error_description,
                _ => continue,
            };
            *slot = Some(value.into_owned());
        }
        callback
    }
}

/// A completed sign-in: whose grant it is and the grant.
#[derive(Debug, Clone)]
pub struct CompletedSignIn {
    /// The session that asked.
    pub session: String,
    /// The grant's owner.
    pub owner: String,
    /// The MCPServer.
    pub server: String,
    /// The grant.
    pub grant: Grant,
}

/// A sign-in waiting for its callback: everything the callback needs, kept by its `state` until
/// the callback takes it (once) or it expires.
#[derive(Debug, Clone)]
pub struct PendingSignIn {
    /// What was asked: who, for which server, at which authorization server, as which client.
    pub request: SignInRequest,
    /// The PKCE verifier (the link carries its S256 challenge).
    pub verifier: Secret,
    /// The authorization URL the link sends the browser to.
    pub authorization_url: Url,
    /// Where to send the browser after the callback, when the link asked for an allowed one.
    pub browser_redirect: Option<String>,
    /// How the server described its authorization server when the sign-in started: a callback
    /// whose server is described otherwise by then is refused.
    pub described: Option<Description>,
    /// When the link stops working.
    pub expires_at: DateTime<Utc>,
}

impl PendingSignIn {
    /// Starts a sign-in that lasts `ttl`: a fresh PKCE verifier and state, and the authorization
    /// URL (built by the `oauth2` crate, with the `resource` of RFC 8707). The link to give, and
    /// the record to keep by its state until the callback. Refused when the authorization
    /// endpoint, the token endpoint or the redirect URI is not a URL.
    pub fn start(request: SignInRequest, ttl: Duration) -> Result<(StartedSignIn, Self)> {
        let metadata = &request.metadata;
        let authorization_url = AuthUrl::new(metadata.authorization_endpoint.clone()).map_err(|e| {
            AuthError::Unsupported(format!(
                "the authorization endpoint {:?} of {} is not a URL: {e}",
                metadata.authorization_endpoint, metadata.issuer
            ))
        })?;
        let client = request
            .client
            .token_client(&metadata.issuer, &metadata.token_endpoint)?
            .set_auth_uri(authorization_url)
            .set_redirect_uri(redirect_url(&request.redirect_uri)?);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let scopes = request.scope.iter().flat_map(|s| s.split_whitespace());
        let (url, state) = client
            .authorize_url(|| CsrfToken::new_random_len(STATE_BYTES))
            .set_pkce_challenge(challenge)
            .add_scopes(scopes.map(|s| Scope::new(s.to_owned())))
            .add_extra_param("resource", request.resource.as_str())
            .url();
        let expires_at = Utc::now() + chrono::TimeDelta::from_std(ttl).unwrap_or_default();
        let started = StartedSignIn {
            url: url.clone(),
            state: state.into_secret(),
            expires_at,
        };
        let pending = Self {
            request,
            verifier: Secret::new(verifier.into_secret()),
            authorization_url: url,
            browser_redirect: None,
            described: None,
            expires_at,
        };
        Ok((started, pending))
    }

    /// Completes this sign-in with `callback`, whose `state` named it (the caller took it from
    /// where it was kept, so that it is used once): checks the RFC 9207 issuer and the code, and
    /// exchanges the code (with the PKCE verifier and the resource) for a grant.
    pub async fn complete(self, http: &OAuthHttp, callback: &Callback) -> Result<CompletedSignIn> {
        let request = self.request;
        let expected = request
            .expected_issuer
            .clone()
            .unwrap_or_else(|| request.metadata.issuer.clone());
        match &callback.iss {
            Some(iss) if !constant_time_eq(iss, &expected) => {
                return Err(AuthError::IssuerMismatch {
                    expected,
                    got: iss.clone(),
                });
            }
            None if request.metadata.authorization_response_iss_parameter_supported => {
                return Err(AuthError::IssuerMismatch {
                    expected,
                    got: String::new(),
                });
            }
            _ => {}
        }
        if let Some(error) = &callback.error {
            return Err(AuthError::OAuth {
                endpoint: "the authorization endpoint",
                error: error.clone(),
                description: callback.error_description.clone(),
            });
        }
        let code = callback
            .code
            .as_deref()
            .ok_or_else(|| AuthError::MissingCode("the callback has no code parameter".to_owned()))?;
        let metadata = &request.metadata;
        let client = request
            .client
            .token_client(&metadata.issuer, &metadata.token_endpoint)?
            .set_redirect_uri(redirect_url(&request.redirect_uri)?);
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(self.verifier.expose().to_owned()))
            .add_extra_param("resource", request.resource.as_str())
            .request_async(&http.oauth2_client(TOKEN_ENDPOINT))
            .await
            .map_err(|e| oauth2_failure(TOKEN_ENDPOINT, &metadata.token_endpoint, e))?;
        let grant = Grant {
            access_token: Secret::new(String::new()),
            refresh_token: None,
            expires_at: None,
            scope: request.scope.clone(),
            issuer: request.metadata.issuer.clone(),
            token_endpoint: request.metadata.token_endpoint.clone(),
            revocation_endpoint: request.metadata.revocation_endpoint.clone(),
            client: request.client.clone(),
            resource: request.resource.clone(),
            rotates_refresh_tokens: None,
        }
        .updated(&response, Utc::now());
        Ok(CompletedSignIn {
            session: request.session,
            owner: request.owner,
            server: request.server,
            grant,
        })
    }
}

/// The sign-ins in progress in this process, by `state`. A state is used once: completing it
/// (or finding it expired) forgets it.
pub struct SignIns {
    pending: PendingTable,
    ttl: Duration,
}

impl std::fmt::Debug for SignIns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIns")
            .field("pending", &self.pending.len())
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl Default for SignIns {
    fn default() -> Self {
        Self::new()
    }
}

impl SignIns {
    /// No sign-in in progress; links last [`STATE_TTL`].
    pub fn new() -> Self {
        Self::with_ttl(STATE_TTL)
    }

    /// Links that last `ttl`.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            pending: PendingTable::default(),
            ttl,
        }
    }

    /// Starts a sign-in ([`PendingSignIn::start`]) and keeps it until its callback.
    pub fn start(&self, request: SignInRequest) -> Result<StartedSignIn> {
        let (started, pending) = PendingSignIn::start(request, self.ttl)?;
        self.pending.put(&started.state, pending);
        Ok(started)
    }

    /// Whether link `state` waits for its callback.
    pub fn is_pending(&self, state: &str) -> bool {
        self.pending.get(state).is_some()
    }

    /// Withdraws the sign-in of link `state`: its callback will be refused.
    pub fn forget(&self, state: &str) {
        self.pending.take(state);
    }

    /// How many sign-ins are waiting for their callback.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Completes the sign-in `callback` answers: takes its state (once), then
    /// [`PendingSignIn::complete`].
    pub async fn complete(&self, http: &OAuthHttp, callback: &Callback) -> Result<CompletedSignIn> {
        let state = callback.state.as_deref().ok_or(AuthError::UnknownState)?;
        let pending = self.pending.take(state).ok_or(AuthError::UnknownState)?;
        pending.complete(http, callback).await
    }
}

/// The gateway's callback as `oauth2` takes it; refused when it is not a URL.
fn redirect_url(redirect_uri: &str) -> Result<RedirectUrl> {
    RedirectUrl::new(redirect_uri.to_owned())
        .map_err(|e| AuthError::Unsupported(format!("the callback URL {redirect_uri:?} is not a URL: {e}")))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    use sha2::{Digest, Sha256};

    use super::*;

    fn request() -> SignInRequest {
        SignInRequest {
            session: "s".into(),
            owner: "s".into(),
            server: "srv".into(),
            metadata: AuthorizationServerMetadata::pinned(
                "https://as.example",
                "https://as.example/authorize",
                "https://as.example/token",
                None,
            ),
            client: ClientRegistration::pre_registered("c", None),
            redirect_uri: "https://gw.example/cb".into(),
            resource: "https://srv.example/mcp".into(),
            scope: None,
            expected_issuer: None,
        }
    }

    #[test]
    fn the_challenge_is_the_s256_of_the_verifier() {
        let sign_ins = SignIns::new();
        let started = sign_ins.start(request()).expect("starts");
        let query: HashMap<String, String> = started.url.query_pairs().into_owned().collect();
        let verifier = sign_ins
            .pending
            .get(&started.state)
            .map(|p| p.verifier.expose().to_owned())
            .unwrap_or_default();
        assert_eq!(verifier.len(), 43);
        assert_eq!(
            query["code_challenge"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
        );
        assert_eq!(started.state.len(), 43);
    }

    #[tokio::test]
    async fn unknown_expired_and_foreign_issuer_callbacks_are_refused_without_a_token_request() {
        let http = OAuthHttp::new();
        let sign_ins = SignIns::with_ttl(Duration::from_millis(50));
        let unknown = Callback::from_query("code=c&state=nope");
        assert!(matches!(
            sign_ins.complete(&http, &unknown).await,
            Err(AuthError::UnknownState)
        ));

        let started = sign_ins.start(request()).expect("starts");
        let foreign = Callback::from_query(&format!(
            "code=c&state={}&iss=https%3A%2F%2Fevil.example",
            started.state
        ));
        let err = sign_ins.complete(&http, &foreign).await.expect_err("refused");
        assert_eq!(
            err.to_string(),
            r#"issuer mismatch: expected "https://as.example", got "https://evil.example""#
        );
        // A state is used once.
        assert!(matches!(
            sign_ins.complete(&http, &foreign).await,
            Err(AuthError::UnknownState)
        ));

        let started = sign_ins.start(request()).expect("starts");
        tokio::time::sleep(Duration::from_millis(80)).await;
        let late = Callback::from_query(&format!("code=c&state={}", started.state));
        assert!(matches!(
            sign_ins.complete(&http, &late).await,
            Err(AuthError::UnknownState)
        ));
        assert_eq!(sign_ins.pending(), 0);
    }

    #[tokio::test]
    async fn a_refusal_by_the_person_is_reported_with_the_servers_words() {
        let http = OAuthHttp::new();
        let sign_ins = SignIns::new();
        let started = sign_ins.start(request()).expect("starts");
        let refused = Callback::from_query(&format!(
            "error=access_denied&error_description=End-User+aborted&state={}",
            started.state
        ));
        let err = sign_ins.complete(&http, &refused).await.expect_err("refused");
        assert_eq!(err.oauth_error(), Some("access_denied"));
        assert!(err.to_string().contains("End-User aborted"), "{err}");
    }
}
