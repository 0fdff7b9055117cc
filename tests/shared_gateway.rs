//! A gateway shared behind the front door (issue 33): the reference gateway binary serving a
//! config directory with `aggregator.oauth.server` on, a real authorization server
//! (oidc-provider on loopback) issuing the callers' tokens, and an rmcp client calling through
//! `call_tool`. Behind the front door the API does not run callers' commands (stdio refused in
//! create, update and validate, through a toolset and through a workflow step too, and the
//! refused create leaves no process and no file), reaches only allowed URLs and no link-local
//! address, names files relative to the config directory, and names the author of each write.
//! The operator's own files still start, and `aggregator.serverApi.allowStdio: true` opts in.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use common::{
    DemoHttp, connect, envelope, eventually, gateway_binary, gateway_process::GatewayChild, oidc::OidcProvider, text,
};
use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, CallToolResult},
    service::RunningService,
};
use serde_json::{Value, json};

/// The reference gateway serving a config directory; killed on drop. Its log (stderr) is kept.
struct Served {
    gateway: GatewayChild,
    base: String,
}

impl Served {
    fn start(dir: &Path, port: u16) -> Self {
        let mut command = Command::new(gateway_binary());
        command
            .arg("serve")
            .arg("--config-path")
            .arg(dir)
            .args(["--port", &port.to_string()])
            .env_remove("RUST_LOG")
            .env_remove("MUSTER_LOG_FORMAT");
        Self {
            gateway: GatewayChild::spawn(command),
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn log(&self) -> String {
        self.gateway.log()
    }

    fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    async fn wait_ready(&self, servers: u64) {
        let base = self.base.clone();
        let ready = eventually(30, || {
            let base = base.clone();
            async move {
                match reqwest::get(format!("{base}/health")).await {
                    Ok(r) => r.json::<Value>().await.is_ok_and(|v| v["servers"]["ready"] == servers),
                    Err(_) => false,
                }
            }
        })
        .await;
        assert!(ready, "the gateway did not become ready; log:\n{}", self.log());
    }

    async fn client(&self, token: &str, headers: &[(&'static str, &str)]) -> RunningService<RoleClient, ()> {
        connect(&self.mcp(), headers, Some(token.to_owned())).await
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A config directory behind the front door of `issuer`, with `server_api` as
/// `aggregator.serverApi` (YAML lines under it), the operator's stdio demo server `ops`, and
/// workflow `sneak`, whose step tries to create a stdio server touching `marker`.
fn shared_dir(port: u16, issuer: &str, server_api: &str, marker: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "config.yaml",
        &format!(
            "aggregator:\n  host: 127.0.0.1\n  oauth:\n    server:\n      enabled: true\n      \
             baseUrl: http://127.0.0.1:{port}\n      trustedIssuers: [\"{issuer}\"]\n  serverApi:\n{server_api}"
        ),
    );
    write(
        dir.path(),
        "mcpservers/ops.yaml",
        &format!(
            "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: ops\nspec:\n  \
             type: stdio\n  autoStart: true\n  command: {:?}\n  args: [demo-server]\n  timeout: 20\n",
            gateway_binary().display().to_string()
        ),
    );
    write(
        dir.path(),
        "workflows/sneak.yaml",
        &format!(
            "apiVersion: muster.giantswarm.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: sneak\nspec:\n  steps:\n    \
             - id: plant\n      tool: core_mcpserver_create\n      args:\n        name: planted\n        type: stdio\n        \
             autoStart: true\n        command: [sh, -c, \"touch {} ; sleep 30\"]\n",
            marker.display()
        ),
    );
    dir
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new("call_tool").with_arguments(
                json!({"name": tool, "arguments": arguments})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("call_tool {tool} failed at the protocol level: {e}"))
}

/// The core tool's own answer inside the `call_tool` envelope: (isError, its text).
fn inner(result: &CallToolResult) -> (bool, String) {
    let envelope = envelope(result);
    let is_error = envelope["isError"].as_bool().unwrap_or(result.is_error == Some(true));
    let text = envelope["content"][0]["text"]
        .as_str()
        .map_or_else(|| text(result), str::to_owned);
    (is_error, text)
}

fn answer_json(result: &CallToolResult) -> Value {
    let (is_error, text) = inner(result);
    assert!(!is_error, "the call failed: {text}");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// Whether any process on this host has `needle` in its command line.
fn process_running_with(needle: &str) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .any(|cmdline| String::from_utf8_lossy(&cmdline).contains(needle))
}

fn marker_in(dir: &Path) -> PathBuf {
    dir.join(format!("marker-{}", std::process::id()))
}

#[tokio::test]
async fn behind_the_front_door_the_api_runs_no_callers_commands_and_reaches_only_allowed_places() {
    let idp = OidcProvider::start();
    let scratch = tempfile::tempdir().expect("scratch");
    let marker = marker_in(scratch.path());
    let port = free_port();
    let dir = shared_dir(
        port,
        idp.issuer(),
        "    allowedUrls: [\"http://127.0.0.1:*/mcp\"]\n",
        &marker,
    );
    let served = Served::start(dir.path(), port);
    // The operator's file still starts: stdio in mcpservers/ is not the API's to refuse.
    served.wait_ready(1).await;
    let token = idp.token_for(&served.mcp(), "dana").await;
    let client = served.client(&token, &[]).await;
    let command = json!(["sh", "-c", format!("touch {} ; sleep 30", marker.display())]);
    let host_dir = dir.path().display().to_string();

    // create, validate: refused, naming the remote alternatives and the key that allows it.
    let refused = inner(
        &call(
            &client,
            "core_mcpserver_create",
            json!({"name": "x", "type": "stdio", "command": command, "autoStart": true}),
        )
        .await,
    );
    assert!(refused.0, "{refused:?}");
    for words in ["streamable-http or sse", "aggregator.serverApi.allowStdio: true"] {
        assert!(refused.1.contains(words), "{words}: {}", refused.1);
    }
    let validated = answer_json(
        &call(
            &client,
            "core_mcpserver_validate",
            json!({"name": "x", "type": "stdio", "command": command}),
        )
        .await,
    );
    assert_eq!(validated["valid"], false, "{validated}");
    assert!(
        validated["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("allowStdio")),
        "{validated}"
    );

    // Through a toolset that selects the create tool alone: the same refusal.
    let scoped = served
        .client(&token, &[("x-muster-toolset", "tool:core_mcpserver_create")])
        .await;
    let through_toolset = inner(
        &call(
            &scoped,
            "core_mcpserver_create",
            json!({"name": "x", "type": "stdio", "command": command, "autoStart": true}),
        )
        .await,
    );
    assert!(
        through_toolset.0 && through_toolset.1.contains("allowStdio"),
        "{through_toolset:?}"
    );
    let _ = scoped.cancel().await;

    // Through a workflow step: the step's call meets the same core tool.
    let through_workflow = inner(&call(&client, "workflow_sneak", json!({})).await);
    assert!(through_workflow.0, "{through_workflow:?}");
    assert!(through_workflow.1.contains("allowStdio"), "{through_workflow:?}");

    // update: a new command, args or env of the operator's server, or a remote turned stdio,
    // is refused; another field of it is not.
    for change in [
        json!({"name": "ops", "command": ["sh", "-c", "true"]}),
        json!({"name": "ops", "args": ["demo-server", "--evil"]}),
        json!({"name": "ops", "env": {"LD_PRELOAD": "/tmp/x.so"}}),
    ] {
        let (is_error, text) = inner(&call(&client, "core_mcpserver_update", change.clone()).await);
        assert!(is_error && text.contains("allowStdio"), "{change}: {text}");
    }
    let described = answer_json(
        &call(
            &client,
            "core_mcpserver_update",
            json!({"name": "ops", "description": "the operator's demo"}),
        )
        .await,
    );
    assert_eq!(described["file"], "mcpservers/ops.yaml", "{described}");

    // Nothing ran and nothing was written by the refusals.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!marker.exists(), "the refused command ran");
    assert!(
        !process_running_with(&marker.display().to_string()),
        "a refused process runs"
    );
    for file in ["mcpservers/x.yaml", "mcpservers/planted.yaml"] {
        assert!(!dir.path().join(file).exists(), "{file} was written");
    }

    // A remote server on an allowed URL is created; the answer names the file relative to the
    // config directory, the definition names its author, and so do the event and the log.
    let demo = DemoHttp::start();
    let created = answer_json(
        &call(
            &client,
            "core_mcpserver_create",
            json!({"name": "remote", "type": "streamable-http", "url": demo.url}),
        )
        .await,
    );
    assert_eq!(created["file"], "mcpservers/remote.yaml", "{created}");
    assert!(!created.to_string().contains(&host_dir), "{created}");
    assert_eq!(created["registeredBy"], "dana", "{created}");
    let written = std::fs::read_to_string(dir.path().join("mcpservers/remote.yaml")).expect("written");
    assert!(written.contains("ui.giantswarm.io/registered-by: dana"), "{written}");
    let got = answer_json(&call(&client, "core_mcpserver_get", json!({"name": "remote"})).await);
    assert_eq!(got["registeredBy"], "dana", "{got}");
    let events = answer_json(
        &call(
            &client,
            "core_events",
            json!({"resourceType": "MCPServer", "resourceName": "remote"}),
        )
        .await,
    );
    let created_event = events
        .as_array()
        .and_then(|e| e.iter().find(|e| e["reason"] == "MCPServerCreated"))
        .unwrap_or_else(|| panic!("no MCPServerCreated event: {events}"));
    assert_eq!(created_event["data"]["author"]["subject"], "dana", "{created_event}");
    assert_eq!(
        created_event["data"]["author"]["issuer"],
        idp.issuer(),
        "{created_event}"
    );
    assert!(!events.to_string().contains(&host_dir), "{events}");
    let log = served.log();
    assert!(
        log.lines()
            .any(|l| l.contains("MCPServer definition applied") && l.contains("remote") && l.contains("dana")),
        "the log names the author:\n{log}"
    );
    assert!(
        log.contains(&dir.path().join("mcpservers/remote.yaml").display().to_string()),
        "the full path stays in the log:\n{log}"
    );

    // Outside allowedUrls, or link-local: refused for create, update and the probe.
    let outside = inner(
        &call(
            &client,
            "core_mcpserver_create",
            json!({"name": "elsewhere", "type": "streamable-http", "url": demo.url.replace("/mcp", "/other")}),
        )
        .await,
    );
    assert!(outside.0 && outside.1.contains("allowedUrls"), "{outside:?}");
    let moved = inner(
        &call(
            &client,
            "core_mcpserver_update",
            json!({"name": "remote", "url": "http://localhost:1/mcp"}),
        )
        .await,
    );
    assert!(moved.0 && moved.1.contains("allowedUrls"), "{moved:?}");
    let probe = inner(
        &call(
            &client,
            "core_mcpserver_detect",
            json!({"url": "http://127.0.0.1:1/elsewhere"}),
        )
        .await,
    );
    assert!(probe.0 && probe.1.contains("allowedUrls"), "{probe:?}");
    assert!(!dir.path().join("mcpservers/elsewhere.yaml").exists());

    // A caller cannot lift the refusals through the configuration tools.
    let lifted = inner(
        &call(
            &client,
            "core_config_update_aggregator",
            json!({"aggregator": {"serverApi": {"allowStdio": true}}}),
        )
        .await,
    );
    assert!(lifted.0 && lifted.1.contains("aggregator.serverApi"), "{lifted:?}");
    let saved = answer_json(&call(&client, "core_config_save", json!({})).await);
    assert_eq!(saved["file"], "config.yaml", "{saved}");
    let still = std::fs::read_to_string(dir.path().join("config.yaml")).expect("config.yaml");
    assert!(!still.contains("allowStdio"), "{still}");

    // A body that is not JSON is a JSON-RPC parse error.
    let response = reqwest::Client::new()
        .post(served.mcp())
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{not json")
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("a JSON-RPC error");
    assert_eq!(body["error"]["code"], -32700, "{body}");
    assert_eq!(body["id"], Value::Null, "{body}");

    let _ = client.cancel().await;
}

#[tokio::test]
async fn behind_the_front_door_link_local_addresses_are_refused_by_default() {
    let idp = OidcProvider::start();
    let scratch = tempfile::tempdir().expect("scratch");
    let port = free_port();
    let dir = shared_dir(port, idp.issuer(), "    {}\n", &marker_in(scratch.path()));
    let served = Served::start(dir.path(), port);
    served.wait_ready(1).await;
    let token = idp.token_for(&served.mcp(), "erin").await;
    let client = served.client(&token, &[]).await;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/mcp",
        "http://[::ffff:169.254.169.254]/mcp",
        "http://[fd00:ec2::254]/latest",
    ] {
        let created = inner(
            &call(
                &client,
                "core_mcpserver_create",
                json!({"name": "imds", "type": "streamable-http", "url": url}),
            )
            .await,
        );
        assert!(created.0 && created.1.contains("link-local"), "{url}: {created:?}");
        assert!(created.1.contains("allowLinkLocal"), "{created:?}");
        let probe = inner(&call(&client, "core_mcpserver_detect", json!({"url": url})).await);
        assert!(probe.0 && probe.1.contains("link-local"), "{url}: {probe:?}");
    }
    assert!(!dir.path().join("mcpservers/imds.yaml").exists());

    // A name that resolves to loopback is admitted, and the server's own connections (rmcp's
    // and the call lane's, both resolving through the refusing resolver) reach it.
    let demo = DemoHttp::start();
    let by_name = demo.url.replace("127.0.0.1", "localhost");
    let created = answer_json(
        &call(
            &client,
            "core_mcpserver_create",
            json!({"name": "named", "type": "streamable-http", "url": by_name, "autoStart": true, "timeout": 5}),
        )
        .await,
    );
    assert_eq!(created["registeredBy"], "erin", "{created}");
    served.wait_ready(2).await;
    let echoed = inner(&call(&client, "x_named_echo", json!({"message": "through the filter"})).await);
    assert!(!echoed.0 && echoed.1.contains("through the filter"), "{echoed:?}");

    // Its definition comes to point at the metadata address (as a name that rebinds would):
    // the connection itself is refused, naming why, rather than attempted.
    let file = dir.path().join("mcpservers/named.yaml");
    let written = std::fs::read_to_string(&file).expect("written");
    let port = demo
        .url
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .expect("a port");
    std::fs::write(
        &file,
        written.replace(&by_name, &format!("http://169.254.169.254:{port}/mcp")),
    )
    .expect("rewritten");
    let refused = eventually(30, || async {
        let got = answer_json(&call(&client, "core_mcpserver_get", json!({"name": "named"})).await);
        got["lastError"].as_str().is_some_and(|e| e.contains("link-local"))
    })
    .await;
    let got = answer_json(&call(&client, "core_mcpserver_get", json!({"name": "named"})).await);
    assert!(refused, "the connection was not refused for link-local: {got}");
    assert!(
        got["lastError"].as_str().is_some_and(|e| e.contains("allowLinkLocal")),
        "{got}"
    );
    let _ = client.cancel().await;
}

#[tokio::test]
async fn the_operator_opts_in_to_stdio_definitions_with_one_key() {
    let idp = OidcProvider::start();
    let scratch = tempfile::tempdir().expect("scratch");
    let port = free_port();
    let dir = shared_dir(port, idp.issuer(), "    allowStdio: true\n", &marker_in(scratch.path()));
    let served = Served::start(dir.path(), port);
    served.wait_ready(1).await;
    let token = idp.token_for(&served.mcp(), "frank").await;
    let client = served.client(&token, &[]).await;
    let created = answer_json(
        &call(
            &client,
            "core_mcpserver_create",
            json!({"name": "extra", "type": "stdio", "autoStart": true,
                   "command": [gateway_binary().display().to_string(), "demo-server"]}),
        )
        .await,
    );
    assert_eq!(created["file"], "mcpservers/extra.yaml", "{created}");
    assert_eq!(created["registeredBy"], "frank", "{created}");
    served.wait_ready(2).await;
    let _ = client.cancel().await;
}
