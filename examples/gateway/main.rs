//! The reference muster gateway.
//!
//! ```text
//! gateway serve [--config-path DIR] [--host HOST] [--port PORT] [--log-format text|json] [--debug|--silent]
//! gateway standalone [--config-path DIR] [--host HOST] [--port PORT] [--timeout 5m]
//! gateway demo-server [--http ADDR]
//! gateway agent --mcp-server [--endpoint URL] [--timeout 5m] [--log-format text|json] [--debug|--silent]
//! gateway list|get|call|check|events|auth ... [--endpoint URL | --context NAME] [-o table|wide|json|yaml]
//! gateway context <list|current|use|add|update|rename|delete|show>
//! gateway completions <bash|zsh|fish|elvish|powershell>
//! ```
//!
//! `serve` loads the muster config directory (`--config-path`, else `$XDG_CONFIG_HOME/muster` or
//! `~/.config/muster` when it holds definitions, else the built-in default: the demo server and
//! the `demo-tour` workflow; see `config_source.rs`), connects the downstream servers and serves
//! the 13 meta-tools over streamable HTTP at `http://HOST:PORT/mcp`, with `GET /health`. It binds
//! 127.0.0.1:8090 unless told otherwise. A file that does not load is reported and left out; the
//! gateway still starts.
//!
//! Logs go to stderr: as text lines by default, as one JSON object per line with
//! `--log-format json` (each with the fields of its spans: the MCP request's method, session,
//! tool and outcome, the tool call's server and kind). `serve` logs at `info`, `--debug` at
//! `debug` (downstream servers' stderr included), `--silent` errors only; `RUST_LOG`, when set,
//! wins over both. Secrets (bearer tokens, `Authorization` and other configured headers, client
//! secrets) are never logged, at any level. Built with the `otel` feature and with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the spans are
//! also exported as OpenTelemetry traces over OTLP/HTTP. `GET /metrics` serves the Prometheus
//! metrics.
//!
//! `standalone` is `serve` and `agent --mcp-server` in one process, for an IDE that starts its
//! MCP servers itself: the gateway serves on its address, the bridge to it on stdio, and closing
//! stdin shuts both down.
//!
//! `demo-server` is the small demo MCP server the example configuration aggregates: over stdio by
//! default, or over streamable HTTP with `--http 127.0.0.1:0` (it prints the URL it serves).
//!
//! `agent --mcp-server` is the bridge for IDEs: a stdio MCP server whose tools are the
//! meta-tools of a running gateway (`--endpoint` or `MUSTER_ENDPOINT`, else the endpoint of
//! `--context` or of the current context, else `http://127.0.0.1:8090/mcp`), with `call_tool` results unwrapped and bounded by `--timeout`
//! or the call's own `timeout` argument (see `agent.rs`).
//!
//! `list`, `get`, `call`, `check`, `events` and `auth` are the client commands: they talk to a
//! running gateway at `--endpoint` (or `MUSTER_ENDPOINT`) through its meta-tools and print the
//! answer as a table, JSON or YAML; the exit code is 0 when done, 1 on an error, 2 when a
//! sign-in is needed and 3 when one failed (see `cli/`). A command-line mistake (an unknown
//! command or flag, a missing argument) exits 64 (`EX_USAGE`), for every command. `context` names the gateways one uses
//! (`cli/context.rs`). `completions` prints a shell's completion script.

mod agent;
mod cli;
mod config_source;
mod connect;
mod demo;
mod kubernetes;
mod log_fields;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use muster::gateway::{Gateway, supervisor::SupervisorConfig};
use tracing_subscriber::{EnvFilter, Layer};

const MAIN_HELP: &str = "Examples:
  gateway serve
  gateway serve --config-path examples/config
  gateway list tools
  gateway call x_demo_echo --arg message=hello
  gateway events -f

