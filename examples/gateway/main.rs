//! The reference muster gateway.
//!
//! ```text
//! gateway serve [--config-path DIR] [--host HOST] [--port PORT] [--debug]
//! gateway demo-server [--http ADDR]
//! ```
//!
//! `serve` loads the muster config directory (default `~/.config/muster`: `config.yaml`,
//! `mcpservers/`, `workflows/`), connects the downstream servers and serves the 13 meta-tools over
//! streamable HTTP at `http://HOST:PORT/mcp`, with `GET /health`. It binds 127.0.0.1:8090 unless
//! told otherwise. A file that does not load is reported and left out; the gateway still starts.
//!
//! `demo-server` is the small demo MCP server the example configuration aggregates: over stdio by
//! default, or over streamable HTTP with `--http 127.0.0.1:0` (it prints the URL it serves).

mod demo;

use std::{net::SocketAddr, path::PathBuf};

use clap::{Parser, Subcommand};
use muster::gateway::{Gateway, supervisor::SupervisorConfig};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(name = "gateway", version, about = "The reference muster gateway")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the gateway from a muster config directory.
    #[command(
        after_help = "Examples:\n  gateway serve --config-path examples/config\n  gateway serve --port 9000 --debug"
    )]
    Serve {
        /// The muster config directory.
        #[arg(long, env = "MUSTER_CONFIG_PATH")]
        config_path: Option<PathBuf>,
        /// Address to bind (overrides aggregator.host; `localhost` binds 127.0.0.1).
        #[arg(long)]
        host: Option<String>,
        /// Port to bind (overrides aggregator.port).
        #[arg(long)]
        port: Option<u16>,
        /// Log at debug level (including downstream servers' stderr).
        #[arg(long)]
        debug: bool,
    },
    /// Run the demo MCP server (stdio, or streamable HTTP with --http).
    DemoServer {
        /// Serve streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:0).
        #[arg(long)]
        http: Option<SocketAddr>,
    },
}

fn default_config_path() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".config")
        .join("muster")
}

fn init_logging(debug: bool) {
    let default = if debug { "debug" } else { "info" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Command::Serve {
            config_path,
            host,
            port,
            debug,
        } => serve(config_path.unwrap_or_else(default_config_path), host, port, debug).await,
        Command::DemoServer { http } => demo::run(http).await,
    }
}

async fn serve(
    config_path: PathBuf,
    host: Option<String>,
    port: Option<u16>,
    debug: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    init_logging(debug);
    let (gateway, problems) = Gateway::from_config_dir(&config_path, SupervisorConfig::from_env())
        .map_err(|e| format!("cannot start from {}: {e}", config_path.display()))?;
    for problem in &problems {
        tracing::error!("{problem} (file left out)");
    }
    let registry = gateway.registry();
    tracing::info!(
        config = %config_path.display(),
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
    let _watch = match gateway.watch_config_dir() {
        Ok(handle) => Some(handle),
        Err(e) => {
            tracing::warn!(error = %e, "live reload is off");
            None
        }
    };
    // Serve right away; downstream servers connect in the background and join the catalogue.
    let starter = gateway.clone();
    tokio::spawn(async move { starter.start().await });
    tracing::info!("muster gateway serving MCP at http://{addr}/mcp");

    let shutdown_gateway = gateway.clone();
    axum::serve(listener, gateway.router())
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            tracing::info!("shutting down");
            shutdown_gateway.shutdown().await;
        })
        .await?;
    Ok(())
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
