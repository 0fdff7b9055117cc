//! Prometheus metrics of the gateway ([`GatewayMetrics`]), the tower layer that counts and times
//! tool calls ([`MetricsLayer`]), and the `tracing` span of each call.
//!
//! ```
//! use std::sync::Arc;
//! use muster_gateway::metrics::{CallKind, CallTarget, GatewayMetrics, Outcome, TextFormat};
//!
//! let metrics = Arc::new(GatewayMetrics::new());
//! let echo = CallTarget::new("x_demo_echo", "demo", CallKind::Tool);
//! metrics.record_call(&echo, Outcome::Ok, std::time::Duration::from_millis(3));
//!
//! let text = metrics.render(TextFormat::Prometheus);
//! assert!(text.contains(
//!     r#"muster_tool_calls_total{tool="x_demo_echo",server="demo",kind="tool",outcome="ok"} 1"#
//! ));
//! ```
//!
//! A [`Gateway`](crate::Gateway) builds one registry of metrics, puts [`MetricsLayer`] outermost
//! on its tool stack and serves them at `/metrics` (the HTTP router's `METRICS_PATH`). What it
//! counts:
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `muster_tool_calls_total` | counter | `tool`, `server`, `kind`, `outcome` |
//! | `muster_tool_call_duration_seconds` | histogram | `server`, `kind` |
//! | `muster_upstream_state` | gauge (1 for the current state, 0 for the others) | `server`, `state` |
//! | `muster_upstream_reconnects_total` | counter | `server` |
//! | `muster_upstream_connect_failures_total` | counter | `server` |
//! | `muster_catalog_tools`, `muster_catalog_resources`, `muster_catalog_prompts` | gauge | |
//! | `muster_sessions` | gauge | |
//! | `muster_workflow_executions_total` | counter | `workflow`, `status` |
//! | `muster_workflow_execution_duration_seconds` | histogram | `workflow` |
//! | `muster_workflow_execution_store_errors_total` | counter | |
//!
//! Labels stay bounded: `tool` is an exposed name of the catalogue (or a meta-tool's name), any
//! other name is `unknown`; `server` is a defined server, `muster` for core tools, workflows and
//! meta-tools, `unknown` for unknown names; `kind` is `tool`, `core`, `workflow`, `meta` or
//! `unknown`; `outcome` is one of [`Outcome`]. A call through `call_tool` counts twice: once as
//! the meta-tool `call_tool` (kind `meta`) and once as the tool it ran; a workflow's steps count
//! as calls of their own.
//!
//! The gauges of upstream state, catalogue size and sessions are read from a [`MetricsSource`]
//! (the gateway's registry) when the metrics are rendered, under its short-lived locks only.

mod layer;
#[cfg(feature = "otel")]
pub mod otel;
mod source;
mod workflows;

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, OnceLock, RwLock, Weak},
    time::Duration,
};

use muster_catalog::Catalog;
use muster_core::{JsonObject, ToolError, ToolKind, ToolOutput, crd::MCPServerState};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType,
        counter::Counter,
        family::{Family, MetricConstructor},
        gauge::{ConstGauge, Gauge},
        histogram::Histogram,
    },
    registry::Registry as PromRegistry,
};

pub use layer::{Metered, MetricsLayer, REQUEST_SPAN, ResponseFuture, TOOL_CALL_SPAN, log_session};
pub use source::{GaugeSnapshot, MetricsSource};
pub use workflows::{CountingStore, MeteredObserver};

/// The server label of what muster runs itself: core tools, workflows, meta-tools.
pub const MUSTER_SERVER: &str = "muster";
/// The label of a tool or server that is not in the catalogue.
pub const UNKNOWN: &str = "unknown";

/// Buckets of the call and execution duration histograms, in seconds (5 ms to 5 min).
const DURATION_BUCKETS: [f64; 15] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// What a call ran: a downstream tool, a core tool, a workflow, a meta-tool, or a name the
/// catalogue does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallKind {
    /// A downstream server's tool.
    Tool,
    /// A `core_*` tool.
    Core,
    /// A `workflow_<name>` tool.
    Workflow,
    /// One of the meta-tools.
    Meta,
    /// A name the caller's catalogue does not have.
    Unknown,
}

impl CallKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Core => "core",
            Self::Workflow => "workflow",
            Self::Meta => "meta",
            Self::Unknown => UNKNOWN,
        }
    }
}

