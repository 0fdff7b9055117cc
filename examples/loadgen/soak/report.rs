//! The soak's report: the curve of the gateway's RSS and descriptors with the requests answered
//! in each interval, the requests by outcome, the recovery after each kill (read from the
//! timeline), what the gateway logged, and the verdict.

use std::{collections::BTreeMap, fmt::Write as _, sync::atomic::Ordering, time::Duration};

use super::{
    Kill, Sample, SoakOptions,
    traffic::{BUCKET, OUTCOMES, Outcome, Shared, TARGETS, Tally, Target, fold},
};
use crate::load::CALL_TIMEOUT;

/// The outage of `target` after a kill at `at`: the first failed request, the last failed one
/// before the next kill (or the end), and the first ok answer after that, as times from the
/// start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outage {
    pub(crate) first_failure: Option<Duration>,
    pub(crate) last_failure: Option<Duration>,
    pub(crate) recovered: Option<Duration>,
    pub(crate) failed: u64,
}

pub(crate) fn outage(series: &[(u32, u32)], at: Duration, until: Duration) -> Outage {
    let from = (at.as_millis() / BUCKET.as_millis()) as usize;
    let to = ((until.as_millis() / BUCKET.as_millis()) as usize).min(series.len());
    let time = |b: usize| BUCKET * b as u32;
    let window = &series[from.min(to)..to];
    let first = window.iter().position(|&(_, bad)| bad > 0);
    let last = window.iter().rposition(|&(_, bad)| bad > 0);
    let recovered = match last {
        Some(l) => window[l + 1..].iter().position(|&(ok, _)| ok > 0).map(|r| l + 1 + r),
        None => window.iter().position(|&(ok, _)| ok > 0),
    };
    Outage {
        first_failure: first.map(|b| time(from + b)),
        last_failure: last.map(|b| time(from + b)),
        recovered: recovered.map(|b| time(from + b)),
        failed: window.iter().map(|&(_, bad)| u64::from(bad)).sum(),
    }
}

/// What the gateway's log holds: lines with `panicked`, and the warnings and errors grouped.
#[derive(Debug, Default)]
pub(crate) struct LogSummary {
    pub(crate) bytes: u64,
    pub(crate) panics: Vec<String>,
    pub(crate) levels: BTreeMap<&'static str, u64>,
    pub(crate) grouped: BTreeMap<String, u64>,
}

pub(crate) fn read_log(path: &std::path::Path) -> LogSummary {
    let mut summary = LogSummary::default();
    let Ok(text) = std::fs::read_to_string(path) else {
        return summary;
    };
    summary.bytes = text.len() as u64;
    for line in text.lines() {
        let line = strip_ansi(line);
        let line = line.as_str();
        if line.contains("panicked") {
            summary.panics.push(line.to_owned());
        }
        for level in ["ERROR", "WARN"] {
            if let Some(i) = line.find(&format!(" {level} ")) {
                *summary.levels.entry(level).or_default() += 1;
                // Without the timestamp; digits folded so that the same event groups.
                *summary.grouped.entry(fold(&line[i + 1..])).or_default() += 1;
            }
        }
    }
    summary
}

/// `line` without its terminal colour codes (`ESC [ ... m`).
pub(crate) fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip to the final byte of the escape sequence.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub(crate) fn mb(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Everything the report is made of.
pub(crate) struct Report<'a> {
    pub(crate) opts: &'a SoakOptions,
    pub(crate) shared: &'a Shared,
    pub(crate) samples: &'a [Sample],
    pub(crate) baseline: &'a Sample,
    pub(crate) baseline_fds: String,
    pub(crate) warm_fds: String,
    pub(crate) end_fds: String,
    pub(crate) closed_fds: String,
    pub(crate) answered_by: &'a Sample,
    pub(crate) closed: &'a Sample,
    pub(crate) open_sessions: usize,
    pub(crate) kills: &'a [Kill],
    pub(crate) log: &'a LogSummary,
    pub(crate) kept: bool,
    pub(crate) exit: Option<std::process::ExitStatus>,
    pub(crate) zombies: usize,
    pub(crate) children: usize,
}

