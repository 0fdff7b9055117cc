//! [`SignInNotices`]: how the replica that completes a sign-in tells the replica holding the
//! session that asked for it.

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::Result;

/// How many notices a slow subscriber may fall behind before it misses some.
pub(crate) const BACKLOG: usize = 256;

/// A sign-in that completed: the grant is in the store, for `session`'s holder to use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SignInNotice {
    /// The session that asked for the sign-in.
    pub session: String,
    /// Whose grant it is (the session, or the person's subject).
    pub owner: String,
    /// The MCPServer it signed in to.
    pub server: String,
    /// The link's state (the elicitation id a client was given).
    pub state: String,
}

impl SignInNotice {
    /// `session`'s sign-in to `server` through link `state` completed, with a grant of `owner`.
    pub fn signed_in(
        session: impl Into<String>,
        owner: impl Into<String>,
        server: impl Into<String>,
        state: impl Into<String>,
    ) -> Self {
        Self {
            session: session.into(),
            owner: owner.into(),
            server: server.into(),
            state: state.into(),
        }
    }
}

impl SignInNotice {
    /// Notices may have been missed (a subscription across the network was down): whatever a
    /// replica keeps of the grants may be out of date. It names no owner, session or link.
    pub fn some_missed() -> Self {
        Self::signed_in(String::new(), String::new(), String::new(), String::new())
    }

    /// Whether this is [`SignInNotice::some_missed`].
    pub fn is_some_missed(&self) -> bool {
        self.owner.is_empty()
    }

    /// `owner`'s grants changed (a sign-in to `server` completed where its link was issued):
    /// for the replicas that keep which servers an owner holds grants for. It names no session
    /// and no link (both empty): no replica has a session or a retry to act on.
    pub fn grant_changed(owner: impl Into<String>, server: impl Into<String>) -> Self {
        Self::signed_in(String::new(), owner, server, String::new())
    }
}

/// Completed sign-ins, told to every replica.
///
/// With replicas, a sign-in's callback may land on any of them (the state is in a shared
/// [`SignInStore`](super::SignInStore)), but the session that asked is held by one: only that one
/// can tell its client (`notifications/elicitation/complete`), let a retry that waits for the
/// sign-in go on, and connect the session with the new grant. The completing replica publishes a
/// [`SignInNotice`]; every replica subscribes, and the one holding the session acts on it.
///
/// [`LocalSignInNotices`] is the default: within this process (one gateway holds every session it
/// issued a link to, so it never needs to publish). `ValkeyNotices` (feature `valkey`) publishes
/// through Valkey's pub/sub, beside the Valkey store.
///
/// ```
/// use muster_auth::state::{LocalSignInNotices, SignInNotice, SignInNotices};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let notices = LocalSignInNotices::new();
/// let mut heard = notices.subscribe();
/// notices.publish(SignInNotice::signed_in("session-1", "session-1", "github", "state-1")).await?;
/// assert_eq!(heard.recv().await?.session, "session-1");
/// # Ok(()) }
/// ```
#[async_trait]
pub trait SignInNotices: Send + Sync + fmt::Debug {
    /// Tells every replica (this one too) that a sign-in completed. Fails with
    /// [`SignInStoreError::Unavailable`](super::SignInStoreError) when the notices cannot be
    /// sent.
    async fn publish(&self, notice: SignInNotice) -> Result<()>;

    /// The notices published from now on, by any replica. A receiver that falls behind by more
    /// than a few hundred misses the oldest (`RecvError::Lagged`).
    fn subscribe(&self) -> broadcast::Receiver<SignInNotice>;
}

/// The notices of one process. Never fails.
#[derive(Debug, Clone)]
pub struct LocalSignInNotices {
    sender: broadcast::Sender<SignInNotice>,
}

impl Default for LocalSignInNotices {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalSignInNotices {
    /// Notices nobody has subscribed to yet.
    pub fn new() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
        }
    }
}

#[async_trait]
impl SignInNotices for LocalSignInNotices {
    async fn publish(&self, notice: SignInNotice) -> Result<()> {
        // No subscriber: nobody to tell.
        let _ = self.sender.send(notice);
        Ok(())
    }

    fn subscribe(&self) -> broadcast::Receiver<SignInNotice> {
        self.sender.subscribe()
    }
}
