//! The Valkey sign-in state store over TLS, against a real `redis-server` that speaks only TLS
//! (`--port 0 --tls-port`), with certificates made at run time by a CA of the test's own:
//!
//! - the store keeps the contract over TLS, its notices included, trusting the CA it is given
//!   (`tlsCaFile`);
//! - the certificate is checked for `tlsServerName` while the url's host is dialled, and for the
//!   url's host without it;
//! - a certificate from another CA is refused, whether the store trusts a CA of its own or the
//!   system's roots;
//! - plain text to the TLS port fails promptly, naming the store, and so does a server that never
//!   answers;
//! - a password (`password`, `passwordFile`) is sent over TLS;
//! - a gateway configured with `tlsEnabled`, `tlsServerName`, `tlsCaFile` and `passwordFile`
//!   completes a sign-in through the store.
//!
//! Needs `redis-server` and `openssl` (Debian packages) and the oidc-provider of `npm ci`;
//! skipped without the first two, failed under `CI=true`.

mod common;

use std::time::{Duration, Instant};

use common::{
    oidc::OidcProvider,
    signin::{SignInGateway, client, core, tools_of},
    tls::TestCa,
    valkey::{ValkeyServer, publish_until_heard, write_state_key},
};
use muster::{
    auth::{
        Secret,
        oauth::{flow::PendingSignIn, store::GrantStoreKey},
        state::{SignInNotice, SignInNotices, SignInStore, SignInStoreError, ValkeyOptions, ValkeyStore, contract},
    },
    core::config::{AggregatorConfig, McpClientConfig, OAuthServerConfig, StorageConfig, ValkeyConfig},
};
use serde_json::json;

/// How long a store may take to fail: its connection is bounded by two seconds.
const PROMPT: Duration = Duration::from_secs(10);

/// A TLS-only server presenting a certificate for `names` from `ca`, with `extra` arguments.
fn tls_server(ca: &TestCa, names: &[&str], extra: &[&str]) -> Option<ValkeyServer> {
    ValkeyServer::start_tls(ca.issue(names).args(), extra)
}

/// A test CA and a TLS-only server presenting a certificate it issued for `names`; `None` (with
/// a note) without openssl or redis-server.
fn ca_and_server(names: &[&str], extra: &[&str]) -> Option<(TestCa, ValkeyServer)> {
    let ca = TestCa::new("muster test CA")?;
    let server = tls_server(&ca, names, extra)?;
    Some((ca, server))
}

fn ca_pem(ca: &TestCa) -> Vec<u8> {
    std::fs::read(ca.cert()).expect("reads the CA certificate")
}

fn store(options: ValkeyOptions) -> ValkeyStore {
    ValkeyStore::new(&options, &GrantStoreKey::generate()).expect("the options describe a store")
}

/// Keeps a pending sign-in and takes it back: one write and one read through the store.
async fn round_trip(store: &ValkeyStore) -> Result<(), SignInStoreError> {
    let (started, pending) = PendingSignIn::start(
        contract::sample_request("session-tls", "github"),
        Duration::from_secs(60),
    )
    .expect("a sign-in starts");
    store.put_pending(&started.state, pending).await?;
    let taken = store.take_pending(&started.state).await?;
    assert!(taken.is_some(), "the pending sign-in kept is taken back");
    Ok(())
}

