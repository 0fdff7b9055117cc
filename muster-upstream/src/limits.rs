//! Concurrency limits: how many calls one session, or one downstream server, has in flight at
//! once (`aggregator.limits`).
//!
//! A call takes a slot before it runs. When none is free it waits in a bounded queue, up to
//! `queueTimeoutSeconds`; when the queue is full, or the wait runs out, it is refused with
//! [`ToolError::Busy`], naming whose slots ran out and the key that sets them. Nothing is run
//! for a refused call, so a retry is safe.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! use muster_upstream::limits::CallLimiter;
//!
//! let limiter = CallLimiter::new("server echo", 1, 0, Duration::from_secs(1), "maxConcurrentCallsPerServer");
//! let first = limiter.acquire().await.expect("a free slot");
//! let second = limiter.acquire().await.expect_err("no slot and no queue");
//! assert!(second.to_string().starts_with("server echo is busy: 1 calls in flight"));
//! drop(first);
//! assert!(limiter.acquire().await.is_ok());
//! # }
//! ```

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use muster_core::{SessionId, ToolError, config::Limits, error::BusyReason};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Slots for one scope (a session or a server) with a bounded queue.
#[derive(Debug)]
pub struct CallLimiter {
    scope: String,
    slots: Arc<Semaphore>,
    in_flight: usize,
    max_queued: usize,
    queued: AtomicUsize,
    queue_timeout: Duration,
    limit_key: &'static str,
}

/// A taken slot; dropping it frees the slot.
#[derive(Debug)]
pub struct CallSlot {
    _permit: OwnedSemaphorePermit,
}

impl CallLimiter {
    /// `in_flight` slots for `scope`, with up to `max_queued` callers waiting up to
    /// `queue_timeout`; refusals name `limit_key`.
    pub fn new(
        scope: impl Into<String>,
        in_flight: usize,
        max_queued: usize,
        queue_timeout: Duration,
        limit_key: &'static str,
    ) -> Self {
        Self {
            scope: scope.into(),
            slots: Arc::new(Semaphore::new(in_flight)),
            in_flight,
            max_queued,
            queued: AtomicUsize::new(0),
            queue_timeout,
            limit_key,
        }
    }

    /// Takes a slot: at once when one is free, otherwise after waiting in the queue; refused
    /// as busy when the queue is full or the wait runs out.
    pub async fn acquire(&self) -> Result<CallSlot, ToolError> {
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(CallSlot { _permit: permit });
        }
        let Some(waiting) = QueuePlace::take(&self.queued, self.max_queued) else {
            return Err(self.busy(BusyReason::QueueFull { queued: self.queued() }));
        };
        let started = Instant::now();
        let permit = tokio::time::timeout(self.queue_timeout, Arc::clone(&self.slots).acquire_owned()).await;
        drop(waiting);
        match permit {
            Ok(Ok(permit)) => Ok(CallSlot { _permit: permit }),
            // The semaphore is never closed; a timeout is the only way here.
            _ => Err(self.busy(BusyReason::WaitedOut {
                waited: started.elapsed(),
            })),
        }
    }

    /// Calls waiting for a slot now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Slots free now.
    pub fn free(&self) -> usize {
        self.slots.available_permits()
    }

    fn busy(&self, why: BusyReason) -> ToolError {
        ToolError::Busy {
            scope: self.scope.clone(),
            in_flight: self.in_flight,
            limit_key: self.limit_key,
            why,
        }
    }
}

/// A place in a limiter's queue, given back on drop.
struct QueuePlace<'a>(&'a AtomicUsize);

impl<'a> QueuePlace<'a> {
    fn take(queued: &'a AtomicUsize, max: usize) -> Option<Self> {
        queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .ok()
            .map(|_| Self(queued))
    }
}

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The gateway's limiters: one per downstream server (shared by every connection to it) and
/// one per session with calls in flight.
#[derive(Debug)]
pub struct CallLimits {
    limits: Limits,
    servers: Mutex<HashMap<String, Arc<CallLimiter>>>,
    sessions: Mutex<HashMap<SessionId, Arc<CallLimiter>>>,
}

impl CallLimits {
    /// Limiters with `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            servers: Mutex::default(),
            sessions: Mutex::default(),
        }
    }

    /// The limiter of downstream server `server`.
    pub fn server(&self, server: &str) -> Arc<CallLimiter> {
        let mut servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(limiter) = servers.get(server) {
            return Arc::clone(limiter);
        }
        let limiter = Arc::new(self.limiter(
            format!("server {server}"),
            self.limits.max_concurrent_calls_per_server,
            "maxConcurrentCallsPerServer",
        ));
        servers.insert(server.to_owned(), Arc::clone(&limiter));
        limiter
    }

    /// Forgets the limiter of a server that is gone (calls holding its slots finish normally).
    pub fn forget_server(&self, server: &str) {
        self.servers.lock().unwrap_or_else(|e| e.into_inner()).remove(server);
    }

    /// Takes one of `session`'s call slots. The anonymous session (stateless callers, who share
    /// it) is not limited per session.
    pub async fn session_slot(self: &Arc<Self>, session: &SessionId) -> Result<Option<SessionSlot>, ToolError> {
        if *session == SessionId::anonymous() {
            return Ok(None);
        }
        let limiter = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(sessions.entry(session.clone()).or_insert_with(|| {
                Arc::new(self.limiter(
                    format!("session {session}"),
                    self.limits.max_concurrent_calls_per_session,
                    "maxConcurrentCallsPerSession",
                ))
            }))
        };
        // On refusal, dropping `slot` forgets a limiter nobody else uses.
        let mut slot = SessionSlot {
            limits: Arc::clone(self),
            session: session.clone(),
            limiter: Some(Arc::clone(&limiter)),
            slot: None,
        };
        let acquired = limiter.acquire().await;
        drop(limiter);
        slot.slot = Some(acquired?);
        Ok(Some(slot))
    }

    /// Sessions with a limiter now (those with calls in flight or waiting).
    pub fn sessions_tracked(&self) -> usize {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn limiter(&self, scope: String, in_flight: usize, key: &'static str) -> CallLimiter {
        CallLimiter::new(
            scope,
            in_flight.max(1),
            self.limits.max_queued_calls,
            Duration::from_secs(self.limits.queue_timeout_seconds),
            key,
        )
    }
}

