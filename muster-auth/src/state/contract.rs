//! The rules every [`SignInStore`] keeps, as checks to run a store through (feature
//! `test-util`): [`check`] runs them all. Each check panics with the rule it found broken.
//!
//! The checks write keys of their own (random, so a shared store can be used by several runs at
//! once) and wait for short expiries (under a second each), so a run takes about two seconds.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use muster_auth::state::{MemorySignInStore, contract};
//!
//! contract::check(&MemorySignInStore::new()).await;
//! # }
//! ```

use std::time::Duration;

use futures::future::join_all;

use super::{Attempt, ExchangeEntry, ExchangedToken, SignInStore};
use crate::{
    Secret,
    issuers::Description,
    oauth::{
        discovery::AuthorizationServerMetadata,
        flow::{PendingSignIn, SignInRequest},
        grant::Grant,
        registration::ClientRegistration,
    },
};

/// A short expiry, and a wait that outlasts it.
const SHORT: Duration = Duration::from_millis(300);
const PAST_SHORT: Duration = Duration::from_millis(650);

/// Runs every check against `store`.
pub async fn check(store: &dyn SignInStore) {
    pending_sign_ins_are_taken_once(store).await;
    pending_sign_ins_expire(store).await;
    registrations_are_kept_by_issuer(store).await;
    grants_are_kept_by_owner_and_server(store).await;
    grants_are_replaced_only_while_unchanged(store).await;
    attempts_are_limited_within_their_window(store).await;
    refreshes_of_one_grant_run_one_at_a_time(store).await;
    exchange_entries_are_kept_while_fresh(store).await;
}

/// A name no other run uses.
fn unique(label: &str) -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("contract-{label}-{hex}")
}

/// A sign-in request of `session` to `server` at a pinned authorization server, for tests.
pub fn sample_request(session: &str, server: &str) -> SignInRequest {
    SignInRequest {
        session: session.to_owned(),
        owner: session.to_owned(),
        server: server.to_owned(),
        metadata: AuthorizationServerMetadata::pinned(
            "https://idp.example.com",
            "https://idp.example.com/authorize",
            "https://idp.example.com/token",
            None,
        ),
        client: ClientRegistration::pre_registered("muster", None),
        redirect_uri: "https://muster.example.com/oauth/proxy/callback".to_owned(),
        resource: format!("https://{server}.example.com/mcp"),
        scope: Some("openid".to_owned()),
        expected_issuer: None,
    }
}

fn started(session: &str, server: &str, ttl: Duration) -> (String, PendingSignIn) {
    let (started, pending) = PendingSignIn::start(sample_request(session, server), ttl).expect("a sign-in starts");
    (started.state, pending)
}

/// How a server pinning an authorization server (with a revocation endpoint and `grantScope:
/// subject`) describes it.
fn description() -> Description {
    let server: muster_core::crd::MCPServer = serde_json::from_value(serde_json::json!({
        "apiVersion": "muster.giantswarm.io/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "github"},
        "spec": {
            "type": "streamable-http",
            "url": "https://github.example.com/mcp",
            "auth": {"authorizationServer": {
                "issuer": "https://idp.example.com",
                "revocationEndpoint": "https://idp.example.com/revoke",
                "grantScope": "subject",
            }},
        },
    }))
    .expect("an MCPServer");
    Description::of(&server).expect("it pins an authorization server")
}

/// A grant with access token `token` (and refresh token `<token>-refresh`), for tests.
pub fn sample_grant(token: &str) -> Grant {
    Grant {
        access_token: Secret::new(token),
        refresh_token: Some(Secret::new(format!("{token}-refresh"))),
        expires_at: None,
        scope: Some("repo".to_owned()),
        issuer: "https://idp.example.com".to_owned(),
        token_endpoint: "https://idp.example.com/token".to_owned(),
        revocation_endpoint: None,
        client: ClientRegistration::pre_registered("muster", None),
        resource: "https://github.example.com/mcp".to_owned(),
        rotates_refresh_tokens: None,
    }
}

