//! Single sign-on to downstream servers: each caller's own identity, validated by the gateway's
//! front door, reaches the servers that ask for it: forwarded as it is (`forwardToken`), or next
//! to a pinned grant (`forwardIdentity`). A real authorization server (oidc-provider on loopback)
//! issues the tokens; the downstream servers validate them.

mod common;

use common::{
    call_meta, envelope, fast_supervision, oidc::OidcProvider, remote, scripted::ScriptedServer, text, tool_names,
};
use muster::core::{
    config::{AggregatorConfig, McpClientConfig, MusterConfig, OAuthServerConfig},
    crd::{MCPServer, MCPServerAuth, MCPServerState},
};
use muster::gateway::{Gateway, GatewayOptions, registry::SessionReaping};
use rmcp::{RoleClient, ServiceExt, service::RunningService, transport::StreamableHttpClientTransport};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

/// A gateway on a loopback port, made once its base URL is known.
struct Served {
    base: String,
    gateway: Gateway,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    async fn start(listener: tokio::net::TcpListener, config: AggregatorConfig, servers: Vec<MCPServer>) -> Self {
        Self::start_reaping(listener, config, servers, SessionReaping::default()).await
    }

    async fn start_reaping(
        listener: tokio::net::TcpListener,
        config: AggregatorConfig,
        servers: Vec<MCPServer>,
        reaping: SessionReaping,
    ) -> Self {
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let options = GatewayOptions::default()
            .with_supervision(fast_supervision())
            .with_session_reaping(reaping);
        let gateway = Gateway::with_options(
            MusterConfig::default().with_aggregator(config),
            servers,
            Vec::new(),
            options,
        )
        .expect("valid configuration");
        gateway.start().await;
        let app = gateway.router();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base, gateway, task }
    }

    fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn state(&self, server: &str) -> Option<MCPServerState> {
        self.gateway.registry().server(server).map(|s| s.runtime.state)
    }

    async fn stop(self) {
        self.gateway.shutdown().await;
        self.task.abort();
    }
}

async fn listener() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    (listener, base)
}

async fn client(url: &str, bearer: Option<String>) -> Client {
    common::connect(url, &[], bearer).await
}

fn auth(value: Value) -> MCPServerAuth {
    serde_json::from_value(value).expect("an auth block")
}

async fn tools_of(client: &Client) -> Vec<String> {
    let page = call_meta(client, "list_tools", json!({"limit": 200})).await;
    tool_names(&serde_json::from_str(&text(&page)).unwrap_or(Value::Null))
}

/// Runs `name` through call_tool: (isError, the inner result's first text).
async fn run(client: &Client, name: &str) -> (bool, String) {
    let result = call_meta(client, "call_tool", json!({"name": name, "arguments": {}})).await;
    let env = envelope(&result);
    if env.is_null() {
        return (true, text(&result));
    }
    (
        env["isError"] == true,
        env["content"][0]["text"].as_str().unwrap_or_default().to_owned(),
    )
}

/// `k8s`, a downstream (tool `whoami`) that trusts `idp`'s tokens for the gateway at `mcp` (the
/// forwarded token's audience), and its definition with `auth.forwardToken`.
async fn forward_token_server(idp: &OidcProvider, mcp: &str) -> (ScriptedServer, MCPServer) {
    let k8s = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected_for(idp.issuer(), mcp)
        .await;
    let mut definition = remote("k8s", &k8s.url);
    definition.spec.auth = Some(auth(json!({"forwardToken": true})));
    (k8s, definition)
}

/// A gateway at `base` whose front door trusts `idp`'s tokens.
fn front_door(idp: &OidcProvider, base: &str) -> AggregatorConfig {
    AggregatorConfig::default().with_oauth_server(OAuthServerConfig::trusting(
        base.to_owned(),
        vec![idp.issuer().to_owned()],
    ))
}

