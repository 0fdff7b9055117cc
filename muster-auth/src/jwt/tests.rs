use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use axum::{Json, Router, extract::State, http::StatusCode, response::IntoResponse, routing::get};
use jsonwebtoken::{EncodingKey, Header, encode};
use ring::{
    rand::SystemRandom,
    signature::{Ed25519KeyPair, KeyPair},
};
use serde_json::{Value, json};

use super::*;

const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "https://gw.example/mcp";

fn validator() -> JwtValidator {
    JwtValidator::new(vec![
        TrustedIssuer::new(ISSUER)
            .with_audience(AUDIENCE)
            .with_jwks_uri("http://127.0.0.1:9/jwks"),
    ])
}

fn token(alg: Algorithm, iss: &str) -> String {
    let claims = json!({"iss": iss, "sub": "a", "aud": AUDIENCE, "exp": 4_000_000_000u64});
    let key = EncodingKey::from_secret(b"shared").expect("an HMAC key");
    encode(&Header::new(alg), &claims, &key).expect("encodes")
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// An Ed25519 signing key of the test issuer and its public JWK.
struct SigningKey {
    kid: String,
    private: EncodingKey,
    jwk: Value,
}

impl SigningKey {
    fn new(kid: &str) -> Self {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("a fresh key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("its own key parses");
        Self {
            kid: kid.to_owned(),
            private: EncodingKey::from_ed_der(pkcs8.as_ref()),
            jwk: json!({
                "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(pair.public_key().as_ref()),
            }),
        }
    }

    /// A token for the test audience, valid for an hour unless `claims` say otherwise.
    fn sign(&self, claims: Value) -> String {
        let mut all = json!({"iss": ISSUER, "sub": "dana", "aud": AUDIENCE, "exp": now() + 3600});
        if let (Some(all), Some(more)) = (all.as_object_mut(), claims.as_object()) {
            all.extend(more.clone());
        }
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        encode(&header, &all, &self.private).expect("signs")
    }
}

/// The test issuer's JWKS endpoint on loopback: serves whichever keys it is told, counts the
/// fetches, and fails on request.
#[derive(Clone, Default)]
struct Jwks {
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
    failing: Arc<AtomicBool>,
}

impl Jwks {
    async fn serve(keys: &[&SigningKey]) -> (Self, String) {
        let jwks = Self::default();
        jwks.publish(keys);
        async fn get_jwks(State(jwks): State<Jwks>) -> axum::response::Response {
            jwks.fetches.fetch_add(1, Ordering::SeqCst);
            if jwks.failing.load(Ordering::SeqCst) {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
            let keys = jwks.keys.lock().expect("not poisoned").clone();
            Json(json!({ "keys": keys })).into_response()
        }
        let app = Router::new().route("/jwks", get(get_jwks)).with_state(jwks.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/jwks", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (jwks, url)
    }

    fn publish(&self, keys: &[&SigningKey]) {
        *self.keys.lock().expect("not poisoned") = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

fn validator_of(jwks_uri: &str) -> JwtValidator {
    JwtValidator::new(vec![
        TrustedIssuer::new(ISSUER)
            .with_audience(AUDIENCE)
            .with_jwks_uri(jwks_uri),
    ])
}

fn unknown_key() -> TokenError {
    TokenError::UnknownKey {
        issuer: ISSUER.to_owned(),
    }
}

#[tokio::test]
async fn opaque_symmetric_unsigned_and_foreign_tokens_are_refused_before_any_key_is_fetched() {
    let v = validator();
    assert_eq!(v.validate("opaque-token").await, Err(TokenError::NotAJwt));
    assert_eq!(
        v.validate(&token(Algorithm::HS256, ISSUER)).await,
        Err(TokenError::Algorithm("HS256".into()))
    );
    // `alg: none`, which the JWT library cannot even parse, is named.
    let payload = URL_SAFE_NO_PAD
        .encode(json!({"iss": ISSUER, "sub": "a", "aud": AUDIENCE, "exp": 4_000_000_000u64}).to_string());
    let unsigned = format!("{}.{payload}.", URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#));
    assert_eq!(v.validate(&unsigned).await, Err(TokenError::Algorithm("none".into())));
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
    let one: Claims = serde_json::from_value(json!({"iss": "i", "sub": "s", "aud": "a", "exp": 1})).expect("claims");
    let many: Claims =
        serde_json::from_value(json!({"iss": "i", "sub": "s", "aud": ["a", "b"], "exp": 1})).expect("claims");
    assert_eq!(
        (one.aud, many.aud),
        (vec!["a".to_owned()], vec!["a".to_owned(), "b".to_owned()])
    );
}

#[test]
fn the_leeway_is_thirty_seconds_unless_configured_and_counts_whole_seconds_rounded_up() {
    assert_eq!(validator().leeway(), Duration::from_secs(LEEWAY_SECONDS));
    assert_eq!(LEEWAY_SECONDS, 30);
    assert_eq!(validator().with_leeway(Duration::ZERO).leeway(), Duration::ZERO);
    assert_eq!(
        validator().with_leeway(Duration::from_secs(5)).leeway(),
        Duration::from_secs(5)
    );
    assert_eq!(
        validator().with_leeway(Duration::from_millis(1500)).leeway(),
        Duration::from_secs(2)
    );
}

#[tokio::test]
async fn expiry_and_not_before_are_checked_with_the_configured_leeway() {
    let key = SigningKey::new("k1");
    let (_jwks, uri) = Jwks::serve(&[&key]).await;
    let default = validator_of(&uri);
    let exact = default.clone().with_leeway(Duration::ZERO);
    let ten = default.clone().with_leeway(Duration::from_secs(10));

    let expired = key.sign(json!({"exp": now() - 5}));
    let early = key.sign(json!({"nbf": now() + 5}));
    let expired_long_ago = key.sign(json!({"exp": now() - 60}));

    // Five seconds of skew: the default 30 s and a configured 10 s cover it, zero does not.
    assert!(default.validate(&expired).await.is_ok());
    assert!(ten.validate(&expired).await.is_ok());
    assert_eq!(
        exact.validate(&expired).await,
        Err(TokenError::Invalid("has expired".into()))
    );
    assert!(default.validate(&early).await.is_ok());
    assert_eq!(
        exact.validate(&early).await,
        Err(TokenError::Invalid("is not valid yet (nbf)".into()))
    );
    // A minute is beyond the default.
    assert_eq!(
        default.validate(&expired_long_ago).await,
        Err(TokenError::Invalid("has expired".into()))
    );
    // The clones with other leeways share one key cache.
    assert!(exact.validate(&key.sign(json!({}))).await.is_ok());
}

#[tokio::test]
async fn a_new_key_is_fetched_on_first_sight_but_at_most_once_per_refetch_interval() {
    let old = SigningKey::new("old");
    let new = SigningKey::new("new");
    let (jwks, uri) = Jwks::serve(&[&old]).await;
    let v = validator_of(&uri).with_jwks_refetch_interval(Duration::from_millis(300));

    assert!(v.validate(&old.sign(json!({}))).await.is_ok());
    assert_eq!(jwks.fetches(), 1);
    // The issuer rotates: the new key is published and signs. Within the interval of the last
    // fetch the unknown key fetches nothing and is refused ...
    jwks.publish(&[&new, &old]);
    let renewed = new.sign(json!({}));
    assert_eq!(v.validate(&renewed).await, Err(unknown_key()));
    assert_eq!(jwks.fetches(), 1);
    // ... after it, the first token naming it fetches the JWKS again and is accepted.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(v.validate(&renewed).await.is_ok());
    assert_eq!(jwks.fetches(), 2);
    // Both keys are cached now: no more fetches.
    assert!(v.validate(&old.sign(json!({}))).await.is_ok());
    assert!(v.validate(&renewed).await.is_ok());
    assert_eq!(jwks.fetches(), 2);
}

#[tokio::test]
async fn a_key_removed_from_the_jwks_is_refused_once_the_cache_is_fetched_again() {
    let old = SigningKey::new("old");
    let new = SigningKey::new("new");
    let (jwks, uri) = Jwks::serve(&[&new, &old]).await;
    let v = validator_of(&uri).with_jwks_max_age(Duration::from_millis(300));
    let by_old = old.sign(json!({}));

    assert!(v.validate(&by_old).await.is_ok());
    // The issuer retires the old key. The cached set still holds it while it is fresh ...
    jwks.publish(&[&new]);
    assert!(v.validate(&by_old).await.is_ok());
    assert_eq!(jwks.fetches(), 1);
    // ... and once it is older than the maximum age the next token fetches it again.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(v.validate(&by_old).await, Err(unknown_key()));
    assert_eq!(jwks.fetches(), 2);
    assert!(v.validate(&new.sign(json!({}))).await.is_ok());

    // A token naming an unknown key also refreshes the set (interval zero: at once).
    let (jwks, uri) = Jwks::serve(&[&new, &old]).await;
    let v = validator_of(&uri).with_jwks_refetch_interval(Duration::ZERO);
    assert!(v.validate(&by_old).await.is_ok());
    jwks.publish(&[&new]);
    let stranger = SigningKey::new("stranger").sign(json!({}));
    assert_eq!(v.validate(&stranger).await, Err(unknown_key()));
    assert_eq!(v.validate(&by_old).await, Err(unknown_key()));
    assert_eq!(jwks.fetches(), 3, "the stranger's fetch, and the old key's own");
}

#[tokio::test]
async fn a_stale_cache_stays_in_use_while_the_issuer_cannot_be_reached() {
    let key = SigningKey::new("k1");
    let (jwks, uri) = Jwks::serve(&[&key]).await;
    let v = validator_of(&uri)
        .with_jwks_max_age(Duration::from_millis(100))
        .with_jwks_refetch_interval(Duration::ZERO);
    assert!(v.validate(&key.sign(json!({}))).await.is_ok());

    jwks.failing.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(v.validate(&key.sign(json!({}))).await.is_ok());
    assert_eq!(jwks.fetches(), 2, "the stale cache was fetched again");
    // A key the cache never held cannot be checked: the fetch failure says why.
    let stranger = SigningKey::new("stranger").sign(json!({}));
    assert!(
        matches!(v.validate(&stranger).await, Err(TokenError::Keys { .. })),
        "refused for want of keys"
    );
}

#[tokio::test]
async fn concurrent_tokens_share_one_fetch() {
    let key = SigningKey::new("k1");
    let (jwks, uri) = Jwks::serve(&[&key]).await;
    let v = validator_of(&uri).with_jwks_refetch_interval(Duration::ZERO);
    let token = key.sign(json!({}));
    let checks: Vec<_> = (0..8)
        .map(|_| {
            let (v, token) = (v.clone(), token.clone());
            tokio::spawn(async move { v.validate(&token).await })
        })
        .collect();
    for check in checks {
        assert!(check.await.expect("joins").is_ok());
    }
    assert_eq!(jwks.fetches(), 1);
}