impl From<ToolKind> for CallKind {
    fn from(kind: ToolKind) -> Self {
        match kind {
            ToolKind::Tool => Self::Tool,
            ToolKind::Core => Self::Core,
            ToolKind::Workflow => Self::Workflow,
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// A result that is not an error.
    Ok,
    /// A result with `isError: true` (the tool ran and reported a failure).
    ToolError,
    /// No such tool in the caller's catalogue.
    NotFound,
    /// The arguments were refused before the tool ran.
    InvalidArguments,
    /// The request's toolset does not include the tool.
    OutsideToolset,
    /// The caller must sign in to the tool's server first.
    AuthRequired,
    /// The tool's server is not connected.
    Unavailable,
    /// The session's or the server's call slots were taken and the queue full.
    Busy,
    /// The call ran out of time.
    Timeout,
    /// The caller cancelled the call, or went away before it finished.
    Cancelled,
    /// The downstream server refused the call, its connection failed, or the gateway did.
    Error,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::NotFound => "not_found",
            Self::InvalidArguments => "invalid_arguments",
            Self::OutsideToolset => "outside_toolset",
            Self::AuthRequired => "auth_required",
            Self::Unavailable => "unavailable",
            Self::Busy => "busy",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
        }
    }

    /// The outcome of a tool's answer: a tool error when it reported a failure (`isError`).
    pub fn answered(is_error: bool) -> Self {
        if is_error { Self::ToolError } else { Self::Ok }
    }

    /// The outcome of a tool error.
    pub fn of_error(error: &ToolError) -> Self {
        match error {
            ToolError::NotFound { .. } => Self::NotFound,
            ToolError::InvalidArguments { .. } => Self::InvalidArguments,
            ToolError::OutsideToolset { .. } => Self::OutsideToolset,
            ToolError::ServerUnavailable { .. } => Self::Unavailable,
            ToolError::Timeout { .. } => Self::Timeout,
            ToolError::Cancelled => Self::Cancelled,
            ToolError::Busy { .. } => Self::Busy,
            _ => Self::Error,
        }
    }

