//! Logs. A gateway whose downstream server is configured with an `Authorization: Bearer` header
//! and an API key header logs, at debug level as JSON (as `gateway serve --log-format json
//! --debug` does), every step of a call that sends them, and neither secret appears in any line.
//! The reference gateway's `--log-format json` writes one JSON object a line with the fields of
//! the request's and the tool call's spans, and `--silent` logs errors only.

mod common;

use std::{
    process::Command,
    sync::{Arc, Mutex},
};

use common::{
    Harness, call_meta, connect, envelope, eventually, fast_supervision, gateway_binary, gateway_process::GatewayChild,
    remote, text,
};
use muster::{core::config::MusterConfig, gateway::Gateway};
use serde_json::{Value, json};

const BEARER: &str = "mst-bearer-6f1c2a9e0d7b44c1";
const API_KEY: &str = "mst-apikey-83d0f5b2c6a1e947";

/// Where the in-process logs go.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner()))
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downstreams_bearer_and_headers_never_reach_the_debug_logs() {
    // As `gateway serve --log-format json --debug`: every crate at debug, JSON with the spans.
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
        .json()
        .with_current_span(true)
        .with_span_list(true)
        .with_writer(move || sink.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this test process");

    let downstream = common::scripted::ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!({"me": "scripted"})))
        .serve()
        .await;
    let mut server = remote("secure", &downstream.url);
    server
        .spec
        .headers
        .insert("Authorization".into(), format!("Bearer {BEARER}"));
    server.spec.headers.insert("X-Api-Key".into(), API_KEY.into());
    let gateway = Gateway::with_supervision(MusterConfig::default(), vec![server], Vec::new(), fast_supervision())
        .expect("valid configuration");
    let h = Harness::serve(gateway).await;
    let result = h
        .meta("call_tool", json!({"name": "x_secure_whoami", "arguments": {}}))
        .await;
    assert_eq!(envelope(&result)["isError"], false, "{}", text(&result));
    // The secret did travel: the downstream got it with the call.
    let sent = downstream.headers_of("whoami");
    assert_eq!(
        sent.first().and_then(|h| h.get("authorization")).map(String::as_str),
        Some(format!("Bearer {BEARER}").as_str()),
        "{sent:?}"
    );
    h.stop().await;

    let log = captured.lines();
    assert!(log.len() > 10, "too little was logged: {log:#?}");
    let entries: Vec<Value> = log
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let finished = entries
        .iter()
        .find(|e| e["fields"]["message"] == "tool call finished" && e["span"]["tool"] == "x_secure_whoami")
        .unwrap_or_else(|| panic!("the call was not logged: {log:#?}"));
    assert_eq!(finished["span"]["server"], "secure");
    assert_eq!(finished["fields"]["outcome"], "ok");
    let all = log.join("\n");
    for secret in [BEARER, API_KEY] {
        let leaks: Vec<&String> = log.iter().filter(|l| l.contains(secret)).collect();
        assert!(!all.contains(secret), "a secret was logged: {leaks:#?}");
    }
}

/// A `gateway serve` child process whose stderr is collected line by line.
fn serve(config_dir: &std::path::Path, args: &[&str]) -> GatewayChild {
    let mut command = Command::new(gateway_binary());
    command
        .arg("serve")
        .arg("--config-path")
        .arg(config_dir)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("MUSTER_LOG_FORMAT");
    GatewayChild::spawn(command)
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A config directory with the demo server over stdio (this gateway binary's `demo-server`).
fn config_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("mcpservers")).expect("mcpservers/");
    std::fs::write(dir.path().join("config.yaml"), "aggregator:\n  musterPrefix: x\n").expect("config.yaml");
    std::fs::write(
        dir.path().join("mcpservers/demo.yaml"),
        format!(
            "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: demo\nspec:\n  \
             type: stdio\n  autoStart: true\n  command: {:?}\n  args: [demo-server]\n  timeout: 20\n",
            gateway_binary().display().to_string()
        ),
    )
    .expect("mcpservers/demo.yaml");
    dir
}

async fn wait_healthy(base: &str) -> bool {
    eventually(30, || async {
        match reqwest::get(format!("{base}/health")).await {
            Ok(r) => r.json::<Value>().await.is_ok_and(|v| v["servers"]["ready"] == 1),
            Err(_) => false,
        }
    })
    .await
}

