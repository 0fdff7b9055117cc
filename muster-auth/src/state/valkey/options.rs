//! [`ValkeyOptions`]: which Valkey server, database and key prefix a [`ValkeyStore`](super::ValkeyStore)
//! uses, with muster's names for them (`aggregator.oauth.server.storage.valkey`).

use muster_core::BoxError;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::Secret;

pub use muster_core::config::DEFAULT_VALKEY_KEY_PREFIX as DEFAULT_KEY_PREFIX;

/// The port of a `url` without one.
const DEFAULT_PORT: u16 = 6379;

/// How long a transport session's grant stays in Valkey unused (see
/// [`ValkeyOptions::with_session_grant_ttl`]).
pub const DEFAULT_SESSION_GRANT_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// Where the sign-in state is kept in Valkey.
///
/// ```
/// use muster_auth::{Secret, state::ValkeyOptions};
///
/// let options = ValkeyOptions::new("valkey.muster:6379")
///     .with_password(Secret::new("from a file"))
///     .with_tls(true)
///     .with_db(2);
/// assert_eq!(options.key_prefix(), "muster:");
/// assert_eq!(format!("{options:?}").contains("from a file"), false);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ValkeyOptions {
    url: String,
    password: Option<Secret>,
    tls: bool,
    tls_server_name: Option<String>,
    key_prefix: String,
    db: i64,
    session_grant_ttl: std::time::Duration,
}

impl ValkeyOptions {
    /// The server at `url`: `host:port` (the port defaults to 6379), `redis://[:password@]host:port[/db]`,
    /// or `rediss://...` for TLS (`valkey://` and `valkeys://` are the same).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            password: None,
            tls: false,
            tls_server_name: None,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            db: 0,
            session_grant_ttl: DEFAULT_SESSION_GRANT_TTL,
        }
    }

    /// Authenticates with `password` (instead of the URL's).
    pub fn with_password(mut self, password: Secret) -> Self {
        self.password = Some(password);
        self
    }

    /// Speaks TLS to the server (as a `rediss://` URL does), checking its certificate against
    /// the system's roots.
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// The name the server's certificate must carry. The connection checks the certificate
    /// against the URL's host, so this must be that host: a different name is refused (give the
    /// URL by the certificate's name instead).
    pub fn with_tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls_server_name = Some(name.into());
        self
    }

    /// What every key of the store starts with (default `muster:`).
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// The database number (default 0, or the URL's).
    pub fn with_db(mut self, db: i64) -> Self {
        self.db = db;
        self
    }

    /// How long the grants of a transport session stay unused (default
    /// [`DEFAULT_SESSION_GRANT_TTL`], a day; at least a second). A transport session's grants
    /// serve only that session: when its replica is killed, nothing ends the session, and the
    /// grants expire instead of staying forever. Each read of a grant starts its time again, so a
    /// session in use keeps them. The grants of people and principals (which outlive a
    /// transport) never expire.
    pub fn with_session_grant_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.session_grant_ttl = ttl.max(std::time::Duration::from_secs(1));
        self
    }

    /// What every key of the store starts with.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// How long the grants of a transport session stay unused.
    pub fn session_grant_ttl(&self) -> std::time::Duration {
        self.session_grant_ttl
    }

    /// The connection these options describe.
    pub(super) fn connection_info(&self) -> Result<ConnectionInfo, ValkeyOptionsError> {
        let url = self.url.trim();
        let url = match url.split_once("://") {
            Some(("redis" | "valkey", rest)) => format!("redis://{rest}"),
            Some(("rediss" | "valkeys", rest)) => format!("rediss://{rest}"),
            Some(_) => {
                return Err(ValkeyOptionsError::InvalidUrl {
                    problem: "its scheme is not redis://, rediss://, valkey:// or valkeys://",
                });
            }
            None if url.is_empty() => return Err(ValkeyOptionsError::InvalidUrl { problem: "it is empty" }),
            None if url.contains(['/', '@']) => {
                return Err(ValkeyOptionsError::InvalidUrl {
                    problem: "without a scheme it must be host:port",
                });
            }
            None if url
                .rsplit_once(':')
                .is_some_and(|(_, port)| port.parse::<u16>().is_ok()) =>
            {
                format!("redis://{url}")
            }
            None => format!("redis://{url}:{DEFAULT_PORT}"),
        };
        let info = url
            .as_str()
            .into_connection_info()
            .map_err(|_| ValkeyOptionsError::InvalidUrl {
                problem: "it does not parse as a server's URL",
            })?;
        let (host, port, tls) = match info.addr() {
            ConnectionAddr::Tcp(host, port) => (host.clone(), *port, self.tls),
            ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port, true),
            _ => {
                return Err(ValkeyOptionsError::InvalidUrl {
                    problem: "it does not name a host",
                });
            }
        };
        if let Some(name) = &self.tls_server_name
            && (!tls || !name.eq_ignore_ascii_case(&host))
        {
            return Err(ValkeyOptionsError::TlsServerName {
                name: name.clone(),
                host,
                tls,
            });
        }
        let addr = if tls {
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host, port)
        };
        let mut redis = info.redis_settings().clone();
        if let Some(password) = &self.password {
            redis = redis.set_password(password.expose());
        }
        if self.db != 0 {
            redis = redis.set_db(self.db);
        }
        Ok(info.set_addr(addr).set_redis_settings(redis))
    }
}

/// Why [`ValkeyOptions`] describe no store. Never contains the URL (it may hold a password).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValkeyOptionsError {
    /// The URL is not a server's.
    #[error("the valkey url is not usable: {problem}")]
    InvalidUrl {
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A TLS server name that is not the URL's host (or without TLS).
    #[error(
        "the valkey tlsServerName {name:?} must be the url's host {host:?}{}: the connection checks the \
         certificate against the url's host, so give the url by the certificate's name",
        if *tls { "" } else { " and TLS must be enabled" }
    )]
    TlsServerName {
        /// The name given.
        name: String,
        /// The URL's host.
        host: String,
        /// Whether TLS is enabled.
        tls: bool,
    },
    /// The store was made outside a Tokio runtime (its connection runs on one).
    #[error("the valkey store must be made inside a Tokio runtime")]
    NoRuntime,
    /// The client could not be made.
    #[error("the {store} client cannot be made: {source}")]
    Client {
        /// Which store.
        store: String,
        /// Why.
        #[source]
        source: BoxError,
    },
}
