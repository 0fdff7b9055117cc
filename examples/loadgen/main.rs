//! The load benchmark of the gateway: how much one more MCP hop through muster costs, against the
//! echo server (`examples/echo_server.rs`) called directly. An rmcp client, loopback only, bounded
//! in calls and in time.
//!
//! ```text
//! cargo run --release --example loadgen -- matrix          # the standard matrix + memory + start-up
//! cargo run --release --example loadgen -- matrix --reps 1 --scale 10 --skip-extras   # smoke test
//! cargo run --release --example loadgen -- run --url http://127.0.0.1:8090/mcp \
//!     --sessions 10 --calls 2000 --call-tool echo --pid gateway=1234
//! cargo run --release --example loadgen -- run --url http://127.0.0.1:8090/mcp \
//!     --native echo --pad 4096               # 4 KiB more in each answer (a JSON listing as text)
//! cargo run --release --example loadgen -- soak            # issue 8: 100 sessions, 5 minutes
//! ```
//!
//! `matrix` builds the `gateway` and `echo_server` examples (same profile; `--no-build` skips
//! that), then runs sessions × calls of 1×2000, 10×2000 and 50×400 against (a) the echo server
//! over streamable HTTP, (b) the reference gateway with the echo server behind it over
//! streamable HTTP, calling `call_tool {"name": "x_echo_echo", ...}`, (c) the same with the echo
//! server over stdio. Each target runs in fresh processes; the whole matrix runs `--reps` times
//! (default 3); a run stops issuing calls after `--max-secs` (default 12). Every session first makes 20 calls that are not measured. It prints Markdown tables of
//! the medians: calls/s, p50/p95/p99 latency, errors, the CPU time per call of every server
//! process (`utime + stime` from `/proc/<pid>/stat` over the measured calls, so the figure holds
//! on a busy machine, unlike the latency), the ratios gateway / direct, each repetition's
//! figures, and the targets of issue 9. Then: the gateway's RSS idle and with 1,000 idle
//! sessions, its RSS and `list_tools` / `filter_tools` latency with 10,000 tools from 50 stdio
//! servers, and the time from its start to ready with 20 stdio servers. Progress goes to stderr,
//! the report to stdout. The rows (bn), (cn) call `x_echo_echo` directly through the gateway's
//! native exposure (`aggregator.exposure: both`; `--no-native` leaves them out).
//!
//! `run` sends one load to a server that is already running (loopback only) and prints one row;
//! `--pid name=PID` (repeatable) names the processes whose CPU time it measures.
//!
//! `soak` runs many sessions through the gateway for minutes while its downstream servers are
//! killed and come back, and reports the gateway's RSS and descriptors over time (`soak.rs`).
//!
//! Numbers and the command that produced them: `benches/README.md`.

#![allow(clippy::print_stdout)]

/// Progress goes to stderr; the report to stdout at the end.
macro_rules! progress {
    ($($arg:tt)*) => { eprintln!("[loadgen] {}", format_args!($($arg)*)) };
}

mod extras;
mod load;
mod matrix;
mod procfs;
mod procs;
mod soak;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// The error type of the load generator.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Parser)]
#[command(name = "loadgen", about = "The gateway's load benchmark")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The standard matrix, then the memory and start-up figures.
    Matrix(MatrixArgs),
    /// One load against a running server.
    Run(RunArgs),
    /// The soak test: sessions calling tools for minutes while downstream servers are killed.
    Soak(SoakArgs),
}