/// The error of a round trip that must fail, after checking it failed promptly and named the
/// store at `address`.
async fn refused(store: &ValkeyStore, address: &str) -> String {
    let started = Instant::now();
    let err = tokio::time::timeout(2 * PROMPT, round_trip(store))
        .await
        .expect("the store does not hang")
        .expect_err("the store is refused");
    assert!(
        started.elapsed() < PROMPT,
        "the failure is prompt: {:?}",
        started.elapsed()
    );
    let SignInStoreError::Unavailable { store: name, .. } = &err else {
        panic!("unavailable, not {err:?}");
    };
    assert_eq!(name, &format!("valkey at {address}"));
    let message = format!("{err}: {:?}", std::error::Error::source(&err));
    assert!(message.contains(&format!("valkey at {address}")), "{message}");
    eprintln!("refused, as it must be: {message}");
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_store_keeps_the_contract_and_its_notices_trusting_the_ca_it_is_given() {
    let Some((ca, server)) = ca_and_server(&["valkey.test", "127.0.0.1"], &[]) else {
        return;
    };
    let options = ValkeyOptions::new(server.url()).with_tls_ca(ca_pem(&ca));
    contract::check(&store(options.clone())).await;

    // Pub/sub has a connection of its own: it is TLS too.
    let key = GrantStoreKey::generate();
    let one = ValkeyStore::new(&options, &key).expect("a store");
    let two = ValkeyStore::new(&options, &key).expect("a store");
    let (told, heard) = (one.notices(), two.notices());
    let mut heard = heard.subscribe();
    let notice = SignInNotice::signed_in("session-1", "subject-1", "github", "state-1");
    let received = publish_until_heard(&told, &mut heard, &notice).await;
    assert_eq!(received, notice);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_certificate_is_checked_for_the_tls_server_name_while_the_urls_host_is_dialled() {
    let Some((ca, server)) = ca_and_server(&["valkey.test"], &[]) else {
        return;
    };
    let options = || ValkeyOptions::new(server.url()).with_tls_ca(ca_pem(&ca));

    // Without a server name the certificate is checked for 127.0.0.1, which it does not name.
    let message = refused(&store(options()), &server.address()).await;
    assert!(message.contains("certificate"), "{message}");

    round_trip(&store(options().with_tls_server_name("valkey.test")))
        .await
        .expect("with the certificate's name, the store works");

    let message = refused(&store(options().with_tls_server_name("other.test")), &server.address()).await;
    assert!(message.contains("certificate"), "{message}");

    let err = ValkeyStore::new(
        &ValkeyOptions::new(format!("redis://127.0.0.1:{}", server.port())).with_tls_server_name("valkey.test"),
        &GrantStoreKey::generate(),
    )
    .expect_err("a server name without TLS is refused");
    assert!(err.to_string().contains("tlsServerName"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_ca_is_refused() {
    let (Some(trusted), Some(other)) = (TestCa::new("muster test CA"), TestCa::new("another CA")) else {
        return;
    };
    let Some(server) = tls_server(&other, &["valkey.test", "127.0.0.1"], &[]) else {
        return;
    };
    let message = refused(
        &store(ValkeyOptions::new(server.url()).with_tls_ca(ca_pem(&trusted))),
        &server.address(),
    )
    .await;
    assert!(message.contains("certificate"), "{message}");

    // Nor do the system's roots know the other CA.
    let message = refused(&store(ValkeyOptions::new(server.url())), &server.address()).await;
    assert!(message.contains("certificate"), "{message}");

    // The CA it was issued by is trusted when given.
    round_trip(&store(ValkeyOptions::new(server.url()).with_tls_ca(ca_pem(&other))))
        .await
        .expect("trusting the issuing CA, the store works");

    let err = ValkeyStore::new(
        &ValkeyOptions::new(server.url()).with_tls_ca(b"not a certificate".to_vec()),
        &GrantStoreKey::generate(),
    )
    .expect_err("a CA file with no certificate is refused");
    assert!(err.to_string().contains("tlsCaFile"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_text_to_a_tls_only_server_fails_promptly_naming_the_store() {
    let Some((ca, server)) = ca_and_server(&["valkey.test", "127.0.0.1"], &[]) else {
        return;
    };
    let plain = format!("redis://127.0.0.1:{}", server.port());
    refused(
        &store(ValkeyOptions::new(plain.clone()).with_tls(false)),
        &server.address(),
    )
    .await;
    refused(
        &store(ValkeyOptions::new(format!("127.0.0.1:{}", server.port()))),
        &server.address(),
    )
    .await;
    // `tlsEnabled` turns the same url to TLS.
    round_trip(&store(
        ValkeyOptions::new(plain).with_tls(true).with_tls_ca(ca_pem(&ca)),
    ))
    .await
    .expect("with TLS enabled, the same url works");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_fails_the_store_in_bounded_time_with_or_without_tls() {
    let Some(ca) = TestCa::new("muster test CA") else {
        return;
    };
    // A loopback port whose connections the kernel accepts and nobody reads.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("binds a loopback port");
    let address = silent.local_addr().expect("its address").to_string();
    refused(&store(ValkeyOptions::new(format!("redis://{address}"))), &address).await;
    let message = refused(
        &store(ValkeyOptions::new(format!("rediss://{address}")).with_tls_ca(ca_pem(&ca))),
        &address,
    )
    .await;
    assert!(message.contains("no connection within"), "{message}");

    // Commands that wait for the same attempt fail with it, not one attempt after another.
    let store = std::sync::Arc::new(store(ValkeyOptions::new(format!("redis://{address}"))));
    let started = Instant::now();
    let waiting: Vec<_> = (0..8)
        .map(|_| {
            let store = std::sync::Arc::clone(&store);
            tokio::spawn(async move { round_trip(&store).await.is_err() })
        })
        .collect();
    for command in waiting {
        assert!(command.await.expect("the command ran"), "refused");
    }
    assert!(
        started.elapsed() < PROMPT,
        "eight commands at once fail within {PROMPT:?}: {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_is_sent_over_tls() {
    let Some((ca, server)) = ca_and_server(&["127.0.0.1"], &["--requirepass", "tls-s3cret"]) else {
        return;
    };
    let options = || ValkeyOptions::new(server.url()).with_tls_ca(ca_pem(&ca));
    let message = refused(&store(options()), &server.address()).await;
    assert!(message.contains("NOAUTH"), "the server's answer is told: {message}");
    let message = refused(&store(options().with_password(Secret::new("wrong"))), &server.address()).await;
    assert!(message.contains("authentication failed"), "{message}");
    assert!(
        !message.contains("wrong") && !message.contains("tls-s3cret"),
        "{message}"
    );
    round_trip(&store(options().with_password(Secret::new("tls-s3cret"))))
        .await
        .expect("with the password, the store works");
    let in_url = format!("rediss://:tls-s3cret@127.0.0.1:{}", server.port());
    round_trip(&store(ValkeyOptions::new(in_url).with_tls_ca(ca_pem(&ca))))
        .await
        .expect("with the password in the url, the store works");
}

/// A replica whose state is in `valkey` over TLS, configured as `config.yaml` would.
fn replica(base: String, valkey: ValkeyConfig, key_file: &std::path::Path) -> AggregatorConfig {
    AggregatorConfig::default()
        .with_mcp_client(McpClientConfig::enabled_at(base))
        .with_oauth_server(
            OAuthServerConfig::default()
                .with_storage(StorageConfig::valkey(valkey))
                .with_encryption_key_file(key_file.display().to_string()),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_configured_for_tls_completes_a_sign_in_through_valkey() {
    let Some((ca, server)) = ca_and_server(&["valkey.test"], &["--requirepass", "gw-s3cret"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key_file = write_state_key(dir.path());
    let password_file = dir.path().join("valkey-password");
    std::fs::write(&password_file, "gw-s3cret\n").expect("writes the password");
    let doc = format!(
        "url: \"127.0.0.1:{}\"\ntlsEnabled: true\ntlsServerName: valkey.test\ntlsCaFile: {}\npasswordFile: {}\nkeyPrefix: \"tls-test:\"\n",
        server.port(),
        ca.cert().display(),
        password_file.display()
    );
    let valkey: ValkeyConfig = serde_saphyr::from_str(&doc).expect("the valkey keys parse");

    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| replica(base, valkey.clone(), &key_file)).await;
    let alice = client(&format!("{}/mcp", gw.base)).await;
    let (failed, login) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "the pending sign-in is kept over TLS: {login}");
    let callback = idp.sign_in(login["authUrl"].as_str().expect("a link"), "alice").await;
    let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
    assert_eq!(page.status(), 200, "{}", page.text().await.unwrap_or_default());
    assert!(tools_of(&alice).await.contains(&"x_protected_whoami".to_owned()));
    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed, "the grant is read back over TLS: {answer}");

    // Without the CA, the same gateway's sign-in is refused naming the store.
    let mut untrusting = valkey.clone();
    untrusting.tls_ca_file = None;
    let gw_untrusting = SignInGateway::start(&idp, |base| replica(base, untrusting, &key_file)).await;
    let bob = client(&format!("{}/mcp", gw_untrusting.base)).await;
    let (failed, refused) = core(&bob, "core_auth_login", json!({"server": "protected"})).await;
    assert!(failed, "{refused}");
    assert!(
        refused.to_string().contains(&format!("valkey at {}", server.address())),
        "the refusal names the store: {refused}"
    );

    let _ = alice.cancel().await;
    let _ = bob.cancel().await;
    gw.stop().await;
    gw_untrusting.stop().await;
}