#[tokio::test]
async fn a_forward_token_server_receives_exactly_the_callers_validated_token() {
    let idp = OidcProvider::start();
    let (listen, base) = listener().await;
    let mcp = format!("{base}/mcp");
    let (k8s, definition) = forward_token_server(&idp, &mcp).await;
    let gw = Served::start(listen, front_door(&idp, &base), vec![definition.clone()]).await;

    // The probe finds the endpoint answering (401): served per session, none connected yet.
    assert_eq!(gw.state("k8s"), Some(MCPServerState::AwaitingSession));

    let token = idp.token_for(&mcp, "dana").await;
    let dana = client(&mcp, Some(token.clone())).await;
    assert!(tools_of(&dana).await.contains(&"x_k8s_whoami".to_owned()));
    assert_eq!(gw.state("k8s"), Some(MCPServerState::Connected));
    let (failed, answer) = run(&dana, "x_k8s_whoami").await;
    assert!(!failed, "{answer}");
    let seen = k8s.headers_of("whoami");
    assert_eq!(
        seen.last().and_then(|h| h.get("authorization")),
        Some(&format!("Bearer {token}")),
        "the downstream got the caller's token as it is"
    );
    // A refreshed token of the same person is sent on the next call.
    let fresh = idp.token_for(&mcp, "dana").await;
    assert_ne!(fresh, token);
    let dana_again = client(&mcp, Some(fresh.clone())).await;
    let (failed, answer) = run(&dana_again, "x_k8s_whoami").await;
    assert!(!failed, "{answer}");
    assert_eq!(
        k8s.headers_of("whoami").last().and_then(|h| h.get("authorization")),
        Some(&format!("Bearer {fresh}"))
    );
    let events = call_meta(
        &dana,
        "call_tool",
        json!({"name": "core_events", "arguments": {"limit": 200}}),
    )
    .await;
    assert!(text(&events).contains("MCPServerTokenForwarded"), "{}", text(&events));
    for c in [dana, dana_again] {
        let _ = c.cancel().await;
    }
    gw.stop().await;

    // Without a front door there is no validated token: nothing is forwarded, the server's
    // tools never appear, and the downstream refuses a call without a token.
    let (listen, _) = listener().await;
    let open = Served::start(listen, AggregatorConfig::default(), vec![definition]).await;
    let calls_before = k8s.headers_of("whoami").len();
    let anonymous = client(&open.mcp(), None).await;
    assert!(!tools_of(&anonymous).await.iter().any(|t| t.starts_with("x_k8s_")));
    let (failed, _) = run(&anonymous, "x_k8s_whoami").await;
    assert!(failed);
    assert_eq!(
        k8s.headers_of("whoami").len(),
        calls_before,
        "no call reached the downstream"
    );
    let direct = ().serve(StreamableHttpClientTransport::from_uri(k8s.url.clone())).await;
    assert!(direct.is_err(), "the downstream refuses a caller without a token");
    let _ = anonymous.cancel().await;
    open.stop().await;
}

#[tokio::test]
async fn an_idle_sessions_connection_is_closed_and_its_next_request_connects_it_again() {
    let idp = OidcProvider::start();
    let (listen, base) = listener().await;
    let mcp = format!("{base}/mcp");
    let (k8s, definition) = forward_token_server(&idp, &mcp).await;
    let reaping = SessionReaping {
        interval: std::time::Duration::from_millis(100),
        idle: std::time::Duration::from_millis(600),
    };
    let gw = Served::start_reaping(listen, front_door(&idp, &base), vec![definition], reaping).await;
    let dana = client(&mcp, Some(idp.token_for(&mcp, "dana").await)).await;
    let (failed, answer) = run(&dana, "x_k8s_whoami").await;
    assert!(!failed, "{answer}");
    assert_eq!(gw.state("k8s"), Some(MCPServerState::Connected));

    // No request for longer than `idle`: the session's connection is closed, and the server
    // awaits a session again.
    let idle = common::eventually(10, || {
        let state = gw.state("k8s");
        async move { state == Some(MCPServerState::AwaitingSession) }
    })
    .await;
    assert!(idle, "the idle session's connection was closed: {:?}", gw.state("k8s"));
    let calls = k8s.headers_of("whoami").len();
    let (failed, answer) = run(&dana, "x_k8s_whoami").await;
    assert!(!failed, "{answer}");
    assert_eq!(gw.state("k8s"), Some(MCPServerState::Connected));
    assert_eq!(
        k8s.headers_of("whoami").len(),
        calls + 1,
        "the call reached the server again"
    );
    let _ = dana.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn a_forward_identity_server_receives_the_grant_and_the_callers_identity() {
    let idp = OidcProvider::start();
    let (listen, base) = listener().await;
    let mcp = format!("{base}/mcp");
    let github = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected(idp.issuer())
        .await;
    let mut definition = remote("github", &github.url);
    definition.spec.auth = Some(auth(json!({
        "type": "oauth",
        "forwardIdentity": true,
        "authorizationServer": {"issuer": idp.issuer()},
    })));
    let gw = Served::start(
        listen,
        front_door(&idp, &base).with_mcp_client(McpClientConfig::enabled_at(base.clone())),
        vec![definition],
    )
    .await;
    assert_eq!(gw.state("github"), Some(MCPServerState::AuthRequired));
    let token = idp.token_for(&mcp, "erin").await;
    let erin = client(&mcp, Some(token.clone())).await;
    let login = call_meta(
        &erin,
        "call_tool",
        json!({"name": "core_auth_login", "arguments": {"server": "github"}}),
    )
    .await;
    let login: Value =
        serde_json::from_str(envelope(&login)["content"][0]["text"].as_str().unwrap_or("null")).unwrap_or_default();
    let callback = idp.sign_in(login["authUrl"].as_str().expect("a link"), "erin").await;
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 200);

    let (failed, answer) = run(&erin, "x_github_whoami").await;
    assert!(!failed, "{answer}");
    let headers = github.headers_of("whoami").pop().expect("a call");
    let grant = headers.get("authorization").expect("the grant");
    assert!(
        grant.starts_with("Bearer ") && *grant != format!("Bearer {token}"),
        "the pinned grant, not the front-door token"
    );
    assert_eq!(headers.get("x-muster-id-token"), Some(&token), "the caller's identity");
    // A refreshed identity goes along on the next call.
    let fresh = idp.token_for(&mcp, "erin").await;
    let erin_again = client(&mcp, Some(fresh.clone())).await;
    let (failed, answer) = run(&erin_again, "x_github_whoami").await;
    assert!(!failed, "{answer}");
    let headers = github.headers_of("whoami").pop().expect("a call");
    assert_eq!(headers.get("x-muster-id-token"), Some(&fresh));
    for c in [erin, erin_again] {
        let _ = c.cancel().await;
    }
    gw.stop().await;
}

