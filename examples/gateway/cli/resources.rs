//! `list`, `get` and `check`: what the gateway has, one thing in detail, and whether a server or
//! workflow is ready.
//!
//! As muster maps them: `list` calls the `*_list` core tools (`core_mcpserver_list`,
//! `core_workflow_list`, `core_workflow_execution_list`, `core_service_list`) or the discovery
//! meta-tools (`list_tools` page by page, `filter_tools` with `--filter`, `list_resources`,
//! `list_prompts`); `get` calls `core_mcpserver_get`, `core_workflow_get`,
//! `core_workflow_execution_get`, `core_service_status`, or `describe_tool` /
//! `describe_resource` / `describe_prompt`; `check` calls `core_service_status` or
//! `core_workflow_available`. `-o json|yaml` prints a list as a JSON array of its entries and
//! one thing as the gateway's object.

use clap::ValueEnum;
use serde_json::{Value, json};

use super::{
    client::Client,
    error::{AUTH_REQUIRED, CliError, ERROR, OK},
    note,
    output::{Column, Out, at, cell, lookup},
};

/// What `list` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ListKind {
    /// Every tool you can call (core, downstream and workflow tools).
    #[value(alias = "tool")]
    Tools,
    /// The MCP server definitions and their state.
    #[value(alias = "mcpserver")]
    Mcpservers,
    /// The workflow definitions and whether they can run.
    #[value(alias = "workflow")]
    Workflows,
    /// Workflow executions, newest first.
    #[value(aliases = ["execution", "workflow-executions", "workflow-execution"])]
    Executions,
    /// The services: the aggregator and every MCP server, with state and health.
    #[value(alias = "service")]
    Services,
    /// The resources of the downstream servers.
    #[value(alias = "resource")]
    Resources,
    /// The prompts of the downstream servers.
    #[value(alias = "prompt")]
    Prompts,
}

/// What `get` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum GetKind {
    /// A tool: its description, input schema and server (`describe_tool`).
    #[value(alias = "tools")]
    Tool,
    /// An MCP server definition with its state (`core_mcpserver_get`).
    #[value(alias = "mcpservers")]
    Mcpserver,
    /// A workflow definition with its availability (`core_workflow_get`).
    #[value(alias = "workflows")]
    Workflow,
    /// A workflow execution by id (`core_workflow_execution_get`).
    #[value(aliases = ["executions", "workflow-execution"])]
    Execution,
    /// A service's state and health (`core_service_status`).
    #[value(alias = "services")]
    Service,
    /// A resource's metadata by URI (`describe_resource`).
    #[value(alias = "resources")]
    Resource,
    /// A prompt and its arguments (`describe_prompt`).
    #[value(alias = "prompts")]
    Prompt,
}

/// What `check` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CheckKind {
    /// Whether an MCP server is running and healthy (`core_service_status`).
    Mcpserver,
    /// Whether a workflow can run now: every tool it names is there (`core_workflow_available`).
    Workflow,
}

/// The `list` filters.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListFilters {
    pub(crate) filter: Option<String>,
    pub(crate) workflow: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) limit: Option<u32>,
}

/// How many tools one `list_tools` page asks for.
const TOOLS_PAGE: usize = 500;

const TOOL_COLUMNS: &[Column] = &[
    Column::new("NAME", |r| at(r, "name")),
    Column::new("SERVER", |r| at(r, "server")),
    Column::new("KIND", |r| at(r, "kind")).wide(),
    Column::new("READ-ONLY", |r| at(r, "annotations.readOnlyHint")).wide(),
    Column::new("LABELS", labels).wide(),
    Column::new("DESCRIPTION", |r| match lookup(r, "summary") {
        Some(summary) => cell(summary),
        None => first_line(&at(r, "description")),
    }),
];

const MCPSERVER_COLUMNS: &[Column] = &[
    Column::new("NAME", |r| at(r, "name")),
    Column::new("TYPE", |r| at(r, "type")),
    Column::new("STATE", |r| at(r, "state")).state(),
    Column::new("AUTOSTART", |r| at(r, "autoStart")).wide(),
    Column::new("TARGET", target).wide(),
    Column::new("LAST ERROR", |r| at(r, "lastError")).wide(),
    Column::new("DESCRIPTION", |r| at(r, "description")),
];

const WORKFLOW_COLUMNS: &[Column] = &[
    Column::new("NAME", |r| at(r, "name")),
    Column::new("AVAILABLE", |r| at(r, "available")).state(),
    Column::new("STEPS", |r| at(r, "steps")),
    Column::new("MISSING TOOLS", |r| at(r, "missing_tools")).wide(),
    Column::new("DESCRIPTION", |r| at(r, "description")),
];

