use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;

use super::*;
use crate::state::{MemorySignInStore, SignInStoreError, contract};

/// A memory store that can be made unavailable, as a store across the network is when it cannot
/// be reached.
#[derive(Debug, Default, Clone)]
struct Flaky {
    /// Shared by the clones: replicas of one store.
    store: Arc<MemorySignInStore>,
    down: Arc<AtomicBool>,
}

impl Flaky {
    fn up(&self) -> Result<()> {
        if self.down.load(Ordering::SeqCst) {
            return Err(SignInStoreError::unavailable("flaky at test:1", "connection refused"));
        }
        Ok(())
    }
}

#[async_trait]
impl SignInStore for Flaky {
    async fn put_pending(&self, state: &str, pending: PendingSignIn) -> Result<()> {
        self.up()?;
        self.store.put_pending(state, pending).await
    }
    async fn pending(&self, state: &str) -> Result<Option<PendingSignIn>> {
        self.up()?;
        self.store.pending(state).await
    }
    async fn latest_pending(&self, session: &str, server: &str) -> Result<Option<(String, PendingSignIn)>> {
        self.up()?;
        self.store.latest_pending(session, server).await
    }
    async fn set_browser_redirect(&self, state: &str, redirect: &str) -> Result<bool> {
        self.up()?;
        self.store.set_browser_redirect(state, redirect).await
    }
    async fn take_pending(&self, state: &str) -> Result<Option<PendingSignIn>> {
        self.up()?;
        self.store.take_pending(state).await
    }
    async fn registration(&self, issuer: &str) -> Result<Option<ClientRegistration>> {
        self.up()?;
        self.store.registration(issuer).await
    }
    async fn put_registration(&self, issuer: &str, registration: ClientRegistration) -> Result<()> {
        self.up()?;
        self.store.put_registration(issuer, registration).await
    }
    async fn remove_registration(&self, issuer: &str) -> Result<()> {
        self.up()?;
        self.store.remove_registration(issuer).await
    }
    async fn grant(&self, owner: &str, server: &str) -> Result<Option<HeldGrant>> {
        self.up()?;
        self.store.grant(owner, server).await
    }
    async fn put_grant(&self, owner: &str, server: &str, grant: Grant) -> Result<u64> {
        self.up()?;
        self.store.put_grant(owner, server, grant).await
    }
    async fn replace_grant(&self, owner: &str, server: &str, generation: u64, grant: Grant) -> Result<Option<u64>> {
        self.up()?;
        self.store.replace_grant(owner, server, generation, grant).await
    }
    async fn remove_grant(&self, owner: &str, server: &str) -> Result<Option<Grant>> {
        self.up()?;
        self.store.remove_grant(owner, server).await
    }
    async fn servers_of(&self, owner: &str) -> Result<Vec<String>> {
        self.up()?;
        self.store.servers_of(owner).await
    }
    async fn count_attempt(&self, who: &str, limit: usize, window: Duration) -> Result<Attempt> {
        self.up()?;
        self.store.count_attempt(who, limit, window).await
    }
    async fn refresh_guard(&self, owner: &str, server: &str) -> Result<RefreshGuard> {
        self.up()?;
        self.store.refresh_guard(owner, server).await
    }
    async fn exchange_entry(&self, key: &str) -> Result<Option<ExchangeEntry>> {
        self.up()?;
        self.store.exchange_entry(key).await
    }
    async fn put_exchange_entry(&self, key: &str, entry: ExchangeEntry, fresh_for: Duration) -> Result<()> {
        self.up()?;
        self.store.put_exchange_entry(key, entry, fresh_for).await
    }
    fn forget_exchange_entry(&self, key: &str) {
        self.store.forget_exchange_entry(key);
    }
    fn forget_exchange_entries(&self, prefix: &str) {
        self.store.forget_exchange_entries(prefix);
    }
}

/// A fallback over a flaky store, and the switch that makes the store unavailable.
fn fallback() -> (GrantFallback<Flaky>, Arc<AtomicBool>) {
    let flaky = Flaky::default();
    let down = Arc::clone(&flaky.down);
    (GrantFallback::new(flaky), down)
}

/// What the wrapped store itself holds for `owner` and `server`: the access token and the
/// generation.
async fn in_store(fallback: &GrantFallback<Flaky>, owner: &str, server: &str) -> Option<(String, u64)> {
    let held = fallback.get_ref().store.grant(owner, server).await.expect("memory");
    held.map(|h| (h.grant.access_token.expose().to_owned(), h.generation))
}

