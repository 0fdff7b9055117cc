//! The first run, as a newcomer makes it with the installed `gateway` binary: the real binary,
//! started from a directory that is not this checkout, with a home of its own (`HOME`,
//! `XDG_CONFIG_HOME`, `XDG_DATA_HOME`), driven by its own client commands.
//!
//! - Without a config directory it serves the built-in default (the demo server, started as the
//!   gateway executable itself, and the `demo-tour` workflow), says so, creates nothing where a
//!   config directory would be read, and keeps events and run records in the XDG data directory.
//! - `XDG_CONFIG_HOME/muster` is the config directory when it holds definitions.
//! - The example configuration copied anywhere starts its demo server from any working directory.
//! - A stdio server that fails to start says why at the default log level.
//! - Command-line mistakes exit 64; a name clash and a missing config directory are sentences.

mod common;
#[path = "cli/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use common::{gateway_binary, gateway_process::GatewayChild};
use harness::{Run, cli, cli_with, command};
use serde_json::Value;
use tempfile::TempDir;

/// How long a gateway may take to say where it serves.
const START: Duration = Duration::from_secs(60);

/// A home of its own and a working directory outside the checkout.
struct Home {
    home: TempDir,
    cwd: TempDir,
}

impl Home {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().expect("a home"),
            cwd: tempfile::tempdir().expect("a working directory"),
        }
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    /// `gateway <args>` with this home (XDG variables unset unless `env` sets them) in `cwd`.
    fn command(&self, args: &[&str], env: &[(&str, &Path)]) -> Command {
        let mut command = Command::new(gateway_binary());
        command
            .args(args)
            .current_dir(self.cwd.path())
            .env("HOME", self.home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("MUSTER_CONFIG_PATH")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .env("MUSTER_CONTEXTS_FILE", self.home.path().join("no-contexts.yaml"));
        for (key, value) in env {
            command.env(key, value);
        }
        command
    }
}

/// `gateway serve` (at its default log level) until dropped.
struct Served {
    gateway: GatewayChild,
    endpoint: String,
}

impl Served {
    fn start(command: Command) -> Self {
        let gateway = GatewayChild::spawn(command);
        let endpoint = gateway.endpoint(START);
        Self { gateway, endpoint }
    }

    fn log(&self) -> String {
        self.gateway.log()
    }

    /// Waits until the log holds `text`.
    async fn log_shows(&self, text: &str) -> String {
        self.gateway.log_shows(text, START).await
    }
}

