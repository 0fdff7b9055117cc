//! The call lane: `tools/call` to a stdio server written and answered past rmcp's client service
//! loop.
//!
//! Through rmcp, a call to a downstream goes from the calling task to the connection's service
//! loop (a channel), is written by it, and its answer is read there and handed back (another
//! channel), each hop a task switch, with rmcp's request bookkeeping (a progress-token watcher
//! behind an async lock, a subscription map) around it: 28.5k of the gateway's 162k
//! instructions per call in a callgrind profile. The lane writes the request to the child's
//! stdin from the calling task, and the transport's reader, which reads every line anyway, hands
//! the answer straight to the waiting call ([`StdioLane::route`]).
//!
//! The lane keeps what rmcp's path gave a call:
//! - **Its own ids.** A call's id, which is also its progress token, is a string `muster-N`;
//!   rmcp's own requests have numeric ids, so the two never meet. An answer or a progress
//!   notification that is not the lane's goes on to rmcp as before.
//! - **Timeouts.** A call waits `idle` for its answer, the wait restarted by each progress
//!   notification of the call, up to `max_total` in all ([`CallBudget`]); on either, the server is
//!   sent `notifications/cancelled` with rmcp's reasons, and the call fails as rmcp's would.
//! - **Cancellation.** A call cancelled by its caller, or whose future is dropped, is cancelled
//!   downstream too.
//! - **Progress in order.** The reader hands a call's progress to its sink as it reads it,
//!   before it reads the answer behind it.
//! - **Failure.** When the server's output ends (it exited, or the transport closed), every call
//!   waiting fails at once as "Transport closed", and a new one fails before it is written; a
//!   call that cannot be written because the server closed its input fails the same way.
//! - **Whole lines.** Requests, rmcp's messages and cancellations share the child's stdin through
//!   a [`StdinWriter`], which writes each line whole, with no lock held across an await.
//!
//! Only servers of protocol revisions with an `initialize` handshake take the lane: from
//! 2026-07-28 every request carries client context in its `_meta`, which rmcp adds.
//!
//! ```ignore
//! let call = lane.prepare(ctx.progress.clone(), Reading::of(ctx))?;
//! call.send(params).await?;
//! let result = call.answer(CallBudget { idle, max_total }, &ctx.cancellation).await?;
//! ```

use std::{
    collections::HashMap,
    fmt, io,
    sync::{
        Arc, Mutex as SyncMutex,
        atomic::{AtomicU64, Ordering},
    },
};

use muster_core::{ProgressSink, ToolOutput};
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam, ProgressToken};
use tokio::{sync::oneshot, time::Instant};

use super::writer::StdinWriter;
pub(crate) use crate::lane::{CallBudget, Failure};
use crate::{
    lane::{CallRequestLine, Clock, Found, Read, Reading, cancelled, lane_id, read},
    relay::progress_update,
};

/// A call waiting for its answer.
struct Waiting {
    /// The result as it was found (the waiting call makes it its output), or why there is none.
    answer: oneshot::Sender<Result<Found<'static>, Failure>>,
    /// How the call reads its result.
    reading: Reading,
    progress: Option<ProgressSink>,
    /// When its last progress notification was read.
    progressed: Option<Instant>,
}

#[derive(Default)]
struct Calls {
    waiting: HashMap<u64, Waiting>,
    /// The server's output ended: no call can be answered any more.
    closed: bool,
}

/// The calls in flight through one stdio connection; see the [module docs](self).
pub(crate) struct StdioLane {
    stdin: Arc<StdinWriter>,
    calls: SyncMutex<Calls>,
    next: AtomicU64,
}

impl fmt::Debug for StdioLane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioLane").finish_non_exhaustive()
    }
}

impl StdioLane {
    pub(crate) fn new(stdin: Arc<StdinWriter>) -> Self {
        Self {
            stdin,
            calls: SyncMutex::default(),
            next: AtomicU64::new(1),
        }
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a call, whose progress goes to `progress` and whose result is read as
    /// `reading` says; it is written by [`LaneCall::send`]. Fails when the server's output has
    /// ended.
    pub(crate) fn prepare(
        self: &Arc<Self>,
        progress: Option<ProgressSink>,
        reading: Reading,
    ) -> Result<LaneCall, Failure> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (answer, rx) = oneshot::channel();
        {
            let mut calls = self.calls();
            if calls.closed {
                return Err(Failure::Closed);
            }
            calls.waiting.insert(
                n,
                Waiting {
                    answer,
                    reading,
                    progress,
                    progressed: None,
                },
            );
        }
        Ok(LaneCall {
            lane: Arc::clone(self),
            n,
            token: ProgressToken(lane_id(n)),
            rx,
            reading,
            done: false,
        })
    }

    /// The child's stdin, which the transport writes rmcp's messages to as well.
    pub(crate) fn stdin(&self) -> &Arc<StdinWriter> {
        &self.stdin
    }

    /// Fails every call waiting, and any call prepared from now on, as closed.
    pub(crate) fn close(&self) {
        let waiting = {
            let mut calls = self.calls();
            calls.closed = true;
            std::mem::take(&mut calls.waiting)
        };
        // Dropping the senders fails the waits (outside the lock).
        drop(waiting);
    }

