//! What became of each sign-in link: pending until its OAuth callback ran, then signed in or
//! refused. A 2026-07-28 client that accepted a sign-in retries its call at once; the retry
//! waits here until the person has finished (or [`SIGN_IN_WAIT`] passed) before the call runs.
//!
//! ```
//! # tokio_test_block_on(async {
//! use std::time::Duration;
//! use muster_gateway::auth::outcome::{LinkOutcomes, Outcome, Waited};
//!
//! let outcomes = LinkOutcomes::default();
//! outcomes.issue("state-1", "session-a", "github");
//! outcomes.settle("state-1", Outcome::SignedIn);
//! let waited = outcomes
//!     .wait("state-1", "session-a", "github", Duration::from_secs(1), Default::default())
//!     .await;
//! assert_eq!(waited, Waited::SignedIn);
//! // Another session cannot wait on someone else's link.
//! let other = outcomes
//!     .wait("state-1", "session-b", "github", Duration::from_secs(1), Default::default())
//!     .await;
//! assert_eq!(other, Waited::Unknown);
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_time().build().expect("in the test").block_on(f)
//! # }
//! ```

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long a retry that accepted a sign-in waits for the sign-in's callback.
pub const SIGN_IN_WAIT: Duration = Duration::from_secs(5 * 60);

/// How long the outcome of a link is kept: the link's own lifetime (10 minutes) and a retry's
/// wait after it.
const KEPT_FOR: Duration = Duration::from_secs(15 * 60);

/// What became of one link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its callback has not run.
    Pending,
    /// Its callback signed the session in.
    SignedIn,
    /// Its callback ran and did not sign the session in (the reason, free of secrets).
    Refused(String),
}

/// What a wait for a link ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// The session is signed in.
    SignedIn,
    /// The callback ran and did not sign the session in.
    Refused(String),
    /// The callback did not run in time.
    TimedOut,
    /// The caller went away.
    Cancelled,
    /// No such link for this session and server (expired, or someone else's).
    Unknown,
}

/// The outcomes of the links issued in the last 15 minutes (`KEPT_FOR`), by state.
#[derive(Debug, Default)]
pub struct LinkOutcomes {
    links: Mutex<HashMap<String, Watched>>,
}

#[derive(Debug)]
struct Watched {
    session: String,
    server: String,
    issued: Instant,
    outcome: watch::Sender<Outcome>,
}

impl LinkOutcomes {
    /// Starts watching link `state`, issued to `session` for `server`.
    pub fn issue(&self, state: &str, session: &str, server: &str) {
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        links.retain(|_, w| w.issued.elapsed() < KEPT_FOR);
        links.insert(
            state.to_owned(),
            Watched {
                session: session.to_owned(),
                server: server.to_owned(),
                issued: Instant::now(),
                outcome: watch::Sender::new(Outcome::Pending),
            },
        );
    }

    /// Records what link `state`'s callback did; whoever waits on it wakes.
    pub fn settle(&self, state: &str, outcome: Outcome) {
        if let Some(watched) = self.links.lock().unwrap_or_else(|e| e.into_inner()).get(state) {
            watched.outcome.send_replace(outcome);
        }
    }

    /// Waits until link `state` of `session` for `server` settles, at most `timeout`, or until
    /// `cancel` fires.
    pub async fn wait(
        &self,
        state: &str,
        session: &str,
        server: &str,
        timeout: Duration,
        cancel: CancellationToken,
    ) -> Waited {
        let mut outcome = {
            let links = self.links.lock().unwrap_or_else(|e| e.into_inner());
            match links.get(state) {
                Some(w) if w.session == session && w.server == server && w.issued.elapsed() < KEPT_FOR => {
                    w.outcome.subscribe()
                }
                _ => return Waited::Unknown,
            }
        };
        let settled = async {
            match outcome.wait_for(|o| *o != Outcome::Pending).await {
                Ok(o) => o.clone(),
                Err(_) => Outcome::Refused("the sign-in link was withdrawn".to_owned()),
            }
        };
        tokio::select! {
            outcome = settled => match outcome {
                Outcome::SignedIn => Waited::SignedIn,
                Outcome::Refused(reason) => Waited::Refused(reason),
                Outcome::Pending => Waited::TimedOut,
            },
            () = tokio::time::sleep(timeout) => Waited::TimedOut,
            () = cancel.cancelled() => Waited::Cancelled,
        }
    }

    /// Whether link `state` was issued here in the last 15 minutes (its session is held here).
    pub fn issued_here(&self, state: &str) -> bool {
        self.links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(state)
            .is_some_and(|w| w.issued.elapsed() < KEPT_FOR)
    }

    /// Stops watching link `state` (it was withdrawn); waiters wake refused.
    pub fn forget(&self, state: &str) {
        self.links.lock().unwrap_or_else(|e| e.into_inner()).remove(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_when_the_callback_settles_the_link() {
        let outcomes = std::sync::Arc::new(LinkOutcomes::default());
        outcomes.issue("s", "a", "github");
        let waiter = {
            let outcomes = outcomes.clone();
            tokio::spawn(async move {
                outcomes
                    .wait("s", "a", "github", Duration::from_secs(10), CancellationToken::new())
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        outcomes.settle("s", Outcome::Refused("access_denied".into()));
        assert_eq!(
            waiter.await.expect("in the test"),
            Waited::Refused("access_denied".into())
        );
    }

    #[tokio::test]
    async fn a_wait_ends_at_its_timeout_or_cancellation() {
        let outcomes = LinkOutcomes::default();
        outcomes.issue("s", "a", "github");
        let waited = outcomes
            .wait("s", "a", "github", Duration::from_millis(20), CancellationToken::new())
            .await;
        assert_eq!(waited, Waited::TimedOut);
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert_eq!(
            outcomes.wait("s", "a", "github", Duration::from_secs(10), cancel).await,
            Waited::Cancelled
        );
    }

    #[tokio::test]
    async fn only_the_session_and_server_of_a_link_can_wait_on_it() {
        let outcomes = LinkOutcomes::default();
        outcomes.issue("s", "a", "github");
        let quick = Duration::from_millis(10);
        assert_eq!(
            outcomes.wait("s", "b", "github", quick, CancellationToken::new()).await,
            Waited::Unknown
        );
        assert_eq!(
            outcomes.wait("s", "a", "slack", quick, CancellationToken::new()).await,
            Waited::Unknown
        );
        assert_eq!(
            outcomes
                .wait("nope", "a", "github", quick, CancellationToken::new())
                .await,
            Waited::Unknown
        );
    }

    #[tokio::test]
    async fn a_forgotten_link_wakes_its_waiters_refused() {
        let outcomes = std::sync::Arc::new(LinkOutcomes::default());
        outcomes.issue("s", "a", "github");
        let waiter = {
            let outcomes = outcomes.clone();
            tokio::spawn(async move {
                outcomes
                    .wait("s", "a", "github", Duration::from_secs(10), CancellationToken::new())
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        outcomes.forget("s");
        assert!(matches!(waiter.await.expect("in the test"), Waited::Refused(_)));
    }
}
