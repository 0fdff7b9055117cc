//! The OAuth fixture on its own, without muster: oidc-provider (tests/fixtures/oidc/provider.mjs)
//! discovered, a client registered dynamically, a browserless sign-in with PKCE S256 and a
//! resource indicator, the code exchanged for a JWT access token for that resource, a refresh,
//! and a revocation that makes the next refresh fail. A second test covers the optional pieces:
//! a pre-registered client on a loopback redirect URI of any port, and RFC 8414 metadata.

mod common;

use std::time::Duration;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::oidc::OidcProvider;
use reqwest::{StatusCode, header::CONTENT_TYPE};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;

const REDIRECT_URI: &str = "http://127.0.0.1:9/cb";
const RESOURCE: &str = "http://127.0.0.1:9/mcp";

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(15))
        .build()
        .expect("reqwest client")
}

fn random_b64(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).expect("random bytes");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A PKCE verifier and its S256 challenge (RFC 7636 4.2).
fn pkce() -> (String, String) {
    let verifier = random_b64(32);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let response = http.get(url).send().await.expect("GET");
    assert_eq!(response.status(), StatusCode::OK, "GET {url}");
    serde_json::from_slice(&response.bytes().await.expect("body")).expect("JSON body")
}

/// POSTs an `application/x-www-form-urlencoded` body; returns the status and the JSON answer.
async fn post_form(
    http: &reqwest::Client,
    url: &str,
    basic: Option<(&str, &str)>,
    fields: &[(&str, &str)],
) -> (StatusCode, Value) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let mut request = http
        .post(url)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body);
    if let Some((id, secret)) = basic {
        request = request.basic_auth(id, Some(secret));
    }
    let response = request.send().await.expect("POST");
    let status = response.status();
    let bytes = response.bytes().await.expect("body");
    let json = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (status, json)
}

fn str_field<'a>(value: &'a Value, name: &str) -> &'a str {
    value[name]
        .as_str()
        .unwrap_or_else(|| panic!("no string {name:?} in {value}"))
}

/// The claims of a compact JWS, unverified; asserts the RFC 9068 header type.
fn jwt_claims(token: &str) -> Value {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "the access token is a compact JWT");
    let header: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).expect("base64url header")).expect("JSON header");
    assert_eq!(header["typ"], "at+jwt", "RFC 9068 access token header: {header}");
    assert_eq!(header["alg"], "RS256", "{header}");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("base64url payload")).expect("JSON payload")
}