#[derive(Debug, Args)]
struct MatrixArgs {
    /// Repetitions of the matrix; medians are reported.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Divide the calls of every shape by this (a quick smoke test).
    #[arg(long, default_value_t = 1)]
    scale: usize,
    /// Leave out the native exposure rows (`aggregator.exposure: both`, `x_echo_echo` called
    /// directly).
    #[arg(long)]
    no_native: bool,
    /// Do not build the gateway and echo_server examples first.
    #[arg(long)]
    no_build: bool,
    /// Leave out the memory and start-up measurements.
    #[arg(long)]
    skip_extras: bool,
    /// Only the memory and start-up measurements.
    #[arg(long)]
    skip_matrix: bool,
    /// Idle sessions of the session-memory figure.
    #[arg(long, default_value_t = 1000)]
    idle_sessions: usize,
    /// Stdio servers of the catalogue figure.
    #[arg(long, default_value_t = 50)]
    catalogue_servers: usize,
    /// Tools per server of the catalogue figure.
    #[arg(long, default_value_t = 200)]
    catalogue_tools: usize,
    /// Stdio servers of the start-up figure.
    #[arg(long, default_value_t = 20)]
    startup_servers: usize,
    /// A run stops issuing calls after this many seconds (the rest are reported as not issued).
    #[arg(long, default_value_t = 12)]
    max_secs: u64,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The MCP endpoint (loopback only).
    #[arg(long)]
    url: String,
    /// Concurrent sessions.
    #[arg(long, default_value_t = 1)]
    sessions: usize,
    /// Calls per session.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Calls per session before measuring.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Call `x_<SERVER>_echo` through the gateway's `call_tool` (default: `echo` itself).
    #[arg(long, value_name = "SERVER", conflicts_with = "native")]
    call_tool: Option<String>,
    /// Call `x_<SERVER>_echo` directly (the gateway's native exposure).
    #[arg(long, value_name = "SERVER")]
    native: Option<String>,
    /// Ask the echo server for this many bytes of a JSON listing after each echoed message (a
    /// larger result; at most 1 MiB).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1 << 20))]
    pad: u32,
    /// A process whose CPU time is measured, as name=PID (repeatable).
    #[arg(long = "pid", value_name = "NAME=PID")]
    pids: Vec<String>,
    /// Stop issuing calls after this many seconds.
    #[arg(long, default_value_t = 120)]
    max_secs: u64,
}

#[derive(Debug, Args)]
struct SoakArgs {
    /// Length of the load, in seconds (the kills come at 1/3 and 2/3 of it).
    #[arg(long, default_value_t = 300)]
    seconds: u64,
    /// Concurrent sessions.
    #[arg(long, default_value_t = 100)]
    sessions: usize,
    /// The warm-up, in seconds: RSS and descriptors are compared with the sample at its end.
    #[arg(long, default_value_t = 60)]
    warmup_secs: u64,
    /// Seconds between samples of the gateway's RSS and descriptors.
    #[arg(long, default_value_t = 5)]
    sample_secs: u64,
    /// Seconds the HTTP echo server stays down after each kill.
    #[arg(long, default_value_t = 5)]
    down_secs: u64,
    /// Leave out the demo server.
    #[arg(long)]
    no_demo: bool,
    /// The gateway's MUSTER_MCPSERVER_INITIAL_BACKOFF (e.g. 1s); its default (30 s) otherwise.
    #[arg(long)]
    backoff: Option<String>,
    /// Allowed change of RSS from the end of the warm-up to the end, as a fraction.
    #[arg(long, default_value_t = 0.10)]
    rss_tolerance: f64,
    /// Allowed change of the open descriptors from the end of the warm-up to the end.
    #[arg(long, default_value_t = 10)]
    fd_tolerance: usize,
    /// Where the gateway's log is copied.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/target/loadgen-soak-gateway.log"))]
    keep_log: std::path::PathBuf,
    /// Do not build the gateway and echo_server examples first.
    #[arg(long)]
    no_build: bool,
}

/// The most sessions and calls per session one run may ask for.
const MAX_SESSIONS: usize = 2_000;
const MAX_CALLS: usize = 100_000;

/// Refuses anything but a loopback URL.
fn loopback(url: &str) -> Result<(), BoxError> {
    let parsed = url::Url::parse(url)?;
    let is_loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    if is_loopback {
        Ok(())
    } else {
        Err(format!("{url} is not a loopback address: the load generator only sends to this machine").into())
    }
}

