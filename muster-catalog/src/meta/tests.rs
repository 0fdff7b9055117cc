//! The meta-tools composed over a catalogue and `tower::service_fn` tools: no gateway, no
//! registry. The MCP server is driven by rmcp's own client over an in-memory duplex.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use futures::future::BoxFuture;
use muster_core::{BoxToolService, CallContext, JsonObject, ResourceEntry, ToolCall, ToolEntry, ToolError, ToolOutput};
use muster_core::{PromptEntry, config::Exposure};
use rmcp::{
    ServiceExt as _,
    model::{
        CallToolRequestParams, CallToolResult, ContentBlock, GetPromptResult, Prompt, PromptMessage,
        ReadResourceResult, Resource, ResourceContents, Role, Tool,
    },
};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::{Catalog, CatalogSource, discovery::Discovery, toolset::Presets};

fn catalog_source() -> Arc<dyn CatalogSource> {
    let mut builder = Catalog::builder();
    for (name, description, read_only) in [
        ("list_notes", "List the notes.", true),
        ("add_note", "Add a note with a text.", false),
    ] {
        let mut tool = Tool::new(name, description, Arc::new(JsonObject::new()));
        tool.annotations = Some(rmcp::model::ToolAnnotations::new().read_only(read_only));
        builder.push_tool(ToolEntry::downstream(format!("x_notes_{name}"), "notes", tool));
    }
    let resource = Resource::new("notes://all", "all notes");
    builder.push_resource(ResourceEntry::downstream("notes://all", "notes", resource));
    builder.push_prompt(PromptEntry::downstream(
        "x_notes_summarize",
        "notes",
        Prompt::new("summarize", Some("Summarize the notes."), None),
    ));
    let catalog = Arc::new(builder.build());
    Arc::new(move || Arc::clone(&catalog))
}

/// A tool service that answers `ran <name> <arguments>` and counts its calls.
fn counting_tools(calls: Arc<AtomicUsize>) -> BoxToolService {
    BoxToolService::new(tower::service_fn(move |call: ToolCall| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            let text = format!("ran {} {}", call.name, Value::Object(call.arguments));
            Ok::<_, ToolError>(ToolOutput::from(CallToolResult::success(vec![ContentBlock::text(
                text,
            )])))
        }
    }))
}

fn meta(calls: Arc<AtomicUsize>) -> MetaService {
    MetaService::new(
        Discovery::new(catalog_source(), Arc::new(Presets::default())),
        counting_tools(calls),
    )
}

fn text(result: &CallToolResult) -> &str {
    &result.content[0].as_text().expect("a text block").text
}

fn args(value: Value) -> JsonObject {
    value.as_object().cloned().expect("an object")
}

fn read_only() -> CallContext {
    CallContext::default().with_toolset(vec!["preset:read-only".to_owned()])
}

