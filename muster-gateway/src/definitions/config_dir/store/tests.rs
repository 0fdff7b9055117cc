use std::collections::BTreeMap;

use muster_core::{
    CallContext,
    config::AggregatorConfig,
    crd::{MCPServerSpec, MCPServerStatus, ServerType, WorkflowSpec, WorkflowStatus, WorkflowStep},
};

use super::*;
use crate::definitions::config_dir::load;

fn stdio(name: &str) -> MCPServer {
    let spec = MCPServerSpec {
        server_type: Some(ServerType::Stdio),
        command: Some("npx".into()),
        args: vec!["-y".into(), "@modelcontextprotocol/server-git".into()],
        // Values YAML would read as other types unless quoted.
        env: BTreeMap::from([
            ("FLAG".into(), "true".into()),
            ("COUNT".into(), "0123".into()),
            ("EMPTY".into(), String::new()),
            ("NULLISH".into(), "null".into()),
            ("MULTI".into(), "line one\nline two: yes".into()),
        ]),
        description: Some("Git: the tools # not a comment".into()),
        ..MCPServerSpec::default()
    };
    MCPServer::new(name, spec)
}

fn workflow(name: &str) -> Workflow {
    let step: WorkflowStep = serde_json::from_value(serde_json::json!({
        "id": "list",
        "tool": "core_service_list",
        "args": {"filter": "{{ .input.filter }}", "n": 3}
    }))
    .expect("a step");
    let spec = WorkflowSpec {
        description: Some("Lists services".into()),
        steps: vec![step],
        ..WorkflowSpec::default()
    };
    Workflow::new(name, spec)
}

fn temp_files(folder: &Path) -> Vec<String> {
    std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn written_definitions_load_back_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let server = stdio("git");
    let flow = workflow("special-chars-workflow_123");
    let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_port(9123));
    store.write_mcpserver(&server).expect("written");
    store.write_workflow(&flow).expect("written");
    store.write_config(&config).expect("written");

    let loaded = load(dir.path()).expect("loads");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    assert_eq!(loaded.servers, vec![server]);
    assert_eq!(loaded.workflows, vec![flow]);
    assert_eq!(loaded.config, config);
    assert!(temp_files(&dir.path().join(MCPSERVERS_DIR)).is_empty());
    assert!(temp_files(dir.path()).is_empty());
}

#[test]
fn a_file_named_after_one_definition_but_defining_another_is_never_replaced_or_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let folder = dir.path().join(WORKFLOWS_DIR);
    std::fs::create_dir_all(&folder).expect("folder");
    let other = folder.join("bar.yaml");
    write_document(&other, &workflow("wf"), "Workflow").expect("written");
    let before = std::fs::read_to_string(&other).expect("readable");

    let refused = store.write_workflow(&workflow("bar")).expect_err("refused");
    assert!(matches!(refused, StoreError::Occupied { .. }), "{refused}");
    assert!(!store.remove_workflow("bar").expect("deletes"), "nothing defines bar");
    assert_eq!(std::fs::read_to_string(&other).expect("readable"), before);
    // The definition it does hold is found by its name.
    assert_eq!(store.write_workflow(&workflow("wf")).expect("written"), other);
}

#[test]
fn status_is_never_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let mut server = stdio("git");
    server.status = Some(MCPServerStatus::default());
    let mut flow = workflow("wf");
    flow.status = Some(WorkflowStatus::default());
    let server_file = store.write_mcpserver(&server).expect("written");
    let flow_file = store.write_workflow(&flow).expect("written");
    for file in [server_file, flow_file] {
        let text = std::fs::read_to_string(&file).expect("readable");
        assert!(!text.contains("status:"), "{text}");
    }
}

#[test]
fn rewriting_replaces_the_file_and_delete_removes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    store.write_mcpserver(&stdio("git")).expect("written");
    let mut changed = stdio("git");
    changed.spec.description = Some("changed".into());
    store.write_mcpserver(&changed).expect("rewritten");
    let loaded = load(dir.path()).expect("loads");
    assert_eq!(loaded.servers, vec![changed]);

    assert!(store.remove_mcpserver("git").expect("deleted"));
    assert!(!store.remove_mcpserver("git").expect("nothing to delete"));
    assert!(!store.remove_workflow("never").expect("nothing to delete"));
    assert!(load(dir.path()).expect("loads").servers.is_empty());
}

