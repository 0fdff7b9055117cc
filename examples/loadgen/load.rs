//! One load run: N sessions over streamable HTTP, each issuing M `tools/call` back to back, with
//! the latency of every call and the CPU time the measured processes spent meanwhile.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt, stream};
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, JsonObject},
    service::RunningService,
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use serde_json::{Value, json};

use crate::{BoxError, procfs};

/// An MCP client session.
pub(crate) type Session = RunningService<RoleClient, ()>;

/// How long one call may take before it counts as an error.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How many sessions are initialized at once.
const CONNECT_PARALLELISM: usize = 25;

/// Opens one MCP session to `url` (initialize and `notifications/initialized`).
pub(crate) async fn connect(http: &reqwest::Client, url: &str) -> Result<Session, BoxError> {
    let transport =
        StreamableHttpClientTransport::with_client(http.clone(), StreamableHttpClientTransportConfig::with_uri(url));
    Ok(().serve(transport).await?)
}

/// Opens `n` sessions to `url`, a few at a time.
pub(crate) async fn connect_many(http: &reqwest::Client, url: &str, n: usize) -> Result<Vec<Session>, BoxError> {
    stream::iter(0..n)
        .map(|_| connect(http, url))
        .buffer_unordered(CONNECT_PARALLELISM)
        .try_collect()
        .await
}

/// Closes `sessions` (each sends its `DELETE`).
pub(crate) async fn close_all(sessions: Vec<Session>) {
    stream::iter(sessions)
        .for_each_concurrent(CONNECT_PARALLELISM, |s| async move {
            let _ = s.cancel().await;
        })
        .await;
}

/// Which tool a run calls.
#[derive(Debug, Clone)]
pub(crate) enum Call {
    /// `echo` on the echo server itself.
    Echo,
    /// The gateway's `call_tool` meta-tool with `x_<server>_echo`.
    ViaCallTool {
        /// The downstream server's name in the gateway.
        server: String,
    },
    /// `x_<server>_echo` called directly (the gateway's native exposure).
    Native {
        /// The downstream server's name in the gateway.
        server: String,
    },
}

impl Call {
    /// The request that echoes `message`, with `pad` bytes of the echo server's listing after it
    /// in the answer.
    pub(crate) fn request(&self, message: &str, pad: usize) -> CallToolRequestParams {
        let echo = if pad == 0 {
            object(json!({ "message": message }))
        } else {
            object(json!({ "message": message, "pad": pad }))
        };
        match self {
            Self::Echo => CallToolRequestParams::new("echo").with_arguments(echo),
            Self::ViaCallTool { server } => CallToolRequestParams::new("call_tool")
                .with_arguments(object(json!({"name": format!("x_{server}_echo"), "arguments": echo}))),
            Self::Native { server } => CallToolRequestParams::new(format!("x_{server}_echo")).with_arguments(echo),
        }
    }

    /// Whether `result` is the echo of `message` and `pad` bytes (for `call_tool`, the envelope
    /// holds it).
    pub(crate) fn answered(&self, result: &CallToolResult, message: &str, pad: usize) -> bool {
        if result.is_error == Some(true) {
            return false;
        }
        let text = result
            .content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.as_str())
            .unwrap_or_default();
        match self {
            Self::Echo | Self::Native { .. } => text.len() == message.len() + pad && text.starts_with(message),
            // The listing starts with `{`.
            Self::ViaCallTool { .. } if pad > 0 => text.contains(&format!("\"{message}{{")),
            Self::ViaCallTool { .. } => text.contains(&format!("\"{message}\"")),
        }
    }

    /// A short label: `echo`, `call_tool` or `native`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Echo => "echo",
            Self::ViaCallTool { .. } => "call_tool",
            Self::Native { .. } => "native",
        }
    }
}

/// `value` as a JSON object (empty if it is not one).
pub(crate) fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// A process whose CPU time a run measures.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// What it is (`gateway`, `echo`).
    pub(crate) name: String,
    /// Its pid.
    pub(crate) pid: u32,
}

