//! The transport to a downstream server run as a child process, speaking newline-delimited
//! JSON-RPC on its stdin and stdout.
//!
//! It does what rmcp's child-process transport does (lines of at most 16 MiB, a longer one
//! skipped whole; blank lines, unparsable lines and notifications that cannot be read ignored
//! (a notification of a method rmcp does not know still reads, as a custom one); a well-formed
//! message that is not valid MCP answered with an Invalid Request error; on close, stdin closed,
//! then `SIGTERM`, then `SIGKILL`; the child killed when the transport is dropped), with one
//! difference that matters on the call path: **`tools/call` goes past rmcp's service loop**, on
//! the transport's [`lane`]. The lane writes a call from the calling task, and the reader hands its
//! answer and its progress straight to the call; every other message goes to rmcp as before.
//! An answer is read once, checked for the shape of the `CallToolResult` it must be and kept as
//! it came ([`ToolOutput`](muster_core::ToolOutput)), where rmcp's parser tries it against every
//! kind of result in turn (`CallToolResult` is the sixteenth), building and throwing away an
//! error for each miss (46k of the gateway's 312k instructions per call in an early callgrind
//! profile; `benches/JOURNAL.md`, fourth sitting), and the gateway then writes it out again.
//!
//! It also lets go of the memory of a large message: the line buffer shrinks back after a line
//! over 64 KiB (a `tools/list` answer), where rmcp's keeps the largest size it ever read.
//!
//! ```ignore
//! let (transport, stderr) = StdioTransport::spawn(command)?;
//! let lane = transport.lane();
//! let service = client.serve(transport).await?;
//! ```

pub(crate) mod lane;
mod writer;

use std::{
    io,
    process::{ExitStatus, Stdio},
    sync::{Arc, OnceLock},
    time::Duration,
};

use rmcp::{
    RoleClient,
    model::{ErrorData, JsonRpcError, JsonRpcMessage, RequestId},
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use serde::Deserialize;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, ChildStdout},
};

use lane::StdioLane;
use writer::StdinWriter;

/// The longest line read; a longer one is skipped whole (rmcp's limit, and its streamable HTTP
/// client's largest event).
const MAX_LINE: usize = 16 * 1024 * 1024;
/// The line buffer is shrunk back to this after a longer line.
const KEEP_LINE: usize = 64 * 1024;
/// How long the child has to exit after its stdin is closed, and again after `SIGTERM`.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// How often a dropped transport looks for its child's exit status before leaving it.
const EXIT_PEEKS: usize = 3;
/// How long a child whose stdout ended is waited for, to read its exit status.
const EXIT_SEEN: Duration = Duration::from_millis(500);
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// A child process as an rmcp client transport; see the [module docs](self).
#[derive(Debug)]
pub(crate) struct StdioTransport {
    child: Option<Child>,
    lines: LineReader,
    /// The calls written past rmcp; it holds the child's stdin, which rmcp's messages share.
    lane: Arc<StdioLane>,
    /// How the child exited, once it has been seen to.
    exit: Arc<OnceLock<ExitStatus>>,
}

