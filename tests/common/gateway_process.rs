//! The reference gateway binary as a child process (`gateway serve`, usually): its stderr kept
//! line by line, where it serves read from its log, stopped with SIGTERM or killed on drop.
//!
//! ```ignore
//! let mut command = Command::new(gateway_binary());
//! command.args(["serve", "--config-path", dir, "--port", "0"]);
//! let gateway = GatewayChild::spawn(command);
//! let endpoint = gateway.endpoint(Duration::from_secs(60)); // http://127.0.0.1:<port>/mcp
//! assert!(gateway.log().contains("configuration loaded"));
//! ```

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

/// What the gateway logs once it listens: `serving MCP at <url>`.
const SERVING: &str = "serving MCP at ";

/// A gateway child process; killed on drop.
pub struct GatewayChild {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl GatewayChild {
    /// Spawns `command` with stdin and stdout closed and stderr kept.
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the gateway");
        let stderr = child.stderr.take().expect("piped stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        Self { child, lines }
    }

    /// Its stderr so far, line by line.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        self.lines().join("\n")
    }

    /// The URL it says it serves MCP at, waiting up to `timeout`; panics with the log when it
    /// does not say.
    pub fn endpoint(&self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let served = self.lines().iter().find_map(|line| {
                let (_, rest) = line.split_once(SERVING)?;
                Some(
                    rest.chars()
                        .take_while(|c| !c.is_whitespace() && *c != '\x1b')
                        .collect(),
                )
            });
            if let Some(url) = served {
                return url;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not say where it serves within {timeout:?}; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits up to `timeout` until its log holds `text`; the log then.
    pub async fn log_shows(&self, text: &str, timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let log = self.log();
            if log.contains(text) {
                return log;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the log never showed {text:?}:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops it as an operator would (SIGTERM: a graceful shutdown), killing it after 10 s, and
    /// returns everything it logged.
    pub fn stop(mut self) -> Vec<String> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The reader thread drains the pipe after the process ends.
        std::thread::sleep(Duration::from_millis(200));
        self.lines()
    }
}

impl Drop for GatewayChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