/// One load run.
#[derive(Debug, Clone)]
pub(crate) struct LoadSpec {
    /// The MCP endpoint.
    pub(crate) url: String,
    /// Concurrent sessions.
    pub(crate) sessions: usize,
    /// Calls per session, measured.
    pub(crate) calls: usize,
    /// Calls per session before measuring (not counted).
    pub(crate) warmup: usize,
    /// The tool called.
    pub(crate) call: Call,
    /// Bytes of the echo server's listing added to each answer (0: the message alone).
    pub(crate) pad: usize,
    /// Sessions stop issuing calls after this long (the rest count as not issued).
    pub(crate) max_time: Duration,
    /// The processes whose CPU time is measured.
    pub(crate) measured: Vec<Measured>,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub(crate) struct LoadResult {
    /// Calls answered with the echo.
    pub(crate) ok: usize,
    /// Calls that failed, timed out or answered something else.
    pub(crate) errors: usize,
    /// Calls not issued because the run reached its time limit.
    pub(crate) not_issued: usize,
    /// From the first measured call to the last answer.
    pub(crate) wall: Duration,
    /// The latency of every issued call, sorted.
    pub(crate) latencies: Vec<Duration>,
    /// CPU time of each measured process over the run (`None`: it was gone at the end).
    pub(crate) cpu: Vec<(String, Option<Duration>)>,
    /// Context switches of each measured process's threads over the run.
    pub(crate) switches: Vec<(String, Option<u64>)>,
    /// CPU time of the load generator itself over the run.
    pub(crate) client_cpu: Duration,
    /// The first error seen, for the log.
    pub(crate) first_error: Option<String>,
}

impl LoadResult {
    /// Issued calls.
    pub(crate) fn issued(&self) -> usize {
        self.ok + self.errors
    }

    /// Answered calls per second of wall time.
    pub(crate) fn calls_per_sec(&self) -> f64 {
        self.ok as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The `q` quantile of the latencies (nearest rank), in milliseconds.
    pub(crate) fn latency_ms(&self, q: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        self.latencies[rank - 1].as_secs_f64() * 1e3
    }

    /// CPU microseconds per issued call of measured process `name`.
    pub(crate) fn cpu_us_per_call(&self, name: &str) -> f64 {
        self.cpu
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, cpu)| *cpu)
            .map_or(f64::NAN, |cpu| per_call_us(cpu, self.issued()))
    }

    /// Context switches per issued call of measured process `name` (NaN when unknown).
    pub(crate) fn switches_per_call(&self, name: &str) -> f64 {
        let issued = self.issued();
        self.switches
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, s)| *s)
            .filter(|_| issued > 0)
            .map_or(f64::NAN, |s| s as f64 / issued as f64)
    }

    /// CPU microseconds per issued call of the load generator.
    pub(crate) fn client_cpu_us_per_call(&self) -> f64 {
        per_call_us(self.client_cpu, self.issued())
    }
}

fn per_call_us(cpu: Duration, calls: usize) -> f64 {
    if calls == 0 {
        f64::NAN
    } else {
        cpu.as_secs_f64() * 1e6 / calls as f64
    }
}

/// What one session's calls came to.
#[derive(Debug, Default)]
struct SessionTally {
    ok: usize,
    errors: usize,
    not_issued: usize,
    latencies: Vec<Duration>,
    first_error: Option<String>,
}

