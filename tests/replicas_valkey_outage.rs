//! Valkey stopped and started again under load: two gateway replicas sharing one real
//! `redis-server`, ten clients calling a tool of a server without sign-in and one signed-in
//! client calling the protected server, all the while. Every call is answered while Valkey is
//! down (none needs a new sign-in: the first make no Valkey round trip, the signed-in session goes
//! on with its connection), and once Valkey is back a new sign-in works without a restart.
//! (The test's redis-server keeps nothing across its restart: the grants are gone then.)
//!
//! Needs `redis-server` (Debian package) and the oidc-provider of `npm ci`; skipped without
//! redis-server, failed under `CI=true`.

mod common;

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use common::{
    connect, remote,
    replicas::{InProcessReplica, SignInParts, free_port, sign_in_on_valkey},
    scripted::ScriptedServer,
    signin::core,
};
use muster::core::config::MusterConfig;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_on_while_valkey_is_down_and_sign_in_works_again_once_it_is_back() {
    // Access tokens for an hour: no refresh falls in the outage (a refresh needs the store).
    let Some(mut parts) = SignInParts::start(&[("OIDC_ACCESS_TTL", "3600")]).await else {
        return;
    };
    let plain = ScriptedServer::builder()
        .tool("echo", true, |args| Ok(args.get("text").cloned().unwrap_or_default()))
        .serve()
        .await;
    let ports = [free_port(), free_port()];
    let public = format!("http://127.0.0.1:{}", ports[0]);
    let servers = vec![remote("protected", &parts.protected.url), remote("plain", &plain.url)];
    let mut replicas = Vec::new();
    for (i, port) in ports.into_iter().enumerate() {
        let aggregator = sign_in_on_valkey(&public, &parts.valkey, &parts.key_file, "outage:");
        let config = MusterConfig::default().with_aggregator(aggregator);
        replicas.push(InProcessReplica::start(&format!("r{}", i + 1), port, config, servers.clone()).await);
    }
    let alice = connect(&replicas[0].mcp(), &[], None).await;
    let (failed, login) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "{login}");
    let callback = parts
        .idp
        .sign_in(login["authUrl"].as_str().expect("a link"), "alice")
        .await;
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 200);
    let mut clients = Vec::new();
    for i in 0..10 {
        clients.push(connect(&replicas[i % 2].mcp(), &[], None).await);
    }

    let done = AtomicBool::new(false);
    let load = clients.iter().enumerate().map(|(c, client)| {
        let done = &done;
        async move {
            let mut calls = 0;
            while !done.load(Ordering::Acquire) {
                let expected = format!("client {c} call {calls}");
                let (failed, answer) = core(client, "x_plain_echo", json!({"text": expected})).await;
                assert!(!failed && answer == json!(expected), "{answer}");
                calls += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            calls
        }
    });
    let signed_in = async {
        let mut calls = 0;
        while !done.load(Ordering::Acquire) {
            let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
            assert!(!failed && answer == json!("you are in"), "{answer}");
            calls += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        calls
    };
    let outage = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        parts.valkey.stop();
        tokio::time::sleep(Duration::from_secs(2)).await;
        parts.valkey.restart();
        tokio::time::sleep(Duration::from_millis(500)).await;
        done.store(true, Ordering::Release);
    };
    let (calls, alices, ()) = futures::future::join3(futures::future::join_all(load), signed_in, outage).await;
    assert!(calls.iter().all(|n| *n >= 10), "every client kept calling: {calls:?}");
    assert!(alices >= 10, "the signed-in session kept calling: {alices}");

    // Back: a sign-in on the other replica works, without a restart.
    let bob = connect(&replicas[1].mcp(), &[], None).await;
    let login = common::eventually(20, || async {
        !core(&bob, "core_auth_login", json!({"server": "protected"})).await.0
    })
    .await;
    assert!(login, "sign-in works again once valkey is back");
    let (failed, login) = core(&bob, "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "{login}");
    let callback = parts
        .idp
        .sign_in(login["authUrl"].as_str().expect("a link"), "bob")
        .await;
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 200);
    // The callback landed on replica one; replica two hears of it once its subscription to the
    // notices is back (a second after Valkey at most), or reads the grant itself.
    let called = common::eventually(5, || async {
        core(&bob, "x_protected_whoami", json!({})).await == (false, json!("you are in"))
    })
    .await;
    assert!(
        called,
        "bob's session on replica two uses the grant kept on replica one"
    );

    for client in clients.into_iter().chain([alice, bob]) {
        let _ = client.cancel().await;
    }
    for replica in &mut replicas {
        replica.stop().await;
    }
}