The client commands (list, get, call, check, events, auth) talk to a running gateway at --endpoint
or MUSTER_ENDPOINT, else the current context's (gateway context), else http://127.0.0.1:8090/mcp. Exit codes: 0 ok, 1 error, 2 a sign-in is
needed, 3 a sign-in failed, 64 a command-line mistake.";

#[derive(Debug, Parser)]
#[command(name = "gateway", version, about = "The reference muster gateway", after_help = MAIN_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the gateway from a muster config directory.
    #[command(
        after_help = "Examples:\n  gateway serve\n  gateway serve --config-path examples/config\n  gateway serve --port 9000 --debug\n  \
                      gateway serve --log-format json --silent\n\n\
                      Without --config-path: $XDG_CONFIG_HOME/muster (else ~/.config/muster) when it holds config.yaml, \
                      mcpservers/ or workflows/, else the built-in default (the demo server and the demo-tour workflow, \
                      events and workflow runs under $XDG_DATA_HOME/muster, else ~/.local/share/muster).\n\n\
                      Metrics: GET http://HOST:PORT/metrics (Prometheus text)."
    )]
    Serve {
        #[command(flatten)]
        bind: BindArgs,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Serve the gateway and, on stdio, the agent bridge to it: one process for an IDE.
    #[command(
        after_help = "Examples:\n  gateway standalone --config-path ~/.config/muster\n  gateway standalone --port 0\n\n\
                      IDE configuration (mcp.json):\n  \
                      {\"mcpServers\": {\"muster\": {\"command\": \"gateway\", \"args\": [\"standalone\"]}}}\n\n\
                      The gateway also serves MCP on its address for other clients (--port 0: any free port). It \
                      shuts down, stopping every downstream server, when the IDE closes stdin."
    )]
    Standalone {
        #[command(flatten)]
        bind: BindArgs,
        /// How long the bridge waits for a call (e.g. 30s, 5m, 1h); call_tool's `timeout`
        /// argument (seconds) overrides it per call.
        #[arg(long, default_value = "5m", value_parser = agent::parse_duration)]
        timeout: Duration,
        /// Logging (to stderr; stdout carries MCP).
        #[command(flatten)]
        log: LogArgs,
    },
    /// Run the demo MCP server (stdio, or streamable HTTP with --http).
    #[command(after_help = "Examples:\n  gateway demo-server\n  gateway demo-server --http 127.0.0.1:0")]
    DemoServer {
        /// Serve streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:0).
        #[arg(long)]
        http: Option<SocketAddr>,
    },
    /// Serve a running gateway's meta-tools to an IDE over stdio (`--mcp-server`).
    #[command(
        after_help = "Examples:\n  gateway agent --mcp-server\n  gateway agent --mcp-server --endpoint \
                      http://127.0.0.1:9000/mcp --timeout 10m\n\nIDE configuration (mcp.json):\n  \
                      {\"mcpServers\": {\"muster\": {\"command\": \"gateway\", \"args\": [\"agent\", \"--mcp-server\"]}}}\n\n\
                      Start the gateway first: gateway serve --config-path <muster config dir>"
    )]
    Agent {
        /// Run as an MCP server on stdio (for IDEs); the only mode so far.
        #[arg(long)]
        mcp_server: bool,
        /// The gateway's MCP endpoint [default: the current context's, else http://127.0.0.1:8090/mcp].
        #[arg(long, env = "MUSTER_ENDPOINT")]
        endpoint: Option<String>,
        /// The context (a named endpoint, see `gateway context`) to use instead of the current one.
        #[arg(long, env = "MUSTER_CONTEXT")]
        context: Option<String>,
        /// How long to wait for a call (e.g. 30s, 5m, 1h); call_tool's `timeout` argument
        /// (seconds) overrides it per call.
        #[arg(long, default_value = "5m", value_parser = agent::parse_duration)]
        timeout: Duration,
        /// Logging (to stderr; stdout carries MCP).
        #[command(flatten)]
        log: LogArgs,
    },
    #[command(flatten)]
    Client(cli::ClientCommand),
    /// Name the gateways you use (contexts) and choose the current one.
    #[command(
        after_help = "Examples:\n  gateway context add prod --endpoint https://muster.example.com/mcp --use\n  \
                      gateway context list\n  gateway context use local\n  gateway list tools --context prod\n\n\
                      Contexts are kept in $XDG_CONFIG_HOME/muster/contexts.yaml (else ~/.config/muster/contexts.yaml; \
                      MUSTER_CONTEXTS_FILE names another file). --endpoint (or MUSTER_ENDPOINT) wins over any context."
    )]
    Context {
        #[command(subcommand)]
        command: cli::context::ContextCommand,
        /// Output format (list, show).
        #[arg(short, long, value_enum, default_value_t = cli::Format::Table, global = true)]
        output: cli::Format,
    },
    /// Print the shell completion script for `gateway`.
    #[command(
        after_help = "Examples:\n  gateway completions bash > ~/.local/share/bash-completion/completions/gateway\n  \
                      gateway completions zsh > \"${fpath[1]}/_gateway\"\n  \
                      gateway completions fish > ~/.config/fish/completions/gateway.fish"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Where a gateway's definitions are and where it listens (`serve`, `standalone`).