/// Puts `owner`'s grant for `server` with access token `token` through `store`.
async fn put(store: &GrantFallback<Flaky>, owner: &str, server: &str, token: &str) -> Result<u64> {
    store.put_grant(owner, server, contract::sample_grant(token)).await
}

/// A fallback holding session `s1`'s grant `t1` for github (and its generation), its store then
/// unavailable.
async fn signed_in_then_away() -> (GrantFallback<Flaky>, Arc<AtomicBool>, u64) {
    let (store, down) = fallback();
    let signed_in = put(&store, "s1", "github", "t1").await.expect("put");
    down.store(true, Ordering::SeqCst);
    (store, down, signed_in)
}

/// Two fallbacks over one flaky store, as two replicas over one Valkey, and its switch.
fn replicas() -> (GrantFallback<Flaky>, GrantFallback<Flaky>, Arc<AtomicBool>) {
    let flaky = Flaky::default();
    let down = Arc::clone(&flaky.down);
    (GrantFallback::new(flaky.clone()), GrantFallback::new(flaky), down)
}

/// A sample grant with access token `token` whose refresh token is known to rotate or not
/// (`None`: not known yet).
fn rotating(token: &str, rotates: Option<bool>) -> Grant {
    Grant {
        rotates_refresh_tokens: rotates,
        ..contract::sample_grant(token)
    }
}

fn token(held: &HeldGrant) -> &str {
    held.grant.access_token.expose()
}

#[tokio::test]
async fn the_fallback_keeps_the_contract_while_its_store_answers() {
    contract::check(&GrantFallback::new(MemorySignInStore::new())).await;
}

/// `owner`'s grant for github (`grant` makes it from an access token) is read, listed and
/// refreshed from this process's copy while the store is away, and written back on its next
/// read once the store answers.
async fn refreshed_here_while_away_and_written_back_on_the_next_read(owner: &str, grant: fn(&str) -> Grant) {
    let (store, down) = fallback();
    let signed_in = store.put_grant(owner, "github", grant("t1")).await.expect("put");
    down.store(true, Ordering::SeqCst);

    let held = store
        .grant(owner, "github")
        .await
        .expect("the copy answers")
        .expect("held");
    assert_eq!((token(&held), held.generation), ("t1", signed_in), "{owner}");
    assert_eq!(store.servers_of(owner).await.expect("the copies answer"), ["github"]);
    let guard = store.refresh_guard(owner, "github").await.expect("one refresh here");
    let refreshed = store.put_grant(owner, "github", grant("t2")).await.expect("kept here");
    drop(guard);
    assert!(
        refreshed != signed_in && refreshed & LOCAL_GENERATIONS != 0,
        "a generation of this process"
    );
    let held = store
        .grant(owner, "github")
        .await
        .expect("the copy answers")
        .expect("held");
    assert_eq!((token(&held), held.generation), ("t2", refreshed));

    down.store(false, Ordering::SeqCst);
    assert_eq!(
        in_store(&store, owner, "github").await,
        Some(("t1".to_owned(), signed_in)),
        "not written back yet"
    );
    let held = store.grant(owner, "github").await.expect("read").expect("held");
    let written = in_store(&store, owner, "github").await.expect("kept");
    assert_eq!(written.0, "t2", "the refreshed grant is written back");
    assert!(
        written.1 != signed_in && written.1 & LOCAL_GENERATIONS == 0,
        "with a new generation of the store's"
    );
    assert_eq!((token(&held), held.generation), ("t2", written.1));
    assert!(!store.shared.copies().any_unsynced());
}

#[tokio::test]
async fn a_sessions_grant_is_refreshed_here_while_the_store_is_away_and_written_back_on_the_next_read() {
    refreshed_here_while_away_and_written_back_on_the_next_read("s1", contract::sample_grant).await;
}

#[tokio::test]
async fn until_written_back_this_process_reads_its_refresh_not_the_stores_older_grant() {
    let (store, down, signed_in) = signed_in_then_away().await;
    put(&store, "s1", "github", "t2").await.expect("kept here");
    // A write-back in flight (begun, not ended) while the store answers again: reads get the copy.
    let write_back = store
        .shared
        .copies()
        .begin_write_back(&key("s1", "github"))
        .expect("it waits");
    down.store(false, Ordering::SeqCst);
    let held = store.grant("s1", "github").await.expect("read").expect("held");
    assert_eq!(token(&held), "t2");
    assert_eq!(in_store(&store, "s1", "github").await.map(|s| s.1), Some(signed_in));
    store
        .shared
        .copies()
        .end_write_back(&key("s1", "github"), &write_back, None);
    let held = store.grant("s1", "github").await.expect("read").expect("held");
    assert_eq!(
        in_store(&store, "s1", "github").await.map(|s| s.0).as_deref(),
        Some("t2")
    );
    assert_eq!(token(&held), "t2");
}

