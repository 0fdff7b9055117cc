use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Router, extract::State, http::HeaderMap, response::IntoResponse, routing::post};
use serde_json::{Value, json};

use super::{cache::fresh_within, *};

const SUBJECT: &str = "subject.token.of-the-caller";
const CLIENT_SECRET: &str = "client-secret-value";

/// What the mock token endpoint answers.
#[derive(Debug, Clone)]
enum Answer {
    /// A JWT of `iss`, with `expires_in` when given.
    Issue { iss: String, expires_in: Option<i64> },
    /// A token that is not a JWT.
    Opaque,
    /// `status` with `body` (JSON when it parses).
    Raw { status: u16, body: String },
}

/// One request the mock received.
#[derive(Debug, Clone)]
struct Received {
    form: HashMap<String, String>,
    authorization: Option<String>,
}

#[derive(Debug)]
struct Mock {
    requests: AtomicUsize,
    answer: Mutex<Answer>,
    delay: Mutex<Duration>,
    received: Mutex<Vec<Received>>,
}

/// A token endpoint on a loopback port: `(mock, token endpoint URL, issuer)`.
async fn serve(answer: Answer) -> (Arc<Mock>, String, String) {
    let mock = Arc::new(Mock {
        requests: AtomicUsize::new(0),
        answer: Mutex::new(answer),
        delay: Mutex::new(Duration::ZERO),
        received: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/token", post(token_endpoint))
        .with_state(Arc::clone(&mock));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let issuer = format!("http://{}", listener.local_addr().expect("local addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (mock, format!("{issuer}/token"), issuer)
}

async fn token_endpoint(State(mock): State<Arc<Mock>>, headers: HeaderMap, body: String) -> impl IntoResponse {
    mock.requests.fetch_add(1, Ordering::SeqCst);
    let form = url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    mock.received
        .lock()
        .expect("lock")
        .push(Received { form, authorization });
    let delay = *mock.delay.lock().expect("lock");
    tokio::time::sleep(delay).await;
    let answer = mock.answer.lock().expect("lock").clone();
    let (status, body) = match answer {
        Answer::Issue { iss, expires_in } => {
            let mut body = json!({
                "access_token": jwt(&json!({"iss": iss, "sub": "dana", "exp": chrono::Utc::now().timestamp() + 3600})),
                "issued_token_type": ID_TOKEN_TYPE,
                "token_type": "Bearer",
            });
            if let Some(seconds) = expires_in {
                body["expires_in"] = json!(seconds);
            }
            (200, body.to_string())
        }
        Answer::Opaque => (
            200,
            json!({"access_token": "opaque-issued-token", "token_type": "Bearer"}).to_string(),
        ),
        Answer::Raw { status, body } => (status, body),
    };
    let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
        "application/json"
    } else {
        "text/plain"
    };
    (
        axum::http::StatusCode::from_u16(status).expect("a status"),
        [("content-type", content_type)],
        body,
    )
}

fn jwt(payload: &Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "JWT"}).to_string());
    let payload = URL_SAFE_NO_PAD.encode(payload.to_string());
    format!("{header}.{payload}.c2lnbmF0dXJl")
}

fn issue(iss: &str, expires_in: i64) -> Answer {
    Answer::Issue {
        iss: iss.to_owned(),
        expires_in: Some(expires_in),
    }
}

fn oauth_error(status: u16, error: &str, description: Option<&str>) -> Answer {
    let mut body = json!({ "error": error });
    if let Some(description) = description {
        body["error_description"] = json!(description);
    }
    Answer::Raw {
        status,
        body: body.to_string(),
    }
}

fn subject() -> Secret {
    Secret::new(SUBJECT)
}

