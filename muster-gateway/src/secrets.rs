//! Where the gateway reads the Secrets an MCPServer names: the values of its `headersFrom`
//! headers, read each time it connects, the client credentials of its token exchange
//! (`auth.tokenExchange.clientCredentialsSecretRef`) and of the client registered out of band
//! with its pinned authorization server (`auth.authorizationServer.clientCredentialsSecretRef`).
//!
//! In Kubernetes they are Secrets read with muster's ServiceAccount (`muster-kube`'s
//! `KubeSecrets`). Filesystem mode has no Secret reader of its own; a gateway may be given one
//! ([`SecretSource`]): the config directory's `secrets/` folder ([`DirectorySecrets`], one
//! Kubernetes-shaped Secret document per file, `secrets/<name>.yaml` with `stringData` or base64
//! `data`), or values handed over by the embedding program ([`StaticSecrets`]).
//!
//! ```
//! use muster_gateway::secrets::{SecretSource, StaticSecrets};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let secrets = StaticSecrets::default().with("exchange-client", "client-id", "muster");
//! assert_eq!(secrets.get(None, "exchange-client", "client-id").await.unwrap().expose(), "muster");
//! let missing = secrets.get(None, "exchange-client", "client-secret").await.unwrap_err();
//! assert!(missing.to_string().contains("client-secret"), "{missing}");
//! # }
//! ```

use std::{collections::BTreeMap, path::PathBuf};

use futures::future::BoxFuture;
use muster_auth::Secret;
use muster_core::crd::{ClientCredentialsSecretRef, MCPServer};

/// How the text of a [`SecretError::PolicyNotInForce`] begins (followed by `: ` and why).
pub const POLICY_NOT_IN_FORCE: &str = "MCPServer Secret reference policy is not in force";

/// Why a Secret could not be read. The text names the Secret and the key, never a value; the
/// kind is what a caller branches on (a server's Ready reason, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// Missing, refused or unreadable, as the text says.
    #[error("{0}")]
    Refused(String),
    /// Not read at all: the reader reads only while an admission policy guards the Secret
    /// references, and it is not in force (the text begins with [`POLICY_NOT_IN_FORCE`]).
    #[error("{0}")]
    PolicyNotInForce(String),
}

impl SecretError {
    /// The refusal of a reader whose guarding policy is not in force, for `reason`.
    pub fn policy_not_in_force(reason: impl std::fmt::Display) -> Self {
        Self::PolicyNotInForce(format!("{POLICY_NOT_IN_FORCE}: {reason}"))
    }

    /// The Ready reason of a server this error keeps from connecting: `otherwise` (what the
    /// Secret was for), unless the reader's guarding policy is not in force.
    pub(crate) fn ready_reason(&self, otherwise: &'static str) -> &'static str {
        match self {
            Self::PolicyNotInForce(_) => SECRET_REFERENCE_POLICY,
            Self::Refused(_) => otherwise,
        }
    }

    /// The same error, its text after `context` (`<context>: <text>`).
    #[must_use]
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        match self {
            Self::Refused(text) => Self::Refused(format!("{context}: {text}")),
            Self::PolicyNotInForce(text) => Self::PolicyNotInForce(format!("{context}: {text}")),
        }
    }
}

/// The Ready reason of a server whose `headersFrom` Secrets cannot be read.
pub(crate) const SECRET_REFERENCE: &str = "SecretReference";

/// The Ready reason of a server whose token exchange's client credentials cannot be read (or
/// whose exchange is not configured whole).
pub(crate) const TOKEN_EXCHANGE_CREDENTIALS: &str = "TokenExchangeCredentials";

/// The Ready reason of a server whose Secrets are not read because the admission policy that
/// guards them is not in force.
const SECRET_REFERENCE_POLICY: &str = "SecretReferencePolicyNotInForce";

/// A reader of Secrets by namespace, name and key. Errors name what is missing or refused,
/// never a value.
pub trait SecretSource: Send + Sync + std::fmt::Debug {
    /// The value under `key` of Secret `name` (in `namespace`, when given; else where the
    /// source's own Secrets are).
    fn get<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Secret, SecretError>>;
}

/// Whose connection a server's `headersFrom` values are read for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadersFor {
    /// The gateway's own connection: every entry.
    Gateway,
    /// A person's session connection, which sends its own `Authorization`: every other entry.
    Session,
}

