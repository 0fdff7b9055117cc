use std::fs;

use super::*;

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

const GOOD_SERVER: &str = "apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: good
spec:
  type: stdio
  autoStart: true
  command: echo
status:
  state: running
";

#[test]
fn a_missing_directory_loads_the_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loaded = load(&dir.path().join("absent")).expect("load");
    assert_eq!(loaded.config.aggregator.port, 8090);
    assert!(loaded.servers.is_empty() && loaded.problems.is_empty());
}

#[test]
fn config_yaml_sets_the_aggregator() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "config.yaml",
        "aggregator:\n  port: 9123\n  musterPrefix: m\n",
    );
    let loaded = load(dir.path()).expect("load");
    assert_eq!(loaded.config.aggregator.port, 9123);
    assert_eq!(loaded.config.aggregator.muster_prefix, "m");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
}

#[test]
fn bad_files_are_reported_by_file_field_and_reason_and_the_rest_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "mcpservers/a-good.yaml", GOOD_SERVER);
    write(
        dir.path(),
        "mcpservers/b-broken.yaml",
        "kind: MCPServer\nmetadata: [unclosed\n",
    );
    write(
        dir.path(),
        "mcpservers/c-invalid.yml",
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: invalid\nspec:\n  type: stdio\n  timeout: 900\n",
    );
    write(
        dir.path(),
        "mcpservers/d-typo.yaml",
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: typo\nspec:\n  type: stdio\n  comand: echo\n",
    );
    write(dir.path(), "mcpservers/e-duplicate.yaml", GOOD_SERVER);
    write(
        dir.path(),
        "mcpservers/f-workflow.yaml",
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: w\nspec:\n  steps: [{id: a, tool: t}]\n",
    );
    write(dir.path(), "mcpservers/notes.txt", "ignored");
    let loaded = load(dir.path()).expect("load");

    let names: Vec<&str> = loaded.servers.iter().map(|s| s.metadata.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let find = |file: &str| {
        loaded
            .problems
            .iter()
            .filter(|p| p.file.ends_with(file))
            .collect::<Vec<_>>()
    };
    let broken = find("b-broken.yaml");
    assert_eq!(broken.len(), 1);
    assert!(broken[0].reason.starts_with("invalid YAML"), "{}", broken[0]);

    let invalid = find("c-invalid.yml");
    assert!(
        invalid.iter().any(|p| p.field.as_deref() == Some("spec.timeout")),
        "{invalid:?}"
    );
    assert!(
        invalid.iter().any(|p| p.field.as_deref() == Some("spec.command")),
        "{invalid:?}"
    );

    // The misspelt field is dropped, so the server lacks its command; both are said.
    let typo: Vec<String> = find("d-typo.yaml").iter().map(ToString::to_string).collect();
    assert_eq!(typo.len(), 2, "{typo:?}");
    assert!(
        typo[0].ends_with("spec.command: command is required for a stdio server"),
        "{typo:?}"
    );
    assert!(
        typo[1].ends_with(r#"spec.comand: unknown field "spec.comand" (dropped)"#),
        "{typo:?}"
    );

    let duplicate = find("e-duplicate.yaml");
    assert_eq!(duplicate[0].field.as_deref(), Some("metadata.name"));
    assert!(duplicate[0].reason.contains("already defined"));

    let wrong_kind = find("f-workflow.yaml");
    assert_eq!(wrong_kind[0].field.as_deref(), Some("kind"));
}

#[test]
fn a_definition_with_unknown_fields_loads_without_them_and_each_is_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "mcpservers/remote.yaml",
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: remote\n  uid: abc\nspec:\n  type: streamable-http\n  url: http://127.0.0.1:1/mcp\n  command: npx\n  retries: 3\n",
    );
    write(
        dir.path(),
        "workflows/w.yaml",
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: w\nspec:\n  steps:\n    - id: a\n      tool: x_demo_echo\n      required: true\n",
    );
    let loaded = load(dir.path()).expect("load");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    assert_eq!(loaded.servers.len(), 1);
    assert_eq!(loaded.workflows.len(), 1);
    assert!(loaded.servers[0].spec.command.is_none(), "dropped, not kept");
    let warnings: Vec<(&str, &str, String)> = loaded
        .warnings
        .iter()
        .map(|w| (w.kind, w.name.as_str(), w.warning.to_string()))
        .collect();
    assert_eq!(
        warnings,
        [
            (
                "MCPServer",
                "remote",
                r#"unknown field "spec.retries" (dropped)"#.to_owned()
            ),
            (
                "MCPServer",
                "remote",
                r#"field "spec.command" does not apply to a streamable-http server (dropped)"#.to_owned()
            ),
            (
                "Workflow",
                "w",
                r#"unknown field "spec.steps[0].required" (dropped)"#.to_owned()
            ),
        ]
    );
    assert!(loaded.warnings[0].to_string().contains("remote.yaml: unknown field"));
}

#[test]
fn workflows_load_and_invalid_ones_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "workflows/ok.yaml",
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: ok\nspec:\n  steps:\n    - id: a\n      tool: x_demo_echo\n      allow_failure: true\n",
    );
    write(
        dir.path(),
        "workflows/empty.yaml",
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: empty\nspec:\n  steps: []\n",
    );
    let loaded = load(dir.path()).expect("load");
    assert_eq!(loaded.workflows.len(), 1);
    assert!(
        loaded.workflows[0].spec.steps[0].allow_failure,
        "the deprecated alias is accepted"
    );
    assert_eq!(loaded.problems.len(), 1);
    assert!(
        loaded.problems[0].reason.contains("at least one step"),
        "{}",
        loaded.problems[0]
    );
}