impl Mock {
    fn count(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    fn answer(&self, answer: Answer) {
        *self.answer.lock().expect("lock") = answer;
    }

    fn last(&self) -> Received {
        self.received.lock().expect("lock").last().cloned().expect("a request")
    }
}

async fn exchange_answered(answer: Answer) -> Result<ExchangedToken, ExchangeError> {
    let (_mock, endpoint, _issuer) = serve(answer).await;
    TokenExchange::new(endpoint, "remote-oidc")
        .exchange(&OAuthHttp::new(), &subject())
        .await
}

// --- the request and the issued token ---------------------------------------------------

#[tokio::test]
async fn the_request_carries_the_grant_the_subject_token_the_connector_and_audience_scopes() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    mock.answer(issue(&issuer, 600));
    let exchange = TokenExchange::new(&endpoint, "remote-oidc")
        .with_audiences(vec![
            "dex-k8s-authenticator".into(),
            "bad audience".into(),
            String::new(),
        ])
        .with_client_credentials("muster client", Secret::new(CLIENT_SECRET));
    exchange
        .exchange(&OAuthHttp::new(), &subject())
        .await
        .expect("exchanged");

    let received = mock.last();
    let field = |name: &str| received.form.get(name).map(String::as_str);
    assert_eq!(field("grant_type"), Some(TOKEN_EXCHANGE_GRANT));
    assert_eq!(field("subject_token"), Some(SUBJECT));
    assert_eq!(field("subject_token_type"), Some(ID_TOKEN_TYPE));
    assert_eq!(field("requested_token_type"), Some(ID_TOKEN_TYPE));
    assert_eq!(field("connector_id"), Some("remote-oidc"));
    assert_eq!(
        field("scope"),
        Some("openid profile email groups audience:server:client_id:dex-k8s-authenticator")
    );
    assert_eq!(field("client_id"), None, "the client authenticates with Basic only");
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("muster+client:{CLIENT_SECRET}"))
    );
    assert_eq!(received.authorization.as_deref(), Some(basic.as_str()));
}

#[tokio::test]
async fn without_client_credentials_no_client_is_sent_and_the_subject_token_type_is_configurable() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    mock.answer(issue(&issuer, 600));
    TokenExchange::new(&endpoint, "remote-oidc")
        .with_scopes("openid groups")
        .with_subject_token_type(ACCESS_TOKEN_TYPE)
        .exchange(&OAuthHttp::new(), &subject())
        .await
        .expect("exchanged");
    let received = mock.last();
    assert_eq!(received.authorization, None);
    assert_eq!(received.form.get("client_id"), None);
    assert_eq!(received.form["subject_token_type"], ACCESS_TOKEN_TYPE);
    assert_eq!(received.form["scope"], "openid groups");
}

#[tokio::test]
async fn the_issued_token_of_the_expected_issuer_is_returned_with_its_expiry() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    mock.answer(issue(&issuer, 600));
    let before = chrono::Utc::now();
    let token = TokenExchange::new(&endpoint, "remote-oidc")
        .exchange(&OAuthHttp::new(), &subject())
        .await
        .expect("exchanged");
    assert_eq!(token.issuer, issuer);
    assert!(token.token.expose().starts_with("eyJ"));
    let expires_at = token.expires_at.expect("an expiry");
    assert!(
        expires_at >= before + TimeDelta::seconds(600) && expires_at <= chrono::Utc::now() + TimeDelta::seconds(600)
    );
}

#[tokio::test]
async fn without_expires_in_the_expiry_is_the_tokens_exp() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    mock.answer(Answer::Issue {
        iss: issuer,
        expires_in: None,
    });
    let token = TokenExchange::new(&endpoint, "remote-oidc")
        .exchange(&OAuthHttp::new(), &subject())
        .await
        .expect("exchanged");
    let in_an_hour = chrono::Utc::now() + TimeDelta::seconds(3600);
    assert!((token.expires_at.expect("from exp") - in_an_hour).num_seconds().abs() <= 2);
}

