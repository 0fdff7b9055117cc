//! The gateway as an OAuth protected resource (`aggregator.oauth.server`): `/mcp` wants a bearer
//! JWT of a trusted issuer for this gateway, answers 401 with an RFC 9728 challenge otherwise,
//! and the caller's identity reaches the tools. Tokens come from a real authorization server
//! (oidc-provider on loopback), which also rotates its signing keys; forged tokens come from
//! `tests/fixtures/oidc/forge.mjs`.

mod common;

use std::{
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::{
    call_meta, envelope,
    oidc::{OidcProvider, sign_hs256_with_public_key, sign_with_foreign_key},
};
use muster::core::config::{AggregatorConfig, MusterConfig, OAuthServerConfig};
use muster::gateway::Gateway;
use rmcp::{
    ServiceExt,
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use serde_json::{Value, json};

async fn status_of(response: reqwest::Response) -> (u16, Option<String>) {
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, challenge)
}

async fn initialize(url: &str, token: Option<&str>) -> (u16, Option<String>) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    status_of(request.send().await.expect("answers")).await
}

/// How a test serves the gateway: its axum router with `axum::serve` (an embedder's app), or
/// `Gateway::serve` (the gateway's own server, which takes `/mcp` past the router).
#[derive(Debug, Clone, Copy)]
enum Serving {
    Router,
    Own,
}

/// Serves `gateway` on `listener` as `how` says, until the task is aborted.
fn serve(gateway: &Arc<Gateway>, listener: tokio::net::TcpListener, how: Serving) -> tokio::task::JoinHandle<()> {
    match how {
        Serving::Router => {
            let app = gateway.router();
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            })
        }
        Serving::Own => {
            let gateway = Arc::clone(gateway);
            tokio::spawn(async move {
                let _ = gateway.serve(listener, std::future::pending()).await;
            })
        }
    }
}

#[tokio::test]
async fn only_bearers_of_a_trusted_issuer_for_this_gateway_reach_mcp() {
    let idp = OidcProvider::start();
    for how in [Serving::Router, Serving::Own] {
        only_bearers_reach_mcp(&idp, how).await;
    }
}

async fn only_bearers_reach_mcp(idp: &OidcProvider, how: Serving) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let config = MusterConfig::default().with_aggregator(
        AggregatorConfig::default()
            .with_oauth_server(OAuthServerConfig::trusting(base.clone(), vec![idp.issuer().to_owned()])),
    );
    let gateway = Arc::new(Gateway::new(config, Vec::new(), Vec::new()).expect("valid configuration"));
    gateway.start().await;
    let server = serve(&gateway, listener, how);
    let mcp = format!("{base}/mcp");

    // No token: 401 naming the metadata, which names the issuer. /health stays open.
    let (status, challenge) = initialize(&mcp, None).await;
    assert_eq!(status, 401);
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.as_deref().is_some_and(|c| c.contains(&metadata_url)),
        "{challenge:?}"
    );
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .expect("answers")
        .json()
        .await
        .expect("json");
    assert_eq!(metadata["resource"], mcp);
    assert_eq!(metadata["authorization_servers"], json!([idp.issuer()]));
    assert_eq!(
        reqwest::get(format!("{base}/health")).await.expect("answers").status(),
        200
    );

    // A token for this gateway works, and the tools see who is calling.
    let token = idp.token_for(&mcp, "dana").await;
    assert_eq!(initialize(&mcp, Some(&token)).await.0, 200);
    let config = StreamableHttpClientTransportConfig::with_uri(mcp.clone()).auth_header(token.clone());
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("connects");
    let answer = call_meta(
        &client,
        "call_tool",
        json!({"name": "core_auth_status", "arguments": {}}),
    )
    .await;
    let status: Value =
        serde_json::from_str(envelope(&answer)["content"][0]["text"].as_str().unwrap_or("null")).unwrap_or_default();
    assert_eq!(status["principal"]["subject"], "dana", "{status}");
    assert_eq!(status["principal"]["issuer"], idp.issuer());
    let _ = client.cancel().await;

    // A forged token, a token for another resource, an opaque token: 401, saying why.
    let at = token.len() - 10;
    let swapped = if &token[at..=at] == "A" { "B" } else { "A" };
    let forged = format!("{}{swapped}{}", &token[..at], &token[at + 1..]);
    let (status, challenge) = initialize(&mcp, Some(&forged)).await;
    assert_eq!(status, 401);
    assert!(
        challenge.as_deref().is_some_and(|c| c.contains("invalid signature")),
        "{challenge:?}"
    );
    let elsewhere = idp.token_for("http://127.0.0.1:9/mcp", "dana").await;
    let (status, challenge) = initialize(&mcp, Some(&elsewhere)).await;
    assert_eq!(status, 401);
    assert!(
        challenge
            .as_deref()
            .is_some_and(|c| c.contains("not for this audience")),
        "{challenge:?}"
    );
    assert_eq!(initialize(&mcp, Some("opaque-token")).await.0, 401);

    gateway.shutdown().await;
    server.abort();
}

