//! [`JwtValidator`]: bearer JWTs checked against trusted issuers: the signature with the
//! issuer's JWKS, and `iss`, `aud`, `exp` and `nbf` (with [`LEEWAY_SECONDS`] of clock-skew
//! leeway unless [`JwtValidator::with_leeway`] says otherwise).
//!
//! Only asymmetric algorithms are accepted (`none` and the HMAC ones are refused before any key
//! is looked at, so an issuer's public key can never serve as an HMAC secret); the issuer is
//! chosen by the token's `iss` among the trusted ones (compared in constant time) before
//! anything else is believed. Errors say what is wrong without echoing the token.
//!
//! # Key rotation
//!
//! An issuer's JWKS is fetched when first needed and cached. The cache is fetched again
//!
//! - when a token names a key (`kid`) the cache does not hold, at most once per
//!   [`JWKS_REFETCH_INTERVAL`] ([`JwtValidator::with_jwks_refetch_interval`]): a key the issuer
//!   starts signing with is picked up on first sight;
//! - before the first token after the cache turned [`JWKS_MAX_AGE`] old
//!   ([`JwtValidator::with_jwks_max_age`]): a key the issuer removed from its JWKS is refused
//!   at the latest this long after the removal, even when no new key shows up.
//!
//! Each fetch replaces the cached set, so a removed key is refused from the first fetch that
//! no longer lists it. When a fetch for a stale cache fails, the keys fetched before stay in
//! use (an unreachable issuer does not lock everybody out) and the fetch is retried after the
//! refetch interval (or the maximum age, when that is shorter).
//!
//! ```no_run
//! # async fn run() -> Result<(), muster_auth::jwt::TokenError> {
//! use muster_auth::jwt::{JwtValidator, TrustedIssuer};
//!
//! let validator = JwtValidator::new(vec![
//!     TrustedIssuer::new("https://idp.example.com").with_audience("https://muster.example.com/mcp"),
//! ]);
//! let claims = validator.validate("eyJhbGciOiJSUzI1NiIs...").await?;
//! println!("{} via {}", claims.sub, claims.iss);
//! # Ok(()) }
//! ```

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{
    Algorithm, DecodingKey, Validation, decode, decode_header,
    errors::ErrorKind,
    jwk::{Jwk, JwkSet},
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::RwLock;

use crate::{
    oauth::{discovery::authorization_server_metadata, http::OAuthHttp},
    secret::constant_time_eq,
};

/// A token naming an unknown key refetches the JWKS at most this often, by default.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// A fetched JWKS is trusted this long, by default; the first token after that fetches it again.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// Clock-skew leeway for `exp` and `nbf`, in seconds, by default.
pub const LEEWAY_SECONDS: u64 = 30;

/// Why a bearer token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a JWT (an opaque token, garbage).
    #[error("the bearer token is not a JWT")]
    NotAJwt,
    /// Its issuer is not trusted.
    #[error("the bearer token's issuer {0:?} is not trusted")]
    UntrustedIssuer(String),
    /// It is signed with a symmetric or unknown algorithm.
    #[error("the bearer token is signed with {0}, which is not accepted")]
    Algorithm(String),
    /// No key of the issuer's JWKS matches it.
    #[error("no key of {issuer}'s JWKS verifies the bearer token")]
    UnknownKey {
        /// The issuer.
        issuer: String,
    },
    /// The issuer's keys cannot be fetched.
    #[error("cannot fetch {issuer}'s signing keys: {reason}")]
    Keys {
        /// The issuer.
        issuer: String,
        /// Why.
        reason: String,
    },
    /// The token failed a check (signature, audience, expiry, ...).
    #[error("the bearer token {0}")]
    Invalid(String),
}

/// An issuer whose tokens are accepted, and for which audiences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedIssuer {
    /// The issuer identifier, exactly as in tokens.
    pub issuer: String,
    /// Accepted audiences; a token must carry one of them. Empty accepts none.
    pub audiences: Vec<String>,
    /// The JWKS location; discovered from the issuer's metadata when not given.
    pub jwks_uri: Option<String>,
}

impl TrustedIssuer {
    /// Trusts `issuer` (add audiences with [`TrustedIssuer::with_audience`]).
    pub fn new(issuer: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audiences: Vec::new(),
            jwks_uri: None,
        }
    }

    /// Accepts tokens for `audience`.
    pub fn with_audience(mut self, audience: impl Into<String>) -> Self {
        self.audiences.push(audience.into());
        self
    }

    /// Reads keys from `jwks_uri` instead of discovering it.
    pub fn with_jwks_uri(mut self, jwks_uri: impl Into<String>) -> Self {
        self.jwks_uri = Some(jwks_uri.into());
        self
    }
}