impl StdioTransport {
    /// Starts `command` (stdin, stdout and stderr piped; killed when dropped). Returns the
    /// transport and the child's stderr.
    pub(crate) fn spawn(
        mut command: tokio::process::Command,
    ) -> io::Result<(Self, Option<tokio::process::ChildStderr>)> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| io::Error::other("no stdout"))?;
        let stdin = child.stdin.take().ok_or_else(|| io::Error::other("no stdin"))?;
        let stderr = child.stderr.take();
        let transport = Self {
            child: Some(child),
            lines: LineReader::new(stdout),
            lane: Arc::new(StdioLane::new(StdinWriter::new(stdin))),
            exit: Arc::default(),
        };
        Ok((transport, stderr))
    }

    /// Where the child's exit status is put once it has exited (after its stdout ended, or when
    /// the transport closed it).
    pub(crate) fn exit_status(&self) -> Arc<OnceLock<ExitStatus>> {
        Arc::clone(&self.exit)
    }

    /// Waits up to `wait` for the child to exit and keeps its status.
    async fn reap(&mut self, wait: Duration) {
        if let Some(child) = self.child.as_mut()
            && let Ok(Ok(status)) = tokio::time::timeout(wait, child.wait()).await
        {
            let _ = self.exit.set(status);
        }
    }

    /// The lane for `tools/call`, past rmcp's service loop (see [`lane`]).
    pub(crate) fn lane(&self) -> Arc<StdioLane> {
        Arc::clone(&self.lane)
    }

    /// The child's process id, while it runs.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// Reads one message from `line` (without its newline), or `None` when it is to be skipped.
    fn parse(&mut self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        if self.lane.route(line) {
            return None;
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line) {
            Ok(message) => Some(message),
            Err(e) => {
                self.refuse(line, &e);
                None
            }
        }
    }

    /// Handles a line that is not an MCP message: unparsable text and notifications are
    /// skipped (nobody waits for an answer to them, and answering garbage can start an error
    /// storm); anything else is answered with Invalid Request.
    fn refuse(&self, line: &[u8], error: &serde_json::Error) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
            tracing::debug!("ignoring a line that is not JSON: {error}");
            return;
        };
        let is_notification = value.get("method").is_some() && value.get("id").is_none();
        if is_notification {
            tracing::debug!("ignoring a notification rmcp cannot read: {error}");
            return;
        }
        tracing::debug!("answering a message that is not valid MCP with Invalid Request: {error}");
        let id = value.get("id").and_then(|id| RequestId::deserialize(id).ok());
        let reply: TxJsonRpcMessage<RoleClient> = JsonRpcMessage::Error(JsonRpcError::new(
            id,
            ErrorData::invalid_request("Invalid request", None),
        ));
        if let Ok(bytes) = encode(&reply) {
            let stdin = Arc::clone(self.lane.stdin());
            // Its own task: `receive` may be dropped at any await, and the reply must not be cut.
            tokio::spawn(async move {
                let _ = stdin.write_line(&bytes).await;
            });
        }
    }

    /// Closes stdin, then waits for the child to exit, sending `SIGTERM` and then `SIGKILL` when
    /// it does not.
    async fn shut_down(&mut self) -> io::Result<()> {
        self.lane.close();
        // A write blocked on a server that does not read its stdin holds the pipe: then the
        // server is ended without waiting for it to see the end of its input.
        let closed_stdin = tokio::time::timeout(EXIT_GRACE, self.lane.stdin().closed())
            .await
            .is_ok();
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if !closed_stdin || tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_err() {
            terminate(child);
            if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_err() {
                child.kill().await?;
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            let _ = self.exit.set(status);
        }
        self.child = None;
        Ok(())
    }
}

#[cfg(unix)]
fn terminate(child: &Child) {
    if let Some(pid) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

#[cfg(not(unix))]
fn terminate(_child: &Child) {}

/// `message` as one line, newline included.
fn encode(message: &impl serde::Serialize) -> io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(message).map_err(io::Error::other)?;
    bytes.push(b'\n');
    Ok(bytes)
}

impl Transport<RoleClient> for StdioTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let bytes = encode(&item);
        let stdin = Arc::clone(self.lane.stdin());
        async move { stdin.write_line(&bytes?).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.lines.next_line().await {
                LineRead::Line => {}
                LineRead::Oversized => {
                    tracing::warn!(max = MAX_LINE, "skipping a message longer than the line limit");
                    continue;
                }
                LineRead::Eof => {
                    self.lane.close();
                    // A server whose stdout ended has usually exited: its status says why.
                    self.reap(EXIT_SEEN).await;
                    return None;
                }
                LineRead::Io(e) => {
                    tracing::warn!("cannot read from the server: {e}");
                    self.lane.close();
                    return None;
                }
            }
            let line = self.lines.take();
            let message = self.parse(line.strip_suffix(b"\n").unwrap_or(&line));
            self.lines.give_back(line);
            if message.is_some() {
                return message;
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // A child that has exited (or is exiting: a write to it just failed) is reaped here and
        // its status kept; one still running is killed (kill on drop) and reaped by tokio.
        if let Some(child) = self.child.as_mut() {
            for _ in 0..EXIT_PEEKS {
                if let Ok(Some(status)) = child.try_wait() {
                    let _ = self.exit.set(status);
                    break;
                }
                std::thread::yield_now();
            }
        }
        self.lane.close();
        // The lane holds stdin and may outlive the transport: the pipe closes with it here
        // (unless a write has it, which fails once the child is gone).
        self.lane.stdin().close();
    }
}

/// What [`LineReader::next_line`] found.
enum LineRead {
    /// A whole line is in the buffer.
    Line,
    /// A line over [`MAX_LINE`] was skipped.
    Oversized,
    Eof,
    Io(io::Error),
}

/// Newline-delimited reading with a bound. Cancel-safe: a line cut short by a dropped
/// `next_line` is kept and completed by the next call.
#[derive(Debug)]
struct LineReader {
    read: BufReader<ChildStdout>,
    line: Vec<u8>,
    /// The rest of an oversized line is being skipped.
    skipping: bool,
}

