//! The catalogue service composed alone: `Discovery` over a catalogue of its own, with no
//! gateway and no registry, called as a tower service and through its plain method.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

use muster_catalog::{
    Catalog, CatalogSource,
    discovery::{AuthHints, Discovery, DiscoveryTool, OnRequest},
    pattern::NamePattern,
    tools::ServerAuthHint,
    toolset::{DeclaredToolset, InlineToolset, Presets},
};
use muster_core::{
    CallContext, JsonObject, PromptEntry, ResourceEntry, SessionId, ToolCall, ToolEntry, ToolError, ToolKind,
};
use rmcp::model::{CallToolResult, Prompt, Resource, Tool, ToolAnnotations};
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt};

/// (server, tool, description, read-only) of the test catalogue, in catalogue order.
const TOOLS: [(&str, &str, &str, bool); 6] = [
    (
        "k8s",
        "get_pods",
        "List the pods of a namespace with their status.",
        true,
    ),
    ("k8s", "delete_pod", "Delete one pod.", false),
    ("k8s", "get_logs", "Read the logs of a pod's container.", true),
    ("github", "create_issue", "Open a new issue in a repository.", false),
    (
        "github",
        "list_pull_requests",
        "List the open pull requests of a repository.",
        true,
    ),
    ("prom", "query", "Run a PromQL query against Prometheus metrics.", true),
];

fn tool_entry(server: &str, name: &str, description: &str, read_only: bool) -> ToolEntry {
    let schema = json!({"type": "object", "properties": {"namespace": {"type": "string"}}});
    let tool = Tool::new(name.to_owned(), description.to_owned(), Arc::new(object(schema)))
        .with_annotations(ToolAnnotations::new().read_only(read_only));
    ToolEntry::downstream(format!("x_{server}_{name}"), server, tool)
}

fn catalog(extra: &[(&str, &str, &str, bool)]) -> Arc<Catalog> {
    let mut builder = Catalog::builder();
    for (server, name, description, read_only) in TOOLS.iter().chain(extra) {
        builder.push_tool(tool_entry(server, name, description, *read_only));
    }
    let whoami = Tool::new("core_whoami", "Who the caller is.", Arc::new(JsonObject::new()));
    builder.push_tool(ToolEntry::builtin(ToolKind::Core, whoami));
    let readme = Resource::new("docs://readme", "readme");
    builder.push_resource(ResourceEntry::downstream("docs://readme", "github", readme));
    let runbook = Resource::new("docs://runbook", "runbook");
    builder.push_resource(ResourceEntry::downstream("docs://runbook", "k8s", runbook));
    builder.push_prompt(PromptEntry::downstream(
        "x_k8s_triage",
        "k8s",
        Prompt::new("triage", Some("Triage a failing pod."), None),
    ));
    Arc::new(builder.build())
}

fn object(value: Value) -> JsonObject {
    value.as_object().cloned().expect("a JSON object")
}

fn discovery() -> Discovery {
    let catalog = catalog(&[]);
    let source: Arc<dyn CatalogSource> = Arc::new(move || Arc::clone(&catalog));
    Discovery::new(source, Arc::new(Presets::default()))
}

/// The page a successful answer carries.
fn page(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "an error: {result:?}");
    assert_eq!(result.content.len(), 1);
    let text = &result.content[0].as_text().expect("a text block").text;
    serde_json::from_str(text).expect("JSON text")
}

/// The message an error answer carries.
fn refusal(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "not an error: {result:?}");
    result.content[0].as_text().expect("a text block").text.clone()
}

fn names(page: &Value, key: &str) -> Vec<String> {
    page[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {page}"))
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_owned())
        .collect()
}

fn declaring(header: &str) -> CallContext {
    let mut ctx = CallContext::default();
    ctx.extensions
        .insert(DeclaredToolset(InlineToolset::from_header_value(header)));
    ctx
}

async fn answer(
    discovery: &Discovery<impl AuthHints, impl OnRequest>,
    tool: &str,
    args: Value,
    ctx: &CallContext,
) -> CallToolResult {
    let tool = DiscoveryTool::from_name(tool).expect("a discovery tool");
    discovery.answer(tool, &object(args), ctx).await
}

