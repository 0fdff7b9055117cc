//! A child's stdin, written line by line by many tasks, with no lock held across an await.
//!
//! The lane's calls, rmcp's messages and the lane's cancellations all write to one pipe, and a
//! line must never land inside another. A writer appends its line to a queue, under a lock held
//! only for that; then one of the writers waiting, the flusher, takes the pipe out of the
//! queue's state and writes everything queued, its own line and those queued before and behind
//! it, in as few writes as the pipe takes, holding no lock while it waits on the pipe. When its
//! own line is out it puts the pipe back and wakes the others: one whose line is still queued
//! flushes next. A writer whose line a flusher wrote returns without touching the pipe.
//!
//! - **Whole lines.** A line is queued whole, and a flusher whose future is dropped part way
//!   through a write finishes it in a task of its own, so the next line never lands inside it.
//!   A line queued by a writer dropped before a flusher took it is written by the next flusher.
//! - **Failure.** A write that fails (the server closed its stdin) closes the writer: every line
//!   waiting fails with that error, and every later one with `NotConnected`; so does one after
//!   [`StdinWriter::close`].
//!
//! ```ignore
//! let writer = StdinWriter::new(child.stdin.take()?);
//! writer.write_line(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await?;
//! writer.closed().await; // the pipe is closed: the child reads the end of its input
//! ```

use std::{
    io,
    sync::{Arc, Mutex, MutexGuard},
};

use tokio::{io::AsyncWriteExt, process::ChildStdin, sync::Notify};

/// A child's stdin; see the [module docs](self).
#[derive(Debug)]
pub(crate) struct StdinWriter {
    state: Mutex<State>,
    /// Lines were written, the pipe was put back, or the writer closed.
    changed: Notify,
}

#[derive(Debug)]
struct State {
    /// The pipe, while no flusher has it and the writer is open.
    stdin: Option<ChildStdin>,
    /// The lines waiting, in order.
    queue: Vec<u8>,
    /// The bytes queued in all, and written in all.
    queued: u64,
    written: u64,
    /// A flusher has the pipe.
    flushing: bool,
    /// Why the writer is closed, once it is.
    closed: Option<io::ErrorKind>,
}

impl StdinWriter {
    pub(crate) fn new(stdin: ChildStdin) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                stdin: Some(stdin),
                queue: Vec::new(),
                queued: 0,
                written: 0,
                flushing: false,
                closed: None,
            }),
            changed: Notify::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `line` (newline included) whole, after the lines queued before it.
    pub(crate) async fn write_line(self: &Arc<Self>, line: &[u8]) -> io::Result<()> {
        let end = {
            let mut state = self.state();
            if let Some(kind) = state.closed {
                return Err(closed(kind));
            }
            state.queue.extend_from_slice(line);
            state.queued += line.len() as u64;
            state.queued
        };
        loop {
            // Registered before the look, so that a change in between wakes it.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let pipe = {
                let mut state = self.state();
                if state.written >= end {
                    return Ok(());
                }
                if let Some(kind) = state.closed {
                    return Err(closed(kind));
                }
                if state.flushing {
                    None
                } else {
                    state.flushing = true;
                    state.stdin.take()
                }
            };
            match pipe {
                Some(stdin) => {
                    return Flusher {
                        writer: Arc::clone(self),
                        stdin: Some(stdin),
                        batch: Vec::new(),
                        at: 0,
                    }
                    .flush_to(end)
                    .await;
                }
                None => changed.await,
            }
        }
    }

    /// Closes the writer: the pipe is closed now, unless a flusher has it (then when it puts it
    /// back); whether it was closed now. Lines waiting fail.
    pub(crate) fn close(&self) -> bool {
        let stdin = {
            let mut state = self.state();
            state.closed.get_or_insert(io::ErrorKind::NotConnected);
            state.queue.clear();
            state.stdin.take()
        };
        self.changed.notify_waiters();
        stdin.is_some()
    }

    /// Closes the writer, waiting for a flusher that has the pipe to put it back.
    pub(crate) async fn closed(&self) {
        // Closed first: closing wakes the waiters, and this is not to be one of them.
        self.close();
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !self.state().flushing {
                return;
            }
            changed.await;
        }
    }
}

