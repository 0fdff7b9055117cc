//! `aggregator.oauth.server.storage`: where the gateway keeps the state sign-ins leave (pending
//! sign-ins, client registrations, grants, the sign-in rate count, refreshes in flight and
//! exchanged tokens), with muster's key names. Read whether or not the front door is enabled.
//!
//! - `type: memory` (the default): in this process; one gateway needs nothing else;
//! - `type: valkey`: in Valkey (or Redis), shared by every replica, so that any of them can take
//!   a sign-in's callback. Every secret is sealed with the key in
//!   `aggregator.oauth.server.encryptionKeyFile` (else `mcpClient.grantStore.encryptionKeyFile`):
//!   a file holding 32 random bytes, base64, the same on every replica. Without one the gateway
//!   does not start.
//!
//! ```yaml
//! aggregator:
//!   oauth:
//!     server:
//!       encryptionKeyFile: /etc/muster/state.key    # openssl rand -base64 32
//!       storage:
//!         type: valkey
//!         valkey:
//!           url: valkey.muster:6379                 # or redis://..., rediss://...
//!           passwordFile: /etc/muster/valkey-password
//!           tlsEnabled: true
//!           tlsServerName: valkey.muster            # when the url's host is not the certificate's name
//!           tlsCaFile: /etc/muster/valkey-ca.crt    # a private CA (this project's addition)
//!           keyPrefix: "muster:"                    # the default
//!           db: 0
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::OAuthConfig;
use crate::crd::ValidationErrors;

/// Default of `aggregator.oauth.server.storage.valkey.keyPrefix`.
pub const DEFAULT_VALKEY_KEY_PREFIX: &str = "muster:";

/// Where `storage` keys are in `config.yaml`.
const PATH: &str = "aggregator.oauth.server.storage";

/// `aggregator.oauth.server.storage`: where the sign-in state is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct StorageConfig {
    /// `memory` (the default: this process) or `valkey` (shared by replicas).
    #[serde(rename = "type")]
    pub kind: StorageType,
    /// The Valkey server, for `type: valkey`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valkey: Option<ValkeyConfig>,
}

impl StorageConfig {
    /// The sign-in state in the Valkey server `valkey`.
    pub fn valkey(valkey: ValkeyConfig) -> Self {
        Self {
            kind: StorageType::Valkey,
            valkey: Some(valkey),
        }
    }

    /// The Valkey server to keep the sign-in state in, when `type: valkey`.
    pub fn valkey_server(&self) -> Option<&ValkeyConfig> {
        match self.kind {
            StorageType::Valkey => self.valkey.as_ref(),
            StorageType::Memory => None,
        }
    }

    /// Checks what serde does not, naming the key: a Valkey store needs a `url` and at most one
    /// of `password` and `passwordFile`, and an encryption key (`has_key`).
    pub(super) fn validate_into(&self, has_key: bool, errors: &mut ValidationErrors) {
        if self.kind != StorageType::Valkey {
            return;
        }
        match &self.valkey {
            None => errors.push(
                format!("{PATH}.valkey"),
                format!("{PATH}.valkey is required when {PATH}.type is valkey (at least its url)"),
            ),
            Some(valkey) => {
                if valkey.url.trim().is_empty() {
                    errors.push(
                        format!("{PATH}.valkey.url"),
                        format!("{PATH}.valkey.url must name the Valkey server (host:port, redis:// or rediss://)"),
                    );
                }
                if valkey.password.is_some() && valkey.password_file.is_some() {
                    errors.push(
                        format!("{PATH}.valkey.password"),
                        format!("{PATH}.valkey: give password or passwordFile, not both"),
                    );
                }
            }
        }
        if !has_key {
            errors.push(
                "aggregator.oauth.server.encryptionKeyFile",
                format!(
                    "{PATH}.type valkey needs an encryption key for the secrets it keeps: set \
                     aggregator.oauth.server.encryptionKeyFile (or \
                     aggregator.oauth.mcpClient.grantStore.encryptionKeyFile) to a file holding 32 \
                     random bytes, base64 (openssl rand -base64 32), the same on every replica"
                ),
            );
        }
    }
}

impl OAuthConfig {
    /// These keys with secrets (the Valkey password) replaced by `[redacted]`, for answers and
    /// logs.
    pub fn redacted(&self) -> Self {
        let mut shown = self.clone();
        if let Some(valkey) = &mut shown.server.storage.valkey {
            *valkey = valkey.redacted();
        }
        shown
    }

