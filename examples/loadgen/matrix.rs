//! The standard matrix (sessions × calls of 1×2000, 10×2000 and 50×400 against the echo server
//! directly, the gateway with it behind over streamable HTTP, and over stdio), repeated and
//! summarised by medians; then the memory and start-up figures (`extras.rs`).

use std::{
    fmt::Write as _,
    time::{Duration, Instant},
};

use crate::{
    BoxError,
    load::{self, Call, LoadResult, LoadSpec, Measured},
    procs::{Binaries, Downstream, EchoHttp, GatewayProc, GatewaySpec},
};

/// The standard shapes: (sessions, calls per session).
const SHAPES: [(usize, usize); 3] = [(1, 2000), (10, 2000), (50, 400)];

/// Calls per session before measuring.
pub(crate) const WARMUP: usize = 20;

/// What a matrix run does.
#[derive(Debug, Clone)]
pub(crate) struct MatrixOptions {
    /// Repetitions of the whole matrix (medians are reported).
    pub(crate) reps: usize,
    /// Divide every shape's calls by this (a smoke test; 1 for the standard matrix).
    pub(crate) scale: usize,
    /// Also measure the gateway's native exposure (`x_echo_echo` called directly).
    pub(crate) native: bool,
    /// Run the matrix.
    pub(crate) matrix: bool,
    /// Run the memory and start-up measurements.
    pub(crate) extras: bool,
    /// Idle sessions of the session-memory figure.
    pub(crate) idle_sessions: usize,
    /// Servers and tools per server of the catalogue figure.
    pub(crate) catalogue: (usize, usize),
    /// Stdio servers of the start-up figure.
    pub(crate) startup_servers: usize,
    /// A run stops issuing calls after this long.
    pub(crate) max_time: Duration,
}

/// What the load is sent to: the echo server itself, or a gateway (`gateway: Some`) with the
/// echo server behind it over streamable HTTP or stdio, called through `call_tool` or natively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Target {
    gateway: bool,
    stdio: bool,
    native: bool,
}

impl Target {
    const DIRECT: Self = Self {
        gateway: false,
        stdio: false,
        native: false,
    };

    fn gateway(stdio: bool, native: bool) -> Self {
        Self {
            gateway: true,
            stdio,
            native,
        }
    }

    fn label(self) -> String {
        if !self.gateway {
            return "(a) echo server direct, HTTP".to_owned();
        }
        let (letter, downstream) = if self.stdio { ('c', "stdio") } else { ('b', "HTTP") };
        let (n, call) = if self.native {
            ("n", "native call")
        } else {
            ("", "`call_tool`")
        };
        format!("({letter}{n}) gateway, {call}, {downstream} downstream")
    }

    fn is_gateway(self) -> bool {
        self.gateway
    }
}

/// The medians of one (target, shape) cell over the repetitions.
#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    calls_per_sec: f64,
    p50: f64,
    p95: f64,
    p99: f64,
    errors: usize,
    not_issued: usize,
    gateway_cpu: f64,
    echo_cpu: f64,
    client_cpu: f64,
    gateway_switches: f64,
    echo_switches: f64,
}

/// The median of `values` (NaN when empty; the mean of the middle two for an even count).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| !v.is_nan());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

impl Cell {
    fn of(runs: &[LoadResult]) -> Self {
        let m = |f: &dyn Fn(&LoadResult) -> f64| median(runs.iter().map(f).collect());
        Self {
            calls_per_sec: m(&|r| r.calls_per_sec()),
            p50: m(&|r| r.latency_ms(0.50)),
            p95: m(&|r| r.latency_ms(0.95)),
            p99: m(&|r| r.latency_ms(0.99)),
            errors: runs.iter().map(|r| r.errors).sum(),
            not_issued: runs.iter().map(|r| r.not_issued).sum(),
            gateway_cpu: m(&|r| r.cpu_us_per_call("gateway")),
            echo_cpu: m(&|r| r.cpu_us_per_call("echo")),
            client_cpu: m(&|r| r.client_cpu_us_per_call()),
            gateway_switches: m(&|r| r.switches_per_call("gateway")),
            echo_switches: m(&|r| r.switches_per_call("echo")),
        }
    }
}