#[test]
fn the_expected_issuer_is_the_configured_one_else_the_endpoint_without_token() {
    let derived = TokenExchange::new("https://dex.remote.example.com/token", "c");
    assert_eq!(derived.expected_issuer(), "https://dex.remote.example.com");
    let proxied = derived.with_expected_issuer("https://dex.internal.example.com");
    assert_eq!(proxied.expected_issuer(), "https://dex.internal.example.com");
    let odd = TokenExchange::new("https://dex.example.com/oauth2/exchange", "c");
    assert_eq!(odd.expected_issuer(), "https://dex.example.com/oauth2/exchange");
}

#[tokio::test]
async fn a_token_of_another_issuer_is_refused_with_the_documented_message() {
    let (mock, endpoint, issuer) = serve(issue("https://dex.internal.example.com", 600)).await;
    let error = TokenExchange::new(&endpoint, "remote-oidc")
        .exchange(&OAuthHttp::new(), &subject())
        .await
        .expect_err("another issuer");
    assert_eq!(
        error.to_string(),
        format!("issuer mismatch: expected \"{issuer}\", got \"https://dex.internal.example.com\"")
    );
    assert!(error.is_shared());
    assert_eq!(error.ready_reason(), None);

    // The proxied case the message points to: the expected issuer set explicitly.
    let fixed = TokenExchange::new(&endpoint, "remote-oidc")
        .with_expected_issuer("https://dex.internal.example.com")
        .exchange(&OAuthHttp::new(), &subject())
        .await
        .expect("the configured issuer");
    assert_eq!(fixed.issuer, "https://dex.internal.example.com");
    assert_eq!(mock.count(), 2);
}

#[tokio::test]
async fn a_token_without_iss_is_an_issuer_mismatch() {
    let (_mock, endpoint, issuer) = serve(issue("", 600)).await;
    let error = TokenExchange::new(&endpoint, "c")
        .exchange(&OAuthHttp::new(), &subject())
        .await
        .expect_err("no issuer");
    assert_eq!(
        error,
        ExchangeError::IssuerMismatch {
            expected: issuer,
            got: String::new()
        }
    );
}

#[tokio::test]
async fn an_issued_token_that_is_not_a_jwt_is_an_endpoint_failure() {
    let error = exchange_answered(Answer::Opaque).await.expect_err("opaque");
    assert!(
        matches!(&error, ExchangeError::Endpoint(m) if m.ends_with("issued a token that is not a JWT")),
        "{error}"
    );
    assert!(!error.to_string().contains("opaque-issued-token"));
}

// --- classification ----------------------------------------------------------------------

#[tokio::test]
async fn invalid_grant_is_the_callers_own_failure() {
    let error = exchange_answered(oauth_error(400, "invalid_grant", Some("subject token expired")))
        .await
        .expect_err("refused");
    assert_eq!(
        error,
        ExchangeError::Caller {
            error: "invalid_grant".into(),
            description: Some("subject token expired".into())
        }
    );
    assert_eq!(
        error.to_string(),
        "token exchange failed: invalid_grant (subject token expired)"
    );
    assert!(!error.is_shared());
    assert_eq!(error.ready_reason(), None);
}

#[tokio::test]
async fn a_rejected_scope_or_audience_is_the_callers_own_failure() {
    for (error, description) in [
        ("invalid_scope", "audience:server:client_id:k8s is not allowed"),
        ("invalid_target", "audience rejected"),
        ("invalid_request", "subject_token_type is not supported"),
        ("access_denied", "not a member"),
    ] {
        let status = if error == "access_denied" { 403 } else { 400 };
        let got = exchange_answered(oauth_error(status, error, Some(description)))
            .await
            .expect_err("refused");
        assert!(
            matches!(&got, ExchangeError::Caller { error: e, .. } if e == error),
            "{error}: {got:?}"
        );
    }
}