#[tokio::test]
async fn list_tools_pages_through_the_whole_catalogue_by_limit_and_offset() {
    let discovery = discovery();
    let ctx = CallContext::default();
    let first = page(&answer(&discovery, "list_tools", json!({"limit": 3}), &ctx).await);
    assert_eq!(
        names(&first, "tools"),
        ["x_k8s_get_pods", "x_k8s_delete_pod", "x_k8s_get_logs"]
    );
    assert_eq!(
        (
            &first["total"],
            &first["total_tools"],
            &first["filtered_count"],
            &first["truncated"]
        ),
        (&json!(7), &json!(7), &json!(3), &json!(true))
    );
    assert_eq!(
        first["tools"][0]["summary"],
        "List the pods of a namespace with their status."
    );
    assert!(
        first["tools"][0].get("inputSchema").is_none(),
        "list_tools lists without schemas"
    );
    let last = page(&answer(&discovery, "list_tools", json!({"limit": 3, "offset": 6}), &ctx).await);
    assert_eq!(names(&last, "tools"), ["core_whoami"]);
    assert_eq!(
        (&last["truncated"], &last["filters"]["offset"]),
        (&json!(false), &json!(6))
    );
    assert!(
        last.get("servers_requiring_auth").is_none(),
        "no hints without the hook"
    );

    let bad = answer(&discovery, "list_tools", json!({"limit": 0}), &ctx).await;
    assert_eq!(refusal(&bad), "limit must be at least 1");
}

#[tokio::test]
async fn filter_tools_ranks_a_query_and_matches_patterns_descriptions_and_inline_toolsets() {
    let discovery = discovery();
    let ctx = CallContext::default();
    let ranked = page(
        &answer(
            &discovery,
            "filter_tools",
            json!({"query": "open a pull request"}),
            &ctx,
        )
        .await,
    );
    assert_eq!(names(&ranked, "tools")[0], "x_github_list_pull_requests");
    assert!(ranked["tools"][0]["score"].as_f64().is_some_and(|s| s > 0.0));
    assert_eq!(ranked["filters"]["query"], "open a pull request");

    let globbed = page(&answer(&discovery, "filter_tools", json!({"pattern": "X_K8S_GET_*"}), &ctx).await);
    assert_eq!(names(&globbed, "tools"), ["x_k8s_get_pods", "x_k8s_get_logs"]);
    let exact_case = page(
        &answer(
            &discovery,
            "filter_tools",
            json!({"pattern": "X_K8S_*", "case_sensitive": true}),
            &ctx,
        )
        .await,
    );
    assert!(names(&exact_case, "tools").is_empty());

    let described = page(
        &answer(
            &discovery,
            "filter_tools",
            json!({"description_filter": "PROMQL"}),
            &ctx,
        )
        .await,
    );
    assert_eq!(names(&described, "tools"), ["x_prom_query"]);

    let inline = page(&answer(&discovery, "filter_tools", json!({"toolset": ["server:github"]}), &ctx).await);
    assert_eq!(
        names(&inline, "tools"),
        ["x_github_create_issue", "x_github_list_pull_requests"]
    );
    assert_eq!(inline["toolset"], json!(["server:github"]));
    assert!(inline["presets"].as_array().is_some_and(|p| p.len() == 3), "{inline}");

    let bad = answer(&discovery, "filter_tools", json!({"pattern": "x_["}), &ctx).await;
    assert!(refusal(&bad).starts_with("Invalid pattern \"x_[\""), "{bad:?}");
}

#[tokio::test]
async fn describe_tool_list_core_tools_resources_and_prompts_answer_from_the_catalogue() {
    let discovery = discovery();
    let ctx = CallContext::default();
    let described = page(&answer(&discovery, "describe_tool", json!({"name": "x_k8s_get_logs"}), &ctx).await);
    assert_eq!(described["name"], "x_k8s_get_logs");
    assert_eq!(described["server"], "k8s");
    assert_eq!(described["inputSchema"]["properties"]["namespace"]["type"], "string");
    assert!(
        described["invocation"]
            .as_str()
            .is_some_and(|i| i.contains("call_tool"))
    );
    let missing = answer(&discovery, "describe_tool", json!({"name": "x_nope"}), &ctx).await;
    assert_eq!(refusal(&missing), "Tool not found: x_nope");

    let core = page(&answer(&discovery, "list_core_tools", json!({}), &ctx).await);
    assert_eq!(names(&core, "tools"), ["core_whoami"]);

    let resources = page(&answer(&discovery, "list_resources", json!({}), &ctx).await);
    let uris: Vec<&str> = resources
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(uris, ["docs://readme", "docs://runbook"]);
    let by_server = page(&answer(&discovery, "filter_resources", json!({"server": "k8s"}), &ctx).await);
    assert_eq!(by_server["resources"][0]["uri"], "docs://runbook");
    let resource = page(&answer(&discovery, "describe_resource", json!({"uri": "docs://readme"}), &ctx).await);
    assert_eq!(resource["server"], "github");

    let prompts = page(&answer(&discovery, "list_prompts", json!({}), &ctx).await);
    assert_eq!(prompts[0]["name"], "x_k8s_triage");
    let filtered = page(&answer(&discovery, "filter_prompts", json!({"pattern": "*triage"}), &ctx).await);
    assert_eq!(names(&filtered, "prompts"), ["x_k8s_triage"]);
    let prompt = page(&answer(&discovery, "describe_prompt", json!({"name": "x_k8s_triage"}), &ctx).await);
    assert_eq!(prompt["description"], "Triage a failing pod.");
    let missing = answer(&discovery, "describe_prompt", json!({"name": "x_nope"}), &ctx).await;
    assert_eq!(refusal(&missing), "Prompt not found: x_nope");
}