fn query_param(url: &Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

fn authorization_url(
    endpoint: &str,
    client_id: &str,
    redirect_uri: &str,
    scope: &str,
    prompt: Option<&str>,
    state: &str,
    challenge: &str,
) -> String {
    let mut url = Url::parse(endpoint).expect("authorization endpoint");
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("scope", scope)
        .append_pair("state", state)
        .append_pair("code_challenge", challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("resource", RESOURCE);
    if let Some(prompt) = prompt {
        url.query_pairs_mut().append_pair("prompt", prompt);
    }
    url.into()
}

/// Exchanges `code` (with `verifier`, for [`RESOURCE`]) at `token_endpoint` as confidential
/// `client`: the status and the answer.
async fn exchange_code(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: (&str, &str),
    code: &str,
    redirect_uri: &str,
    verifier: &str,
) -> (StatusCode, Value) {
    post_form(
        http,
        token_endpoint,
        Some(client),
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
            ("resource", RESOURCE),
        ],
    )
    .await
}

/// The pre-registered client of the fixture's `OIDC_STATIC_*` settings, as the tests start it.
const STATIC_CLIENT: (&str, &str) = ("muster-static", "static-secret");

/// The redirect URI the static client signs in with: another loopback port than the one it was
/// registered with (1).
const STATIC_REDIRECT_URI: &str = "http://127.0.0.1:45678/oauth/proxy/callback";

/// `user` signs in with [`STATIC_CLIENT`] for `scope` (the provider's `metadata`), and the code
/// is exchanged: the callback the browser was sent to, the status and the token answer.
async fn sign_in_static(
    provider: &OidcProvider,
    http: &reqwest::Client,
    metadata: &Value,
    user: &str,
    scope: &str,
) -> (Url, StatusCode, Value) {
    let (verifier, challenge) = pkce();
    let url = authorization_url(
        str_field(metadata, "authorization_endpoint"),
        STATIC_CLIENT.0,
        STATIC_REDIRECT_URI,
        scope,
        None,
        "state-1",
        &challenge,
    );
    let callback = provider.sign_in(&url, user).await;
    let code = query_param(&callback, "code").unwrap_or_else(|| panic!("no code in {callback}"));
    let token_endpoint = str_field(metadata, "token_endpoint");
    let (status, tokens) = exchange_code(
        http,
        token_endpoint,
        STATIC_CLIENT,
        &code,
        STATIC_REDIRECT_URI,
        &verifier,
    )
    .await;
    (callback, status, tokens)
}

fn assert_access_token_for_resource(token: &str, issuer: &str, subject: &str, client_id: &str) -> Value {
    let claims = jwt_claims(token);
    assert_eq!(claims["iss"], issuer, "{claims}");
    assert_eq!(claims["aud"], RESOURCE, "{claims}");
    assert_eq!(claims["sub"], subject, "{claims}");
    assert_eq!(claims["client_id"], client_id, "{claims}");
    assert_eq!(claims["scope"], "openid offline_access", "{claims}");
    let (iat, exp) = (
        claims["iat"].as_i64().expect("iat"),
        claims["exp"].as_i64().expect("exp"),
    );
    assert_eq!(exp - iat, 60, "the default access token lifetime is 60 s: {claims}");
    claims
}

#[tokio::test]
async fn a_dynamically_registered_public_client_signs_in_exchanges_refreshes_and_revokes() {
    let provider = OidcProvider::start();
    let issuer = provider.issuer();
    let http = http();

    let metadata = get_json(&http, &format!("{issuer}/.well-known/openid-configuration")).await;
    assert_eq!(metadata["issuer"], issuer);
    assert_eq!(metadata["authorization_response_iss_parameter_supported"], true);
    assert_eq!(metadata["code_challenge_methods_supported"], json!(["S256"]));
    let registration_endpoint = str_field(&metadata, "registration_endpoint");
    let authorization_endpoint = str_field(&metadata, "authorization_endpoint");
    let token_endpoint = str_field(&metadata, "token_endpoint");
    let revocation_endpoint = str_field(&metadata, "revocation_endpoint");

    // RFC 7591: open registration, no initial access token.
    let response = http
        .post(registration_endpoint)
        .header(CONTENT_TYPE, "application/json")
        .body(
            json!({
                "redirect_uris": [REDIRECT_URI],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "client_name": "oidc fixture test",
            })
            .to_string(),
        )
        .send()
        .await
        .expect("register");
    assert_eq!(response.status(), StatusCode::CREATED);
    let client: Value = serde_json::from_slice(&response.bytes().await.expect("body")).expect("JSON");
    let client_id = str_field(&client, "client_id").to_owned();
    assert!(
        client.get("client_secret").is_none(),
        "a public client has no secret: {client}"
    );

    // A request without PKCE is refused: PKCE is required for every client.
    let mut no_pkce = Url::parse(authorization_endpoint).expect("URL");
    no_pkce
        .query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &client_id)
        .append_pair("redirect_uri", REDIRECT_URI)
        .append_pair("scope", "openid")
        .append_pair("state", "s");
    let refused = provider.sign_in(no_pkce.as_str(), "alice").await;
    assert_eq!(
        query_param(&refused, "error").as_deref(),
        Some("invalid_request"),
        "{refused}"
    );

    let (verifier, challenge) = pkce();
    let state = random_b64(16);
    let url = authorization_url(
        authorization_endpoint,
        &client_id,
        REDIRECT_URI,
        "openid offline_access",
        // offline_access is only kept when consent is prompted for (OIDC Core 11).
        Some("consent"),
        &state,
        &challenge,
    );
    let callback = provider.sign_in(&url, "alice").await;

    assert!(callback.as_str().starts_with(REDIRECT_URI), "{callback}");
    assert_eq!(query_param(&callback, "error"), None, "{callback}");
    assert_eq!(query_param(&callback, "iss").as_deref(), Some(issuer), "RFC 9207 iss");
    assert_eq!(query_param(&callback, "state").as_deref(), Some(state.as_str()));
    let code = query_param(&callback, "code").expect("code");

    let (status, tokens) = post_form(
        &http,
        token_endpoint,
        None,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", &client_id),
            ("code_verifier", &verifier),
            ("resource", RESOURCE),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer", "{tokens}");
    assert_eq!(tokens["expires_in"], 60, "{tokens}");
    assert!(tokens["id_token"].is_string(), "openid was granted: {tokens}");
    let claims = assert_access_token_for_resource(str_field(&tokens, "access_token"), issuer, "alice", &client_id);
    let refresh_token = str_field(&tokens, "refresh_token").to_owned();

    let refresh = |refresh_token: String| {
        let (http, client_id) = (http.clone(), client_id.clone());
        async move {
            post_form(
                &http,
                token_endpoint,
                None,
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", &refresh_token),
                    ("client_id", &client_id),
                    ("resource", RESOURCE),
                ],
            )
            .await
        }
    };

    let (status, refreshed) = refresh(refresh_token.clone()).await;
    assert_eq!(status, StatusCode::OK, "{refreshed}");
    let refreshed_claims =
        assert_access_token_for_resource(str_field(&refreshed, "access_token"), issuer, "alice", &client_id);
    assert_ne!(refreshed_claims["jti"], claims["jti"], "a new access token");
    // Public clients get a rotated refresh token; the current one is what a client keeps.
    let current = str_field(&refreshed, "refresh_token").to_owned();
    assert_ne!(current, refresh_token, "a public client's refresh token rotates");

    let (status, revoked) = post_form(
        &http,
        revocation_endpoint,
        None,
        &[
            ("token", &current),
            ("token_type_hint", "refresh_token"),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");

    let (status, after) = refresh(current).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{after}");
    assert_eq!(after["error"], "invalid_grant", "{after}");

    // A code is single use (and oidc-provider revokes the grant's tokens when one is replayed).
    let (status, reused) = post_form(
        &http,
        token_endpoint,
        None,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", &client_id),
            ("code_verifier", &verifier),
            ("resource", RESOURCE),
        ],
    )
    .await;
    assert_eq!(
        (status, &reused["error"]),
        (StatusCode::BAD_REQUEST, &json!("invalid_grant")),
        "{reused}"
    );
}

#[tokio::test]
async fn a_pre_registered_client_on_any_loopback_port_signs_in_with_a_short_lived_token() {
    let provider = OidcProvider::start_with_env(&[
        ("OIDC_STATIC_CLIENT_ID", STATIC_CLIENT.0),
        ("OIDC_STATIC_CLIENT_SECRET", STATIC_CLIENT.1),
        ("OIDC_STATIC_REDIRECT_URI", "http://127.0.0.1:1/oauth/proxy/callback"),
        ("OIDC_ACCESS_TTL", "5"),
        ("OIDC_OAUTH_METADATA", "1"),
    ]);
    let issuer = provider.issuer();
    let http = http();

    // RFC 8414 metadata, served on request next to the OpenID Connect document.
    let metadata = get_json(&http, &format!("{issuer}/.well-known/oauth-authorization-server")).await;
    assert_eq!(metadata["issuer"], issuer);
    let token_endpoint = str_field(&metadata, "token_endpoint");

    // Registered with port 1, used with another: loopback ports are not compared (RFC 8252 7.3).
    let (callback, status, tokens) =
        sign_in_static(&provider, &http, &metadata, "bob", "openid offline_access email").await;
    assert!(callback.as_str().starts_with(STATIC_REDIRECT_URI), "{callback}");
    assert_eq!(query_param(&callback, "iss").as_deref(), Some(issuer));
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["expires_in"], 5, "OIDC_ACCESS_TTL: {tokens}");
    let claims = jwt_claims(str_field(&tokens, "access_token"));
    assert_eq!(claims["aud"], RESOURCE, "{claims}");
    assert_eq!(claims["sub"], "bob", "{claims}");
    assert_eq!(claims["iss"], issuer, "{claims}");
    assert_eq!(claims["client_id"], "muster-static", "{claims}");
    // Without prompt=consent oidc-provider drops offline_access, and still issues a refresh token.
    assert_eq!(claims["scope"], "openid email", "{claims}");
    assert!(tokens["refresh_token"].is_string(), "{tokens}");

    // A token request without `resource` gets an access token for the userinfo endpoint, which
    // answers with the email claim (oidc-provider's default; OIDC_USE_GRANTED_RESOURCE changes it).
    let (status, plain) = post_form(
        &http,
        token_endpoint,
        Some(STATIC_CLIENT),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", str_field(&tokens, "refresh_token")),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    let userinfo = http
        .get(str_field(&metadata, "userinfo_endpoint"))
        .bearer_auth(str_field(&plain, "access_token"))
        .send()
        .await
        .expect("userinfo");
    assert_eq!(userinfo.status(), StatusCode::OK);
    let userinfo: Value = serde_json::from_slice(&userinfo.bytes().await.expect("body")).expect("JSON");
    assert_eq!(userinfo["sub"], "bob", "{userinfo}");
    assert_eq!(userinfo["email"], "bob@example.test", "{userinfo}");
}

#[tokio::test]
async fn with_rotation_a_refresh_token_is_used_once_and_a_replay_revokes_the_grant() {
    let provider = OidcProvider::start_with_env(&[
        ("OIDC_STATIC_CLIENT_ID", STATIC_CLIENT.0),
        ("OIDC_STATIC_CLIENT_SECRET", STATIC_CLIENT.1),
        ("OIDC_STATIC_REDIRECT_URI", "http://127.0.0.1:1/oauth/proxy/callback"),
        ("OIDC_ROTATE_REFRESH", "1"),
    ]);
    let http = http();
    let metadata = get_json(
        &http,
        &format!("{}/.well-known/openid-configuration", provider.issuer()),
    )
    .await;
    let token_endpoint = str_field(&metadata, "token_endpoint");
    let (_, status, tokens) = sign_in_static(&provider, &http, &metadata, "carol", "openid offline_access").await;
    let client = Some(STATIC_CLIENT);
    assert_eq!(status, StatusCode::OK, "{tokens}");
    let first = str_field(&tokens, "refresh_token").to_owned();
    let refresh = |token: String| {
        let http = http.clone();
        async move {
            post_form(
                &http,
                token_endpoint,
                client,
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", &token),
                    ("resource", RESOURCE),
                ],
            )
            .await
        }
    };

    let (status, rotated) = refresh(first.clone()).await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let second = str_field(&rotated, "refresh_token").to_owned();
    assert_ne!(second, first, "a refresh answers with a new refresh token");

    let (status, replayed) = refresh(first).await;
    assert_eq!(
        (status, &replayed["error"]),
        (StatusCode::BAD_REQUEST, &json!("invalid_grant")),
        "a used refresh token is refused: {replayed}"
    );
    let (status, after) = refresh(second).await;
    assert_eq!(
        (status, &after["error"]),
        (StatusCode::BAD_REQUEST, &json!("invalid_grant")),
        "the replay revoked the grant, its newest refresh token too: {after}"
    );
    assert_eq!(provider.token_requests("refresh_token"), (1, 2));
}