#[derive(Debug, Clone, Args)]
struct BindArgs {
    /// The muster config directory [default: $XDG_CONFIG_HOME/muster or ~/.config/muster when it
    /// holds definitions, else the built-in default].
    #[arg(long, env = "MUSTER_CONFIG_PATH")]
    config_path: Option<PathBuf>,
    /// Address to bind (overrides aggregator.host; `localhost` binds 127.0.0.1).
    #[arg(long)]
    host: Option<String>,
    /// Port to bind (overrides aggregator.port; 0 picks a free one).
    #[arg(long)]
    port: Option<u16>,
}

/// How a command logs (to stderr).
#[derive(Debug, Clone, Args)]
struct LogArgs {
    /// Log lines as text or as JSON objects (one a line, with their spans' fields).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "MUSTER_LOG_FORMAT")]
    log_format: LogFormat,
    /// Log at debug level (including downstream servers' stderr); RUST_LOG wins when set.
    #[arg(long, conflicts_with = "silent")]
    debug: bool,
    /// Log errors only; RUST_LOG wins when set.
    #[arg(long)]
    silent: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// Keeps the OpenTelemetry exporter (feature `otel`) until the command ends, then flushes it.
struct Logging {
    #[cfg(feature = "otel")]
    provider: Option<muster::gateway::metrics::otel::SdkTracerProvider>,
}

impl Drop for Logging {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider.take() {
            let _ = provider.shutdown();
        }
    }
}

/// Logs to stderr as `log` says: the filter is RUST_LOG when set, else `error` with --silent,
/// `debug` with --debug, else `normal`.
fn init_logging(log: &LogArgs, normal: &str) -> Logging {
    use tracing_subscriber::prelude::*;
    let default = if log.silent {
        "error"
    } else if log.debug {
        "debug"
    } else {
        normal
    };
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    #[cfg(feature = "otel")]
    {
        let wanted = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
            .iter()
            .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
        let provider = wanted
            .then(|| muster::gateway::metrics::otel::otlp_provider("muster"))
            .and_then(|built| built.map_err(|e| eprintln!("OpenTelemetry export is off: {e}")).ok());
        if let Some(provider) = provider {
            // Every call's `tool_call` span is exported, also where the log leaves it out (at
            // `debug` inside a request's span): each layer has a filter of its own.
            use muster::gateway::metrics::otel;
            tracing_subscriber::registry()
                .with(log_layer(log).with_filter(filter()))
                .with(otel::layer(&provider, "muster-gateway").with_filter(otel::with_tool_calls(filter())))
                .init();
            return Logging {
                provider: Some(provider),
            };
        }
    }
    tracing_subscriber::registry()
        .with(filter())
        .with(log_layer(log))
        .init();
    Logging {
        #[cfg(feature = "otel")]
        provider: None,
    }
}