    /// The outcome of what a tool service answered.
    pub fn of(result: &Result<ToolOutput, ToolError>) -> Self {
        match result {
            Ok(output) => Self::answered(output.is_error()),
            Err(error) => Self::of_error(error),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The labels a call is counted under: the tool, its server and its kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallTarget {
    /// The exposed name, a meta-tool's name, or `unknown`.
    pub tool: String,
    /// The server that runs it (`muster` for what the gateway runs itself, `unknown`).
    pub server: String,
    /// What it is.
    pub kind: CallKind,
}

impl CallTarget {
    /// A target of these labels.
    pub fn new(tool: impl Into<String>, server: impl Into<String>, kind: CallKind) -> Self {
        Self {
            tool: tool.into(),
            server: server.into(),
            kind,
        }
    }

    /// Meta-tool `name`.
    pub fn meta(name: &str) -> Self {
        Self::new(name, MUSTER_SERVER, CallKind::Meta)
    }

    /// A name the catalogue does not have.
    pub fn unknown() -> Self {
        Self::new(UNKNOWN, UNKNOWN, CallKind::Unknown)
    }

    /// The target of a call of `name` with `arguments` in `catalog`: its entry's server (a
    /// family tool's member named by the instance argument), or [`CallTarget::unknown`].
    pub fn of(catalog: &Catalog, name: &str, arguments: &JsonObject) -> Self {
        let Some(entry) = catalog.tool(name) else {
            return Self::unknown();
        };
        let server = match (entry.kind, &entry.family, &entry.server) {
            (ToolKind::Tool, Some(route), _) => arguments
                .get(&route.instance_arg)
                .and_then(serde_json::Value::as_str)
                .filter(|instance| route.members.contains_key(*instance))
                .unwrap_or(UNKNOWN),
            (ToolKind::Tool, None, Some(server)) => server.as_str(),
            (ToolKind::Tool, None, None) => UNKNOWN,
            _ => MUSTER_SERVER,
        };
        Self::new(name, server, entry.kind.into())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    server: String,
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DurationLabels {
    server: String,
    kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    server: String,
    state: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ExecutionLabels {
    workflow: String,
    status: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WorkflowLabels {
    workflow: String,
}

/// The counter and histogram each call target and outcome counts in, by the target's tool: a
/// call is counted after one lookup of its tool's name, where the families would hash and copy
/// every label of both metrics (`Counter` and `Histogram` share their values with their clones
/// in the families). Bounded as the families are: a handle is kept once per label set.
#[derive(Debug, Default)]
struct CallHandles(RwLock<HashMap<String, Vec<CallHandle>>>);

#[derive(Debug)]
struct CallHandle {
    server: String,
    kind: CallKind,
    outcome: Outcome,
    count: Counter,
    duration: Histogram,
}

impl CallHandle {
    /// Whether it counts the calls of `target` (of its tool) that ended with `outcome`.
    fn counts(&self, target: &CallTarget, outcome: Outcome) -> bool {
        self.outcome == outcome && self.kind == target.kind && self.server == target.server
    }

    fn observe(&self, seconds: f64) {
        self.count.inc();
        self.duration.observe(seconds);
    }
}

impl CallHandles {
    /// Counts a call of `target` that ended with `outcome` after `seconds` in the handles of its
    /// labels, kept from `metrics` (the families' counter and histogram) the first time.
    fn record(
        &self,
        target: &CallTarget,
        outcome: Outcome,
        seconds: f64,
        metrics: impl FnOnce() -> (Counter, Histogram),
    ) {
        let handles = self.0.read().unwrap_or_else(|e| e.into_inner());
        if let Some(handle) = handles
            .get(target.tool.as_str())
            .and_then(|of_tool| of_tool.iter().find(|h| h.counts(target, outcome)))
        {
            return handle.observe(seconds);
        }
        drop(handles);
        let mut handles = self.0.write().unwrap_or_else(|e| e.into_inner());
        let of_tool = handles.entry(target.tool.clone()).or_default();
        if let Some(handle) = of_tool.iter().find(|h| h.counts(target, outcome)) {
            return handle.observe(seconds);
        }
        let (count, duration) = metrics();
        let handle = CallHandle {
            server: target.server.clone(),
            kind: target.kind,
            outcome,
            count,
            duration,
        };
        handle.observe(seconds);
        of_tool.push(handle);
    }
}

/// Makes the histograms of [`DURATION_BUCKETS`].
#[derive(Debug, Clone, Copy)]
struct DurationHistogram;

impl MetricConstructor<Histogram> for DurationHistogram {
    fn new_metric(&self) -> Histogram {
        Histogram::new(DURATION_BUCKETS)
    }
}

/// Which text format [`GatewayMetrics::render`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextFormat {
    /// The Prometheus text format, version 0.0.4 (what a scrape gets unless it asks otherwise).
    Prometheus,
    /// OpenMetrics 1.0 text (ends with `# EOF`).
    OpenMetrics,
}

impl TextFormat {
    /// The format a scrape's `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text`, else Prometheus text.
    pub fn from_accept(accept: Option<&str>) -> Self {
        match accept {
            Some(accept) if accept.contains("application/openmetrics-text") => Self::OpenMetrics,
            _ => Self::Prometheus,
        }
    }

    /// The `Content-Type` of the format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The gateway's metrics: counters and histograms updated as things happen, and gauges read
/// from a [`MetricsSource`] when rendered. Cheap to share (`Arc`); every update is lock-free or
/// under a short read lock, never across an await.
pub struct GatewayMetrics {
    registry: PromRegistry,
    calls: Family<CallLabels, Counter>,
    call_duration: Family<DurationLabels, Histogram, DurationHistogram>,
    reconnects: Family<ServerLabels, Counter>,
    connect_failures: Family<ServerLabels, Counter>,
    executions: Family<ExecutionLabels, Counter>,
    execution_duration: Family<WorkflowLabels, Histogram, DurationHistogram>,
    store_errors: Counter,
    source: Arc<OnceLock<Weak<dyn MetricsSource>>>,
    call_handles: CallHandles,
}

impl fmt::Debug for GatewayMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayMetrics").finish_non_exhaustive()
    }
}

impl Default for GatewayMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl GatewayMetrics {
    /// Empty metrics, without a source for the gauges until [`GatewayMetrics::set_source`].
    pub fn new() -> Self {
        let mut registry = PromRegistry::default();
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "muster_tool_calls",
            "Tool calls by tool, server, kind and outcome",
            calls.clone(),
        );
        let call_duration = Family::new_with_constructor(DurationHistogram);
        registry.register(
            "muster_tool_call_duration_seconds",
            "How long tool calls took, by server and kind",
            call_duration.clone(),
        );
        let reconnects = Family::<ServerLabels, Counter>::default();
        registry.register(
            "muster_upstream_reconnects",
            "Connections to a downstream server made again after its first",
            reconnects.clone(),
        );
        let connect_failures = Family::<ServerLabels, Counter>::default();
        registry.register(
            "muster_upstream_connect_failures",
            "Connection attempts to a downstream server that failed",
            connect_failures.clone(),
        );
        let executions = Family::<ExecutionLabels, Counter>::default();
        registry.register(
            "muster_workflow_executions",
            "Workflow executions that finished, by workflow and status",
            executions.clone(),
        );
        let execution_duration = Family::new_with_constructor(DurationHistogram);
        registry.register(
            "muster_workflow_execution_duration_seconds",
            "How long workflow executions took, by workflow",
            execution_duration.clone(),
        );
        let store_errors = Counter::default();
        registry.register(
            "muster_workflow_execution_store_errors",
            "Errors of the workflow execution record store",
            store_errors.clone(),
        );
        let source: Arc<OnceLock<Weak<dyn MetricsSource>>> = Arc::default();
        registry.register_collector(Box::new(Gauges {
            source: Arc::clone(&source),
        }));
        Self {
            registry,
            calls,
            call_duration,
            reconnects,
            connect_failures,
            executions,
            execution_duration,
            store_errors,
            source,
            call_handles: CallHandles::default(),
        }
    }

    /// Reads the gauges from `source` (kept weakly: the source may own these metrics). Only the
    /// first source counts.
    pub fn set_source(&self, source: Weak<dyn MetricsSource>) {
        let _ = self.source.set(source);
    }

    /// Counts a call of `target` that ended with `outcome` after `elapsed`.
    pub fn record_call(&self, target: &CallTarget, outcome: Outcome, elapsed: Duration) {
        self.call_handles.record(target, outcome, elapsed.as_secs_f64(), || {
            let count = self.calls.get_or_create(&CallLabels {
                tool: target.tool.clone(),
                server: target.server.clone(),
                kind: target.kind.as_str(),
                outcome: outcome.as_str(),
            });
            let duration = self.call_duration.get_or_create(&DurationLabels {
                server: target.server.clone(),
                kind: target.kind.as_str(),
            });
            (count.clone(), duration.clone())
        });
    }

    /// Counts a connection to `server` made again after its first.
    pub fn record_reconnect(&self, server: &str) {
        self.reconnects
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .inc();
    }

    /// Counts a failed connection attempt to `server`.
    pub fn record_connect_failure(&self, server: &str) {
        self.connect_failures
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .inc();
    }

    /// Counts an execution of `workflow` that ended with `status` after `elapsed`.
    pub fn record_execution(&self, workflow: &str, status: &'static str, elapsed: Duration) {
        self.executions
            .get_or_create(&ExecutionLabels {
                workflow: workflow.to_owned(),
                status,
            })
            .inc();
        self.execution_duration
            .get_or_create(&WorkflowLabels {
                workflow: workflow.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts an error of the execution record store.
    pub fn record_store_error(&self) {
        self.store_errors.inc();
    }

    /// The metrics in `format`.
    pub fn render(&self, format: TextFormat) -> String {
        let mut out = String::with_capacity(4096);
        let written = match format {
            TextFormat::Prometheus => prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry),
            TextFormat::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &self.registry),
        };
        if let Err(e) = written {
            // Writing into a String does not fail; a label set that cannot be encoded would.
            tracing::warn!(error = %e, "cannot render the metrics");
        }
        out
    }
}

/// The gauges read from the source at each scrape.
#[derive(Debug)]
struct Gauges {
    source: Arc<OnceLock<Weak<dyn MetricsSource>>>,
}

impl Collector for Gauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let Some(source) = self.source.get().and_then(Weak::upgrade) else {
            return Ok(());
        };
        // Taken first, so no lock of the source is held while encoding.
        let snapshot = source.gauge_snapshot();
        drop(source);

        let states = Family::<StateLabels, Gauge>::default();
        for (server, current) in &snapshot.upstreams {
            let mut known = false;
            for state in MCPServerState::ALL {
                known |= state == *current;
                states
                    .get_or_create(&StateLabels {
                        server: server.clone(),
                        state: state.as_str(),
                    })
                    .set(i64::from(state == *current));
            }
            if !known {
                states
                    .get_or_create(&StateLabels {
                        server: server.clone(),
                        state: current.as_str(),
                    })
                    .set(1);
            }
        }
        states.encode(encoder.encode_descriptor(
            "muster_upstream_state",
            "The state of each downstream server: 1 for its current state, 0 for the others",
            None,
            MetricType::Gauge,
        )?)?;
        for (name, help, value) in [
            (
                "muster_catalog_tools",
                "Tools in the shared catalogue (downstream, core and workflow tools)",
                snapshot.catalog_tools,
            ),
            (
                "muster_catalog_resources",
                "Resources in the shared catalogue",
                snapshot.catalog_resources,
            ),
            (
                "muster_catalog_prompts",
                "Prompts in the shared catalogue",
                snapshot.catalog_prompts,
            ),
            (
                "muster_sessions",
                "MCP client sessions connected now",
                snapshot.sessions,
            ),
        ] {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