async fn run_one(args: RunArgs) -> Result<(), BoxError> {
    loopback(&args.url)?;
    if args.sessions == 0 || args.sessions > MAX_SESSIONS || args.calls == 0 || args.calls > MAX_CALLS {
        return Err(format!("sessions must be 1..={MAX_SESSIONS} and calls 1..={MAX_CALLS}").into());
    }
    let measured = args
        .pids
        .iter()
        .map(|p| {
            let (name, pid) = p
                .split_once('=')
                .ok_or_else(|| format!("--pid {p}: expected name=PID"))?;
            Ok(load::Measured {
                name: name.to_owned(),
                pid: pid.parse()?,
            })
        })
        .collect::<Result<Vec<_>, BoxError>>()?;
    let call = match (args.call_tool, args.native) {
        (Some(server), _) => load::Call::ViaCallTool { server },
        (None, Some(server)) => load::Call::Native { server },
        (None, None) => load::Call::Echo,
    };
    let spec = load::LoadSpec {
        url: args.url,
        sessions: args.sessions,
        calls: args.calls,
        warmup: args.warmup,
        call,
        pad: args.pad as usize,
        max_time: Duration::from_secs(args.max_secs),
        measured,
    };
    let result = load::run(&reqwest::Client::new(), &spec).await?;
    let names: Vec<&str> = spec.measured.iter().map(|m| m.name.as_str()).collect();
    let cpu_headers: String = names
        .iter()
        .map(|n| format!(" {n} CPU µs/call | {n} switches/call |"))
        .collect();
    let cpu_cells: String = names
        .iter()
        .map(|n| {
            format!(
                " {:.1} | {:.2} |",
                result.cpu_us_per_call(n),
                result.switches_per_call(n)
            )
        })
        .collect();
    println!(
        "| sessions × calls | calls/s | p50 ms | p95 ms | p99 ms | errors | not issued |{cpu_headers} client CPU µs/call |"
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|{}---:|",
        "---:|".repeat(2 * names.len())
    );
    println!(
        "| {} × {} | {:.0} | {:.3} | {:.3} | {:.3} | {} | {} |{cpu_cells} {:.1} |",
        spec.sessions,
        spec.calls,
        result.calls_per_sec(),
        result.latency_ms(0.5),
        result.latency_ms(0.95),
        result.latency_ms(0.99),
        result.errors,
        result.not_issued,
        result.client_cpu_us_per_call()
    );
    if let Some(e) = result.first_error {
        eprintln!("first error: {e}");
    }
    Ok(())
}

async fn run_matrix(args: MatrixArgs) -> Result<(), BoxError> {
    if cfg!(debug_assertions) {
        eprintln!("[loadgen] warning: a debug build measures debug binaries; use --release for numbers");
    }
    let bins = procs::Binaries::locate(!args.no_build)?;
    let opts = matrix::MatrixOptions {
        reps: args.reps.max(1),
        scale: args.scale.max(1),
        native: !args.no_native,
        matrix: !args.skip_matrix,
        extras: !args.skip_extras,
        idle_sessions: args.idle_sessions.min(MAX_SESSIONS),
        catalogue: (args.catalogue_servers, args.catalogue_tools),
        startup_servers: args.startup_servers,
        max_time: Duration::from_secs(args.max_secs),
    };
    let report = matrix::run(bins, opts).await?;
    println!("{report}");
    Ok(())
}

async fn run_soak(args: SoakArgs) -> Result<(), BoxError> {
    if cfg!(debug_assertions) {
        eprintln!("[loadgen] warning: a debug build runs debug binaries; use --release");
    }
    if args.sessions == 0 || args.sessions > MAX_SESSIONS || args.seconds < 3 || args.sample_secs == 0 {
        return Err(format!("sessions must be 1..={MAX_SESSIONS}, seconds at least 3, sample-secs at least 1").into());
    }
    let bins = procs::Binaries::locate(!args.no_build)?;
    let opts = soak::SoakOptions {
        duration: Duration::from_secs(args.seconds),
        sessions: args.sessions,
        warmup: Duration::from_secs(args.warmup_secs),
        sample: Duration::from_secs(args.sample_secs),
        down: Duration::from_secs(args.down_secs),
        demo: !args.no_demo,
        backoff: args.backoff,
        rss_tolerance: args.rss_tolerance,
        fd_tolerance: args.fd_tolerance,
        keep_log: args.keep_log,
    };
    let report = soak::run(bins, opts).await?;
    println!("{report}");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    match Cli::parse().command {
        Command::Matrix(args) => run_matrix(args).await,
        Command::Run(args) => run_one(args).await,
        Command::Soak(args) => run_soak(args).await,
    }
}
