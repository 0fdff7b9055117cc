//! Where the gateway reads the Secrets an MCPServer names (the client credentials of a token
//! exchange, `auth.tokenExchange.clientCredentialsSecretRef`).
//!
//! In Kubernetes they are Secrets read with muster's ServiceAccount. Filesystem mode has no
//! Secret reader of its own; a gateway may be given one ([`SecretSource`]): the config
//! directory's `secrets/` folder ([`DirectorySecrets`], one Kubernetes-shaped Secret document per
//! file, `secrets/<name>.yaml` with `stringData` or base64 `data`), or values handed over by
//! the embedding program ([`StaticSecrets`]).
//!
//! ```
//! use muster_gateway::secrets::{SecretSource, StaticSecrets};
//!
//! let secrets = StaticSecrets::default().with("exchange-client", "client-id", "muster");
//! assert_eq!(secrets.get(None, "exchange-client", "client-id").unwrap().expose(), "muster");
//! let missing = secrets.get(None, "exchange-client", "client-secret").unwrap_err();
//! assert!(missing.contains("client-secret"), "{missing}");
//! ```

use std::{collections::BTreeMap, path::PathBuf};

use muster_auth::Secret;

/// A reader of Secrets by namespace, name and key. Errors name what is missing, never a value.
pub trait SecretSource: Send + Sync + std::fmt::Debug {
    /// The value under `key` of Secret `name` (in `namespace`, when given).
    fn get(&self, namespace: Option<&str>, name: &str, key: &str) -> Result<Secret, String>;
}

/// No Secret reader: every read fails naming the Secret (filesystem mode without `secrets/`).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSecrets;

impl SecretSource for NoSecrets {
    fn get(&self, _namespace: Option<&str>, name: &str, key: &str) -> Result<Secret, String> {
        Err(format!(
            "Secret {name} (key {key}) cannot be read: this gateway has no Secret reader (put it in the config directory's secrets/{name}.yaml)"
        ))
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
    fn get(&self, _namespace: Option<&str>, name: &str, key: &str) -> Result<Secret, String> {
        self.values
            .get(&(name.to_owned(), key.to_owned()))
            .cloned()
            .ok_or_else(|| format!("Secret {name} has no key {key}"))
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
    fn get(&self, _namespace: Option<&str>, name: &str, key: &str) -> Result<Secret, String> {
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
    use super::*;

    #[test]
    fn a_directory_secret_reads_string_data_and_base64_data() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("client.yaml"),
            "apiVersion: v1\nkind: Secret\nmetadata: {name: client}\nstringData: {client-id: muster}\ndata: {client-secret: czNjcjN0}\n",
        )
        .expect("write");
        let secrets = DirectorySecrets::new(dir.path());
        assert_eq!(secrets.get(None, "client", "client-id").expect("id").expose(), "muster");
        assert_eq!(
            secrets.get(None, "client", "client-secret").expect("secret").expose(),
            "s3cr3t"
        );
        let missing = secrets.get(None, "client", "other").expect_err("no key");
        assert!(missing.contains("no key other"), "{missing}");
        let absent = secrets.get(None, "nope", "x").expect_err("no file");
        assert!(absent.contains("Secret nope not found"), "{absent}");
        assert!(secrets.get(None, "../etc/passwd", "x").is_err());
    }

    #[test]
    fn errors_never_carry_a_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("bad.yaml"), "stringData: [not, a, map, hunter2]\n").expect("write");
        let error = DirectorySecrets::new(dir.path())
            .get(None, "bad", "k")
            .expect_err("bad");
        assert!(!error.contains("hunter2"), "{error}");
    }
}
