//! The reference gateway's client commands (`gateway list|get|call|check|events|auth`) against
//! the real `gateway serve` binary with real downstream servers: the demo server over stdio
//! (`demo`) and another over streamable HTTP (`web`), the example `demo-tour` workflow and one
//! that names a missing tool. Each command runs in each output format; JSON and YAML are
//! parsed and checked for what the servers really offer; exit codes are checked (0 ok, 1 error,
//! 2 sign-in needed, 3 sign-in failed), including against a protected server of a real
//! authorization server (oidc-provider) and a gateway with a front door.

mod common;
#[path = "cli/harness.rs"]
mod harness;

use std::{collections::BTreeSet, time::Duration};

use common::{DemoHttp, demo_stdio, oidc::OidcProvider, remote, scripted::ScriptedServer};
use harness::{ConfigDir, GatewayProcess, Run, cli, cli_with, command, free_port, wait_ready};
use muster::core::config::{AggregatorConfig, McpClientConfig, MusterConfig, OAuthServerConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const FORMATS: [&str; 4] = ["table", "wide", "json", "yaml"];

const MISSING_TOOL_WORKFLOW: &str = r#"apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: needs-missing
spec:
  description: "Calls a tool no server offers"
  steps:
    - id: only
      tool: x_nowhere_nothing
"#;

/// A gateway with the demo server over stdio (`demo`) and over HTTP (`web`), the example
/// workflow and one missing a tool, both servers connected.
async fn demo_gateway() -> (GatewayProcess, DemoHttp) {
    let web = DemoHttp::start();
    let config = ConfigDir::new(&MusterConfig::default());
    config.server(&demo_stdio("demo"));
    config.server(&remote("web", &web.url));
    config.workflow("demo-tour", include_str!("../examples/config/workflows/demo-tour.yaml"));
    config.workflow("needs-missing", MISSING_TOOL_WORKFLOW);
    let gateway = GatewayProcess::start(config, 0);
    wait_ready(&gateway, &["demo", "web"]).await;
    (gateway, web)
}

/// The `field` of every entry of `list`.
/// Starts `command` (a gateway subcommand that speaks MCP on stdio), killed on drop: the child
/// and the ends of its stdio an MCP client is served on.
fn spawn_on_stdio(
    mut command: tokio::process::Command,
) -> (
    tokio::process::Child,
    (tokio::process::ChildStdout, tokio::process::ChildStdin),
) {
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the gateway");
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    (child, (stdout, stdin))
}

fn names(list: &Value, field: &str) -> BTreeSet<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .filter_map(|e| e[field].as_str().map(str::to_owned))
        .collect()
}

/// The entry of `list` whose `field` is `value`.
fn entry<'a>(list: &'a Value, field: &str, value: &str) -> &'a Value {
    list.as_array()
        .and_then(|l| l.iter().find(|e| e[field] == value))
        .unwrap_or_else(|| panic!("no entry with {field} = {value} in {list}"))
}