    /// Takes `line` when it is the answer to a call of the lane, or one of a call's progress
    /// notifications; whether it took it. Anything else is left to rmcp.
    pub(crate) fn route(&self, line: &[u8]) -> bool {
        if self.calls().waiting.is_empty() {
            return false;
        }
        match read(line, |n| self.reading_of(n)) {
            Read::Answer(n, answer) => self.answer(n, answer),
            Read::Progress(n, params) => self.progress(n, &params),
            Read::Notification(..) | Read::Other => false,
        }
    }

    /// Hands `answer` to call `n`. Taken even when the call stopped waiting (timed out,
    /// cancelled): nobody listens, and rmcp has no request of that id either.
    fn answer(&self, n: u64, answer: Result<Found<'_>, Failure>) -> bool {
        let waiting = self.calls().waiting.remove(&n);
        // Copied out of the line outside the lock.
        if let Some(waiting) = waiting {
            let _ = waiting.answer.send(answer.map(Found::into_owned));
        }
        true
    }

    /// How call `n` reads its result (as passed on once it stopped waiting: nobody reads it).
    fn reading_of(&self, n: u64) -> Reading {
        self.calls()
            .waiting
            .get(&n)
            .map_or(Reading::Passed, |waiting| waiting.reading)
    }

    /// Hands progress notification `params` of call `n` to the call's sink and restarts the
    /// call's wait; taken even when the call stopped waiting.
    fn progress(&self, n: u64, params: &ProgressNotificationParam) -> bool {
        let sink = {
            let mut calls = self.calls();
            let Some(waiting) = calls.waiting.get_mut(&n) else {
                return true;
            };
            waiting.progressed = Some(Instant::now());
            waiting.progress.clone()
        };
        if let Some(sink) = sink {
            sink.report(progress_update(params));
        }
        true
    }

    /// When call `n`'s last progress notification was read.
    fn progressed(&self, n: u64) -> Option<Instant> {
        self.calls().waiting.get(&n).and_then(|w| w.progressed)
    }

    /// Stops waiting for call `n` and tells the server, unless it was answered meanwhile.
    fn abandon(&self, n: u64, reason: &str) {
        if self.calls().waiting.remove(&n).is_none() {
            return;
        }
        let Ok(bytes) = super::encode(&cancelled(n, reason)) else {
            return;
        };
        // Its own task: this may run in a drop, or on a path that must not wait for the pipe.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let stdin = Arc::clone(&self.stdin);
            runtime.spawn(async move {
                let _ = stdin.write_line(&bytes).await;
            });
        }
    }
}

/// A call of the lane: registered by [`StdioLane::prepare`], written by [`Self::send`], waited
/// for by [`Self::answer`]. Dropped before its answer, it is cancelled downstream.
pub(crate) struct LaneCall {
    lane: Arc<StdioLane>,
    n: u64,
    token: ProgressToken,
    rx: oneshot::Receiver<Result<Found<'static>, Failure>>,
    reading: Reading,
    done: bool,
}

impl fmt::Debug for LaneCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaneCall")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl LaneCall {
    /// The call's progress token (its id too).
    pub(crate) fn token(&self) -> &ProgressToken {
        &self.token
    }

    /// Writes the request, with the call's progress token in its `_meta` (and whatever `_meta`
    /// `params` has).
    pub(crate) async fn send(&mut self, mut params: CallToolRequestParams) -> Result<(), Failure> {
        params
            .meta
            .get_or_insert_default()
            .set_progress_token(self.token.clone());
        let bytes =
            super::encode(&CallRequestLine::new(&self.token.0, &params)).map_err(|e| Failure::Send(e.into()))?;
        let written = self.lane.stdin.write_line(&bytes).await;
        if let Err(e) = written {
            // Not written: nothing to cancel downstream.
            self.lane.calls().waiting.remove(&self.n);
            self.done = true;
            // Closed by us, or by the server (its stdin): as when its output ends.
            return Err(match e.kind() {
                io::ErrorKind::NotConnected | io::ErrorKind::BrokenPipe => Failure::Closed,
                _ => Failure::Send(e.into()),
            });
        }
        Ok(())
    }

    /// Waits for the answer within `budget`, or until `cancel`. A result passed on is checked
    /// here, in the calling task, not in the reader of the server's output.
    pub(crate) async fn answer(
        mut self,
        budget: CallBudget,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<ToolOutput, Failure> {
        let clock = Clock::start(budget);
        let wake = tokio::time::sleep_until(clock.due(None));
        tokio::pin!(wake);
        loop {
            tokio::select! {
                biased;
                answer = &mut self.rx => {
                    self.done = true;
                    return answer.unwrap_or(Err(Failure::Closed))?.output(self.reading);
                }
                () = cancel.cancelled() => {
                    self.stop("cancelled by the client");
                    return Err(Failure::Cancelled);
                }
                () = &mut wake => {
                    let progressed = self.lane.progressed(self.n);
                    if let Some((after, reason)) = clock.expired(progressed) {
                        self.stop(reason);
                        return Err(Failure::TimedOut(after));
                    }
                    wake.as_mut().reset(clock.due(progressed));
                }
            }
        }
    }

    fn stop(&mut self, reason: &str) {
        self.done = true;
        self.lane.abandon(self.n, reason);
    }
}

impl Drop for LaneCall {
    fn drop(&mut self) {
        if !self.done {
            self.lane.abandon(self.n, "the gateway stopped waiting for the call");
        }
    }
}

#[cfg(test)]
mod tests;