impl LineReader {
    fn new(read: ChildStdout) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: false,
        }
    }

    async fn next_line(&mut self) -> LineRead {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) => return LineRead::Eof,
                Ok(available) => available,
                Err(e) => return LineRead::Io(e),
            };
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if self.skipping {
                self.skipping = newline.is_none();
                self.read.consume(take);
                continue;
            }
            if self.line.len() + take > MAX_LINE {
                self.line.clear();
                self.skipping = newline.is_none();
                self.read.consume(take);
                return LineRead::Oversized;
            }
            self.line.extend_from_slice(&available[..take]);
            self.read.consume(take);
            if newline.is_some() {
                return LineRead::Line;
            }
        }
    }

    /// The line read (its buffer), to be handed back with [`Self::give_back`].
    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.line)
    }

    /// Reuses `buffer` for the next line, shrunk when a large message grew it.
    fn give_back(&mut self, mut buffer: Vec<u8>) {
        buffer.clear();
        if buffer.capacity() > KEEP_LINE {
            buffer.shrink_to(KEEP_LINE);
        }
        self.line = buffer;
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientNotification, ServerRequest};

    use super::*;

    /// A transport to `sh -c script`.
    pub(super) fn sh(script: &str) -> StdioTransport {
        let mut command = tokio::process::Command::new("sh");
        command.args(["-c", script]);
        StdioTransport::spawn(command).expect("sh starts").0
    }

    #[tokio::test]
    async fn noise_is_skipped_and_a_message_that_is_not_mcp_is_answered_with_invalid_request() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reply = dir.path().join("reply");
        let script = format!(
            r#"printf '\n\r\nnot json\n{{"jsonrpc":"2.0","method":7}}\n'
printf '{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"_meta":{{"pad":"'
head -c 17000000 /dev/zero | tr '\000' a; printf '"}}}}}}\n'
printf '%s\n' '{{"jsonrpc":"2.0","id":7}}'
printf '\357\273\277%s\n' '{{"jsonrpc":"2.0","id":1,"method":"ping"}}'
read line; printf '%s' "$line" > '{}'"#,
            reply.display()
        );
        let mut t = sh(&script);
        let first = tokio::time::timeout(Duration::from_secs(20), t.receive())
            .await
            .expect("in time")
            .expect("a message");
        let JsonRpcMessage::Request(request) = first else {
            panic!("the ping comes first: {first:?}");
        };
        assert!(matches!(request.request, ServerRequest::PingRequest(_)));
        assert_eq!(
            request.id,
            RequestId::Number(1),
            "the oversized ping (id 2) was skipped"
        );
        let mut written = String::new();
        for _ in 0..100 {
            written = std::fs::read_to_string(&reply).unwrap_or_default();
            if !written.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let written: serde_json::Value = serde_json::from_str(&written).expect("the reply is JSON");
        assert_eq!(written["id"], 7, "{written}");
        assert_eq!(written["error"]["code"], -32600, "{written}");
        t.close().await.expect("closed");
    }

    #[tokio::test]
    async fn close_ends_a_server_that_exits_when_its_stdin_closes() {
        let mut t = sh("cat >/dev/null");
        let pid = t.id().expect("running");
        let started = std::time::Instant::now();
        t.close().await.expect("closed");
        assert!(started.elapsed() < EXIT_GRACE, "no signal was needed");
        assert!(t.id().is_none());
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "exited and reaped"
        );
        let send = t.send(JsonRpcMessage::notification(
            ClientNotification::InitializedNotification(Default::default()),
        ));
        assert_eq!(send.await.expect_err("closed").kind(), io::ErrorKind::NotConnected);
    }

    #[tokio::test]
    async fn close_ends_a_server_that_reads_nothing_while_a_write_to_it_is_blocked() {
        let mut t = sh("exec sleep 60");
        let pid = t.id().expect("running");
        // More than the pipe holds: the write blocks, holding stdin.
        let big = JsonRpcMessage::notification(ClientNotification::CancelledNotification(
            rmcp::model::CancelledNotification::new(rmcp::model::CancelledNotificationParam::new(
                None,
                Some("x".repeat(1 << 20)),
            )),
        ));
        let blocked = tokio::spawn(t.send(big));
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(10), t.close())
            .await
            .expect("close does not hang")
            .expect("closed");
        assert!(started.elapsed() < EXIT_GRACE * 2 + Duration::from_secs(1));
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "ended");
        assert!(blocked.await.expect("joined").is_err(), "the blocked write failed");
    }

    #[tokio::test]
    async fn a_long_message_leaves_no_large_buffer_behind() {
        let mut t = sh(
            r#"printf '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"'
head -c 1048576 /dev/zero | tr '\000' x; printf '"}}\n'; exec sleep 30"#,
        );
        let message = tokio::time::timeout(Duration::from_secs(10), t.receive())
            .await
            .expect("in time")
            .expect("a message");
        assert!(matches!(message, JsonRpcMessage::Notification(_)), "{message:?}");
        assert!(t.lines.line.capacity() <= KEEP_LINE);
    }
}
