//! The requests at the token and revocation endpoints (code exchange, refresh, revocation)
//! against a loopback mock of the two endpoints: what is sent, how the client authenticates,
//! what the answer becomes, and how a refusal, a redirect, an oversized or a malformed answer
//! is reported. The whole flow against a real authorization server is `tests/auth_client.rs`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use base64::{
    Engine,
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
};
use chrono::Utc;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::*;
use crate::oauth::{
    AuthError,
    discovery::AuthorizationServerMetadata,
    flow::{Callback, SignInRequest, SignIns},
};

/// What the mock's token endpoint answers.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    content_type: &'static str,
    location: Option<String>,
    body: String,
}

impl Answer {
    fn json(status: u16, body: serde_json::Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            location: None,
            body: body.to_string(),
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    form: HashMap<String, String>,
    authorization: Option<String>,
}

#[derive(Debug)]
struct Mock {
    answer: Mutex<Answer>,
    received: Mutex<Vec<Received>>,
}

impl Mock {
    fn answer(&self, answer: Answer) {
        *self.answer.lock().expect("lock") = answer;
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    fn last(&self) -> Received {
        self.received().last().cloned().expect("a request")
    }
}

/// `/token`, `/revoke` and `/elsewhere` on a loopback port: `(mock, base URL)`. `/token` and
/// `/elsewhere` answer what the mock is told; `/revoke` answers 200 with no body.
async fn serve(answer: Answer) -> (Arc<Mock>, String) {
    let mock = Arc::new(Mock {
        answer: Mutex::new(answer),
        received: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/token", post(endpoint))
        .route("/elsewhere", post(endpoint))
        .route("/revoke", post(endpoint))
        .with_state(Arc::clone(&mock));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("local addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (mock, base)
}

async fn endpoint(State(mock): State<Arc<Mock>>, uri: axum::http::Uri, headers: HeaderMap, body: String) -> Response {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    mock.received.lock().expect("lock").push(Received {
        path: uri.path().to_owned(),
        form: url::form_urlencoded::parse(body.as_bytes()).into_owned().collect(),
        authorization,
    });
    if uri.path() == "/revoke" {
        return StatusCode::OK.into_response();
    }
    let answer = mock.answer.lock().expect("lock").clone();
    let mut response = (
        StatusCode::from_u16(answer.status).expect("a status"),
        [("content-type", answer.content_type)],
        answer.body,
    )
        .into_response();
    if let Some(location) = answer.location {
        response
            .headers_mut()
            .insert("location", location.parse().expect("a header value"));
    }
    response
}

fn tokens(access: &str, refresh: Option<&str>) -> Answer {
    let mut body =
        json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600, "scope": "repo read:org"});
    if let Some(refresh) = refresh {
        body["refresh_token"] = json!(refresh);
    }
    Answer::json(200, body)
}

fn sign_in(base: &str, client: ClientRegistration) -> SignInRequest {
    SignInRequest {
        session: "s-1".into(),
        owner: "s-1".into(),
        server: "github".into(),
        metadata: AuthorizationServerMetadata::pinned(
            base,
            &format!("{base}/authorize"),
            &format!("{base}/token"),
            Some(&format!("{base}/revoke")),
        ),
        client,
        redirect_uri: "http://127.0.0.1:9/oauth/proxy/callback".into(),
        resource: "https://mcp.example.com/mcp".into(),
        scope: Some("repo".into()),
        expected_issuer: None,
    }
}

/// A grant of `client` at the mock, as a completed sign-in would leave it.
fn grant(base: &str, client: ClientRegistration) -> Grant {
    Grant {
        access_token: Secret::new("old-access"),
        refresh_token: Some(Secret::new("old-refresh")),
        expires_at: None,
        scope: Some("repo".into()),
        issuer: base.to_owned(),
        token_endpoint: format!("{base}/token"),
        revocation_endpoint: Some(format!("{base}/revoke")),
        client,
        resource: "https://mcp.example.com/mcp".into(),
        rotates_refresh_tokens: None,
    }
}

#[tokio::test]
async fn a_public_client_exchanges_the_code_with_its_verifier_callback_and_resource() {
    let (mock, base) = serve(tokens("new-access", Some("new-refresh"))).await;
    let sign_ins = SignIns::new();
    let started = sign_ins
        .start(sign_in(&base, ClientRegistration::pre_registered("muster", None)))
        .expect("starts");
    let link: HashMap<String, String> = started.url.query_pairs().into_owned().collect();
    let callback = Callback::from_query(&format!("code=the-code&state={}", started.state));
    let before = Utc::now();
    let done = sign_ins
        .complete(&OAuthHttp::new(), &callback)
        .await
        .expect("signed in");

    let sent = mock.last();
    assert_eq!(sent.path, "/token");
    assert_eq!(sent.authorization, None);
    assert_eq!(sent.form["grant_type"], "authorization_code");
    assert_eq!(sent.form["code"], "the-code");
    assert_eq!(sent.form["client_id"], "muster");
    assert_eq!(sent.form["redirect_uri"], "http://127.0.0.1:9/oauth/proxy/callback");
    assert_eq!(sent.form["resource"], "https://mcp.example.com/mcp");
    assert_eq!(
        URL_SAFE_NO_PAD.encode(Sha256::digest(sent.form["code_verifier"].as_bytes())),
        link["code_challenge"],
        "the verifier is the one the link's challenge was made from"
    );
    assert!(!sent.form.contains_key("client_secret"));

    assert_eq!((done.session.as_str(), done.server.as_str()), ("s-1", "github"));
    let grant = done.grant;
    assert!(grant.access_token.matches("new-access"));
    assert!(grant.refresh_token.as_ref().is_some_and(|r| r.matches("new-refresh")));
    assert_eq!(grant.rotates_refresh_tokens, None, "not known before a refresh");
    assert_eq!(grant.scope.as_deref(), Some("repo read:org"));
    assert_eq!(grant.resource, "https://mcp.example.com/mcp");
    let expires_at = grant.expires_at.expect("expires_in was given");
    let lifetime = (expires_at - before).num_seconds();
    assert!((3599..=3601).contains(&lifetime), "{lifetime}");
}

#[tokio::test]
async fn a_confidential_client_authenticates_with_basic_its_id_and_secret_form_encoded_first() {
    let (mock, base) = serve(tokens("new-access", None)).await;
    let client = ClientRegistration::pre_registered("muster app", Some(Secret::new("s3cr:t/+")));
    let refreshed = grant(&base, client)
        .refresh(&OAuthHttp::new())
        .await
        .expect("refreshed");

    let sent = mock.last();
    let expected = STANDARD.encode("muster+app:s3cr%3At%2F%2B");
    assert_eq!(sent.authorization, Some(format!("Basic {expected}")));
    assert!(!sent.form.contains_key("client_id") && !sent.form.contains_key("client_secret"));
    assert_eq!(sent.form["grant_type"], "refresh_token");
    assert_eq!(sent.form["refresh_token"], "old-refresh");
    assert_eq!(sent.form["resource"], "https://mcp.example.com/mcp");
    assert!(!sent.form.contains_key("scope"), "a refresh asks for the granted scope");

    assert!(refreshed.access_token.matches("new-access"));
    assert!(
        refreshed
            .refresh_token
            .as_ref()
            .is_some_and(|r| r.matches("old-refresh")),
        "a refresh answer without a refresh token keeps the old one"
    );
}

#[tokio::test]
async fn a_refresh_answer_without_scope_or_expiry_keeps_the_scope_and_expires_never() {
    let (_mock, base) = serve(Answer::json(
        200,
        json!({"access_token": "new-access", "token_type": "bearer", "refresh_token": "rotated"}),
    ))
    .await;
    let refreshed = grant(&base, ClientRegistration::pre_registered("muster", None))
        .refresh(&OAuthHttp::new())
        .await
        .expect("refreshed");
    assert_eq!(refreshed.scope.as_deref(), Some("repo"));
    assert_eq!(refreshed.expires_at, None);
    assert!(refreshed.refresh_token.as_ref().is_some_and(|r| r.matches("rotated")));
}

#[tokio::test]
async fn a_refresh_learns_whether_the_provider_rotates_the_refresh_token() {
    let (mock, base) = serve(tokens("new-access", None)).await;
    let http = OAuthHttp::new();
    let mut refreshed = grant(&base, ClientRegistration::pre_registered("muster", None));
    assert_eq!(refreshed.rotates_refresh_tokens, None, "not known before a refresh");
    for (answered, learnt, why) in [
        (None, Some(false), "no refresh token answered"),
        (Some("old-refresh"), Some(false), "the same refresh token answered"),
        (
            Some("rotated-refresh"),
            Some(true),
            "a different refresh token answered",
        ),
        (
            Some("rotated-refresh"),
            Some(true),
            "once seen rotating, a grant is taken to rotate",
        ),
    ] {
        mock.answer(tokens("new-access", answered));
        refreshed = refreshed.refresh(&http).await.expect("refreshed");
        assert_eq!(refreshed.rotates_refresh_tokens, learnt, "{why}");
    }
    assert!(
        refreshed
            .refresh_token
            .as_ref()
            .is_some_and(|r| r.matches("rotated-refresh"))
    );
}

#[tokio::test]
async fn a_refusal_is_the_servers_error_and_description_and_never_shows_the_token() {
    let (_mock, base) = serve(Answer::json(
        400,
        json!({"error": "invalid_grant", "error_description": "grant request is invalid"}),
    ))
    .await;
    let err = grant(&base, ClientRegistration::pre_registered("muster", None))
        .refresh(&OAuthHttp::new())
        .await
        .expect_err("refused");
    assert_eq!(err.oauth_error(), Some("invalid_grant"));
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: invalid_grant (grant request is invalid)"
    );
    assert!(!format!("{err} {err:?}").contains("old-refresh"));
}

#[tokio::test]
async fn a_refusal_without_an_oauth_body_is_named_by_its_status() {
    let (mock, base) = serve(Answer::json(200, json!({}))).await;
    mock.answer(Answer {
        status: 503,
        content_type: "text/html",
        location: None,
        body: "<h1>down for maintenance</h1>".into(),
    });
    let err = grant(&base, ClientRegistration::pre_registered("muster", None))
        .refresh(&OAuthHttp::new())
        .await
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: HTTP 503 Service Unavailable"
    );
}

#[tokio::test]
async fn a_redirect_from_the_token_endpoint_is_not_followed() {
    let (mock, base) = serve(Answer::json(200, json!({}))).await;
    mock.answer(Answer {
        status: 307,
        content_type: "text/plain",
        location: Some(format!("{base}/elsewhere")),
        body: String::new(),
    });
    let err = grant(&base, ClientRegistration::pre_registered("muster", None))
        .refresh(&OAuthHttp::new())
        .await
        .expect_err("not followed");
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: HTTP 307 Temporary Redirect"
    );
    let paths: Vec<String> = mock.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/token"], "the refresh token went nowhere else");
}

