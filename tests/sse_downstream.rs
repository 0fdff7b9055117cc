//! The gateway in front of a downstream that speaks only the legacy HTTP+SSE transport (MCP
//! 2024-11-05): `@modelcontextprotocol/server-everything` in `sse` mode on a loopback port, driven
//! through the meta-tools by a real MCP client. Also: a streamable-HTTP server configured as
//! `type: sse` fails with a lastError that says what is wrong.
//!
//! Needs Node.js and `npm ci` (scripts/test does it); without `node` on PATH the tests print why
//! and skip.

mod common;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, ErrorKind},
    path::PathBuf,
    process::{Child, ChildStdout, Command, Stdio},
    time::Duration,
};

use common::{DemoHttp, Harness, text};
use muster::core::crd::{MCPServer, MCPServerSpec, ServerType};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `node` runs; `false` (with the reason printed) when it is not installed.
fn node_available(test: &str) -> bool {
    match Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(status) if status.success() => true,
        Ok(status) => panic!("`node --version` failed: {status}"),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            eprintln!("SKIPPED {test}: `node` is not on PATH; this test needs Node.js and `npm ci`");
            false
        }
        Err(e) => panic!("cannot run node: {e}"),
    }
}

/// server-everything in legacy SSE mode on a loopback port (a preload forces listen() onto
/// 127.0.0.1 and reports the port); killed on drop.
struct Everything {
    child: Child,
    _stdout: Option<BufReader<ChildStdout>>,
    url: String,
}

impl Everything {
    fn start() -> Self {
        let script = root().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        assert!(
            script.is_file(),
            "{} is missing: run `npm ci` in {}",
            script.display(),
            root().display()
        );
        let child = Command::new("node")
            .arg("-r")
            .arg(root().join("tests/fixtures/loopback-listen.cjs"))
            .arg(&script)
            .arg("sse")
            .env("PORT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server-everything");
        let mut server = Self {
            child,
            _stdout: None,
            url: String::new(),
        };
        let mut stdout = BufReader::new(server.child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the listening line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("server-everything did not start: {line:?}"))
            .to_owned();
        assert!(addr.starts_with("127.0.0.1:"), "not on loopback: {addr}");
        server._stdout = Some(stdout);
        server.url = format!("http://{addr}/sse");
        server
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An MCPServer of `type: sse` at `url`, with a custom header.
fn sse_server(name: &str, url: &str) -> MCPServer {
    let spec = MCPServerSpec {
        server_type: Some(ServerType::Sse),
        url: Some(url.to_owned()),
        headers: BTreeMap::from([("x-muster-test".to_owned(), "sse".to_owned())]),
        timeout: 20,
        ..MCPServerSpec::default()
    };
    MCPServer::new(name, spec)
}

/// core_service_status of `name`, as JSON.
async fn service_status(h: &Harness, name: &str) -> Value {
    let result = h
        .meta(
            "call_tool",
            json!({"name": "core_service_status", "arguments": {"name": name}}),
        )
        .await;
    let envelope: Value = serde_json::from_str(&text(&result)).expect("envelope");
    if let Some(structured) = envelope.get("structuredContent").filter(|v| v.is_object()) {
        return structured.clone();
    }
    serde_json::from_str(envelope["content"][0]["text"].as_str().unwrap_or_default()).expect("status JSON")
}

#[tokio::test]
async fn an_sse_downstream_is_listed_called_and_read_through_the_meta_tools() {
    if !node_available("an_sse_downstream_is_listed_called_and_read_through_the_meta_tools") {
        return;
    }
    let everything = Everything::start();
    let h = Harness::start(vec![sse_server("everything", &everything.url)]).await;

    let status = service_status(&h, "everything").await;
    assert!(status.get("last_error").is_none(), "{status}");
    assert!(
        matches!(status["state"].as_str(), Some("running" | "connected")),
        "{status}"
    );

    let page = h.meta_json("list_tools", json!({"limit": 200})).await;
    let names: Vec<&str> = page["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"x_everything_echo"), "{names:?}");
    assert!(names.contains(&"x_everything_get-sum"), "{names:?}");

    let result = h
        .meta(
            "call_tool",
            json!({"name": "x_everything_echo", "arguments": {"message": "hello over sse"}}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let envelope: Value = serde_json::from_str(&text(&result)).expect("envelope");
    assert_eq!(envelope["isError"], false, "{envelope}");
    assert_eq!(envelope["content"][0]["text"], "Echo: hello over sse");
    assert_eq!(envelope["tool"]["server"], "everything");

    // Calls in parallel each get their own answer over the one SSE stream.
    let sums = futures_join(&h).await;
    assert_eq!(
        sums,
        [
            "The sum of 0 and 1 is 1.",
            "The sum of 1 and 1 is 2.",
            "The sum of 2 and 1 is 3."
        ]
    );

    let uri = "demo://resource/static/document/architecture.md";
    let resources = h.meta_json("list_resources", json!({})).await;
    let listed = resources
        .as_array()
        .or_else(|| resources["resources"].as_array())
        .into_iter()
        .flatten()
        .any(|r| r["uri"] == uri);
    assert!(listed, "{uri} missing from {resources}");
    let read = h.meta("get_resource", json!({"uri": uri})).await;
    assert_ne!(read.is_error, Some(true), "{}", text(&read));
    let expected = std::fs::read_to_string(
        root().join("node_modules/@modelcontextprotocol/server-everything/dist/docs/architecture.md"),
    )
    .expect("the document");
    assert_eq!(text(&read), expected);

    // The server going away closes the SSE stream, which ends the connection: the gateway notices.
    drop(everything);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let status = loop {
        let status = service_status(&h, "everything").await;
        let up = matches!(status["state"].as_str(), Some("running" | "connected"));
        if !up || tokio::time::Instant::now() >= deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        !matches!(status["state"].as_str(), Some("running" | "connected")),
        "still up after its server exited: {status}"
    );
    eprintln!("after its server exited: {} {}", status["state"], status["last_error"]);
    h.stop().await;
}

/// Three get-sum calls at once; their texts in order.
async fn futures_join(h: &Harness) -> Vec<String> {
    let call = |a: u32| {
        h.meta(
            "call_tool",
            json!({"name": "x_everything_get-sum", "arguments": {"a": a, "b": 1}}),
        )
    };
    let (r0, r1, r2) = tokio::join!(call(0), call(1), call(2));
    [r0, r1, r2]
        .iter()
        .map(|r| {
            let envelope: Value = serde_json::from_str(&text(r)).expect("envelope");
            envelope["content"][0]["text"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_server_that_is_not_an_sse_server_fails_with_a_clear_last_error() {
    let demo = DemoHttp::start();
    let h = Harness::start(vec![sse_server("wrong", &demo.url)]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = service_status(&h, "wrong").await;
        if status.get("last_error").is_some() || tokio::time::Instant::now() >= deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        !matches!(status["state"].as_str(), Some("running" | "connected")),
        "{status}"
    );
    let last_error = status["last_error"].as_str().unwrap_or_default();
    eprintln!("lastError of a streamable-HTTP server as type: sse: {last_error}");
    assert!(
        last_error.contains("not an SSE stream") && last_error.contains("legacy HTTP+SSE"),
        "the lastError does not say what is wrong: {status}"
    );
    assert!(
        last_error.contains(&demo.url),
        "the lastError does not name the URL: {status}"
    );
    h.stop().await;
}