const EXECUTION_COLUMNS: &[Column] = &[
    Column::new("ID", |r| at(r, "execution_id")),
    Column::new("WORKFLOW", |r| at(r, "workflow_name")),
    Column::new("STATUS", |r| at(r, "status")).state(),
    Column::new("STARTED", |r| time(&at(r, "started_at"))),
    Column::new("DURATION", |r| {
        lookup(r, "duration_ms")
            .and_then(Value::as_i64)
            .map_or("-".to_owned(), millis)
    }),
    Column::new("STEPS", |r| at(r, "step_count")).wide(),
    Column::new("ERROR", |r| at(r, "error")).wide(),
];

const SERVICE_COLUMNS: &[Column] = &[
    Column::new("NAME", |r| at(r, "name")),
    Column::new("TYPE", |r| at(r, "service_type")),
    Column::new("STATE", |r| at(r, "state")).state(),
    Column::new("HEALTH", |r| at(r, "health")).state(),
    Column::new("TOOLS", |r| at(r, "metadata.tools")),
    Column::new("RESTARTS", |r| at(r, "restart_count")).wide(),
    Column::new("LAST ERROR", |r| at(r, "last_error")).wide(),
];

const RESOURCE_COLUMNS: &[Column] = &[
    Column::new("URI", |r| at(r, "uri")),
    Column::new("NAME", |r| at(r, "name")),
    Column::new("SERVER", |r| at(r, "server")),
    Column::new("MIME TYPE", |r| at(r, "mimeType")).wide(),
    Column::new("DESCRIPTION", |r| at(r, "description")),
];

const PROMPT_COLUMNS: &[Column] = &[
    Column::new("NAME", |r| at(r, "name")),
    Column::new("SERVER", |r| at(r, "server")),
    Column::new("DESCRIPTION", |r| at(r, "description")),
];

fn labels(row: &Value) -> String {
    match row.get("labels").and_then(Value::as_object) {
        Some(map) if !map.is_empty() => map
            .iter()
            .map(|(k, v)| format!("{k}={}", cell(v)))
            .collect::<Vec<_>>()
            .join(","),
        _ => "-".to_owned(),
    }
}

/// What a server runs or reaches: its URL, else its command line.
fn target(row: &Value) -> String {
    if let Some(url) = row.get("url").and_then(Value::as_str) {
        return url.to_owned();
    }
    let mut parts: Vec<String> = row
        .get("command")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .into_iter()
        .collect();
    if let Some(args) = row.get("args").and_then(Value::as_array) {
        parts.extend(args.iter().map(cell));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(" ")
    }
}