/// The header cells of a table (its first line).
fn headers(run: &Run) -> Vec<String> {
    run.lines()
        .first()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The cells of a table line (columns are two or more spaces apart).
fn cells(line: &str) -> Vec<&str> {
    line.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect()
}

/// The table row whose first cell is `first`.
fn row<'a>(run: &'a Run, first: &str) -> &'a str {
    run.lines()
        .into_iter()
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no row {first}\n{run}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_every_kind_in_every_format() {
    let (gw, web) = demo_gateway().await;
    let ep = gw.endpoint.as_str();
    // One execution to list.
    cli(ep, &["call", "workflow_demo-tour", "--arg", "who=cli"]).await.ok();

    for format in FORMATS {
        let tools = cli(ep, &["list", "tools", "-o", format]).await;
        tools.ok();
        let servers = cli(ep, &["list", "mcpservers", "-o", format]).await;
        servers.ok();
        let workflows = cli(ep, &["list", "workflows", "-o", format]).await;
        workflows.ok();
        let executions = cli(ep, &["list", "executions", "-o", format]).await;
        executions.ok();
        let services = cli(ep, &["list", "services", "-o", format]).await;
        services.ok();
        let resources = cli(ep, &["list", "resources", "-o", format]).await;
        resources.ok();
        let prompts = cli(ep, &["list", "prompts", "-o", format]).await;
        prompts.ok();

        match format {
            "table" | "wide" => {
                let wide = format == "wide";
                for run in [
                    &tools,
                    &servers,
                    &workflows,
                    &executions,
                    &services,
                    &resources,
                    &prompts,
                ] {
                    assert!(!run.stdout.contains('\x1b'), "colour on a pipe\n{run}");
                    assert!(
                        run.lines().iter().all(|l| l.chars().count() <= 100),
                        "wider than 100\n{run}"
                    );
                }
                assert_eq!(headers(&tools)[..2], ["NAME", "SERVER"], "{tools}");
                assert_eq!(headers(&tools).contains(&"KIND".to_owned()), wide, "{tools}");
                assert_eq!(cells(row(&tools, "x_demo_echo"))[1], "demo", "{tools}");
                assert_eq!(cells(row(&tools, "x_web_add"))[1], "web", "{tools}");
                row(&tools, "core_service_list");
                row(&tools, "workflow_demo-tour");
                assert!(headers(&servers).contains(&"STATE".to_owned()), "{servers}");
                assert_eq!(headers(&servers).contains(&"TARGET".to_owned()), wide, "{servers}");
                assert_eq!(cells(row(&servers, "demo"))[1..3], ["stdio", "Running"], "{servers}");
                assert_eq!(
                    cells(row(&servers, "web"))[1..3],
                    ["streamable-http", "Connected"],
                    "{servers}"
                );
                assert_eq!(cells(row(&workflows, "demo-tour"))[1..3], ["true", "3"], "{workflows}");
                assert_eq!(cells(row(&workflows, "needs-missing"))[1], "false", "{workflows}");
                if wide {
                    assert!(
                        row(&workflows, "needs-missing").contains("x_nowhere_nothing"),
                        "{workflows}"
                    );
                }
                assert_eq!(executions.lines().len(), 2, "{executions}");
                assert_eq!(
                    cells(executions.lines()[1])[1..3],
                    ["demo-tour", "completed"],
                    "{executions}"
                );
                assert_eq!(
                    cells(row(&services, "mcp-aggregator"))[1..4],
                    ["Aggregator", "running", "healthy"]
                );
                assert_eq!(
                    cells(row(&services, "web"))[1..5],
                    ["MCPServer", "connected", "healthy", "6"]
                );
                let greeting: BTreeSet<&str> = resources
                    .lines()
                    .into_iter()
                    .filter(|l| l.starts_with("demo://greeting"))
                    .map(|l| cells(l)[2])
                    .collect();
                assert_eq!(greeting, BTreeSet::from(["demo", "web"]), "{resources}");
                assert_eq!(cells(row(&prompts, "x_demo_greet"))[1], "demo", "{prompts}");
                assert_eq!(cells(row(&prompts, "x_web_greet"))[1], "web", "{prompts}");
            }
            data => {
                let tools = tools.data(data);
                let tool_names = names(&tools, "name");
                for tool in [
                    "x_demo_echo",
                    "x_demo_add",
                    "x_web_echo",
                    "core_service_list",
                    "workflow_demo-tour",
                ] {
                    assert!(tool_names.contains(tool), "{tool} missing from {tool_names:?}");
                }
                assert_eq!(entry(&tools, "name", "x_web_add")["server"], "web");

                let servers = servers.data(data);
                assert_eq!(names(&servers, "name"), BTreeSet::from(["demo".into(), "web".into()]));
                assert_eq!(entry(&servers, "name", "web")["url"], json!(web.url));
                assert_eq!(entry(&servers, "name", "demo")["args"], json!(["demo-server"]));

                let workflows = workflows.data(data);
                assert_eq!(entry(&workflows, "name", "demo-tour")["available"], true);
                assert_eq!(entry(&workflows, "name", "demo-tour")["steps"], 3);
                let missing = entry(&workflows, "name", "needs-missing");
                assert_eq!(missing["available"], false);
                assert_eq!(missing["missing_tools"], json!(["x_nowhere_nothing"]));

                let executions = executions.data(data);
                let run = entry(&executions, "workflow_name", "demo-tour");
                assert_eq!(run["status"], "completed");

                let services = services.data(data);
                assert_eq!(
                    names(&services, "name"),
                    BTreeSet::from(["mcp-aggregator".into(), "demo".into(), "web".into()])
                );
                assert_eq!(entry(&services, "name", "demo")["health"], "healthy");
                assert_eq!(entry(&services, "name", "demo")["metadata"]["tools"], 6);

                let resources = resources.data(data);
                let greeting: BTreeSet<String> = resources
                    .as_array()
                    .expect("a list")
                    .iter()
                    .filter(|r| r["uri"] == "demo://greeting")
                    .filter_map(|r| r["server"].as_str().map(str::to_owned))
                    .collect();
                assert_eq!(greeting, BTreeSet::from(["demo".into(), "web".into()]));

                let prompts = prompts.data(data);
                assert!(
                    names(&prompts, "name").is_superset(&BTreeSet::from(["x_demo_greet".into(), "x_web_greet".into()]))
                );
            }
        }
    }

    // Singular names work too, and so does a glob.
    let filtered = cli(ep, &["list", "tool", "--filter", "x_web_*", "-o", "json"]).await;
    filtered.ok();
    let filtered = names(&filtered.json(), "name");
    assert!(
        filtered.contains("x_web_echo") && filtered.iter().all(|n| n.starts_with("x_web_")),
        "{filtered:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_fit_the_width_they_are_given() {
    let (gw, _web) = demo_gateway().await;
    for columns in ["60", "80", "160"] {
        let mut narrow = command(&gw.endpoint, &["list", "tools"]);
        narrow.env("COLUMNS", columns);
        let run = cli_with(narrow, &["list", "tools"]).await;
        run.ok();
        let width: usize = columns.parse().expect("a number");
        let longest = run.lines().iter().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(longest <= width, "a line of {longest} characters in {width}\n{run}");
        if width < 100 {
            assert!(run.stdout.contains('…'), "nothing was cut in {width}\n{run}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_shows_one_thing_in_every_format() {
    let (gw, web) = demo_gateway().await;
    let ep = gw.endpoint.as_str();
    let tour = cli(ep, &["call", "workflow_demo-tour", "--arg", "who=get", "-o", "json"]).await;
    tour.ok();
    let executions = cli(ep, &["list", "executions", "-o", "json"]).await;
    let execution_id = executions.ok().json()[0]["execution_id"]
        .as_str()
        .expect("an execution id")
        .to_owned();

    for format in FORMATS {
        let server = cli(ep, &["get", "mcpserver", "demo", "-o", format]).await;
        let tool = cli(ep, &["get", "tool", "x_demo_add", "-o", format]).await;
        let workflow = cli(ep, &["get", "workflow", "demo-tour", "-o", format]).await;
        let execution = cli(ep, &["get", "execution", &execution_id, "-o", format]).await;
        let service = cli(ep, &["get", "service", "web", "-o", format]).await;
        let resource = cli(
            ep,
            &["get", "resource", "demo://greeting", "--server", "web", "-o", format],
        )
        .await;
        let prompt = cli(ep, &["get", "prompt", "x_demo_greet", "-o", format]).await;
        for run in [&server, &tool, &workflow, &execution, &service, &resource, &prompt] {
            run.ok();
        }
        match format {
            "table" | "wide" => {
                assert_eq!(headers(&server), ["FIELD", "VALUE"], "{server}");
                assert!(row(&server, "type").ends_with("stdio"), "{server}");
                assert!(row(&tool, "server").ends_with("demo"), "{tool}");
                assert!(row(&workflow, "available").ends_with("true"), "{workflow}");
                assert!(row(&execution, "status").ends_with("completed"), "{execution}");
                assert!(row(&service, "health").ends_with("healthy"), "{service}");
                assert!(row(&resource, "uri").ends_with("demo://greeting"), "{resource}");
                assert!(row(&prompt, "name").ends_with("x_demo_greet"), "{prompt}");
                if format == "wide" {
                    // Nested fields by their dotted paths.
                    assert!(
                        row(&tool, "inputSchema.properties.a.type").ends_with("number"),
                        "{tool}"
                    );
                    assert!(row(&service, "metadata.tools").ends_with('6'), "{service}");
                }
            }
            data => {
                let server = server.data(data);
                assert_eq!(server["name"], "demo");
                assert_eq!(server["type"], "stdio");
                let tool = tool.data(data);
                assert_eq!(tool["server"], "demo");
                assert_eq!(tool["inputSchema"]["required"], json!(["a", "b"]));
                let workflow = workflow.data(data);
                let steps: Vec<&str> = workflow["steps"]
                    .as_array()
                    .expect("steps")
                    .iter()
                    .filter_map(|s| s["id"].as_str())
                    .collect();
                assert_eq!(steps, ["greet", "sum", "items"]);
                let execution = execution.data(data);
                assert_eq!(execution["workflow_name"], "demo-tour");
                assert_eq!(execution["status"], "completed");
                let service = service.data(data);
                assert_eq!(service["state"], "connected");
                assert_eq!(service["metadata"]["url"], json!(web.url));
                let resource = resource.data(data);
                assert_eq!(resource["server"], "web");
                let prompt = prompt.data(data);
                assert_eq!(prompt["server"], "demo");
            }
        }
    }

    // A step of the execution, and names that do not exist.
    let step = cli(ep, &["get", "execution", &execution_id, "--step", "sum", "-o", "json"]).await;
    assert_eq!(step.ok().json()["step_id"], "sum", "{step}");
    let missing = cli(ep, &["get", "mcpserver", "nope"]).await;
    missing.expect_code(1);
    assert!(
        missing.stderr.contains("nope") && missing.stderr.contains("gateway list mcpservers"),
        "{missing}"
    );
    assert!(missing.stdout.is_empty(), "{missing}");
    let missing = cli(ep, &["get", "tool", "x_demo_nope", "-o", "json"]).await;
    missing.expect_code(1);
    assert!(missing.stdout.is_empty(), "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_runs_a_tool_with_arg_or_json_in_every_format() {
    let (gw, _web) = demo_gateway().await;
    let ep = gw.endpoint.as_str();

    for format in FORMATS {
        let add = cli(
            ep,
            &["call", "x_demo_add", "--arg", "a=40", "--arg", "b=2", "-o", format],
        )
        .await;
        add.ok();
        let json_args = cli(
            ep,
            &["call", "x_web_add", "--json", r#"{"a": 1.5, "b": 2}"#, "-o", format],
        )
        .await;
        json_args.ok();
        let echo = cli(
            ep,
            &["call", "x_web_echo", "--arg", "message=hello there", "-o", format],
        )
        .await;
        echo.ok();
        match format {
            "table" | "wide" => {
                let sum: Value = serde_json::from_str(add.lines()[0]).expect("the tool's JSON text");
                assert_eq!(sum["sum"], 42.0, "{add}");
                assert!(json_args.stdout.contains("3.5"), "{json_args}");
                assert_eq!(echo.lines()[0], "hello there", "{echo}");
                if format == "wide" {
                    assert!(echo.stdout.contains("(ran echo on web)"), "{echo}");
                }
            }
            data => {
                let add = add.data(data);
                assert_eq!(add["structuredContent"]["sum"], 42.0);
                assert_eq!(add["isError"], false);
                assert_eq!(add["_meta"]["muster.giantswarm.io/tool"]["server"], "demo");
                assert_eq!(json_args.data(data)["structuredContent"]["sum"], 3.5);
                assert_eq!(echo.data(data)["content"][0]["text"], "hello there");
            }
        }
    }

    // --arg wins over --json; a value that is not JSON is a string.
    let merged = cli(
        ep,
        &[
            "call",
            "x_demo_add",
            "--json",
            r#"{"a": 1, "b": 1}"#,
            "--arg",
            "b=9",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(merged.ok().json()["structuredContent"]["sum"], 10.0);
    // A workflow runs through call as well.
    let tour = cli(
        ep,
        &[
            "call",
            "workflow_demo-tour",
            "--json",
            r#"{"who": "you"}"#,
            "-o",
            "json",
        ],
    )
    .await;
    let tour = tour.ok().json();
    let answer: Value = serde_json::from_str(tour["content"][0]["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(answer["greeting"], "hello you");
    assert_eq!(answer["sum"], 42.0);

    // A tool error exits 1 with its text on stderr (and the whole result with -o json).
    let failed = cli(ep, &["call", "x_demo_fail", "--arg", "reason=boom-on-purpose"]).await;
    failed.expect_code(1);
    assert!(failed.stderr.contains("boom-on-purpose"), "{failed}");
    let failed = cli(
        ep,
        &["call", "x_demo_fail", "--arg", "reason=boom-on-purpose", "-o", "json"],
    )
    .await;
    failed.expect_code(1);
    assert_eq!(failed.json()["isError"], true);

    // An unknown tool exits 1 and says where the tools are listed.
    let unknown = cli(ep, &["call", "x_demo_nope"]).await;
    unknown.expect_code(1);
    assert!(unknown.stderr.contains("x_demo_nope"), "{unknown}");
    assert!(unknown.stderr.contains("gateway list tools"), "{unknown}");

    // Malformed arguments are refused before anything is sent, as command-line mistakes (64).
    let bad = cli(ep, &["call", "x_demo_add", "--arg", "a"]).await;
    bad.expect_code(64);
    assert!(bad.stderr.contains("key=value"), "{bad}");
    let bad = cli(ep, &["call", "x_demo_add", "--json", "[1]"]).await;
    bad.expect_code(64);
    assert!(bad.stderr.contains("JSON object"), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_answers_with_its_exit_code() {
    let (gw, _web) = demo_gateway().await;
    let ep = gw.endpoint.as_str();
    for format in FORMATS {
        let server = cli(ep, &["check", "mcpserver", "demo", "-o", format]).await;
        server.ok();
        let workflow = cli(ep, &["check", "workflow", "demo-tour", "-o", format]).await;
        workflow.ok();
        let missing = cli(ep, &["check", "workflow", "needs-missing", "-o", format]).await;
        missing.expect_code(1);
        match format {
            "table" | "wide" => {
                assert!(server.stdout.contains("demo is ready"), "{server}");
                assert!(workflow.stdout.contains("demo-tour is available"), "{workflow}");
                assert!(missing.stdout.contains("x_nowhere_nothing"), "{missing}");
            }
            data => {
                let server = server.data(data);
                assert_eq!(
                    (server["ready"].clone(), server["health"].clone()),
                    (json!(true), json!("healthy"))
                );
                assert_eq!(workflow.data(data)["ready"], true);
                let missing = missing.data(data);
                assert_eq!(missing["ready"], false);
                assert_eq!(missing["missing_tools"], json!(["x_nowhere_nothing"]));
            }
        }
    }
    let unknown = cli(ep, &["check", "mcpserver", "nope"]).await;
    unknown.expect_code(1);
    assert!(unknown.stderr.contains("nope"), "{unknown}");

    // A stopped server is not ready.
    cli(ep, &["call", "core_service_stop", "--arg", "name=web"]).await.ok();
    let stopped = cli(ep, &["check", "mcpserver", "web", "-o", "json"]).await;
    stopped.expect_code(1);
    assert_eq!(stopped.json()["ready"], false);
    let stopped = cli(ep, &["check", "mcpserver", "web"]).await;
    stopped.expect_code(1);
    assert!(stopped.stdout.contains("web is not ready"), "{stopped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_list_in_every_format_and_follow_new_ones() {
    let (gw, _web) = demo_gateway().await;
    let ep = gw.endpoint.as_str();
    for format in FORMATS {
        let all = cli(ep, &["events", "-o", format]).await;
        all.ok();
        let web = cli(ep, &["events", "--resource-name", "web", "-o", format]).await;
        web.ok();
        match format {
            "table" | "wide" => {
                assert_eq!(headers(&all)[0], "TIME", "{all}");
                assert!(all.stdout.contains("MCPServer/demo"), "{all}");
                assert!(all.stdout.contains("MCPServerStarted"), "{all}");
                assert!(
                    web.stdout.contains("MCPServer/web") && !web.stdout.contains("MCPServer/demo"),
                    "{web}"
                );
            }
            data => {
                let all = all.data(data);
                let started = entry(&all, "resource_name", "demo");
                assert_eq!(started["resource_type"], "MCPServer");
                let web = web.data(data);
                assert_eq!(names(&web, "resource_name"), BTreeSet::from(["web".into()]));
                assert!(names(&web, "reason").contains("MCPServerStarted"), "{web}");
            }
        }
    }
    let limited = cli(ep, &["events", "--limit", "1", "-o", "json"]).await;
    assert_eq!(limited.ok().json().as_array().map(Vec::len), Some(1));

    // -f prints what there is, then what happens, each once, one JSON object a line.
    let args = ["events", "-f", "--resource-name", "demo", "-o", "json"];
    let mut follow = command(ep, &args);
    follow
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = follow.spawn().expect("spawn events -f");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a first event in time")
        .expect("read")
        .expect("a line");
    let first: Value = serde_json::from_str(&first).expect("one JSON event a line");
    assert_eq!(first["resource_name"], "demo");

    cli(ep, &["call", "core_service_restart", "--arg", "name=demo"])
        .await
        .ok();
    let mut seen = vec![first];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !seen.iter().any(|e| e["reason"] == "MCPServerStopped") {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no MCPServerStopped event followed; seen: {seen:?}"))
            .expect("read")
            .expect("a line");
        seen.push(serde_json::from_str(&line).expect("one JSON event a line"));
    }
    assert!(seen.iter().all(|e| e["resource_name"] == "demo"), "{seen:?}");
    let unique: BTreeSet<String> = seen.iter().map(Value::to_string).collect();
    assert_eq!(unique.len(), seen.len(), "an event printed twice: {seen:?}");
    let _ = child.kill().await;

    // In a table, the header comes first.
    let args = ["events", "-f"];
    let mut follow = command(ep, &args);
    follow
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = follow.spawn().expect("spawn events -f");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let header = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a header in time")
        .expect("read")
        .expect("a line");
    assert!(
        header.starts_with("TIME") && header.contains("REASON") && header.contains("MESSAGE"),
        "{header}"
    );
    let _ = child.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_status_lists_every_server_and_login_without_sign_in_configured_is_an_error() {
    let (gw, _web) = demo_gateway().await;
    let ep = gw.endpoint.as_str();
    for format in FORMATS {
        let status = cli(ep, &["auth", "status", "-o", format]).await;
        status.ok();
        match format {
            "table" | "wide" => {
                assert_eq!(headers(&status)[..3], ["SERVER", "KIND", "STATUS"], "{status}");
                assert!(row(&status, "demo").contains("none"), "{status}");
            }
            data => {
                let servers = status.data(data)["servers"].clone();
                assert_eq!(names(&servers, "name"), BTreeSet::from(["demo".into(), "web".into()]));
                assert_eq!(entry(&servers, "name", "web")["kind"], "none");
            }
        }
    }
    let one = cli(ep, &["auth", "status", "--server", "web", "-o", "json"]).await;
    assert_eq!(
        names(&one.ok().json()["servers"], "name"),
        BTreeSet::from(["web".into()])
    );
    let unknown = cli(ep, &["auth", "status", "--server", "nope"]).await;
    unknown.expect_code(1);

    let login = cli(ep, &["auth", "login", "--server", "demo"]).await;
    login.expect_code(1);
    assert!(login.stderr.contains("OAuth is not configured"), "{login}");
    let logout = cli(ep, &["auth", "logout", "--server", "demo", "-o", "json"]).await;
    assert_eq!(logout.expect_code(1).stdout, "", "{logout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_is_not_there_is_named_with_how_to_start_it() {
    let endpoint = format!("http://127.0.0.1:{}/mcp", free_port());
    let commands: [&[&str]; 6] = [
        &["list", "tools"],
        &["get", "mcpserver", "demo", "-o", "json"],
        &["call", "x_demo_echo", "--arg", "message=hi"],
        &["check", "mcpserver", "demo"],
        &["events", "-f"],
        &["auth", "status"],
    ];
    for args in commands {
        let run = cli(&endpoint, args).await;
        run.expect_code(1);
        assert!(run.stdout.is_empty(), "{run}");
        assert!(run.stderr.contains(&endpoint), "{run}");
        assert!(run.stderr.contains("connection refused"), "{run}");
        assert!(run.stderr.contains("Start it with `gateway serve`"), "{run}");
    }
    // --endpoint wins over MUSTER_ENDPOINT.
    let other = format!("http://127.0.0.1:{}/mcp", free_port());
    let run = cli(&endpoint, &["list", "tools", "--endpoint", &other]).await;
    run.expect_code(1);
    assert!(run.stderr.contains(&other) && !run.stderr.contains(&endpoint), "{run}");
    // Not a URL at all.
    let run = cli(&endpoint, &["list", "tools", "--endpoint", "ftp://x"]).await;
    run.expect_code(64);
    assert!(run.stderr.contains("http://"), "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_needs_a_sign_in_exits_2_and_auth_login_signs_in() {
    let idp = OidcProvider::start();
    let protected = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected(idp.issuer())
        .await;
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let config = ConfigDir::new(
        &MusterConfig::default()
            .with_aggregator(AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(&base))),
    );
    config.server(&remote("protected", &protected.url));
    let gw = GatewayProcess::start(config, port);
    let ep = gw.endpoint.as_str();
    assert_eq!(ep, format!("{base}/mcp"));

    // The server waits for a sign-in: a call, a check and the status say so.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let call = loop {
        let call = cli(ep, &["call", "x_protected_whoami"]).await;
        if call.code == 2 || tokio::time::Instant::now() > deadline {
            break call;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    call.expect_code(2);
    assert!(call.stderr.contains("gateway auth login --server protected"), "{call}");
    assert!(call.stderr.contains(&format!("{base}/oauth/proxy/start")), "{call}");
    cli(ep, &["check", "mcpserver", "protected"]).await.expect_code(2);
    let tools = cli(ep, &["list", "tools"]).await;
    assert!(
        tools.ok().stderr.contains("gateway auth login --server protected"),
        "{tools}"
    );
    for format in ["json", "yaml"] {
        let status = cli(ep, &["auth", "status", "-o", format]).await;
        let servers = status.ok().data(format)["servers"].clone();
        let protected = entry(&servers, "name", "protected");
        assert_eq!(
            (protected["kind"].clone(), protected["status"].clone()),
            (json!("grant"), json!("auth_required"))
        );
    }

    // --no-wait gives the link and ends.
    let link = cli(
        ep,
        &["auth", "login", "--server", "protected", "--no-wait", "-o", "json"],
    )
    .await;
    let url = link.ok().json()["authUrl"].as_str().expect("a link").to_owned();
    assert!(url.starts_with(&format!("{base}/oauth/proxy/start?state=")), "{url}");

    // Without --no-wait it prints the link, and ends signed in once the person used it.
    let args = ["auth", "login", "--server", "protected"];
    let mut login = command(ep, &args);
    login
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = login.spawn().expect("spawn auth login");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let link = loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the link in time")
            .expect("read")
            .expect("a line before the end");
        if let Some(link) = line.trim().strip_prefix(&format!("{base}/oauth/proxy/start")) {
            break format!("{base}/oauth/proxy/start{link}");
        }
    };
    let callback = idp.sign_in(&link, "alice").await;
    let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
    assert_eq!(page.status(), 200);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("login ends once signed in")
        .expect("wait");
    let mut rest = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        rest.push_str(&line);
        rest.push('\n');
    }
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(rest.contains("Signed in to protected."), "{rest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_behind_its_front_door_wants_a_token_and_refuses_a_bad_one() {
    let idp = OidcProvider::start();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let config = ConfigDir::new(
        &MusterConfig::default().with_aggregator(
            AggregatorConfig::default()
                .with_oauth_server(OAuthServerConfig::trusting(base.clone(), vec![idp.issuer().to_owned()])),
        ),
    );
    let gw = GatewayProcess::start(config, port);
    let ep = gw.endpoint.as_str();

    let none = cli(ep, &["list", "tools"]).await;
    none.expect_code(2);
    assert!(none.stderr.contains("--token") && none.stderr.contains(ep), "{none}");

    let bad = cli(ep, &["list", "tools", "--token", "not-a-token"]).await;
    bad.expect_code(3);
    assert!(bad.stderr.contains("refused the token"), "{bad}");

    let token = idp.token_for(ep, "dana").await;
    let mut with_token = command(ep, &["list", "tools", "-o", "json"]);
    with_token.env("MUSTER_TOKEN", &token);
    let good = cli_with(with_token, &["list", "tools", "-o", "json"]).await;
    assert!(names(&good.ok().json(), "name").contains("core_auth_status"), "{good}");
}

/// `auth login --all` and `auth logout --all` with the person's token: one command gives every
/// sign-in link and waits for each, and the sign-ins, theirs across commands, are all undone by
/// one logout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_login_all_signs_in_everywhere_and_logout_all_signs_out_everywhere() {
    let idp = OidcProvider::start();
    let mut servers = Vec::new();
    for _ in 0..2 {
        servers.push(
            ScriptedServer::builder()
                .tool("whoami", true, |_| Ok(json!("you are in")))
                .serve_protected(idp.issuer())
                .await,
        );
    }
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let config = ConfigDir::new(
        &MusterConfig::default().with_aggregator(
            AggregatorConfig::default()
                .with_mcp_client(McpClientConfig::enabled_at(&base))
                .with_oauth_server(OAuthServerConfig::trusting(base.clone(), vec![idp.issuer().to_owned()])),
        ),
    );
    config.server(&remote("alpha", &servers[0].url));
    config.server(&remote("beta", &servers[1].url));
    let gw = GatewayProcess::start(config, port);
    let ep = gw.endpoint.as_str();
    let token = idp.token_for(ep, "dana").await;
    let as_dana = |args: &[&str]| {
        let mut command = command(ep, args);
        command.env("MUSTER_TOKEN", &token);
        command
    };
    let status = |run: Run| -> Vec<(String, String)> {
        let servers = run.ok().json()["servers"].clone();
        ["alpha", "beta"]
            .iter()
            .map(|name| {
                let entry = entry(&servers, "name", name);
                (
                    name.to_string(),
                    entry["status"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };

    // Both servers wait for dana (they connect in the background: wait until they say so).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let links = loop {
        let args = ["auth", "login", "--all", "--no-wait", "-o", "json"];
        let run = cli_with(as_dana(&args), &args).await;
        let links = run.ok().json()["servers"].clone();
        if links.as_array().is_some_and(|l| l.len() == 2) || tokio::time::Instant::now() > deadline {
            break links;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(names(&links, "name"), BTreeSet::from(["alpha".into(), "beta".into()]));
    for link in links.as_array().into_iter().flatten() {
        let url = link["auth_url"].as_str().unwrap_or_default();
        assert!(url.starts_with(&format!("{base}/oauth/proxy/start?state=")), "{link}");
    }

    // One login prints both links and ends once both were used.
    let args = ["auth", "login", "--all"];
    let mut login = as_dana(&args);
    login
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = login.spawn().expect("spawn auth login --all");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut printed = Vec::new();
    while printed.len() < 2 {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the links in time")
            .expect("read")
            .expect("a line before the end");
        if let Some((name, link)) = line.trim().split_once(": ")
            && link.starts_with(&format!("{base}/oauth/proxy/start"))
        {
            printed.push((name.to_owned(), link.to_owned()));
        }
    }
    for (name, link) in &printed {
        let callback = idp.sign_in(link, "dana").await;
        let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
        assert_eq!(page.status(), 200, "signing in to {name}");
    }
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("login --all ends once both are signed in")
        .expect("wait");
    let mut rest = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        rest.push_str(&line);
        rest.push('\n');
    }
    assert_eq!(exit.code(), Some(0), "{rest}");
    assert!(rest.contains("Signed in to alpha, beta."), "{rest}");

    // The sign-ins are dana's, across commands.
    let args = ["auth", "status", "-o", "json"];
    assert_eq!(
        status(cli_with(as_dana(&args), &args).await),
        vec![
            ("alpha".into(), "connected".into()),
            ("beta".into(), "connected".into())
        ]
    );
    let call = ["call", "x_beta_whoami", "-o", "json"];
    cli_with(as_dana(&call), &call).await.ok();

    // One logout undoes both; a second finds nothing to undo.
    let args = ["auth", "logout", "--all", "-o", "json"];
    let out = cli_with(as_dana(&args), &args).await;
    assert_eq!(
        names(&out.ok().json()["servers"], "name"),
        BTreeSet::from(["alpha".into(), "beta".into()])
    );
    let args = ["auth", "status", "-o", "json"];
    assert_eq!(
        status(cli_with(as_dana(&args), &args).await),
        vec![
            ("alpha".into(), "auth_required".into()),
            ("beta".into(), "auth_required".into())
        ]
    );
    let args = ["auth", "logout", "--all"];
    let again = cli_with(as_dana(&args), &args).await;
    assert!(again.ok().stderr.contains("Not signed in to any server."), "{again}");
}

/// Contexts name gateways: the current one is used without `--endpoint`, `--context` (or
/// `MUSTER_CONTEXT`) picks another, `--endpoint` wins over both, and an unknown context is an
/// error naming the known ones, never a fall back to another gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_name_gateways_and_choose_which_one_a_command_reaches() {
    let (gw, _web) = demo_gateway().await;
    let ep = gw.endpoint.as_str();
    let home = tempfile::tempdir().expect("tempdir");
    let file = home.path().join("muster").join("contexts.yaml");
    async fn with_contexts(file: &std::path::Path, args: &[&str], extra: &[(&str, &str)]) -> Run {
        let mut command = command("", args);
        command.env_remove("MUSTER_ENDPOINT").env("MUSTER_CONTEXTS_FILE", file);
        for (k, v) in extra {
            command.env(k, v);
        }
        cli_with(command, args).await
    }
    let dead = "http://127.0.0.1:1/mcp";

    with_contexts(&file, &["context", "add", "here", "--endpoint", ep, "--use"], &[])
        .await
        .ok();
    with_contexts(&file, &["context", "add", "dead", "--endpoint", dead], &[])
        .await
        .ok();
    with_contexts(&file, &["context", "add", "here", "--endpoint", dead], &[])
        .await
        .expect_code(64);
    with_contexts(&file, &["context", "add", "bad name", "--endpoint", ep], &[])
        .await
        .expect_code(64);
    with_contexts(&file, &["context", "add", "ftp", "--endpoint", "ftp://x"], &[])
        .await
        .expect_code(64);

    let listed = with_contexts(&file, &["context", "list", "-o", "json"], &[]).await;
    let listed = listed.ok().json();
    assert_eq!(entry(&listed, "name", "here")["current"], json!(true));
    assert_eq!(entry(&listed, "name", "dead")["endpoint"], json!(dead));
    let table = with_contexts(&file, &["context", "ls"], &[]).await;
    assert!(row(table.ok(), "*").contains("here"), "{table}");

    // The current context is the gateway reached.
    let tools = with_contexts(&file, &["list", "tools", "-o", "json"], &[]).await;
    assert!(names(&tools.ok().json(), "name").contains("x_demo_echo"), "{tools}");
    // --context and MUSTER_CONTEXT choose another; --endpoint wins over both.
    let other = with_contexts(&file, &["list", "tools", "--context", "dead"], &[]).await;
    other.expect_code(1);
    assert!(other.stderr.contains("127.0.0.1:1"), "{other}");
    with_contexts(&file, &["list", "tools"], &[("MUSTER_CONTEXT", "dead")])
        .await
        .expect_code(1);
    with_contexts(&file, &["list", "tools", "--context", "dead", "--endpoint", ep], &[])
        .await
        .ok();
    let unknown = with_contexts(&file, &["list", "tools", "--context", "nope"], &[]).await;
    unknown.expect_code(64);
    assert!(unknown.stderr.contains("known: here, dead"), "{unknown}");

    // Renaming the current context keeps it current; deleting it leaves none.
    with_contexts(&file, &["context", "rename", "here", "local"], &[])
        .await
        .ok();
    let current = with_contexts(&file, &["context", "current"], &[]).await;
    assert_eq!(current.ok().stdout.trim(), "local");
    let shown = with_contexts(&file, &["context", "show", "-o", "yaml"], &[]).await;
    assert_eq!(shown.ok().data("yaml")["endpoint"], json!(ep));
    with_contexts(&file, &["context", "use", "dead"], &[]).await.ok();
    with_contexts(&file, &["list", "tools"], &[]).await.expect_code(1);
    with_contexts(&file, &["context", "delete", "dead"], &[]).await.ok();
    with_contexts(&file, &["context", "current"], &[]).await.expect_code(1);

    // A broken file is named, not overwritten.
    std::fs::write(&file, "contexts: [oops").expect("write");
    let broken = with_contexts(&file, &["context", "list"], &[]).await;
    broken.expect_code(1);
    assert!(broken.stderr.contains(&file.display().to_string()), "{broken}");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "contexts: [oops");
}

/// `gateway standalone`: the gateway and the agent bridge in one process. An MCP client on its
/// stdio finds and calls a downstream tool through the bridge; the gateway also serves its own
/// address; closing stdin ends the process, and the downstream server it started with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_serves_the_bridge_on_stdio_and_the_gateway_on_its_address() {
    use rmcp::{ServiceExt, model::CallToolRequestParams};

    let config = ConfigDir::new(&MusterConfig::default());
    config.server(&demo_stdio("demo"));
    let port = free_port();
    let mut standalone = tokio::process::Command::new(common::gateway_binary());
    standalone
        .args(["standalone", "--config-path"])
        .arg(config.path())
        .args(["--port", &port.to_string()]);
    let (mut child, (stdout, stdin)) = spawn_on_stdio(standalone);
    let client = ().serve((stdout, stdin)).await.expect("the bridge answers on stdio");

    let tools = client.list_all_tools().await.expect("tools");
    let meta: BTreeSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert!(meta.contains("call_tool") && meta.contains("filter_tools"), "{meta:?}");

    // The demo server starts in the background: call until it answers.
    let call = |name: &str, arguments: Value| {
        CallToolRequestParams::new("call_tool").with_arguments(
            json!({"name": name, "arguments": arguments})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let echoed = loop {
        let result = client
            .call_tool(call("x_demo_echo", json!({"message": "through the bridge"})))
            .await
            .expect("answered");
        if result.is_error != Some(true) || tokio::time::Instant::now() > deadline {
            break result;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(echoed.is_error, Some(false), "{echoed:?}");
    assert_eq!(
        echoed.content[0].as_text().map(|t| t.text.as_str()),
        Some("through the bridge"),
        "the bridge unwraps call_tool's envelope"
    );
    let pid = client
        .call_tool(call("x_demo_pid", json!({})))
        .await
        .expect("answered")
        .content[0]
        .as_text()
        .and_then(|t| t.text.parse::<i32>().ok())
        .expect("the demo server's pid");

    // The gateway serves its own address too.
    let ep = format!("http://127.0.0.1:{port}/mcp");
    let listed = cli(&ep, &["list", "tools", "-o", "json"]).await;
    assert!(names(&listed.ok().json(), "name").contains("x_demo_echo"), "{listed}");

    // Closing stdin ends it all.
    let _ = client.cancel().await;
    let status = tokio::time::timeout(Duration::from_secs(40), child.wait())
        .await
        .expect("standalone ends when stdin closes")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    // Reaped by init once its parent is gone: give it a moment.
    let proc_dir = format!("/proc/{pid}");
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        while std::path::Path::new(&proc_dir).exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "the demo server {pid} is stopped with the gateway");
    cli(&ep, &["list", "tools"]).await.expect_code(1);
}

/// The agent bridge relays a call's last progress report (progress = total, sent by the demo's
/// `sleep` right before its result) before the result: the bridge's client hands progress on as
/// it reads it. An IDE's SDK drops a report that comes after the result of its call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_bridge_relays_a_calls_last_progress_report() {
    use common::progress::{ProgressRecorder, each_calls_last_report_arrives};
    use rmcp::ServiceExt;

    let (gw, _web) = demo_gateway().await;
    let mut bridge = tokio::process::Command::new(common::gateway_binary());
    bridge.args(["agent", "--mcp-server", "--endpoint", &gw.endpoint]);
    let (_agent, (stdout, stdin)) = spawn_on_stdio(bridge);
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let client = ProgressRecorder(tx)
        .serve((stdout, stdin))
        .await
        .expect("the agent answers");
    each_calls_last_report_arrives(client.peer(), &mut seen, "x_demo_sleep", 25).await;
    let _ = client.cancel().await;
}

/// The same for log lines: the bridge hands each one to the IDE as it reads it, before the
/// result behind it (its rmcp handler ran in a task of its own and could come after).
#[tokio::test]
async fn the_agent_bridge_relays_a_calls_last_log_line() {
    use common::progress::{LogRecorder, conformance_fixture, each_calls_last_log_line_arrives};
    use rmcp::ServiceExt;

    let config = ConfigDir::new(&MusterConfig::default());
    config.server(&conformance_fixture("fixture"));
    let gw = GatewayProcess::start(config, 0);
    wait_ready(&gw, &["fixture"]).await;
    let mut bridge = tokio::process::Command::new(common::gateway_binary());
    bridge.args(["agent", "--mcp-server", "--endpoint", &gw.endpoint]);
    let (_agent, (stdout, stdin)) = spawn_on_stdio(bridge);
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let client = LogRecorder(tx).serve((stdout, stdin)).await.expect("the agent answers");
    each_calls_last_log_line_arrives(client.peer(), &mut seen, "x_fixture_test_tool_with_logging", 15).await;
    let _ = client.cancel().await;
}
