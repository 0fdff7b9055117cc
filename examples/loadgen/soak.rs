//! The soak test of issue 8: many sessions calling tools for minutes through the reference
//! gateway while its downstream servers are killed and come back.
//!
//! ```text
//! cargo run --release --example loadgen -- soak                 # 100 sessions, 300 s
//! cargo run --release --example loadgen -- soak --seconds 60 --sessions 20 --warmup-secs 15
//! ```
//!
//! Set-up: the echo server over streamable HTTP on a fixed loopback port (started here, so it can
//! be killed and started again at the same URL), and `target/<profile>/examples/gateway serve` on
//! a temporary config directory with three downstream servers: `echo0` (that HTTP echo server),
//! `echo1` (the echo server over stdio, started by the gateway) and `demo` (`gateway demo-server`
//! over stdio; `--no-demo` leaves it out). The gateway's stderr goes to a file.
//!
//! Load: `--sessions` rmcp streamable-HTTP clients, each issuing one request after the other until
//! the end, in a fixed rotation of twenty: 8 × `call_tool x_echo0_echo`, 8 × `call_tool
//! x_echo1_echo` (the echoed text is checked), 2 × `call_tool x_demo_add` (the sum is checked;
//! without the demo, one more of each echo), one `list_tools {}` and one `filter_tools {query}`.
//! Each request waits at most 30 s. Its outcome is one of: **ok**; an **error result**
//! (`isError: true`) or a **JSON-RPC error**, both answers; a **wrong answer** (not the echo);
//! **no answer** in 30 s; a **transport failure** (the session's HTTP exchange failed). After a
//! transport failure the session is replaced by a new one (counted as a reconnect).
//!
//! Chaos: at 1/3 of the run the HTTP echo server is killed with SIGKILL and started again on the
//! same port after `--down-secs` (default 5); at 2/3 the same, and the gateway's stdio echo server
//! (its child process running `echo_server`) is killed with SIGKILL too; the gateway restarts it
//! on its own (after its supervisor's backoff, 30 s unless `--backoff` sets
//! `MUSTER_MCPSERVER_INITIAL_BACKOFF`). Recovery is read from a 100 ms timeline of every
//! request's outcome per target: the last failed request to the killed server after the kill,
//! then its first ok answer after that.
//!
//! Measured every `--sample-secs` (5): the gateway's `VmRSS`, its open file descriptors
//! (`/proc/<pid>/fd`), its CPU, and the requests answered in the interval. The verdict: every
//! request answered (no "no answer", no transport failure); no `panicked` in the gateway's log;
//! RSS flat after the warm-up (the last sample within `--rss-tolerance` (10%) of the sample at
//! the end of the warm-up, 60 s); descriptors at the end of the load within `--fd-tolerance` of
//! those at the end of the warm-up, and, once every session is closed and the client's
//! connections are dropped, back to the count before the first session (± 2); no zombie child.
//! Progress goes to stderr, the Markdown report to stdout.

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::{
    BoxError, load, procfs,
    procs::{Binaries, Downstream, EchoHttp, GatewayProc, GatewaySpec, free_port},
};

mod report;
mod traffic;

use report::{Report, mb, read_log};
use traffic::{Shared, drive};

/// How the soak runs.
#[derive(Debug, Clone)]
pub(crate) struct SoakOptions {
    /// Length of the load.
    pub(crate) duration: Duration,
    /// Concurrent sessions.
    pub(crate) sessions: usize,
    /// The warm-up: RSS and descriptors are compared with the sample at its end.
    pub(crate) warmup: Duration,
    /// Time between samples.
    pub(crate) sample: Duration,
    /// How long the HTTP echo server stays down after each kill.
    pub(crate) down: Duration,
    /// The demo server as a third downstream.
    pub(crate) demo: bool,
    /// `MUSTER_MCPSERVER_INITIAL_BACKOFF` for the gateway (its default otherwise).
    pub(crate) backoff: Option<String>,
    /// The last RSS sample may differ from the one at the end of the warm-up by this fraction.
    pub(crate) rss_tolerance: f64,
    /// The descriptors at the end may differ from those at the end of the warm-up by this many.
    pub(crate) fd_tolerance: usize,
    /// Where the gateway's log is copied (it lives in a temporary directory).
    pub(crate) keep_log: PathBuf,
}

/// One sample of the gateway.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub(crate) at: Duration,
    pub(crate) rss_kib: u64,
    pub(crate) fds: usize,
    pub(crate) cpu: Duration,
}