/// A session's call slot. When the last one of a session is dropped, its limiter goes too, so
/// the map holds only sessions with calls in flight.
#[derive(Debug)]
pub struct SessionSlot {
    limits: Arc<CallLimits>,
    session: SessionId,
    limiter: Option<Arc<CallLimiter>>,
    slot: Option<CallSlot>,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.slot.take();
        let Some(limiter) = self.limiter.take() else {
            return;
        };
        let mut sessions = self.limits.sessions.lock().unwrap_or_else(|e| e.into_inner());
        // Under the lock nobody can clone the map's Arc: the map's and ours are the only
        // references exactly when no other call of the session holds or awaits a slot.
        if Arc::strong_count(&limiter) == 2 {
            sessions.remove(&self.session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_session: usize, queued: usize) -> Arc<CallLimits> {
        Arc::new(CallLimits::new(
            Limits::default()
                .with_max_concurrent_calls_per_session(per_session)
                .with_max_queued_calls(queued)
                .with_queue_timeout_seconds(0),
        ))
    }

    #[tokio::test]
    async fn a_queued_call_runs_when_a_slot_frees() {
        let limiter = Arc::new(CallLimiter::new("s", 1, 1, Duration::from_secs(5), "k"));
        let first = limiter.acquire().await.expect("a free slot");
        let waiter = tokio::spawn({
            let limiter = Arc::clone(&limiter);
            async move { limiter.acquire().await.map(|_| ()) }
        });
        while limiter.queued() == 0 {
            tokio::task::yield_now().await;
        }
        // The queue holds one: a third is refused at once.
        let third = limiter.acquire().await.expect_err("no slot and no room to wait");
        assert!(
            matches!(
                third,
                ToolError::Busy {
                    why: BusyReason::QueueFull { queued: 1 },
                    ..
                }
            ),
            "{third}"
        );
        assert!(
            third
                .to_string()
                .contains("1 more waiting, as many as aggregator.limits.maxQueuedCalls allows"),
            "{third}"
        );
        drop(first);
        waiter
            .await
            .expect("the waiter ran")
            .expect("the queued call gets the freed slot");
        assert_eq!(limiter.queued(), 0);
        assert_eq!(limiter.free(), 1);
    }

    #[tokio::test]
    async fn a_wait_that_runs_out_is_refused_and_leaves_the_queue() {
        let limiter = CallLimiter::new(
            "server slow",
            1,
            4,
            Duration::from_millis(50),
            "maxConcurrentCallsPerServer",
        );
        let _held = limiter.acquire().await.expect("a free slot");
        let err = limiter.acquire().await.expect_err("no slot freed in time");
        let text = err.to_string();
        assert!(text.contains("server slow is busy"), "{text}");
        assert!(text.contains("aggregator.limits.maxConcurrentCallsPerServer"), "{text}");
        assert!(
            text.contains("no slot freed within 0.") && text.contains("(aggregator.limits.queueTimeoutSeconds)"),
            "{text}"
        );
        assert_eq!(limiter.queued(), 0);
    }

    #[tokio::test]
    async fn sessions_are_limited_apart_and_forgotten_when_idle() {
        let limits = limits(1, 0);
        let a = SessionId::new("a");
        let b = SessionId::new("b");
        let slot_a = limits.session_slot(&a).await.expect("a slot");
        assert!(slot_a.is_some());
        // Session a is full; b is not affected.
        let refused = limits.session_slot(&a).await.expect_err("session a is full");
        assert!(refused.to_string().starts_with("session a is busy"), "{refused}");
        let slot_b = limits.session_slot(&b).await.expect("a slot");
        assert_eq!(limits.sessions_tracked(), 2);
        drop(slot_a);
        drop(slot_b);
        assert_eq!(limits.sessions_tracked(), 0, "idle sessions leave no limiter behind");
        // The anonymous session is never limited per session.
        let anon = SessionId::anonymous();
        let one = limits.session_slot(&anon).await.expect("a slot");
        let two = limits.session_slot(&anon).await.expect("a slot");
        assert!(one.is_none() && two.is_none());
    }

    #[tokio::test]
    async fn one_limiter_per_server() {
        let limits = CallLimits::new(Limits::default().with_max_concurrent_calls_per_server(2));
        let first = limits.server("echo");
        assert!(Arc::ptr_eq(&first, &limits.server("echo")));
        assert!(!Arc::ptr_eq(&first, &limits.server("other")));
        assert_eq!(first.free(), 2);
        limits.forget_server("echo");
        assert!(!Arc::ptr_eq(&first, &limits.server("echo")));
    }
}
