//! The `X-muster-Toolset` header, parsed and resolved.
//!
//! Input: header lines up to the first empty line (each line one `X-muster-Toolset` header line,
//! raw bytes), then optionally a JSON object of `toolsetPresets` (as `config.yaml` writes them).
//! The header goes through [`DeclaredToolset::from_headers`] (the [`ToolsetHeaderLayer`] path)
//! and [`InlineToolset::from_header_value`]; the presets through [`Presets::from_config`] (the
//! built-ins when they are refused); a parsed toolset is resolved against a small fixed
//! catalogue with [`resolve`], checked tool by tool with [`selects`], and enforced on a call of
//! every tool by [`ToolsetLayer`].
//!
//! Invariants: the header layer and a direct parse agree; re-parsing the declared selectors gives
//! the same toolset; `resolve` and `selects` agree on every tool (what discovery lists is what
//! `call_tool` lets through); the layer refuses exactly the tools `selects` leaves out.

#![no_main]

use std::{
    collections::BTreeMap,
    sync::{Arc, LazyLock},
};

use futures::FutureExt;
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use muster_catalog::{
    Catalog, CatalogSource,
    toolset::{DeclaredToolset, InlineToolset, Presets, TOOLSET_HEADER, ToolsetLayer, resolve, selects},
};
use muster_core::{CallContext, FamilyRoute, ToolCall, ToolEntry, ToolError, ToolKind};
use rmcp::model::{CallToolResult, Tool, ToolAnnotations};
use serde_json::Value;
use tower::{Layer, ServiceExt, service_fn};

fn tool(name: &str, read_only: bool) -> Tool {
    Tool::new(name.to_owned(), "d", Arc::new(Default::default()))
        .with_annotations(ToolAnnotations::new().read_only(read_only))
}

/// k8s (labelled group=infra): get_pods (ro), delete_pod; prom: query (ro); a family `db` of
/// members db-eu and db-us (db-eu labelled region=eu); workflow_deploy (labelled
/// category=delivery); core_service_list (ro).
static CATALOG: LazyLock<Arc<Catalog>> = LazyLock::new(|| {
    let mut b = Catalog::builder();
    b.push_tool(ToolEntry::downstream("x_k8s_get_pods", "k8s", tool("get_pods", true)));
    b.push_tool(ToolEntry::downstream(
        "x_k8s_delete_pod",
        "k8s",
        tool("delete_pod", false),
    ));
    b.push_tool(ToolEntry::downstream("x_prom_query", "prom", tool("query", true)));
    b.push_tool(ToolEntry::family(
        tool("x_db_query", true),
        FamilyRoute::new(
            "db",
            "instance",
            BTreeMap::from([
                ("db-eu".to_owned(), "query".to_owned()),
                ("db-us".to_owned(), "query".to_owned()),
            ]),
        ),
    ));
    b.push_tool(
        ToolEntry::builtin(ToolKind::Workflow, tool("workflow_deploy", false))
            .with_labels(BTreeMap::from([("category".to_owned(), "delivery".to_owned())])),
    );
    b.push_tool(ToolEntry::builtin(ToolKind::Core, tool("core_service_list", true)));
    b.set_server_labels("k8s", BTreeMap::from([("group".to_owned(), "infra".to_owned())]));
    b.set_server_labels("db-eu", BTreeMap::from([("region".to_owned(), "eu".to_owned())]));
    Arc::new(b.build())
});

fn presets(raw: &[u8]) -> Presets {
    let Ok(configured) = serde_json::from_slice::<BTreeMap<String, Value>>(raw) else {
        return Presets::default();
    };
    Presets::from_config(&configured).unwrap_or_default()
}

/// Whether the [`ToolsetLayer`] lets a call of `name` with `declared` through.
fn layer_allows(presets: &Arc<Presets>, declared: &InlineToolset, name: &str) -> bool {
    let catalog = Arc::clone(&CATALOG);
    let source = Arc::new(move || Arc::clone(&catalog)) as Arc<dyn CatalogSource>;
    let inner = service_fn(|_call: ToolCall| async { Ok::<_, ToolError>(CallToolResult::success(Vec::new()).into()) });
    let service = ToolsetLayer::new(source, Arc::clone(presets)).layer(inner);
    let ctx = CallContext::default().with_toolset(declared.declared().to_vec());
    let call = ToolCall::new(name.to_owned(), Default::default(), ctx);
    match service.oneshot(call).now_or_never() {
        Some(Ok(_)) => true,
        Some(Err(ToolError::OutsideToolset { .. })) => false,
        Some(Err(e)) => panic!("the toolset layer refused {name} otherwise: {e}"),
        None => panic!("the toolset layer did not answer at once"),
    }
}

fuzz_target!(|data: &[u8]| {
    let (header_part, preset_part) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };

    let mut headers = HeaderMap::new();
    for line in header_part.split(|b| *b == b'\n') {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            headers.append(TOOLSET_HEADER, value);
        }
    }
    let Some(DeclaredToolset(declared)) = DeclaredToolset::from_headers(&headers) else {
        assert!(headers.is_empty());
        return;
    };

    // The layer's parse is the direct parse of the joined header lines.
    let joined: Vec<String> = headers
        .get_all(TOOLSET_HEADER)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    let direct = InlineToolset::from_header_value(&joined.join(","));
    assert_eq!(declared, direct);

    let Ok(toolset) = declared else { return };
    // What filter_tools' `toolset` argument and the call context carry parses the same.
    assert_eq!(InlineToolset::parse(toolset.declared().to_vec()).as_ref(), Ok(&toolset));
    assert_eq!(toolset.selectors().len(), toolset.declared().len());

    let presets = Arc::new(presets(preset_part));
    let summaries = presets.summaries();
    assert_eq!(summaries.len(), presets.names().len());

    match resolve(&CATALOG, &presets, &toolset) {
        Ok(resolved) => {
            assert!(resolved.unmatched.len() <= toolset.declared().len());
            let view = CATALOG.view().restricted(&resolved.selection);
            assert_eq!(view.tool_count(), resolved.selection.count());
            for (i, entry) in CATALOG.tools().iter().enumerate() {
                let name = entry.name();
                let selected = selects(&CATALOG, &presets, &toolset, name).expect("resolve accepted the toolset");
                assert_eq!(
                    selected,
                    resolved.selection.contains(i),
                    "resolve and selects disagree on {name} for {:?}",
                    toolset.declared()
                );
                assert_eq!(layer_allows(&presets, &toolset, name), selected, "layer on {name}");
            }
        }
        Err(_) => {
            // A refused toolset (an unknown preset) is refused tool by tool too.
            for entry in CATALOG.tools() {
                assert!(selects(&CATALOG, &presets, &toolset, entry.name()).is_err());
            }
        }
    }
});