#[tokio::test]
async fn call_tool_runs_the_tool_through_the_tool_service_and_wraps_it_in_the_envelope() {
    let calls = Arc::new(AtomicUsize::new(0));
    let meta = meta(Arc::clone(&calls));
    let call = args(json!({"name": "x_notes_add_note", "arguments": {"text": "milk"}}));
    let result = meta.answer(MetaTool::CallTool, call, CallContext::default()).await;
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    let envelope: Value = serde_json::from_str(text(&result)).expect("the envelope is JSON");
    assert_eq!(
        envelope["content"][0]["text"],
        r#"ran x_notes_add_note {"text":"milk"}"#
    );
    assert_eq!(
        envelope["tool"],
        json!({"name": "x_notes_add_note", "server": "notes", "serverTool": "add_note"})
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_tool_outside_the_toolset_or_unknown_is_refused_without_running_anything() {
    let calls = Arc::new(AtomicUsize::new(0));
    let meta = meta(Arc::clone(&calls));
    let hidden = meta
        .answer(
            MetaTool::CallTool,
            args(json!({"name": "x_notes_add_note"})),
            read_only(),
        )
        .await;
    assert_eq!(hidden.is_error, Some(true));
    assert!(
        text(&hidden).contains("outside") && text(&hidden).contains("preset:read-only"),
        "{}",
        text(&hidden)
    );
    let unknown = meta
        .answer(
            MetaTool::CallTool,
            args(json!({"name": "x_nope"})),
            CallContext::default(),
        )
        .await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(text(&unknown).starts_with("Tool execution failed:") && text(&unknown).contains("x_nope"));
    let nameless = meta
        .answer(MetaTool::CallTool, JsonObject::new(), CallContext::default())
        .await;
    assert_eq!(text(&nameless), "name argument is required");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing ran");
    // Allowed by the same toolset: the read-only tool runs.
    let allowed = meta
        .answer(
            MetaTool::CallTool,
            args(json!({"name": "x_notes_list_notes"})),
            read_only(),
        )
        .await;
    assert_ne!(allowed.is_error, Some(true), "{}", text(&allowed));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Answers every unseen tool with where to sign in, and remembers the refusal it was given.
#[derive(Default)]
struct SignInFirst {
    refusals: Mutex<Vec<String>>,
}

impl UnseenTools for SignInFirst {
    fn answer<'a>(&'a self, call: Unseen<'a>) -> BoxFuture<'a, CallToolResult> {
        Box::pin(async move {
            self.refusals.lock().expect("lock").push(call.refusal.to_string());
            if matches!(call.refusal, ToolError::OutsideToolset { .. }) {
                return call.refused();
            }
            CallToolResult::error(vec![ContentBlock::text(format!("sign in to reach {}", call.name))])
        })
    }
}

#[tokio::test]
async fn an_unseen_tools_hook_answers_what_the_catalogue_does_not_show() {
    let hook = Arc::new(SignInFirst::default());
    let meta = meta(Arc::new(AtomicUsize::new(0))).with_unseen(Arc::clone(&hook) as _);
    let answer = meta
        .answer(
            MetaTool::CallTool,
            args(json!({"name": "x_github_create_issue"})),
            CallContext::default(),
        )
        .await;
    assert_eq!(text(&answer), "sign in to reach x_github_create_issue");
    let hidden = meta
        .answer(
            MetaTool::CallTool,
            args(json!({"name": "x_notes_add_note"})),
            read_only(),
        )
        .await;
    assert!(text(&hidden).contains("preset:read-only"), "{}", text(&hidden));
    let refusals = hook.refusals.lock().expect("lock").clone();
    assert_eq!(refusals.len(), 2);
    assert!(refusals[0].contains("x_github_create_issue"));
    assert!(refusals[1].contains("x_notes_add_note") && refusals[1].contains("preset:read-only"));
}

/// Reads `notes://all` of server `notes` and its one prompt; the prompt's text names the
/// arguments it got.
struct NotesEntries;

impl EntryReader for NotesEntries {
    fn read_resource<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        _: &'a CallContext,
    ) -> BoxFuture<'a, Result<ReadResourceResult, EntryError>> {
        Box::pin(async move {
            match (server, uri) {
                ("notes", "notes://all") => Ok(ReadResourceResult::new(vec![
                    ResourceContents::text("milk\neggs", uri),
                    ResourceContents::blob("AAECAw==", uri),
                ])),
                _ => Err(EntryError::Failed(format!("no {uri} on {server}").into())),
            }
        })
    }

    fn get_prompt<'a>(
        &'a self,
        server: &'a str,
        prompt: &'a str,
        arguments: Option<JsonObject>,
        _: &'a CallContext,
    ) -> BoxFuture<'a, Result<GetPromptResult, EntryError>> {
        Box::pin(async move {
            let got = Value::Object(arguments.unwrap_or_default());
            Ok(GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                format!("{server}/{prompt} {got}"),
            )]))
        })
    }
}

#[tokio::test]
async fn get_resource_and_get_prompt_read_through_the_entry_reader() {
    let meta = meta(Arc::new(AtomicUsize::new(0)));
    let resource = args(json!({"uri": "notes://all"}));
    let unconnected = meta
        .answer(MetaTool::GetResource, resource.clone(), CallContext::default())
        .await;
    assert_eq!(text(&unconnected), "server notes is not connected");

    let meta = meta.with_entries(Arc::new(NotesEntries));
    let read = meta
        .answer(MetaTool::GetResource, resource, CallContext::default())
        .await;
    assert_eq!(text(&read), "milk\neggs\n[Binary data: 4 bytes]");
    let prompt = args(json!({"name": "x_notes_summarize", "arguments": {"days": 3, "tag": "home"}}));
    let got = meta.answer(MetaTool::GetPrompt, prompt, CallContext::default()).await;
    let messages: Value = serde_json::from_str(text(&got)).expect("JSON messages");
    // The server's own prompt name, and every argument as a string.
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(
        messages[0]["content"]["text"],
        r#"notes/summarize {"days":"3","tag":"home"}"#
    );
    let missing = meta
        .answer(
            MetaTool::GetResource,
            args(json!({"uri": "notes://none"})),
            CallContext::default(),
        )
        .await;
    assert_eq!(missing.is_error, Some(true));
    assert!(text(&missing).contains("notes://none"), "{}", text(&missing));
}

