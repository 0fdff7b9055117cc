//! [`ValkeyNotices`]: sign-in notices across replicas through Valkey's pub/sub, on the channel
//! `<prefix>signin:notices`.
//!
//! A notice is sealed as the store's values are (it names a session and a link's state), bound
//! to the channel. Each replica holds one subscription (its own connection), read by a task that
//! hands every notice to the local subscribers and, when the connection drops, subscribes again
//! after a second; notices published meanwhile are missed (pub/sub keeps nothing), and the grant
//! is still in the store for the session's next request. Once subscribed again, the subscribers
//! are told that some may have been missed ([`SignInNotice::some_missed`]).

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::broadcast;

use super::{
    link::{Link, Target},
    record::{NOTICE, Sealed},
    unavailable,
};
use crate::state::{
    Result,
    notices::{BACKLOG, SignInNotice, SignInNotices},
};

/// How long a replica waits before subscribing again after its subscription dropped.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// Sign-in notices through Valkey's pub/sub, made by
/// [`ValkeyStore::notices`](super::ValkeyStore::notices). Cheap to clone; the subscription ends
/// with the last clone.
#[derive(Debug, Clone)]
pub struct ValkeyNotices {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    conn: Link,
    store: String,
    channel: String,
    sealed: Sealed,
    sender: broadcast::Sender<SignInNotice>,
    subscription: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.subscription.abort();
    }
}

impl ValkeyNotices {
    pub(super) fn new(conn: Link, store: String, channel: String, sealed: Sealed) -> Self {
        let sender = broadcast::channel(BACKLOG).0;
        let subscription = tokio::spawn(subscribe(
            Arc::clone(conn.target()),
            channel.clone(),
            sealed.clone(),
            sender.clone(),
        ));
        Self {
            inner: Arc::new(Inner {
                conn,
                store,
                channel,
                sealed,
                sender,
                subscription,
            }),
        }
    }
}

#[async_trait]
impl SignInNotices for ValkeyNotices {
    async fn publish(&self, notice: SignInNotice) -> Result<()> {
        let inner = &self.inner;
        let sealed = inner
            .sealed
            .seal(NOTICE, &inner.channel, &notice)
            .map_err(|e| unavailable(&inner.store, e))?;
        redis::cmd("PUBLISH")
            .arg(&inner.channel)
            .arg(sealed)
            .query_async::<i64>(&mut inner.conn.clone())
            .await
            .map(drop)
            .map_err(|e| unavailable(&inner.store, e))
    }

    fn subscribe(&self) -> broadcast::Receiver<SignInNotice> {
        self.inner.sender.subscribe()
    }
}

/// Reads the channel for as long as the notices live, subscribing again when the connection
/// drops.
async fn subscribe(target: Arc<Target>, channel: String, sealed: Sealed, sender: broadcast::Sender<SignInNotice>) {
    let mut first = true;
    loop {
        match target.pubsub().await {
            Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                Ok(()) => {
                    if !std::mem::take(&mut first) {
                        // Notices published while the subscription was down are lost.
                        drop(sender.send(SignInNotice::some_missed()));
                    }
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        match sealed.open::<SignInNotice>(NOTICE, &channel, message.get_payload_bytes().to_vec()) {
                            Ok(notice) => drop(sender.send(notice)),
                            Err(e) => tracing::warn!(error = %e, "a sign-in notice from valkey is dropped"),
                        }
                    }
                    tracing::warn!("the valkey subscription to sign-in notices dropped; subscribing again");
                }
                Err(e) => tracing::warn!(error = %e, "cannot subscribe to sign-in notices in valkey"),
            },
            Err(e) => tracing::debug!(error = %e, "cannot reach valkey for sign-in notices"),
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}
