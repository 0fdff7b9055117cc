//! The processes a matrix run starts: the echo server over streamable HTTP, and the reference
//! gateway on a temporary config directory whose `mcpservers/` holds the echo server (over
//! streamable HTTP or stdio). Everything binds 127.0.0.1; every process is killed on drop.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{
    BoxError,
    load::{self, Session, object},
    procfs,
};

/// The binaries a matrix run starts (siblings of this example's own binary).
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    /// `examples/gateway`.
    pub(crate) gateway: PathBuf,
    /// `examples/echo_server`.
    pub(crate) echo: PathBuf,
}

impl Binaries {
    /// The binaries next to this one; builds them first unless `build` is false.
    pub(crate) fn locate(build: bool) -> Result<Self, BoxError> {
        if build {
            build_examples()?;
        }
        let exe = std::env::current_exe()?;
        let dir = exe.parent().ok_or("the load generator's binary has no directory")?;
        let found = Self {
            gateway: dir.join("gateway"),
            echo: dir.join("echo_server"),
        };
        for bin in [&found.gateway, &found.echo] {
            if !bin.exists() {
                return Err(format!(
                    "{} is missing: build it (cargo build --release --example gateway --example echo_server)",
                    bin.display()
                )
                .into());
            }
        }
        Ok(found)
    }
}

/// `cargo build [--release] --example gateway --example echo_server`, in this profile, so a
/// stale gateway is never measured.
fn build_examples() -> Result<(), BoxError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "build",
        "--quiet",
        "--example",
        "gateway",
        "--example",
        "echo_server",
    ]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let status = cmd.status()?;
    if !status.success() {
        return Err(format!("building the gateway and echo_server examples failed: {status}").into());
    }
    Ok(())
}

/// A child process, killed on drop.
#[derive(Debug)]
pub(crate) struct Proc {
    child: Child,
    /// Its pid.
    pub(crate) pid: u32,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Result<Self, BoxError> {
        let child = cmd.kill_on_drop(true).spawn()?;
        let pid = child.id().ok_or("the child exited at once")?;
        Ok(Self { child, pid })
    }

    /// `VmRSS` in KiB.
    pub(crate) fn rss_kib(&self) -> Option<u64> {
        procfs::rss_kib(self.pid)
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// Sends SIGTERM and waits up to `grace` for the process to exit (then kills it): its exit
    /// status, `None` if it had to be killed.
    pub(crate) async fn terminate(mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if sent && let Ok(Ok(status)) = tokio::time::timeout(grace, self.child.wait()).await {
            return Some(status);
        }
        self.stop().await;
        None
    }
}

/// The echo server over streamable HTTP on a loopback port.
#[derive(Debug)]
pub(crate) struct EchoHttp {
    /// The process.
    pub(crate) proc: Proc,
    /// Its MCP endpoint.
    pub(crate) url: String,
}

impl EchoHttp {
    /// Starts `echo_server --http 127.0.0.1:0` and reads the URL it prints.
    pub(crate) async fn start(bins: &Binaries) -> Result<Self, BoxError> {
        Self::start_on(bins, "127.0.0.1:0").await
    }

    /// Starts `echo_server --http ADDR` (a fixed port: a restarted server comes back at the same
    /// URL) and reads the URL it prints.
    pub(crate) async fn start_on(bins: &Binaries, addr: &str) -> Result<Self, BoxError> {
        let mut cmd = Command::new(&bins.echo);
        cmd.args(["--http", addr])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut proc = Proc::spawn(cmd)?;
        let stdout = proc.child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(10), BufReader::new(stdout).read_line(&mut line)).await??;
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("unexpected first line of the echo server: {line:?}"))?
            .to_owned();
        Ok(Self { proc, url })
    }
}

/// A downstream server in the gateway's config directory.
#[derive(Debug, Clone)]
pub(crate) enum Downstream {
    /// Over streamable HTTP at this URL.
    Http(String),
    /// The echo server over stdio with `--tools tools --seed seed` (and `--distinct-schemas`).
    Stdio {
        /// How many tools it exposes.
        tools: usize,
        /// The seed of its synthetic tools.
        seed: u64,
        /// Whether each synthetic tool has a schema of its own.
        distinct_schemas: bool,
    },
    /// The reference gateway's demo server (`gateway demo-server`) over stdio, always named
    /// `demo`.
    Demo,
}

