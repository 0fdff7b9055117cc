//! A real `redis-server` for the tests (Debian's package `redis-server`, 7.x; `valkey-server`
//! too): started on a free loopback port with a temporary directory and no persistence, stopped
//! (losing what it held, or keeping it: [`ValkeyServer::stop_keeping_data`]) and started again on
//! the same port, killed on drop.
//!
//! [`ValkeyServer::start_tls`] starts one that speaks only TLS (no plain-text port), with the
//! certificate of [`tls::ServerCertificate`](super::tls::ServerCertificate).
//!
//! Without the binary a test skips, with a note naming the package; under `CI=true` it fails
//! (`scripts/test` installs the package when it runs as root or in CI).

use std::{
    io::{Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use muster::auth::state::{SignInNotice, SignInNotices};
use tokio::sync::broadcast;

/// How long a server may take to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes a state key file (32 bytes, base64, as `openssl rand -base64 32` makes one) in `dir`,
/// for the replicas of a test to share; its path.
pub fn write_state_key(dir: &Path) -> PathBuf {
    let path = dir.join("state.key");
    std::fs::write(&path, "q0bS1u7m4mJg3Yl9o0Jc2m8b0l0Q9k3dYb1a2c3d4e8=\n").expect("writes the key");
    path
}

/// Publishes `notice` through `told` until `heard` receives one (the subscription is made in the
/// background), within ten seconds; what `heard` received.
pub async fn publish_until_heard(
    told: &dyn SignInNotices,
    heard: &mut broadcast::Receiver<SignInNotice>,
    notice: &SignInNotice,
) -> SignInNotice {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            told.publish(notice.clone()).await.expect("publish");
            if let Ok(Ok(got)) = tokio::time::timeout(Duration::from_millis(200), heard.recv()).await {
                return got;
            }
        }
    })
    .await
    .expect("the other store hears the notice")
}

/// A running redis-server on `127.0.0.1`.
#[derive(Debug)]
pub struct ValkeyServer {
    binary: PathBuf,
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// The TLS arguments of a server that speaks only TLS.
    tls: Option<Vec<String>>,
}

impl ValkeyServer {
    /// A server on a free loopback port; `None` (with a note) when no server binary is installed,
    /// a panic under `CI=true` then.
    pub fn start() -> Option<Self> {
        Self::start_with(None)
    }

    /// A server that speaks only TLS on a free loopback port, with `tls` (`--tls-cert-file`
    /// and so on, see [`ServerCertificate::args`](super::tls::ServerCertificate::args)) and
    /// `extra` arguments (`--requirepass`); `None` as [`ValkeyServer::start`].
    pub fn start_tls(tls: Vec<String>, extra: &[&str]) -> Option<Self> {
        let mut args = tls;
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        Self::start_with(Some(args))
    }

    fn start_with(tls: Option<Vec<String>>) -> Option<Self> {
        let Some(binary) = find_binary() else {
            let note = "no redis-server (or valkey-server) on PATH: install the Debian package \
                        `redis-server` (apt-get install redis-server) to run the Valkey tests";
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {note}");
            eprintln!("skipped: {note}");
            return None;
        };
        let mut dir = tempfile::tempdir().expect("a temporary directory");
        for _ in 0..5 {
            let port = free_port();
            let mut server = Self {
                binary: binary.clone(),
                port,
                dir,
                child: None,
                tls: tls.clone(),
            };
            if server.try_start() {
                return Some(server);
            }
            dir = server.into_dir();
        }
        panic!("redis-server did not start on a free loopback port in five tries");
    }

    /// The URL the store is given (`rediss://` for a TLS server).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The port it listens on (TLS only, for a TLS server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`, as the store names the server.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the server (SIGKILL: whatever it held is gone, as no persistence was kept, unless
    /// [`Self::stop_keeping_data`] wrote it before).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server keeping what it holds: written to its directory first (`SAVE`), and read
    /// back when it starts again ([`Self::restart`]), as a server with persistence does after an
    /// outage. Plain-text servers only.
    pub fn stop_keeping_data(&mut self) {
        self.command(&["SAVE"]);
        self.stop();
    }

