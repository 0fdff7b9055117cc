use std::collections::BTreeMap;

use muster_core::{ToolEntry, ToolKind};
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::*;
use crate::Catalog;

fn obj(v: Value) -> JsonObject {
    v.as_object().cloned().unwrap_or_default()
}

fn schema() -> Arc<JsonObject> {
    Arc::new(obj(
        json!({"type": "object", "properties": {"namespace": {"type": "string"}}}),
    ))
}

fn fixture() -> Arc<Catalog> {
    let mut b = Catalog::builder();
    let downstream = [
        ("k8s", "list_pods", "List pods in a namespace.\nSecond line."),
        ("k8s", "delete_pod", "Delete a pod."),
        ("prom", "query_range", "Run a Prometheus range query over metrics."),
        ("prom", "metrics_overview", "Overview of metrics."),
    ];
    for (server, tool, desc) in downstream {
        let t =
            Tool::new(tool, desc, schema()).with_annotations(ToolAnnotations::new().read_only(tool != "delete_pod"));
        b.push_tool(ToolEntry::downstream(format!("x_{server}_{tool}"), server, t));
    }
    let wf = Tool::new("workflow_deploy", "Deploy an app to a cluster.", schema());
    b.push_tool(
        ToolEntry::builtin(ToolKind::Workflow, wf)
            .with_labels(BTreeMap::from([("category".to_owned(), "delivery".to_owned())])),
    );
    let core = Tool::new("core_service_list", "List services.", schema());
    b.push_tool(ToolEntry::builtin(ToolKind::Core, core));
    Arc::new(b.build())
}

fn names(page: &ToolPage) -> Vec<String> {
    page.tools.iter().map(|t| t.name().to_owned()).collect()
}

fn unscoped() -> Scope<'static> {
    static PRESETS: std::sync::OnceLock<crate::toolset::Presets> = std::sync::OnceLock::new();
    Scope::unscoped(PRESETS.get_or_init(crate::toolset::Presets::default))
}

#[test]
fn list_tools_pages_the_whole_catalogue_with_totals() {
    let c = fixture();
    let view = c.view();
    let first = list_tools(&view, &obj(json!({"limit": 4})), unscoped()).expect("page");
    assert_eq!(
        (first.total, first.total_tools, first.filtered_count, first.truncated),
        (6, 6, 4, true)
    );
    let second = list_tools(&view, &obj(json!({"limit": 4, "offset": 4})), unscoped()).expect("page");
    assert_eq!(names(&second), ["workflow_deploy", "core_service_list"]);
    assert!(!second.truncated);
    let json = serde_json::to_value(&first).expect("json");
    assert_eq!(
        json["filters"],
        json!({"case_sensitive": false, "include_schema": false, "limit": 4, "offset": 0})
    );
    assert_eq!(json["tools"][0]["summary"], "List pods in a namespace.");
    assert_eq!(json["tools"][0]["server"], "k8s");
    assert_eq!(json["tools"][0]["kind"], "tool");
    assert_eq!(json["tools"][0]["annotations"]["readOnlyHint"], true);
    assert!(json["tools"][0].get("inputSchema").is_none());
}

#[test]
fn list_tools_defaults_to_fifty_and_workflows_and_core_tools_carry_no_server() {
    let c = fixture();
    let view = c.view();
    let page = list_tools(&view, &JsonObject::new(), unscoped()).expect("page");
    assert_eq!(page.filters.limit, 50);
    let json = serde_json::to_value(&page).expect("json");
    assert!(json["tools"][4].get("server").is_none());
    assert_eq!(json["tools"][4]["kind"], "workflow");
    assert_eq!(json["tools"][5]["kind"], "core");
}

#[test]
fn filter_tools_matches_the_pattern_case_insensitively_and_pages_by_five() {
    let c = fixture();
    let view = c.view();
    let page = filter_tools(&view, &obj(json!({"pattern": "X_K8S_*"})), unscoped()).expect("page");
    assert_eq!(names(&page), ["x_k8s_list_pods", "x_k8s_delete_pod"]);
    assert_eq!(page.filters.limit, 5);
    let sensitive = filter_tools(
        &view,
        &obj(json!({"pattern": "X_K8S_*", "case_sensitive": true})),
        unscoped(),
    )
    .expect("page");
    assert_eq!(sensitive.total, 0);
}