#[tokio::test]
async fn an_answer_larger_than_the_limit_is_refused() {
    let padding = "x".repeat(1024 * 1024);
    let (_mock, base) = serve(Answer::json(
        200,
        json!({"access_token": "a", "token_type": "Bearer", "padding": padding}),
    ))
    .await;
    let err = grant(&base, ClientRegistration::pre_registered("muster", None))
        .refresh(&OAuthHttp::new())
        .await
        .expect_err("too big");
    assert!(
        matches!(&err, AuthError::BadDocument { reason, .. } if reason == "larger than 1048576 bytes"),
        "{err}"
    );
}

#[tokio::test]
async fn a_success_that_is_no_token_response_is_refused_without_quoting_it() {
    let (mock, base) = serve(Answer::json(200, json!({"access_token": "leaked-token"}))).await;
    let http = OAuthHttp::new();
    let client = ClientRegistration::pre_registered("muster", None);
    let err = grant(&base, client.clone())
        .refresh(&http)
        .await
        .expect_err("no token_type");
    assert!(
        matches!(&err, AuthError::BadDocument { what: "the token endpoint", reason, .. } if reason.contains("token_type")),
        "{err}"
    );
    assert!(!format!("{err} {err:?}").contains("leaked-token"));

    mock.answer(Answer {
        status: 200,
        content_type: "application/x-www-form-urlencoded",
        location: None,
        body: "access_token=leaked-token&token_type=bearer".into(),
    });
    let err = grant(&base, client).refresh(&http).await.expect_err("not JSON");
    assert!(
        matches!(&err, AuthError::BadDocument { reason, .. } if reason.contains("Content-Type")),
        "{err}"
    );
    assert!(!format!("{err} {err:?}").contains("leaked-token"));
}

