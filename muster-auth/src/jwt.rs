//! [`JwtValidator`]: bearer JWTs checked against trusted issuers: the signature with the
//! issuer's JWKS (refetched when a token names a key it does not have, so keys rotate), and
//! `iss`, `aud`, `exp` and `nbf` (30 seconds of leeway).
//!
//! Only asymmetric algorithms are accepted; the issuer is chosen by the token's `iss` among the
//! trusted ones (compared in constant time) before anything else is believed. Errors say what
//! is wrong without echoing the token.
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

/// A token naming an unknown key refetches the JWKS at most this often.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// Leeway for `exp` and `nbf`.
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
    fetched: Option<Instant>,
}

/// Validates bearer JWTs of trusted issuers. Cheap to clone; keys are shared and cached.
#[derive(Clone)]
pub struct JwtValidator {
    http: OAuthHttp,
    issuers: Arc<[Arc<IssuerKeys>]>,
}

impl std::fmt::Debug for JwtValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtValidator")
            .field(
                "issuers",
                &self.issuers.iter().map(|i| &i.trusted.issuer).collect::<Vec<_>>(),
            )
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
        Self { http, issuers }
    }

    /// The claims of `token` when it is a valid JWT of a trusted issuer for one of its
    /// audiences.
    pub async fn validate(&self, token: &str) -> Result<Claims, TokenError> {
        let header = decode_header(token).map_err(|_| TokenError::NotAJwt)?;
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
        let jwk = match issuer.key(header.kid.as_deref()).await {
            Some(jwk) => jwk,
            None => {
                issuer.refetch(&self.http).await?;
                issuer
                    .key(header.kid.as_deref())
                    .await
                    .ok_or_else(|| TokenError::UnknownKey {
                        issuer: issuer.trusted.issuer.clone(),
                    })?
            }
        };
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| TokenError::Invalid(format!("cannot be checked: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECONDS;
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
    /// The key `kid` names (or the only key when the token names none), from the cache.
    async fn key(&self, kid: Option<&str>) -> Option<Jwk> {
        let keys = self.keys.read().await;
        let set = keys.set.as_ref()?;
        match kid {
            Some(kid) => set.find(kid).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        }
    }

    /// Fetches the JWKS again, at most once per [`JWKS_REFETCH_INTERVAL`].
    async fn refetch(&self, http: &OAuthHttp) -> Result<(), TokenError> {
        let mut keys = self.keys.write().await;
        if keys.fetched.is_some_and(|at| at.elapsed() < JWKS_REFETCH_INTERVAL) {
            return Ok(());
        }
        let failed = |reason: String| TokenError::Keys {
            issuer: self.trusted.issuer.clone(),
            reason,
        };
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
        keys.fetched = Some(Instant::now());
        let set: Option<JwkSet> = http
            .get_json("JWKS", &jwks_uri)
            .await
            .map_err(|e| failed(e.to_string()))?;
        keys.set = Some(set.ok_or_else(|| failed(format!("no JWKS at {jwks_uri}")))?);
        Ok(())
    }
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
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};

    fn validator() -> JwtValidator {
        JwtValidator::new(vec![
            TrustedIssuer::new("https://idp.example")
                .with_audience("https://gw.example/mcp")
                .with_jwks_uri("http://127.0.0.1:9/jwks"),
        ])
    }

    fn token(alg: Algorithm, iss: &str) -> String {
        let claims =
            serde_json::json!({"iss": iss, "sub": "a", "aud": "https://gw.example/mcp", "exp": 4_000_000_000u64});
        let key = EncodingKey::from_secret(b"shared").expect("an HMAC key");
        encode(&Header::new(alg), &claims, &key).expect("encodes")
    }

    #[tokio::test]
    async fn opaque_symmetric_and_foreign_tokens_are_refused_before_any_key_is_fetched() {
        let v = validator();
        assert_eq!(v.validate("opaque-token").await, Err(TokenError::NotAJwt));
        assert_eq!(
            v.validate(&token(Algorithm::HS256, "https://idp.example")).await,
            Err(TokenError::Algorithm("HS256".into()))
        );
        // An RS256 header over a payload of an untrusted issuer: refused by issuer, no fetch.
        let hs = token(Algorithm::HS256, "https://evil.example");
        let payload = hs.split('.').nth(1).unwrap_or_default();
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let forged = format!("{header}.{payload}.c2ln");
        assert_eq!(
            v.validate(&forged).await,
            Err(TokenError::UntrustedIssuer("https://evil.example".into()))
        );
    }

    #[test]
    fn audiences_may_be_one_string_or_a_list() {
        let one: Claims =
            serde_json::from_value(serde_json::json!({"iss": "i", "sub": "s", "aud": "a", "exp": 1})).expect("claims");
        let many: Claims =
            serde_json::from_value(serde_json::json!({"iss": "i", "sub": "s", "aud": ["a", "b"], "exp": 1}))
                .expect("claims");
        assert_eq!(
            (one.aud, many.aud),
            (vec!["a".to_owned()], vec!["a".to_owned(), "b".to_owned()])
        );
    }
}
