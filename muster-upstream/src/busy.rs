//! [`Busy`]: how many requests a connection is carrying, so that a connection taken out of use
//! can be closed once the ones it carries have ended ([`UpstreamConnection::close_when_idle`]).
//!
//! ```ignore
//! let busy = Busy::default();
//! let request = busy.enter();
//! assert_eq!(busy.count(), 1);
//! drop(request);
//! busy.idle().await; // at once: nothing in flight
//! ```
//!
//! [`UpstreamConnection::close_when_idle`]: crate::UpstreamConnection::close_when_idle

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The requests in flight on one connection (shared by its refreshed copies).
#[derive(Debug, Default)]
pub(crate) struct Busy {
    count: AtomicUsize,
    idle: Notify,
}

/// One request in flight; it ends when dropped.
#[derive(Debug)]
pub(crate) struct InUse<'a>(&'a Busy);

impl Busy {
    /// Counts a request in flight until the returned guard is dropped.
    pub(crate) fn enter(&self) -> InUse<'_> {
        self.count.fetch_add(1, Ordering::SeqCst);
        InUse(self)
    }

    /// The requests in flight now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Returns once no request is in flight.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            // Registered before the count is read, so a request ending in between wakes it.
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::*;

    #[tokio::test]
    async fn idle_waits_for_every_request_in_flight_to_end() {
        let busy = Arc::new(Busy::default());
        busy.idle().await;
        let first = busy.enter();
        let second = busy.enter();
        assert_eq!(busy.count(), 2);
        let waiter = tokio::spawn({
            let busy = Arc::clone(&busy);
            async move { busy.idle().await }
        });
        drop(first);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "one request is still in flight");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("idle once the last one ended")
            .expect("no panic");
        assert_eq!(busy.count(), 0);
    }
}