/// The tools of the demo server (`examples/gateway/demo.rs`).
const DEMO_TOOLS: usize = 6;

/// How the reference gateway (`examples/gateway serve`) is configured.
#[derive(Debug, Clone)]
pub(crate) struct GatewaySpec {
    /// The downstream servers, named `echo` (one) or `echo<i>` (several).
    pub(crate) servers: Vec<Downstream>,
    /// `aggregator.exposure: both` (the aggregated tools callable directly too).
    pub(crate) native: bool,
}

impl GatewaySpec {
    /// One downstream server, `echo`.
    pub(crate) fn one(server: Downstream, native: bool) -> Self {
        Self {
            servers: vec![server],
            native,
        }
    }

    /// The name of downstream server `i`.
    pub(crate) fn server_name(&self, i: usize) -> String {
        if matches!(self.servers.get(i), Some(Downstream::Demo)) {
            "demo".to_owned()
        } else if self.servers.len() == 1 {
            "echo".to_owned()
        } else {
            format!("echo{i}")
        }
    }

    /// The aggregated tools the catalogue holds once every server is in.
    fn expected_tools(&self) -> usize {
        self.servers
            .iter()
            .map(|s| match s {
                Downstream::Http(_) => 1,
                Downstream::Stdio { tools, .. } => (*tools).max(1),
                Downstream::Demo => DEMO_TOOLS,
            })
            .sum()
    }
}

/// The reference gateway on a temporary config directory.
#[derive(Debug)]
pub(crate) struct GatewayProc {
    /// The gateway process.
    pub(crate) proc: Proc,
    /// Its MCP endpoint.
    pub(crate) url: String,
    /// `GET /health`.
    health: String,
    /// When the process was spawned.
    pub(crate) spawned: Instant,
    spec: GatewaySpec,
    /// The config directory (and the gateway's log, `gateway.log`); removed on drop.
    dir: tempfile::TempDir,
}

/// A free loopback port (bound and released: another process could take it in between, which
/// does not happen on a benchmark machine in practice).
pub(crate) fn free_port() -> Result<u16, BoxError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A YAML scalar for `s` (a JSON string is valid YAML).
fn yaml_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// Writes `config.yaml` and `mcpservers/*.yaml` for `spec` into `dir`.
fn write_config(dir: &Path, port: u16, spec: &GatewaySpec, bins: &Binaries) -> Result<(), BoxError> {
    let exposure = if spec.native { "  exposure: both\n" } else { "" };
    std::fs::write(
        dir.join("config.yaml"),
        format!("aggregator:\n  host: localhost\n  port: {port}\n  musterPrefix: x\n{exposure}"),
    )?;
    let servers = dir.join("mcpservers");
    std::fs::create_dir_all(&servers)?;
    for (i, server) in spec.servers.iter().enumerate() {
        let name = spec.server_name(i);
        let mut doc =
            format!("apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: {name}\nspec:\n");
        match server {
            Downstream::Http(url) => {
                writeln!(doc, "  type: streamable-http\n  url: {}\n  timeout: 30", yaml_str(url))?;
            }
            Downstream::Stdio {
                tools,
                seed,
                distinct_schemas,
            } => {
                let command = bins.echo.display().to_string();
                let distinct = if *distinct_schemas {
                    ", \"--distinct-schemas\""
                } else {
                    ""
                };
                writeln!(
                    doc,
                    "  type: stdio\n  autoStart: true\n  command: {}\n  args: [\"--tools\", \"{tools}\", \"--seed\", \"{seed}\"{distinct}]\n  timeout: 60",
                    yaml_str(&command)
                )?;
            }
            Downstream::Demo => {
                let command = bins.gateway.display().to_string();
                writeln!(
                    doc,
                    "  type: stdio\n  autoStart: true\n  command: {}\n  args: [\"demo-server\"]\n  timeout: 60",
                    yaml_str(&command)
                )?;
            }
        }
        std::fs::write(servers.join(format!("{name}.yaml")), doc)?;
    }
    Ok(())
}

impl GatewayProc {
    /// Writes the config directory and starts `gateway serve` on it (not waiting for readiness).
    pub(crate) fn start(bins: &Binaries, spec: GatewaySpec) -> Result<Self, BoxError> {
        Self::start_with_env(bins, spec, &[])
    }

