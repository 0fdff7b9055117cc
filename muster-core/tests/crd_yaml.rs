#[test]
fn probe() {
    let e = serde_saphyr::from_str::<muster_core::crd::MCPServer>("metadata: {name: a}\nspec:\n  type: stdio\n  comand: npx\n").unwrap_err();
    eprintln!("SAPHYR: {e}\n---");
    let e = serde_saphyr::from_str::<muster_core::crd::MCPServer>("metadata: {name: a}\nspec:\n  type: stdio\n  restartRequestedAt: yesterday\n").unwrap_err();
    eprintln!("SAPHYR: {e}\n---");
    let e = serde_json::from_str::<muster_core::crd::MCPServer>(r#"{"metadata": {"name": "a"}, "spec": {"type": "stdio", "comand": "npx"}}"#).unwrap_err();
    eprintln!("JSON: {e}\n---");
    let e = serde_saphyr::from_str::<muster_core::crd::Workflow>("metadata: {name: a}\nspec:\n  steps:\n    - id: a\n      tool: t\n      allowFailures: true\n").unwrap_err();
    eprintln!("SAPHYR: {e}\n---");
}