pub(crate) fn sample(pid: u32, at: Duration) -> Sample {
    Sample {
        at,
        rss_kib: procfs::rss_kib(pid).unwrap_or(0),
        fds: procfs::fd_count(pid).unwrap_or(0),
        cpu: procfs::cpu_time(pid).unwrap_or_default(),
    }
}

/// The gateway's descriptors by kind, as one line.
pub(crate) fn fd_line(pid: u32) -> String {
    let kinds = procfs::fd_kinds(pid);
    let total: usize = kinds.values().sum();
    let parts: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!("{total} ({})", parts.join(", "))
}

/// One kill.
#[derive(Debug, Clone, Default)]
pub(crate) struct Kill {
    /// When, from the start of the load.
    pub(crate) at: Duration,
    /// The HTTP echo server's old pid.
    pub(crate) http_pid: u32,
    /// When the HTTP echo server was started again.
    pub(crate) http_restarted: Option<Duration>,
    /// The stdio echo server killed too (its pid), the second time.
    pub(crate) stdio_pid: Option<u32>,
    /// When the gateway had started a new stdio echo server (its pid).
    pub(crate) stdio_respawned: Option<(Duration, u32)>,
}

/// The gateway's child running the stdio echo server.
pub(crate) fn stdio_echo_child(gateway: u32) -> Option<u32> {
    procfs::children(gateway)
        .into_iter()
        .find(|&pid| procfs::cmdline(pid).is_some_and(|c| c.contains("echo_server")))
}

