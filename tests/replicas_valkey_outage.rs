//! Valkey stopped and started again under load: two gateway replicas sharing one real
//! `redis-server`, ten clients calling a tool of a server without sign-in and one signed-in
//! client calling the protected server, all the while. Every call is answered while Valkey is
//! down (none needs a new sign-in: the first make no Valkey round trip, the signed-in session goes
//! on with its connection), and once Valkey is back a new sign-in works without a restart.
//! (The test's redis-server keeps nothing across that restart: the grants are gone then.)
//!
//! A refresh during the outage, against a provider that rotates refresh tokens and revokes a
//! grant whose used refresh token is presented again: a transport session's grant is refreshed
//! on its replica while Valkey is down, and written back once it is back (Valkey keeps its data
//! across this restart), so the next refresh through Valkey is no replay; a person's grant
//! (`grantScope: subject`) whose refresh token rotates is not refreshed without Valkey, and its
//! call fails naming the store.
//!
//! A person's grant at a provider that does not rotate refresh tokens (learnt from a refresh
//! through Valkey) is refreshed on each replica that uses it while Valkey is down; once it is
//! back the first write-back lands, the other is dropped, and refreshes through Valkey go on.
//!
//! Needs `redis-server` (Debian package) and the oidc-provider of `npm ci`; skipped without
//! redis-server, failed under `CI=true`.

mod common;

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use common::{
    connect, eventually,
    oidc::OidcProvider,
    remote,
    replicas::{InProcessReplica, SignInParts, free_port, front_door_on_valkey, sign_in_on_valkey},
    scripted::ScriptedServer,
    signin::core,
    valkey::ValkeyServer,
};
use muster::core::{config::MusterConfig, crd::MCPServer};
use rmcp::{RoleClient, service::RunningService};
use serde_json::json;

/// Signs `login` in to `server` through a link `client` asks for, at `idp`.
async fn sign_in_through(client: &RunningService<RoleClient, ()>, server: &str, idp: &OidcProvider, login: &str) {
    let (failed, answer) = core(client, "core_auth_login", json!({"server": server})).await;
    assert!(!failed, "{answer}");
    let callback = idp.sign_in(answer["authUrl"].as_str().expect("a link"), login).await;
    assert_eq!(reqwest::get(callback.as_str()).await.expect("answers").status(), 200);
}

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
    sign_in_through(&alice, "protected", &parts.idp, "alice").await;
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
    sign_in_through(&bob, "protected", &parts.idp, "bob").await;
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

/// The generation of the one grant Valkey holds under `prefix`.
fn only_grant_generation(valkey: &ValkeyServer, prefix: &str) -> String {
    let keys = valkey.command(&["KEYS", &format!("{prefix}signin:grant:*")]);
    assert_eq!(keys.len(), 1, "one grant under {prefix}");
    let key = String::from_utf8(keys[0].clone()).expect("key names are UTF-8");
    let generation = valkey.command(&["HGET", &key, "g"]);
    String::from_utf8(generation.concat()).expect("a number")
}

/// Whether the generation of the one grant Valkey holds under `prefix` moves on from `before`
/// within 20 s.
async fn generation_moves_on(valkey: &ValkeyServer, prefix: &str, before: &str) -> bool {
    eventually(20, || async { only_grant_generation(valkey, prefix) != before }).await
}

/// The `Authorization` of the last call of `whoami` `server` received.
fn last_authorization(server: &ScriptedServer) -> String {
    let headers = server.headers_of("whoami");
    let last = headers.last().expect("a call");
    last.get("authorization").cloned().expect("a bearer")
}

