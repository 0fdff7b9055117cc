use std::{sync::Arc, time::Duration};

use muster_catalog::{Catalog, CatalogSource};
use muster_core::{CallContext, ToolCall, ToolEntry, ToolError, ToolKind, crd::MCPServerState};
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use tower::{ServiceBuilder, ServiceExt};

use super::*;

fn catalog_with(entries: Vec<ToolEntry>) -> Arc<dyn CatalogSource> {
    let mut builder = Catalog::builder();
    for entry in entries {
        builder.push_tool(entry);
    }
    let catalog = Arc::new(builder.build());
    Arc::new(move || Arc::clone(&catalog))
}

fn downstream(name: &str, server: &str) -> ToolEntry {
    let tool = Tool::new(name.to_owned(), "a tool", Arc::new(serde_json::Map::new()));
    ToolEntry::downstream(name, server, tool)
}

fn call(name: &str) -> ToolCall {
    ToolCall::new(name.to_owned(), JsonObject::new(), CallContext::default())
}

fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix) && l[prefix.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn the_layer_counts_each_call_by_tool_server_kind_and_outcome() {
    let metrics = Arc::new(GatewayMetrics::new());
    let catalog = catalog_with(vec![
        downstream("x_demo_echo", "demo"),
        downstream("x_demo_fail", "demo"),
    ]);
    let service = ServiceBuilder::new()
        .layer(MetricsLayer::new(Arc::clone(&metrics), catalog))
        .service_fn(|call: ToolCall| async move {
            match call.name.as_str() {
                "x_demo_echo" => Ok(CallToolResult::success(vec![ContentBlock::text("ok")]).into()),
                "x_demo_fail" => Ok(CallToolResult::error(vec![ContentBlock::text("no")]).into()),
                _ => Err(ToolError::not_found(&call.name)),
            }
        });
    for name in ["x_demo_echo", "x_demo_echo", "x_demo_fail", "x_who_knows"] {
        let _ = service.clone().oneshot(call(name)).await;
    }
    let text = metrics.render(TextFormat::Prometheus);
    let count = |labels: &str| sample(&text, &format!("muster_tool_calls_total{{{labels}}}"));
    assert_eq!(
        count(r#"tool="x_demo_echo",server="demo",kind="tool",outcome="ok""#),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        count(r#"tool="x_demo_fail",server="demo",kind="tool",outcome="tool_error""#),
        Some(1.0)
    );
    assert_eq!(
        count(r#"tool="unknown",server="unknown",kind="unknown",outcome="not_found""#),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"muster_tool_call_duration_seconds_count{server="demo",kind="tool"}"#
        ),
        Some(3.0)
    );
}

#[test]
fn repeated_calls_count_in_their_own_label_sets() {
    // The same tool on two servers (a family's members), with two outcomes, and a meta-tool: each
    // label set counts its own calls however often it was counted before.
    let metrics = GatewayMetrics::new();
    let on = |server: &'static str| CallTarget::new("x_k8s_get", server, CallKind::Tool);
    let calls = [
        (on("dev"), Outcome::Ok, 3),
        (on("prod"), Outcome::Ok, 2),
        (on("dev"), Outcome::ToolError, 4),
        (CallTarget::meta("call_tool"), Outcome::Ok, 5),
    ];
    for round in 0..5 {
        for (target, outcome, times) in &calls {
            if round < *times {
                metrics.record_call(target, *outcome, Duration::from_millis(2));
            }
        }
    }
    let text = metrics.render(TextFormat::Prometheus);
    const CALLS: &str = "muster_tool_calls_total";
    const TIMED: &str = "muster_tool_call_duration_seconds_count";
    for (metric, labels, expected) in [
        (CALLS, r#"tool="x_k8s_get",server="dev",kind="tool",outcome="ok""#, 3.0),
        (CALLS, r#"tool="x_k8s_get",server="prod",kind="tool",outcome="ok""#, 2.0),
        (
            CALLS,
            r#"tool="x_k8s_get",server="dev",kind="tool",outcome="tool_error""#,
            4.0,
        ),
        (
            CALLS,
            r#"tool="call_tool",server="muster",kind="meta",outcome="ok""#,
            5.0,
        ),
        (TIMED, r#"server="dev",kind="tool""#, 7.0),
        (TIMED, r#"server="prod",kind="tool""#, 2.0),
        (TIMED, r#"server="muster",kind="meta""#, 5.0),
    ] {
        let found = sample(&text, &format!("{metric}{{{labels}}}"));
        assert_eq!(found, Some(expected), "{metric}{{{labels}}}: {text}");
    }
}

#[tokio::test]
async fn a_call_dropped_before_it_ends_is_counted_as_cancelled() {
    let metrics = Arc::new(GatewayMetrics::new());
    let catalog = catalog_with(vec![downstream("x_demo_sleep", "demo")]);
    let service = ServiceBuilder::new()
        .layer(MetricsLayer::new(Arc::clone(&metrics), catalog))
        .service_fn(|_call: ToolCall| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, ToolError>(CallToolResult::success(vec![]).into())
        });
    let answered = tokio::time::timeout(Duration::from_millis(20), service.oneshot(call("x_demo_sleep"))).await;
    assert!(answered.is_err(), "the call should not have finished");
    let text = metrics.render(TextFormat::Prometheus);
    assert_eq!(
        sample(
            &text,
            r#"muster_tool_calls_total{tool="x_demo_sleep",server="demo",kind="tool",outcome="cancelled"}"#
        ),
        Some(1.0),
        "{text}"
    );
}

#[test]
fn outcomes_follow_the_tool_errors() {
    assert_eq!(Outcome::of_error(&ToolError::Cancelled), Outcome::Cancelled);
    assert_eq!(
        Outcome::of_error(&ToolError::Timeout {
            after: Duration::from_secs(1)
        }),
        Outcome::Timeout
    );
    assert_eq!(
        Outcome::of_error(&ToolError::Busy {
            scope: "server demo".into(),
            in_flight: 1,
            limit_key: "maxConcurrentCallsPerServer",
            why: muster_core::error::BusyReason::QueueFull { queued: 0 },
        }),
        Outcome::Busy
    );
    assert_eq!(
        Outcome::of_error(&ToolError::ServerUnavailable {
            server: "demo".into(),
            reason: "Failed".into()
        }),
        Outcome::Unavailable
    );
    assert_eq!(
        Outcome::of_error(&ToolError::Internal { source: "boom".into() }),
        Outcome::Error
    );
}

#[test]
fn core_tools_and_workflows_run_on_muster_and_family_tools_on_their_member() {
    let mut builder = Catalog::builder();
    let core = Tool::new("core_service_list", "d", Arc::new(serde_json::Map::new()));
    builder.push_tool(ToolEntry::builtin(ToolKind::Core, core));
    let family = muster_core::FamilyRoute::new(
        "k8s",
        "cluster",
        [
            ("prod".to_owned(), "get".to_owned()),
            ("dev".to_owned(), "get".to_owned()),
        ]
        .into(),
    );
    let tool = Tool::new("x_k8s_get", "d", Arc::new(serde_json::Map::new()));
    let mut entry = ToolEntry::downstream("x_k8s_get", "prod", tool);
    entry.family = Some(Arc::new(family));
    builder.push_tool(entry);
    let catalog = builder.build();

    let core = CallTarget::of(&catalog, "core_service_list", &JsonObject::new());
    assert_eq!((core.server.as_str(), core.kind), ("muster", CallKind::Core));
    let mut args = JsonObject::new();
    args.insert("cluster".into(), "dev".into());
    assert_eq!(CallTarget::of(&catalog, "x_k8s_get", &args).server, "dev");
    args.insert("cluster".into(), "elsewhere".into());
    assert_eq!(CallTarget::of(&catalog, "x_k8s_get", &args).server, "unknown");
    assert_eq!(CallTarget::of(&catalog, "x_nope", &args), CallTarget::unknown());
}

#[derive(Debug)]
struct Fixed(GaugeSnapshot);

impl MetricsSource for Fixed {
    fn gauge_snapshot(&self) -> GaugeSnapshot {
        self.0.clone()
    }
}

#[test]
fn gauges_are_read_from_the_source_at_each_render() {
    let metrics = GatewayMetrics::new();
    assert!(!metrics.render(TextFormat::Prometheus).contains("muster_sessions"));
    let source: Arc<dyn MetricsSource> = Arc::new(Fixed(GaugeSnapshot {
        upstreams: vec![("demo".into(), MCPServerState::Running)],
        catalog_tools: 7,
        catalog_resources: 2,
        catalog_prompts: 1,
        sessions: 3,
    }));
    metrics.set_source(Arc::downgrade(&source));
    let text = metrics.render(TextFormat::Prometheus);
    assert_eq!(sample(&text, "muster_catalog_tools"), Some(7.0), "{text}");
    assert_eq!(sample(&text, "muster_sessions"), Some(3.0));
    assert_eq!(
        sample(&text, r#"muster_upstream_state{server="demo",state="Running"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, r#"muster_upstream_state{server="demo",state="Failed"}"#),
        Some(0.0)
    );
    drop(source);
    assert!(!metrics.render(TextFormat::Prometheus).contains("muster_sessions"));
}

#[test]
fn openmetrics_ends_with_eof_and_prometheus_text_does_not() {
    let metrics = GatewayMetrics::new();
    metrics.record_store_error();
    let open = metrics.render(TextFormat::OpenMetrics);
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(open.contains("muster_workflow_execution_store_errors_total 1"));
    assert!(!metrics.render(TextFormat::Prometheus).contains("# EOF"));
    assert_eq!(
        TextFormat::from_accept(Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5")),
        TextFormat::OpenMetrics
    );
    assert_eq!(TextFormat::from_accept(None), TextFormat::Prometheus);
}

#[test]
fn the_record_store_counts_its_errors() {
    use muster_workflow::record::{ExecutionStore, MemoryExecutionStore};
    let metrics = Arc::new(GatewayMetrics::new());
    let store = CountingStore::new(Arc::new(MemoryExecutionStore::new()), Arc::clone(&metrics));
    assert!(store.get("no-such-run").is_ok());
    // A record without a name is refused by every store.
    let nameless = muster_core::crd::WorkflowExecution::new(
        "",
        muster_core::crd::WorkflowExecutionSpec::started("w", chrono::Utc::now()),
    );
    assert!(store.put(&nameless).is_err());
    let text = metrics.render(TextFormat::Prometheus);
    assert_eq!(
        sample(&text, "muster_workflow_execution_store_errors_total"),
        Some(1.0),
        "{text}"
    );
}

#[test]
fn transport_session_ids_are_logged_as_digests() {
    let raw = muster_core::SessionId::new("3f0c1d9a-secret-session");
    let shown = log_session(&raw);
    assert!(shown.starts_with("session-") && !shown.contains("secret"), "{shown}");
    let hex = &shown["session-".len()..];
    assert!(
        hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{shown}"
    );
    // The first six bytes of the id's SHA-256, computed here apart from the label's cache.
    use sha2::{Digest, Sha256};
    let expected: String = Sha256::digest(raw.as_str().as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hex, expected);
    assert_eq!(log_session(&raw), shown, "the same label every time");
    assert_ne!(log_session(&muster_core::SessionId::new("another-session")), shown);
    assert_eq!(log_session(&muster_core::SessionId::default()), "default");
}

/// A span seen: `name@LEVEL`, and its parent's name.
type SpanSeen = (String, Option<String>);

/// The spans a subscriber created.
#[derive(Clone, Default)]
struct SpansSeen(Arc<std::sync::Mutex<Vec<SpanSeen>>>);

impl<S> tracing_subscriber::Layer<S> for SpansSeen
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let meta = attrs.metadata();
        let parent = ctx.span(id).and_then(|s| s.parent()).map(|p| p.name().to_owned());
        let seen = format!("{}@{}", meta.name(), meta.level());
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push((seen, parent));
    }
}

impl SpansSeen {
    fn taken(&self) -> Vec<SpanSeen> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The spans of one call through the layer, logged at `level`, inside a span named `around` if
/// given.
async fn call_seen(level: tracing::Level, around: Option<&'static str>) -> Vec<SpanSeen> {
    use tracing::Instrument as _;
    use tracing_subscriber::prelude::*;
    let seen = SpansSeen::default();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::from_level(level))
        .with(seen.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let service = ServiceBuilder::new()
        .layer(MetricsLayer::new(
            Arc::new(GatewayMetrics::new()),
            catalog_with(vec![downstream("x_demo_echo", "demo")]),
        ))
        .service_fn(|_call: ToolCall| async { Ok::<_, ToolError>(CallToolResult::success(Vec::new()).into()) });
    let called = service.oneshot(call("x_demo_echo"));
    match around {
        Some(REQUEST_SPAN) => called.instrument(tracing::info_span!(REQUEST_SPAN)).await,
        Some(_) => called.instrument(tracing::info_span!("handler")).await,
        None => called.await,
    }
    .expect("answered");
    seen.taken()
}

#[tokio::test]
async fn a_tool_call_span_is_at_debug_inside_a_request_span_and_at_info_elsewhere() {
    use tracing::Level;
    let span = |name: &str, parent: Option<&str>| (name.to_owned(), parent.map(str::to_owned));
    // Inside a request's span, which names the session and the request, the call's span is a
    // debug span: at info only the request's is made.
    assert_eq!(
        call_seen(Level::INFO, Some(REQUEST_SPAN)).await,
        vec![span("mcp_request@INFO", None)]
    );
    assert_eq!(
        call_seen(Level::DEBUG, Some(REQUEST_SPAN)).await,
        vec![
            span("mcp_request@INFO", None),
            span("tool_call@DEBUG", Some("mcp_request"))
        ]
    );
    // Elsewhere (a call of an embedding service, in its own span or none) it is an info span.
    assert_eq!(
        call_seen(Level::INFO, Some("handler")).await,
        vec![span("handler@INFO", None), span("tool_call@INFO", Some("handler"))]
    );
    assert_eq!(call_seen(Level::INFO, None).await, vec![span("tool_call@INFO", None)]);
}