/// Issues `calls` calls of `call` (answers of `pad` more bytes) on `session`, one after the
/// other, until `deadline`.
async fn drive(
    session: &Session,
    (call, pad): (&Call, usize),
    tag: usize,
    calls: usize,
    deadline: Option<Instant>,
) -> SessionTally {
    let mut tally = SessionTally {
        latencies: Vec::with_capacity(calls),
        ..SessionTally::default()
    };
    for i in 0..calls {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            tally.not_issued = calls - i;
            break;
        }
        let message = format!("s{tag}-c{i}");
        let request = call.request(&message, pad);
        let started = Instant::now();
        let outcome = tokio::time::timeout(CALL_TIMEOUT, session.call_tool(request)).await;
        tally.latencies.push(started.elapsed());
        let error = match outcome {
            Ok(Ok(result)) if call.answered(&result, &message, pad) => None,
            Ok(Ok(result)) => Some(format!("unexpected answer: {:?}", result.content.first())),
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer in {CALL_TIMEOUT:?}")),
        };
        match error {
            None => tally.ok += 1,
            Some(e) => {
                tally.errors += 1;
                tally.first_error.get_or_insert(e);
            }
        }
    }
    tally
}

/// For each of `measured`, what `read` gives now less what it gave `before` (`None` when either
/// reading failed: the process was gone).
fn since<T: Copy>(
    measured: &[Measured],
    before: Vec<Option<T>>,
    read: impl Fn(u32) -> Option<T>,
    less: impl Fn(T, T) -> T,
) -> Vec<(String, Option<T>)> {
    measured
        .iter()
        .zip(before)
        .map(|(m, before)| (m.name.clone(), before.zip(read(m.pid)).map(|(b, a)| less(a, b))))
        .collect()
}

/// Runs `spec`: connect, warm up, then measure.
pub(crate) async fn run(http: &reqwest::Client, spec: &LoadSpec) -> Result<LoadResult, BoxError> {
    let sessions = connect_many(http, &spec.url, spec.sessions).await?;
    let sessions: Vec<Arc<Session>> = sessions.into_iter().map(Arc::new).collect();

    // Warm up every session (connection pools, first-call allocations), not counted.
    let warmups = sessions.iter().enumerate().map(|(tag, s)| {
        let (s, call, pad, n) = (Arc::clone(s), spec.call.clone(), spec.pad, spec.warmup);
        tokio::spawn(async move { drive(&s, (&call, pad), tag + 100_000, n, None).await })
    });
    for warmup in futures::future::join_all(warmups).await {
        let tally = warmup?;
        if let Some(e) = tally.first_error {
            return Err(format!("warm-up call failed: {e}").into());
        }
    }

    let cpu_before: Vec<Option<Duration>> = spec.measured.iter().map(|m| procfs::cpu_time(m.pid)).collect();
    let switches_before: Vec<Option<u64>> = spec.measured.iter().map(|m| procfs::context_switches(m.pid)).collect();
    let client_before = procfs::own_cpu_time();
    let started = Instant::now();
    let deadline = started + spec.max_time;
    let tasks: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(tag, s)| {
            let (s, call, pad, n) = (Arc::clone(s), spec.call.clone(), spec.pad, spec.calls);
            tokio::spawn(async move { drive(&s, (&call, pad), tag, n, Some(deadline)).await })
        })
        .collect();
    let tallies = futures::future::join_all(tasks).await;
    let wall = started.elapsed();
    let client_cpu = procfs::own_cpu_time().saturating_sub(client_before);
    let cpu = since(&spec.measured, cpu_before, procfs::cpu_time, Duration::saturating_sub);
    let switches = since(
        &spec.measured,
        switches_before,
        procfs::context_switches,
        u64::saturating_sub,
    );

    let mut result = LoadResult {
        ok: 0,
        errors: 0,
        not_issued: 0,
        wall,
        latencies: Vec::with_capacity(spec.sessions * spec.calls),
        cpu,
        switches,
        client_cpu,
        first_error: None,
    };
    for tally in tallies {
        let tally = tally?;
        result.ok += tally.ok;
        result.errors += tally.errors;
        result.not_issued += tally.not_issued;
        result.latencies.extend(tally.latencies);
        if result.first_error.is_none() {
            result.first_error = tally.first_error;
        }
    }
    result.latencies.sort_unstable();

    let sessions: Vec<Session> = sessions.into_iter().filter_map(|s| Arc::try_unwrap(s).ok()).collect();
    close_all(sessions).await;
    Ok(result)
}