impl Report<'_> {
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let _ = self.write(&mut out);
        out
    }

    pub(crate) fn write(&self, out: &mut String) -> std::fmt::Result {
        let opts = self.opts;
        let secs = |d: Duration| d.as_secs_f64();
        writeln!(
            out,
            "Soak: {} sessions, {} s, the gateway with `echo0` (HTTP, killed at {} s and {} s, down {} s each time), `echo1` (stdio, killed at {} s){}; {}.\n",
            opts.sessions,
            opts.duration.as_secs(),
            (opts.duration / 3).as_secs(),
            (opts.duration * 2 / 3).as_secs(),
            opts.down.as_secs(),
            (opts.duration * 2 / 3).as_secs(),
            if opts.demo { ", `demo` (stdio)" } else { "" },
            match &opts.backoff {
                Some(b) => format!("MUSTER_MCPSERVER_INITIAL_BACKOFF={b}"),
                None => "the gateway's default reconnect backoff (30 s)".to_owned(),
            }
        )?;

        // The curve.
        writeln!(
            out,
            "| t (s) | RSS MB | fds | gateway CPU % | answers/s | error answers | unanswered | slowest ms | event |"
        )?;
        writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---|")?;
        writeln!(
            out,
            "| before | {:.1} | {} | | | | | | gateway ready, no session |",
            mb(self.baseline.rss_kib),
            self.baseline.fds
        )?;
        for pair in self.samples.windows(2) {
            let (prev, s) = (&pair[0], &pair[1]);
            let span = s.at - prev.at;
            let tally = self.shared.sum(prev.at, s.at);
            let cpu = (s.cpu.saturating_sub(prev.cpu)).as_secs_f64() / span.as_secs_f64() * 100.0;
            let mut events = Vec::new();
            if prev.at < opts.warmup && s.at + opts.sample / 2 >= opts.warmup {
                events.push("end of warm-up".to_owned());
            }
            for (n, k) in self.kills.iter().enumerate() {
                let within = |t: Duration| prev.at < t && t <= s.at;
                if within(k.at) {
                    events.push(match k.stdio_pid {
                        Some(stdio) => format!(
                            "kill {}: echo0 (pid {}) and echo1 (pid {stdio}) killed",
                            n + 1,
                            k.http_pid
                        ),
                        None => format!("kill {}: echo0 (pid {}) killed", n + 1, k.http_pid),
                    });
                }
                if k.http_restarted.is_some_and(within) {
                    events.push("echo0 started again (same port)".to_owned());
                }
                if let Some((t, pid)) = k.stdio_respawned
                    && within(t)
                {
                    events.push(format!("the gateway restarted echo1 (pid {pid})"));
                }
            }
            writeln!(
                out,
                "| {:.0} | {:.1} | {} | {:.0} | {:.0} | {} | {} | {} | {} |",
                secs(s.at),
                mb(s.rss_kib),
                s.fds,
                cpu,
                tally.answered() as f64 / span.as_secs_f64(),
                tally.error_answers(),
                tally.unanswered(),
                tally.slowest_ms,
                events.join("; ")
            )?;
        }
        writeln!(
            out,
            "| {:.0} | {:.1} | {} | | | | | | every session's last request answered; {} sessions open, idle |",
            secs(self.answered_by.at),
            mb(self.answered_by.rss_kib),
            self.answered_by.fds,
            self.open_sessions
        )?;
        writeln!(
            out,
            "| {:.0} | {:.1} | {} | | | | | | sessions closed (DELETE), the client's connections dropped |",
            secs(self.closed.at),
            mb(self.closed.rss_kib),
            self.closed.fds
        )?;

        // Totals.
        let total = self.shared.sum(Duration::ZERO, Duration::MAX);
        writeln!(out, "\nRequests by outcome:\n")?;
        let headers: String = OUTCOMES.iter().map(|o| format!(" {} |", o.label())).collect();
        writeln!(out, "| request |{headers} total |")?;
        writeln!(out, "|---|{}---:|", "---:|".repeat(OUTCOMES.len()))?;
        for t in TARGETS {
            let row = &total.counts[t as usize];
            let n: u64 = row.iter().sum();
            if n == 0 {
                continue;
            }
            let cells: String = row.iter().map(|c| format!(" {c} |")).collect();
            writeln!(out, "| {} |{cells} {n} |", t.label())?;
        }
        let sums: String = OUTCOMES
            .iter()
            .map(|&o| format!(" {} |", total.of(|_, x| x == o)))
            .collect();
        writeln!(out, "| all |{sums} {} |", total.of(|_, _| true))?;
        writeln!(
            out,
            "\nSessions replaced after a transport failure: {}; failed connection attempts: {}.",
            self.shared.reconnects.load(Ordering::Relaxed),
            self.shared.connect_failures.load(Ordering::Relaxed)
        )?;

        // Recovery.
        writeln!(
            out,
            "\nRecovery after each kill (times from the start of the load; \"recovered\" is the first ok answer after the last failed request to that server):\n"
        )?;
        writeln!(
            out,
            "| kill | server | killed at | back at | first failed request | last failed request | recovered | from kill | from restart | failed requests |"
        )?;
        writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
        let opt = |d: Option<Duration>| d.map_or_else(|| "–".to_owned(), |d| format!("{:.1} s", secs(d)));
        for (n, k) in self.kills.iter().enumerate() {
            let until = self
                .kills
                .get(n + 1)
                .map_or(opts.duration + CALL_TIMEOUT * 2, |next| next.at);
            let mut rows = vec![(Target::HttpEcho, "echo0 (HTTP)", k.http_restarted)];
            if k.stdio_pid.is_some() {
                rows.push((Target::StdioEcho, "echo1 (stdio)", k.stdio_respawned.map(|(t, _)| t)));
            }
            for (target, name, back) in rows {
                let o = outage(&self.shared.series(target), k.at, until);
                let delta = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
                    (Some(a), Some(b)) => format!("{:.1} s", secs(a.saturating_sub(b))),
                    _ => "–".to_owned(),
                };
                writeln!(
                    out,
                    "| {} | {name} | {:.1} s | {} | {} | {} | {} | {} | {} | {} |",
                    n + 1,
                    secs(k.at),
                    opt(back),
                    opt(o.first_failure),
                    opt(o.last_failure),
                    opt(o.recovered),
                    delta(o.recovered, Some(k.at)),
                    delta(o.recovered, back),
                    o.failed
                )?;
            }
        }

        // Messages.
        let messages = self.shared.messages.lock().unwrap_or_else(|e| e.into_inner());
        if !messages.is_empty() {
            writeln!(
                out,
                "\nWhat the failed requests were told (digits folded to N; first seen, from the start):\n"
            )?;
            writeln!(out, "| request | outcome | message | count | first seen |")?;
            writeln!(out, "|---|---|---|---:|---:|")?;
            let mut rows: Vec<_> = messages.iter().collect();
            rows.sort_by_key(|row| std::cmp::Reverse(row.1.0));
            for ((t, o, m), (count, first)) in rows.into_iter().take(20) {
                writeln!(
                    out,
                    "| {} | {} | {} | {count} | {:.1} s |",
                    t.label(),
                    o.label(),
                    m.replace('`', "'"),
                    *first as f64 / 1e3
                )?;
            }
        }

        // The log.
        writeln!(
            out,
            "\nThe gateway's log: {} KB, {} WARN and {} ERROR lines, {} with `panicked`{}; exit after SIGTERM: {}.",
            self.log.bytes / 1024,
            self.log.levels.get("WARN").copied().unwrap_or(0),
            self.log.levels.get("ERROR").copied().unwrap_or(0),
            self.log.panics.len(),
            if self.kept {
                format!(" (copied to `{}`)", self.opts.keep_log.display())
            } else {
                String::new()
            },
            match self.exit {
                Some(status) => status.to_string(),
                None => "none within 15 s, killed".to_owned(),
            }
        )?;
        if !self.log.grouped.is_empty() {
            writeln!(out, "\n| log line (digits folded) | count |\n|---|---:|")?;
            let mut rows: Vec<_> = self.log.grouped.iter().collect();
            rows.sort_by(|a, b| b.1.cmp(a.1));
            for (line, count) in rows.into_iter().take(15) {
                writeln!(out, "| {} | {count} |", line.replace('`', "'"))?;
            }
        }
        for line in self.log.panics.iter().take(5) {
            writeln!(out, "\n    {line}")?;
        }

        // Descriptors.
        writeln!(
            out,
            "\nThe gateway's descriptors by kind: before the first session {}; at the end of the warm-up {}; at the end of the load {}; after closing the sessions {}. Its children at the end: {} ({} zombies).",
            self.baseline_fds, self.warm_fds, self.end_fds, self.closed_fds, self.children, self.zombies
        )?;

        self.write_verdict(out, &total)
    }

    pub(crate) fn write_verdict(&self, out: &mut String, total: &Tally) -> std::fmt::Result {
        let opts = self.opts;
        let mut verdict = Vec::new();
        let unanswered = total.unanswered();
        let wrong = total.of(|_, o| o == Outcome::Wrong);
        verdict.push(if unanswered == 0 {
            format!(
                "**every request answered**: {} requests, {} ok, {} error answers",
                total.of(|_, _| true),
                total.of(|_, o| o == Outcome::Ok),
                total.error_answers()
            )
        } else {
            format!(
                "**not every request answered**: {} of {} ({} without an answer in 30 s, {} transport failures)",
                unanswered,
                total.of(|_, _| true),
                total.of(|_, o| o == Outcome::NoAnswer),
                total.of(|_, o| o == Outcome::Transport)
            )
        });
        if wrong > 0 {
            verdict.push(format!("**{wrong} wrong answers**"));
        }
        verdict.push(if self.log.panics.is_empty() {
            "no panic in the gateway's log".to_owned()
        } else {
            format!(
                "**{} lines with `panicked` in the gateway's log**",
                self.log.panics.len()
            )
        });
        let warm = self
            .samples
            .iter()
            .find(|s| s.at + opts.sample / 2 >= opts.warmup)
            .or(self.samples.last());
        if let (Some(warm), Some(last)) = (warm, self.samples.last()) {
            let after: Vec<&Sample> = self.samples.iter().filter(|s| s.at >= warm.at).collect();
            let peak = after.iter().map(|s| s.rss_kib).max().unwrap_or(0);
            let change = (last.rss_kib as f64 - warm.rss_kib as f64) / (warm.rss_kib.max(1) as f64);
            let flat = change.abs() <= opts.rss_tolerance;
            verdict.push(format!(
                "RSS {}: {:.1} MB at {:.0} s, {:.1} MB at {:.0} s ({:+.1}%; tolerance ±{:.0}%), peak after the warm-up {:.1} MB, slope {:+.2} MB/min",
                if flat { "**flat**" } else { "**not flat**" },
                mb(warm.rss_kib),
                warm.at.as_secs_f64(),
                mb(last.rss_kib),
                last.at.as_secs_f64(),
                change * 100.0,
                opts.rss_tolerance * 100.0,
                mb(peak),
                slope_mb_per_min(&after)
            ));
            let fd_diff = last.fds.abs_diff(warm.fds);
            verdict.push(format!(
                "descriptors under load {}: {} at {:.0} s, {} at {:.0} s (tolerance ±{})",
                if fd_diff <= opts.fd_tolerance {
                    "**steady**"
                } else {
                    "**not steady**"
                },
                warm.fds,
                warm.at.as_secs_f64(),
                last.fds,
                last.at.as_secs_f64(),
                opts.fd_tolerance
            ));
        }
        let back = self.closed.fds.abs_diff(self.baseline.fds) <= 2;
        verdict.push(format!(
            "descriptors after closing every session {}: {} against {} before the first session",
            if back {
                "**back to the start**"
            } else {
                "**not back to the start**"
            },
            self.closed.fds,
            self.baseline.fds
        ));
        if self.zombies > 0 {
            verdict.push(format!("**{} zombie children**", self.zombies));
        }
        writeln!(out, "\nVerdict:\n")?;
        for line in verdict {
            writeln!(out, "- {line}")?;
        }
        Ok(())
    }
}