    /// Starts the server again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.try_start() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start again on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every key and the raw bytes of its value (strings, hash fields, set and sorted-set
    /// members), read with plain commands.
    pub fn dump(&self) -> Vec<(String, Vec<u8>)> {
        let keys = self.command(&["KEYS", "*"]);
        let mut values = Vec::new();
        for key in keys
            .into_iter()
            .map(|k| String::from_utf8(k).expect("key names are UTF-8"))
        {
            let kind = self.command(&["TYPE", &key]).concat();
            let args: Vec<&str> = match kind.as_slice() {
                b"string" => vec!["GET", &key],
                b"hash" => vec!["HGETALL", &key],
                b"set" => vec!["SMEMBERS", &key],
                b"zset" => vec!["ZRANGE", &key, "0", "-1"],
                _ => continue,
            };
            for value in self.command(&args) {
                values.push((key.clone(), value));
            }
        }
        values
    }

    /// The bulk strings of the answer to `args` (one for a bulk string or an integer, each
    /// element of an array); panics on an error answer.
    pub fn command(&self, args: &[&str]) -> Vec<Vec<u8>> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connects to redis-server");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("a timeout");
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        stream.write_all(&request).expect("writes");
        stream.shutdown(Shutdown::Write).expect("half-closes");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("reads the answer");
        Resp { bytes: &answer, at: 0 }.read()
    }

    fn try_start(&mut self) -> bool {
        let port = self.port.to_string();
        let log = self.dir.path().join("redis.log");
        let _ = std::fs::remove_file(&log);
        let mut command = Command::new(&self.binary);
        match &self.tls {
            None => command.args(["--port", &port]),
            Some(tls) => command
                .args(["--port", "0", "--tls-port", &port])
                .args(tls)
                .arg("--logfile")
                .arg(&log),
        };
        let child = command
            .args(["--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return false; // exited: the port is taken
            }
            let ready = match &self.tls {
                None => ping(self.port),
                // Plain text gets no answer from a TLS port: its log says when it listens.
                Some(_) => std::fs::read_to_string(&log).is_ok_and(|l| l.contains("Ready to accept connections")),
            };
            if ready {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        false
    }

    fn into_dir(mut self) -> tempfile::TempDir {
        self.stop();
        let placeholder = tempfile::tempdir().expect("a temporary directory");
        std::mem::replace(&mut self.dir, placeholder)
    }
}

impl Drop for ValkeyServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn find_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["redis-server", "valkey-server"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds a loopback port");
    listener.local_addr().expect("its address").port()
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut answer = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
}

/// A reader of RESP2 answers, flattened into their strings.
struct Resp<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Resp<'_> {
    fn line(&mut self) -> &[u8] {
        let rest = &self.bytes[self.at..];
        let end = rest.windows(2).position(|w| w == b"\r\n").expect("a complete answer");
        self.at += end + 2;
        &rest[..end]
    }

    fn read(&mut self) -> Vec<Vec<u8>> {
        let line = self.line().to_vec();
        let (kind, rest) = line.split_first().expect("an answer");
        let number = || {
            std::str::from_utf8(rest)
                .ok()
                .and_then(|n| n.parse::<i64>().ok())
                .expect("a number")
        };
        match kind {
            b'+' | b':' => vec![rest.to_vec()],
            b'-' => panic!("redis-server answered an error: {}", String::from_utf8_lossy(rest)),
            b'$' => match usize::try_from(number()) {
                Ok(len) => {
                    let value = self.bytes[self.at..self.at + len].to_vec();
                    self.at += len + 2;
                    vec![value]
                }
                Err(_) => Vec::new(),
            },
            b'*' => (0..number().max(0)).flat_map(|_| self.read()).collect(),
            other => panic!("an unknown RESP type {:?}", char::from(*other)),
        }
    }
}