/// The pipe, taken out by a writer to write what is queued; see [`StdinWriter::write_line`].
struct Flusher {
    writer: Arc<StdinWriter>,
    /// `None` once put back (or closed).
    stdin: Option<ChildStdin>,
    /// The lines being written, and how much of them is.
    batch: Vec<u8>,
    at: usize,
}

impl Flusher {
    /// Writes what is queued until byte `end` has been written, then puts the pipe back.
    async fn flush_to(mut self, end: u64) -> io::Result<()> {
        let result = self.write_until(Some(end)).await;
        self.put_back();
        result
    }

    /// Writes batches of what is queued, until byte `end` has been written (with `None`, until
    /// the batch being written is out).
    async fn write_until(&mut self, end: Option<u64>) -> io::Result<()> {
        loop {
            if self.at == self.batch.len() {
                let mut state = self.writer.state();
                if end.is_none_or(|end| state.written >= end) {
                    return Ok(());
                }
                if let Some(kind) = state.closed {
                    return Err(closed(kind));
                }
                self.batch.clear();
                std::mem::swap(&mut self.batch, &mut state.queue);
                self.at = 0;
            }
            let Some(stdin) = self.stdin.as_mut() else {
                return Err(closed(io::ErrorKind::NotConnected));
            };
            let error = match stdin.write(&self.batch[self.at..]).await {
                Ok(0) => io::Error::from(io::ErrorKind::WriteZero),
                Ok(n) => {
                    self.at += n;
                    if self.at == self.batch.len() {
                        self.writer.state().written += self.batch.len() as u64;
                        self.writer.changed.notify_waiters();
                    }
                    continue;
                }
                Err(e) => e,
            };
            // The pipe is broken: every line waiting fails.
            self.at = self.batch.len();
            self.stdin = None;
            {
                let mut state = self.writer.state();
                state.closed.get_or_insert(error.kind());
                state.queue.clear();
            }
            return Err(error);
        }
    }

    /// Puts the pipe back (or closes it, when the writer was closed meanwhile) and wakes the
    /// writers waiting: one whose line is still queued flushes next.
    fn put_back(&mut self) {
        let stdin = self.stdin.take();
        {
            let mut state = self.writer.state();
            state.flushing = false;
            if state.closed.is_none() {
                state.stdin = stdin;
            }
        }
        self.writer.changed.notify_waiters();
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        if self.stdin.is_none() {
            return;
        }
        if self.at == self.batch.len() {
            // Between batches: nothing is cut.
            self.put_back();
            return;
        }
        if self.at == 0 {
            // A batch taken and not begun: back to the front of the queue, for the next flusher.
            let mut batch = std::mem::take(&mut self.batch);
            {
                let mut state = self.writer.state();
                batch.extend_from_slice(&state.queue);
                state.queue = batch;
            }
            self.put_back();
            return;
        }
        // Dropped part way through a write: a task finishes the batch, so that no line lands
        // inside the one cut short.
        let rest = Self {
            writer: Arc::clone(&self.writer),
            stdin: self.stdin.take(),
            batch: std::mem::take(&mut self.batch),
            at: self.at,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let mut rest = rest;
                    let _ = rest.write_until(None).await;
                    rest.put_back();
                });
            }
            // No runtime left to write with: the pipe closes with the rest.
            Err(_) => {
                let mut rest = rest;
                rest.stdin = None;
                rest.put_back();
            }
        }
    }
}

/// The error of a write to a closed writer, closed for `kind`.
fn closed(kind: io::ErrorKind) -> io::Error {
    match kind {
        io::ErrorKind::NotConnected => io::Error::new(kind, "the transport is closed"),
        kind => io::Error::from(kind),
    }
}

#[cfg(test)]
mod tests;