/// The log: text or JSON lines on stderr, as `--log-format` says.
fn log_layer<S>(log: &LogArgs) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let text = (log.log_format == LogFormat::Text).then(|| {
        // Colours only on a terminal (not in a log file, nor in an IDE's server log).
        tracing_subscriber::fmt::layer()
            .fmt_fields(log_fields::LeanFields)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
    });
    let json = (log.log_format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(std::io::stderr)
    });
    Layer::and_then(text, json)
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Help and version are answers; anything else is a command-line mistake (EX_USAGE),
            // never 2, which means a sign-in is needed.
            return if e.use_stderr() {
                ExitCode::from(cli::error::USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Client(command) => return cli::run(command).await,
        Command::Context { command, output } => return cli::run_context(&command, output),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "gateway", &mut std::io::stdout());
            Ok(())
        }
        Command::Serve { bind, log } => serve(bind, &log).await,
        Command::Standalone { bind, timeout, log } => standalone(bind, timeout, &log).await,
        Command::DemoServer { http } => demo::run(http).await,
        Command::Agent {
            mcp_server,
            endpoint,
            context,
            timeout,
            log,
        } => {
            if mcp_server {
                let endpoint = match cli::context::resolve_endpoint(endpoint.as_deref(), context.as_deref()) {
                    Ok(endpoint) => endpoint,
                    Err(e) => return e.report(),
                };
                // The IDE shows a server's stderr: only warnings unless asked (the agent itself
                // explains a gateway it cannot reach; rmcp's worker would say it again, less
                // clearly).
                let _logging = init_logging(&log, "warn,rmcp::transport::worker=off");
                agent::run_mcp_server(endpoint, timeout).await
            } else {
                let usage = "the agent runs as an MCP server for IDEs: `gateway agent --mcp-server`";
                return cli::error::CliError::Usage(usage.to_owned()).report();
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("Error: {e}\n"));
            ExitCode::FAILURE
        }
    }
}

/// A gateway loaded from a config directory, its downstream servers starting, bound to its
/// address and not serving yet.
struct Bound {
    gateway: Gateway,
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    /// Live reload of the definitions, while it is held.
    _watch: Option<DefinitionsWatch>,
}

/// What keeps a gateway's definitions current, while it is held (dropping it stops the watch).
#[derive(Debug)]
#[allow(dead_code, reason = "held for its Drop: the handles are never read")]
enum DefinitionsWatch {
    /// The config directory's files (filesystem mode).
    ConfigDir(muster::gateway::definitions::config_dir::WatchHandle),
    /// The cluster's resources (Kubernetes mode), and the status written back.
    Cluster(kubernetes::ClusterTasks),
}