/// `server` with its `headersFrom` values read from `secrets` (in the server's namespace) into
/// `spec.headers`, where an entry wins over a header of the same name (in any case). One
/// trailing newline (`\n` or `\r\n`) of a value is dropped. An error names the header and the
/// Secret, never a value.
pub(crate) async fn with_secret_headers(
    secrets: &dyn SecretSource,
    mut server: MCPServer,
    connection: HeadersFor,
) -> Result<MCPServer, SecretError> {
    let namespace = server.metadata.namespace.clone();
    for entry in std::mem::take(&mut server.spec.headers_from) {
        if connection == HeadersFor::Session && entry.name.eq_ignore_ascii_case("authorization") {
            continue;
        }
        let reference = &entry.value_from;
        let value = secrets
            .get(namespace.as_deref(), &reference.name, &reference.key)
            .await
            .map_err(|e| e.context(format_args!("headersFrom {}", entry.name)))?;
        let value = value.expose();
        let value = value
            .strip_suffix("\r\n")
            .or_else(|| value.strip_suffix('\n'))
            .unwrap_or(value);
        if http::HeaderValue::from_str(value).is_err() {
            return Err(SecretError::Refused(format!(
                "headersFrom {}: key {} of Secret {} is not a valid HTTP header value",
                entry.name, reference.key, reference.name
            )));
        }
        server
            .spec
            .headers
            .retain(|name, _| !name.eq_ignore_ascii_case(&entry.name));
        server.spec.headers.insert(entry.name.clone(), value.to_owned());
    }
    Ok(server)
}

/// The client id and secret a `clientCredentialsSecretRef` of `server` names, read from
/// `secrets`. A reference without a namespace names a Secret of the server's own.
pub(crate) async fn client_credentials(
    secrets: &dyn SecretSource,
    server: &MCPServer,
    reference: &ClientCredentialsSecretRef,
) -> Result<(String, Secret), SecretError> {
    let namespace = reference.namespace.as_deref().or(server.metadata.namespace.as_deref());
    let id = secrets
        .get(namespace, &reference.name, &reference.client_id_key)
        .await?;
    let secret = secrets
        .get(namespace, &reference.name, &reference.client_secret_key)
        .await?;
    Ok((id.expose().trim().to_owned(), secret))
}

/// No Secret reader: every read fails naming the Secret (filesystem mode without `secrets/`).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSecrets;

impl SecretSource for NoSecrets {
    fn get<'a>(
        &'a self,
        _namespace: Option<&'a str>,
        name: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Secret, SecretError>> {
        Box::pin(std::future::ready(Err(SecretError::Refused(format!(
            "Secret {name} (key {key}) cannot be read: this gateway has no Secret reader (put it in the config directory's secrets/{name}.yaml)"
        )))))
    }
}

/// Secrets handed over by the embedding program.
#[derive(Debug, Default, Clone)]
pub struct StaticSecrets {
    values: BTreeMap<(String, String), Secret>,
}

impl StaticSecrets {
    /// Adds `value` under `key` of Secret `name`.
    pub fn with(mut self, name: &str, key: &str, value: impl Into<String>) -> Self {
        self.values
            .insert((name.to_owned(), key.to_owned()), Secret::new(value.into()));
        self
    }
}

impl SecretSource for StaticSecrets {
    fn get<'a>(
        &'a self,
        _namespace: Option<&'a str>,
        name: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Secret, SecretError>> {
        Box::pin(std::future::ready(
            self.values
                .get(&(name.to_owned(), key.to_owned()))
                .cloned()
                .ok_or_else(|| SecretError::Refused(format!("Secret {name} has no key {key}"))),
        ))
    }
}

/// Secrets in a directory: `<dir>/<name>.yaml` (or `.yml`), a Secret document with `stringData`
/// and/or base64 `data`. Read on every use, so an edited file takes effect on the next exchange.
#[derive(Debug, Clone)]
pub struct DirectorySecrets {
    dir: PathBuf,
}

impl DirectorySecrets {
    /// Secrets in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecretDocument {
    #[serde(default)]
    string_data: BTreeMap<String, String>,
    #[serde(default)]
    data: BTreeMap<String, String>,
}

impl SecretSource for DirectorySecrets {
    fn get<'a>(
        &'a self,
        _namespace: Option<&'a str>,
        name: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Secret, SecretError>> {
        // A few small files: read where the gateway asks, as a config file is.
        Box::pin(std::future::ready(self.read(name, key).map_err(SecretError::Refused)))
    }
}