/// Kills at 1/3 and 2/3 of the run; answers the HTTP echo server running at the end.
pub(crate) async fn chaos(
    bins: Binaries,
    mut echo: EchoHttp,
    addr: String,
    gateway: u32,
    started: Instant,
    opts: SoakOptions,
) -> Result<(EchoHttp, Vec<Kill>), BoxError> {
    let mut kills = Vec::new();
    for round in 1..=2u32 {
        tokio::time::sleep_until((started + opts.duration * round / 3).into()).await;
        let mut kill = Kill {
            at: started.elapsed(),
            http_pid: echo.proc.pid,
            ..Kill::default()
        };
        let stdio = if round == 2 { stdio_echo_child(gateway) } else { None };
        progress!(
            "t={:.1}s: kill -9 the HTTP echo server (pid {}){}",
            kill.at.as_secs_f64(),
            echo.proc.pid,
            stdio
                .map(|p| format!(" and the stdio echo server (pid {p})"))
                .unwrap_or_default()
        );
        if let Some(pid) = stdio {
            let killed = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()?;
            if !killed.success() {
                return Err(format!("kill -9 {pid} failed: {killed}").into());
            }
            kill.stdio_pid = Some(pid);
        } else if round == 2 {
            progress!("no stdio echo server found under the gateway (pid {gateway})");
        }
        let (bins, addr, down) = (&bins, &addr, opts.down);
        let restart = async move {
            echo.proc.stop().await;
            tokio::time::sleep(down).await;
            let echo = restart_echo(bins, addr).await?;
            progress!(
                "t={:.1}s: the HTTP echo server is back (pid {})",
                started.elapsed().as_secs_f64(),
                echo.proc.pid
            );
            Ok::<_, BoxError>((echo, started.elapsed()))
        };
        // The gateway restarts the stdio server after its backoff: watch for a new child.
        let respawn = async {
            let old = kill.stdio_pid?;
            let end = started + opts.duration;
            while Instant::now() < end {
                if let Some(pid) = stdio_echo_child(gateway).filter(|&p| p != old) {
                    progress!(
                        "t={:.1}s: the gateway started a new stdio echo server (pid {pid})",
                        started.elapsed().as_secs_f64()
                    );
                    return Some((started.elapsed(), pid));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            None
        };
        let (restarted, respawned) = tokio::join!(restart, respawn);
        let (restarted, back) = restarted?;
        echo = restarted;
        kill.http_restarted = Some(back);
        kill.stdio_respawned = respawned;
        kills.push(kill);
    }
    Ok((echo, kills))
}

/// Starts the HTTP echo server on `addr`, retrying while the port is not free yet.
pub(crate) async fn restart_echo(bins: &Binaries, addr: &str) -> Result<EchoHttp, BoxError> {
    let mut last = None;
    for _ in 0..50 {
        match EchoHttp::start_on(bins, addr).await {
            Ok(echo) => return Ok(echo),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "the HTTP echo server did not start again on {addr}: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    )
    .into())
}

/// Runs the soak and answers its Markdown report.
pub(crate) async fn run(bins: Binaries, opts: SoakOptions) -> Result<String, BoxError> {
    let http = reqwest::Client::new();
    let echo_port = free_port()?;
    let echo_addr = format!("127.0.0.1:{echo_port}");
    let echo = EchoHttp::start_on(&bins, &echo_addr).await?;
    let mut servers = vec![
        Downstream::Http(echo.url.clone()),
        Downstream::Stdio {
            tools: 1,
            seed: 0,
            distinct_schemas: false,
        },
    ];
    if opts.demo {
        servers.push(Downstream::Demo);
    }
    let spec = GatewaySpec { servers, native: false };
    let env: Vec<(String, String)> = opts
        .backoff
        .iter()
        .map(|b| ("MUSTER_MCPSERVER_INITIAL_BACKOFF".to_owned(), b.clone()))
        .collect();
    let gateway = GatewayProc::start_with_env(&bins, spec, &env)?;
    let ready = gateway.wait_ready(&http, Duration::from_secs(60)).await?;
    let pid = gateway.proc.pid;
    progress!(
        "gateway pid {pid} ready in {:.2} s at {}; HTTP echo server pid {} at {}; log {}",
        ready.as_secs_f64(),
        gateway.url,
        echo.proc.pid,
        echo.url,
        gateway.log_path().display()
    );
    // Let the readiness probe's connection close before the baseline.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = sample(pid, Duration::ZERO);
    let baseline_fds = fd_line(pid);

    // The sessions' own client, so that dropping it closes every connection they used.
    let client = reqwest::Client::new();
    let started = Instant::now();
    let shared = Arc::new(Shared::new(started, opts.duration, opts.demo));
    progress!(
        "{} sessions for {} s; kills at {} s and {} s",
        opts.sessions,
        opts.duration.as_secs(),
        (opts.duration / 3).as_secs(),
        (opts.duration * 2 / 3).as_secs()
    );
    let sessions: Vec<_> = (0..opts.sessions)
        .map(|tag| tokio::spawn(drive(client.clone(), gateway.url.clone(), tag, Arc::clone(&shared))))
        .collect();
    let chaos = tokio::spawn(chaos(bins.clone(), echo, echo_addr, pid, started, opts.clone()));

    let mut samples = vec![sample(pid, Duration::ZERO)];
    let mut warm_fds = None;
    let mut ticks = tokio::time::interval_at((started + opts.sample).into(), opts.sample);
    while started.elapsed() + opts.sample / 2 < opts.duration {
        ticks.tick().await;
        let s = sample(pid, started.elapsed());
        let since = samples.last().map_or(Duration::ZERO, |p: &Sample| p.at);
        let tally = shared.sum(since, s.at);
        progress!(
            "t={:>5.1}s RSS {:.1} MB, {} fds, {:.0} answers/s, {} error answers, {} unanswered",
            s.at.as_secs_f64(),
            mb(s.rss_kib),
            s.fds,
            tally.answered() as f64 / (s.at - since).as_secs_f64(),
            tally.error_answers(),
            tally.unanswered()
        );
        if warm_fds.is_none() && s.at + opts.sample / 2 >= opts.warmup {
            warm_fds = Some(fd_line(pid));
        }
        samples.push(s);
    }
    let end_fds = fd_line(pid);
    let mut open_sessions = Vec::new();
    for task in sessions {
        if let Some(s) = task.await? {
            open_sessions.push(s);
        }
    }
    let drained = started.elapsed();
    let (echo, kills) = chaos.await??;
    let answered_by = sample(pid, drained);
    let open = open_sessions.len();
    load::close_all(open_sessions).await;
    drop(client);
    // The gateway keeps idle connections to the HTTP downstream for 4 s (its pool): wait for
    // them to go, up to 10 s, so that what is left counts as a leak.
    let closing = std::time::Instant::now();
    let mut closed = sample(pid, started.elapsed());
    while closed.fds.abs_diff(baseline.fds) > 2 && closing.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        closed = sample(pid, started.elapsed());
    }
    let closed_fds = fd_line(pid);
    let zombies = procfs::zombie_children(pid);
    let children = procfs::children(pid).len();

    let log = read_log(&gateway.log_path());
    if let Some(parent) = opts.keep_log.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let kept = std::fs::copy(gateway.log_path(), &opts.keep_log).is_ok();
    let exit = gateway.terminate(Duration::from_secs(15)).await;
    echo.proc.stop().await;

    let report = Report {
        opts: &opts,
        shared: &shared,
        samples: &samples,
        baseline: &baseline,
        baseline_fds,
        warm_fds: warm_fds.unwrap_or_default(),
        end_fds,
        closed_fds,
        answered_by: &answered_by,
        closed: &closed,
        open_sessions: open,
        kills: &kills,
        log: &log,
        kept,
        exit,
        zombies,
        children,
    };
    Ok(report.render())
}