/// Every run of the matrix, by target and shape.
#[derive(Debug, Default)]
struct Runs {
    runs: Vec<(Target, usize, LoadResult)>,
    idle_rss_kib: Vec<(Target, u64)>,
}

impl Runs {
    fn of(&self, target: Target, shape: usize) -> Vec<LoadResult> {
        self.runs
            .iter()
            .filter(|(t, s, _)| *t == target && *s == shape)
            .map(|(_, _, r)| r.clone())
            .collect()
    }

    fn cell(&self, target: Target, shape: usize) -> Cell {
        Cell::of(&self.of(target, shape))
    }

    /// The gateway's CPU per call over the direct echo server's, repetition by repetition: each
    /// repetition runs every target back to back, so a slow phase of the machine weighs on both
    /// sides of a pair alike.
    fn paired_cpu_ratios(&self, target: Target, shape: usize) -> Vec<f64> {
        let direct = self.of(Target::DIRECT, shape);
        self.of(target, shape)
            .iter()
            .zip(&direct)
            .map(|(g, d)| g.cpu_us_per_call("gateway") / d.cpu_us_per_call("echo"))
            .filter(|r| r.is_finite())
            .collect()
    }
}

/// The lowest and highest of `values` (NaN when empty).
fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::NAN, f64::NAN), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

/// Shared state of a matrix run.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) bins: Binaries,
    pub(crate) http: reqwest::Client,
    pub(crate) opts: MatrixOptions,
}

/// Runs the matrix and the extra measurements; answers the Markdown report.
pub(crate) async fn run(bins: Binaries, opts: MatrixOptions) -> Result<String, BoxError> {
    let started = Instant::now();
    let ctx = Ctx {
        bins,
        http: reqwest::Client::new(),
        opts,
    };
    let mut report = String::new();
    if ctx.opts.matrix {
        let runs = matrix(&ctx).await?;
        report_matrix(&ctx, &runs, &mut report)?;
    }
    if ctx.opts.extras {
        let extras = crate::extras::run(&ctx).await?;
        crate::extras::report(&extras, &mut report)?;
    }
    writeln!(report, "\nTotal time: {:.0} s.", started.elapsed().as_secs_f64())?;
    Ok(report)
}

fn targets(opts: &MatrixOptions) -> Vec<Target> {
    let mut targets = vec![Target::DIRECT];
    for stdio in [false, true] {
        targets.push(Target::gateway(stdio, false));
    }
    if opts.native {
        for stdio in [false, true] {
            targets.push(Target::gateway(stdio, true));
        }
    }
    targets
}

fn shapes(opts: &MatrixOptions) -> Vec<(usize, usize)> {
    SHAPES
        .iter()
        .map(|&(s, c)| (s, (c / opts.scale.max(1)).max(1)))
        .collect()
}

async fn matrix(ctx: &Ctx) -> Result<Runs, BoxError> {
    let mut runs = Runs::default();
    let shapes = shapes(&ctx.opts);
    for rep in 1..=ctx.opts.reps {
        for target in targets(&ctx.opts) {
            progress!("rep {rep}/{}: {}", ctx.opts.reps, target.label());
            run_target(ctx, target, &shapes, &mut runs).await?;
        }
    }
    Ok(runs)
}

