//! The memory and start-up figures: the gateway's RSS idle and with many idle sessions, its RSS
//! and `list_tools` / `filter_tools` latency with a big catalogue from many stdio servers, and
//! the time from its start to ready with several stdio servers.

use std::{
    fmt::Write as _,
    process::Stdio,
    time::{Duration, Instant},
};

use rmcp::{ServiceExt, transport::TokioChildProcess};
use serde_json::json;

use crate::{
    BoxError, load,
    matrix::{Ctx, WARMUP, mb, median, ms, us, verdict},
    procs::{Binaries, Downstream, EchoHttp, GatewayProc, GatewaySpec, meta_json},
};

/// Calls of each meta-tool latency figure, at most (and at most [`META_TIME`]).
const META_CALLS: usize = 1000;
const META_TIME: Duration = Duration::from_secs(5);

/// Rounds of the idle-session figure (a fresh gateway each; the median is reported).
const IDLE_ROUNDS: usize = 3;

/// The query of the `filter_tools` latency figure (the one of `benches/filter_tools.rs`).
const QUERY: &str = "show the error rate metrics of the payment services";

/// The memory and start-up figures.
#[derive(Debug, Default)]
pub(crate) struct Extras {
    idle_sessions: usize,
    idle_rounds: Vec<IdleRound>,
    catalogues: Vec<Catalogue>,
    startup_servers: usize,
    own_start: Vec<Duration>,
    concurrent_start: Vec<Duration>,
    gateway_ready: Vec<Duration>,
}

/// One round of the idle-session figure: RSS (KiB) and open descriptors of the gateway idle,
/// with the sessions open, and after closing them.
#[derive(Debug, Clone, Copy)]
struct IdleRound {
    open_secs: f64,
    rss_kib: [u64; 3],
    fds: [usize; 3],
}

impl IdleRound {
    /// RSS growth per idle session, in KB.
    fn per_session_kb(&self, sessions: usize) -> f64 {
        self.rss_kib[1].saturating_sub(self.rss_kib[0]) as f64 * 1024.0 / 1000.0 / sessions.max(1) as f64
    }
}

/// The big-catalogue figures of one gateway.
#[derive(Debug)]
struct Catalogue {
    distinct_schemas: bool,
    servers: usize,
    tools: usize,
    ready: Duration,
    rss_kib: u64,
    rss_after_kib: u64,
    children_rss_kib: u64,
    list_tools: LoadStats,
    filter_tools: LoadStats,
}

/// Latency and gateway CPU of a sequence of meta-tool calls.
#[derive(Debug, Clone, Copy)]
struct LoadStats {
    calls: usize,
    p50_ms: f64,
    p95_ms: f64,
    cpu_us: f64,
}

/// Measures the memory and start-up figures.
pub(crate) async fn run(ctx: &Ctx) -> Result<Extras, BoxError> {
    let mut extras = Extras::default();
    progress!("{} idle sessions", ctx.opts.idle_sessions);
    idle_sessions(ctx, &mut extras).await?;
    let (servers, tools) = ctx.opts.catalogue;
    progress!("catalogue of {} tools from {servers} stdio servers", servers * tools);
    // The echo servers' synthetic tools share one schema per server (interned by the gateway:
    // the best case); the second figure gives every tool a schema of its own, as real servers do.
    for distinct in [false, true] {
        extras.catalogues.push(catalogue(ctx, distinct).await?);
    }
    progress!("start to ready with {} stdio servers", ctx.opts.startup_servers);
    startup(ctx, &mut extras).await?;
    Ok(extras)
}

async fn idle_sessions(ctx: &Ctx, extras: &mut Extras) -> Result<(), BoxError> {
    extras.idle_sessions = ctx.opts.idle_sessions;
    for _ in 0..IDLE_ROUNDS {
        let echo = EchoHttp::start(&ctx.bins).await?;
        let gateway = GatewayProc::start(&ctx.bins, GatewaySpec::one(Downstream::Http(echo.url.clone()), false))?;
        gateway.wait_ready(&ctx.http, Duration::from_secs(60)).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pid = gateway.proc.pid;
        let sample = || {
            (
                crate::procfs::rss_kib(pid).unwrap_or_default(),
                crate::procfs::fd_count(pid).unwrap_or_default(),
            )
        };
        let idle = sample();
        let opened = Instant::now();
        let sessions = load::connect_many(&ctx.http, &gateway.url, ctx.opts.idle_sessions).await?;
        let open_secs = opened.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let with = sample();
        load::close_all(sessions).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = sample();
        extras.idle_rounds.push(IdleRound {
            open_secs,
            rss_kib: [idle.0, with.0, after.0],
            fds: [idle.1, with.1, after.1],
        });
        gateway.stop().await;
        echo.proc.stop().await;
    }
    Ok(())
}