#[tokio::test]
async fn an_invalid_declared_toolset_is_the_answer_of_every_discovery_tool() {
    let discovery = discovery();
    for (header, expected) in [
        (
            "kubernetes",
            "selector \"kubernetes\" is malformed; expected preset:<name>, server:<name>, workflow:<name> or tool:<name>",
        ),
        (
            "preset:nope",
            "toolset [preset:nope] names unknown preset \"nope\"; known presets: read-only, none, full",
        ),
    ] {
        let ctx = declaring(header);
        for tool in DiscoveryTool::ALL {
            let result = discovery.answer(tool, &JsonObject::new(), &ctx).await;
            let message = refusal(&result);
            assert!(message.ends_with(expected), "{}: {message}", tool.name());
        }
    }
}

#[tokio::test]
async fn a_declared_toolset_narrows_discovery_and_refuses_what_it_leaves_out() {
    let discovery = discovery();
    let ctx = declaring("preset:read-only, tool:x_nope");
    let listed = page(&answer(&discovery, "list_tools", json!({}), &ctx).await);
    assert_eq!(
        names(&listed, "tools"),
        [
            "x_k8s_get_pods",
            "x_k8s_get_logs",
            "x_github_list_pull_requests",
            "x_prom_query"
        ]
    );
    assert_eq!(
        (&listed["total_tools"], &listed["toolset"]),
        (&json!(4), &json!(["preset:read-only", "tool:x_nope"]))
    );
    let filtered = page(&answer(&discovery, "filter_tools", json!({"pattern": "x_k8s_*"}), &ctx).await);
    assert_eq!(names(&filtered, "tools"), ["x_k8s_get_pods", "x_k8s_get_logs"]);
    assert_eq!(filtered["toolset_unmatched"], json!(["tool:x_nope"]));
    // An inline toolset resolves within the declared one and never widens it.
    let inline = page(&answer(&discovery, "filter_tools", json!({"toolset": ["server:k8s"]}), &ctx).await);
    assert_eq!(names(&inline, "tools"), ["x_k8s_get_pods", "x_k8s_get_logs"]);

    let outside = answer(&discovery, "describe_tool", json!({"name": "x_k8s_delete_pod"}), &ctx).await;
    assert_eq!(
        refusal(&outside),
        "tool \"x_k8s_delete_pod\" is outside the toolset [preset:read-only, tool:x_nope]"
    );

    // Resources and prompts follow their server: with github's tools alone in view, github's
    // resource is listed and k8s's resource and prompt are not.
    let server_only = declaring("server:github");
    let resources = page(&answer(&discovery, "list_resources", json!({}), &server_only).await);
    assert_eq!(resources.as_array().map(Vec::len), Some(1));
    let prompts = page(&answer(&discovery, "list_prompts", json!({}), &server_only).await);
    assert_eq!(prompts, json!([]));

    // A context that carries the selectors alone (no parsed extension) is scoped the same.
    let selectors_only = CallContext::default().with_toolset(vec!["server:prom".to_owned()]);
    let listed = page(&answer(&discovery, "list_tools", json!({}), &selectors_only).await);
    assert_eq!(names(&listed, "tools"), ["x_prom_query"]);
}

fn slack_hint() -> ServerAuthHint {
    ServerAuthHint {
        name: "slack".to_owned(),
        status: "auth_required".to_owned(),
        auth_tool: "core_auth_login".to_owned(),
        tool_prefix: Some("chat".to_owned()),
        family: None,
    }
}

