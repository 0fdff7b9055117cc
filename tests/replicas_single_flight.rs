//! Three gateway replicas sharing one real `redis-server`, people calling through all three at
//! once: twenty concurrent calls of a server whose grant is due for a refresh make one refresh,
//! and twenty of a server reached by RFC 8693 token exchange, in a person's first sessions on the
//! three, make one exchange; counted at the authorization servers' token endpoints
//! (oidc-provider: `/admin/token-requests`, `/admin/exchanges`).
//!
//! The replicas are gateways in this process on their own ports (a config file refuses the
//! providers' `http://` URLs), sharing only Valkey; each person's grant and exchanged token are
//! the front door principal's, the same on every replica.
//!
//! Needs `redis-server` (Debian package) and the oidc-provider of `npm ci`; skipped without
//! redis-server, failed under `CI=true`.

mod common;

use std::{sync::Arc, time::Duration};

use common::{
    connect,
    oidc::OidcProvider,
    remote,
    replicas::{InProcessReplica, free_port, front_door_on_valkey},
    scripted::ScriptedServer,
    signin::core,
    valkey::{ValkeyServer, write_state_key},
};
use muster::core::{config::MusterConfig, crd::MCPServer};
use serde_json::json;

/// Access tokens live this long; the gateway refreshes a grant within 60 s of its expiry, so a
/// grant is due six seconds after it was issued.
const ACCESS_TTL: &str = "66";
const DUE_AFTER: Duration = Duration::from_millis(6_500);

/// A server whose callers' tokens are exchanged at `remote_idp` (connector `local`, client
/// `muster`) for tokens with audience `remote-k8s`.
fn exchanging(url: &str, remote_idp: &OidcProvider) -> MCPServer {
    let mut server = remote("remote", url);
    server.spec.auth = Some(
        serde_json::from_value(json!({
            "tokenExchange": {
                "enabled": true,
                "dexTokenEndpoint": remote_idp.token_endpoint(),
                "connectorId": "local",
                "clientCredentialsSecretRef": {"name": "exchange-client"},
            },
            "requiredAudiences": ["remote-k8s"],
        }))
        .expect("an auth block"),
    );
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_calls_across_three_replicas_make_one_refresh_and_one_exchange() {
    let Some(valkey) = ValkeyServer::start() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key_file = write_state_key(dir.path());
    let idp = OidcProvider::start_with_env(&[("OIDC_ACCESS_TTL", ACCESS_TTL)]);
    let remote_idp = OidcProvider::start_with_env(&[
        ("OIDC_TOKEN_EXCHANGE", "1"),
        ("OIDC_EXCHANGE_SUBJECT_ISSUER", idp.issuer()),
        ("OIDC_EXCHANGE_CONNECTOR", "local"),
        ("OIDC_STATIC_CLIENT_ID", "muster"),
        ("OIDC_STATIC_CLIENT_SECRET", "s3cret"),
        ("OIDC_STATIC_REDIRECT_URI", "http://127.0.0.1:9/callback"),
    ]);
    let protected = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected(idp.issuer())
        .await;
    let k8s = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("exchanged")))
        .serve_protected_for(remote_idp.issuer(), "remote-k8s")
        .await;
    let secrets: Arc<dyn muster::gateway::secrets::SecretSource> = Arc::new(
        muster::gateway::secrets::StaticSecrets::default()
            .with("exchange-client", "client-id", "muster")
            .with("exchange-client", "client-secret", "s3cret"),
    );

    // Every replica has the public URL of the first: the person's token is for it, and valid on
    // all three.
    let ports = [free_port(), free_port(), free_port()];
    let public = format!("http://127.0.0.1:{}", ports[0]);
    let aggregator = front_door_on_valkey(&public, idp.issuer(), &valkey, &key_file, "single-flight:");
    let servers = vec![remote("protected", &protected.url), exchanging(&k8s.url, &remote_idp)];
    let mut replicas = Vec::new();
    for (i, port) in ports.into_iter().enumerate() {
        let config = MusterConfig::default().with_aggregator(aggregator.clone());
        let name = format!("r{}", i + 1);
        let replica =
            InProcessReplica::start_with_secrets(&name, port, config, servers.clone(), Some(Arc::clone(&secrets)))
                .await;
        replicas.push(replica);
    }

    let token = idp.token_for(&format!("{public}/mcp"), "dana").await;
    let mut clients = Vec::new();
    for replica in &replicas {
        clients.push(connect(&replica.mcp(), &[], Some(token.clone())).await);
    }
    let (failed, login) = core(&clients[0], "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "{login}");
    let callback = idp.sign_in(login["authUrl"].as_str().expect("a link"), "dana").await;
    let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
    assert_eq!(page.status(), 200, "{}", page.text().await.unwrap_or_default());
    let signed_in = idp.token_requests("refresh_token");

    // Dana's grant is due for a refresh, and Erin has not called the exchanging server yet: at
    // once, Dana's session on every replica calls the protected server, and Erin opens a session
    // on every replica and calls the exchanging one (a session's first request exchanges).
    let erin = idp.token_for(&format!("{public}/mcp"), "erin").await;
    tokio::time::sleep(DUE_AFTER).await;
    assert_eq!(remote_idp.exchange_count(), 1, "Dana's sessions exchanged once, before");
    let dana_calls = (0..20).map(|i| core(&clients[i % 3], "x_protected_whoami", json!({})));
    let erin_calls = replicas.iter().enumerate().map(|(r, replica)| {
        let (url, erin) = (replica.mcp(), erin.clone());
        async move {
            let client = connect(&url, &[], Some(erin)).await;
            let calls = (r..20).step_by(3).map(|_| core(&client, "x_remote_whoami", json!({})));
            let answers = futures::future::join_all(calls).await;
            let _ = client.cancel().await;
            answers
        }
    });
    let (dana_answers, erin_answers) = futures::future::join(
        futures::future::join_all(dana_calls),
        futures::future::join_all(erin_calls),
    )
    .await;
    let erin_answers: Vec<_> = erin_answers.into_iter().flatten().collect();
    assert_eq!((dana_answers.len(), erin_answers.len()), (20, 20));
    for (failed, answer) in &dana_answers {
        assert!(!failed && *answer == json!("you are in"), "{answer}");
    }
    for (failed, answer) in &erin_answers {
        assert!(!failed && *answer == json!("exchanged"), "{answer}");
    }

    let (refreshed, refused) = idp.token_requests("refresh_token");
    assert_eq!(
        (refreshed - signed_in.0, refused - signed_in.1),
        (1, 0),
        "one refresh of the grant across three replicas"
    );
    assert_eq!(
        remote_idp.exchange_counts(),
        (2, 0),
        "one exchange of Erin's token across three replicas (and Dana's one before)"
    );
    for client in clients {
        let _ = client.cancel().await;
    }
    for replica in &mut replicas {
        replica.stop().await;
    }
}
