//! The sign-in state store `config.yaml` asks for (`aggregator.oauth.server.storage`): in memory
//! (with people's grants in the encrypted `grantStore`, when configured), or in Valkey, shared by
//! replicas, its secrets sealed with the key of `encryptionKeyFile`.

use std::{path::Path, sync::Arc};

use muster_auth::{
    Secret,
    oauth::store::{EncryptedGrantStore, GrantStoreError, GrantStoreKey},
    state::{MemorySignInStore, SignInStore, ValkeyOptions, ValkeyOptionsError, ValkeyStore},
};
use muster_core::config::{McpClientConfig, MusterConfig, ValkeyConfig};

/// Why the configured sign-in state store cannot be used. Never contains a key or a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The grant store of `aggregator.oauth.mcpClient.grantStore` cannot be opened.
    #[error("cannot open the grant store (aggregator.oauth.mcpClient.grantStore): {0}")]
    GrantStore(#[source] GrantStoreError),
    /// A Valkey store has no encryption key configured.
    #[error(
        "aggregator.oauth.server.storage.type valkey needs aggregator.oauth.server.encryptionKeyFile \
         (or aggregator.oauth.mcpClient.grantStore.encryptionKeyFile): a file holding 32 random bytes, base64"
    )]
    NoKey,
    /// A Valkey store without `valkey`.
    #[error("aggregator.oauth.server.storage.type valkey needs aggregator.oauth.server.storage.valkey.url")]
    NoServer,
    /// The encryption key cannot be read.
    #[error("cannot read the sign-in state key (aggregator.oauth.server.encryptionKeyFile): {0}")]
    Key(#[source] GrantStoreError),
    /// The Valkey password file cannot be read.
    #[error("cannot read aggregator.oauth.server.storage.valkey.passwordFile {path}: {source}")]
    PasswordFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The Valkey options describe no server.
    #[error("aggregator.oauth.server.storage.valkey: {0}")]
    Valkey(#[source] ValkeyOptionsError),
}

/// The store `config` asks for. Refused when the grant store, the key or the password file cannot
/// be read, or the Valkey options describe no server; a Valkey that is down is not a refusal (the
/// store connects on first use).
pub(crate) fn configured_store(config: &MusterConfig) -> Result<Arc<dyn SignInStore>, StorageError> {
    let oauth = &config.aggregator.oauth;
    if let Some(valkey) = oauth.server.storage.valkey_server() {
        let key_file = oauth.state_key_file().ok_or(StorageError::NoKey)?;
        let key = GrantStoreKey::from_file(Path::new(key_file)).map_err(StorageError::Key)?;
        let store = ValkeyStore::new(&valkey_options(valkey)?, &key).map_err(StorageError::Valkey)?;
        tracing::info!(store = ?store, "the sign-in state is kept in valkey");
        return Ok(Arc::new(store));
    }
    if oauth.server.storage.kind == muster_core::config::StorageType::Valkey {
        return Err(StorageError::NoServer);
    }
    let client = &oauth.mcp_client;
    let store = if client.enabled {
        memory_store(client).map_err(StorageError::GrantStore)?
    } else {
        MemorySignInStore::new()
    };
    Ok(Arc::new(store))
}

fn valkey_options(valkey: &ValkeyConfig) -> Result<ValkeyOptions, StorageError> {
    let mut options = ValkeyOptions::new(valkey.url.clone())
        .with_tls(valkey.tls_enabled)
        .with_key_prefix(valkey.key_prefix.clone())
        .with_db(i64::from(valkey.db));
    if let Some(name) = &valkey.tls_server_name {
        options = options.with_tls_server_name(name.clone());
    }
    if let Some(password) = &valkey.password {
        options = options.with_password(Secret::new(password.clone()));
    }
    if let Some(path) = &valkey.password_file {
        let password = std::fs::read_to_string(path).map_err(|source| StorageError::PasswordFile {
            path: path.clone(),
            source,
        })?;
        options = options.with_password(Secret::new(password.trim()));
    }
    Ok(options)
}

/// The sign-in state store of one process `config` asks for: with the encrypted grant file store
/// when `grantStore` is configured, with the grants it kept. Refused when the grant store cannot
/// be opened (its key file is missing or not a key, its directory cannot be created).
pub(crate) fn memory_store(config: &McpClientConfig) -> Result<MemorySignInStore, GrantStoreError> {
    match &config.grant_store {
        Some(store) => {
            let key = GrantStoreKey::from_file(Path::new(&store.encryption_key_file))?;
            MemorySignInStore::with_grant_file(EncryptedGrantStore::open(Path::new(&store.path), key)?)
        }
        None => Ok(MemorySignInStore::new()),
    }
}