/// A pending sign-in is kept whole by its state, is the latest of its session and server, takes
/// a browser redirect while it waits, and is taken once: of concurrent takers one gets it, and
/// afterwards nothing brings it back.
pub async fn pending_sign_ins_are_taken_once(store: &dyn SignInStore) {
    let (session, server) = (unique("session"), unique("server"));
    let (state, mut pending) = started(&session, &server, Duration::from_secs(60));
    pending.described = Some(description());
    store.put_pending(&state, pending.clone()).await.expect("put");

    let kept = store
        .pending(&state)
        .await
        .expect("get")
        .expect("a pending sign-in is kept");
    assert_eq!(kept.request.session, session, "the record keeps its session");
    assert_eq!(kept.request.server, server, "the record keeps its server");
    assert_eq!(kept.request.owner, session, "the record keeps its owner");
    assert_eq!(
        kept.authorization_url, pending.authorization_url,
        "the record keeps its link"
    );
    assert_eq!(
        kept.described, pending.described,
        "the record keeps the issuer's description"
    );
    assert!(
        kept.verifier.matches(pending.verifier.expose()),
        "the record keeps its verifier"
    );
    assert_eq!(
        kept.expires_at.timestamp(),
        pending.expires_at.timestamp(),
        "the record keeps its expiry"
    );

    let (newer, newer_pending) = started(&session, &server, Duration::from_secs(60));
    store.put_pending(&newer, newer_pending).await.expect("put");
    let latest = store.latest_pending(&session, &server).await.expect("latest");
    assert_eq!(
        latest.map(|(s, _)| s).as_deref(),
        Some(newer.as_str()),
        "the newest sign-in is the latest"
    );
    assert!(
        store.pending(&state).await.expect("get").is_some(),
        "an older sign-in still waits"
    );

    let redirect = "https://app.example.com/done";
    assert!(store.set_browser_redirect(&state, redirect).await.expect("redirect"));
    let kept = store.pending(&state).await.expect("get").expect("waiting");
    assert_eq!(
        kept.browser_redirect.as_deref(),
        Some(redirect),
        "the browser redirect is kept"
    );

    let takers = join_all((0..8).map(|_| store.take_pending(&state))).await;
    let taken: Vec<PendingSignIn> = takers.into_iter().filter_map(|t| t.expect("take")).collect();
    assert_eq!(taken.len(), 1, "of concurrent takers of one state, exactly one gets it");
    assert_eq!(
        taken[0].browser_redirect.as_deref(),
        Some(redirect),
        "the taken record is whole"
    );

    assert!(
        store.take_pending(&state).await.expect("take").is_none(),
        "a state is taken once"
    );
    assert!(
        store.pending(&state).await.expect("get").is_none(),
        "a taken state is gone"
    );
    assert!(
        !store.set_browser_redirect(&state, redirect).await.expect("redirect"),
        "a taken state takes no redirect"
    );
    assert!(
        store.pending(&state).await.expect("get").is_none(),
        "a redirect does not bring a state back"
    );

    store.take_pending(&newer).await.expect("take");
    assert!(
        store.latest_pending(&session, &server).await.expect("latest").is_none(),
        "once the latest sign-in is taken, the session has none for the server"
    );
    assert!(
        store.take_pending(&unique("state")).await.expect("take").is_none(),
        "an unknown state is nothing"
    );
}

/// A pending sign-in past its expiry is neither read, nor the latest, nor taken.
pub async fn pending_sign_ins_expire(store: &dyn SignInStore) {
    let (session, server) = (unique("session"), unique("server"));
    let (state, pending) = started(&session, &server, SHORT);
    store.put_pending(&state, pending).await.expect("put");
    assert!(
        store.pending(&state).await.expect("get").is_some(),
        "a sign-in waits until it expires"
    );
    tokio::time::sleep(PAST_SHORT).await;
    assert!(
        store.pending(&state).await.expect("get").is_none(),
        "an expired sign-in is not read"
    );
    assert!(
        store.latest_pending(&session, &server).await.expect("latest").is_none(),
        "an expired sign-in is not the latest"
    );
    assert!(
        !store
            .set_browser_redirect(&state, "https://app.example.com/")
            .await
            .expect("redirect"),
        "an expired sign-in takes no redirect"
    );
    assert!(
        store.take_pending(&state).await.expect("take").is_none(),
        "an expired sign-in is not taken"
    );
}

/// A client registration is kept by issuer until it is replaced or removed.
pub async fn registrations_are_kept_by_issuer(store: &dyn SignInStore) {
    let issuer = format!("https://{}.example.com", unique("issuer"));
    assert!(
        store.registration(&issuer).await.expect("get").is_none(),
        "an unknown issuer has none"
    );
    let dynamic = ClientRegistration::pre_registered("first", Some(Secret::new("first-secret")));
    store.put_registration(&issuer, dynamic).await.expect("put");
    let kept = store.registration(&issuer).await.expect("get").expect("kept");
    assert_eq!(kept.client_id, "first");
    assert!(
        kept.client_secret.is_some_and(|s| s.matches("first-secret")),
        "the secret is kept"
    );
    store
        .put_registration(&issuer, ClientRegistration::pre_registered("second", None))
        .await
        .expect("put");
    let kept = store.registration(&issuer).await.expect("get").expect("kept");
    assert_eq!(kept.client_id, "second", "a registration replaces the one before");
    store.remove_registration(&issuer).await.expect("remove");
    assert!(
        store.registration(&issuer).await.expect("get").is_none(),
        "a removed registration is gone"
    );
}

