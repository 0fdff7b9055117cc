//! haproxy (Debian's package `haproxy`, 2.6) on a loopback port in front of gateway replicas,
//! routing as `docs/replicas.md` says: a request with `Mcp-Session-Id` goes to the replica that
//! answered the `initialize` which gave that id (a stick table filled from the response header,
//! matched on the request header), any other request (an `initialize`, a stateless 2026-07-28
//! request, a sign-in callback) round-robin; a replica that fails its health check (`GET
//! /health`) is taken out, and its sessions' requests go to another, which answers 404. Each
//! answer says which replica gave it (`x-served-by`).
//!
//! Without the binary a test skips, with a note naming the package; under `CI=true` it fails
//! (`scripts/test` installs the package when it runs as root or in CI).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use super::replicas::free_port;

/// How long haproxy may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The routing of `docs/replicas.md`, for `backends` (name and loopback port), listening on
/// `port`. `{admin}` is the admin socket's path.
pub fn config(port: u16, backends: &[(String, u16)], admin: &Path) -> String {
    let servers: String = backends
        .iter()
        .map(|(name, port)| format!("    server {name} 127.0.0.1:{port} check\n"))
        .collect();
    let admin = admin.display();
    format!(
        "global
    maxconn 2000
    stats socket {admin} mode 600 level admin

defaults
    mode http
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    timeout http-keep-alive 10s
    # A request whose replica is down (or refused the connection) goes to another one.
    option redispatch
    retries 2

frontend mcp
    bind 127.0.0.1:{port}
    default_backend muster

backend muster
    balance roundrobin
    # Sessionful clients (2025-11-25 and before): the replica that answered the initialize
    # (its Mcp-Session-Id response header) gets every request naming that session.
    stick-table type string len 64 size 1m expire 1h
    stick match req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
    # Health: a replica that stops answering /health is taken out within two seconds.
    option httpchk GET /health
    http-check expect status 200
    default-server inter 1s fall 2 rise 1
    # For the tests: which replica answered.
    http-response set-header x-served-by %[srv_name]
{servers}"
    )
}

/// A running haproxy; killed on drop.
#[derive(Debug)]
pub struct Haproxy {
    pub port: u16,
    config: String,
    admin: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Haproxy {
    /// haproxy in front of `backends` on a free loopback port; `None` (with a note) when it is
    /// not installed, a panic under `CI=true` then.
    pub fn start(backends: &[(String, u16)]) -> Option<Self> {
        Self::start_on(free_port(), backends)
    }

    /// As [`Self::start`], on `port` (the replicas' public URL names it before they start).
    pub fn start_on(port: u16, backends: &[(String, u16)]) -> Option<Self> {
        let binary = installed()?;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let admin = dir.path().join("admin.sock");
        let config = config(port, backends, &admin);
        let file = dir.path().join("haproxy.cfg");
        std::fs::write(&file, &config).expect("writes haproxy.cfg");
        let check = Command::new(&binary)
            .args(["-c", "-q", "-f"])
            .arg(&file)
            .output()
            .expect("haproxy -c runs");
        assert!(
            check.status.success(),
            "haproxy refuses the configuration: {}\n{config}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(&binary)
            .args(["-db", "-f"])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts");
        let mut haproxy = Self {
            port,
            config,
            admin,
            child,
            _dir: dir,
        };
        // Ready once it listens on the port and on its admin socket: the two are bound one after
        // the other, and a test that asks the socket right away found no file there.
        let deadline = Instant::now() + START_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
            || std::os::unix::net::UnixStream::connect(&haproxy.admin).is_err()
        {
            if let Ok(Some(status)) = haproxy.child.try_wait() {
                panic!("haproxy exited ({status}) before listening on {port} and its admin socket");
            }
            assert!(
                Instant::now() < deadline,
                "haproxy did not listen on {port} and its admin socket"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(haproxy)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The MCP endpoint through it.
    pub fn mcp(&self) -> String {
        format!("{}/mcp", self.base())
    }

    /// The configuration it runs.
    pub fn config(&self) -> &str {
        &self.config
    }

    /// Waits up to `timeout` until haproxy sees `server` as up (`true`) or down (`false`).
    pub fn await_server(&self, server: &str, up: bool, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let state = self.admin_command("show servers state muster");
            // Columns: be_id be_name srv_id srv_name srv_addr srv_op_state ... (2 = running).
            let running = state.lines().any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.get(3) == Some(&server) && fields.get(5) == Some(&"2")
            });
            if running == up {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "haproxy did not see {server} {} within {timeout:?}:\n{state}",
                if up { "up" } else { "down" }
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The stick table: each session id haproxy routes and the replica it routes it to.
    pub fn sessions(&self) -> Vec<(String, String)> {
        let table = self.admin_command("show table muster");
        table
            .lines()
            .filter_map(|line| {
                let field = |name: &str| {
                    line.split_whitespace()
                        .find_map(|f| f.strip_prefix(name))
                        .map(str::to_owned)
                };
                let key = field("key=")?;
                let server = field("server_key=").or_else(|| field("server_id=").map(|id| format!("r{id}")))?;
                Some((key, server))
            })
            .collect()
    }

    /// Puts `server` in `state` (`ready`, `drain`: no new sessions and no stateless requests, the
    /// sessions it holds still routed to it; `maint`).
    pub fn set_state(&self, server: &str, state: &str) {
        let answer = self.admin_command(&format!("set server muster/{server} state {state}"));
        assert!(
            answer.trim().is_empty(),
            "haproxy refused the state {state} of {server}: {answer}"
        );
    }

    /// The answer of haproxy's admin socket to `command`.
    pub fn admin_command(&self, command: &str) -> String {
        use std::io::{Read, Write};
        let mut socket = std::os::unix::net::UnixStream::connect(&self.admin).expect("connects to haproxy's socket");
        socket
            .write_all(format!("{command}\n").as_bytes())
            .expect("writes the command");
        let mut answer = String::new();
        socket.read_to_string(&mut answer).expect("reads the answer");
        answer
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The haproxy binary; `None` with a note when it is not on PATH (a panic under `CI=true`).
fn installed() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("haproxy"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        let note = "no haproxy on PATH: install the Debian package `haproxy` (apt-get install haproxy) to run the \
                    replica tests behind a load balancer";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {note}");
        eprintln!("skipped: {note}");
    }
    found
}