/// The claims of a validated token that the gateway uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// The issuer.
    pub iss: String,
    /// The subject.
    pub sub: String,
    /// The audience (one or several).
    #[serde(default, deserialize_with = "one_or_many")]
    pub aud: Vec<String>,
    /// Expiry (seconds since the epoch).
    pub exp: i64,
    /// The authorized party, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azp: Option<String>,
    /// The client id (RFC 9068), when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The granted scope, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The e-mail, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The actor chain (RFC 8693 `act`), when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Value>,
    /// The groups (`groups`, one or several), when present: what the Kubernetes API server
    /// reads as `--oidc-groups-claim groups`.
    #[serde(default, deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

struct IssuerKeys {
    trusted: TrustedIssuer,
    keys: RwLock<Keys>,
}

#[derive(Default)]
struct Keys {
    set: Option<JwkSet>,
    jwks_uri: Option<String>,
    /// When a fetch was last tried (the refetch interval counts from here).
    attempted: Option<Instant>,
    /// When `set` was fetched (its age counts from here).
    loaded: Option<Instant>,
}

/// How long clocks may disagree and how long keys are cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timing {
    leeway_seconds: u64,
    refetch_interval: Duration,
    max_age: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            leeway_seconds: LEEWAY_SECONDS,
            refetch_interval: JWKS_REFETCH_INTERVAL,
            max_age: JWKS_MAX_AGE,
        }
    }
}

/// Validates bearer JWTs of trusted issuers. Cheap to clone; keys are shared and cached.
#[derive(Clone)]
pub struct JwtValidator {
    http: OAuthHttp,
    issuers: Arc<[Arc<IssuerKeys>]>,
    timing: Timing,
}

impl std::fmt::Debug for JwtValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtValidator")
            .field(
                "issuers",
                &self.issuers.iter().map(|i| &i.trusted.issuer).collect::<Vec<_>>(),
            )
            .field("timing", &self.timing)
            .finish()
    }
}

impl JwtValidator {
    /// A validator trusting `issuers`.
    pub fn new(issuers: Vec<TrustedIssuer>) -> Self {
        Self::with_http(issuers, OAuthHttp::new())
    }

    /// A validator fetching keys with `http`.
    pub fn with_http(issuers: Vec<TrustedIssuer>, http: OAuthHttp) -> Self {
        let issuers = issuers
            .into_iter()
            .map(|trusted| {
                Arc::new(IssuerKeys {
                    keys: RwLock::new(Keys {
                        jwks_uri: trusted.jwks_uri.clone(),
                        ..Keys::default()
                    }),
                    trusted,
                })
            })
            .collect();
        Self {
            http,
            issuers,
            timing: Timing::default(),
        }
    }

    /// Tolerates clocks that disagree by up to `leeway` when checking `exp` and `nbf` (counted
    /// in whole seconds, rounded up; default [`LEEWAY_SECONDS`]). Zero checks them exactly.
    pub fn with_leeway(mut self, leeway: Duration) -> Self {
        self.timing.leeway_seconds = leeway.as_secs() + u64::from(leeway.subsec_nanos() > 0);
        self
    }

    /// Lets a token naming an unknown key fetch the JWKS again at most once per `interval`
    /// (default [`JWKS_REFETCH_INTERVAL`]). The interval bounds how often anyone can make the
    /// validator fetch keys; zero lets every unknown key fetch.
    pub fn with_jwks_refetch_interval(mut self, interval: Duration) -> Self {
        self.timing.refetch_interval = interval;
        self
    }

    /// Trusts a fetched JWKS for `max_age` (default [`JWKS_MAX_AGE`]): the first token after
    /// that fetches it again, so a key removed from it is refused within `max_age`.
    pub fn with_jwks_max_age(mut self, max_age: Duration) -> Self {
        self.timing.max_age = max_age;
        self
    }

    /// The clock-skew leeway for `exp` and `nbf`.
    pub fn leeway(&self) -> Duration {
        Duration::from_secs(self.timing.leeway_seconds)
    }

