//! People sign in to a protected downstream server through the gateway: a real authorization
//! server (oidc-provider on loopback), a downstream MCP server that trusts only its tokens, the
//! gateway's `core_auth_login` link, `/oauth/proxy/start`, the provider's login and consent
//! pages, the gateway's callback. The server's tools then belong to that session alone.

mod common;

use common::{
    call_meta,
    oidc::OidcProvider,
    signin::{SignInGateway, UrlElicitingClient, client, core, tools_of},
    text,
};
use muster::core::config::{AggregatorConfig, McpClientConfig};
use rmcp::{ServiceExt, transport::StreamableHttpClientTransport};
use serde_json::{Value, json};

/// Collects everything the gateway logs (this test runs on one thread, so a thread-default
/// subscriber sees every task).
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_session_signs_in_and_alone_sees_and_calls_the_servers_tools_until_it_signs_out() {
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);

    // Access tokens live 5 s: every call finds its token due for a refresh (a minute's margin).
    let idp = OidcProvider::start_with_env(&[("OIDC_ACCESS_TTL", "5")]);
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base))
    })
    .await;
    let base = gw.base.clone();
    let mcp = format!("{base}/mcp");
    let alice = client(&mcp).await;
    let bob = client(&mcp).await;

    // The server wants a sign-in: no tools for anyone, and the status says so.
    let (_, service) = core(&alice, "core_service_status", json!({"name": "protected"})).await;
    assert_eq!(service["state"], "auth_required", "{service}");
    let (_, status) = core(&alice, "core_auth_status", json!({})).await;
    assert_eq!(status["servers"][0]["name"], "protected", "{status}");
    assert_eq!(status["servers"][0]["status"], "auth_required");
    assert!(!tools_of(&alice).await.iter().any(|t| t.starts_with("x_protected_")));
    let page = call_meta(&alice, "list_tools", json!({})).await;
    let page: Value = serde_json::from_str(&text(&page)).unwrap_or(Value::Null);
    assert_eq!(
        page["servers_requiring_auth"],
        json!([{"name": "protected", "status": "auth_required", "auth_tool": "core_auth_login", "tool_prefix": "protected"}])
    );
    let narrowed = call_meta(&alice, "filter_tools", json!({"pattern": "x_other_*"})).await;
    let narrowed: Value = serde_json::from_str(&text(&narrowed)).unwrap_or(Value::Null);
    assert!(narrowed.get("servers_requiring_auth").is_none(), "{narrowed}");

    // Alice asks for a link and signs in through it.
    let (failed, login) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "{login}");
    let link = login["authUrl"].as_str().expect("a link").to_owned();
    let (_, again) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert_eq!(again["authUrl"], login["authUrl"], "the same link while it is valid");
    assert!(link.starts_with(&format!("{base}/oauth/proxy/start?state=")), "{link}");
    let callback = idp.sign_in(&link, "alice").await;
    assert!(
        callback.as_str().starts_with(&format!("{base}/oauth/proxy/callback?")),
        "{callback}"
    );
    let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
    let status = page.status();
    let body = page.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Signed in to protected"), "{body}");
    // The link was for one use.
    let again = reqwest::get(callback.as_str()).await.expect("answers");
    assert_eq!(again.status(), 400);

    // Alice sees and calls the tool; Bob does not.
    assert!(tools_of(&alice).await.contains(&"x_protected_whoami".to_owned()));
    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed, "{answer}");
    assert_eq!(answer, json!("you are in"));
    assert!(!tools_of(&bob).await.iter().any(|t| t.starts_with("x_protected_")));
    // Bob's call is answered with a sign-in link of his own.
    let refused = call_meta(
        &bob,
        "call_tool",
        json!({"name": "x_protected_whoami", "arguments": {}}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    let hint = refused.structured_content.clone().unwrap_or_default();
    assert_eq!(
        (hint["status"].as_str(), hint["server"].as_str()),
        (Some("auth_required"), Some("protected"))
    );
    let bobs_link = hint["authUrl"].as_str().unwrap_or_default();
    assert!(
        bobs_link.starts_with(&format!("{base}/oauth/proxy/start?state=")) && bobs_link != link,
        "{hint}"
    );
    assert!(text(&refused).contains(bobs_link));
    let (_, status) = core(&alice, "core_auth_status", json!({})).await;
    assert_eq!(status["servers"][0]["status"], "connected");
    assert_eq!(status["servers"][0]["issuer"], idp.issuer());
    let first_expiry = status["servers"][0]["expires_at"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // A call with a token near its expiry refreshes it first (and reconnects with the new one).
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed, "{answer}");
    let (_, status) = core(&alice, "core_auth_status", json!({})).await;
    let second_expiry = status["servers"][0]["expires_at"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(second_expiry > first_expiry, "{first_expiry} -> {second_expiry}");

    // No token or code reached a log line or an event.
    let code = callback
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .expect("the callback carried a code");
    let (_, events) = core(&alice, "core_events", json!({"limit": 500})).await;
    let events = events.to_string();
    let logged = String::from_utf8_lossy(&logs.0.lock().expect("lock")).into_owned();
    assert!(
        logged.len() > 10_000,
        "the gateway's logs were captured ({} bytes)",
        logged.len()
    );
    for (what, text) in [("the logs", &logged), ("the events", &events)] {
        assert!(!text.contains(&code), "the authorization code is in {what}");
        // Every JWT starts with the base64 of `{"`.
        assert!(!text.contains("eyJ"), "a JWT is in {what}");
    }

    // Signing out revokes the grant at the provider and takes the tools away.
    let (failed, out) = core(&alice, "core_auth_logout", json!({"server": "protected"})).await;
    assert!(!failed, "{out}");
    assert_eq!(out["revoked"], true);
    assert!(!tools_of(&alice).await.iter().any(|t| t.starts_with("x_protected_")));

    let _ = alice.cancel().await;
    let _ = bob.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn sign_in_answers_clearly_when_it_is_not_configured() {
    let h = common::Harness::start(vec![common::demo_stdio("demo")]).await;
    let (failed, answer) = core(&h.client, "core_auth_login", json!({"server": "demo"})).await;
    assert!(failed);
    assert!(answer.to_string().contains("OAuth is not configured"), "{answer}");
    h.stop().await;
}

#[tokio::test]
async fn new_links_are_limited_to_ten_a_minute_per_person_and_redirects_must_be_allowed() {
    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default().with_mcp_client(
            McpClientConfig::enabled_at(base).allowing_redirects(vec!["http://127.0.0.1:9/done".to_owned()]),
        )
    })
    .await;
    let base = gw.base.clone();
    let carol = client(&format!("{base}/mcp")).await;
    let mut links = std::collections::BTreeSet::new();
    for _ in 0..10 {
        // reset_client_registration registers anew and always issues a new link.
        let (failed, login) = core(
            &carol,
            "core_auth_login",
            json!({"server": "protected", "reset_client_registration": true}),
        )
        .await;
        assert!(!failed, "{login}");
        links.insert(login["authUrl"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(links.len(), 10);
    let (failed, refused) = core(
        &carol,
        "core_auth_login",
        json!({"server": "protected", "reset_client_registration": true}),
    )
    .await;
    assert!(failed);
    assert!(refused.to_string().contains("Rate limit exceeded"), "{refused}");

    // After a sign-in the browser may be sent on, but only where the allowlist says.
    let link = links.iter().next().cloned().unwrap_or_default();
    let no_follow = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let foreign = no_follow
        .get(format!("{link}&redirect=https%3A%2F%2Fevil.example%2Fdone"))
        .send()
        .await
        .expect("answers");
    assert_eq!(foreign.status(), 400);
    let callback = idp
        .sign_in(
            &format!("{link}&redirect=http%3A%2F%2F127.0.0.1%3A9%2Fdone%2Fhere"),
            "carol",
        )
        .await;
    let done = no_follow.get(callback.as_str()).send().await.expect("answers");
    assert!(done.status().is_redirection(), "{}", done.status());
    assert_eq!(
        done.headers().get("location").and_then(|v| v.to_str().ok()),
        Some("http://127.0.0.1:9/done/here")
    );
    let _ = carol.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn a_client_that_declared_url_elicitation_is_asked_to_open_the_link_and_told_when_it_completed() {
    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base))
    })
    .await;
    let base = gw.base.clone();
    let handler = UrlElicitingClient::default();
    let client = handler
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(format!("{base}/mcp")))
        .await
        .expect("connects");
    let call = || {
        let mut args = serde_json::Map::new();
        args.insert("name".into(), json!("x_protected_whoami"));
        args.insert("arguments".into(), json!({}));
        client.call_tool(rmcp::model::CallToolRequestParams::new("call_tool").with_arguments(args))
    };

    // The call is answered with URLElicitationRequiredError, the link in its data.
    let error = match call().await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    assert_eq!(error.code.0, -32042);
    let elicitation = error
        .data
        .as_ref()
        .map(|d| d["elicitations"][0].clone())
        .unwrap_or_default();
    assert_eq!(elicitation["mode"], "url");
    let url = elicitation["url"].as_str().unwrap_or_default().to_owned();
    let id = elicitation["elicitationId"].as_str().unwrap_or_default().to_owned();
    assert!(
        url.starts_with(&format!("{base}/oauth/proxy/start?state=")) && !id.is_empty(),
        "{elicitation}"
    );
    // A retry before the sign-in gets the same elicitation.
    match call().await {
        Err(rmcp::ServiceError::McpError(again)) => {
            assert_eq!(
                again.data.map(|d| d["elicitations"][0]["elicitationId"].clone()),
                Some(json!(id))
            );
        }
        other => panic!("expected -32042 again, got {other:?}"),
    }

    // The person opens the link; the client is told the elicitation completed; the retry runs.
    let callback = idp.sign_in(&url, "erin").await;
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 200);
    assert!(
        handler.told_complete(&id).await,
        "no notifications/elicitation/complete for {id}"
    );
    let result = call().await.expect("the retry runs");
    assert!(text(&result).contains("you are in"), "{}", text(&result));

    let _ = client.cancel().await;
    gw.stop().await;
}