#[test]
fn a_definition_in_a_differently_named_file_is_rewritten_and_deleted_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let folder = dir.path().join(MCPSERVERS_DIR);
    std::fs::create_dir_all(&folder).expect("mkdir");
    let legacy = folder.join("my-git-server.yml");
    std::fs::write(&legacy, serde_saphyr::to_string(&stdio("git")).expect("yaml")).expect("write");

    let mut changed = stdio("git");
    changed.spec.description = Some("changed".into());
    assert_eq!(store.write_mcpserver(&changed).expect("written"), legacy);
    let loaded = load(dir.path()).expect("loads");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    assert_eq!(loaded.servers, vec![changed]);

    assert!(store.remove_mcpserver("git").expect("deleted"));
    assert!(!legacy.exists());
}

#[test]
fn names_that_could_escape_the_directory_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path().join("config"));
    for name in [
        "",
        ".",
        "..",
        "../evil",
        "a/b",
        "/etc/passwd",
        "a\\b",
        "a\0b",
        "line\nbreak",
        ".hidden",
        "C:evil",
    ] {
        assert!(
            matches!(store.write_mcpserver(&stdio(name)), Err(StoreError::InvalidName { .. })),
            "{name:?}"
        );
        assert!(
            matches!(
                store.write_workflow(&workflow(name)),
                Err(StoreError::InvalidName { .. })
            ),
            "{name:?}"
        );
        assert!(
            matches!(store.remove_mcpserver(name), Err(StoreError::InvalidName { .. })),
            "{name:?}"
        );
        assert!(
            matches!(store.remove_workflow(name), Err(StoreError::InvalidName { .. })),
            "{name:?}"
        );
    }
    assert!(check_name(&"a".repeat(253)).is_ok());
    assert!(check_name(&"a".repeat(254)).is_err());
    assert!(check_name("special-chars-workflow_123").is_ok());
    // Nothing was created anywhere.
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
}

#[test]
fn a_document_that_cannot_be_serialized_leaves_the_old_file_intact() {
    struct Unserializable;
    impl Serialize for Unserializable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("refuses to serialize"))
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let file = store.write_mcpserver(&stdio("git")).expect("written");
    let before = std::fs::read(&file).expect("readable");

    let err = write_document(&file, &Unserializable, "a test document").expect_err("refused");
    assert!(err.to_string().contains("refuses to serialize"), "{err}");
    assert_eq!(std::fs::read(&file).expect("readable"), before);
    assert!(temp_files(file.parent().expect("a folder")).is_empty());
}

#[test]
fn a_failed_write_leaves_the_old_file_intact_and_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let file = store.write_mcpserver(&stdio("git")).expect("written");
    let before = std::fs::read(&file).expect("readable");
    let folder = file.parent().expect("a folder").to_owned();

    // A read-only folder refuses the temporary file, unless we are root.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        let probe = folder.join("probe");
        let root = std::fs::write(&probe, b"").is_ok();
        let _ = std::fs::remove_file(&probe);
        if !root {
            let mut changed = stdio("git");
            changed.spec.description = Some("changed".into());
            let err = store.write_mcpserver(&changed).expect_err("read-only folder");
            assert!(matches!(err, StoreError::Io { .. }), "{err}");
            assert_eq!(std::fs::read(&file).expect("readable"), before);
        }
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    // A rename that fails (the target became a non-empty folder) removes the temporary file.
    let blocked = folder.join("blocked.yaml");
    std::fs::create_dir_all(blocked.join("inside")).expect("mkdir");
    let err = write_atomic(&blocked, b"kind: MCPServer\n").expect_err("cannot replace a folder");
    assert!(err.to_string().starts_with("cannot replace"), "{err}");
    assert!(blocked.join("inside").is_dir());
    assert!(temp_files(&folder).is_empty());
    assert_eq!(std::fs::read(&file).expect("readable"), before);
}