#[tokio::test]
async fn enabled_without_a_trusted_issuer_the_front_door_stays_shut() {
    for how in [Serving::Router, Serving::Own] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let config = MusterConfig::default().with_aggregator(
            AggregatorConfig::default().with_oauth_server(OAuthServerConfig::trusting(base.clone(), Vec::new())),
        );
        let gateway = Arc::new(Gateway::new(config, Vec::new(), Vec::new()).expect("valid configuration"));
        let server = serve(&gateway, listener, how);
        assert_eq!(initialize(&format!("{base}/mcp"), None).await.0, 401, "{how:?}");
        assert_eq!(
            initialize(&format!("{base}/mcp"), Some("anything")).await.0,
            401,
            "{how:?}"
        );
        server.abort();
    }
}

#[tokio::test]
async fn behind_the_front_door_a_persons_sign_in_follows_them_across_connections_but_not_to_others() {
    use common::signin::SignInGateway;
    use muster::core::config::McpClientConfig;

    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default()
            .with_oauth_server(OAuthServerConfig::trusting(base.clone(), vec![idp.issuer().to_owned()]))
            .with_mcp_client(McpClientConfig::enabled_at(base))
    })
    .await;
    let base = gw.base.clone();
    let mcp = format!("{base}/mcp");
    let connect = |token: String| {
        let config = StreamableHttpClientTransportConfig::with_uri(mcp.clone()).auth_header(token);
        ().serve(StreamableHttpClientTransport::from_config(config))
    };
    let tools = |page: rmcp::model::CallToolResult| -> Vec<String> {
        common::tool_names(&serde_json::from_str(&common::text(&page)).unwrap_or(Value::Null))
    };

    let dana_token = idp.token_for(&mcp, "dana").await;
    let dana = connect(dana_token.clone()).await.expect("connects");
    let login = call_meta(
        &dana,
        "call_tool",
        json!({"name": "core_auth_login", "arguments": {"server": "protected"}}),
    )
    .await;
    let login: Value =
        serde_json::from_str(envelope(&login)["content"][0]["text"].as_str().unwrap_or("null")).unwrap_or_default();
    let link = login["authUrl"].as_str().expect("a link").to_owned();
    let callback = idp.sign_in(&link, "dana").await;
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 200);

    // Dana's second connection (another transport session, a fresh token of the same client)
    // is the same session: her sign-in is there.
    let dana_again = connect(idp.token_for(&mcp, "dana").await).await.expect("connects");
    let seen = tools(call_meta(&dana_again, "list_tools", json!({"limit": 200})).await);
    assert!(seen.contains(&"x_protected_whoami".to_owned()), "{seen:?}");
    // Erin is another person: signed out.
    let erin = connect(idp.token_for(&mcp, "erin").await).await.expect("connects");
    let seen = tools(call_meta(&erin, "list_tools", json!({"limit": 200})).await);
    assert!(!seen.iter().any(|t| t.starts_with("x_protected_")), "{seen:?}");

    for client in [dana, dana_again, erin] {
        let _ = client.cancel().await;
    }
    gw.stop().await;
}

/// The resource identifier of the gateways below: tokens name it, so one token serves several
/// gateways that differ only in their timing keys.
const RESOURCE: &str = "https://muster.test/mcp";

/// A gateway on a loopback port whose front door trusts one issuer for [`RESOURCE`].
struct FrontDoor {
    gateway: Gateway,
    server: tokio::task::JoinHandle<()>,
    mcp: String,
}