/// Starts `target`'s processes, runs every shape against them, stops them.
async fn run_target(ctx: &Ctx, target: Target, shapes: &[(usize, usize)], runs: &mut Runs) -> Result<(), BoxError> {
    let echo = if target.stdio {
        None
    } else {
        Some(EchoHttp::start(&ctx.bins).await?)
    };
    let gateway = if target.gateway {
        let downstream = match &echo {
            Some(echo) => Downstream::Http(echo.url.clone()),
            None => Downstream::Stdio {
                tools: 1,
                seed: 0,
                distinct_schemas: false,
            },
        };
        let gateway = GatewayProc::start(&ctx.bins, GatewaySpec::one(downstream, target.native))?;
        gateway.wait_ready(&ctx.http, Duration::from_secs(60)).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some(rss) = gateway.proc.rss_kib() {
            runs.idle_rss_kib.push((target, rss));
        }
        Some(gateway)
    } else {
        None
    };

    let mut measured = Vec::new();
    if let Some(g) = &gateway {
        measured.push(Measured {
            name: "gateway".to_owned(),
            pid: g.proc.pid,
        });
    }
    let echo_pid = match (&echo, &gateway) {
        (Some(e), _) => Some(e.proc.pid),
        (None, Some(g)) => g.downstream_pids().first().copied(),
        (None, None) => None,
    };
    if let Some(pid) = echo_pid {
        measured.push(Measured {
            name: "echo".to_owned(),
            pid,
        });
    }
    let (url, call) = match (&gateway, &echo) {
        (Some(g), _) if target.native => (g.url.clone(), Call::Native { server: "echo".into() }),
        (Some(g), _) => (g.url.clone(), Call::ViaCallTool { server: "echo".into() }),
        (None, Some(e)) => (e.url.clone(), Call::Echo),
        (None, None) => return Err("nothing to measure".into()),
    };

    for (i, &(sessions, calls)) in shapes.iter().enumerate() {
        let spec = LoadSpec {
            url: url.clone(),
            sessions,
            calls,
            warmup: WARMUP,
            call: call.clone(),
            pad: 0,
            max_time: ctx.opts.max_time,
            measured: measured.clone(),
        };
        let result = load::run(&ctx.http, &spec).await?;
        progress!(
            "  {sessions}x{calls} {}: {:.0} calls/s, p50 {:.3} ms, p99 {:.3} ms, errors {}, CPU/call gateway {:.1} µs, echo {:.1} µs, client {:.1} µs{}",
            call.label(),
            result.calls_per_sec(),
            result.latency_ms(0.5),
            result.latency_ms(0.99),
            result.errors,
            result.cpu_us_per_call("gateway"),
            result.cpu_us_per_call("echo"),
            result.client_cpu_us_per_call(),
            result
                .first_error
                .as_deref()
                .map(|e| format!(" (first error: {e})"))
                .unwrap_or_default()
        );
        runs.runs.push((target, i, result));
    }

    if let Some(g) = gateway {
        g.stop().await;
    }
    if let Some(e) = echo {
        e.proc.stop().await;
    }
    Ok(())
}

pub(crate) fn ms(v: f64) -> String {
    if v.is_nan() {
        "–".to_owned()
    } else {
        format!("{v:.3}")
    }
}

pub(crate) fn us(v: f64) -> String {
    if v.is_nan() {
        "–".to_owned()
    } else {
        format!("{v:.1}")
    }
}

/// A count per call, to two places.
fn per_call(v: f64) -> String {
    if v.is_nan() {
        "–".to_owned()
    } else {
        format!("{v:.2}")
    }
}

fn ratio(v: f64) -> String {
    if v.is_nan() {
        "–".to_owned()
    } else {
        format!("{v:.2}×")
    }
}

pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**missed**" }
}