/// The least-squares slope of RSS over time, in MB per minute.
pub(crate) fn slope_mb_per_min(samples: &[&Sample]) -> f64 {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return 0.0;
    }
    let xs: Vec<f64> = samples.iter().map(|s| s.at.as_secs_f64() / 60.0).collect();
    let ys: Vec<f64> = samples.iter().map(|s| mb(s.rss_kib)).collect();
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let cov: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let var: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    if var == 0.0 { 0.0 } else { cov / var }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_ends_at_the_first_ok_after_the_last_failure() {
        // Buckets of 100 ms: ok until 1.0 s, failures at 1.2 s and 1.5 s, ok again from 1.7 s.
        let mut series = vec![(5, 0); 30];
        series[12] = (0, 3);
        series[13] = (2, 0);
        series[15] = (1, 1);
        series[16] = (0, 0);
        let o = outage(&series, Duration::from_secs(1), Duration::from_secs(3));
        assert_eq!(o.first_failure, Some(Duration::from_millis(1200)));
        assert_eq!(o.last_failure, Some(Duration::from_millis(1500)));
        assert_eq!(o.recovered, Some(Duration::from_millis(1700)));
        assert_eq!(o.failed, 4);
    }

    #[test]
    fn log_lines_lose_their_colours() {
        assert_eq!(
            strip_ansi("\u{1b}[2m2026\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m lost"),
            "2026  WARN lost"
        );
    }
}