#[tokio::test]
async fn a_token_endpoint_that_is_not_a_url_is_named() {
    let mut grant = grant("https://as.example", ClientRegistration::pre_registered("muster", None));
    grant.token_endpoint = "not a url".into();
    let err = grant.refresh(&OAuthHttp::new()).await.expect_err("no URL");
    assert_eq!(
        err.to_string(),
        r#"the token endpoint "not a url" of https://as.example is not a URL: relative URL without a base"#
    );
}

#[tokio::test]
async fn revocation_sends_the_refresh_token_with_its_hint_as_the_client() {
    let (mock, base) = serve(Answer::json(200, json!({}))).await;
    let client = ClientRegistration::pre_registered("muster", Some(Secret::new("secret")));
    assert!(grant(&base, client).revoke(&OAuthHttp::new()).await.expect("revoked"));
    let sent = mock.last();
    assert_eq!(sent.path, "/revoke");
    assert_eq!(sent.form["token"], "old-refresh");
    assert_eq!(sent.form["token_type_hint"], "refresh_token");
    assert_eq!(
        sent.authorization,
        Some(format!("Basic {}", STANDARD.encode("muster:secret")))
    );

    let mut without_refresh = grant(&base, ClientRegistration::pre_registered("muster", None));
    without_refresh.refresh_token = None;
    assert!(without_refresh.revoke(&OAuthHttp::new()).await.expect("revoked"));
    let sent = mock.last();
    assert_eq!(sent.form["token"], "old-access");
    assert_eq!(sent.form["token_type_hint"], "access_token");
    assert_eq!(sent.form["client_id"], "muster");

    without_refresh.revocation_endpoint = None;
    assert!(!without_refresh.revoke(&OAuthHttp::new()).await.expect("nothing to do"));
}
