//! The compose example (`examples/compose`) runs: its stack, built from the SDK's pieces, serves
//! MCP on loopback to a real rmcp client. The downstream's tools, the gateway's core tools and
//! the example's own core tool are listed and called through it; the toolset layers narrow and
//! refuse; the audit layer sees every call; the front door wants a token of its trusted issuer.

mod common;

#[path = "../examples/compose/app.rs"]
mod app;
#[path = "../examples/compose/layers.rs"]
mod layers;
#[path = "../examples/compose/notes.rs"]
mod notes;
#[path = "../examples/compose/whoami.rs"]
mod whoami;

use common::{connect, oidc::OidcProvider, text};
use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, CallToolResult},
    service::RunningService,
};
use serde_json::{Value, json};

/// The composed app, served on a loopback port.
struct Served {
    url: String,
    composed: app::Composed,
    server: tokio::task::JoinHandle<()>,
}

impl Served {
    async fn start(front_door: impl FnOnce(&str) -> Option<app::FrontDoor>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        let composed = app::compose(front_door(&url)).await.expect("the example composes");
        let router = composed.router.clone();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { url, composed, server }
    }

    async fn stop(self) {
        self.composed.shutdown().await;
        self.server.abort();
    }
}

async fn tool_names(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    let listed = client.list_all_tools().await.expect("tools/list answers");
    listed.into_iter().map(|t| t.name.into_owned()).collect()
}

async fn call(client: &RunningService<RoleClient, ()>, name: &str, args: Value) -> Result<CallToolResult, String> {
    let args = args.as_object().cloned().unwrap_or_default();
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn the_composed_stack_serves_downstream_gateway_and_own_tools() {
    let served = Served::start(|_| None).await;
    let client = connect(&served.url, &[], None).await;

    let names = tool_names(&client).await;
    for expected in [
        "filter_tools",
        "x_notes_add_note",
        "x_notes_list_notes",
        "x_notes_delete_note",
        "core_whoami",
        "core_service_list",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }

    // The downstream, in this process, through the registry's connection.
    let added = call(&client, "x_notes_add_note", json!({"text": "buy milk"}))
        .await
        .expect("added");
    assert_eq!(text(&added), "note 0");
    let listed = call(&client, "x_notes_list_notes", json!({})).await.expect("listed");
    assert_eq!(text(&listed), "0: buy milk");
    let missing = call(&client, "x_notes_delete_note", json!({"id": 7}))
        .await
        .expect("answered");
    assert_eq!(missing.is_error, Some(true), "{missing:?}");

    // Our own core tool sees the call's context; the gateway's core tools work next to it.
    let me = call(&client, "core_whoami", json!({})).await.expect("whoami");
    let me = me.structured_content.expect("structured");
    assert!(me["session"].as_str().is_some_and(|s| !s.is_empty()), "{me}");
    assert_eq!(me["principal"], Value::Null);
    let services = call(&client, "core_service_list", json!({})).await.expect("services");
    assert!(text(&services).contains("notes"), "{}", text(&services));

    // muster's discovery over the merged catalogue.
    let found = call(&client, "filter_tools", json!({"query": "delete a note"}))
        .await
        .expect("found");
    let page: Value = serde_json::from_str(&text(&found)).expect("a page");
    assert_eq!(page["tools"][0]["name"], "x_notes_delete_note", "{page}");

    // An unknown tool is a JSON-RPC error from muster-core's table.
    let unknown = call(&client, "x_notes_nope", json!({})).await.expect_err("refused");
    assert!(unknown.contains("tool not found: x_notes_nope"), "{unknown}");

    // Every call went through the audit layer, with its outcome.
    let records = served.composed.audit.records();
    let seen: Vec<(&str, &str)> = records.iter().map(|r| (r.tool.as_str(), r.outcome.as_str())).collect();
    assert_eq!(
        seen,
        [
            ("x_notes_add_note", "ok"),
            ("x_notes_list_notes", "ok"),
            ("x_notes_delete_note", "tool error"),
            ("core_whoami", "ok"),
            ("core_service_list", "ok"),
            ("x_notes_nope", "tool not found: x_notes_nope"),
        ]
    );
    let _ = client.cancel().await;
    served.stop().await;
}

#[tokio::test]
async fn a_read_only_toolset_hides_and_refuses_the_writing_tools() {
    let served = Served::start(|_| None).await;
    let client = connect(&served.url, &[("x-muster-toolset", "preset:read-only")], None).await;

    let names = tool_names(&client).await;
    assert!(names.iter().any(|n| n == "x_notes_list_notes"), "{names:?}");
    assert!(names.iter().any(|n| n == "core_whoami"), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n == "x_notes_add_note" || n == "x_notes_delete_note"),
        "{names:?}"
    );

    let refused = call(&client, "x_notes_add_note", json!({"text": "x"}))
        .await
        .expect_err("refused");
    assert!(
        refused.contains("tool \"x_notes_add_note\" is outside the toolset [preset:read-only]"),
        "{refused}"
    );
    let me = call(&client, "core_whoami", json!({})).await.expect("whoami");
    assert_eq!(
        me.structured_content.expect("structured")["toolset"],
        json!(["preset:read-only"])
    );
    let records = served.composed.audit.records();
    assert!(
        records
            .iter()
            .any(|r| r.tool == "x_notes_add_note" && r.outcome.contains("outside the toolset")),
        "{records:?}"
    );

    let bogus = connect(&served.url, &[("x-muster-toolset", "bogus")], None).await;
    let error = bogus.list_all_tools().await.expect_err("an invalid toolset is refused");
    assert!(error.to_string().contains("malformed"), "{error}");
    let _ = client.cancel().await;
    let _ = bogus.cancel().await;
    served.stop().await;
}

#[tokio::test]
async fn the_front_door_admits_tokens_of_its_trusted_issuer_only() {
    let idp = OidcProvider::start();
    let issuer = idp.issuer().to_owned();
    let served = Served::start(|url| {
        Some(app::FrontDoor {
            issuer: issuer.clone(),
            resource: url.to_owned(),
        })
    })
    .await;
    let http = reqwest::Client::new();

    // Without a token: 401, naming the metadata, which is served without one (as is /health).
    let refused = http
        .post(&served.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .expect("answers");
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let base = served.url.trim_end_matches("/mcp");
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    assert!(challenge.contains(&metadata_url), "{challenge}");
    let metadata: Value = http
        .get(&metadata_url)
        .send()
        .await
        .expect("served")
        .json()
        .await
        .expect("json");
    assert_eq!(metadata["resource"], served.url.as_str());
    assert_eq!(metadata["authorization_servers"], json!([issuer]));
    assert_eq!(
        http.get(format!("{base}/health"))
            .send()
            .await
            .expect("served")
            .status(),
        200
    );

    // With one: the principal reaches the call's context.
    let token = idp.token_for(&served.url, "alice").await;
    let client = connect(&served.url, &[], Some(token)).await;
    let me = call(&client, "core_whoami", json!({})).await.expect("whoami");
    let me = me.structured_content.expect("structured");
    assert_eq!(me["principal"]["subject"], "alice", "{me}");
    assert_eq!(me["principal"]["issuer"], issuer.as_str(), "{me}");
    let _ = client.cancel().await;
    served.stop().await;
}