    /// The same, with these environment variables set for the gateway.
    pub(crate) fn start_with_env(
        bins: &Binaries,
        spec: GatewaySpec,
        env: &[(String, String)],
    ) -> Result<Self, BoxError> {
        let dir = tempfile::Builder::new().prefix("muster-loadgen-").tempdir()?;
        let port = free_port()?;
        write_config(dir.path(), port, &spec, bins)?;
        let log = std::fs::File::create(dir.path().join("gateway.log"))?;
        let mut cmd = Command::new(&bins.gateway);
        cmd.args(["serve", "--host", "127.0.0.1"])
            .arg("--config-path")
            .arg(dir.path())
            .args(["--port", &port.to_string()])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let spawned = Instant::now();
        let proc = Proc::spawn(cmd)?;
        Ok(Self {
            proc,
            url: format!("http://127.0.0.1:{port}/mcp"),
            health: format!("http://127.0.0.1:{port}/health"),
            spawned,
            spec,
            dir,
        })
    }

    /// Waits until `GET /health` reports every server ready and `filter_tools {pattern: "x_*"}`
    /// counts every aggregated tool; answers the time from spawn to then.
    pub(crate) async fn wait_ready(&self, http: &reqwest::Client, timeout: Duration) -> Result<Duration, BoxError> {
        let servers = self.spec.servers.len() as u64;
        let tools = self.spec.expected_tools() as u64;
        let deadline = self.spawned + timeout;
        let mut session: Option<Session> = None;
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            if let Some(ready) = self.health_ready(http, servers).await {
                if ready {
                    if session.is_none() {
                        session = load::connect(http, &self.url).await.ok();
                    }
                    if let Some(s) = &session {
                        match count_tools(s, "x_*").await {
                            Ok(n) if n >= tools => {
                                let elapsed = self.spawned.elapsed();
                                if let Some(s) = session {
                                    let _ = s.cancel().await;
                                }
                                return Ok(elapsed);
                            }
                            Ok(n) => last = format!("{n} of {tools} tools"),
                            Err(e) => last = e.to_string(),
                        }
                    }
                } else {
                    last = "servers not ready".to_owned();
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!(
            "the gateway was not ready after {timeout:?} ({last}); its log: {}",
            self.dir.path().join("gateway.log").display()
        )
        .into())
    }

    /// `Some(true)` when `/health` reports `servers` servers, all ready.
    async fn health_ready(&self, http: &reqwest::Client, servers: u64) -> Option<bool> {
        let body = http.get(&self.health).send().await.ok()?.bytes().await.ok()?;
        let health: Value = serde_json::from_slice(&body).ok()?;
        let total = health["servers"]["total"].as_u64()?;
        let ready = health["servers"]["ready"].as_u64()?;
        Some(total == servers && ready == servers)
    }

    /// The gateway's log (its stderr), in the config directory.
    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.path().join("gateway.log")
    }

    /// The pids of the gateway's stdio downstream servers.
    pub(crate) fn downstream_pids(&self) -> Vec<u32> {
        procfs::children(self.proc.pid)
    }

    /// Stops the gateway (its stdio servers see their stdin close and exit).
    pub(crate) async fn stop(self) {
        self.proc.stop().await;
    }

    /// Stops the gateway with SIGTERM (its graceful shutdown), killing it after `grace`: its
    /// exit status, `None` if it had to be killed.
    pub(crate) async fn terminate(self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.proc.terminate(grace).await
    }
}

/// How many tools `filter_tools {pattern}` matches.
pub(crate) async fn count_tools(session: &Session, pattern: &str) -> Result<u64, BoxError> {
    let page = meta_json(
        session,
        "filter_tools",
        serde_json::json!({"pattern": pattern, "limit": 1}),
    )
    .await?;
    page["total"]
        .as_u64()
        .ok_or_else(|| format!("no total in {page}").into())
}

/// Calls meta-tool `name` and parses its text as JSON.
pub(crate) async fn meta_json(session: &Session, name: &str, args: Value) -> Result<Value, BoxError> {
    let result = session
        .call_tool(rmcp::model::CallToolRequestParams::new(name.to_owned()).with_arguments(object(args)))
        .await?;
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str())
        .unwrap_or_default();
    if result.is_error == Some(true) {
        return Err(format!("{name} answered an error: {text}").into());
    }
    Ok(serde_json::from_str(text)?)
}