#[tokio::test]
async fn the_auth_hint_hook_fills_servers_requiring_auth_and_toolset_requiring_auth() {
    let asked = Arc::new(Mutex::new(Vec::<(String, Option<bool>)>::new()));
    let record = Arc::clone(&asked);
    let hints = move |session: &SessionId, pattern: Option<&NamePattern>| {
        record
            .lock()
            .expect("not poisoned")
            .push((session.to_string(), pattern.map(|p| p.matches("x_chat_"))));
        if pattern.is_none_or(|p| p.matches("x_chat_") || p.matches("x_chat_x")) {
            vec![slack_hint()]
        } else {
            Vec::new()
        }
    };
    let discovery = discovery().with_auth_hints(hints);
    let ctx = CallContext::for_session(SessionId::new("s-1"));

    let listed = page(&answer(&discovery, "list_tools", json!({"limit": 1}), &ctx).await);
    assert_eq!(
        listed["servers_requiring_auth"],
        json!([{"name": "slack", "status": "auth_required", "auth_tool": "core_auth_login", "tool_prefix": "chat"}])
    );
    assert!(listed.get("toolset_requiring_auth").is_none(), "no toolset declared");
    let elsewhere = page(&answer(&discovery, "filter_tools", json!({"pattern": "x_github_*"}), &ctx).await);
    assert!(elsewhere.get("servers_requiring_auth").is_none(), "{elsewhere}");
    let chat = page(&answer(&discovery, "filter_tools", json!({"pattern": "x_chat_*"}), &ctx).await);
    assert_eq!(names(&chat, "servers_requiring_auth"), ["slack"]);
    assert_eq!(
        *asked.lock().expect("not poisoned"),
        [
            ("s-1".to_owned(), None),
            ("s-1".to_owned(), Some(false)),
            ("s-1".to_owned(), Some(true))
        ]
    );

    // With a toolset: the hints stay unscoped, and those the toolset could select are named.
    let wants_chat = declaring("tool:x_chat_post, server:k8s");
    let scoped = page(&answer(&discovery, "filter_tools", json!({"pattern": "x_k8s_*"}), &wants_chat).await);
    assert!(scoped.get("servers_requiring_auth").is_none());
    assert_eq!(names(&scoped, "toolset_requiring_auth"), ["slack"]);
    let k8s_only = declaring("server:k8s");
    let unrelated = page(&answer(&discovery, "list_tools", json!({}), &k8s_only).await);
    assert_eq!(names(&unrelated, "servers_requiring_auth"), ["slack"]);
    assert!(unrelated.get("toolset_requiring_auth").is_none(), "{unrelated}");
}

/// A session-aware catalogue: a session that signed in sees the `chat` server's tool.
struct SignedIn {
    shared: Arc<Catalog>,
    signed_in: Arc<Catalog>,
    sessions: Arc<Mutex<HashSet<SessionId>>>,
}

impl CatalogSource for SignedIn {
    fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.shared)
    }

    fn catalog_for(&self, session: &SessionId) -> Arc<Catalog> {
        if self.sessions.lock().expect("not poisoned").contains(session) {
            Arc::clone(&self.signed_in)
        } else {
            self.catalog()
        }
    }
}

#[tokio::test]
async fn the_request_hook_runs_before_the_sessions_catalogue_is_read() {
    let sessions = Arc::new(Mutex::new(HashSet::new()));
    let source = SignedIn {
        shared: catalog(&[]),
        signed_in: catalog(&[("chat", "post", "Post a message to a channel.", false)]),
        sessions: Arc::clone(&sessions),
    };
    let adopt = {
        let sessions = Arc::clone(&sessions);
        move |ctx: &CallContext| {
            // A grant held for the principal connects its server for the session.
            if ctx.principal.is_some() {
                sessions.lock().expect("not poisoned").insert(ctx.session.clone());
            }
            std::future::ready(())
        }
    };
    let discovery = Discovery::new(Arc::new(source), Arc::new(Presets::default())).with_on_request(adopt);
    let anonymous = CallContext::for_session(SessionId::new("a"));
    let found = page(
        &answer(
            &discovery,
            "filter_tools",
            json!({"query": "post a message"}),
            &anonymous,
        )
        .await,
    );
    assert!(names(&found, "tools").is_empty(), "{found}");

    let person = CallContext::for_session(SessionId::new("b")).with_principal(muster_core::Principal::new("ann"));
    let found = page(&answer(&discovery, "filter_tools", json!({"query": "post a message"}), &person).await);
    assert_eq!(names(&found, "tools"), ["x_chat_post"]);
    assert_eq!(found["total_tools"], 8);
}

#[tokio::test]
async fn as_a_tower_service_it_answers_discovery_calls_under_layers_and_no_other_name() {
    // A layer of the embedder's: every call is scoped to the read-only preset.
    let read_only = ServiceBuilder::new()
        .map_request(|mut call: ToolCall| {
            call.ctx = call.ctx.with_toolset(vec!["preset:read-only".to_owned()]);
            call
        })
        .service(discovery());
    let call = |name: &str, args: Value| ToolCall::new(name, object(args), CallContext::default());

    let output = read_only
        .clone()
        .oneshot(call("list_tools", json!({})))
        .await
        .expect("answered");
    let listed = page(&output.into_result().expect("a result"));
    assert_eq!(listed["total_tools"], 4);
    assert_eq!(listed["toolset"], json!(["preset:read-only"]));

    let refused = read_only
        .clone()
        .oneshot(call("describe_tool", json!({"name": "x_github_create_issue"})))
        .await
        .expect("answered");
    assert!(refused.is_error());

    let other = read_only
        .oneshot(call("call_tool", json!({"name": "x_prom_query"})))
        .await;
    assert!(matches!(other, Err(ToolError::NotFound { .. })), "{other:?}");
}