/// The exchange's authorization server: it accepts `subject_issuer`'s tokens through connector
/// `local` and issues its own to client `muster`.
fn exchange_env(subject_issuer: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OIDC_TOKEN_EXCHANGE", "1".to_owned()),
        ("OIDC_EXCHANGE_SUBJECT_ISSUER", subject_issuer.to_owned()),
        ("OIDC_EXCHANGE_CONNECTOR", "local".to_owned()),
        ("OIDC_STATIC_CLIENT_ID", "muster".to_owned()),
        ("OIDC_STATIC_CLIENT_SECRET", "s3cret".to_owned()),
        ("OIDC_STATIC_REDIRECT_URI", "http://127.0.0.1:9/callback".to_owned()),
    ]
}

fn start_exchange_server(port: u16, subject_issuer: &str) -> OidcProvider {
    let env = exchange_env(subject_issuer);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    OidcProvider::start_on(port, &env)
}

/// A server whose callers' tokens are exchanged at `endpoint` (connector `local`, client
/// credentials from Secret `exchange-client`) for tokens with audience `remote-k8s`.
fn exchanging(name: &str, url: &str, endpoint: &str, expected_issuer: Option<&str>) -> MCPServer {
    let mut server = remote(name, url);
    let mut exchange = json!({
        "enabled": true,
        "dexTokenEndpoint": endpoint,
        "connectorId": "local",
        "clientCredentialsSecretRef": {"name": "exchange-client"},
    });
    if let Some(issuer) = expected_issuer {
        exchange["expectedIssuer"] = json!(issuer);
    }
    server.spec.auth = Some(auth(
        json!({"tokenExchange": exchange, "requiredAudiences": ["remote-k8s"]}),
    ));
    server
}

/// A gateway whose front door trusts `front_issuer`, with the exchange client's Secret, and the
/// leeway `clock_skew` for expired tokens.
async fn exchange_gateway(front_issuer: &str, servers: Vec<MCPServer>, clock_skew: u64) -> Served {
    let secrets = muster::gateway::secrets::StaticSecrets::default()
        .with("exchange-client", "client-id", "muster")
        .with("exchange-client", "client-secret", "s3cret");
    exchange_gateway_with(front_issuer, servers, clock_skew, std::sync::Arc::new(secrets)).await
}

async fn exchange_gateway_with(
    front_issuer: &str,
    servers: Vec<MCPServer>,
    clock_skew: u64,
    secrets: std::sync::Arc<dyn muster::gateway::secrets::SecretSource>,
) -> Served {
    let (listen, base) = listener().await;
    let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_oauth_server(
        OAuthServerConfig::trusting(base.clone(), vec![front_issuer.to_owned()]).with_clock_skew_seconds(clock_skew),
    ));
    let options = GatewayOptions::default()
        .with_supervision(fast_supervision())
        .with_secrets(secrets);
    let gateway = Gateway::with_options(config, servers, Vec::new(), options).expect("valid configuration");
    gateway.start().await;
    let app = gateway.router();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listen, app).await;
    });
    Served { base, gateway, task }
}

