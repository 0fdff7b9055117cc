//! The sign-in state store `config.yaml` asks for (`aggregator.oauth.server.storage`): in memory
//! (with people's grants in the encrypted `grantStore`, when configured), or in Valkey, shared by
//! replicas, its secrets sealed with the key of `encryptionKeyFile`, behind a
//! [`GrantFallback`] (transport sessions' grants, and people's and principals' grants
//! whose refresh token is known not to rotate, are used and refreshed on the replica while
//! Valkey is away, and written back when it returns).

use std::{path::Path, sync::Arc};

use muster_auth::{
    Secret,
    oauth::store::{EncryptedGrantStore, GrantStoreError, GrantStoreKey},
    state::{
        GrantFallback, LocalSignInNotices, MemorySignInStore, SignInNotices, SignInStore, ValkeyOptions, ValkeyStore,
    },
};
use muster_core::config::{McpClientConfig, MusterConfig, ValkeyConfig};

use crate::error::StorageError;

/// A sign-in state store and the notices of the replicas that share it.
pub(crate) type SharedState = (Arc<dyn SignInStore>, Arc<dyn SignInNotices>);

/// The store `config` asks for, and how replicas sharing it tell each other of completed
/// sign-ins. Refused when the grant store, the key or the password file cannot be read, or the
/// Valkey options describe no server; a Valkey that is down is not a refusal (the store connects
/// on first use).
pub(crate) fn configured_store(config: &MusterConfig) -> Result<SharedState, StorageError> {
    let oauth = &config.aggregator.oauth;
    if let Some(valkey) = oauth.server.storage.valkey_server() {
        let key_file = oauth.state_key_file().ok_or(StorageError::NoKey)?;
        let key = GrantStoreKey::from_file(Path::new(key_file)).map_err(StorageError::Key)?;
        let store = ValkeyStore::new(&valkey_options(valkey)?, &key).map_err(StorageError::Valkey)?;
        tracing::info!(store = ?store, "the sign-in state is kept in valkey");
        let notices = Arc::new(store.notices());
        // A transport session's grant stays usable, and refreshable, on the replica holding the
        // session while Valkey cannot be reached.
        return Ok((Arc::new(GrantFallback::new(store)), notices));
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
    Ok((Arc::new(store), Arc::new(LocalSignInNotices::new())))
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
    if let Some(path) = &valkey.tls_ca_file {
        let pem = std::fs::read(path).map_err(|source| StorageError::TlsCaFile {
            path: path.clone(),
            source,
        })?;
        options = options.with_tls_ca(pem);
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
