//! [`GatewayError`]: why a gateway, or its registry, could not be built.

use muster_catalog::toolset::ToolsetError;

/// Why a gateway could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The config directory could not be read.
    #[error("cannot read the config directory {}: {source}", dir.display())]
    ConfigDir {
        /// The directory.
        dir: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The directory of events and workflow run records could not be opened.
    #[error("cannot keep events in {}: {source}", dir.display())]
    DataDir {
        /// The directory.
        dir: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A toolset preset of `config.yaml` is invalid.
    #[error(transparent)]
    Toolset(#[from] ToolsetError),
    /// With `prefixMode: never`, two servers expose the same name: one sentence per clash.
    #[error(
        "{}\nWith aggregator.prefixMode: never in config.yaml, tools keep their downstream names; set \
         aggregator.prefixMode: always (tools are then named x_<server>_<tool>), or remove one server of each pair",
        .0.join("\n")
    )]
    NameCollisions(Vec<String>),
    /// The sign-in state store of `aggregator.oauth.server.storage` (or the grant store of
    /// `aggregator.oauth.mcpClient.grantStore`) cannot be used.
    #[error(transparent)]
    SignInStore(#[from] StorageError),
    /// The workflow execution records cannot be opened.
    #[error("cannot open the workflow execution records: {0}")]
    Executions(#[from] muster_workflow::record::RecordError),
    /// Watching needs a config directory (filesystem mode).
    #[error("this gateway has no config directory to watch")]
    NoConfigDir,
    /// The config directory cannot be watched.
    #[error("cannot watch the config directory: {0}")]
    Watch(String),
    /// The static embedding model of `aggregator.ranking.model` cannot be loaded.
    #[error(
        "cannot load the ranking model of aggregator.ranking.model ({}): {source}; fix or remove the key \
         (without it filter_tools ranks by BM25F alone)",
        path.display()
    )]
    RankingModel {
        /// The model folder, as configured.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: muster_catalog::rank::semantic::ModelError,
    },
    /// `aggregator.ranking` is invalid (a configuration that was not validated, as one given in
    /// code may be).
    #[error("invalid aggregator.ranking: {0}")]
    RankingSettings(#[source] muster_core::crd::ValidationErrors),
}

/// Why the configured sign-in state store cannot be used. Never contains a key or a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The grant store of `aggregator.oauth.mcpClient.grantStore` cannot be opened.
    #[error("cannot open the grant store (aggregator.oauth.mcpClient.grantStore): {0}")]
    GrantStore(#[source] muster_auth::oauth::store::GrantStoreError),
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
    Key(#[source] muster_auth::oauth::store::GrantStoreError),
    /// The Valkey password file cannot be read.
    #[error("cannot read aggregator.oauth.server.storage.valkey.passwordFile {path}: {source}")]
    PasswordFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file of the CA certificates Valkey's TLS trusts cannot be read.
    #[error("cannot read aggregator.oauth.server.storage.valkey.tlsCaFile {path}: {source}")]
    TlsCaFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The Valkey options describe no server.
    #[error("aggregator.oauth.server.storage.valkey: {0}")]
    Valkey(#[source] muster_auth::state::ValkeyOptionsError),
}
