//! Shared harness of the integration tests: the demo downstream server binary, an in-process
//! gateway on a loopback port, and an rmcp client that calls meta-tools.

#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod gateway_process;
pub mod haproxy;
pub mod kubernetes;
pub mod oidc;
pub mod progress;
pub mod raw_session;
pub mod replicas;
pub mod scripted;
pub mod signin;
pub mod tls;
pub mod valkey;

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
};

use muster::{
    core::{
        config::MusterConfig,
        crd::{MCPServer, MCPServerSpec, ServerType},
    },
    gateway::{Gateway, supervisor::SupervisorConfig},
};
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, JsonObject},
    service::RunningService,
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use serde_json::Value;

/// The reference gateway example binary, which also serves the demo server (`demo-server`).
pub fn gateway_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test> -> target/<profile>/examples/gateway
    let profile_dir = exe.parent().and_then(|d| d.parent()).expect("target profile dir");
    let bin = profile_dir.join("examples").join("gateway");
    assert!(
        bin.exists(),
        "{} is missing: build the examples first (cargo build --examples)",
        bin.display()
    );
    bin
}

/// A demo MCPServer over stdio, named `name`.
pub fn demo_stdio(name: &str) -> MCPServer {
    let spec = MCPServerSpec {
        server_type: Some(ServerType::Stdio),
        auto_start: true,
        command: Some(gateway_binary().display().to_string()),
        args: vec!["demo-server".into()],
        timeout: 20,
        ..MCPServerSpec::default()
    };
    MCPServer::new(name, spec)
}

/// A remote MCPServer over streamable HTTP at `url`.
pub fn remote(name: &str, url: &str) -> MCPServer {
    let spec = MCPServerSpec {
        server_type: Some(ServerType::StreamableHttp),
        url: Some(url.to_owned()),
        timeout: 5,
        ..MCPServerSpec::default()
    };
    MCPServer::new(name, spec)
}

/// A demo server over streamable HTTP in a child process; killed on drop.
pub struct DemoHttp {
    child: Child,
    pub url: String,
}

impl DemoHttp {
    pub fn start() -> Self {
        Self::start_on("127.0.0.1:0")
    }

    /// A demo server on `addr` (retrying briefly while a previous server's port is released).
    pub fn start_on(addr: &str) -> Self {
        for _ in 0..50 {
            if std::net::TcpListener::bind(addr).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let mut child = Command::new(gateway_binary())
            .args(["demo-server", "--http", addr])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the demo server");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the listening line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .expect("listening line")
            .to_owned();
        Self { child, url }
    }
}

impl Drop for DemoHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway serving on a loopback port, with an MCP client connected to it.
pub struct Harness {
    pub gateway: Gateway,
    pub url: String,
    pub client: RunningService<RoleClient, ()>,
    server: tokio::task::JoinHandle<()>,
}

impl Harness {
    pub async fn start(servers: Vec<MCPServer>) -> Self {
        Self::start_with(MusterConfig::default(), servers).await
    }

    pub async fn start_with(config: MusterConfig, servers: Vec<MCPServer>) -> Self {
        let gateway =
            Gateway::with_supervision(config, servers, Vec::new(), fast_supervision()).expect("valid configuration");
        Self::serve(gateway).await
    }

    /// Starts `gateway` and serves it on a loopback port.
    pub async fn serve(gateway: Gateway) -> Self {
        gateway.start().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = gateway.router();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let url = format!("http://{addr}/mcp");
        let client = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await.expect("client connects");
        Self {
            gateway,
            url,
            client,
            server,
        }
    }

    /// Calls meta-tool `name` with `args`.
    pub async fn meta(&self, name: &str, args: Value) -> CallToolResult {
        call_meta(&self.client, name, args).await
    }

    /// Calls core tool `name` through `call_tool`: (the inner isError, its JSON answer, or its
    /// text when that is not JSON, or the refusal's text when nothing ran).
    pub async fn core(&self, name: &str, args: Value) -> (bool, Value) {
        let result = self
            .meta("call_tool", serde_json::json!({"name": name, "arguments": args}))
            .await;
        let env = envelope(&result);
        if env.is_null() {
            return (true, Value::String(text(&result)));
        }
        let body = env["content"][0]["text"].as_str().unwrap_or("null");
        (
            env["isError"] == true,
            serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())),
        )
    }

    /// Another client of the same gateway, sending `headers` on every request.
    pub async fn client_with_headers(&self, headers: &[(&'static str, &str)]) -> RunningService<RoleClient, ()> {
        connect(&self.url, headers, None).await
    }

    /// A client of the gateway whose handler is `handler` (to record what it is sent).
    pub async fn client_with<H: rmcp::ClientHandler>(&self, handler: H) -> RunningService<RoleClient, H> {
        use rmcp::ServiceExt;
        handler
            .serve(StreamableHttpClientTransport::from_uri(self.url.clone()))
            .await
            .expect("connects")
    }

    /// Calls meta-tool `name` and parses its one text item as JSON; panics on an error result.
    pub async fn meta_json(&self, name: &str, args: Value) -> Value {
        let result = self.meta(name, args).await;
        assert_ne!(
            result.is_error,
            Some(true),
            "{name} answered an error: {}",
            text(&result)
        );
        serde_json::from_str(&text(&result))
            .unwrap_or_else(|e| panic!("{name} did not answer JSON ({e}): {}", text(&result)))
    }

    pub async fn stop(self) {
        let _ = self.client.cancel().await;
        self.gateway.shutdown().await;
        self.server.abort();
    }
}

/// Calls meta-tool `name` with `args` on `client`.
pub async fn call_meta(client: &RunningService<RoleClient, ()>, name: &str, args: Value) -> CallToolResult {
    let args: JsonObject = args.as_object().cloned().unwrap_or_default();
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("meta-tool {name} failed at the protocol level: {e}"))
}

/// Reconnect quickly, so tests see recovery in well under a second.
pub fn fast_supervision() -> SupervisorConfig {
    SupervisorConfig::default()
        .with_initial_backoff(std::time::Duration::from_millis(100))
        .with_max_backoff(std::time::Duration::from_millis(400))
        .with_health_interval(std::time::Duration::from_secs(2))
}

/// Polls `check` every 50 ms until it holds or `secs` pass; returns whether it held.
pub async fn eventually<F, Fut>(secs: u64, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// An rmcp client of the MCP endpoint `url`, sending `headers` and, when given, `bearer` as its
/// `Authorization` on every request.
pub async fn connect(
    url: &str,
    headers: &[(&'static str, &str)],
    bearer: Option<String>,
) -> RunningService<RoleClient, ()> {
    let headers = headers
        .iter()
        .map(|(k, v)| {
            (
                http::HeaderName::from_static(k),
                http::HeaderValue::from_str(v).expect("header value"),
            )
        })
        .collect();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(headers);
    if let Some(token) = bearer {
        config = config.auth_header(token);
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("client connects")
}

/// The text of a result's first item.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// The tool names of a `list_tools` / `filter_tools` page.
pub fn tool_names(page: &Value) -> Vec<String> {
    page["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// The `call_tool` envelope of a result (its first text item as JSON; null when it is not JSON).
pub fn envelope(result: &CallToolResult) -> Value {
    serde_json::from_str(&text(result)).unwrap_or(Value::Null)
}
