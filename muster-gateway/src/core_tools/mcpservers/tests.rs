use std::sync::Arc;

use muster_core::{CallContext, JsonObject, Principal, ToolError};
use serde_json::{Value, json};

use super::{MCPServer, MCPServerSpec, create, delete, update};
use crate::{
    definitions::{
        DefinitionStore,
        store::testing::{Answer, RecordingStore, STORED_ANNOTATION},
    },
    registry::{Registry, RegistryOptions},
};

/// A store that answers `answer` and records the writes, and the same as the tools see it.
struct Store {
    recorded: Arc<RecordingStore>,
    writes: Arc<dyn DefinitionStore>,
}

impl Store {
    fn writes(&self) -> Vec<String> {
        self.recorded.writes()
    }
}

/// A registry of `servers`, and a store that answers `answer` for its definition writes.
fn registry(answer: Answer, servers: Vec<MCPServer>) -> (Arc<Registry>, Store) {
    let recorded = Arc::new(RecordingStore::new(answer));
    let writes: Arc<dyn DefinitionStore> = recorded.clone();
    let registry =
        Registry::new(Default::default(), servers, Vec::new(), RegistryOptions::default()).expect("a registry");
    (registry, Store { recorded, writes })
}

fn args(value: Value) -> JsonObject {
    value.as_object().cloned().expect("an object")
}

fn api() -> JsonObject {
    args(json!({"name": "api", "type": "streamable-http", "url": "http://127.0.0.1:9/mcp"}))
}

fn ada() -> CallContext {
    CallContext::default().with_principal(Principal::new("ada"))
}

#[tokio::test]
async fn writes_go_through_the_store_as_the_caller_and_the_registry_applies_what_it_holds() {
    let (registry, store) = registry(Answer::Writes, Vec::new());
    let created = create(&registry, Some(&store.writes), &api(), &ada())
        .await
        .expect("created");
    assert_eq!(created["message"], "MCP server api created");
    assert!(created.get("file").is_none(), "this store keeps no files: {created}");
    let held = registry.server("api").expect("applied").definition;
    assert_eq!(
        held.metadata.annotations[STORED_ANNOTATION], "yes",
        "the store's copy is applied"
    );

    let changed = args(json!({"name": "api", "description": "changed"}));
    update(&registry, Some(&store.writes), &changed, &ada())
        .await
        .expect("updated");
    assert_eq!(
        registry
            .server("api")
            .expect("kept")
            .definition
            .spec
            .description
            .as_deref(),
        Some("changed")
    );
    delete(
        &registry,
        Some(&store.writes),
        &args(json!({"name": "api"})),
        &CallContext::default(),
    )
    .await
    .expect("deleted");
    assert!(registry.server("api").is_none());
    assert_eq!(
        store.writes(),
        [
            "put MCPServer api by ada",
            "put MCPServer api by ada",
            "delete MCPServer api by anonymous",
        ]
    );
}

#[tokio::test]
async fn a_refusal_of_the_store_is_the_answer_and_the_registry_is_left_as_it_was() {
    let (registry, store) = registry(Answer::Refuses("ada may not write MCPServer api"), Vec::new());
    let refused = create(&registry, Some(&store.writes), &api(), &ada())
        .await
        .expect_err("refused");
    assert!(
        matches!(&refused, ToolError::InvalidArguments { message } if message == "ada may not write MCPServer api"),
        "{refused:?}"
    );
    assert!(registry.server("api").is_none(), "nothing applied");
    assert_eq!(store.writes(), ["put MCPServer api by ada"]);
}

#[tokio::test]
async fn a_failure_of_the_store_is_an_internal_error_and_a_delete_that_fails_keeps_the_server() {
    let (failing, store) = registry(Answer::Fails("cannot write mcpservers/api.yaml"), Vec::new());
    let failed = create(&failing, Some(&store.writes), &api(), &ada())
        .await
        .expect_err("failed");
    assert!(matches!(failed, ToolError::Internal { .. }), "{failed:?}");
    assert_eq!(failed.to_string(), "internal error: cannot write mcpservers/api.yaml");
    assert!(failing.server("api").is_none());

    let defined = MCPServer::new("docs", MCPServerSpec::default());
    let (registry, store) = registry(Answer::Fails("cannot delete mcpservers/docs.yaml"), vec![defined]);
    delete(&registry, Some(&store.writes), &args(json!({"name": "docs"})), &ada())
        .await
        .expect_err("the store failed");
    assert!(registry.server("docs").is_some(), "still defined where it is kept");
    assert_eq!(store.writes(), ["delete MCPServer docs by ada"]);
}