#[tokio::test]
async fn the_write_back_lands_in_the_background_once_the_store_answers() {
    let (store, down, _) = signed_in_then_away().await;
    for refresh in ["t2", "t3"] {
        put(&store, "s1", "github", refresh).await.expect("kept here");
    }
    tokio::time::sleep(FIRST_RETRY * 3).await;
    assert_eq!(
        in_store(&store, "s1", "github").await.map(|s| s.0).as_deref(),
        Some("t1")
    );
    down.store(false, Ordering::SeqCst);
    let mut written = None;
    for _ in 0..100 {
        written = in_store(&store, "s1", "github").await.map(|s| s.0);
        if written.as_deref() == Some("t3") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        written.as_deref(),
        Some("t3"),
        "the latest refresh is written back, unasked"
    );
    assert!(!store.shared.copies().any_unsynced());
}

#[tokio::test]
async fn a_write_back_is_dropped_when_a_new_sign_in_replaced_the_grant_meanwhile() {
    let (store, down, _) = signed_in_then_away().await;
    put(&store, "s1", "github", "refreshed").await.expect("kept here");
    down.store(false, Ordering::SeqCst);
    // A new sign-in, kept by the store itself (as another path to it would).
    let new = store
        .get_ref()
        .store
        .put_grant("s1", "github", contract::sample_grant("signed-in-again"))
        .await
        .expect("put");
    let held = store.grant("s1", "github").await.expect("read").expect("held");
    assert_eq!((token(&held), held.generation), ("signed-in-again", new));
    assert_eq!(
        in_store(&store, "s1", "github").await,
        Some(("signed-in-again".to_owned(), new)),
        "the new sign-in stays"
    );
    assert!(!store.shared.copies().any_unsynced(), "the refreshed copy is dropped");
}

#[tokio::test]
async fn a_persons_grant_not_known_not_to_rotate_fails_while_the_store_is_away_naming_the_store() {
    for rotates in [None, Some(true)] {
        let (store, down) = fallback();
        for owner in ["subject-x", "principal-1"] {
            let grant = rotating("t1", rotates);
            store.put_grant(owner, "github", grant).await.expect("put");
            store.grant(owner, "github").await.expect("read").expect("held");
        }
        down.store(true, Ordering::SeqCst);
        for owner in ["subject-x", "principal-1"] {
            let read = store
                .grant(owner, "github")
                .await
                .expect_err("no copy of a person's grant that may rotate");
            assert!(read.to_string().contains("flaky at test:1"), "{rotates:?}: {read}");
            let guard = store.refresh_guard(owner, "github").await.map(drop);
            assert!(guard.is_err(), "{rotates:?}: no refresh here");
            let refreshed = store.put_grant(owner, "github", rotating("t2", rotates)).await;
            assert!(refreshed.is_err(), "{rotates:?}: not kept here");
            assert!(store.servers_of(owner).await.is_err());
        }
        assert_eq!(store.copies(), 0, "{rotates:?}");
    }
}

#[tokio::test]
async fn a_persons_grant_known_not_to_rotate_is_refreshed_here_while_the_store_is_away_and_written_back() {
    for owner in ["subject-x", "principal-1"] {
        refreshed_here_while_away_and_written_back_on_the_next_read(owner, |t| rotating(t, Some(false))).await;
    }
}