#[test]
fn filter_tools_narrows_by_description_and_labels() {
    let c = fixture();
    let view = c.view();
    let by_desc = filter_tools(&view, &obj(json!({"description_filter": "METRICS"})), unscoped()).expect("page");
    assert_eq!(names(&by_desc), ["x_prom_query_range", "x_prom_metrics_overview"]);
    let by_label = filter_tools(&view, &obj(json!({"labels": {"category": "delivery"}})), unscoped()).expect("page");
    assert_eq!(names(&by_label), ["workflow_deploy"]);
    let json = serde_json::to_value(&by_label).expect("json");
    assert_eq!(json["tools"][0]["labels"]["category"], "delivery");
}

#[test]
fn a_query_ranks_name_matches_first_and_drops_tools_that_match_nothing() {
    let c = fixture();
    let view = c.view();
    let page = filter_tools(&view, &obj(json!({"query": "prometheus metrics query"})), unscoped()).expect("page");
    assert_eq!(names(&page), ["x_prom_query_range", "x_prom_metrics_overview"]);
    let scores: Vec<f64> = page.tools.iter().filter_map(|t| t.score).collect();
    assert_eq!(scores.len(), 2);
    assert!(scores[0] > scores[1], "{scores:?}");
}

#[test]
fn explain_gives_each_ranked_tool_its_terms_and_fields_and_wants_a_query() {
    let c = fixture();
    let view = c.view();
    let args = json!({"query": "prometheus metrics query", "explain": true});
    let page = filter_tools(&view, &obj(args), unscoped()).expect("page");
    let wire = serde_json::to_value(&page).expect("serializes");
    let top = &wire["tools"][0];
    assert_eq!(top["name"], "x_prom_query_range");
    let explain = &top["explain"];
    let terms: Vec<&str> = explain["terms"]
        .as_array()
        .expect("terms")
        .iter()
        .filter_map(|t| t["term"].as_str())
        .collect();
    // The terms as analysed: inflections folded (metrics: metric, query and queries: queri).
    assert_eq!(terms, ["prometheus", "metric", "queri"], "{explain}");
    // "query" is in the name and the first line of the description; "prometheus" only in the latter.
    let fields = |term: &str| -> Vec<String> {
        explain["terms"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["term"] == term)
            .and_then(|t| t["fields"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|f| f["field"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(fields("queri"), ["name", "first_line"]);
    assert_eq!(fields("prometheus"), ["first_line"]);
    let sum: f64 = explain["terms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["contribution"].as_f64())
        .sum();
    let score = explain["score"].as_f64().expect("score");
    assert!((sum - score).abs() < 1e-9, "{sum} vs {score}");
    assert!(score > wire["tools"][1]["explain"]["score"].as_f64().expect("second score"));

    let without = filter_tools(&view, &obj(json!({"query": "prometheus"})), unscoped()).expect("page");
    let without = serde_json::to_value(&without).expect("serializes");
    assert!(without["tools"][0].get("explain").is_none(), "only when asked");
    let error = filter_tools(&view, &obj(json!({"explain": true})), unscoped()).expect_err("no query");
    assert!(error.to_string().contains("give a query"), "{error}");
}

#[test]
fn include_schema_returns_full_descriptions_and_schemas() {
    let c = fixture();
    let view = c.view();
    let page = filter_tools(
        &view,
        &obj(json!({"pattern": "x_k8s_list_pods", "include_schema": true})),
        unscoped(),
    )
    .expect("page");
    let json = serde_json::to_value(&page).expect("json");
    assert_eq!(
        json["tools"][0]["description"],
        "List pods in a namespace.\nSecond line."
    );
    assert!(json["tools"][0].get("summary").is_none());
    assert_eq!(
        json["tools"][0]["inputSchema"]["properties"]["namespace"]["type"],
        "string"
    );
}

#[test]
fn bad_arguments_get_the_documented_errors() {
    let c = fixture();
    let view = c.view();
    let err = filter_tools(&view, &obj(json!({"pattern": "x_["})), unscoped()).expect_err("bad glob");
    assert!(err.to_string().starts_with("Invalid pattern \"x_[\""), "{err}");
    let err = filter_tools(&view, &obj(json!({"limit": 0})), unscoped()).expect_err("bad limit");
    assert_eq!(err.to_string(), "limit must be at least 1");
    let err = list_tools(&view, &obj(json!({"offset": "x"})), unscoped()).expect_err("bad offset");
    assert_eq!(err.to_string(), "offset must be a number");
}

#[test]
fn describe_tool_gives_schema_server_kind_and_the_invocation() {
    let c = fixture();
    let view = c.view();
    let d = describe_tool(&view, &obj(json!({"name": "x_k8s_list_pods"})), unscoped()).expect("found");
    let json = serde_json::to_value(&d).expect("json");
    assert_eq!(json["server"], "k8s");
    assert_eq!(json["kind"], "tool");
    assert_eq!(json["description"], "List pods in a namespace.\nSecond line.");
    assert_eq!(json["inputSchema"]["type"], "object");
    assert!(json.get("outputSchema").is_none());
    assert!(json.get("title").is_none());
    let inv = json["invocation"].as_str().expect("string");
    assert!(inv.contains("call_tool with {\"name\": \"x_k8s_list_pods\""), "{inv}");
    let err = describe_tool(&view, &obj(json!({"name": "x_nope"})), unscoped()).expect_err("missing");
    assert_eq!(err.to_string(), "Tool not found: x_nope");
    let err = describe_tool(&view, &JsonObject::new(), unscoped()).expect_err("no name");
    assert_eq!(err.to_string(), "name argument is required");
}

#[test]
fn list_core_tools_lists_only_core_tools_with_schemas() {
    let c = fixture();
    let view = c.view();
    let page = list_core_tools(&view, &JsonObject::new()).expect("page");
    assert_eq!(names(&page), ["core_service_list"]);
    assert!(page.tools[0].include_schema);
    assert!(!page.truncated);
}

#[test]
fn an_inline_toolset_narrows_filter_tools_echoes_itself_and_lists_presets() {
    let c = fixture();
    let view = c.view();
    let page = filter_tools(
        &view,
        &obj(json!({"toolset": ["server:prom", "tool:x_nope"], "limit": 10})),
        unscoped(),
    )
    .expect("page");
    assert_eq!(names(&page), ["x_prom_query_range", "x_prom_metrics_overview"]);
    let json = serde_json::to_value(&page).expect("json");
    assert_eq!(json["toolset"], json!(["server:prom", "tool:x_nope"]));
    assert_eq!(json["toolset_unmatched"], json!(["tool:x_nope"]));
    assert_eq!(
        json["presets"][0],
        json!({"name": "read-only", "description": "Every tool annotated read-only (readOnlyHint: true)", "built_in": true})
    );
    let plain = serde_json::to_value(filter_tools(&view, &JsonObject::new(), unscoped()).expect("page")).expect("json");
    assert!(plain.get("presets").is_none() && plain.get("toolset").is_none());
    let with_presets = filter_tools(&view, &obj(json!({"include_presets": true})), unscoped()).expect("page");
    assert_eq!(with_presets.presets.map(|p| p.len()), Some(3));
    let err = filter_tools(&view, &obj(json!({"toolset": ["label:a=b"]})), unscoped()).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "toolset [label:a=b]: selector \"label:a=b\" is allowed inside presets only"
    );
}

#[test]
fn an_inline_toolset_never_widens_the_request_view() {
    let c = fixture();
    let presets = crate::toolset::Presets::default();
    let header = crate::toolset::InlineToolset::from_header_value("server:k8s").expect("valid");
    let resolved = crate::toolset::resolve(&c, &presets, &header).expect("resolves");
    let view = c.view().restricted(&resolved.selection);
    let scope = Scope {
        presets: &presets,
        declared: Some(&header),
        declared_unmatched: &resolved.unmatched,
    };
    let page = filter_tools(&view, &obj(json!({"toolset": ["preset:full"], "limit": 10})), scope).expect("page");
    assert_eq!(names(&page), ["x_k8s_list_pods", "x_k8s_delete_pod"]);
    let listed = list_tools(&view, &JsonObject::new(), scope).expect("page");
    assert_eq!(listed.toolset, Some(vec!["server:k8s".to_owned()]));
    let err = describe_tool(&view, &obj(json!({"name": "x_prom_query_range"})), scope).expect_err("hidden");
    assert_eq!(
        err.to_string(),
        "tool \"x_prom_query_range\" is outside the toolset [server:k8s]"
    );
}