/// Up to `n` calls of meta-tool `name` on one session, for at most `max_time`, with the
/// gateway's CPU time meanwhile.
async fn meta_load(
    session: &load::Session,
    gateway_pid: u32,
    name: &str,
    args: serde_json::Value,
    n: usize,
    max_time: Duration,
) -> Result<LoadStats, BoxError> {
    for _ in 0..WARMUP {
        meta_json(session, name, args.clone()).await?;
    }
    let before = crate::procfs::cpu_time(gateway_pid).unwrap_or_default();
    let deadline = Instant::now() + max_time;
    let mut latencies = Vec::with_capacity(n);
    while latencies.len() < n && Instant::now() < deadline {
        let started = Instant::now();
        let page = meta_json(session, name, args.clone()).await?;
        latencies.push(started.elapsed());
        if page["tools"].as_array().is_none_or(Vec::is_empty) {
            return Err(format!("{name} answered no tools: {page}").into());
        }
    }
    let cpu = crate::procfs::cpu_time(gateway_pid)
        .unwrap_or_default()
        .saturating_sub(before);
    latencies.sort_unstable();
    let calls = latencies.len().max(1);
    let q = |q: f64| {
        latencies
            .get(((q * calls as f64).ceil() as usize).clamp(1, calls) - 1)
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    };
    Ok(LoadStats {
        calls: latencies.len(),
        p50_ms: q(0.5),
        p95_ms: q(0.95),
        cpu_us: cpu.as_secs_f64() * 1e6 / calls as f64,
    })
}

async fn catalogue(ctx: &Ctx, distinct_schemas: bool) -> Result<Catalogue, BoxError> {
    let (servers, tools) = ctx.opts.catalogue;
    let spec = GatewaySpec {
        servers: (0..servers)
            .map(|i| Downstream::Stdio {
                tools,
                seed: i as u64 + 1,
                distinct_schemas,
            })
            .collect(),
        native: false,
    };
    let gateway = GatewayProc::start(&ctx.bins, spec)?;
    let ready = gateway.wait_ready(&ctx.http, Duration::from_secs(180)).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_kib = gateway.proc.rss_kib().unwrap_or_default();
    let children_rss_kib = gateway
        .downstream_pids()
        .into_iter()
        .filter_map(crate::procfs::rss_kib)
        .sum();
    let session = load::connect(&ctx.http, &gateway.url).await?;
    let total = usize::try_from(crate::procs::count_tools(&session, "x_*").await?)?;
    let pid = gateway.proc.pid;
    let list_tools = meta_load(&session, pid, "list_tools", json!({}), META_CALLS, META_TIME).await?;
    let filter_tools = meta_load(
        &session,
        pid,
        "filter_tools",
        json!({"query": QUERY, "limit": 5}),
        META_CALLS,
        META_TIME,
    )
    .await?;
    let rss_after_kib = gateway.proc.rss_kib().unwrap_or_default();
    let _ = session.cancel().await;
    gateway.stop().await;
    Ok(Catalogue {
        distinct_schemas,
        servers,
        tools: total,
        ready,
        rss_kib,
        rss_after_kib,
        children_rss_kib,
        list_tools,
        filter_tools,
    })
}

/// Spawns the echo server over stdio and initializes a session with it; answers the time taken.
async fn echo_own_start(bins: &Binaries) -> Result<(Duration, load::Session), BoxError> {
    let started = Instant::now();
    let (transport, _) = TokioChildProcess::builder(tokio::process::Command::new(&bins.echo))
        .stderr(Stdio::null())
        .spawn()?;
    let client = ().serve(transport).await?;
    client.list_all_tools().await?;
    Ok((started.elapsed(), client))
}

async fn startup(ctx: &Ctx, extras: &mut Extras) -> Result<(), BoxError> {
    let n = ctx.opts.startup_servers;
    extras.startup_servers = n;
    for _ in 0..5 {
        let (took, client) = echo_own_start(&ctx.bins).await?;
        extras.own_start.push(took);
        let _ = client.cancel().await;
    }
    for _ in 0..3 {
        let started = Instant::now();
        let all = futures::future::join_all((0..n).map(|_| echo_own_start(&ctx.bins))).await;
        extras.concurrent_start.push(started.elapsed());
        for started in all {
            let _ = started?.1.cancel().await;
        }
        let spec = GatewaySpec {
            servers: (0..n)
                .map(|i| Downstream::Stdio {
                    tools: 1,
                    seed: i as u64,
                    distinct_schemas: false,
                })
                .collect(),
            native: false,
        };
        let gateway = GatewayProc::start(&ctx.bins, spec)?;
        extras
            .gateway_ready
            .push(gateway.wait_ready(&ctx.http, Duration::from_secs(60)).await?);
        gateway.stop().await;
    }
    Ok(())
}