/// A grant is kept by owner and server with a generation no grant of theirs had before; removing
/// it hands it back; an owner's servers are theirs only.
pub async fn grants_are_kept_by_owner_and_server(store: &dyn SignInStore) {
    let owner = unique("owner");
    let longer = format!("{owner}x");
    assert!(
        store.grant(&owner, "github").await.expect("get").is_none(),
        "no grant yet"
    );

    let first = store
        .put_grant(&owner, "github", sample_grant("t1"))
        .await
        .expect("put");
    let held = store.grant(&owner, "github").await.expect("get").expect("kept");
    assert!(held.grant.access_token.matches("t1"), "the grant is kept");
    assert!(
        held.grant.refresh_token.is_some_and(|r| r.matches("t1-refresh")),
        "its refresh token too"
    );
    assert_eq!(held.generation, first);

    let second = store
        .put_grant(&owner, "github", sample_grant("t2"))
        .await
        .expect("put");
    assert_ne!(second, first, "a new grant has a new generation");
    let held = store.grant(&owner, "github").await.expect("get").expect("kept");
    assert!(held.grant.access_token.matches("t2"), "a grant replaces the one before");
    assert_eq!(held.generation, second);

    store.put_grant(&owner, "slack", sample_grant("t3")).await.expect("put");
    store.put_grant(&longer, "jira", sample_grant("t4")).await.expect("put");
    assert_eq!(
        store.servers_of(&owner).await.expect("list"),
        vec!["github".to_owned(), "slack".to_owned()],
        "an owner's servers, by name, and no one else's"
    );

    let removed = store.remove_grant(&owner, "github").await.expect("remove");
    assert!(
        removed.is_some_and(|g| g.access_token.matches("t2")),
        "removing hands the grant back"
    );
    assert!(
        store.grant(&owner, "github").await.expect("get").is_none(),
        "a removed grant is gone"
    );
    assert!(
        store.remove_grant(&owner, "github").await.expect("remove").is_none(),
        "removed once"
    );
    let third = store
        .put_grant(&owner, "github", sample_grant("t5"))
        .await
        .expect("put");
    assert!(
        third != first && third != second,
        "a grant after a sign-out has a new generation"
    );

    for (o, s) in [(&owner, "github"), (&owner, "slack"), (&longer, "jira")] {
        store.remove_grant(o, s).await.expect("remove");
    }
    assert!(
        store.servers_of(&owner).await.expect("list").is_empty(),
        "an owner without grants has none"
    );
}

/// A grant is replaced from a generation only while it is still of that generation: of
/// concurrent replacements from one generation, one is kept (with a new generation); one from a
/// generation replaced since, or of a grant removed, keeps nothing.
pub async fn grants_are_replaced_only_while_unchanged(store: &dyn SignInStore) {
    let owner = unique("owner");
    let owner = owner.as_str();
    let stale = |generation: u64| async move {
        let replaced = store
            .replace_grant(owner, "github", generation, sample_grant("stale"))
            .await
            .expect("replace");
        replaced.is_none()
    };
    let first = store.put_grant(owner, "github", sample_grant("t1")).await.expect("put");
    let replaced =
        join_all((0..8).map(|i| store.replace_grant(owner, "github", first, sample_grant(&format!("r{i}")))))
            .await
            .into_iter()
            .map(|r| r.expect("replace"))
            .collect::<Vec<_>>();
    let kept: Vec<u64> = replaced.into_iter().flatten().collect();
    assert_eq!(
        kept.len(),
        1,
        "of concurrent replacements from one generation, one is kept"
    );
    let second = kept[0];
    assert_ne!(second, first, "a replaced grant has a new generation");
    let held = store.grant(owner, "github").await.expect("get").expect("kept");
    assert_eq!(held.generation, second);
    assert!(
        held.grant.access_token.expose().starts_with('r'),
        "the replacement is kept"
    );
    assert_eq!(
        store.servers_of(owner).await.expect("list"),
        vec!["github".to_owned()],
        "a replaced grant is still the owner's"
    );

    assert!(
        stale(first).await,
        "a replacement from a generation replaced since keeps nothing"
    );
    let signed_in_again = store.put_grant(owner, "github", sample_grant("t2")).await.expect("put");
    assert!(stale(second).await, "nor one from before a new grant");
    let held = store.grant(owner, "github").await.expect("get").expect("kept");
    assert!(held.grant.access_token.matches("t2") && held.generation == signed_in_again);

    store.remove_grant(owner, "github").await.expect("remove");
    assert!(stale(signed_in_again).await, "a removed grant is not brought back");
    assert!(store.grant(owner, "github").await.expect("get").is_none());
}

