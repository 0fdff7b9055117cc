use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use super::{contract, *};
use crate::oauth::store::{EncryptedGrantStore, GrantStoreKey};

#[tokio::test]
async fn the_memory_store_keeps_the_contract() {
    contract::check(&MemorySignInStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_many_tasks_taking_one_state_on_many_threads_one_gets_it() {
    let store = Arc::new(MemorySignInStore::new());
    for _ in 0..20 {
        let (started, pending) =
            PendingSignIn::start(contract::sample_request("s", "github"), Duration::from_secs(60)).expect("starts");
        store.put_pending(&started.state, pending).await.expect("put");
        let start = Arc::new(tokio::sync::Barrier::new(16));
        let takers: Vec<_> = (0..16)
            .map(|_| {
                let (store, state, start) = (Arc::clone(&store), started.state.clone(), Arc::clone(&start));
                tokio::spawn(async move {
                    start.wait().await;
                    store.take_pending(&state).await.expect("take").is_some()
                })
            })
            .collect();
        let mut got = 0;
        for taker in takers {
            got += usize::from(taker.await.expect("the taker ran"));
        }
        assert_eq!(got, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refreshes_of_one_grant_never_overlap_and_leave_no_lock_behind() {
    let store = Arc::new(MemorySignInStore::new());
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let refreshes: Vec<_> = (0..12)
        .map(|_| {
            let (store, running, most) = (Arc::clone(&store), Arc::clone(&running), Arc::clone(&most));
            tokio::spawn(async move {
                let _guard = store.refresh_guard("subject-x", "github").await.expect("guard");
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    for refresh in refreshes {
        refresh.await.expect("the refresh ran");
    }
    assert_eq!(most.load(Ordering::SeqCst), 1);
    assert_eq!(store.refresh_locks(), 0);
}

#[tokio::test]
async fn a_refusal_waits_for_the_oldest_attempt_to_leave_the_window() {
    let store = MemorySignInStore::new();
    let window = Duration::from_secs(60);
    for _ in 0..10 {
        store.count_attempt("a", 10, window).await.expect("count");
    }
    match store.count_attempt("a", 10, window).await.expect("count") {
        Attempt::Refused { retry_in } => assert!(retry_in > Duration::from_secs(59) && retry_in <= window),
        counted @ Attempt::Counted(_) => panic!("{counted:?}"),
    }
}

#[tokio::test]
async fn only_durable_owners_grants_are_written_to_the_grant_file_and_read_back() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key = GrantStoreKey::generate();
    let open = || EncryptedGrantStore::open(dir.path(), key.clone()).expect("opens");
    let store = MemorySignInStore::with_grant_file(open()).expect("loads");
    store
        .put_grant("transport-1", "github", contract::sample_grant("t1"))
        .await
        .expect("put");
    store
        .put_grant("subject-x", "slack", contract::sample_grant("t2"))
        .await
        .expect("put");
    store
        .put_grant("principal-1", "jira", contract::sample_grant("t3"))
        .await
        .expect("put");
    store
        .put_grant("principal-1", "wiki", contract::sample_grant("t4"))
        .await
        .expect("put");
    store.remove_grant("principal-1", "wiki").await.expect("remove");

    let restarted = MemorySignInStore::with_grant_file(open()).expect("loads");
    assert!(restarted.grant("transport-1", "github").await.expect("get").is_none());
    assert!(restarted.grant("principal-1", "wiki").await.expect("get").is_none());
    let kept = restarted.grant("subject-x", "slack").await.expect("get").expect("kept");
    assert!(kept.grant.access_token.matches("t2"));
    assert_eq!(
        restarted.servers_of("principal-1").await.expect("list"),
        vec!["jira".to_owned()]
    );
}