fn report_matrix(ctx: &Ctx, runs: &Runs, out: &mut String) -> Result<(), BoxError> {
    let shapes = shapes(&ctx.opts);
    let targets = targets(&ctx.opts);
    writeln!(
        out,
        "Medians of {} repetitions; CPU is `utime + stime` from `/proc/<pid>/stat` over the measured calls, per call; \
         switches are the context switches of the process's threads (`/proc/<pid>/task/*/status`), per call.\n",
        ctx.opts.reps
    )?;
    writeln!(
        out,
        "| target | sessions × calls | calls/s | p50 ms | p95 ms | p99 ms | errors | gateway CPU µs/call | echo CPU µs/call | client CPU µs/call | gateway switches/call | echo switches/call |"
    )?;
    writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for &target in &targets {
        for (i, &(s, c)) in shapes.iter().enumerate() {
            let cell = runs.cell(target, i);
            let errors = if cell.not_issued > 0 {
                format!("{} (+{} not issued)", cell.errors, cell.not_issued)
            } else {
                cell.errors.to_string()
            };
            writeln!(
                out,
                "| {} | {s} × {c} | {:.0} | {} | {} | {} | {errors} | {} | {} | {} | {} | {} |",
                target.label(),
                cell.calls_per_sec,
                ms(cell.p50),
                ms(cell.p95),
                ms(cell.p99),
                us(cell.gateway_cpu),
                us(cell.echo_cpu),
                us(cell.client_cpu),
                per_call(cell.gateway_switches),
                per_call(cell.echo_switches),
            )?;
        }
    }

    writeln!(
        out,
        "\nRatios gateway / direct (same shape; CPU: the gateway's CPU per call over the direct echo server's; \
         \"+ echo\": the gateway and the echo server behind it together):\n"
    )?;
    writeln!(
        out,
        "| target | sessions × calls | p50 latency | CPU per call | CPU per call + echo | throughput |"
    )?;
    writeln!(out, "|---|---|---:|---:|---:|---:|")?;
    for &target in targets.iter().filter(|t| t.is_gateway()) {
        for (i, &(s, c)) in shapes.iter().enumerate() {
            let (g, d) = (runs.cell(target, i), runs.cell(Target::DIRECT, i));
            writeln!(
                out,
                "| {} | {s} × {c} | {} | {} | {} | {:.0}% |",
                target.label(),
                ratio(g.p50 / d.p50),
                ratio(g.gateway_cpu / d.echo_cpu),
                ratio((g.gateway_cpu + g.echo_cpu) / d.echo_cpu),
                100.0 * g.calls_per_sec / d.calls_per_sec,
            )?;
        }
    }

    writeln!(
        out,
        "\nEvery repetition (calls/s · p50 ms · gateway CPU µs/call · echo CPU µs/call):\n"
    )?;
    writeln!(
        out,
        "| target | sessions × calls | {} |",
        (1..=ctx.opts.reps)
            .map(|r| format!("rep {r}"))
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    writeln!(out, "|---|---|{}", "---|".repeat(ctx.opts.reps))?;
    for &target in &targets {
        for (i, &(s, c)) in shapes.iter().enumerate() {
            let cells: Vec<String> = runs
                .of(target, i)
                .iter()
                .map(|r| {
                    format!(
                        "{:.0} · {} · {} · {}",
                        r.calls_per_sec(),
                        ms(r.latency_ms(0.5)),
                        us(r.cpu_us_per_call("gateway")),
                        us(r.cpu_us_per_call("echo"))
                    )
                })
                .collect();
            writeln!(out, "| {} | {s} × {c} | {} |", target.label(), cells.join(" | "))?;
        }
    }

    // Against the targets of issue 9.
    writeln!(
        out,
        "\nAgainst the targets of issue 9 (medians of this run; CPU: the gateway's CPU per call over the direct \
         echo server's, at most 1.8× with the HTTP downstream and 1.3× with stdio):\n"
    )?;
    let mut header = String::from("| target | CPU per call ratio |");
    let mut rule = String::from("|---|---|");
    for &(sessions, calls) in &shapes {
        if sessions == 1 {
            write!(header, " p50 at {sessions} × {calls} (≤ 2.5×) |")?;
        } else {
            write!(header, " throughput at {sessions} × {calls} (≥ 45%) |")?;
        }
        rule.push_str("---|");
    }
    writeln!(out, "{header} idle RSS (< 30 MB) |\n{rule}---|")?;
    for &target in targets.iter().filter(|t| t.is_gateway()) {
        let limit = if target.stdio { 1.3 } else { 1.8 };
        let ratios: Vec<String> = (0..shapes.len())
            .map(|i| {
                let r = runs.cell(target, i).gateway_cpu / runs.cell(Target::DIRECT, i).echo_cpu;
                let (lo, hi) = range(&runs.paired_cpu_ratios(target, i));
                let spread = if ctx.opts.reps > 1 {
                    format!(" ({}–{})", ratio(lo), ratio(hi))
                } else {
                    String::new()
                };
                format!("{} {}{spread}", ratio(r), verdict(r <= limit))
            })
            .collect();
        let mut row = format!("| {} | {} |", target.label(), ratios.join(" · "));
        for (i, &(sessions, _)) in shapes.iter().enumerate() {
            let (g, d) = (runs.cell(target, i), runs.cell(Target::DIRECT, i));
            if sessions == 1 {
                let r = g.p50 / d.p50;
                write!(row, " {} {} |", ratio(r), verdict(r <= 2.5))?;
            } else {
                let share = g.calls_per_sec / d.calls_per_sec;
                write!(row, " {:.0}% {} |", 100.0 * share, verdict(share >= 0.45))?;
            }
        }
        let idle = median(
            runs.idle_rss_kib
                .iter()
                .filter(|(t, _)| *t == target)
                .map(|(_, kib)| mb(*kib))
                .collect(),
        );
        writeln!(out, "{row} {idle:.1} MB {} |", verdict(idle < 30.0))?;
    }
    if ctx.opts.reps > 1 {
        writeln!(
            out,
            "\nIn brackets: the lowest and highest ratio of one repetition's gateway run over the same \
             repetition's direct run. How much the machine moved during this run, by the direct echo \
             server's CPU per call across the repetitions (lowest–highest, and the highest over the lowest):\n"
        )?;
        let spreads: Vec<String> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(sessions, calls))| {
                let cpu: Vec<f64> = runs
                    .of(Target::DIRECT, i)
                    .iter()
                    .map(|r| r.cpu_us_per_call("echo"))
                    .collect();
                let (lo, hi) = range(&cpu);
                format!("{sessions} × {calls}: {}–{} µs ({})", us(lo), us(hi), ratio(hi / lo))
            })
            .collect();
        writeln!(out, "{}", spreads.join("; "))?;
    }
    Ok(())
}