/// Attempts are counted up to the limit within the window, per person; at the limit they are
/// refused (and not counted) until the oldest leaves the window.
pub async fn attempts_are_limited_within_their_window(store: &dyn SignInStore) {
    let (who, other) = (unique("who"), unique("who"));
    for n in 1..=3 {
        assert_eq!(
            store.count_attempt(&who, 3, SHORT).await.expect("count"),
            Attempt::Counted(n),
            "attempts below the limit are counted"
        );
    }
    match store.count_attempt(&who, 3, SHORT).await.expect("count") {
        Attempt::Refused { retry_in } => assert!(
            !retry_in.is_zero() && retry_in <= SHORT,
            "a refusal says when the oldest attempt leaves the window ({retry_in:?})"
        ),
        counted @ Attempt::Counted(_) => panic!("an attempt at the limit is refused, not {counted:?}"),
    }
    assert_eq!(
        store.count_attempt(&other, 3, SHORT).await.expect("count"),
        Attempt::Counted(1),
        "each person has a count of their own"
    );
    tokio::time::sleep(PAST_SHORT).await;
    assert_eq!(
        store.count_attempt(&who, 3, SHORT).await.expect("count"),
        Attempt::Counted(1),
        "attempts leave the window"
    );
}

/// While a refresh of a grant holds its guard, another refresh of the same grant waits; one of
/// another grant does not.
pub async fn refreshes_of_one_grant_run_one_at_a_time(store: &dyn SignInStore) {
    let owner = unique("owner");
    let held = store.refresh_guard(&owner, "github").await.expect("guard");
    let waited = tokio::time::timeout(Duration::from_millis(150), store.refresh_guard(&owner, "github")).await;
    assert!(waited.is_err(), "a second refresh of one grant waits for the first");
    let other = tokio::time::timeout(Duration::from_secs(2), store.refresh_guard(&owner, "slack")).await;
    assert!(other.is_ok(), "a refresh of another grant does not wait");
    drop(other);

    let next = async {
        store.refresh_guard(&owner, "github").await.expect("guard");
    };
    let release = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(held);
    };
    let both = tokio::time::timeout(Duration::from_secs(5), futures::future::join(next, release)).await;
    assert!(both.is_ok(), "the next refresh runs once the first drops its guard");
}

/// An exchanged token is kept for its key while fresh, with its fingerprint; forgetting a prefix
/// drops the keys under it only.
pub async fn exchange_entries_are_kept_while_fresh(store: &dyn SignInStore) {
    let session = unique("session");
    let (mine, theirs) = (format!("{session}\0github"), format!("{}\0github", unique("session")));
    let entry = |token: &str, print: u8| ExchangeEntry {
        fingerprint: [print; 32],
        token: ExchangedToken {
            token: Secret::new(token),
            issuer: "https://dex.example.com".to_owned(),
            expires_at: None,
        },
    };
    assert!(
        store.exchange_entry(&mine).await.expect("get").is_none(),
        "nothing kept yet"
    );
    let long = Duration::from_secs(60);
    store.put_exchange_entry(&mine, entry("a", 1), long).await.expect("put");
    store
        .put_exchange_entry(&theirs, entry("b", 2), long)
        .await
        .expect("put");
    assert_eq!(
        store.exchange_entry(&mine).await.expect("get"),
        Some(entry("a", 1)),
        "kept whole"
    );
    store.put_exchange_entry(&mine, entry("c", 3), long).await.expect("put");
    assert_eq!(
        store.exchange_entry(&mine).await.expect("get"),
        Some(entry("c", 3)),
        "an entry replaces the one before"
    );

    store.forget_exchange_entries(&format!("{session}\0"));
    assert!(gone(store, &mine).await, "forgetting a prefix drops its keys");
    assert_eq!(
        store.exchange_entry(&theirs).await.expect("get"),
        Some(entry("b", 2)),
        "forgetting a prefix leaves other keys"
    );
    let longer = format!("{theirs}x");
    store
        .put_exchange_entry(&longer, entry("e", 5), long)
        .await
        .expect("put");
    store.forget_exchange_entry(&theirs);
    assert!(gone(store, &theirs).await, "forgetting a key drops it");
    assert!(
        store.exchange_entry(&longer).await.expect("get").is_some(),
        "forgetting a key leaves the keys that start with it"
    );
    store.forget_exchange_entry(&longer);

    store
        .put_exchange_entry(&mine, entry("d", 4), SHORT)
        .await
        .expect("put");
    assert!(
        store.exchange_entry(&mine).await.expect("get").is_some(),
        "fresh until it expires"
    );
    tokio::time::sleep(PAST_SHORT).await;
    assert!(store.exchange_entry(&mine).await.expect("get").is_none(), "not after");
}

/// Whether `key`'s entry is gone within two seconds (a store may forget in the background).
async fn gone(store: &dyn SignInStore, key: &str) -> bool {
    let forgotten = async {
        while store.exchange_entry(key).await.expect("get").is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), forgotten).await.is_ok()
}