/// Loads the definitions (see `config_source.rs`), binds their address (or the one `args` give)
/// and starts the downstream servers: in the background, or first when unprefixed names must be
/// checked.
async fn bind(args: BindArgs) -> Result<Bound, Box<dyn std::error::Error>> {
    let BindArgs {
        config_path,
        host,
        port,
    } = args;
    let source = config_source::ConfigSource::resolve(config_path)?;
    let kubernetes = source.kubernetes_config();
    let (gateway, problems, kube_watch) = match kubernetes {
        Some((config, problems)) => {
            let (gateway, watch) = kubernetes::gateway(config, SupervisorConfig::from_env()).await?;
            (gateway, problems, Some(watch))
        }
        None => {
            let (gateway, problems) = source.gateway(SupervisorConfig::from_env())?;
            (gateway, problems, None)
        }
    };
    for problem in &problems {
        tracing::error!("{problem} (file left out)");
    }
    let registry = gateway.registry();
    tracing::info!(
        config = %source.describe(),
        kubernetes = kube_watch.is_some(),
        servers = registry.servers().len(),
        workflows = registry.workflows().len(),
        "configuration loaded"
    );
    let config = registry.config();
    let host = host.unwrap_or_else(|| config.aggregator.host.clone());
    let bind_host = if host == "localhost" {
        "127.0.0.1".to_owned()
    } else {
        host
    };
    let port = port.unwrap_or(config.aggregator.port);

    let listener = tokio::net::TcpListener::bind((bind_host.as_str(), port))
        .await
        .map_err(|e| format!("cannot bind {bind_host}:{port}: {e}"))?;
    let addr = listener.local_addr()?;
    let watch = match (&source, kube_watch) {
        (_, Some(kube_watch)) => Some(DefinitionsWatch::Cluster(kube_watch)),
        (config_source::ConfigSource::Dir(_), None) => match gateway.watch_config_dir() {
            Ok(handle) => Some(DefinitionsWatch::ConfigDir(handle)),
            Err(e) => {
                tracing::warn!(error = %e, "live reload is off");
                None
            }
        },
        (config_source::ConfigSource::BuiltIn { .. }, None) => None,
    };
    if config.aggregator.prefix_mode == muster::core::config::PrefixMode::Never {
        // Unprefixed names may clash: connect every server first and refuse to serve a clash.
        gateway.start().await;
        gateway.check_unique_names()?;
    } else {
        // Serve right away; downstream servers connect in the background and join the catalogue.
        let starter = gateway.clone();
        tokio::spawn(async move { starter.start().await });
    }
    Ok(Bound {
        gateway,
        listener,
        addr,
        _watch: watch,
    })
}

async fn serve(args: BindArgs, log: &LogArgs) -> Result<(), Box<dyn std::error::Error>> {
    let _logging = init_logging(log, "info");
    let bound = bind(args).await?;
    tracing::info!("muster gateway serving MCP at http://{}/mcp", bound.addr);

    // On SIGTERM or Ctrl-C: no new requests, calls in flight finish (up to
    // aggregator.limits.shutdownTimeoutSeconds), then every downstream server is stopped.
    let report = bound.gateway.serve(bound.listener, shutdown_signal()).await?;
    log_shutdown(&report);
    Ok(())
}

/// `standalone`: the gateway and the agent bridge in one process. The gateway serves on its
/// address as `serve` does (other clients can use it too); stdin and stdout carry the bridge's
/// MCP. When the IDE closes stdin, or at SIGTERM or Ctrl-C, the gateway shuts down as `serve`
/// does and every downstream server is stopped.
async fn standalone(args: BindArgs, timeout: Duration, log: &LogArgs) -> Result<(), Box<dyn std::error::Error>> {
    // Stdout is MCP; the IDE shows stderr: warnings unless asked.
    let _logging = init_logging(log, "warn,rmcp::transport::worker=off");
    let bound = bind(args).await?;
    let endpoint = format!("http://{}/mcp", bound.addr);
    tracing::info!("muster gateway serving MCP at {endpoint}; the agent bridge is on stdio");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let gateway = bound.gateway.clone();
    let server = tokio::spawn(async move {
        gateway
            .serve(bound.listener, async {
                let _ = stopped.await;
            })
            .await
    });
    let bridged = tokio::select! {
        bridged = agent::run_mcp_server(endpoint, timeout) => bridged,
        () = shutdown_signal() => Ok(()),
    };
    let _ = stop.send(());
    let report = server.await??;
    log_shutdown(&report);
    bridged
}

/// How a shutdown went, as `serve` and `standalone` log it.
fn log_shutdown(report: &muster::gateway::ShutdownReport) {
    tracing::info!(
        in_flight = report.in_flight_at_signal,
        ended = report.ended_in_flight,
        took_ms = report.took.as_millis() as u64,
        "shut down"
    );
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
