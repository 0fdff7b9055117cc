//! The harness of the client command tests: a muster config directory, the real `gateway serve`
//! binary serving it on a loopback port, and `gateway <command>` runs against it with their exit
//! code, stdout and stderr.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use muster::core::{config::MusterConfig, crd::MCPServer};
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{gateway_binary, gateway_process::GatewayChild};

/// How long a gateway may take to serve, and its servers to connect.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one client command may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// A muster config directory in a temporary folder.
pub(crate) struct ConfigDir {
    dir: TempDir,
}

impl ConfigDir {
    /// A directory whose `config.yaml` is `config`.
    pub(crate) fn new(config: &MusterConfig) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for sub in ["mcpservers", "workflows"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("create a config subdirectory");
        }
        let yaml = serde_saphyr::to_string(config).expect("config as YAML");
        std::fs::write(dir.path().join("config.yaml"), yaml).expect("write config.yaml");
        Self { dir }
    }

    /// Adds the MCP server definition `server`.
    pub(crate) fn server(&self, server: &MCPServer) {
        let yaml = serde_saphyr::to_string(server).expect("MCPServer as YAML");
        let file = format!("{}.yaml", server.metadata.name);
        std::fs::write(self.dir.path().join("mcpservers").join(file), yaml).expect("write the MCPServer");
    }

    /// Adds workflow file `name`.yaml with `yaml` in it.
    pub(crate) fn workflow(&self, name: &str, yaml: &str) {
        std::fs::write(self.dir.path().join("workflows").join(format!("{name}.yaml")), yaml)
            .expect("write the workflow");
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A free loopback port (free a moment ago).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `gateway serve` in a child process; killed on drop.
pub(crate) struct GatewayProcess {
    process: GatewayChild,
    /// `http://127.0.0.1:<port>/mcp`.
    pub(crate) endpoint: String,
    _config: ConfigDir,
}

impl GatewayProcess {
    /// Serves `config` on loopback port `port` (0: any), once it says where.
    pub(crate) fn start(config: ConfigDir, port: u16) -> Self {
        let mut command = Command::new(gateway_binary());
        command
            .arg("serve")
            .arg("--config-path")
            .arg(config.path())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1");
        let process = GatewayChild::spawn(command);
        let endpoint = process.endpoint(START_TIMEOUT);
        Self {
            process,
            endpoint,
            _config: config,
        }
    }

    /// What the gateway logged so far.
    pub(crate) fn log(&self) -> String {
        self.process.log()
    }
}

/// One finished `gateway` client command.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) args: Vec<String>,
    /// The exit code (-1 when killed by a signal).
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// Asserts it exited `code`.
    #[track_caller]
    pub(crate) fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "gateway {:?} exited {}, not {code}\n{self}",
            self.args, self.code
        );
        self
    }

    /// Asserts it exited 0.
    #[track_caller]
    pub(crate) fn ok(&self) -> &Self {
        self.expect_code(0)
    }

    /// Its stdout parsed as JSON.
    #[track_caller]
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e})\n{self}"))
    }

    /// Its stdout parsed as YAML.
    #[track_caller]
    pub(crate) fn yaml(&self) -> Value {
        serde_saphyr::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not YAML ({e})\n{self}"))
    }

    /// Its stdout parsed as `format` (json or yaml).
    #[track_caller]
    pub(crate) fn data(&self, format: &str) -> Value {
        match format {
            "json" => self.json(),
            "yaml" => self.yaml(),
            other => panic!("{other} is not a data format"),
        }
    }

    /// The lines of its stdout.
    pub(crate) fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--- stdout\n{}--- stderr\n{}---", self.stdout, self.stderr)
    }
}

/// A `gateway` command line for `endpoint` (through `MUSTER_ENDPOINT`), with a clean
/// environment for the things the CLI reads.
pub(crate) fn command(endpoint: &str, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(gateway_binary());
    command
        .args(args)
        .env("MUSTER_ENDPOINT", endpoint)
        .env_remove("MUSTER_TOKEN")
        .env_remove("MUSTER_CONTEXT")
        .env_remove("COLUMNS")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs `gateway <args>` against `endpoint` to the end.
pub(crate) async fn cli(endpoint: &str, args: &[&str]) -> Run {
    cli_with(command(endpoint, args), args).await
}

/// Runs `command` (made by [`command`] with `args`) to the end.
pub(crate) async fn cli_with(mut command: tokio::process::Command, args: &[&str]) -> Run {
    let output = tokio::time::timeout(RUN_TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| panic!("gateway {args:?} did not finish within {RUN_TIMEOUT:?}"))
        .expect("run gateway");
    Run {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Waits until `gateway check mcpserver <name>` passes for every server of `names`.
pub(crate) async fn wait_ready(gateway: &GatewayProcess, names: &[&str]) {
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    for name in names {
        loop {
            let run = cli(&gateway.endpoint, &["check", "mcpserver", name]).await;
            if run.code == 0 {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "MCP server {name} never got ready\n{run}\ngateway log:\n{}",
                    gateway.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