#[tokio::test]
async fn invalid_client_and_any_401_are_credentials_failures() {
    let error = exchange_answered(oauth_error(401, "invalid_client", Some("client authentication failed")))
        .await
        .expect_err("refused");
    assert_eq!(
        error.to_string(),
        "token exchange failed: 401 Unauthorized: invalid_client (client authentication failed)"
    );
    assert_eq!(error.ready_reason(), Some("TokenExchangeCredentials"));
    assert!(error.is_shared());

    let bare = exchange_answered(Answer::Raw {
        status: 401,
        body: "Unauthorized".into(),
    })
    .await
    .expect_err("refused");
    assert_eq!(bare, ExchangeError::Credentials("401 Unauthorized".into()));
    assert_eq!(bare.to_string(), "token exchange failed: 401 Unauthorized");

    // Dex's answer when its connector refuses the subject token: the remote Dex does not trust
    // the local one (the troubleshooting table's 401).
    let dex = exchange_answered(oauth_error(401, "access_denied", None))
        .await
        .expect_err("refused");
    assert!(matches!(dex, ExchangeError::Credentials(_)), "{dex:?}");

    let unauthorized = exchange_answered(oauth_error(400, "unauthorized_client", None))
        .await
        .expect_err("refused");
    assert!(
        matches!(unauthorized, ExchangeError::Credentials(_)),
        "{unauthorized:?}"
    );
}

#[tokio::test]
async fn an_unknown_connector_is_a_connector_failure() {
    let error = exchange_answered(oauth_error(
        400,
        "invalid_request",
        Some("Requested connector does not exist."),
    ))
    .await
    .expect_err("refused");
    assert_eq!(
        error.to_string(),
        "token exchange failed: connector \"remote-oidc\" refused: invalid_request (Requested connector does not exist.)"
    );
    assert_eq!(error.ready_reason(), Some("TokenExchangeConnector"));
    assert!(error.is_shared());
}

#[tokio::test]
async fn server_errors_unknown_paths_and_non_oauth_answers_are_endpoint_failures() {
    for (answer, expected) in [
        (
            oauth_error(500, "server_error", Some("oops")),
            "500 Internal Server Error from ",
        ),
        (
            Answer::Raw {
                status: 502,
                body: "<html>bad gateway</html>".into(),
            },
            "502 Bad Gateway from ",
        ),
        (
            oauth_error(404, "invalid_request", Some("unrecognized route")),
            "404 Not Found from ",
        ),
        (
            Answer::Raw {
                status: 400,
                body: "no".into(),
            },
            "400 Bad Request from ",
        ),
        (
            Answer::Raw {
                status: 200,
                body: "<html>a login page</html>".into(),
            },
            "without a token response",
        ),
        (
            oauth_error(400, "unsupported_grant_type", None),
            "does not support token exchange",
        ),
    ] {
        let error = exchange_answered(answer.clone()).await.expect_err("refused");
        assert!(
            matches!(&error, ExchangeError::Endpoint(m) if m.contains(expected)),
            "{answer:?}: {error:?}"
        );
        assert_eq!(error.ready_reason(), Some("TokenExchangeEndpoint"));
        assert!(error.is_shared());
    }
}

#[tokio::test]
async fn a_closed_port_is_an_endpoint_failure() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let error = TokenExchange::new(format!("http://127.0.0.1:{port}/token"), "c")
        .exchange(&OAuthHttp::new(), &subject())
        .await
        .expect_err("nobody listens");
    assert!(
        error
            .to_string()
            .starts_with("token exchange failed: connection refused"),
        "{error}"
    );
    assert_eq!(error.ready_reason(), Some("TokenExchangeEndpoint"));
}

#[tokio::test]
async fn errors_never_show_the_subject_token_or_the_client_secret() {
    for answer in [
        oauth_error(400, "invalid_grant", None),
        oauth_error(401, "invalid_client", None),
        oauth_error(400, "invalid_request", Some("Requested connector does not exist.")),
        oauth_error(503, "temporarily_unavailable", None),
        issue("https://elsewhere", 60),
        Answer::Opaque,
    ] {
        let (_mock, endpoint, _issuer) = serve(answer).await;
        let exchange = TokenExchange::new(endpoint, "c").with_client_credentials("id", Secret::new(CLIENT_SECRET));
        let error = exchange
            .exchange(&OAuthHttp::new(), &subject())
            .await
            .expect_err("fails");
        for shown in [error.to_string(), format!("{error:?}"), format!("{exchange:?}")] {
            assert!(!shown.contains(SUBJECT) && !shown.contains(CLIENT_SECRET), "{shown}");
        }
    }
}