/// A server `shared` behind `idp` whose `whoami` answers "you are in too", and its MCPServer,
/// signed in to with a person's grant (`grantScope: subject`).
async fn persons_server(idp: &OidcProvider) -> (ScriptedServer, MCPServer) {
    let shared = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in too")))
        .serve_protected(idp.issuer())
        .await;
    let mut persons = remote("shared", &shared.url);
    persons.spec.auth = Some(
        serde_json::from_value(json!({"authorizationServer": {"issuer": idp.issuer(), "grantScope": "subject"}}))
            .expect("an auth block"),
    );
    (shared, persons)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_grant_is_refreshed_on_its_replica_while_valkey_is_down_and_written_back_once_it_is_back() {
    // Access tokens for 3 s: every call refreshes its grant (a minute's margin), and a token is
    // expired 3 s after its refresh. Each refresh rotates the refresh token; one used twice
    // revokes the grant.
    let Some(mut parts) = SignInParts::start(&[("OIDC_ACCESS_TTL", "3"), ("OIDC_ROTATE_REFRESH", "1")]).await else {
        return;
    };
    let (_shared, persons) = persons_server(&parts.idp).await;
    // One replica without the front door (its sessions own their grants), one behind it for a
    // person's grant, each under a prefix of its own in the one Valkey.
    let (session_port, person_port) = (free_port(), free_port());
    let (session_public, person_public) = (
        format!("http://127.0.0.1:{session_port}"),
        format!("http://127.0.0.1:{person_port}"),
    );
    let aggregator = sign_in_on_valkey(&session_public, &parts.valkey, &parts.key_file, "sessions:");
    let mut sessions = InProcessReplica::start(
        "sessions",
        session_port,
        MusterConfig::default().with_aggregator(aggregator),
        vec![remote("protected", &parts.protected.url)],
    )
    .await;
    let aggregator = front_door_on_valkey(
        &person_public,
        parts.idp.issuer(),
        &parts.valkey,
        &parts.key_file,
        "people:",
    );
    let mut people = InProcessReplica::start(
        "people",
        person_port,
        MusterConfig::default().with_aggregator(aggregator),
        vec![persons],
    )
    .await;

    let alice = connect(&sessions.mcp(), &[], None).await;
    sign_in_through(&alice, "protected", &parts.idp, "alice").await;
    let frank_bearer = parts.idp.token_for(&format!("{person_public}/mcp"), "frank").await;
    let frank = connect(&people.mcp(), &[], Some(frank_bearer)).await;
    sign_in_through(&frank, "shared", &parts.idp, "frank").await;
    for (client, tool, expected) in [
        (&alice, "x_protected_whoami", "you are in"),
        (&frank, "x_shared_whoami", "you are in too"),
    ] {
        let (failed, answer) = core(client, tool, json!({})).await;
        assert!(!failed && answer == json!(expected), "{answer}");
    }
    let (refreshed_before, refused) = parts.idp.token_requests("refresh_token");
    assert!(refreshed_before >= 2 && refused == 0, "each call refreshed its grant");
    let generation_before = only_grant_generation(&parts.valkey, "sessions:");
    let bearer_before = last_authorization(&parts.protected);

    // Valkey goes away, and both access tokens expire.
    parts.valkey.stop_keeping_data();
    tokio::time::sleep(Duration::from_millis(3_500)).await;

    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed && answer == json!("you are in"), "{answer}");
    assert_ne!(
        last_authorization(&parts.protected),
        bearer_before,
        "the session's call carried a token refreshed during the outage"
    );
    assert_eq!(
        parts.idp.token_requests("refresh_token"),
        (refreshed_before + 1, 0),
        "refreshed on the replica, once"
    );
    let (failed, answer) = core(&frank, "x_shared_whoami", json!({})).await;
    let store = format!(
        "the sign-in state store (valkey at {}) is unavailable",
        parts.valkey.address()
    );
    assert!(failed && answer.to_string().contains(&store), "{answer}");
    assert_eq!(
        parts.idp.token_requests("refresh_token").0,
        refreshed_before + 1,
        "a person's grant is not refreshed without valkey"
    );

    // Valkey is back, with what it held: the refreshed grant is written over the one it was
    // refreshed from (nothing else writes it meanwhile), without a call.
    parts.valkey.restart();
    let written = generation_moves_on(&parts.valkey, "sessions:", &generation_before).await;
    assert!(written, "the session's refreshed grant is written back to valkey");
    // It carries the rotated refresh token: the next refresh, from the grant in Valkey, is no
    // replay (a replay would revoke the grant and fail the call).
    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed && answer == json!("you are in"), "{answer}");
    let (refreshed, refused) = parts.idp.token_requests("refresh_token");
    assert_eq!(refused, 0, "no refresh token was used twice");
    assert!(refreshed >= refreshed_before + 2, "{refreshed}");
    // The person's grant is refreshed again through Valkey (a new bearer: the first may be past
    // the front door's leeway by now).
    let frank_bearer = parts.idp.token_for(&format!("{person_public}/mcp"), "frank").await;
    let frank_again = connect(&people.mcp(), &[], Some(frank_bearer)).await;
    let called = eventually(10, || async {
        core(&frank_again, "x_shared_whoami", json!({})).await == (false, json!("you are in too"))
    })
    .await;
    assert!(called, "the person's grant is refreshed once valkey is back");
    assert_eq!(parts.idp.token_requests("refresh_token").1, 0);

    for client in [alice, frank, frank_again] {
        let _ = client.cancel().await;
    }
    sessions.stop().await;
    people.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_grant_that_does_not_rotate_is_refreshed_on_every_replica_while_valkey_is_down() {
    // Access tokens for 3 s: every call refreshes the grant (a minute's margin), and a token is
    // expired 3 s after its refresh. Refresh tokens do not rotate (not even the gateway's public
    // client's, which oidc-provider rotates by default).
    let Some(mut parts) = SignInParts::start(&[("OIDC_ACCESS_TTL", "3"), ("OIDC_ROTATE_REFRESH", "0")]).await else {
        return;
    };
    let (shared, persons) = persons_server(&parts.idp).await;
    // Two replicas behind the front door under one prefix, with the public URL of the first: the
    // person's token is for it, and valid on both.
    let ports = [free_port(), free_port()];
    let public = format!("http://127.0.0.1:{}", ports[0]);
    let aggregator = front_door_on_valkey(&public, parts.idp.issuer(), &parts.valkey, &parts.key_file, "rotation:");
    let mut replicas = Vec::new();
    for (i, port) in ports.into_iter().enumerate() {
        let config = MusterConfig::default().with_aggregator(aggregator.clone());
        replicas.push(InProcessReplica::start(&format!("r{}", i + 1), port, config, vec![persons.clone()]).await);
    }
    let bearer = parts.idp.token_for(&format!("{public}/mcp"), "grace").await;
    let mut clients = Vec::new();
    for replica in &replicas {
        clients.push(connect(&replica.mcp(), &[], Some(bearer.clone())).await);
    }
    sign_in_through(&clients[0], "shared", &parts.idp, "grace").await;
    // A call on each replica refreshes the grant through Valkey: it answers the same refresh
    // token (or none), so the grant is known not to rotate, and each replica holds it.
    for client in &clients {
        let called = eventually(10, || async {
            core(client, "x_shared_whoami", json!({})).await == (false, json!("you are in too"))
        })
        .await;
        assert!(called, "the person's grant is used on each replica");
    }
    let (refreshed_before, refused) = parts.idp.token_requests("refresh_token");
    assert!(refreshed_before >= 2 && refused == 0, "each call refreshed the grant");
    let generation_before = only_grant_generation(&parts.valkey, "rotation:");

    // Valkey goes away, and the access tokens expire: a call on each replica refreshes the
    // grant there, with the one refresh token.
    parts.valkey.stop_keeping_data();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    for (r, client) in clients.iter().enumerate() {
        let bearer_before = last_authorization(&shared);
        let (failed, answer) = core(client, "x_shared_whoami", json!({})).await;
        assert!(
            !failed && answer == json!("you are in too"),
            "replica {}: {answer}",
            r + 1
        );
        assert_ne!(
            last_authorization(&shared),
            bearer_before,
            "replica {}'s call carried a token refreshed during the outage",
            r + 1
        );
    }
    assert_eq!(
        parts.idp.token_requests("refresh_token"),
        (refreshed_before + 2, 0),
        "refreshed on each replica, once"
    );

    // Valkey is back, with what it held: one replica's refresh is written back (the other's is
    // dropped, its replica reading Valkey's grant), without a call.
    parts.valkey.restart();
    let written = generation_moves_on(&parts.valkey, "rotation:", &generation_before).await;
    assert!(written, "a refreshed grant is written back to valkey");
    let generation_written = only_grant_generation(&parts.valkey, "rotation:");
    // Later refreshes go through Valkey again, on each replica (a new bearer: the first may be
    // past the front door's leeway by now).
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let refreshed_during = parts.idp.token_requests("refresh_token").0;
    let bearer = parts.idp.token_for(&format!("{public}/mcp"), "grace").await;
    for (r, replica) in replicas.iter().enumerate() {
        let client = connect(&replica.mcp(), &[], Some(bearer.clone())).await;
        let called = eventually(10, || async {
            core(&client, "x_shared_whoami", json!({})).await == (false, json!("you are in too"))
        })
        .await;
        assert!(called, "replica {}: the grant is refreshed once valkey is back", r + 1);
        let _ = client.cancel().await;
    }
    let (refreshed, refused) = parts.idp.token_requests("refresh_token");
    assert!(refreshed > refreshed_during, "refreshed through valkey: {refreshed}");
    assert_eq!(refused, 0);
    assert_ne!(
        only_grant_generation(&parts.valkey, "rotation:"),
        generation_written,
        "the later refreshes are kept in valkey"
    );

    for client in clients {
        let _ = client.cancel().await;
    }
    for replica in &mut replicas {
        replica.stop().await;
    }
}
