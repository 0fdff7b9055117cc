//! RFC 8693 token exchange (`muster_auth::exchange`) against two real authorization servers
//! (oidc-provider, tests/fixtures/oidc/provider.mjs): the local one issues the caller's token
//! (`token_for`), the remote one exchanges it the way Dex does through a connector that trusts
//! the local issuer (`OIDC_TOKEN_EXCHANGE=1`). Covered: the issued token (issuer, subject,
//! audiences, validated with the remote JWKS), one exchange for concurrent callers, and each
//! failure class: unknown connector, issuer mismatch, expired subject token, wrong client
//! secret, an endpoint nobody listens on.

mod common;

use std::{sync::Arc, time::Duration};

use common::oidc::OidcProvider;
use muster::auth::{
    Secret,
    exchange::{ExchangeCache, ExchangeError, TokenExchange},
    jwt::{JwtValidator, TrustedIssuer},
    oauth::http::OAuthHttp,
};

/// The connector the remote provider knows.
const CONNECTOR: &str = "upstream-oidc";
/// The client muster exchanges as, registered on the remote provider.
const CLIENT_ID: &str = "muster-exchange";
const CLIENT_SECRET: &str = "exchange-client-secret";
/// The resource the caller's token is for at the local provider.
const RESOURCE: &str = "http://127.0.0.1:9/mcp";

/// A remote provider exchanging tokens of `subject_issuer`, with `extra` environment.
fn remote(subject_issuer: &str, extra: &[(&str, &str)]) -> OidcProvider {
    let mut env = vec![
        ("OIDC_TOKEN_EXCHANGE", "1"),
        ("OIDC_EXCHANGE_SUBJECT_ISSUER", subject_issuer),
        ("OIDC_EXCHANGE_CONNECTOR", CONNECTOR),
        ("OIDC_STATIC_CLIENT_ID", CLIENT_ID),
        ("OIDC_STATIC_CLIENT_SECRET", CLIENT_SECRET),
        ("OIDC_STATIC_REDIRECT_URI", "http://127.0.0.1:9/cb"),
    ];
    env.extend_from_slice(extra);
    OidcProvider::start_with_env(&env)
}

/// The exchange at `remote` through the known connector, as the registered client.
fn exchange_at(remote: &OidcProvider) -> TokenExchange {
    TokenExchange::new(remote.token_endpoint(), CONNECTOR)
        .with_client_credentials(CLIENT_ID, Secret::new(CLIENT_SECRET))
}

/// A local provider, a remote one trusting it, and a token of `login` from the local one.
async fn providers(login: &str) -> (OidcProvider, OidcProvider, Secret) {
    let local = OidcProvider::start();
    let remote = remote(local.issuer(), &[]);
    let subject = Secret::new(local.token_for(RESOURCE, login).await);
    (local, remote, subject)
}

#[tokio::test]
async fn an_exchanged_token_names_the_remote_issuer_the_callers_subject_and_the_requested_audiences() {
    let (_local, remote, subject) = providers("alice").await;
    let http = OAuthHttp::new();
    let exchange = exchange_at(&remote).with_audiences(vec!["k8s-api".into(), "dex-k8s-authenticator".into()]);

    let before = chrono::Utc::now();
    let token = exchange.exchange(&http, &subject).await.expect("exchanged");
    assert_eq!(token.issuer, remote.issuer());
    let expires_at = token.expires_at.expect("expires_in");
    assert!(expires_at > before + chrono::TimeDelta::seconds(50), "{expires_at}");

    // A downstream server trusting the remote issuer accepts it: signature, issuer, audience.
    let validator = JwtValidator::new(vec![TrustedIssuer::new(remote.issuer()).with_audience("k8s-api")]);
    let claims = validator
        .validate(token.token.expose())
        .await
        .expect("valid for the remote");
    assert_eq!(claims.iss, remote.issuer());
    assert_eq!(claims.sub, "alice");
    assert_eq!(claims.aud, ["k8s-api", "dex-k8s-authenticator"]);
    assert_eq!(claims.azp.as_deref(), Some(CLIENT_ID));

    // Without audiences the token is for the client.
    let plain = exchange_at(&remote).exchange(&http, &subject).await.expect("exchanged");
    let validator = JwtValidator::new(vec![TrustedIssuer::new(remote.issuer()).with_audience(CLIENT_ID)]);
    assert_eq!(
        validator.validate(plain.token.expose()).await.expect("valid").aud,
        [CLIENT_ID]
    );
    assert_eq!(remote.exchange_counts(), (2, 0));

    // Twenty concurrent calls of one session share one exchange, and the next is cached.
    let cache = Arc::new(ExchangeCache::default());
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (cache, exchange, http, subject) = (Arc::clone(&cache), exchange.clone(), http.clone(), subject.clone());
        calls.spawn(async move { cache.token("session\0remote-server", &exchange, &http, &subject).await });
    }
    let tokens = calls.join_all().await;
    assert!(
        tokens
            .iter()
            .all(|t| t.as_ref().is_ok_and(|t| t.issuer == remote.issuer()))
    );
    cache
        .token("session\0remote-server", &exchange, &http, &subject)
        .await
        .expect("cached");
    assert_eq!(remote.exchange_count(), 3);
}

