//! A gateway asked about a session it does not hold answers 404, as the streamable-HTTP
//! transport says, so that the client starts a new session: what a replica behind a load
//! balancer answers when a session's requests reach it instead of the replica holding the
//! session (after that one was restarted, say). Two reference gateway processes on loopback.

mod common;

use std::time::Duration;

use common::{
    call_meta, connect,
    raw_session::RawSession,
    replicas::{ReplicaSettings, Replicas},
    text,
};
use reqwest::Method;
use serde_json::{Value, json};

/// Asserts `answer` is the 404 of a session this gateway does not hold.
fn assert_not_found(what: &str, (status, body): &(u16, String)) {
    assert_eq!(*status, 404, "{what}: {body}");
    let error: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {body}"));
    assert_eq!(error["error"]["code"], -32001, "{what}: {error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("start a new session"), "{what}: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_answers_404_to_post_get_and_delete_of_a_session_it_does_not_hold() {
    let replicas = Replicas::start(2, &ReplicaSettings::default());
    let (one, two) = (&replicas[0], &replicas[1]);
    let session = RawSession::open(&one.mcp()).await;

    for method in [Method::POST, Method::GET, Method::DELETE] {
        let answer = session.status_at(&two.mcp(), method.clone()).await;
        assert_not_found(&format!("{method} on the other replica"), &answer);
    }
    // The replica holding it still does: asking the other one ended nothing.
    let (status, body) = session.status_at(&one.mcp(), Method::POST).await;
    assert_eq!(status, 200, "{body}");

    // Once ended, the session is unknown to its own replica too.
    let (status, body) = session.status_at(&one.mcp(), Method::DELETE).await;
    assert_eq!(status, 204, "{body}");
    for method in [Method::POST, Method::GET, Method::DELETE] {
        let answer = session.status_at(&one.mcp(), method.clone()).await;
        assert_not_found(&format!("{method} after the end"), &answer);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_replica_restarted_starts_a_new_session_and_its_next_call_is_answered() {
    let mut replicas = Replicas::start(1, &ReplicaSettings::default());
    let client = connect(&replicas[0].mcp(), &[], None).await;
    let listed = call_meta(&client, "list_tools", json!({})).await;
    assert_ne!(listed.is_error, Some(true), "{}", text(&listed));

    // The restarted process holds no session: the client's next request gets 404, and rmcp's
    // client opens a new session and sends the request again.
    replicas[0].stop();
    replicas[0].start_again();
    let again = tokio::time::timeout(Duration::from_secs(20), call_meta(&client, "list_tools", json!({})))
        .await
        .expect("answered");
    assert_ne!(again.is_error, Some(true), "{}", text(&again));
    let _ = client.cancel().await;
}