#[tokio::test]
async fn as_a_tower_service_it_answers_meta_tools_and_refuses_other_names() {
    let meta = meta(Arc::new(AtomicUsize::new(0)));
    let call = |name: &str, arguments: Value| ToolCall::new(name, args(arguments), CallContext::default());
    let found = meta
        .clone()
        .oneshot(call("filter_tools", json!({"query": "add a note"})))
        .await
        .expect("answered")
        .into_result()
        .expect("a result");
    let page: Value = serde_json::from_str(text(&found)).expect("a JSON page");
    assert_eq!(page["tools"][0]["name"], "x_notes_add_note");
    let refused = meta.oneshot(call("x_notes_add_note", json!({}))).await;
    assert!(matches!(refused, Err(ToolError::NotFound { .. })), "{refused:?}");
}

async fn serve(server: MetaServer) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let running = server.serve(server_io).await.expect("the server starts");
        let _ = running.waiting().await;
    });
    ().serve(client_io).await.expect("the client connects")
}

#[tokio::test]
async fn the_mcp_server_lists_the_meta_tools_and_answers_them_over_mcp() {
    let calls = Arc::new(AtomicUsize::new(0));
    let client = serve(MetaServer::new(meta(Arc::clone(&calls)))).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let expected: Vec<&str> = MetaTool::ALL.iter().map(|t| t.name()).collect();
    assert_eq!(names, expected);

    let called = client
        .call_tool(
            CallToolRequestParams::new("call_tool")
                .with_arguments(args(json!({"name": "x_notes_list_notes", "arguments": {}}))),
        )
        .await
        .expect("tools/call");
    let envelope: Value = serde_json::from_str(text(&called)).expect("the envelope");
    assert_eq!(envelope["tool"]["serverTool"], "list_notes");
    let direct = client.call_tool(CallToolRequestParams::new("x_notes_list_notes")).await;
    assert!(direct.is_err(), "only the meta-tools are callable: {direct:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    client.cancel().await.expect("the client stops");
}

#[tokio::test]
async fn with_native_exposure_the_catalogues_tools_are_listed_and_called_directly() {
    let calls = Arc::new(AtomicUsize::new(0));
    let client = serve(MetaServer::new(meta(Arc::clone(&calls))).with_exposure(Exposure::Both)).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 13 + 2);
    assert_eq!(tools[13].name, "x_notes_list_notes");
    let direct = client
        .call_tool(CallToolRequestParams::new("x_notes_add_note").with_arguments(args(json!({"text": "tea"}))))
        .await
        .expect("tools/call");
    assert_eq!(text(&direct), r#"ran x_notes_add_note {"text":"tea"}"#);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    client.cancel().await.expect("the client stops");
}

/// The pieces composed with no gateway: tools added once to a `ToolRouter`, the catalogue built
/// from its entries, and the meta-tools over both. A tool added is listed, found and called.
#[tokio::test]
async fn a_router_and_its_entries_make_the_catalogue_the_meta_tools_serve() {
    use muster_core::{ToolKind, router::ToolRouter};

    let mut tool = Tool::new(
        "core_forecast",
        "Tomorrow's weather forecast for a city.",
        Arc::new(JsonObject::new()),
    );
    tool.annotations = Some(rmcp::model::ToolAnnotations::new().read_only(true));
    let router = ToolRouter::new().with_tool(
        ToolEntry::builtin(ToolKind::Core, tool),
        counting_tools(Arc::new(AtomicUsize::new(0))),
    );
    let mut builder = Catalog::builder();
    for entry in router.entries() {
        builder.push_tool(entry.clone());
    }
    let catalog = Arc::new(builder.build());
    let source: Arc<dyn CatalogSource> = Arc::new(move || Arc::clone(&catalog));
    let meta = MetaService::new(
        Discovery::new(source, Arc::new(Presets::default())),
        BoxToolService::new(router),
    );

    let found = meta
        .answer(
            MetaTool::FilterTools,
            args(json!({"query": "weather forecast"})),
            CallContext::default(),
        )
        .await;
    let page: Value = serde_json::from_str(text(&found)).expect("a JSON page");
    assert_eq!(page["tools"][0]["name"], "core_forecast", "{page}");
    let called = meta
        .answer(
            MetaTool::CallTool,
            args(json!({"name": "core_forecast", "arguments": {"city": "Oslo"}})),
            CallContext::default(),
        )
        .await;
    let envelope: Value = serde_json::from_str(text(&called)).expect("the envelope");
    assert_eq!(envelope["content"][0]["text"], r#"ran core_forecast {"city":"Oslo"}"#);
    assert_eq!(envelope["tool"], json!({"name": "core_forecast"}));
}