#[tokio::test]
async fn an_unknown_connector_is_a_connector_failure() {
    let (_local, remote, subject) = providers("bob").await;
    let error = TokenExchange::new(remote.token_endpoint(), "no-such-connector")
        .with_client_credentials(CLIENT_ID, Secret::new(CLIENT_SECRET))
        .exchange(&OAuthHttp::new(), &subject)
        .await
        .expect_err("unknown connector");
    assert!(matches!(error, ExchangeError::Connector(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "token exchange failed: connector \"no-such-connector\" refused: invalid_request (Requested connector does not exist.)"
    );
    assert!(error.is_shared());
    assert_eq!(error.ready_reason(), Some("TokenExchangeConnector"));
    assert_eq!(remote.exchange_counts(), (0, 1));
}

#[tokio::test]
async fn an_issuer_other_than_the_expected_one_is_refused_with_the_documented_message() {
    let (local, remote, subject) = providers("carol").await;
    let http = OAuthHttp::new();

    // A token endpoint reached through a proxy, expected issuer set to the proxy's URL.
    let error = exchange_at(&remote)
        .with_expected_issuer("https://dex.proxy.example.com")
        .exchange(&http, &subject)
        .await
        .expect_err("another issuer");
    assert_eq!(
        error.to_string(),
        format!(
            "issuer mismatch: expected \"https://dex.proxy.example.com\", got \"{}\"",
            remote.issuer()
        )
    );
    assert!(error.is_shared());
    assert_eq!(error.ready_reason(), None);

    // A server whose tokens name another issuer than the endpoint's (OIDC_EXCHANGE_ISSUER_OVERRIDE):
    // refused by default, accepted once that issuer is expected.
    let internal = "https://dex.internal.example.com";
    let proxied = remote_with_issuer(local.issuer(), internal);
    let error = exchange_at(&proxied)
        .exchange(&http, &subject)
        .await
        .expect_err("another issuer");
    assert_eq!(
        error,
        ExchangeError::IssuerMismatch {
            expected: proxied.issuer().to_owned(),
            got: internal.to_owned(),
        }
    );
    let token = exchange_at(&proxied)
        .with_expected_issuer(internal)
        .exchange(&http, &subject)
        .await
        .expect("the expected issuer");
    assert_eq!(token.issuer, internal);
}

fn remote_with_issuer(subject_issuer: &str, issued_issuer: &str) -> OidcProvider {
    remote(subject_issuer, &[("OIDC_EXCHANGE_ISSUER_OVERRIDE", issued_issuer)])
}

#[tokio::test]
async fn an_expired_subject_token_is_the_callers_own_failure() {
    let local = OidcProvider::start_with_env(&[("OIDC_ACCESS_TTL", "1")]);
    let remote = remote(local.issuer(), &[]);
    let subject = Secret::new(local.token_for(RESOURCE, "dave").await);
    // Issued with exp = iat + 1 (whole seconds) before `token_for` returned: expired a second later.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let cache = ExchangeCache::default();
    let error = cache
        .token("session\0server", &exchange_at(&remote), &OAuthHttp::new(), &subject)
        .await
        .expect_err("expired");
    assert_eq!(
        error,
        ExchangeError::Caller {
            error: "invalid_grant".into(),
            description: Some("subject token expired".into()),
        }
    );
    assert_eq!(
        error.to_string(),
        "token exchange failed: invalid_grant (subject token expired)"
    );
    assert!(!error.is_shared());
    assert_eq!(error.ready_reason(), None);
    assert_eq!(remote.exchange_counts(), (0, 1));
}

#[tokio::test]
async fn a_wrong_client_secret_is_a_credentials_failure() {
    let (_local, remote, subject) = providers("erin").await;
    let error = TokenExchange::new(remote.token_endpoint(), CONNECTOR)
        .with_client_credentials(CLIENT_ID, Secret::new("not-the-secret"))
        .exchange(&OAuthHttp::new(), &subject)
        .await
        .expect_err("wrong secret");
    assert_eq!(
        error.to_string(),
        "token exchange failed: 401 Unauthorized: invalid_client (client authentication failed)"
    );
    assert!(!error.to_string().contains("not-the-secret"));
    assert!(error.is_shared());
    assert_eq!(error.ready_reason(), Some("TokenExchangeCredentials"));
    assert_eq!(remote.exchange_counts(), (0, 1));
}

#[tokio::test]
async fn a_token_endpoint_nobody_listens_on_is_an_endpoint_failure() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}/token", listener.local_addr().expect("addr"));
    drop(listener);
    let error = TokenExchange::new(&endpoint, CONNECTOR)
        .exchange(&OAuthHttp::new(), &Secret::new("a.subject.token"))
        .await
        .expect_err("nobody listens");
    assert!(matches!(error, ExchangeError::Endpoint(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("token exchange failed: connection refused or failed ({endpoint})")
    );
    assert!(error.is_shared());
    assert_eq!(error.ready_reason(), Some("TokenExchangeEndpoint"));
}