#[test]
fn replacing_a_file_keeps_its_permissions() {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ConfigStore::new(dir.path());
        let file = store.write_config(&MusterConfig::default()).expect("written");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        store.write_config(&MusterConfig::default()).expect("rewritten");
        let mode = std::fs::metadata(&file).expect("metadata").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// A file whose `metadata` does not parse: it no longer loads.
const BROKEN: &str = "kind: MCPServer\nmetadata: [\n";

#[test]
fn a_snapshot_keeps_the_definitions_whose_files_no_longer_load_until_the_files_go() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let git = store.write_mcpserver(&stdio("git")).expect("written");
    let flow = store.write_workflow(&workflow("wf")).expect("written");
    std::fs::write(
        dir.path().join("mcpservers/other.yaml"),
        serde_saphyr::to_string(&stdio("other")).expect("yaml"),
    )
    .expect("written");

    let snapshot = store.snapshot(&load(dir.path()).expect("loads"));
    let origins: Vec<(&str, &Origin)> = snapshot
        .servers
        .iter()
        .map(|s| (s.definition.metadata.name.as_str(), &s.origin))
        .collect();
    assert_eq!(origins[0], ("git", &Origin::File(git.clone())));
    assert_eq!(snapshot.workflows[0].origin, Origin::File(flow.clone()));
    assert!(snapshot.kept_servers.is_empty() && snapshot.kept_workflows.is_empty());

    // Both files break: their definitions are kept, reading after reading.
    std::fs::write(&git, BROKEN).expect("broken");
    std::fs::write(&flow, "kind: Workflow\nspec: 3\n").expect("broken");
    for _ in 0..2 {
        let snapshot = store.snapshot(&load(dir.path()).expect("loads"));
        assert_eq!(snapshot.servers.len(), 1, "other still loads");
        assert_eq!(snapshot.kept_servers, BTreeSet::from(["git".to_owned()]));
        assert_eq!(snapshot.kept_workflows, BTreeSet::from(["wf".to_owned()]));
    }
    // Gone, they are no longer kept.
    std::fs::remove_file(&git).expect("removed");
    std::fs::remove_file(&flow).expect("removed");
    let snapshot = store.snapshot(&load(dir.path()).expect("loads"));
    assert!(snapshot.kept_servers.is_empty() && snapshot.kept_workflows.is_empty());
}

#[test]
fn a_snapshot_carries_each_definitions_dropped_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join(MCPSERVERS_DIR);
    std::fs::create_dir_all(&folder).expect("folder");
    let mut text = serde_saphyr::to_string(&stdio("git")).expect("yaml");
    text.push_str("extra: true\n");
    std::fs::write(folder.join("git.yaml"), text).expect("written");
    let snapshot = ConfigStore::new(dir.path()).snapshot(&load(dir.path()).expect("loads"));
    let dropped: Vec<&str> = snapshot.servers[0]
        .dropped_fields
        .iter()
        .map(|w| w.path.as_str())
        .collect();
    assert_eq!(dropped, ["extra"]);
}

#[test]
fn a_file_that_defined_another_server_and_no_longer_loads_is_never_written_over_or_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let folder = dir.path().join(MCPSERVERS_DIR);
    std::fs::create_dir_all(&folder).expect("folder");
    // bar.yaml defines `other`; then it breaks, and `other` keeps its last good definition.
    let bar = folder.join("bar.yaml");
    std::fs::write(&bar, serde_saphyr::to_string(&stdio("other")).expect("yaml")).expect("written");
    store.snapshot(&load(dir.path()).expect("loads"));
    std::fs::write(&bar, BROKEN).expect("broken");
    store.snapshot(&load(dir.path()).expect("loads"));

    let refused = store.write_mcpserver(&stdio("bar")).expect_err("refused");
    assert!(matches!(refused, StoreError::DefinesAnother { .. }), "{refused}");
    assert_eq!(
        refused.relative_to(dir.path()),
        "file mcpservers/bar.yaml defines MCP server other, not bar; rename it before changing MCP server bar"
    );
    assert!(matches!(
        store.remove_mcpserver("bar"),
        Err(StoreError::DefinesAnother { .. })
    ));
    assert_eq!(std::fs::read_to_string(&bar).expect("kept"), BROKEN);
    // Another name is written as ever.
    store.write_mcpserver(&stdio("baz")).expect("written");
}

#[tokio::test]
async fn as_a_definition_store_it_names_files_relative_to_the_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ConfigStore::new(dir.path());
    let caller = CallContext::default();
    let stored = store.put_mcpserver(stdio("git"), &caller).await.expect("written");
    assert_eq!(stored.file.as_deref(), Some("mcpservers/git.yaml"));
    assert_eq!(stored.definition, stdio("git"));
    let stored = store.put_workflow(workflow("wf"), &caller).await.expect("written");
    assert_eq!(stored.file.as_deref(), Some("workflows/wf.yaml"));

    // A file named after a new definition that defines another: a failure, named relatively.
    std::fs::write(
        dir.path().join("workflows/bar.yaml"),
        serde_saphyr::to_string(&workflow("wf2")).expect("yaml"),
    )
    .expect("written");
    match store.put_workflow(workflow("bar"), &caller).await {
        Err(DefinitionStoreError::Failed { message, .. }) => assert_eq!(
            message,
            "workflows/bar.yaml already defines another Workflow; rename that file before writing Workflow \"bar\""
        ),
        other => panic!("{other:?}"),
    }
    store.delete_mcpserver("git", &caller).await.expect("deleted");
    store
        .delete_workflow("never-written", &caller)
        .await
        .expect("nothing to delete");
    assert!(load(dir.path()).expect("loads").servers.is_empty());
}
