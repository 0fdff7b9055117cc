use std::{collections::BTreeMap, sync::Arc};

use muster_core::{CallContext, ToolCall, ToolEntry, ToolError, ToolKind};
use rmcp::model::{CallToolResult, Tool, ToolAnnotations};
use serde_json::{Value, json};
use tower::{Layer, ServiceExt, service_fn};

use super::*;
use crate::Catalog;

fn tool(name: &str, read_only: bool) -> Tool {
    Tool::new(name.to_owned(), "d", Arc::new(Default::default()))
        .with_annotations(ToolAnnotations::new().read_only(read_only))
}

/// k8s (labelled group=infra): get_pods (ro), delete_pod; prom: query (ro);
/// workflow_deploy (labelled category=delivery); core_service_list (ro).
fn fixture() -> Arc<Catalog> {
    let mut b = Catalog::builder();
    b.push_tool(ToolEntry::downstream("x_k8s_get_pods", "k8s", tool("get_pods", true)));
    b.push_tool(ToolEntry::downstream(
        "x_k8s_delete_pod",
        "k8s",
        tool("delete_pod", false),
    ));
    b.push_tool(ToolEntry::downstream("x_prom_query", "prom", tool("query", true)));
    b.push_tool(
        ToolEntry::builtin(ToolKind::Workflow, tool("workflow_deploy", false))
            .with_labels(BTreeMap::from([("category".to_owned(), "delivery".to_owned())])),
    );
    b.push_tool(ToolEntry::builtin(ToolKind::Core, tool("core_service_list", true)));
    b.set_server_labels("k8s", BTreeMap::from([("group".to_owned(), "infra".to_owned())]));
    Arc::new(b.build())
}

fn presets(config: Value) -> Result<Presets, ToolsetError> {
    let map: BTreeMap<String, Value> = serde_json::from_value(config).expect("object");
    Presets::from_config(&map)
}

fn names(catalog: &Arc<Catalog>, presets: &Presets, header: &str) -> Vec<String> {
    let toolset = InlineToolset::from_header_value(header).expect("valid toolset");
    let resolved = resolve(catalog, presets, &toolset).expect("resolves");
    catalog
        .view()
        .restricted(&resolved.selection)
        .tools()
        .map(|e| e.name().to_owned())
        .collect()
}

#[test]
fn every_malformed_toolset_gets_its_documented_error() {
    let err = |h: &str| InlineToolset::from_header_value(h).expect_err("refused").to_string();
    assert_eq!(
        err(""),
        "toolset [] is empty; use \"preset:none\" for an agent without tools"
    );
    assert_eq!(
        err(" , "),
        "toolset [] is empty; use \"preset:none\" for an agent without tools"
    );
    assert_eq!(
        err("server:a, toolset:shared"),
        "toolset [server:a, toolset:shared]: selector \"toolset:shared\" is reserved for shared toolsets"
    );
    assert_eq!(
        err("label:team=a"),
        "toolset [label:team=a]: selector \"label:team=a\" is allowed inside presets only"
    );
    assert_eq!(
        err("kubernetes"),
        "toolset [kubernetes]: selector \"kubernetes\" is malformed; expected preset:<name>, server:<name>, workflow:<name> or tool:<name>"
    );
    assert!(err("server:").contains("selector \"server:\" is malformed"));
    let many: Vec<String> = (0..33).map(|i| format!("tool:t{i}")).collect();
    assert!(
        err(&many.join(",")).ends_with("has 33 selectors, more than the 32 allowed inline; define a preset"),
        "{}",
        err(&many.join(","))
    );
    let ok32: Vec<String> = (0..32).map(|i| format!("tool:t{i}")).collect();
    assert!(InlineToolset::from_header_value(&ok32.join(",")).is_ok());
}

#[test]
fn an_unknown_preset_names_the_known_ones() {
    let catalog = fixture();
    let toolset = InlineToolset::from_header_value("preset:foo").expect("syntax ok");
    let err = resolve(&catalog, &Presets::default(), &toolset).expect_err("unknown preset");
    assert_eq!(
        err.to_string(),
        "toolset [preset:foo] names unknown preset \"foo\"; known presets: read-only, none, full"
    );
}

#[test]
fn built_in_presets_select_read_only_nothing_and_everything() {
    let catalog = fixture();
    let p = Presets::default();
    assert_eq!(
        names(&catalog, &p, "preset:read-only"),
        ["x_k8s_get_pods", "x_prom_query", "core_service_list"]
    );
    assert!(names(&catalog, &p, "preset:none").is_empty());
    assert_eq!(names(&catalog, &p, "preset:full").len(), 5);
}

#[test]
fn inline_selectors_pick_servers_workflows_and_tools_and_report_the_unmatched() {
    let catalog = fixture();
    let p = Presets::default();
    assert_eq!(
        names(&catalog, &p, "server:prom, workflow:deploy, tool:core_service_list"),
        ["x_prom_query", "workflow_deploy", "core_service_list"]
    );
    let toolset = InlineToolset::from_header_value("server:k8s, server:nope, workflow:nope").expect("valid");
    let resolved = resolve(&catalog, &p, &toolset).expect("resolves");
    assert_eq!(resolved.unmatched, ["server:nope", "workflow:nope"]);
}

