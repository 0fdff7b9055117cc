//! The gateway as an OAuth protected resource (`aggregator.oauth.server`): `/mcp` wants a bearer
//! JWT of a trusted issuer for this gateway, answers 401 with an RFC 9728 challenge otherwise,
//! and the caller's identity reaches the tools. Tokens come from a real authorization server
//! (oidc-provider on loopback).

mod common;

use common::{call_meta, envelope, oidc::OidcProvider};
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

#[tokio::test]
async fn only_bearers_of_a_trusted_issuer_for_this_gateway_reach_mcp() {
    let idp = OidcProvider::start();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let config = MusterConfig::default().with_aggregator(
        AggregatorConfig::default()
            .with_oauth_server(OAuthServerConfig::trusting(base.clone(), vec![idp.issuer().to_owned()])),
    );
    let gateway = Gateway::new(config, Vec::new(), Vec::new()).expect("valid configuration");
    gateway.start().await;
    let app = gateway.router();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let config = MusterConfig::default().with_aggregator(
        AggregatorConfig::default().with_oauth_server(OAuthServerConfig::trusting(base.clone(), Vec::new())),
    );
    let gateway = Gateway::new(config, Vec::new(), Vec::new()).expect("valid configuration");
    let app = gateway.router();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    assert_eq!(initialize(&format!("{base}/mcp"), None).await.0, 401);
    assert_eq!(initialize(&format!("{base}/mcp"), Some("anything")).await.0, 401);
    server.abort();
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
