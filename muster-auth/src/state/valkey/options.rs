//! [`ValkeyOptions`]: which Valkey server, database and key prefix a [`ValkeyStore`](super::ValkeyStore)
//! uses, with muster's names for them (`aggregator.oauth.server.storage.valkey`).

use std::time::Duration;

use muster_core::BoxError;
use redis::{ConnectionAddr, IntoConnectionInfo};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};

use super::link::{Target, Tls};
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
    tls_ca: Option<Vec<u8>>,
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
            tls_ca: None,
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
    /// the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured) or the CA of
    /// [`with_tls_ca`](Self::with_tls_ca).
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// The name the server's certificate must carry (sent as SNI too), when it is not the URL's
    /// host: the store still dials the URL's host (`rediss://127.0.0.1:6380` with the name
    /// `valkey.test`). Needs TLS.
    pub fn with_tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls_server_name = Some(name.into());
        self
    }

    /// Trusts the CA certificates in `pem` (one or more, PEM) for the server's certificate,
    /// instead of the system's roots: a server whose certificate comes from a private CA. Needs
    /// TLS.
    pub fn with_tls_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_ca = Some(pem.into());
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

    /// The server these options describe and how to speak to it, each connection and answer
    /// bounded by `timeout`.
    pub(super) fn target(&self, timeout: Duration) -> Result<Target, ValkeyOptionsError> {
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
        let tls = if tls {
            Some(self.tls(&host)?)
        } else if let Some(name) = &self.tls_server_name {
            return Err(ValkeyOptionsError::TlsServerName {
                name: name.clone(),
                problem: "it needs TLS (tlsEnabled, or a rediss:// url)",
            });
        } else if self.tls_ca.is_some() {
            return Err(ValkeyOptionsError::TlsCa {
                problem: "it needs TLS (tlsEnabled, or a rediss:// url)".into(),
            });
        } else {
            None
        };
        let mut redis = info.redis_settings().clone();
        if let Some(password) = &self.password {
            redis = redis.set_password(password.expose());
        }
        if self.db != 0 {
            redis = redis.set_db(self.db);
        }
        Ok(Target {
            host,
            port,
            tls,
            redis,
            timeout,
        })
    }

    /// TLS to `host`: its certificate checked for the server name (the host unless one is given)
    /// against the CA given, or else the system's roots.
    fn tls(&self, host: &str) -> Result<Tls, ValkeyOptionsError> {
        let name = self.tls_server_name.as_deref().unwrap_or(host);
        let server_name = ServerName::try_from(name.to_owned()).map_err(|_| ValkeyOptionsError::TlsServerName {
            name: name.to_owned(),
            problem: "it is neither a DNS name nor an IP address",
        })?;
        let mut roots = rustls::RootCertStore::empty();
        match &self.tls_ca {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| ValkeyOptionsError::TlsCa {
                        problem: format!("it is not PEM: {e}"),
                    })?;
                    roots.add(cert).map_err(|e| ValkeyOptionsError::TlsCa {
                        problem: format!("a certificate in it is not a CA's: {e}"),
                    })?;
                }
                if roots.is_empty() {
                    return Err(ValkeyOptionsError::TlsCa {
                        problem: "it holds no certificate".into(),
                    });
                }
            }
            None => {
                let system = rustls_native_certs::load_native_certs();
                for error in &system.errors {
                    tracing::warn!(%error, "a system root certificate cannot be read for valkey's TLS");
                }
                roots.add_parsable_certificates(system.certs);
            }
        }
        Tls::new(roots, server_name).map_err(|e| ValkeyOptionsError::Client {
            store: format!("valkey at {host}"),
            source: e.into(),
        })
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
    /// A TLS server name that is not a name or an address, or given without TLS.
    #[error("the valkey tlsServerName {name:?} is not usable: {problem}")]
    TlsServerName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The CA certificates to trust are not usable, or given without TLS.
    #[error("the valkey tlsCaFile is not usable: {problem}")]
    TlsCa {
        /// What is wrong with them.
        problem: String,
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
