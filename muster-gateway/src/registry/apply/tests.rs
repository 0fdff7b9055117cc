use std::{collections::BTreeSet, sync::Arc};

use muster_core::crd::{FieldWarning, MCPServer, MCPServerSpec, ServerType, Workflow, WorkflowSpec, WorkflowStep};

use crate::{
    definitions::{DefinitionChange, DefinitionSnapshot, Origin, Sourced},
    events::EventQuery,
    registry::{Registry, RegistryOptions},
};

fn server(name: &str, description: &str) -> MCPServer {
    let mut server = MCPServer::new(
        name,
        MCPServerSpec {
            server_type: Some(ServerType::StreamableHttp),
            url: Some(format!("http://127.0.0.1:9/{name}")),
            ..MCPServerSpec::default()
        },
    );
    server.spec.description = Some(description.to_owned());
    server
}

fn workflow(name: &str, tool: &str) -> Workflow {
    let step: WorkflowStep = serde_json::from_value(serde_json::json!({"id": "only", "tool": tool})).expect("a step");
    Workflow::new(
        name,
        WorkflowSpec {
            steps: vec![step],
            ..WorkflowSpec::default()
        },
    )
}

fn origin() -> Origin {
    Origin::Other("a test source".into())
}

/// A registry of servers `a`, `b`, `c` and workflows `w1`, `w2`, whose supervisors were handed
/// out already (as a started gateway's are).
fn registry() -> Arc<Registry> {
    let registry = Registry::new(
        Default::default(),
        vec![server("a", "one"), server("b", "one"), server("c", "one")],
        vec![workflow("w1", "x_a_t"), workflow("w2", "x_b_t")],
        RegistryOptions::default(),
    )
    .expect("a registry");
    assert_eq!(registry.take_unsupervised().len(), 3);
    registry
}

/// The servers whose supervisor is to start anew: each added or changed since the last call.
fn restarted(registry: &Registry) -> BTreeSet<String> {
    registry.take_unsupervised().into_iter().map(|u| u.key.name).collect()
}

/// Every event's reason and resource name, oldest first.
fn events(registry: &Registry) -> Vec<(String, String)> {
    let mut events: Vec<_> = registry
        .events()
        .query(&EventQuery::new())
        .into_iter()
        .map(|e| (e.reason.clone(), e.name().to_owned()))
        .collect();
    events.reverse();
    events
}

#[test]
fn a_change_set_touches_only_the_definitions_it_changes() {
    let registry = registry();
    let before = events(&registry).len();
    let summary = registry.apply_changes([
        DefinitionChange::server_applied(server("a", "one"), origin()),
        DefinitionChange::server_applied(server("b", "two"), origin()),
        DefinitionChange::server_applied(server("d", "one"), origin()),
        DefinitionChange::server_removed("c", origin()),
        DefinitionChange::server_removed("never-defined", origin()),
        DefinitionChange::workflow_applied(workflow("w1", "x_a_t"), origin()),
        DefinitionChange::workflow_removed("w2", origin()),
    ]);
    assert_eq!(summary.added, ["d"]);
    assert_eq!(summary.updated, ["b"]);
    assert_eq!(summary.removed, ["c"]);
    assert!(summary.kept.is_empty());
    assert_eq!(summary.workflows_changed, 1, "w2 went; w1 is as it was");

    // `a`, unchanged, keeps its supervisor (and so its connection); `b` and `d` start anew.
    assert_eq!(restarted(&registry), BTreeSet::from(["b".to_owned(), "d".to_owned()]));
    let b = registry.server("b").expect("b is defined");
    assert_eq!(b.definition.spec.description.as_deref(), Some("two"));
    assert!(registry.server("c").is_none());
    assert!(registry.workflow("w1").is_some() && registry.workflow("w2").is_none());
    let told = events(&registry).split_off(before);
    let told: Vec<(&str, &str)> = told.iter().map(|(r, n)| (r.as_str(), n.as_str())).collect();
    assert_eq!(
        told,
        [
            ("MCPServerUpdated", "b"),
            ("MCPServerCreated", "d"),
            ("MCPServerDeleted", "c"),
            ("WorkflowDeleted", "w2"),
        ]
    );
}

#[test]
fn a_snapshot_removes_what_it_lacks_and_keeps_what_its_source_cannot_read() {
    let registry = registry();
    let mut snapshot = DefinitionSnapshot::new(origin())
        .with_server(Sourced::new(server("a", "one"), origin()))
        .with_server(Sourced::new(server("d", "one"), origin()))
        .with_workflow(Sourced::new(workflow("w1", "x_a_t"), origin()));
    snapshot.kept_servers.insert("b".to_owned());
    snapshot.kept_workflows.insert("w2".to_owned());

    let summary = registry.apply_snapshot(snapshot);
    assert_eq!(summary.added, ["d"]);
    assert!(summary.updated.is_empty());
    assert_eq!(summary.removed, ["c"]);
    assert_eq!(summary.kept, ["b"], "b's source names it but cannot read it");
    assert_eq!(summary.workflows_changed, 0, "w1 is unchanged and w2 is kept");
    assert_eq!(restarted(&registry), BTreeSet::from(["d".to_owned()]));
    assert!(registry.server("b").is_some() && registry.workflow("w2").is_some());

    // Read again without what it kept: those go too.
    let summary = registry.apply_snapshot(
        DefinitionSnapshot::new(origin())
            .with_server(Sourced::new(server("a", "one"), origin()))
            .with_server(Sourced::new(server("d", "one"), origin())),
    );
    assert_eq!(summary.removed, ["b"]);
    assert_eq!(summary.workflows_changed, 2);
    assert!(registry.workflows().is_empty());
}

#[test]
fn dropped_fields_are_told_when_the_definition_changes_or_they_do() {
    let registry = registry();
    let applied = |description: &str, fields: &[&str]| {
        let warnings: Vec<FieldWarning> = fields.iter().map(|f| FieldWarning::unknown(*f)).collect();
        let sourced = Sourced::new(server("a", description), origin()).with_dropped_fields(warnings);
        DefinitionChange::ServerApplied(sourced)
    };
    let told = |registry: &Registry| {
        events(registry)
            .into_iter()
            .filter(|(reason, _)| reason == "MCPServerFieldsDropped")
            .count()
    };
    registry.apply_changes([applied("one", &["spec.foo"])]);
    assert_eq!(
        told(&registry),
        1,
        "warnings never told are told, the definition unchanged"
    );
    registry.apply_changes([applied("one", &["spec.foo"])]);
    assert_eq!(told(&registry), 1, "read again as it was: not told again");
    registry.apply_changes([applied("two", &["spec.foo"])]);
    assert_eq!(told(&registry), 2, "the definition took effect anew: told again");
    registry.apply_changes([applied("two", &["spec.foo", "spec.bar"])]);
    assert_eq!(told(&registry), 3, "other warnings are told");
    registry.apply_changes([applied("two", &[])]);
    assert_eq!(told(&registry), 3, "no warnings, nothing to tell");
}

#[test]
fn a_workflow_that_does_not_compile_is_left_out_and_the_rest_applies() {
    let registry = registry();
    let mut broken = workflow("w3", "x_a_t");
    broken.spec.steps[0].id = String::new();
    let summary = registry.apply_changes([
        DefinitionChange::workflow_applied(broken, origin()),
        DefinitionChange::workflow_applied(workflow("w4", "x_a_t"), origin()),
    ]);
    assert_eq!(summary.workflows_changed, 1);
    assert!(registry.workflow("w3").is_none() && registry.workflow("w4").is_some());
}
