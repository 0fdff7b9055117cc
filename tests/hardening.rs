//! Names that would escape the config directory are refused on every write path (core tools
//! create and update, and file load), with a clear error, and nothing lands outside the
//! directory; the gateway keeps serving.

mod common;

use std::path::Path;

use common::{Harness, fast_supervision, text};
use muster::gateway::Gateway;
use serde_json::{Value, json};

const ESCAPES: [&str; 6] = ["../evil", "..", "/etc/passwd", "a/b", "bad\u{0}name", "line\nbreak"];

fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if !path.components().any(|c| c.as_os_str() == "events") {
                // The event log records the refusals; definitions are what must not appear.
                found.push(path.strip_prefix(dir).unwrap_or(&path).display().to_string());
            }
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn names_that_would_escape_the_config_directory_are_refused_everywhere() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("config");
    std::fs::create_dir_all(dir.join("mcpservers")).expect("mkdir");
    // A file whose definition names an escaping server is left out with its reason.
    std::fs::write(
        dir.join("mcpservers/sneaky.yaml"),
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: ../evil\nspec:\n  type: streamable-http\n  url: http://127.0.0.1:9/mcp\n",
    )
    .expect("write");
    let (gateway, problems) = Gateway::from_config_dir(&dir, fast_supervision()).expect("loads");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].to_string().contains("sneaky.yaml"), "{problems:?}");
    let h = Harness::serve(gateway).await;
    let before = files_under(root.path());

    for name in ESCAPES {
        for (tool, args) in [
            (
                "core_mcpserver_create",
                json!({"name": name, "type": "streamable-http", "url": "http://127.0.0.1:9/mcp"}),
            ),
            (
                "core_mcpserver_update",
                json!({"name": name, "type": "streamable-http", "url": "http://127.0.0.1:9/mcp"}),
            ),
            (
                "core_workflow_create",
                json!({"name": name, "steps": [{"id": "s", "tool": "core_service_list"}]}),
            ),
        ] {
            let result = h.meta("call_tool", json!({"name": tool, "arguments": args})).await;
            let envelope: Value = serde_json::from_str(&text(&result)).unwrap_or(Value::Null);
            let refused = result.is_error == Some(true) || envelope["isError"] == true;
            assert!(refused, "{tool} {name:?} was accepted: {}", text(&result));
            let message = text(&result);
            // Create says the name is not allowed; update finds no such server to replace.
            let says_why = message.contains("is not allowed") || message.contains("not found");
            assert!(says_why, "{tool} {name:?}: {message}");
        }
    }
    assert_eq!(files_under(root.path()), before, "nothing was written");
    let listed = h.meta("list_tools", json!({"limit": 1})).await;
    assert_ne!(listed.is_error, Some(true));
    h.stop().await;
}