    /// These keys, with a secret still `[redacted]` (as [`OAuthConfig::redacted`] answered it and
    /// a client sent it back) taken from `current`, the configuration it was answered from.
    pub fn restoring_redacted(mut self, current: &Self) -> Self {
        if let (Some(valkey), Some(was)) = (&mut self.server.storage.valkey, &current.server.storage.valkey) {
            let shown = was.redacted();
            if valkey.password.is_some() && valkey.password == shown.password {
                valkey.password.clone_from(&was.password);
            }
            if valkey.url == shown.url {
                valkey.url.clone_from(&was.url);
            }
        }
        self
    }

    /// The file of the key a shared sign-in state store seals its secrets with:
    /// `server.encryptionKeyFile`, else the grant store's (`mcpClient.grantStore.encryptionKeyFile`).
    pub fn state_key_file(&self) -> Option<&str> {
        self.server.encryption_key_file.as_deref().or_else(|| {
            self.mcp_client
                .grant_store
                .as_ref()
                .map(|s| s.encryption_key_file.as_str())
        })
    }
}

/// `aggregator.oauth.server.storage.type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum StorageType {
    /// In this process.
    #[default]
    Memory,
    /// In Valkey or Redis, shared by replicas.
    Valkey,
}

/// `aggregator.oauth.server.storage.valkey`: the Valkey (or Redis) server. `Debug` and
/// [`ValkeyConfig::redacted`] leave the password out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct ValkeyConfig {
    /// The server: `host:port` (port 6379 when left out), `redis://[:password@]host:port[/db]`,
    /// or `rediss://...` for TLS.
    pub url: String,
    /// Its password. Prefer `passwordFile`, which keeps it out of `config.yaml`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// A file holding its password (surrounding whitespace ignored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<String>,
    /// Whether to speak TLS to it (as a `rediss://` url does). Default false.
    pub tls_enabled: bool,
    /// The name its certificate must carry (and the SNI sent), when it is not the url's host:
    /// the gateway still dials the url's host. Needs TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// A PEM file of the CA certificates to trust for its certificate, instead of the system's
    /// roots: a server whose certificate comes from a private CA. Needs TLS. This project's
    /// addition (Go muster trusts the system's roots only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca_file: Option<String>,
    /// What every key starts with. Default `muster:`.
    pub key_prefix: String,
    /// The database number. Default 0.
    pub db: u32,
}

impl Default for ValkeyConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            password: None,
            password_file: None,
            tls_enabled: false,
            tls_server_name: None,
            tls_ca_file: None,
            key_prefix: DEFAULT_VALKEY_KEY_PREFIX.to_owned(),
            db: 0,
        }
    }
}

impl std::fmt::Debug for ValkeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = self.redacted();
        f.debug_struct("ValkeyConfig")
            .field("url", &shown.url)
            .field("password", &shown.password)
            .field("password_file", &self.password_file)
            .field("tls_enabled", &self.tls_enabled)
            .field("tls_server_name", &self.tls_server_name)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("key_prefix", &self.key_prefix)
            .field("db", &self.db)
            .finish()
    }
}

/// What a redacted password reads.
const REDACTED: &str = "[redacted]";

impl ValkeyConfig {
    /// These keys with the password (`password`, and one in the url) replaced by `[redacted]`:
    /// what the configuration tools answer and what logs show.
    pub fn redacted(&self) -> Self {
        let mut shown = self.clone();
        if shown.password.is_some() {
            shown.password = Some(REDACTED.to_owned());
        }
        // `scheme://[user]:password@host...`: the password is between the scheme's `//` and the
        // last `@` of the authority.
        if let Some((scheme, rest)) = self.url.split_once("://") {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            if let Some(at) = rest[..authority_end].rfind('@')
                && let Some(colon) = rest[..at].find(':')
            {
                shown.url = format!("{scheme}://{}:{REDACTED}{}", &rest[..colon], &rest[at..]);
            }
        }
        shown
    }

    /// The server at `url`, with the other keys' defaults.
    pub fn at(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }

    /// Sets `passwordFile`.
    pub fn with_password_file(mut self, path: impl Into<String>) -> Self {
        self.password_file = Some(path.into());
        self
    }

