//! [`Link`]: the store's connection to its server, made on first use and again after it broke,
//! over TCP or over TLS that this module sets up itself.
//!
//! The `redis` crate checks a server's certificate against the host it dials and nothing else:
//! it can neither dial `127.0.0.1` and check the name `valkey.test` (`tlsServerName`, as Go
//! muster's valkey-go client does), nor hand its connection manager a connection made elsewhere.
//! So the store makes its streams here (TCP, then TLS with rustls: the certificate checked for
//! the server name against the roots of [`Tls`]) and gives each to a `redis`
//! [`MultiplexedConnection`] or [`PubSub`], which speak the protocol over it.
//!
//! A command that fails because the connection broke (an I/O error, a dropped connection, a
//! timeout) fails, and the next command connects again, as the connection manager did. Connecting
//! (TCP, TLS, `AUTH`/`SELECT`) is bounded by [`Target::timeout`], so a server that speaks
//! something else (plain text to a TLS port) or nothing fails the command in that time instead of
//! hanging; the commands that waited for the same attempt fail with it.

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use redis::{
    AsyncConnectionConfig, Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value,
    aio::{ConnectionLike, MultiplexedConnection, PubSub},
};
use rustls::pki_types::ServerName;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
    sync::Mutex,
};

/// A byte stream to the server: TCP or TLS over TCP.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// TLS to the server: what its certificate is checked against.
#[derive(Clone)]
pub(super) struct Tls {
    connector: tokio_rustls::TlsConnector,
    /// The name the certificate must carry (a DNS name or an IP address).
    name: ServerName<'static>,
}

impl Tls {
    /// TLS that checks the certificate for `name` against `roots`.
    pub(super) fn new(roots: rustls::RootCertStore, name: ServerName<'static>) -> Result<Self, rustls::Error> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            name,
        })
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Where the server is and how to speak to it.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) tls: Option<Tls>,
    /// The password, database and protocol (`redis` sends `AUTH` and `SELECT` on connecting).
    pub(super) redis: redis::RedisConnectionInfo,
    /// How long connecting, and each answer, may take.
    pub(super) timeout: Duration,
}

impl Target {
    /// A stream to the server, TLS set up when asked for.
    async fn stream(&self) -> RedisResult<Box<dyn Stream>> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
        tcp.set_nodelay(true)?;
        Ok(match &self.tls {
            Some(tls) => Box::new(tls.connector.connect(tls.name.clone(), tcp).await?),
            None => Box::new(tcp),
        })
    }

    /// `work` within the timeout; a timeout is an I/O error, as a broken connection's.
    async fn bounded<T>(&self, work: impl Future<Output = RedisResult<T>>) -> RedisResult<T> {
        match tokio::time::timeout(self.timeout, work).await {
            Ok(done) => done,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {:?}", self.timeout),
            )
            .into()),
        }
    }

    async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        self.bounded(async {
            let config = AsyncConnectionConfig::new().set_response_timeout(Some(self.timeout));
            let (mut connection, driver) =
                MultiplexedConnection::new_with_config(&self.redis, self.stream().await?, config).await?;
            tokio::spawn(driver);
            // A server that wants a password nobody gave answers every command `NOAUTH`: asked
            // here, the store fails saying so. Met first inside a transaction (`MULTI` refused),
            // `redis` 1.8.1's connection task panics on an overflow and the store could only
            // tell of a broken pipe.
            redis::cmd("PING").query_async::<()>(&mut connection).await?;
            Ok(connection)
        })
        .await
    }

    /// A connection of its own for pub/sub.
    pub(super) async fn pubsub(&self) -> RedisResult<PubSub> {
        self.bounded(async { PubSub::new(&self.redis, self.stream().await?).await })
            .await
    }
}

/// The store's connection: made on first use, shared by every command, made again after it
/// broke. Cheap to clone (clones share it).
#[derive(Debug, Clone)]
pub(super) struct Link {
    target: Arc<Target>,
    slot: Arc<Mutex<Slot>>,
    /// How many attempts to connect have failed (read before waiting for the slot).
    failed_attempts: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct Slot {
    /// The connection and its number (a failure forgets only the connection it happened on).
    connection: Option<(u64, MultiplexedConnection)>,
    /// Why the last attempt to connect failed.
    failure: Option<RedisError>,
}

/// Numbers the connections of every link.
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

impl Link {
    /// A link to `target`; connects on first use.
    pub(super) fn new(target: Target) -> Self {
        Self {
            target: Arc::new(target),
            slot: Arc::default(),
            failed_attempts: Arc::default(),
        }
    }

    /// Where it connects to.
    pub(super) fn target(&self) -> &Arc<Target> {
        &self.target
    }

    /// The connection, made now if there is none. One attempt at a time: the commands that
    /// waited for an attempt that failed fail with it, so that a server that never answers
    /// holds each command for one attempt at most, not one per command ahead of it.
    async fn connection(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let failed_before = self.failed_attempts.load(Ordering::Acquire);
        let mut slot = self.slot.lock().await;
        if let Some(connection) = slot.connection.as_ref() {
            return Ok(connection.clone());
        }
        if self.failed_attempts.load(Ordering::Acquire) != failed_before
            && let Some(failure) = &slot.failure
        {
            return Err(failure.clone());
        }
        match self.target.connect().await {
            Ok(connection) => {
                let connection = (CONNECTIONS.fetch_add(1, Ordering::Relaxed), connection);
                slot.connection = Some(connection.clone());
                slot.failure = None;
                Ok(connection)
            }
            Err(e) => {
                slot.failure = Some(e.clone());
                self.failed_attempts.fetch_add(1, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Forgets connection `number` when `error` says it broke.
    async fn check(&self, number: u64, error: &RedisError) {
        if error.is_io_error() || error.is_unrecoverable_error() || error.is_timeout() {
            let mut slot = self.slot.lock().await;
            if slot.connection.as_ref().is_some_and(|(n, _)| *n == number) {
                slot.connection = None;
            }
        }
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (number, mut connection) = self.connection().await?;
            let answer = connection.send_packed_command(cmd).await;
            if let Err(e) = &answer {
                self.check(number, e).await;
            }
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (number, mut connection) = self.connection().await?;
            let answers = connection.send_packed_commands(pipeline, offset, count).await;
            if let Err(e) = &answers {
                self.check(number, e).await;
            }
            answers
        })
    }

    fn get_db(&self) -> i64 {
        self.target.redis.db()
    }
}
