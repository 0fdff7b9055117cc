//! The Valkey sign-in state store (`muster_auth::state::ValkeyStore`) against a real
//! `redis-server`: the contract every store keeps, and what replicas need of it: one state taken
//! once and one refresh at a time across two stores (two connection managers, as two replicas),
//! no secret in clear text in Valkey, and a store that says which store is down and answers again
//! once it is back.
//!
//! Needs the `redis-server` binary (Debian package `redis-server`); skipped without it, failed
//! under `CI=true`.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use chrono::Utc;
use common::valkey::{ValkeyServer, publish_until_heard};
use muster::auth::{
    Secret,
    oauth::{flow::PendingSignIn, registration::ClientRegistration, store::GrantStoreKey},
    state::{
        ExchangeEntry, ExchangedToken, SignInNotice, SignInNotices, SignInStore, SignInStoreError, ValkeyOptions,
        ValkeyStore, contract,
    },
};

fn store(server: &ValkeyServer, key: &GrantStoreKey) -> ValkeyStore {
    ValkeyStore::new(&ValkeyOptions::new(server.url()), key).expect("the options describe a store")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_valkey_store_keeps_the_contract() {
    let Some(server) = ValkeyServer::start() else { return };
    contract::check(&store(&server, &GrantStoreKey::generate())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_two_replicas_taking_one_state_exactly_one_gets_it() {
    let Some(server) = ValkeyServer::start() else { return };
    let key = GrantStoreKey::generate();
    let replicas = [Arc::new(store(&server, &key)), Arc::new(store(&server, &key))];
    for round in 0..20 {
        let (started, pending) = PendingSignIn::start(
            contract::sample_request(&format!("session-{round}"), "github"),
            Duration::from_secs(60),
        )
        .expect("a sign-in starts");
        replicas[round % 2]
            .put_pending(&started.state, pending)
            .await
            .expect("put");
        let start = Arc::new(tokio::sync::Barrier::new(16));
        let takers: Vec<_> = (0..16)
            .map(|i| {
                let (replica, state, start) = (Arc::clone(&replicas[i % 2]), started.state.clone(), Arc::clone(&start));
                tokio::spawn(async move {
                    start.wait().await;
                    replica.take_pending(&state).await.expect("take").is_some()
                })
            })
            .collect();
        let mut got = 0;
        for taker in takers {
            got += usize::from(taker.await.expect("the taker ran"));
        }
        assert_eq!(
            got, 1,
            "round {round}: of 16 takers on two replicas, one gets the state"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refresh_on_one_replica_holds_off_the_same_grants_refresh_on_another() {
    let Some(server) = ValkeyServer::start() else { return };
    let key = GrantStoreKey::generate();
    let (one, two) = (store(&server, &key), store(&server, &key));

    let held = one.refresh_guard("subject-a", "github").await.expect("guard");
    let waited = tokio::time::timeout(Duration::from_millis(300), two.refresh_guard("subject-a", "github")).await;
    assert!(waited.is_err(), "the other replica waits while the first refreshes");
    let other = tokio::time::timeout(Duration::from_secs(2), two.refresh_guard("subject-a", "slack")).await;
    assert!(other.is_ok(), "another grant's refresh does not wait");
    drop(other);
    drop(held);
    let next = tokio::time::timeout(Duration::from_secs(3), two.refresh_guard("subject-a", "github")).await;
    assert!(
        next.is_ok(),
        "the other replica refreshes once the first drops its guard"
    );
    drop(next);

    // Twelve refreshes spread over the two replicas never overlap.
    let replicas = [Arc::new(one), Arc::new(two)];
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let refreshes: Vec<_> = (0..12)
        .map(|i| {
            let (replica, running, most) = (Arc::clone(&replicas[i % 2]), Arc::clone(&running), Arc::clone(&most));
            tokio::spawn(async move {
                let _guard = replica.refresh_guard("subject-b", "github").await.expect("guard");
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(15)).await;
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    for refresh in refreshes {
        refresh.await.expect("the refresh ran");
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "one refresh of a grant at a time across replicas"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_verifier_or_client_secret_is_in_clear_text_in_valkey() {
    let Some(server) = ValkeyServer::start() else { return };
    let store = ValkeyStore::new(
        &ValkeyOptions::new(server.url()).with_key_prefix("replicas:"),
        &GrantStoreKey::generate(),
    )
    .expect("a store");
    let session = "session-7c1f0a9e";
    let (started, pending) = PendingSignIn::start(contract::sample_request(session, "github"), Duration::from_secs(60))
        .expect("a sign-in starts");
    let verifier = pending.verifier.expose().to_owned();
    store.put_pending(&started.state, pending).await.expect("put");

    let mut grant = contract::sample_grant("access-token-4b2d");
    grant.client = ClientRegistration::pre_registered("muster", Some(Secret::new("client-secret-91ce")));
    store.put_grant("subject-5e0c", "github", grant).await.expect("put");
    let registration = ClientRegistration::pre_registered("dyn", Some(Secret::new("registered-secret-07aa")));
    store
        .put_registration("https://idp.example.com", registration)
        .await
        .expect("put");
    let entry = ExchangeEntry {
        fingerprint: [7; 32],
        token: ExchangedToken {
            token: Secret::new("exchanged-token-d3a8"),
            issuer: "https://dex.example.com".to_owned(),
            expires_at: Some(Utc::now() + chrono::TimeDelta::minutes(5)),
        },
    };
    store
        .put_exchange_entry(&format!("{session}\0github"), entry, Duration::from_secs(60))
        .await
        .expect("put");
    store
        .count_attempt(session, 10, Duration::from_secs(60))
        .await
        .expect("count");
    let guard = store.refresh_guard("subject-5e0c", "github").await.expect("guard");

    let dump = server.dump();
    assert!(
        dump.len() >= 8,
        "every kind of key is there: {:?}",
        dump.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    let secrets = [
        verifier.as_str(),
        started.state.as_str(),
        "access-token-4b2d",
        "access-token-4b2d-refresh",
        "client-secret-91ce",
        "registered-secret-07aa",
        "exchanged-token-d3a8",
    ];
    let identifiers = [session, "subject-5e0c", "https://idp.example.com"];
    for (key, value) in &dump {
        assert!(key.starts_with("replicas:"), "every key has the prefix: {key}");
        for secret in secrets.iter().chain(&identifiers) {
            assert!(!key.contains(secret), "{key} names {secret}");
            assert!(
                !value.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "the value of {key} holds {secret} in clear text"
            );
        }
    }
    // The store reads back what it sealed.
    assert!(store.take_pending(&started.state).await.expect("take").is_some());
    let held = store.grant("subject-5e0c", "github").await.expect("get").expect("kept");
    assert!(
        held.grant
            .client
            .client_secret
            .is_some_and(|s| s.matches("client-secret-91ce"))
    );
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_valkey_is_named_in_the_error_and_the_same_store_answers_once_it_is_back() {
    let Some(mut server) = ValkeyServer::start() else {
        return;
    };
    let store = store(&server, &GrantStoreKey::generate());
    store
        .put_grant("subject-x", "github", contract::sample_grant("token-before-3f"))
        .await
        .expect("put");

    server.stop();
    let started = std::time::Instant::now();
    let err = store.grant("subject-x", "github").await.expect_err("valkey is down");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the failure is prompt: {:?}",
        started.elapsed()
    );
    let SignInStoreError::Unavailable { store: name, .. } = &err else {
        panic!("unavailable, not {err:?}");
    };
    assert_eq!(name, &format!("valkey at {}", server.address()));
    let message = format!("{err} {err:?}");
    assert!(
        message.contains(&format!("valkey at {}", server.address())),
        "{message}"
    );
    assert!(!message.contains("token-before-3f"), "{message}");
    let pending =
        PendingSignIn::start(contract::sample_request("s", "github"), Duration::from_secs(60)).expect("starts");
    assert!(
        store.put_pending(&pending.0.state, pending.1).await.is_err(),
        "a sign-in cannot start"
    );

    // Nothing was persisted: the restarted server is empty, and the same store answers.
    server.restart();
    let answered = async {
        loop {
            match store.grant("subject-x", "github").await {
                Ok(found) => return found,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    };
    let found = tokio::time::timeout(Duration::from_secs(15), answered)
        .await
        .expect("the store answers again once valkey is back");
    assert!(found.is_none(), "a restarted server without persistence holds nothing");
    store
        .put_grant("subject-x", "github", contract::sample_grant("token-after"))
        .await
        .expect("put after the restart");
    let held = store.grant("subject-x", "github").await.expect("get").expect("kept");
    assert!(held.grant.access_token.matches("token-after"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_published_by_one_replica_is_heard_by_the_other_and_only_under_its_prefix() {
    let Some(server) = ValkeyServer::start() else { return };
    let key = GrantStoreKey::generate();
    let (one, two) = (store(&server, &key), store(&server, &key));
    let other_prefix =
        ValkeyStore::new(&ValkeyOptions::new(server.url()).with_key_prefix("elsewhere:"), &key).expect("a store");
    let (told, heard, elsewhere) = (one.notices(), two.notices(), other_prefix.notices());
    let (mut heard, mut elsewhere) = (heard.subscribe(), elsewhere.subscribe());
    let notice = SignInNotice::signed_in("session-9", "subject-9", "github", "state-9");
    let received = publish_until_heard(&told, &mut heard, &notice).await;
    assert_eq!(received, notice);
    assert!(
        elsewhere.try_recv().is_err(),
        "a store under another prefix hears nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_sessions_grants_expire_unused_and_a_persons_stay() {
    let Some(server) = ValkeyServer::start() else { return };
    let key = GrantStoreKey::generate();
    let ttl = Duration::from_secs(2);
    let options = ValkeyOptions::new(server.url())
        .with_key_prefix("ttl:")
        .with_session_grant_ttl(ttl);
    let store = ValkeyStore::new(&options, &key).expect("a store");
    store
        .put_grant("transport-session-1", "github", contract::sample_grant("session-token"))
        .await
        .expect("put");
    store
        .put_grant("subject-4f2a", "github", contract::sample_grant("person-token"))
        .await
        .expect("put");
    // What each key's time to live is, by the key's kind (names carry no owner).
    let ttls = |server: &ValkeyServer| {
        let mut ttls: Vec<(String, i64)> = server
            .command(&["KEYS", "ttl:signin:grant*"])
            .into_iter()
            .map(|k| String::from_utf8(k).expect("a key name"))
            .map(|k| {
                let ms = server.command(&["PTTL", &k]).concat();
                let ms = String::from_utf8(ms).expect("a number").parse().expect("a number");
                (k.split(':').nth(2).expect("a kind").to_owned(), ms)
            })
            .collect();
        ttls.sort();
        ttls
    };
    let kinds: Vec<(String, bool)> = ttls(&server).into_iter().map(|(k, ms)| (k, ms > 0)).collect();
    assert_eq!(
        kinds,
        [
            ("grant".to_owned(), false),
            ("grant".to_owned(), true),
            ("grants".to_owned(), false),
            ("grants".to_owned(), true),
        ],
        "the session's grant and index expire, the person's do not"
    );

    // Read within its time to live, the session's grant lives on.
    for _ in 0..3 {
        tokio::time::sleep(ttl / 2).await;
        assert!(
            store
                .grant("transport-session-1", "github")
                .await
                .expect("read")
                .is_some()
        );
    }
    assert_eq!(store.servers_of("transport-session-1").await.expect("read"), ["github"]);
    // Unused for longer, it is gone, index and all; the person's grant stays.
    tokio::time::sleep(ttl + Duration::from_millis(500)).await;
    assert!(
        store
            .grant("transport-session-1", "github")
            .await
            .expect("read")
            .is_none()
    );
    assert!(store.servers_of("transport-session-1").await.expect("read").is_empty());
    assert!(store.grant("subject-4f2a", "github").await.expect("read").is_some());
    assert_eq!(ttls(&server).len(), 2, "only the person's grant and index are left");
}