fn secs_median(values: &[Duration]) -> f64 {
    median(values.iter().map(Duration::as_secs_f64).collect())
}

/// The Markdown of the memory and start-up figures.
pub(crate) fn report(e: &Extras, out: &mut String) -> Result<(), BoxError> {
    writeln!(
        out,
        "\nMemory and start-up (RSS is `VmRSS` of `/proc/<pid>/status`; MB = 10^6 bytes):\n"
    )?;
    writeln!(out, "| measure | value | target |")?;
    writeln!(out, "|---|---:|---|")?;
    let rounds = &e.idle_rounds;
    let med_kib = |i: usize| median(rounds.iter().map(|r| r.rss_kib[i] as f64).collect()) as u64;
    let med_fds = |i: usize| median(rounds.iter().map(|r| r.fds[i] as f64).collect());
    let per_session: Vec<f64> = rounds.iter().map(|r| r.per_session_kb(e.idle_sessions)).collect();
    let per_session_median = median(per_session.clone());
    writeln!(
        out,
        "| gateway RSS, one HTTP downstream, ready, no session (median of {} gateways) | {:.1} MB | under 30 MB: {} |",
        rounds.len(),
        mb(med_kib(0)),
        verdict(mb(med_kib(0)) < 30.0)
    )?;
    writeln!(
        out,
        "| gateway RSS with {} idle sessions (initialized, kept open; opened in {:.1} s) | {:.1} MB | |",
        e.idle_sessions,
        median(rounds.iter().map(|r| r.open_secs).collect()),
        mb(med_kib(1))
    )?;
    writeln!(
        out,
        "| per idle session (each gateway: {}) | {per_session_median:.1} KB | under 40 KB: {} |",
        per_session
            .iter()
            .map(|v| format!("{v:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        verdict(per_session_median < 40.0)
    )?;
    writeln!(out, "| gateway RSS after closing them | {:.1} MB | |", mb(med_kib(2)))?;
    writeln!(
        out,
        "| gateway open file descriptors: idle, with the sessions, after closing them | {:.0} / {:.0} / {:.0} | |",
        med_fds(0),
        med_fds(1),
        med_fds(2)
    )?;
    for c in &e.catalogues {
        let which = if c.distinct_schemas {
            "gateway, every tool its own schema"
        } else {
            "gateway"
        };
        writeln!(
            out,
            "| {which}: RSS, {} tools from {} stdio servers, ready | {:.1} MB | under 80 MB: {} |",
            c.tools,
            c.servers,
            mb(c.rss_kib),
            verdict(mb(c.rss_kib) < 80.0)
        )?;
        writeln!(
            out,
            "| {which}: the same after the list_tools/filter_tools calls below | {:.1} MB | |",
            mb(c.rss_after_kib)
        )?;
        writeln!(
            out,
            "| the {} stdio servers together (not the gateway) | {:.1} MB | |",
            c.servers,
            mb(c.children_rss_kib)
        )?;
        writeln!(
            out,
            "| {which}: start to ready, {} tools from {} stdio servers | {:.2} s | |",
            c.tools,
            c.servers,
            c.ready.as_secs_f64()
        )?;
        for (name, s) in [
            ("`list_tools {}` (a page of 50)", c.list_tools),
            ("`filter_tools {query, limit: 5}`", c.filter_tools),
        ] {
            writeln!(
                out,
                "| {which}: {name} over {} tools, {} calls on one session (at most 5 s): p50 / p95, gateway CPU per call | {} / {} ms, {} µs | |",
                c.tools,
                s.calls,
                ms(s.p50_ms),
                ms(s.p95_ms),
                us(s.cpu_us)
            )?;
        }
    }
    let own = secs_median(&e.own_start);
    let concurrent = secs_median(&e.concurrent_start);
    let ready = secs_median(&e.gateway_ready);
    writeln!(
        out,
        "| one echo server's own start (spawn to initialized and tools listed), median of {} | {:.3} s | |",
        e.own_start.len(),
        own
    )?;
    writeln!(
        out,
        "| {} echo servers started at once by the load generator, until the last is initialized, median of {} | {:.3} s | |",
        e.startup_servers,
        e.concurrent_start.len(),
        concurrent
    )?;
    writeln!(
        out,
        "| gateway start to ready (`/health` all ready and every tool listed), {} stdio servers, median of {} | {:.3} s | under 1 s + {:.3} s: {} |",
        e.startup_servers,
        e.gateway_ready.len(),
        ready,
        concurrent,
        verdict(ready < 1.0 + concurrent)
    )?;
    Ok(())
}