#[test]
fn configured_presets_compose_with_labels_read_only_and_excludes() {
    let catalog = fixture();
    let p = presets(json!({
        "infra": {"description": "Infra servers", "include": [{"label": "group=infra"}], "exclude": [{"tool": "x_k8s_delete_pod"}]},
        "delivery": {"include": [{"label": "category"}]},
        "ops": {"include": [{"preset": "infra"}, {"preset": "delivery"}, {"pattern": "x_prom_*"}]},
        "safe": {"include": [{"preset": "ops"}], "exclude": [{"readOnly": true}]},
        "empty-label": {"include": [{"label": "group="}]}
    }))
    .expect("valid presets");
    assert_eq!(names(&catalog, &p, "preset:infra"), ["x_k8s_get_pods"]);
    assert_eq!(names(&catalog, &p, "preset:delivery"), ["workflow_deploy"]);
    assert_eq!(
        names(&catalog, &p, "preset:ops"),
        ["x_k8s_get_pods", "x_prom_query", "workflow_deploy"]
    );
    assert_eq!(names(&catalog, &p, "preset:safe"), ["workflow_deploy"]);
    assert!(names(&catalog, &p, "preset:empty-label").is_empty());
    let listed: Vec<(String, bool)> = p.summaries().into_iter().map(|s| (s.name, s.built_in)).collect();
    assert_eq!(
        listed[..3],
        [("read-only".into(), true), ("none".into(), true), ("full".into(), true)]
    );
    assert!(listed.contains(&("infra".into(), false)));
}

#[test]
fn bad_presets_stop_the_gateway_naming_the_preset() {
    let err = |v: Value| presets(v).expect_err("refused").to_string();
    assert_eq!(
        err(json!({"full": {"include": [{"tool": "a"}]}})),
        "toolset preset \"full\": built-in presets cannot be redefined"
    );
    assert!(err(json!({"p": {"include": [{}]}})).starts_with("toolset preset \"p\": include[0]: a rule sets no key"));
    assert!(err(json!({"p": {"include": [{"tool": "a", "server": "b"}]}})).contains("a rule sets tool and server"));
    assert!(err(json!({"p": {"include": [{"pattern": "x_["}]}})).contains("Invalid pattern \"x_[\""));
    assert!(err(json!({"p": {"include": [{"readOnly": false}]}})).contains("readOnly must be true"));
    assert!(
        err(json!({"p": {"exclude": [{"preset": "none"}]}}))
            .contains("exclude[0]: preset composes presets in include only")
    );
    assert!(err(json!({"p": {"include": [{"preset": "ghost"}]}})).contains("includes unknown preset \"ghost\""));
    assert!(err(json!({"p": {"include": [{"bogus": 1}]}})).contains("unknown field"));
    let cycle = err(json!({"a": {"include": [{"preset": "b"}]}, "b": {"include": [{"preset": "a"}]}}));
    assert!(cycle.contains("composition cycle: a -> b -> a"), "{cycle}");
}

#[test]
fn checking_one_tool_agrees_with_resolving_the_whole_toolset() {
    let catalog = fixture();
    let p =
        presets(json!({"infra": {"include": [{"label": "group=infra"}], "exclude": [{"tool": "x_k8s_delete_pod"}]}}))
            .expect("valid");
    for header in [
        "preset:read-only",
        "preset:infra",
        "server:k8s, tool:x_prom_query",
        "workflow:deploy",
    ] {
        let toolset = InlineToolset::from_header_value(header).expect("valid");
        let resolved = resolve(&catalog, &p, &toolset).expect("resolves");
        for (i, entry) in catalog.tools().iter().enumerate() {
            assert_eq!(
                selects(&catalog, &p, &toolset, entry.name()).expect("checks"),
                resolved.selection.contains(i),
                "{header}: {}",
                entry.name()
            );
        }
    }
}

#[tokio::test]
async fn the_layer_refuses_a_call_outside_the_toolset_and_passes_the_rest() {
    let catalog = fixture();
    let source = {
        let catalog = Arc::clone(&catalog);
        Arc::new(move || Arc::clone(&catalog)) as Arc<dyn crate::CatalogSource>
    };
    let layer = ToolsetLayer::new(source, Arc::new(Presets::default()));
    let inner = service_fn(|call: ToolCall| async move {
        Ok::<_, ToolError>(CallToolResult::success(vec![rmcp::model::ContentBlock::text(call.name)]).into())
    });
    let svc = layer.layer(inner);
    let ctx = CallContext::default().with_toolset(vec!["preset:read-only".to_owned()]);

    let ok = svc
        .clone()
        .oneshot(ToolCall::new("x_k8s_get_pods", Default::default(), ctx.clone()))
        .await;
    assert!(ok.is_ok());
    let refused = svc
        .clone()
        .oneshot(ToolCall::new("x_k8s_delete_pod", Default::default(), ctx.clone()))
        .await
        .expect_err("outside");
    assert_eq!(
        refused.to_string(),
        "tool \"x_k8s_delete_pod\" is outside the toolset [preset:read-only]"
    );
    let unscoped = svc
        .clone()
        .oneshot(ToolCall::new(
            "x_k8s_delete_pod",
            Default::default(),
            CallContext::default(),
        ))
        .await;
    assert!(unscoped.is_ok(), "no toolset, no restriction");
}

#[test]
fn the_header_layer_parses_the_header_in_any_case() {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "X-Muster-Toolset",
        http::HeaderValue::from_static("server:k8s , preset:none"),
    );
    let declared = DeclaredToolset::from_headers(&headers).expect("declared");
    assert_eq!(declared.0.expect("valid").declared(), ["server:k8s", "preset:none"]);
    assert!(DeclaredToolset::from_headers(&http::HeaderMap::new()).is_none());
    headers.insert("x-muster-toolset", http::HeaderValue::from_static(""));
    assert_eq!(
        DeclaredToolset::from_headers(&headers).map(|d| d.0),
        Some(Err(ToolsetError::Empty))
    );
}