#[test]
fn a_long_description_is_cut_to_one_bounded_line() {
    let error = classify(
        reqwest::StatusCode::BAD_REQUEST,
        json!({"error": "invalid_grant", "error_description": format!("a\nb{}", "x".repeat(1000))})
            .to_string()
            .as_bytes(),
        "http://e/token",
        "c",
    );
    let ExchangeError::Caller {
        description: Some(description),
        ..
    } = error
    else {
        panic!("a caller's failure: {error:?}")
    };
    assert!(description.starts_with("a b") && description.ends_with("..."));
    assert_eq!(description.chars().count(), MAX_DESCRIPTION + 3);
}

// --- the cache ---------------------------------------------------------------------------

#[test]
fn a_token_stays_fresh_until_the_margin_before_expiry_or_half_its_lifetime() {
    assert_eq!(fresh_within(Duration::from_secs(3600)), Some(Duration::from_secs(3540)));
    assert_eq!(fresh_within(Duration::from_secs(120)), Some(Duration::from_secs(60)));
    assert_eq!(fresh_within(Duration::from_secs(60)), Some(Duration::from_secs(30)));
    assert_eq!(fresh_within(Duration::ZERO), None);
}

#[tokio::test]
async fn twenty_concurrent_calls_share_one_exchange() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    mock.answer(issue(&issuer, 600));
    *mock.delay.lock().expect("lock") = Duration::from_millis(200);
    let exchange = TokenExchange::new(&endpoint, "c");
    let (cache, http, bearer) = (ExchangeCache::default(), OAuthHttp::new(), subject());
    let calls = (0..20).map(|_| cache.token("s\0server", &exchange, &http, &bearer));
    let tokens = futures::future::join_all(calls).await;
    assert_eq!(mock.count(), 1);
    let first = tokens[0].as_ref().expect("exchanged");
    assert!(tokens.iter().all(|t| t.as_ref().expect("exchanged") == first));

    // Another key is another exchange.
    cache
        .token("t\0server", &exchange, &http, &bearer)
        .await
        .expect("exchanged");
    assert_eq!(mock.count(), 2);
}

#[tokio::test]
async fn concurrent_callers_share_one_exchange_even_of_a_token_without_expiry() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    *mock.delay.lock().expect("lock") = Duration::from_millis(200);
    // Neither expires_in nor exp.
    let token = jwt(&json!({"iss": issuer, "sub": "dana"}));
    mock.answer(Answer::Raw {
        status: 200,
        body: json!({"access_token": token}).to_string(),
    });
    let exchange = TokenExchange::new(&endpoint, "c");
    let (cache, http, bearer) = (ExchangeCache::default(), OAuthHttp::new(), subject());
    let calls = (0..20).map(|_| cache.token("k", &exchange, &http, &bearer));
    let tokens = futures::future::join_all(calls).await;
    assert!(tokens.iter().all(|t| t.as_ref().is_ok_and(|t| t.expires_at.is_none())));
    assert_eq!(mock.count(), 1);
    // Not kept: the next call exchanges again.
    cache.token("k", &exchange, &http, &bearer).await.expect("exchanged");
    assert_eq!(mock.count(), 2);
}

#[tokio::test]
async fn a_token_is_reused_until_near_expiry_then_exchanged_again() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    // Two seconds of lifetime: fresh for one (half of it).
    mock.answer(issue(&issuer, 2));
    let exchange = TokenExchange::new(&endpoint, "c");
    let (cache, http, bearer) = (ExchangeCache::default(), OAuthHttp::new(), subject());
    let first = cache.token("k", &exchange, &http, &bearer).await.expect("exchanged");
    let again = cache.token("k", &exchange, &http, &bearer).await.expect("cached");
    assert_eq!(first, again);
    assert_eq!(mock.count(), 1);

    tokio::time::sleep(Duration::from_millis(1100)).await;
    cache.token("k", &exchange, &http, &bearer).await.expect("exchanged");
    assert_eq!(mock.count(), 2);
}