    /// Sets `keyPrefix`.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Sets `db`.
    pub fn with_db(mut self, db: u32) -> Self {
        self.db = db;
        self
    }

    /// Sets `tlsEnabled`.
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.tls_enabled = tls;
        self
    }

    /// Sets `tlsServerName`.
    pub fn with_tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls_server_name = Some(name.into());
        self
    }

    /// Sets `tlsCaFile`.
    pub fn with_tls_ca_file(mut self, path: impl Into<String>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{MusterConfig, ValkeyConfig};

    fn parse(doc: &str) -> MusterConfig {
        serde_saphyr::from_str(doc).expect("config parses")
    }

    #[test]
    fn storage_is_memory_unless_valkey_is_asked_for_with_muster_key_names() {
        assert_eq!(
            MusterConfig::default().aggregator.oauth.server.storage.valkey_server(),
            None
        );
        let config = parse(
            r#"
aggregator:
  oauth:
    server:
      encryptionKeyFile: /etc/muster/state.key
      storage:
        type: valkey
        valkey: {url: "valkey:6379", passwordFile: /run/pw, tlsEnabled: true, tlsServerName: valkey, tlsCaFile: /run/ca.crt, db: 3}
"#,
        );
        let server = &config.aggregator.oauth.server;
        assert!(!server.enabled, "read whether or not the front door is enabled");
        assert_eq!(server.encryption_key_file.as_deref(), Some("/etc/muster/state.key"));
        let valkey = server.storage.valkey_server().expect("valkey");
        assert_eq!(valkey.url, "valkey:6379");
        assert_eq!(valkey.password_file.as_deref(), Some("/run/pw"));
        assert!(valkey.tls_enabled);
        assert_eq!(valkey.tls_server_name.as_deref(), Some("valkey"));
        assert_eq!(valkey.tls_ca_file.as_deref(), Some("/run/ca.crt"));
        assert_eq!(valkey.key_prefix, "muster:", "the default prefix");
        assert_eq!(valkey.db, 3);
        assert!(config.validate_config().is_ok());
        assert!(crate::config::unknown_keys(&serde_json::to_value(&config).expect("serializes")).is_empty());
    }

    #[test]
    fn passwords_are_redacted_in_debug_and_in_what_the_tools_answer() {
        let mut valkey = ValkeyConfig::at("redis://muster:s3cret-pw@valkey:6379/2");
        valkey.password = Some("other-pw".to_owned());
        let shown = valkey.redacted();
        assert_eq!(shown.url, "redis://muster:[redacted]@valkey:6379/2");
        assert_eq!(shown.password.as_deref(), Some("[redacted]"));
        let debug = format!("{valkey:?}");
        assert!(!debug.contains("s3cret-pw") && !debug.contains("other-pw"), "{debug}");
        assert_eq!(
            ValkeyConfig::at("valkey:6379").redacted(),
            ValkeyConfig::at("valkey:6379")
        );
    }

    #[test]
    fn a_valkey_store_without_url_key_or_with_two_passwords_is_refused_naming_the_key() {
        let config = parse("aggregator: {oauth: {server: {storage: {type: valkey}}}}");
        let lines = config.validate_config().expect_err("refused").to_lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("aggregator.oauth.server.storage.valkey: "),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("aggregator.oauth.server.encryptionKeyFile: "),
            "{lines:?}"
        );

        let config = parse(
            "aggregator: {oauth: {server: {encryptionKeyFile: /k, storage: {type: valkey, valkey: {url: ' ', password: a, passwordFile: /b}}}}}",
        );
        let lines = config.validate_config().expect_err("refused").to_lines();
        assert!(
            lines[0].starts_with("aggregator.oauth.server.storage.valkey.url: "),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("aggregator.oauth.server.storage.valkey.password: "),
            "{lines:?}"
        );

        // The grant store's key serves too.
        let config = parse(
            "aggregator: {oauth: {mcpClient: {grantStore: {path: /g, encryptionKeyFile: /k}}, server: {storage: {type: valkey, valkey: {url: 'v:6379'}}}}}",
        );
        assert!(config.validate_config().is_ok());
        let error = serde_saphyr::from_str::<MusterConfig>("aggregator: {oauth: {server: {storage: {type: disk}}}}")
            .expect_err("an unknown type");
        assert!(error.to_string().contains("unknown variant `disk`"), "{error}");
    }
}
