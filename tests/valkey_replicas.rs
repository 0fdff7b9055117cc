//! Two gateways sharing their sign-in state in one real `redis-server`
//! (`aggregator.oauth.server.storage.type: valkey`), as two replicas behind a load balancer: a
//! sign-in started on one is completed through the other's callback, and the session on the first
//! then calls the protected tool with the grant the second kept; a client that declared URL
//! elicitation is told by the first that the sign-in completed (a notice through Valkey's
//! pub/sub).
//!
//! Needs the `redis-server` binary (Debian package `redis-server`) and the oidc-provider of
//! `npm ci`; skipped without redis-server, failed under `CI=true`.

mod common;

use common::{
    oidc::OidcProvider,
    signin::{SignInGateway, UrlElicitingClient, client, core, tools_of},
    text,
    valkey::{ValkeyServer, write_state_key},
};
use muster::core::config::{AggregatorConfig, McpClientConfig, OAuthServerConfig, StorageConfig, ValkeyConfig};
use rmcp::{ServiceExt, transport::StreamableHttpClientTransport};
use serde_json::json;

/// A replica's configuration: sign-in at `base`, the state in `valkey` sealed with `key_file`.
fn replica(base: String, valkey: &ValkeyServer, key_file: &std::path::Path) -> AggregatorConfig {
    let storage = StorageConfig::valkey(ValkeyConfig::at(valkey.url()).with_key_prefix("replicas-test:"));
    AggregatorConfig::default()
        .with_mcp_client(McpClientConfig::enabled_at(base))
        .with_oauth_server(
            OAuthServerConfig::default()
                .with_storage(storage)
                .with_encryption_key_file(key_file.display().to_string()),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_started_on_one_replica_completes_through_another_and_the_first_session_calls_the_tool() {
    let Some(valkey) = ValkeyServer::start() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key_file = write_state_key(dir.path());
    let idp = OidcProvider::start();
    let one = SignInGateway::start(&idp, |base| replica(base, &valkey, &key_file)).await;
    let two = one.replica(|base| replica(base, &valkey, &key_file)).await;

    let alice = client(&format!("{}/mcp", one.base)).await;
    assert!(!tools_of(&alice).await.iter().any(|t| t.starts_with("x_protected_")));
    let (failed, login) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "{login}");
    let link = login["authUrl"].as_str().expect("a link").to_owned();
    assert!(
        valkey
            .dump()
            .iter()
            .any(|(key, _)| key.starts_with("replicas-test:signin:pending:")),
        "the pending sign-in is in valkey"
    );

    // The browser opens the link on replica one; the load balancer sends the callback to two.
    let callback = idp.sign_in(&link, "alice").await;
    let on_two = callback.as_str().replacen(&one.base, &two.base, 1);
    assert_ne!(on_two, callback.as_str(), "the callback is sent to the other replica");
    let page = reqwest::get(&on_two).await.expect("replica two answers the callback");
    let status = page.status();
    let body = page.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Signed in to protected"), "{body}");
    // The state was used once, for both replicas.
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 400);

    // Alice's session on replica one uses the grant replica two kept.
    assert!(tools_of(&alice).await.contains(&"x_protected_whoami".to_owned()));
    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed, "{answer}");
    assert_eq!(answer, json!("you are in"));

    let _ = alice.cancel().await;
    one.stop().await;
    two.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replica_holding_the_session_tells_its_client_of_a_sign_in_completed_on_another() {
    let Some(valkey) = ValkeyServer::start() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key_file = write_state_key(dir.path());
    let idp = OidcProvider::start();
    let one = SignInGateway::start(&idp, |base| replica(base, &valkey, &key_file)).await;
    let two = one.replica(|base| replica(base, &valkey, &key_file)).await;

    let handler = UrlElicitingClient::default();
    let client = handler
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(format!("{}/mcp", one.base)))
        .await
        .expect("connects to replica one");
    let call = || {
        let mut args = serde_json::Map::new();
        args.insert("name".into(), json!("x_protected_whoami"));
        args.insert("arguments".into(), json!({}));
        client.call_tool(rmcp::model::CallToolRequestParams::new("call_tool").with_arguments(args))
    };
    let error = match call().await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let elicitation = error
        .data
        .as_ref()
        .map(|d| d["elicitations"][0].clone())
        .unwrap_or_default();
    let url = elicitation["url"].as_str().unwrap_or_default().to_owned();
    let id = elicitation["elicitationId"].as_str().unwrap_or_default().to_owned();
    assert!(!id.is_empty(), "{elicitation}");

    let callback = idp.sign_in(&url, "erin").await;
    let on_two = callback.as_str().replacen(&one.base, &two.base, 1);
    assert_eq!(reqwest::get(&on_two).await.expect("answers").status(), 200);
    assert!(
        handler.told_complete(&id).await,
        "replica one sent no notifications/elicitation/complete for {id}"
    );
    let result = call().await.expect("the retry runs on replica one");
    assert!(text(&result).contains("you are in"), "{}", text(&result));

    let _ = client.cancel().await;
    one.stop().await;
    two.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_valkey_down_a_sign_in_is_refused_naming_the_store_and_works_again_once_it_is_back() {
    let Some(mut valkey) = ValkeyServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key_file = write_state_key(dir.path());
    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| replica(base, &valkey, &key_file)).await;
    let alice = client(&format!("{}/mcp", gw.base)).await;

    valkey.stop();
    let (failed, refused) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert!(failed, "{refused}");
    let store = format!("valkey at {}", valkey.address());
    assert!(
        refused.to_string().contains(&store),
        "the refusal names the store: {refused}"
    );
    // Calls that need no sign-in go on.
    let (failed, status) = core(&alice, "core_service_status", json!({"name": "protected"})).await;
    assert!(!failed, "{status}");

    valkey.restart();
    let signed_in = async {
        loop {
            let (failed, login) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
            if !failed {
                return login;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    };
    let login = tokio::time::timeout(std::time::Duration::from_secs(20), signed_in)
        .await
        .expect("sign-in works again once valkey is back, without a restart");
    let callback = idp.sign_in(login["authUrl"].as_str().expect("a link"), "alice").await;
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 200);
    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed, "{answer}");

    let _ = alice.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn a_gateway_with_a_valkey_store_and_no_key_is_refused_naming_the_key() {
    let config =
        muster::core::config::MusterConfig::default().with_aggregator(AggregatorConfig::default().with_oauth_server(
            OAuthServerConfig::default().with_storage(StorageConfig::valkey(ValkeyConfig::at("127.0.0.1:6379"))),
        ));
    let lines = config.validate_config().expect_err("refused").to_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("aggregator.oauth.server.encryptionKeyFile: ")),
        "{lines:?}"
    );
    let err = muster::gateway::Gateway::new(config, Vec::new(), Vec::new())
        .map(drop)
        .expect_err("a gateway without the key does not start");
    assert!(
        err.to_string().contains("aggregator.oauth.server.encryptionKeyFile"),
        "{err}"
    );
}