impl FrontDoor {
    /// Starts it; `tune` sets the timing keys.
    async fn start(issuer: &str, tune: impl FnOnce(OAuthServerConfig) -> OAuthServerConfig) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let mut door = OAuthServerConfig::trusting(base.clone(), vec![issuer.to_owned()]);
        door.resource_identifier = Some(RESOURCE.to_owned());
        let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_oauth_server(tune(door)));
        let gateway = Gateway::new(config, Vec::new(), Vec::new()).expect("valid configuration");
        gateway.start().await;
        let app = gateway.router();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            gateway,
            server,
            mcp: format!("{base}/mcp"),
        }
    }

    /// Asserts `token` gets through: `initialize` answers 200.
    async fn admits(&self, token: &str, what: &str) {
        let (status, challenge) = initialize(&self.mcp, Some(token)).await;
        assert_eq!(status, 200, "{what}: {challenge:?}");
    }

    /// Asserts `token` is refused: 401 with a challenge naming the metadata, `invalid_token`,
    /// and a description containing `why`.
    async fn refuses(&self, token: &str, why: &str, what: &str) {
        let (status, challenge) = initialize(&self.mcp, Some(token)).await;
        assert_eq!(status, 401, "{what}: {challenge:?}");
        let challenge = challenge.unwrap_or_else(|| panic!("{what}: a 401 without WWW-Authenticate"));
        assert!(challenge.starts_with("Bearer "), "{what}: {challenge}");
        assert!(challenge.contains(r#"resource_metadata=""#), "{what}: {challenge}");
        assert!(challenge.contains(r#"error="invalid_token""#), "{what}: {challenge}");
        let description = challenge
            .split_once(r#"error_description=""#)
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("{what}: no error_description in {challenge}"));
        assert!(description.contains(why), "{what}: {challenge} does not say {why:?}");
    }

    async fn stop(self) {
        self.gateway.shutdown().await;
        self.server.abort();
    }
}

/// The decoded JSON of part `index` of `token` (0: header, 1: payload).
fn jwt_part(token: &str, index: usize) -> Value {
    let part = token.split('.').nth(index).expect("a JWT part");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("JSON")
}

fn encode_part(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

/// Sleeps until 50 ms into the Unix second `second` (claims count whole seconds).
async fn sleep_until_second(second: i64) {
    let wait = second as f64 + 0.05 - unix_now();
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
}

#[tokio::test]
async fn a_rotated_signing_key_is_fetched_on_first_sight_and_a_retired_one_is_refused_once_the_keys_are_fetched_again()
{
    let idp = OidcProvider::start_with_env(&[("OIDC_ROTATE_ADMIN", "1")]);
    // `eager` fetches the JWKS for every key it does not hold (no refetch interval), so the
    // test need not wait, and trusts what it fetched for the default ten minutes; `aged` also
    // trusts it for one second only.
    let eager = FrontDoor::start(idp.issuer(), |door| door.with_jwks_refetch_interval_seconds(0)).await;
    let aged = FrontDoor::start(idp.issuer(), |door| {
        door.with_jwks_refetch_interval_seconds(0).with_jwks_max_age_seconds(1)
    })
    .await;

    let old_kid = idp.published_kids().await.remove(0);
    let by_old = idp.token_for(RESOURCE, "dana").await;
    assert_eq!(jwt_part(&by_old, 0)["kid"], old_kid.as_str());
    eager.admits(&by_old, "a token of the first key").await;
    aged.admits(&by_old, "a token of the first key").await;

    // The issuer rotates: a new key signs, the old one stays published for a while. The first
    // token naming the new key makes the gateways fetch the JWKS again.
    let new_kid = idp.rotate_signing_key().await;
    assert_ne!(new_kid, old_kid);
    assert_eq!(idp.published_kids().await, vec![new_kid.clone(), old_kid.clone()]);
    let by_new = idp.token_for(RESOURCE, "dana").await;
    assert_eq!(jwt_part(&by_new, 0)["kid"], new_kid.as_str());
    eager.admits(&by_new, "a token of the rotated key").await;
    aged.admits(&by_new, "a token of the rotated key").await;
    eager
        .admits(&by_old, "a token of the old key while it is published")
        .await;

    // The issuer retires the old key. A gateway learns that at its next fetch of the JWKS:
    // until then its cache still holds the key ...
    assert_eq!(idp.retire_old_keys().await, vec![new_kid.clone()]);
    assert_eq!(idp.published_kids().await, vec![new_kid.clone()]);
    eager.admits(&by_old, "a retired key the cache still holds").await;
    // ... `eager` fetches when a token names a key it does not hold (a forged one will do) ...
    let mut claims = jwt_part(&by_new, 1);
    claims["sub"] = json!("mallory");
    let stranger = sign_with_foreign_key(&json!({"kid": "nobody-publishes-this"}), &claims);
    eager.refuses(&stranger, "no key of", "a key nobody publishes").await;
    eager
        .refuses(&by_old, "no key of", "a retired key, once refetched")
        .await;
    // ... and `aged` when its keys are a second old, without any prompting.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    aged.refuses(&by_old, "no key of", "a retired key, after the maximum age")
        .await;

    // The current key works everywhere.
    eager.admits(&by_new, "the signing key after the retirement").await;
    aged.admits(&by_new, "the signing key after the retirement").await;
    let fresh = idp.token_for(RESOURCE, "erin").await;
    eager.admits(&fresh, "a fresh token").await;
    eager.stop().await;
    aged.stop().await;
}

#[tokio::test]
async fn an_expired_token_is_refused_once_the_configured_clock_skew_is_spent() {
    let idp = OidcProvider::start_with_env(&[("OIDC_ACCESS_TTL", "3")]);
    let exact = FrontDoor::start(idp.issuer(), |door| door.with_clock_skew_seconds(0)).await;
    let one = FrontDoor::start(idp.issuer(), |door| door.with_clock_skew_seconds(1)).await;
    let default = FrontDoor::start(idp.issuer(), |door| door).await;

    let token = idp.token_for(RESOURCE, "dana").await;
    let claims = jwt_part(&token, 1);
    let exp = claims["exp"].as_i64().expect("exp");
    assert_eq!(exp - claims["iat"].as_i64().expect("iat"), 3);
    exact.admits(&token, "a fresh token, exact clocks").await;
    one.admits(&token, "a fresh token, 1 s of skew").await;

    // A second after expiry: refused with exact clocks, covered by one second of skew.
    sleep_until_second(exp + 1).await;
    exact
        .refuses(&token, "has expired", "1 s after expiry, exact clocks")
        .await;
    one.admits(&token, "1 s after expiry, 1 s of skew").await;
    // Two seconds after: beyond one second of skew, within the default 30.
    sleep_until_second(exp + 2).await;
    one.refuses(&token, "has expired", "2 s after expiry, 1 s of skew")
        .await;
    default
        .admits(&token, "2 s after expiry, the default 30 s of skew")
        .await;

    // The door stays open to valid tokens.
    exact
        .admits(&idp.token_for(RESOURCE, "dana").await, "a fresh token afterwards")
        .await;
    for door in [exact, one, default] {
        door.stop().await;
    }
}

#[tokio::test]
async fn a_token_not_valid_yet_is_refused_unless_the_clock_skew_covers_it() {
    let idp = OidcProvider::start_with_env(&[("OIDC_ACCESS_NOT_BEFORE", "5")]);
    let one = FrontDoor::start(idp.issuer(), |door| door.with_clock_skew_seconds(1)).await;
    let default = FrontDoor::start(idp.issuer(), |door| door).await;

    let token = idp.token_for(RESOURCE, "dana").await;
    let claims = jwt_part(&token, 1);
    assert_eq!(
        claims["nbf"].as_i64().expect("nbf") - claims["iat"].as_i64().expect("iat"),
        5
    );
    one.refuses(&token, "is not valid yet (nbf)", "nbf 5 s ahead, 1 s of skew")
        .await;
    default.admits(&token, "nbf 5 s ahead, the default 30 s of skew").await;
    one.stop().await;
    default.stop().await;
}

#[tokio::test]
async fn tokens_of_another_issuer_or_audience_forged_unsigned_or_hmac_signed_are_refused_and_the_door_stays_open() {
    let idp = OidcProvider::start();
    let stranger = OidcProvider::start();
    let door = FrontDoor::start(idp.issuer(), |door| door).await;
    let good = idp.token_for(RESOURCE, "dana").await;
    door.admits(&good, "a token of the trusted issuer").await;
    let header = jwt_part(&good, 0);
    let claims = jwt_part(&good, 1);
    let signature = good.rsplit('.').next().expect("a signature");

    // A real token of a real authorization server this gateway does not trust.
    let foreign = stranger.token_for(RESOURCE, "dana").await;
    door.refuses(&foreign, "is not trusted", "another issuer").await;
    // A real token of the trusted issuer for another resource.
    let elsewhere = idp.token_for("https://elsewhere.test/mcp", "dana").await;
    door.refuses(&elsewhere, "not for this audience", "another audience")
        .await;

    // The trusted issuer's token with its payload changed (another subject), signature kept.
    let mut tampered_claims = claims.clone();
    tampered_claims["sub"] = json!("admin");
    let original_header = good.split('.').next().expect("a header");
    let tampered = format!("{original_header}.{}.{signature}", encode_part(&tampered_claims));
    door.refuses(&tampered, "invalid signature", "a tampered payload").await;
    // The same claims signed by a key that is not the issuer's, naming the issuer's key ...
    let forged = sign_with_foreign_key(&json!({"kid": header["kid"]}), &claims);
    door.refuses(&forged, "invalid signature", "a foreign key naming the issuer's")
        .await;
    // ... or naming its own.
    let forged = sign_with_foreign_key(&json!({"kid": "the-forgers-key"}), &claims);
    door.refuses(&forged, "no key of", "a foreign key naming itself").await;
    // Unsigned (`alg: none`).
    let unsigned = format!(
        "{}.{}.",
        encode_part(&json!({"alg": "none", "typ": "JWT"})),
        encode_part(&claims)
    );
    door.refuses(&unsigned, "signed with none", "alg none").await;
    // HMAC keyed with the issuer's public key (algorithm confusion).
    let jwks = idp.jwks().await;
    let public = jwks["keys"]
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["kid"] == header["kid"]))
        .expect("the issuer publishes its key");
    let confused = sign_hs256_with_public_key(&json!({"kid": header["kid"]}), &claims, public);
    door.refuses(&confused, "signed with HS256", "HS256 keyed with the public key")
        .await;
    // Nothing at all, and not a JWT.
    let (status, challenge) = initialize(&door.mcp, None).await;
    assert_eq!(status, 401);
    assert!(
        challenge
            .as_deref()
            .is_some_and(|c| c.contains("resource_metadata=") && !c.contains("error=")),
        "no token, no error code: {challenge:?}"
    );
    door.refuses("opaque-token", "not a JWT", "an opaque token").await;

    // The gateway keeps serving: the good token and a fresh one get through.
    door.admits(&good, "the good token afterwards").await;
    door.admits(&idp.token_for(RESOURCE, "erin").await, "a fresh token afterwards")
        .await;
    door.stop().await;
}

#[test]
fn the_front_door_timing_keys_are_camel_case_in_config_yaml() {
    let yaml = r#"
aggregator:
  oauth:
    server:
      enabled: true
      baseUrl: https://muster.example.com
      trustedIssuers: [https://idp.example.com]
      clockSkewSeconds: 5
      jwksRefetchIntervalSeconds: 10
      jwksMaxAgeSeconds: 300
"#;
    let config: MusterConfig = serde_saphyr::from_str(yaml).expect("parses");
    let door = &config.aggregator.oauth.server;
    assert_eq!(door.clock_skew_seconds, Some(5));
    assert_eq!(door.jwks_refetch_interval_seconds, Some(10));
    assert_eq!(door.jwks_max_age_seconds, Some(300));
    let unset: MusterConfig = serde_saphyr::from_str("aggregator: {oauth: {server: {enabled: true}}}").expect("parses");
    assert_eq!(unset.aggregator.oauth.server.clock_skew_seconds, None);
    let written = serde_json::to_value(door).expect("serializes");
    assert_eq!(written["clockSkewSeconds"], 5);
    assert_eq!(written["jwksRefetchIntervalSeconds"], 10);
    assert_eq!(written["jwksMaxAgeSeconds"], 300);
}