#[tokio::test]
async fn a_new_subject_token_or_a_changed_exchange_is_exchanged_anew() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    mock.answer(issue(&issuer, 600));
    let exchange = TokenExchange::new(&endpoint, "c");
    let (cache, http) = (ExchangeCache::default(), OAuthHttp::new());
    cache.token("k", &exchange, &http, &subject()).await.expect("exchanged");
    cache.token("k", &exchange, &http, &subject()).await.expect("cached");
    assert_eq!(mock.count(), 1);

    let refreshed = Secret::new("a.refreshed.bearer");
    cache.token("k", &exchange, &http, &refreshed).await.expect("exchanged");
    assert_eq!(mock.count(), 2);
    assert_eq!(mock.last().form["subject_token"], "a.refreshed.bearer");

    let with_audience = exchange.clone().with_audiences(vec!["k8s".into()]);
    cache
        .token("k", &with_audience, &http, &refreshed)
        .await
        .expect("exchanged");
    assert_eq!(mock.count(), 3);

    cache.forget("k");
    cache
        .token("k", &with_audience, &http, &refreshed)
        .await
        .expect("exchanged");
    assert_eq!(mock.count(), 4);
}

#[tokio::test]
async fn a_failure_is_answered_from_memory_during_its_backoff() {
    let (mock, endpoint, issuer) = serve(oauth_error(503, "temporarily_unavailable", None)).await;
    let exchange = TokenExchange::new(&endpoint, "c");
    let (cache, http, bearer) = (ExchangeCache::default(), OAuthHttp::new(), subject());

    // Concurrent callers share the one failed exchange, and the next caller gets it from memory.
    let calls = (0..5).map(|_| cache.token("k", &exchange, &http, &bearer));
    let failed = futures::future::join_all(calls).await;
    assert!(failed.iter().all(|r| matches!(r, Err(ExchangeError::Endpoint(_)))));
    let remembered = cache
        .token("k", &exchange, &http, &bearer)
        .await
        .expect_err("remembered");
    assert!(matches!(remembered, ExchangeError::Endpoint(_)));
    assert_eq!(mock.count(), 1);

    // After a second the endpoint is asked again; the next wait is two seconds.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cache
        .token("k", &exchange, &http, &bearer)
        .await
        .expect_err("still down");
    assert_eq!(mock.count(), 2);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cache
        .token("k", &exchange, &http, &bearer)
        .await
        .expect_err("remembered");
    assert_eq!(mock.count(), 2);

    // A new subject token is not held back by the other one's failure.
    mock.answer(issue(&issuer, 600));
    cache
        .token("k", &exchange, &http, &Secret::new("another.bearer"))
        .await
        .expect("exchanged");
    assert_eq!(mock.count(), 3);
}

#[tokio::test]
async fn forget_prefix_drops_the_keys_of_an_ended_session() {
    let (mock, endpoint, issuer) = serve(issue("", 600)).await;
    mock.answer(issue(&issuer, 600));
    let exchange = TokenExchange::new(&endpoint, "c");
    let (cache, http, bearer) = (ExchangeCache::default(), OAuthHttp::new(), subject());
    for key in ["s1\0a", "s1\0b", "s2\0a"] {
        cache.token(key, &exchange, &http, &bearer).await.expect("exchanged");
    }
    assert_eq!(mock.count(), 3);
    cache.forget_prefix("s1\0");
    assert_eq!(format!("{cache:?}"), "ExchangeCache { keys: 1, .. }");
    cache.token("s2\0a", &exchange, &http, &bearer).await.expect("cached");
    assert_eq!(mock.count(), 3);
    cache
        .token("s1\0a", &exchange, &http, &bearer)
        .await
        .expect("exchanged");
    assert_eq!(mock.count(), 4);
}