impl DirectorySecrets {
    fn read(&self, name: &str, key: &str) -> Result<Secret, String> {
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            return Err(format!("Secret name {name:?} is not a valid name"));
        }
        let path = ["yaml", "yml"]
            .iter()
            .map(|ext| self.dir.join(format!("{name}.{ext}")))
            .find(|p| p.is_file())
            .ok_or_else(|| format!("Secret {name} not found (no {}/{name}.yaml)", self.dir.display()))?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("Secret {name}: cannot read {}: {e}", path.display()))?;
        let document: SecretDocument = serde_saphyr::from_str(&text)
            .map_err(|_| format!("Secret {name}: {} is not a Secret document", path.display()))?;
        if let Some(value) = document.string_data.get(key) {
            return Ok(Secret::new(value.clone()));
        }
        let encoded = document
            .data
            .get(key)
            .ok_or_else(|| format!("Secret {name} has no key {key}"))?;
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| format!("Secret {name}: data.{key} is not base64"))?;
        String::from_utf8(bytes)
            .map(Secret::new)
            .map_err(|_| format!("Secret {name}: data.{key} is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use muster_core::crd::{HeaderValueFrom, HeaderValueSourceType, MCPServerHeaderFrom, MCPServerSpec, ServerType};

    use super::*;

    fn get(secrets: &dyn SecretSource, name: &str, key: &str) -> Result<Secret, String> {
        futures::executor::block_on(secrets.get(None, name, key)).map_err(|e| e.to_string())
    }

    fn server_with(headers: &[(&str, &str)], from: &[(&str, &str, &str)]) -> MCPServer {
        MCPServer::new(
            "api",
            MCPServerSpec {
                server_type: Some(ServerType::StreamableHttp),
                url: Some("https://mcp.example.com/mcp".into()),
                headers: headers
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                headers_from: from
                    .iter()
                    .map(|(header, secret, key)| MCPServerHeaderFrom {
                        name: (*header).to_owned(),
                        value_from: HeaderValueFrom {
                            source_type: Some(HeaderValueSourceType::Secret),
                            name: (*secret).to_owned(),
                            key: (*key).to_owned(),
                        },
                    })
                    .collect(),
                ..MCPServerSpec::default()
            },
        )
    }

    fn headers(
        secrets: &StaticSecrets,
        server: MCPServer,
        connection: HeadersFor,
    ) -> Result<Vec<(String, String)>, String> {
        futures::executor::block_on(with_secret_headers(secrets, server, connection))
            .map(|s| s.spec.headers.into_iter().collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn header_values_come_from_their_secrets_and_win_over_headers_of_the_same_name() {
        let secrets = StaticSecrets::default()
            .with("api-token", "token", "Bearer s3cr3t\n")
            .with("api-token", "tenant", "blue\r\n");
        let server = server_with(
            &[("authorization", ""), ("X-Trace", "on")],
            &[
                ("Authorization", "api-token", "token"),
                ("X-Tenant", "api-token", "tenant"),
            ],
        );
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        assert_eq!(
            headers(&secrets, server.clone(), HeadersFor::Gateway).expect("read"),
            pairs(&[
                ("Authorization", "Bearer s3cr3t"),
                ("X-Tenant", "blue"),
                ("X-Trace", "on")
            ])
        );
        // A person's session connection sends its own Authorization: that entry is not read.
        assert_eq!(
            headers(&secrets, server, HeadersFor::Session).expect("read"),
            pairs(&[("X-Tenant", "blue"), ("X-Trace", "on"), ("authorization", "")])
        );
    }

    #[test]
    fn only_one_trailing_newline_is_dropped_and_a_value_that_cannot_be_a_header_is_refused_unseen() {
        let secrets = StaticSecrets::default().with("t", "two", "abc\n\n");
        let error = headers(
            &secrets,
            server_with(&[], &[("X-Key", "t", "two")]),
            HeadersFor::Gateway,
        )
        .expect_err("a newline is left");
        assert_eq!(
            error,
            "headersFrom X-Key: key two of Secret t is not a valid HTTP header value"
        );
        assert!(!error.contains("abc"), "{error}");
    }

    #[test]
    fn a_missing_secret_fails_naming_the_header_and_the_secret() {
        let error = headers(
            &StaticSecrets::default(),
            server_with(&[], &[("X-Key", "vault", "key")]),
            HeadersFor::Gateway,
        )
        .expect_err("missing");
        assert_eq!(error, "headersFrom X-Key: Secret vault has no key key");
    }

    #[test]
    fn a_directory_secret_reads_string_data_and_base64_data() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("client.yaml"),
            "apiVersion: v1\nkind: Secret\nmetadata: {name: client}\nstringData: {client-id: muster}\ndata: {client-secret: czNjcjN0}\n",
        )
        .expect("write");
        let secrets = DirectorySecrets::new(dir.path());
        assert_eq!(get(&secrets, "client", "client-id").expect("id").expose(), "muster");
        assert_eq!(
            get(&secrets, "client", "client-secret").expect("secret").expose(),
            "s3cr3t"
        );
        let missing = get(&secrets, "client", "other").expect_err("no key");
        assert!(missing.contains("no key other"), "{missing}");
        let absent = get(&secrets, "nope", "x").expect_err("no file");
        assert!(absent.contains("Secret nope not found"), "{absent}");
        assert!(get(&secrets, "../etc/passwd", "x").is_err());
    }

    #[test]
    fn errors_never_carry_a_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("bad.yaml"), "stringData: [not, a, map, hunter2]\n").expect("write");
        let error = get(&DirectorySecrets::new(dir.path()), "bad", "k").expect_err("bad");
        assert!(!error.contains("hunter2"), "{error}");
    }
}