    /// The claims of `token` when it is a valid JWT of a trusted issuer for one of its
    /// audiences.
    pub async fn validate(&self, token: &str) -> Result<Claims, TokenError> {
        let Ok(header) = decode_header(token) else {
            // A header naming `none` (or another algorithm jsonwebtoken does not know) does not
            // parse: say which algorithm was refused.
            return Err(unverified_alg(token)
                .filter(|alg| alg.parse::<Algorithm>().is_err())
                .map_or(TokenError::NotAJwt, TokenError::Algorithm));
        };
        if !matches!(
            header.alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
                | Algorithm::ES256
                | Algorithm::ES384
                | Algorithm::EdDSA
        ) {
            return Err(TokenError::Algorithm(format!("{:?}", header.alg)));
        }
        let claimed = unverified_issuer(token).ok_or(TokenError::NotAJwt)?;
        let issuer = self
            .issuers
            .iter()
            .find(|i| constant_time_eq(&i.trusted.issuer, &claimed))
            .ok_or_else(|| TokenError::UntrustedIssuer(claimed.clone()))?;
        let jwk = issuer
            .verifying_key(&self.http, header.kid.as_deref(), self.timing)
            .await?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| TokenError::Invalid(format!("cannot be checked: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.timing.leeway_seconds;
        validation.validate_nbf = true;
        validation.set_issuer(&[&issuer.trusted.issuer]);
        validation.set_audience(&issuer.trusted.audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        decode::<Claims>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| TokenError::Invalid(describe(e.kind())))
    }
}

impl IssuerKeys {
    /// The key that checks a token naming `kid`: from the cache while it is fresh and holds the
    /// key, else after fetching the JWKS again (see the module docs for when that happens).
    async fn verifying_key(&self, http: &OAuthHttp, kid: Option<&str>, timing: Timing) -> Result<Jwk, TokenError> {
        let looked = Instant::now();
        let (cached, fresh) = self.cached_key(kid, timing.max_age).await;
        if let (Some(jwk), true) = (&cached, fresh) {
            return Ok(jwk.clone());
        }
        // A stale cache is due for a fetch whatever the refetch interval says (which still
        // spaces out retries when the issuer cannot be reached).
        let interval = if fresh {
            timing.refetch_interval
        } else {
            timing.refetch_interval.min(timing.max_age)
        };
        match self.refetch(http, looked, interval).await {
            Ok(()) => self
                .cached_key(kid, Duration::MAX)
                .await
                .0
                .ok_or_else(|| TokenError::UnknownKey {
                    issuer: self.trusted.issuer.clone(),
                }),
            Err(e) => match cached {
                Some(jwk) => {
                    tracing::warn!(error = %e, "keeping the JWKS fetched before");
                    Ok(jwk)
                }
                None => Err(e),
            },
        }
    }

    /// The key `kid` names (or the only key when the token names none) from the cache, and
    /// whether the cache is younger than `max_age`.
    async fn cached_key(&self, kid: Option<&str>, max_age: Duration) -> (Option<Jwk>, bool) {
        let keys = self.keys.read().await;
        let fresh = keys.loaded.is_some_and(|at| at.elapsed() < max_age);
        let Some(set) = keys.set.as_ref() else {
            return (None, false);
        };
        let jwk = match kid {
            Some(kid) => set.find(kid).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        (jwk, fresh)
    }

    /// Fetches the JWKS again, unless a fetch was tried after `looked` (another request's
    /// fetch answers this one too) or less than `interval` ago.
    async fn refetch(&self, http: &OAuthHttp, looked: Instant, interval: Duration) -> Result<(), TokenError> {
        let mut keys = self.keys.write().await;
        if keys.attempted.is_some_and(|at| at >= looked || at.elapsed() < interval) {
            return Ok(());
        }
        let failed = |reason: String| TokenError::Keys {
            issuer: self.trusted.issuer.clone(),
            reason,
        };
        keys.attempted = Some(Instant::now());
        let jwks_uri = match &keys.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                #[derive(Deserialize)]
                struct WithJwks {
                    jwks_uri: Option<String>,
                }
                let metadata = authorization_server_metadata(http, &self.trusted.issuer)
                    .await
                    .map_err(|e| failed(e.to_string()))?;
                let url = format!(
                    "{}/.well-known/openid-configuration",
                    metadata.issuer.trim_end_matches('/')
                );
                let with: Option<WithJwks> = http
                    .get_json("openid configuration", &url)
                    .await
                    .map_err(|e| failed(e.to_string()))?;
                let uri = with
                    .and_then(|w| w.jwks_uri)
                    .ok_or_else(|| failed("its metadata names no jwks_uri".to_owned()))?;
                keys.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let set: Option<JwkSet> = http
            .get_json("JWKS", &jwks_uri)
            .await
            .map_err(|e| failed(e.to_string()))?;
        keys.set = Some(set.ok_or_else(|| failed(format!("no JWKS at {jwks_uri}")))?);
        keys.loaded = Some(Instant::now());
        Ok(())
    }
}

/// The `alg` of a token's header, read without parsing the rest (to name an algorithm the JWT
/// library does not know, such as `none`).
fn unverified_alg(token: &str) -> Option<String> {
    let header = token.split('.').next()?;
    let bytes = URL_SAFE_NO_PAD.decode(header.trim_end_matches('=')).ok()?;
    #[derive(Deserialize)]
    struct Alg {
        alg: String,
    }
    serde_json::from_slice::<Alg>(&bytes).ok().map(|a| a.alg)
}

/// The `iss` of a token's payload, read before the signature is checked (only to choose which
/// issuer's keys check it).
fn unverified_issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    #[derive(Deserialize)]
    struct Iss {
        iss: String,
    }
    serde_json::from_slice::<Iss>(&bytes).ok().map(|i| i.iss)
}

fn describe(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::ExpiredSignature => "has expired".to_owned(),
        ErrorKind::ImmatureSignature => "is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidAudience => "is not for this audience".to_owned(),
        ErrorKind::InvalidIssuer => "has the wrong issuer".to_owned(),
        ErrorKind::InvalidSignature => "has an invalid signature".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("lacks the {claim} claim"),
        other => format!("is invalid: {other:?}"),
    }
}

#[cfg(test)]
mod tests;
