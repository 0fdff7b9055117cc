//! Polling futures that wake each other inside one task, without the scheduler.
//!
//! A task that holds both ends of a channel, such as a hyper connection and the request or
//! response body it feeds, wakes itself: one half, polled, hands the other something and wakes
//! it, with the task's own waker, while the task is running. tokio then reschedules the task
//! after its poll, at the back of its worker's queue, and a task queued behind a busy worker
//! wakes a parked worker thread to steal it. On a small machine that was a large part of the
//! gateway's context switches per call: a wake-up of a thread that finds nothing to do.
//!
//! A [`Driver`] polls with a waker of its own. A wake that comes while it polls is noted, and
//! the driver polls again at once; only a wake that comes from outside the poll (a socket, a
//! timer, another task) wakes the task. [`Driven`] runs a whole future, a task's, that way.
//!
//! The driver polls again at most [`MAX_INNER_POLLS`] times in a row, and not once the task's
//! cooperative budget is spent (a future out of budget wakes itself and returns pending): then
//! the task is woken and goes back to the scheduler, as it would have.
//!
//! ```ignore
//! let driver = Driver::default();
//! let response = poll_fn(|cx| driver.poll(cx, |cx| {
//!     connection.poll_unpin(cx);
//!     response.as_mut().poll(cx)
//! })).await;
//!
//! tokio::spawn(Driven::new(serve_connection));
//! ```

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, Wake, Waker},
};

use futures::task::AtomicWaker;

/// How many times [`Driver::poll`] polls again, for wakes from inside, before it yields.
pub const MAX_INNER_POLLS: usize = 32;

/// Polls under a waker that keeps wakes from inside the poll out of the scheduler; see the
/// [module docs](self).
pub struct Driver {
    shared: Arc<DriverWaker>,
    waker: Waker,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

impl Default for Driver {
    fn default() -> Self {
        let shared = Arc::new(DriverWaker::default());
        let waker = Waker::from(Arc::clone(&shared));
        Self { shared, waker }
    }
}

impl Driver {
    /// Runs `step` under the driver's waker, and again while it was woken from inside itself.
    pub fn poll<T>(&self, cx: &mut Context<'_>, mut step: impl FnMut(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
        let shared = &self.shared;
        shared.task.register(cx.waker());
        let mut inner = Context::from_waker(&self.waker);
        for _ in 0..MAX_INNER_POLLS {
            shared.inside.store(true, Ordering::SeqCst);
            shared.again.store(false, Ordering::SeqCst);
            let out = step(&mut inner);
            shared.inside.store(false, Ordering::SeqCst);
            if out.is_ready() {
                return out;
            }
            if !shared.again.swap(false, Ordering::SeqCst) {
                return Poll::Pending;
            }
            if !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The waker a [`Driver`] polls with.
#[derive(Default)]
struct DriverWaker {
    task: AtomicWaker,
    /// A [`Driver::poll`] is running: a wake is noted for it, not passed on.
    inside: AtomicBool,
    /// Woken since the poll's last step began.
    again: AtomicBool,
}

impl Wake for DriverWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Noted first: a poll ending now sees it; one that has ended gets the task woken.
        self.again.store(true, Ordering::SeqCst);
        if !self.inside.load(Ordering::SeqCst) {
            self.task.wake();
        }
    }
}

pin_project_lite::pin_project! {
    /// A future polled under a [`Driver`]: a task's whole work, its wakes of itself kept out of
    /// the scheduler.
    pub struct Driven<F> {
        #[pin]
        inner: F,
        driver: Driver,
    }
}

impl<F> Driven<F> {
    /// `inner`, to be polled under a driver of its own.
    pub fn new(inner: F) -> Self {
        Self {
            inner,
            driver: Driver::default(),
        }
    }
}

impl<F: Future> Future for Driven<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let mut inner = this.inner;
        this.driver.poll(cx, |cx| inner.as_mut().poll(cx))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_wake_from_inside_a_poll_polls_again_without_waking_the_task() {
        let count = Arc::new(Count::default());
        let task = Waker::from(Arc::clone(&count));
        let driver = Driver::default();
        let mut steps = 0;
        let out = driver.poll(&mut Context::from_waker(&task), |cx| {
            steps += 1;
            if steps < 3 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(steps)
            }
        });
        assert_eq!(out, Poll::Ready(3));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_wake_from_outside_wakes_the_task() {
        let count = Arc::new(Count::default());
        let task = Waker::from(Arc::clone(&count));
        let driver = Driver::default();
        let mut kept = None;
        let out: Poll<()> = driver.poll(&mut Context::from_waker(&task), |cx| {
            kept = Some(cx.waker().clone());
            Poll::Pending
        });
        assert!(out.is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        kept.expect("kept").wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_step_that_always_wakes_itself_is_handed_back_to_the_scheduler() {
        let count = Arc::new(Count::default());
        let task = Waker::from(Arc::clone(&count));
        let driver = Driver::default();
        let mut steps = 0;
        let out: Poll<()> = driver.poll(&mut Context::from_waker(&task), |cx| {
            steps += 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        });
        assert!(out.is_pending());
        assert_eq!(steps, MAX_INNER_POLLS);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the task comes back");
    }

    #[tokio::test]
    async fn a_task_out_of_budget_goes_back_to_the_scheduler_at_once() {
        let mut steps = 0;
        let driven = Driven::new(std::future::poll_fn(|cx| {
            steps += 1;
            // Out of budget, as a tokio resource is: pending, and woken to come back.
            cx.waker().wake_by_ref();
            if steps > MAX_INNER_POLLS {
                Poll::Ready(steps)
            } else {
                Poll::Pending
            }
        }));
        let mut driven = std::pin::pin!(driven);
        let polls = std::future::poll_fn(|cx| {
            // Spend the task's budget, then poll the driven future once, in the same poll.
            while let Poll::Ready(spent) = tokio::task::coop::poll_proceed(cx) {
                spent.made_progress();
            }
            Poll::Ready(driven.as_mut().poll(cx))
        })
        .await;
        assert!(polls.is_pending());
        assert_eq!(steps, 1, "no second step without budget");
    }
}