#[tokio::test]
async fn serve_logs_json_lines_with_the_spans_of_each_call() {
    let dir = config_dir();
    let port = free_port();
    let served = serve(
        dir.path(),
        &["--port", &port.to_string(), "--log-format", "json", "--debug"],
    );
    let base = format!("http://127.0.0.1:{port}");
    assert!(
        wait_healthy(&base).await,
        "the gateway did not connect the demo server: {:#?}",
        served.log()
    );

    let client = connect(&format!("{base}/mcp"), &[], None).await;
    let result = call_meta(
        &client,
        "call_tool",
        json!({"name": "x_demo_echo", "arguments": {"message": "hello"}}),
    )
    .await;
    assert_eq!(envelope(&result)["isError"], false, "{}", text(&result));
    let _ = client.cancel().await;
    let log = served.stop();

    // JSON, one object a line, at debug level.
    let entries: Vec<Value> = log
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    assert!(entries.iter().any(|e| e["level"] == "DEBUG"), "no debug line: {log:#?}");
    // The tool call's end is logged inside its span, itself inside the request's.
    let finished = entries
        .iter()
        .find(|e| e["fields"]["message"] == "tool call finished" && e["span"]["tool"] == "x_demo_echo")
        .unwrap_or_else(|| panic!("no tool call line: {log:#?}"));
    assert_eq!(finished["fields"]["outcome"], "ok");
    assert_eq!(finished["span"]["name"], "tool_call");
    assert_eq!(finished["span"]["server"], "demo");
    assert!(
        finished["span"]["session"]
            .as_str()
            .is_some_and(|s| s.starts_with("session-")),
        "a transport session is logged as a digest: {finished}"
    );
    let spans = finished["spans"].as_array().expect("the span list");
    assert!(
        spans
            .iter()
            .any(|s| s["name"] == "mcp_request" && s["method"] == "tools/call" && s["tool"] == "call_tool"),
        "{finished}"
    );
}

#[tokio::test]
async fn silent_logs_only_errors() {
    let dir = config_dir();
    let port = free_port();
    let served = serve(dir.path(), &["--port", &port.to_string(), "--silent"]);
    let base = format!("http://127.0.0.1:{port}");
    assert!(
        wait_healthy(&base).await,
        "the gateway did not connect the demo server: {:#?}",
        served.log()
    );
    let log = served.stop();
    assert!(
        log.iter().all(|l| l.contains("ERROR")),
        "--silent logged more than errors: {log:#?}"
    );
}

#[tokio::test]
async fn fields_dropped_from_definition_files_are_logged_as_warnings_by_path() {
    let dir = config_dir();
    let server = dir.path().join("mcpservers/demo.yaml");
    let text = std::fs::read_to_string(&server).expect("demo.yaml");
    std::fs::write(&server, format!("{text}  retries: 3\n")).expect("an unknown field");
    std::fs::create_dir_all(dir.path().join("workflows")).expect("workflows/");
    std::fs::write(
        dir.path().join("workflows/hello.yaml"),
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: hello\nspec:\n  steps:\n    \
         - id: a\n      tool: x_demo_echo\n      required: true\n",
    )
    .expect("workflows/hello.yaml");
    let port = free_port();
    let served = serve(dir.path(), &["--port", &port.to_string(), "--log-format", "json"]);
    let base = format!("http://127.0.0.1:{port}");
    assert!(
        wait_healthy(&base).await,
        "the server loads without the field: {:#?}",
        served.log()
    );
    let log = served.stop();
    for (field, text) in [
        ("spec.retries", r#"unknown field \"spec.retries\" (dropped)"#),
        (
            "spec.steps[0].required",
            r#"unknown field \"spec.steps[0].required\" (dropped)"#,
        ),
    ] {
        let line = log
            .iter()
            .find(|l| l.contains(text))
            .unwrap_or_else(|| panic!("{text} not logged: {log:#?}"));
        let line: Value = serde_json::from_str(line).expect("a JSON line");
        assert_eq!(line["level"], "WARN", "{line}");
        assert_eq!(line["fields"]["field"], field, "{line}");
    }
}