/// `gateway call <tool> <args>` against `served`, retried while the demo server connects.
async fn call_when_ready(served: &Served, args: &[&str]) -> Run {
    let deadline = tokio::time::Instant::now() + START;
    loop {
        let run = cli(&served.endpoint, args).await;
        if run.code == 0 || tokio::time::Instant::now() > deadline {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The files under `dir`, relative to it, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    found.sort();
    found
}

const SERVE: [&str; 5] = ["serve", "--host", "127.0.0.1", "--port", "0"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_config_directory_the_built_in_default_serves_the_demo_and_writes_under_xdg_data() {
    let home = Home::new();
    let served = Served::start(home.command(&SERVE, &[]));
    let config_home = home.path().join(".config/muster");
    let log = served.log_shows("built-in default").await;
    assert!(
        log.contains(&format!("no config directory at {}", config_home.display())),
        "the log names where a config directory would be read:\n{log}"
    );

    let echo = call_when_ready(&served, &["call", "x_demo_echo", "--arg", "message=first run"]).await;
    assert_eq!(echo.ok().stdout.trim(), "first run", "{echo}");
    let tour = cli(
        &served.endpoint,
        &["call", "workflow_demo-tour", "--arg", "who=newcomer", "-o", "json"],
    )
    .await;
    let tour = tour.ok().json();
    let answer: Value = serde_json::from_str(tour["content"][0]["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(answer["greeting"], "hello newcomer");
    assert_eq!(answer["count"], 5);
    drop(served);

    assert!(
        !config_home.exists(),
        "nothing is created where definitions would be read"
    );
    assert_eq!(
        files_under(home.cwd.path()),
        Vec::<PathBuf>::new(),
        "nothing in the working directory"
    );
    let data = files_under(&home.path().join(".local/share/muster"));
    assert!(
        data.iter()
            .any(|f| f.starts_with("workflow_executions") && f.extension().is_some_and(|x| x == "yaml")),
        "{data:?}"
    );
    assert!(data.iter().any(|f| f.starts_with("events")), "{data:?}");

    // XDG_DATA_HOME, when set, is the data directory's parent.
    let elsewhere = tempfile::tempdir().expect("a data home");
    let served = Served::start(home.command(&SERVE, &[("XDG_DATA_HOME", elsewhere.path())]));
    let log = served.log_shows("built-in default").await;
    assert!(
        log.contains(&elsewhere.path().join("muster").display().to_string()),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_directory_under_xdg_config_home_is_served_when_it_holds_definitions() {
    let home = Home::new();
    let xdg = tempfile::tempdir().expect("a config home");
    let dir = xdg.path().join("muster");
    std::fs::create_dir_all(dir.join("mcpservers")).expect("mcpservers/");
    let demo = std::fs::read_to_string("examples/config/mcpservers/demo.yaml").expect("the example demo server");
    std::fs::write(
        dir.join("mcpservers/other.yaml"),
        demo.replace("name: demo", "name: other"),
    )
    .expect("write");
    // contexts.yaml alone does not make ~/.config/muster a config directory.
    std::fs::create_dir_all(home.path().join(".config/muster")).expect("~/.config/muster");
    std::fs::write(home.path().join(".config/muster/contexts.yaml"), "contexts: []\n").expect("write");

    let served = Served::start(home.command(&SERVE, &[("XDG_CONFIG_HOME", xdg.path())]));
    let echo = call_when_ready(&served, &["call", "x_other_echo", "--arg", "message=xdg"]).await;
    assert_eq!(echo.ok().stdout.trim(), "xdg", "{echo}");
    assert!(
        served.log().contains(&format!("config={}", dir.display())),
        "{}",
        served.log()
    );
    drop(served);

    // Without XDG_CONFIG_HOME, ~/.config/muster holds only contexts: the built-in default.
    let served = Served::start(home.command(&SERVE, &[]));
    served.log_shows("built-in default").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_config_copied_anywhere_starts_its_demo_server_from_another_directory() {
    let home = Home::new();
    let copy = tempfile::tempdir().expect("a copy");
    for sub in ["", "mcpservers", "workflows"] {
        let from = Path::new("examples/config").join(sub);
        std::fs::create_dir_all(copy.path().join(sub)).expect("mkdir");
        for entry in std::fs::read_dir(&from).expect("examples/config").flatten() {
            if entry.path().is_file() {
                std::fs::copy(entry.path(), copy.path().join(sub).join(entry.file_name())).expect("copy");
            }
        }
    }
    let path = copy.path().display().to_string();
    let mut args = SERVE.to_vec();
    args.extend(["--config-path", &path]);
    let served = Served::start(home.command(&args, &[]));
    let sum = call_when_ready(
        &served,
        &["call", "x_demo_add", "--arg", "a=40", "--arg", "b=2", "-o", "json"],
    )
    .await;
    assert_eq!(sum.ok().json()["structuredContent"]["sum"], 42.0, "{sum}");
    let check = cli(&served.endpoint, &["check", "mcpserver", "demo"]).await;
    check.ok();
    // The runs of an explicit config directory are kept beside its definitions.
    cli(&served.endpoint, &["call", "workflow_demo-tour", "--arg", "who=copy"])
        .await
        .ok();
    assert!(copy.path().join("workflow_executions").is_dir());
    assert_eq!(files_under(home.cwd.path()), Vec::<PathBuf>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_that_fails_to_start_says_why_at_the_default_log_level() {
    let home = Home::new();
    let dir = tempfile::tempdir().expect("a config directory");
    std::fs::create_dir_all(dir.path().join("mcpservers")).expect("mcpservers/");
    std::fs::write(
        dir.path().join("mcpservers/broken.yaml"),
        r#"apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: broken
spec:
  type: stdio
  autoStart: true
  command: sh
  args: ["-c", "echo starting >&2; echo 'cannot read /nowhere/settings.toml' >&2; exit 7"]
"#,
    )
    .expect("write");
    let path = dir.path().display().to_string();
    let mut args = SERVE.to_vec();
    args.extend(["--config-path", &path]);
    let served = Served::start(home.command(&args, &[]));
    let log = served.log_shows("connection attempt failed").await;
    let line = log
        .lines()
        .find(|l| l.contains("connection attempt failed"))
        .expect("the line");
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("exit status: 7"), "{line}");
    assert!(
        line.contains("starting | cannot read /nowhere/settings.toml"),
        "the last stderr lines, in order: {line}"
    );
    // The server's status says the same.
    let got = cli(&served.endpoint, &["get", "mcpserver", "broken", "-o", "json"]).await;
    let got = got.ok().json();
    let status = got.to_string();
    assert!(
        status.contains("exit status: 7") && status.contains("settings.toml"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_line_mistakes_exit_64_and_start_up_errors_are_sentences() {
    let home = Home::new();
    let endpoint = "http://127.0.0.1:1/mcp";
    let nosuch = cli(endpoint, &["list", "nosuch"]).await;
    nosuch.expect_code(64);
    assert!(nosuch.stderr.contains("nosuch"), "{nosuch}");
    let login = cli(endpoint, &["auth", "login"]).await;
    login.expect_code(64);
    assert!(login.stderr.contains("--server"), "{login}");
    cli(endpoint, &["frobnicate"]).await.expect_code(64);
    cli(endpoint, &["serve", "--port", "notaport"]).await.expect_code(64);
    cli(endpoint, &["agent"]).await.expect_code(64);
    cli(endpoint, &["--help"]).await.ok();
    cli(endpoint, &["--version"]).await.ok();
    // A sign-in needed still exits 2: see tests/cli.rs
    // (a_server_that_needs_a_sign_in_exits_2_and_auth_login_signs_in,
    // a_gateway_behind_its_front_door_wants_a_token_and_refuses_a_bad_one).

    // A config directory that is not there is named, not served empty.
    let missing = home.path().join("nowhere");
    let missing_arg = missing.display().to_string();
    let mut serve = command(endpoint, &["serve", "--config-path", &missing_arg]);
    serve.env("HOME", home.path());
    let run = cli_with(serve, &["serve"]).await;
    run.expect_code(1);
    assert!(run.stderr.contains(&format!("{missing_arg} does not exist")), "{run}");
    assert!(!missing.exists());

    // Two servers exposing the same names with prefixMode: never: one sentence per clash.
    let dir = tempfile::tempdir().expect("a config directory");
    std::fs::create_dir_all(dir.path().join("mcpservers")).expect("mcpservers/");
    std::fs::write(dir.path().join("config.yaml"), "aggregator:\n  prefixMode: never\n").expect("write");
    let demo = std::fs::read_to_string("examples/config/mcpservers/demo.yaml").expect("the demo server");
    for name in ["alpha", "beta"] {
        std::fs::write(
            dir.path().join(format!("mcpservers/{name}.yaml")),
            demo.replace("name: demo", &format!("name: {name}")),
        )
        .expect("write");
    }
    let path = dir.path().display().to_string();
    let run = cli_with(
        command(endpoint, &["serve", "--config-path", &path, "--port", "0"]),
        &["serve"],
    )
    .await;
    run.expect_code(1);
    assert!(
        run.stderr
            .contains(r#"The tool name "echo" is exposed by both MCPServer "alpha" and MCPServer "beta"."#),
        "{run}"
    );
    assert!(run.stderr.contains("set aggregator.prefixMode: always"), "{run}");
    assert!(!run.stderr.contains("NameCollisions"), "no debug dump: {run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ide_starting_gateway_standalone_anywhere_gets_the_demo_through_the_bridge() {
    use rmcp::{ServiceExt, model::CallToolRequestParams};

    // As an IDE starts it: {"command": "gateway", "args": ["standalone"]}, from its own directory.
    let home = Home::new();
    let mut standalone = tokio::process::Command::from(home.command(&["standalone", "--port", "0"], &[]));
    let mut child = standalone
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn gateway standalone");
    let io = (child.stdout.take().expect("stdout"), child.stdin.take().expect("stdin"));
    let client = ().serve(io).await.expect("the bridge answers on stdio");
    let arguments = serde_json::json!({"name": "x_demo_echo", "arguments": {"message": "from the IDE"}});
    let call =
        CallToolRequestParams::new("call_tool").with_arguments(arguments.as_object().cloned().unwrap_or_default());
    let deadline = tokio::time::Instant::now() + START;
    let echoed = loop {
        let result = client.call_tool(call.clone()).await.expect("answered");
        if result.is_error != Some(true) || tokio::time::Instant::now() > deadline {
            break result;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        echoed
            .content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.as_str()),
        Some("from the IDE"),
        "{echoed:?}"
    );
    let _ = client.cancel().await;
    let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    assert_eq!(files_under(home.cwd.path()), Vec::<PathBuf>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_prefix_mode_never_the_demo_workflow_says_which_tools_it_misses() {
    let home = Home::new();
    let dir = tempfile::tempdir().expect("a config directory");
    for sub in ["mcpservers", "workflows"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
    }
    std::fs::copy(
        "examples/config/mcpservers/demo.yaml",
        dir.path().join("mcpservers/demo.yaml"),
    )
    .expect("copy");
    std::fs::copy(
        "examples/config/workflows/demo-tour.yaml",
        dir.path().join("workflows/demo-tour.yaml"),
    )
    .expect("copy");
    std::fs::write(dir.path().join("config.yaml"), "aggregator:\n  prefixMode: never\n").expect("write");
    let path = dir.path().display().to_string();
    let mut args = SERVE.to_vec();
    args.extend(["--config-path", &path]);
    let served = Served::start(home.command(&args, &[]));
    let echo = call_when_ready(&served, &["call", "echo", "--arg", "message=unprefixed"]).await;
    assert_eq!(echo.ok().stdout.trim(), "unprefixed");
    let workflow = cli(&served.endpoint, &["get", "workflow", "demo-tour", "-o", "json"]).await;
    let workflow = workflow.ok().json();
    assert_eq!(workflow["available"], false, "{workflow}");
    assert_eq!(
        workflow["missing_tools"],
        serde_json::json!(["x_demo_add", "x_demo_echo", "x_demo_list_items"]),
        "{workflow}"
    );
}