/// KiB as MB (10^6 bytes).
pub(crate) fn mb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e6
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Runs, Target, range};
    use crate::load::LoadResult;

    /// A run of 1000 calls in which process `name` spent `us` microseconds a call.
    fn run(name: &str, us: u64) -> LoadResult {
        LoadResult {
            ok: 1000,
            errors: 0,
            not_issued: 0,
            wall: Duration::from_secs(1),
            latencies: Vec::new(),
            cpu: vec![(name.to_owned(), Some(Duration::from_micros(us * 1000)))],
            switches: vec![(name.to_owned(), Some(2000))],
            client_cpu: Duration::ZERO,
            first_error: None,
        }
    }

    #[test]
    fn cpu_ratios_pair_each_repetitions_gateway_run_with_its_direct_run() {
        let gateway = Target::gateway(true, false);
        let mut runs = Runs::default();
        // The machine slows down by half in the second repetition: both sides feel it.
        for (direct, through) in [(40, 48), (60, 72), (40, 52)] {
            runs.runs.push((Target::DIRECT, 0, run("echo", direct)));
            runs.runs.push((gateway, 0, run("gateway", through)));
        }
        let ratios = runs.paired_cpu_ratios(gateway, 0);
        assert_eq!(ratios.len(), 3);
        let (lo, hi) = range(&ratios);
        assert!((lo - 1.2).abs() < 1e-9 && (hi - 1.3).abs() < 1e-9, "{ratios:?}");
        assert!(range(&[]).0.is_nan());
        assert_eq!(
            runs.cell(gateway, 0).gateway_switches,
            2.0,
            "2000 switches over 1000 calls"
        );
    }
}