/// The claims of a JWT, unverified.
fn claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap_or_default();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or_default()
}

#[tokio::test]
async fn twenty_concurrent_calls_of_a_session_cause_one_exchange_for_a_token_of_the_remote_issuer() {
    let front = OidcProvider::start();
    let remote_idp = start_exchange_server(0, front.issuer());
    let k8s = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected_for(remote_idp.issuer(), "remote-k8s")
        .await;
    let gw = exchange_gateway(
        front.issuer(),
        vec![exchanging("remote", &k8s.url, &remote_idp.token_endpoint(), None)],
        30,
    )
    .await;
    assert_eq!(gw.state("remote"), Some(MCPServerState::AwaitingSession));
    let ready = gw
        .gateway
        .registry()
        .server("remote")
        .map(|s| s.runtime.to_status(false).conditions[0].clone())
        .expect("status");
    assert_eq!(ready.reason, "AwaitingSession");
    assert!(
        ready.message.contains(&remote_idp.token_endpoint()) && ready.message.contains("connector \"local\""),
        "{}",
        ready.message
    );
    let token = front.token_for(&gw.mcp(), "dana").await;
    let dana = client(&gw.mcp(), Some(token.clone())).await;

    let calls = (0..20).map(|_| run(&dana, "x_remote_whoami"));
    for (failed, answer) in futures::future::join_all(calls).await {
        assert!(!failed, "{answer}");
    }
    assert_eq!(remote_idp.exchange_count(), 1, "one exchange for twenty calls");
    let sent = k8s.headers_of("whoami");
    assert_eq!(sent.len(), 20);
    let bearer = sent[0]["authorization"].strip_prefix("Bearer ").expect("a bearer");
    assert_ne!(bearer, token, "the exchanged token, not the caller's");
    let exchanged = claims(bearer);
    assert_eq!(exchanged["iss"], remote_idp.issuer());
    assert_eq!(exchanged["sub"], claims(&token)["sub"], "the same person");
    assert_eq!(gw.state("remote"), Some(MCPServerState::Connected));
    let events = call_meta(
        &dana,
        "call_tool",
        json!({"name": "core_events", "arguments": {"limit": 200}}),
    )
    .await;
    assert!(text(&events).contains("MCPServerTokenExchanged"), "{}", text(&events));
    let status = call_meta(&dana, "call_tool", json!({"name": "core_auth_status", "arguments": {}})).await;
    let status = text(&status);
    assert!(
        status.contains(r#"\"kind\":\"sso\""#) && status.contains("token_exchange_enabled"),
        "{status}"
    );
    let _ = dana.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn an_exchanged_token_of_another_issuer_is_refused_with_the_documented_message() {
    let front = OidcProvider::start();
    let remote_idp = start_exchange_server(0, front.issuer());
    let k8s = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected_for(remote_idp.issuer(), "remote-k8s")
        .await;
    let expected = "https://dex.remote.example.com";
    let gw = exchange_gateway(
        front.issuer(),
        vec![exchanging(
            "remote",
            &k8s.url,
            &remote_idp.token_endpoint(),
            Some(expected),
        )],
        30,
    )
    .await;
    let dana = client(&gw.mcp(), Some(front.token_for(&gw.mcp(), "dana").await)).await;
    let (failed, answer) = run(&dana, "x_remote_whoami").await;
    assert!(failed, "{answer}");
    let documented = format!(
        "issuer mismatch: expected \"{expected}\", got \"{}\"",
        remote_idp.issuer()
    );
    assert!(answer.contains(&documented), "{answer}");
    assert!(k8s.headers_of("whoami").is_empty(), "nothing reached the downstream");
    let _ = dana.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn an_expired_subject_token_fails_that_session_only() {
    // The front door gives tokens a minute of leeway; the exchange server gives none.
    let front = OidcProvider::start_with_env(&[("OIDC_ACCESS_TTL", "1")]);
    let remote_idp = start_exchange_server(0, front.issuer());
    let k8s = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected_for(remote_idp.issuer(), "remote-k8s")
        .await;
    let gw = exchange_gateway(
        front.issuer(),
        vec![exchanging("remote", &k8s.url, &remote_idp.token_endpoint(), None)],
        60,
    )
    .await;
    let stale = front.token_for(&gw.mcp(), "dana").await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let dana = client(&gw.mcp(), Some(stale)).await;
    let (failed, answer) = run(&dana, "x_remote_whoami").await;
    assert!(failed, "{answer}");
    assert!(answer.contains("invalid_grant"), "{answer}");
    assert_eq!(
        gw.state("remote"),
        Some(MCPServerState::AwaitingSession),
        "the server is not failed"
    );
    // Another session with a fresh token is served. Tokens live 1 s here: on a loaded machine a
    // fresh one can expire before its exchange, so a new one is minted for up to three tries
    // (were the server failed for everyone, every try would fail).
    let mut attempts = Vec::new();
    let mut erin = None;
    for _ in 0..3 {
        let session = client(&gw.mcp(), Some(front.token_for(&gw.mcp(), "erin").await)).await;
        let (failed, answer) = run(&session, "x_remote_whoami").await;
        if !failed {
            erin = Some(session);
            break;
        }
        assert!(answer.contains("subject token expired"), "{answer}");
        attempts.push(answer);
        let _ = session.cancel().await;
    }
    let erin = erin.unwrap_or_else(|| panic!("a session with a fresh token is served: {attempts:?}"));
    assert_eq!(gw.state("remote"), Some(MCPServerState::Connected));
    for c in [dana, erin] {
        let _ = c.cancel().await;
    }
    gw.stop().await;
}

#[tokio::test]
async fn an_unreachable_token_endpoint_fails_the_server_until_it_answers_again() {
    let front = OidcProvider::start();
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr").port()
    };
    let remote_issuer = format!("http://127.0.0.1:{port}");
    let k8s = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected_for(&remote_issuer, "remote-k8s")
        .await;
    let gw = exchange_gateway(
        front.issuer(),
        vec![exchanging("remote", &k8s.url, &format!("{remote_issuer}/token"), None)],
        30,
    )
    .await;
    let dana = client(&gw.mcp(), Some(front.token_for(&gw.mcp(), "dana").await)).await;
    let (failed, answer) = run(&dana, "x_remote_whoami").await;
    assert!(failed, "{answer}");
    assert!(answer.contains("token exchange failed: connection refused"), "{answer}");
    assert_eq!(gw.state("remote"), Some(MCPServerState::Failed));
    let status = gw
        .gateway
        .registry()
        .server("remote")
        .map(|s| s.runtime.to_status(false))
        .expect("status");
    assert_eq!(status.conditions[0].reason, "TokenExchangeEndpoint");

    // The endpoint comes up: the next attempt after the backoff exchanges and the server serves.
    let _remote_idp = start_exchange_server(port, front.issuer());
    let recovered = common::eventually(15, || async { !run(&dana, "x_remote_whoami").await.0 }).await;
    assert!(recovered, "the session is served once the endpoint answers");
    assert_eq!(gw.state("remote"), Some(MCPServerState::Connected));
    let _ = dana.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn a_missing_client_credentials_secret_fails_the_server_until_it_exists() {
    let front = OidcProvider::start();
    let remote_idp = start_exchange_server(0, front.issuer());
    let k8s = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected_for(remote_idp.issuer(), "remote-k8s")
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = exchange_gateway_with(
        front.issuer(),
        vec![exchanging("remote", &k8s.url, &remote_idp.token_endpoint(), None)],
        30,
        std::sync::Arc::new(muster::gateway::secrets::DirectorySecrets::new(dir.path())),
    )
    .await;
    let runtime = gw.gateway.registry().server("remote").expect("defined").runtime;
    assert_eq!(runtime.state, MCPServerState::Failed);
    assert!(
        runtime
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("exchange-client"),
        "{runtime:?}"
    );
    assert_eq!(
        runtime.to_status(false).conditions[0].reason,
        "TokenExchangeCredentials"
    );

    // The Secret appears: the server settles on its own and serves sessions.
    std::fs::write(
        dir.path().join("exchange-client.yaml"),
        "apiVersion: v1\nkind: Secret\nmetadata: {name: exchange-client}\nstringData: {client-id: muster, client-secret: s3cret}\n",
    )
    .expect("write the Secret");
    let settled = common::eventually(10, || async {
        gw.state("remote") == Some(MCPServerState::AwaitingSession)
    })
    .await;
    assert!(settled, "{:?}", gw.state("remote"));
    let dana = client(&gw.mcp(), Some(front.token_for(&gw.mcp(), "dana").await)).await;
    let (failed, answer) = run(&dana, "x_remote_whoami").await;
    assert!(!failed, "{answer}");
    let _ = dana.cancel().await;
    gw.stop().await;
}