/// An RFC 3339 time as `YYYY-MM-DD HH:MM:SS` (UTC), as the events show theirs.
fn time(text: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(text).map_or_else(
        |_| text.to_owned(),
        |t| t.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M:%S").to_string(),
    )
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

/// A duration in milliseconds as people read it: `840ms`, `2.5s`, `3m12s`.
pub(crate) fn millis(ms: i64) -> String {
    match ms {
        ..=999 => format!("{ms}ms"),
        1000..=59_999 => format!("{}s", (ms as f64 / 100.0).round() / 10.0),
        _ => format!("{}m{}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// The entries of `answer[key]`, or none.
fn entries(answer: &Value, key: &str) -> Vec<Value> {
    answer.get(key).and_then(Value::as_array).cloned().unwrap_or_default()
}

/// `list <kind>`.
pub(crate) async fn list(client: &Client, out: &Out, kind: ListKind, filters: &ListFilters) -> Result<u8, CliError> {
    let (items, columns, noun) = match kind {
        ListKind::Tools => (
            tools(client, out, filters.filter.as_deref()).await?,
            TOOL_COLUMNS,
            "tools",
        ),
        ListKind::Mcpservers => {
            let answer = client
                .core("core_mcpserver_list", json!({}), "listing MCP servers")
                .await?;
            (entries(&answer, "mcpServers"), MCPSERVER_COLUMNS, "MCP servers")
        }
        ListKind::Workflows => {
            let answer = client
                .core("core_workflow_list", json!({}), "listing workflows")
                .await?;
            (entries(&answer, "workflows"), WORKFLOW_COLUMNS, "workflows")
        }
        ListKind::Executions => {
            let mut args = serde_json::Map::new();
            if let Some(w) = &filters.workflow {
                args.insert("workflow_name".into(), json!(w));
            }
            if let Some(s) = &filters.status {
                args.insert("status".into(), json!(s));
            }
            if let Some(l) = filters.limit {
                args.insert("limit".into(), json!(l));
            }
            let answer = client
                .core(
                    "core_workflow_execution_list",
                    Value::Object(args),
                    "listing workflow executions",
                )
                .await?;
            if out.format.is_table() && answer.get("has_more") == Some(&Value::Bool(true)) {
                note(&format!(
                    "{} executions in all; this is the newest {} (see --limit)",
                    at(&answer, "total"),
                    at(&answer, "limit")
                ));
            }
            (entries(&answer, "executions"), EXECUTION_COLUMNS, "workflow executions")
        }
        ListKind::Services => {
            let answer = client.core("core_service_list", json!({}), "listing services").await?;
            (entries(&answer, "services"), SERVICE_COLUMNS, "services")
        }
        ListKind::Resources => {
            let answer = client
                .meta_json("list_resources", json!({}), "listing resources")
                .await?;
            (
                answer.as_array().cloned().unwrap_or_default(),
                RESOURCE_COLUMNS,
                "resources",
            )
        }
        ListKind::Prompts => {
            let answer = client.meta_json("list_prompts", json!({}), "listing prompts").await?;
            (
                answer.as_array().cloned().unwrap_or_default(),
                PROMPT_COLUMNS,
                "prompts",
            )
        }
    };
    if out.format.is_table() && items.is_empty() {
        note(&format!("No {noun} found."));
        return Ok(OK);
    }
    out.list(&Value::Array(items), columns);
    Ok(OK)
}

/// Every tool (page after page of `list_tools`, or of `filter_tools` for a `pattern`), and a
/// note naming the servers a sign-in would add tools of.
async fn tools(client: &Client, out: &Out, pattern: Option<&str>) -> Result<Vec<Value>, CliError> {
    let mut all = Vec::new();
    let mut offset = 0;
    loop {
        let (meta, mut args) = match pattern {
            Some(p) => ("filter_tools", json!({"pattern": p})),
            None => ("list_tools", json!({})),
        };
        args["limit"] = json!(TOOLS_PAGE);
        args["offset"] = json!(offset);
        let page = client.meta_json(meta, args, "listing tools").await?;
        let tools = entries(&page, "tools");
        let got = tools.len();
        offset += got;
        all.extend(tools);
        if page.get("truncated") != Some(&Value::Bool(true)) || got == 0 {
            if out.format.is_table() {
                for hint in entries(&page, "servers_requiring_auth") {
                    let server = at(&hint, "name");
                    note(&format!(
                        "{server} has tools you do not see yet: sign in with `gateway auth login --server {server}`"
                    ));
                }
            }
            return Ok(all);
        }
    }
}

/// What `get` may narrow further.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Detail<'a> {
    /// An execution's step.
    pub(crate) step: Option<&'a str>,
    /// The server of a resource URI several servers expose.
    pub(crate) server: Option<&'a str>,
}

/// `get <kind> <name>`.
pub(crate) async fn get(
    client: &Client,
    out: &Out,
    kind: GetKind,
    name: &str,
    detail: Detail<'_>,
) -> Result<u8, CliError> {
    let hint = |plural: &'static str| {
        move |e: CliError| match e {
            CliError::Failed { what, message } if message.contains("not found") => CliError::Failed {
                what,
                message: format!("{message} (see `gateway list {plural}`)"),
            },
            other => other,
        }
    };
    let what = format!("getting {} {name}", kind_name(kind));
    let answer = match kind {
        GetKind::Tool => client
            .meta_json("describe_tool", json!({"name": name}), &what)
            .await
            .map_err(hint("tools"))?,
        GetKind::Mcpserver => client
            .core("core_mcpserver_get", json!({"name": name}), &what)
            .await
            .map_err(hint("mcpservers"))?,
        GetKind::Workflow => client
            .core("core_workflow_get", json!({"name": name}), &what)
            .await
            .map_err(hint("workflows"))?,
        GetKind::Execution => {
            let mut args = json!({"execution_id": name});
            if let Some(step) = detail.step {
                args["step_id"] = json!(step);
            }
            client
                .core("core_workflow_execution_get", args, &what)
                .await
                .map_err(hint("executions"))?
        }
        GetKind::Service => client
            .core("core_service_status", json!({"name": name}), &what)
            .await
            .map_err(hint("services"))?,
        GetKind::Resource => {
            let mut args = json!({"uri": name});
            if let Some(server) = detail.server {
                args["server"] = json!(server);
            }
            client
                .meta_json("describe_resource", args, &what)
                .await
                .map_err(hint("resources"))?
        }
        GetKind::Prompt => client
            .meta_json("describe_prompt", json!({"name": name}), &what)
            .await
            .map_err(hint("prompts"))?,
    };
    out.object(&answer);
    Ok(OK)
}

fn kind_name(kind: GetKind) -> &'static str {
    match kind {
        GetKind::Tool => "tool",
        GetKind::Mcpserver => "MCP server",
        GetKind::Workflow => "workflow",
        GetKind::Execution => "workflow execution",
        GetKind::Service => "service",
        GetKind::Resource => "resource",
        GetKind::Prompt => "prompt",
    }
}

/// `check <kind> <name>`: 0 when ready, 1 when not, 2 when a sign-in is what it lacks.
pub(crate) async fn check(client: &Client, out: &Out, kind: CheckKind, name: &str) -> Result<u8, CliError> {
    let (mut answer, verdict) = match kind {
        CheckKind::Mcpserver => {
            let what = format!("checking MCP server {name}");
            let answer = client.core("core_service_status", json!({"name": name}), &what).await?;
            let verdict = server_verdict(name, &answer);
            (answer, verdict)
        }
        CheckKind::Workflow => {
            let what = format!("checking workflow {name}");
            let answer = client
                .core("core_workflow_available", json!({"name": name}), &what)
                .await?;
            let verdict = workflow_verdict(name, &answer);
            (answer, verdict)
        }
    };
    if out.format.is_table() {
        out.line(&verdict.1);
    } else {
        if let Value::Object(map) = &mut answer {
            map.insert("ready".into(), json!(verdict.0 == OK));
        }
        out.data(&answer);
    }
    Ok(verdict.0)
}

/// The exit code and the sentence for an MCP server's `core_service_status`.
fn server_verdict(name: &str, status: &Value) -> (u8, String) {
    let state = at(status, "state");
    let health = at(status, "health");
    if health == "healthy" {
        return (
            OK,
            format!(
                "MCP server {name} is ready: {state}, {} tools",
                at(status, "metadata.tools")
            ),
        );
    }
    if state == "auth_required" {
        return (
            AUTH_REQUIRED,
            format!("MCP server {name} needs a sign-in: run `gateway auth login --server {name}`"),
        );
    }
    let error = status
        .get("last_error")
        .and_then(Value::as_str)
        .map(|e| format!(": {e}"))
        .unwrap_or_default();
    (
        ERROR,
        format!("MCP server {name} is not ready ({state}, {health}){error}"),
    )
}

/// The exit code and the sentence for `core_workflow_available`.
fn workflow_verdict(name: &str, available: &Value) -> (u8, String) {
    if available.get("available") == Some(&Value::Bool(true)) {
        return (OK, format!("workflow {name} is available"));
    }
    let missing = at(available, "missing_tools");
    (
        ERROR,
        format!("workflow {name} is not available: missing tools {missing}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(millis(840), "840ms");
        assert_eq!(millis(2500), "2.5s");
        assert_eq!(millis(1000), "1s");
        assert_eq!(millis(192_000), "3m12s");
    }

    #[test]
    fn times_read_like_the_events() {
        assert_eq!(time("2026-11-30T06:27:35.419874884Z"), "2026-11-30 06:27:35");
        assert_eq!(time("-"), "-");
    }

    #[test]
    fn a_server_target_is_its_url_or_its_command_line() {
        assert_eq!(target(&json!({"url": "http://x/mcp", "command": "no"})), "http://x/mcp");
        assert_eq!(
            target(&json!({"command": "gateway", "args": ["demo-server"]})),
            "gateway demo-server"
        );
        assert_eq!(target(&json!({})), "-");
    }

    #[test]
    fn a_healthy_server_is_ready_and_a_server_wanting_sign_in_says_how() {
        let healthy = json!({"state": "running", "health": "healthy", "metadata": {"tools": 6}});
        assert_eq!(
            server_verdict("demo", &healthy),
            (OK, "MCP server demo is ready: running, 6 tools".to_owned())
        );
        let (code, text) = server_verdict("p", &json!({"state": "auth_required", "health": "unknown"}));
        assert_eq!(code, AUTH_REQUIRED);
        assert!(text.contains("gateway auth login --server p"), "{text}");
        let (code, text) = server_verdict(
            "f",
            &json!({"state": "failed", "health": "unhealthy", "last_error": "exit 1"}),
        );
        assert_eq!(code, ERROR);
        assert!(text.ends_with(": exit 1"), "{text}");
    }

    #[test]
    fn a_workflow_missing_tools_names_them() {
        assert_eq!(workflow_verdict("w", &json!({"available": true})).0, OK);
        let (code, text) = workflow_verdict("w", &json!({"available": false, "missing_tools": ["x_a", "x_b"]}));
        assert_eq!(code, ERROR);
        assert!(text.contains("x_a, x_b"), "{text}");
    }

    #[test]
    fn tool_rows_show_the_summary_or_the_first_line_of_the_description() {
        let description = TOOL_COLUMNS.iter().find(|c| c.header == "DESCRIPTION").expect("column");
        assert_eq!((description.value)(&json!({"summary": "Echo."})), "Echo.");
        assert_eq!(
            (description.value)(&json!({"description": "Line one.\nLine two."})),
            "Line one."
        );
        let labels_column = TOOL_COLUMNS.iter().find(|c| c.header == "LABELS").expect("column");
        assert_eq!(
            (labels_column.value)(&json!({"labels": {"a": "1", "b": "2"}})),
            "a=1,b=2"
        );
    }
}