#[tokio::test]
async fn of_two_replicas_refreshing_a_persons_grant_while_the_store_is_away_the_first_write_back_wins() {
    let (one, two, down) = replicas();
    let signed_in = one
        .put_grant("subject-x", "github", rotating("t1", Some(false)))
        .await
        .expect("put");
    two.grant("subject-x", "github").await.expect("read").expect("held");
    down.store(true, Ordering::SeqCst);
    for (replica, refreshed) in [(&one, "one-t2"), (&two, "two-t2")] {
        let _guard = replica.refresh_guard("subject-x", "github").await.expect("here");
        let grant = rotating(refreshed, Some(false));
        replica
            .put_grant("subject-x", "github", grant)
            .await
            .expect("kept here");
    }
    down.store(false, Ordering::SeqCst);

    let first = two.grant("subject-x", "github").await.expect("read").expect("held");
    assert_eq!(token(&first), "two-t2", "written back first");
    assert!(first.generation != signed_in && first.generation & LOCAL_GENERATIONS == 0);
    let second = one.grant("subject-x", "github").await.expect("read").expect("held");
    assert_eq!(
        (token(&second), second.generation),
        ("two-t2", first.generation),
        "the later write-back is dropped, and the store's grant read instead"
    );
    assert!(!one.shared.copies().any_unsynced(), "nothing waits to be written back");
    let again = one.grant("subject-x", "github").await.expect("read").expect("held");
    assert_eq!(token(&again), "two-t2");
    assert_eq!(
        in_store(&one, "subject-x", "github").await.map(|s| s.0).as_deref(),
        Some("two-t2")
    );
}

#[tokio::test]
async fn a_persons_grant_leaves_no_copy_once_it_rotates_or_is_signed_out() {
    let (store, down) = fallback();
    for owner in ["subject-x", "subject-y"] {
        let grant = rotating("t1", Some(false));
        store.put_grant(owner, "github", grant).await.expect("put");
    }
    assert_eq!(store.copies(), 2);
    // A refresh through the store answered a new refresh token: from then on it rotates.
    let grant = rotating("t2", Some(true));
    store.put_grant("subject-x", "github", grant).await.expect("put");
    store.remove_grant("subject-y", "github").await.expect("signed out");
    assert_eq!(store.copies(), 0);
    down.store(true, Ordering::SeqCst);
    for owner in ["subject-x", "subject-y"] {
        assert!(store.grant(owner, "github").await.is_err(), "{owner}");
    }
}

#[tokio::test]
async fn a_grant_this_process_never_saw_is_not_made_up_while_the_store_is_away() {
    let (store, down) = fallback();
    down.store(true, Ordering::SeqCst);
    assert!(store.grant("s1", "github").await.is_err());
    assert!(store.servers_of("s1").await.is_err());
    assert!(store.refresh_guard("s1", "github").await.is_err());
    assert!(put(&store, "s1", "github", "t1").await.is_err());
}

#[tokio::test]
async fn a_removed_grant_leaves_no_copy_even_while_the_store_is_away() {
    let (store, down) = fallback();
    for server in ["github", "slack"] {
        put(&store, "s1", server, "t1").await.expect("put");
    }
    store.remove_grant("s1", "slack").await.expect("removed");
    down.store(true, Ordering::SeqCst);
    // The session ends: its grants are removed, the store failing or not.
    assert!(store.remove_grant("s1", "github").await.is_err());
    assert_eq!(store.copies(), 0);
    assert!(store.grant("s1", "github").await.is_err());
}

#[tokio::test]
async fn copies_stay_within_the_capacity_the_least_recently_used_going_first() {
    let (store, down) = fallback();
    let store = store.with_capacity(2);
    for session in ["s1", "s2"] {
        put(&store, session, "github", session).await.expect("put");
    }
    store.grant("s1", "github").await.expect("read"); // s2 is now the least recently used
    put(&store, "s3", "github", "s3").await.expect("put");
    assert_eq!(store.copies(), 2);
    down.store(true, Ordering::SeqCst);
    assert!(store.grant("s2", "github").await.is_err(), "evicted");
    for session in ["s1", "s3"] {
        let held = store.grant(session, "github").await.expect("copy").expect("held");
        assert_eq!(token(&held), session);
    }
}

#[tokio::test]
async fn refreshes_of_one_grant_run_one_at_a_time_here_while_the_store_is_away() {
    let (store, down) = fallback();
    for server in ["github", "slack"] {
        put(&store, "s1", server, "t1").await.expect("put");
    }
    down.store(true, Ordering::SeqCst);
    let held = store.refresh_guard("s1", "github").await.expect("guard");
    let waited = tokio::time::timeout(Duration::from_millis(100), store.refresh_guard("s1", "github")).await;
    assert!(waited.is_err(), "a second refresh of the grant waits");
    let other = tokio::time::timeout(Duration::from_millis(100), store.refresh_guard("s1", "slack")).await;
    assert!(other.is_ok_and(|g| g.is_ok()), "another grant's does not");
    drop(held);
    let next = tokio::time::timeout(Duration::from_secs(1), store.refresh_guard("s1", "github")).await;
    assert!(next.is_ok_and(|g| g.is_ok()), "the next goes once the first is done");
}
