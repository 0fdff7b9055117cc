//! The types of muster's `config.yaml`.
//!
//! Every key has a default, so an empty file is a valid configuration. Keys this version
//! does not know (sections later versions add, such as `aggregator.admin`, or a typo) are
//! accepted and ignored; [`unknown_keys`] lists them so the loader can warn.
//! `aggregator.oauth.mcpClient` (people signing in to downstream servers through the gateway)
//! and `aggregator.oauth.server` (bearer tokens of trusted issuers on `/mcp`) are read.
//!
//! ```
//! use muster_core::config::{MusterConfig, Transport, unknown_keys};
//!
//! let doc = serde_json::json!({
//!     "aggregator": { "port": 9090, "transport": "sse", "oauth": { "server": { "enabled": false } } },
//!     "kubernetes": true
//! });
//! let config: MusterConfig = serde_json::from_value(doc.clone())?;
//! assert_eq!(config.aggregator.port, 9090);
//! assert_eq!(config.aggregator.host, "localhost"); // the default
//! assert_eq!(config.aggregator.transport, Transport::Sse);
//! assert_eq!(unknown_keys(&doc), Vec::<String>::new());
//! config.validate_config()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crd::ValidationErrors;
use crate::crd::validate::{NAME_PATTERN, NAME_RE, NAMESPACE_PATTERN, NAMESPACE_RE};

mod kubernetes;
mod limits;
mod ranking;
mod server_api;
mod storage;

pub use kubernetes::{
    DEFAULT_ADMISSION_POLICY_BINDING, KubernetesWritesConfig, SecretBindingConfig, UsernameClaim, WriteIdentity,
};
pub use limits::{DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_REQUEST_BODY_BYTES, DEFAULT_MAX_REQUEST_HEAD_BYTES, Limits};
pub use ranking::RankingSettings;
pub use server_api::ServerApiConfig;
pub use storage::{DEFAULT_VALKEY_KEY_PREFIX, StorageConfig, StorageType, ValkeyConfig};

/// Default of `aggregator.port`.
pub const DEFAULT_PORT: u16 = 8090;
/// Default of `aggregator.host`.
pub const DEFAULT_HOST: &str = "localhost";
/// Default of `aggregator.musterPrefix`.
pub const DEFAULT_MUSTER_PREFIX: &str = "x";

/// Default of `aggregator.oauth.mcpClient.callbackPath`.
pub const DEFAULT_CALLBACK_PATH: &str = "/oauth/proxy/callback";
/// Default of `aggregator.oauth.mcpClient.cimd.path`.
pub const DEFAULT_CIMD_PATH: &str = "/.well-known/oauth-client.json";
/// Default of `aggregator.oauth.mcpClient.cimd.scopes`.
pub const DEFAULT_CIMD_SCOPES: &str = "openid profile email groups offline_access";

/// `aggregator.oauth`: OAuth around the gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct OAuthConfig {
    /// The gateway as an OAuth client of downstream servers' authorization servers: people
    /// sign in to those servers through it.
    pub mcp_client: McpClientConfig,
    /// The gateway as an OAuth protected resource: `/mcp` wants a bearer token of a trusted
    /// issuer.
    pub server: OAuthServerConfig,
}

/// `aggregator.oauth.server`: front-door protection of `/mcp`, and where the sign-in state is
/// kept (`storage`, `encryptionKeyFile`: read whether or not the front door is enabled; see
/// [`StorageConfig`]). Go muster's keys for running its own authorization server (`provider`,
/// `dex`, ...) are accepted and not used: this gateway validates tokens of trusted issuers
/// instead.
///
/// A bearer token is checked against its issuer's signing keys (its JWKS) and for `iss`, `aud`,
/// `exp` and `nbf`. Three optional keys tune the timing, all in whole seconds:
///
/// ```yaml
/// aggregator:
///   oauth:
///     server:
///       enabled: true
///       baseUrl: https://muster.example.com
///       trustedIssuers: [https://idp.example.com]
///       clockSkewSeconds: 30            # leeway for exp and nbf (default 30; 0: exact)
///       jwksRefetchIntervalSeconds: 30  # an unknown key refetches the JWKS at most this often
///       jwksMaxAgeSeconds: 600          # fetched keys are trusted this long (default 600)
/// ```
///
/// An issuer's new signing key is picked up when the first token naming it arrives (at most
/// once per `jwksRefetchIntervalSeconds`); a key the issuer removed from its JWKS is refused
/// once the gateway fetches the JWKS again, at the latest `jwksMaxAgeSeconds` later.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct OAuthServerConfig {
    /// Whether `/mcp` requires a bearer token. Default false.
    pub enabled: bool,
    /// The gateway's public base URL; the protected resource is `<baseUrl>/mcp` unless
    /// `resourceIdentifier` says otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The resource identifier tokens must be issued for (their `aud`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_identifier: Option<String>,
    /// Issuers whose tokens are accepted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trusted_issuers: Vec<TrustedIssuerConfig>,
    /// Further audiences accepted besides the resource identifier.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trusted_audiences: Vec<String>,
    /// How far, in seconds, the gateway's clock and the issuer's may disagree when `exp` and
    /// `nbf` are checked. Default 30; 0 checks them exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_skew_seconds: Option<u64>,
    /// A token naming a signing key the gateway does not know fetches the issuer's JWKS again
    /// at most once per this many seconds. Default 30; 0 lets every unknown key fetch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_refetch_interval_seconds: Option<u64>,
    /// How long, in seconds, a fetched JWKS is trusted before the next token fetches it again
    /// (and a key the issuer removed is refused). Default 600.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_max_age_seconds: Option<u64>,
    /// Where the sign-in state is kept: in this process (`type: memory`, the default) or in
    /// Valkey, shared by replicas (`type: valkey`).
    #[serde(skip_serializing_if = "is_default_storage")]
    pub storage: StorageConfig,
    /// A file holding the 32-byte AES-256-GCM key (base64) the secrets of a shared `storage`
    /// are sealed with, the same on every replica. The key itself never appears in
    /// `config.yaml`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption_key_file: Option<String>,
}

fn is_default_storage(storage: &StorageConfig) -> bool {
    *storage == StorageConfig::default()
}

impl OAuthServerConfig {
    /// Front-door protection at `base_url` trusting `issuers`.
    pub fn trusting(base_url: impl Into<String>, issuers: Vec<String>) -> Self {
        Self {
            enabled: true,
            base_url: Some(base_url.into()),
            trusted_issuers: issuers.into_iter().map(TrustedIssuerConfig::from).collect(),
            ..Self::default()
        }
    }

    /// Sets `clockSkewSeconds`.
    pub fn with_clock_skew_seconds(mut self, seconds: u64) -> Self {
        self.clock_skew_seconds = Some(seconds);
        self
    }

    /// Sets `jwksRefetchIntervalSeconds`.
    pub fn with_jwks_refetch_interval_seconds(mut self, seconds: u64) -> Self {
        self.jwks_refetch_interval_seconds = Some(seconds);
        self
    }

    /// Sets `jwksMaxAgeSeconds`.
    pub fn with_jwks_max_age_seconds(mut self, seconds: u64) -> Self {
        self.jwks_max_age_seconds = Some(seconds);
        self
    }

    /// Sets `storage`.
    pub fn with_storage(mut self, storage: StorageConfig) -> Self {
        self.storage = storage;
        self
    }

    /// Sets `encryptionKeyFile`.
    pub fn with_encryption_key_file(mut self, path: impl Into<String>) -> Self {
        self.encryption_key_file = Some(path.into());
        self
    }

    /// The protected resource: `resourceIdentifier`, else `<baseUrl>/mcp`.
    pub fn resource(&self) -> Option<String> {
        self.resource_identifier.clone().or_else(|| {
            self.base_url
                .as_deref()
                .map(|b| format!("{}/mcp", b.trim_end_matches('/')))
        })
    }
}

/// One trusted issuer: its URL, or `{issuer, jwksUri?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TrustedIssuerConfig {
    /// Just the issuer URL.
    Url(String),
    /// The issuer with where its keys are.
    Detailed {
        /// The issuer URL.
        issuer: String,
        /// Its JWKS, when not discovered.
        #[serde(default, rename = "jwksUri", skip_serializing_if = "Option::is_none")]
        jwks_uri: Option<String>,
    },
}

impl TrustedIssuerConfig {
    /// The issuer URL.
    pub fn issuer(&self) -> &str {
        match self {
            Self::Url(issuer) | Self::Detailed { issuer, .. } => issuer,
        }
    }

    /// Where its keys are, when configured.
    pub fn jwks_uri(&self) -> Option<&str> {
        match self {
            Self::Url(_) => None,
            Self::Detailed { jwks_uri, .. } => jwks_uri.as_deref(),
        }
    }
}

impl From<String> for TrustedIssuerConfig {
    fn from(issuer: String) -> Self {
        Self::Url(issuer)
    }
}

/// `aggregator.oauth.mcpClient`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct McpClientConfig {
    /// Whether people can sign in to downstream servers. Default false.
    pub enabled: bool,
    /// The gateway's public base URL (sign-in links and the callback are under it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// A client id registered out of band with every authorization server, instead of
    /// dynamic registration or the metadata document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Path of the OAuth callback. Default `/oauth/proxy/callback`.
    pub callback_path: String,
    /// The Client ID Metadata Document the gateway serves.
    pub cimd: CimdConfig,
    /// Where a browser may be sent after a sign-in (`redirect` of `/oauth/proxy/start`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub post_login_redirect_allowlist: Vec<String>,
    /// Keep people's grants on disk, encrypted, so they survive a restart (opt-in; by default
    /// they live in memory only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant_store: Option<GrantStoreConfig>,
}

/// `aggregator.oauth.mcpClient.grantStore`: an encrypted directory of grants. Only grants that
/// outlive a transport are kept there: a person's (`grantScope: subject`) and those of a
/// front-door principal's session; a transport session's grants end with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct GrantStoreConfig {
    /// The directory (created 0700; files are 0600).
    pub path: String,
    /// A file holding the 32-byte AES-256-GCM key, base64. The key itself never appears in
    /// `config.yaml`, so reading the configuration cannot reveal it.
    pub encryption_key_file: String,
}

impl GrantStoreConfig {
    /// A store in `path` keyed by the key in `encryption_key_file`.
    pub fn new(path: impl Into<String>, encryption_key_file: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            encryption_key_file: encryption_key_file.into(),
        }
    }
}

impl Default for McpClientConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            public_url: None,
            client_id: None,
            callback_path: DEFAULT_CALLBACK_PATH.to_owned(),
            cimd: CimdConfig::default(),
            post_login_redirect_allowlist: Vec::new(),
            grant_store: None,
        }
    }
}

impl McpClientConfig {
    /// Keeps grants in `store`.
    pub fn with_grant_store(mut self, store: GrantStoreConfig) -> Self {
        self.grant_store = Some(store);
        self
    }

    /// Allows sending the browser to URLs under `prefixes` after a sign-in.
    pub fn allowing_redirects(mut self, prefixes: Vec<String>) -> Self {
        self.post_login_redirect_allowlist = prefixes;
        self
    }

    /// Enables sign-in with the gateway reachable at `public_url`.
    pub fn enabled_at(public_url: impl Into<String>) -> Self {
        Self {
            enabled: true,
            public_url: Some(public_url.into()),
            ..Self::default()
        }
    }
}

/// `aggregator.oauth.mcpClient.cimd`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct CimdConfig {
    /// Where the document is served. Default `/.well-known/oauth-client.json`.
    pub path: String,
    /// The scopes it declares. Default `openid profile email groups offline_access`.
    pub scopes: String,
}

impl Default for CimdConfig {
    fn default() -> Self {
        Self {
            path: DEFAULT_CIMD_PATH.to_owned(),
            scopes: DEFAULT_CIMD_SCOPES.to_owned(),
        }
    }
}

/// The whole `config.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct MusterConfig {
    /// The aggregator: where muster listens and how it names tools.
    pub aggregator: AggregatorConfig,
    /// Namespace muster reads its resources from (Kubernetes mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Run in Kubernetes mode (resources from the cluster) instead of filesystem mode.
    pub kubernetes: bool,
    /// Namespaces whose MCPServers and Workflows muster reads besides its own (Kubernetes
    /// mode). A server of another namespace is named `<namespace>_<name>` and exposes its
    /// tools under `<namespace>_<toolPrefix or name>`; muster's ServiceAccount needs to read
    /// and watch them there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_namespaces: Vec<String>,
    /// Whose identity the core tools write definitions with in Kubernetes mode: the caller's
    /// own token (the default) or muster's ServiceAccount impersonating the caller.
    #[serde(skip_serializing_if = "is_default_kubernetes_writes")]
    pub kubernetes_writes: KubernetesWritesConfig,
    /// Kubernetes mode: the admission policy binding that must be in force before muster reads
    /// a Secret an MCPServer names, and muster's own Secrets, which no MCPServer may name.
    #[serde(skip_serializing_if = "is_default_secret_binding")]
    pub secret_binding: SecretBindingConfig,
    /// Named toolsets (selected with `X-muster-Toolset: preset:<name>` or `filter_tools`'
    /// `toolset`), besides the built-in `read-only`, `none` and `full`. Each is the union of its
    /// `include` rules minus the union of its `exclude` rules; every rule sets exactly one key.
    /// Checked when the gateway starts: a redefined built-in, a rule with no key or several, a
    /// bad glob, `readOnly: false`, a `preset` rule in `exclude`, an unknown or cyclic `preset`
    /// stops it, naming the preset.
    // Held as written and read as a `ToolsetPresetConfig` at that check, so that a bad preset
    // stops the gateway naming the preset instead of leaving config.yaml out.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, ToolsetPresetConfig>")]
    pub toolset_presets: BTreeMap<String, Value>,
}

/// One toolset preset of `toolsetPresets`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ToolsetPresetConfig {
    /// What the preset is for (listed by `filter_tools` under `presets`).
    #[serde(default)]
    pub description: String,
    /// Rules whose tools the preset includes.
    #[serde(default)]
    pub include: Vec<ToolsetRuleConfig>,
    /// Rules whose tools the preset then removes.
    #[serde(default)]
    pub exclude: Vec<ToolsetRuleConfig>,
}

/// One `include` or `exclude` rule of a toolset preset: exactly one key is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolsetRuleConfig {
    /// One exposed tool name (`x_github_create_issue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A glob on the exposed name, case-sensitive (`x_loki_*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Every tool of an MCPServer (or of a family).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The tool of one workflow (`workflow_<name>`), by the workflow's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// `true`: every tool annotated read-only (`readOnlyHint: true`); `false` is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Every tool of another preset, built-in or configured (in `include` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Tools whose labels (a workflow's own, a server tool's server's) match: `k=v`, `k` (any
    /// value) or `k=` (the empty value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl MusterConfig {
    /// Replaces the aggregator section.
    pub fn with_aggregator(mut self, aggregator: AggregatorConfig) -> Self {
        self.aggregator = aggregator;
        self
    }

    /// Sets the namespace.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Adds namespaces whose definitions muster reads besides its own (Kubernetes mode).
    pub fn with_additional_namespaces(mut self, namespaces: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.additional_namespaces
            .extend(namespaces.into_iter().map(Into::into));
        self
    }

    /// Sets Kubernetes mode.
    pub fn with_kubernetes(mut self, kubernetes: bool) -> Self {
        self.kubernetes = kubernetes;
        self
    }

    /// Adds a toolset preset.
    pub fn with_toolset_preset(mut self, name: impl Into<String>, preset: Value) -> Self {
        self.toolset_presets.insert(name.into(), preset);
        self
    }

    /// Checks the constraints serde does not and reports every violation. Paths are
    /// keys of `config.yaml`, e.g. `aggregator.musterPrefix`.
    pub fn validate_config(&self) -> Result<(), ValidationErrors> {
        let mut errors = ValidationErrors::new();
        self.aggregator.validate_into(&mut errors);
        let named = self.namespace.iter().map(|n| ("namespace", n));
        let additional = self.additional_namespaces.iter().map(|n| ("additionalNamespaces", n));
        for (key, namespace) in named.chain(additional) {
            if namespace.len() > 63 || !NAMESPACE_RE.is_match(namespace) {
                errors.push(
                    key,
                    format!(
                        "namespace \"{namespace}\" must be a Kubernetes namespace name \
                         ({NAMESPACE_PATTERN}, at most 63 characters)"
                    ),
                );
            }
        }
        for name in self.toolset_presets.keys() {
            if name.trim().is_empty() {
                errors.push("toolsetPresets", "a toolset preset name must not be empty");
            }
        }
        errors.into_result()
    }
}

/// Transport the aggregator serves MCP clients over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum Transport {
    /// MCP streamable HTTP (the default).
    #[default]
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    /// The legacy MCP HTTP+SSE transport.
    #[serde(rename = "sse")]
    Sse,
    /// stdin/stdout of the muster process.
    #[serde(rename = "stdio")]
    Stdio,
}

impl Transport {
    /// The spelling in `config.yaml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StreamableHttp => "streamable-http",
            Self::Sse => "sse",
            Self::Stdio => "stdio",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `aggregator` section of `config.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct AggregatorConfig {
    /// Port the aggregator listens on. Default 8090; 0 lets the system choose.
    pub port: u16,
    /// Host the aggregator listens on. Default `localhost`.
    pub host: String,
    /// Transport served to clients. Default `streamable-http`.
    pub transport: Transport,
    /// Prefix of aggregated tool names (`x_<server>_<tool>`). Default `x`.
    pub muster_prefix: String,
    /// Whether the aggregator runs. Default true.
    pub enabled: bool,
    /// OAuth around the gateway.
    #[serde(skip_serializing_if = "is_default_oauth")]
    pub oauth: OAuthConfig,
    /// What `tools/list`, `resources/list` and `prompts/list` show: the meta-tools (`meta`, the
    /// default), the aggregated tools, resources and prompts themselves (`native`), or both.
    pub exposure: Exposure,
    /// Whether downstream names carry the `x_<server>_` prefix (`always`, the default) or are
    /// exposed unchanged (`never`; names two servers share then collide).
    pub prefix_mode: PrefixMode,
    /// The `Host` values `/mcp` accepts (DNS-rebinding protection), with or without a port.
    /// Default: the loopback names (`localhost`, `127.0.0.1`, `::1`); a deployment behind a
    /// proxy lists its public host names; `["*"]` accepts any (not for public deployments).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_hosts: Option<Vec<String>>,
    /// The `Origin` values browsers may call `/mcp` from; others are refused with 403. Default:
    /// none checked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_origins: Vec<String>,
    /// Limits on requests, concurrent calls and shutdown ([`Limits`]).
    pub limits: Limits,
    /// What MCP server definitions written through the core tools, and
    /// `core_mcpserver_detect`'s probe, may make the gateway do: run commands (stdio), reach
    /// which URLs and link-local addresses ([`ServerApiConfig`]). Files in `mcpservers/` are not
    /// affected.
    #[serde(skip_serializing_if = "is_default_server_api")]
    pub server_api: ServerApiConfig,
    /// How `filter_tools {query}` ranks: BM25F alone (the default), or fused with a static
    /// embedding model's similarity ([`RankingSettings`]).
    #[serde(skip_serializing_if = "is_default_ranking")]
    pub ranking: RankingSettings,
}

fn is_default_ranking(ranking: &RankingSettings) -> bool {
    *ranking == RankingSettings::default()
}

fn is_default_server_api(api: &ServerApiConfig) -> bool {
    *api == ServerApiConfig::default()
}

/// `aggregator.exposure`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Exposure {
    /// The 13 meta-tools only.
    #[default]
    Meta,
    /// The aggregated tools, resources and prompts, without the meta-tools.
    Native,
    /// The meta-tools and the aggregated ones.
    Both,
}

impl Exposure {
    /// Whether the meta-tools are listed and callable.
    pub fn meta(self) -> bool {
        matches!(self, Self::Meta | Self::Both)
    }

    /// Whether the aggregated tools, resources and prompts are listed and callable directly.
    pub fn native(self) -> bool {
        matches!(self, Self::Native | Self::Both)
    }
}

/// `aggregator.prefixMode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PrefixMode {
    /// `x_<server>_<name>`.
    #[default]
    Always,
    /// Downstream names unchanged.
    Never,
}

fn is_default_oauth(oauth: &OAuthConfig) -> bool {
    *oauth == OAuthConfig::default()
}

fn is_default_kubernetes_writes(writes: &KubernetesWritesConfig) -> bool {
    *writes == KubernetesWritesConfig::default()
}

fn is_default_secret_binding(binding: &SecretBindingConfig) -> bool {
    *binding == SecretBindingConfig::default()
}

impl Default for AggregatorConfig {
    fn default() -> Self {
        Self {
            port: DEFAULT_PORT,
            host: DEFAULT_HOST.to_owned(),
            transport: Transport::default(),
            muster_prefix: DEFAULT_MUSTER_PREFIX.to_owned(),
            enabled: true,
            oauth: OAuthConfig::default(),
            exposure: Exposure::default(),
            prefix_mode: PrefixMode::default(),
            allowed_hosts: None,
            allowed_origins: Vec::new(),
            limits: Limits::default(),
            server_api: ServerApiConfig::default(),
            ranking: RankingSettings::default(),
        }
    }
}

impl AggregatorConfig {
    /// Sets the port.
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Sets the host.
    pub fn with_host(mut self, host: impl Into<String>) -> Self {
        self.host = host.into();
        self
    }

    /// Sets the transport.
    pub fn with_transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// Sets the tool name prefix.
    pub fn with_muster_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.muster_prefix = prefix.into();
        self
    }

    /// Sets what the MCP lists show.
    pub fn with_exposure(mut self, exposure: Exposure) -> Self {
        self.exposure = exposure;
        self
    }

    /// Sets the `Host` values `/mcp` accepts (`["*"]`: any).
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = Some(hosts);
        self
    }

    /// Sets the `Origin` values browsers may call `/mcp` from.
    pub fn with_allowed_origins(mut self, origins: Vec<String>) -> Self {
        self.allowed_origins = origins;
        self
    }

    /// Sets what definitions written through the core tools may do.
    pub fn with_server_api(mut self, server_api: ServerApiConfig) -> Self {
        self.server_api = server_api;
        self
    }

    /// Sets how `filter_tools {query}` ranks.
    pub fn with_ranking(mut self, ranking: RankingSettings) -> Self {
        self.ranking = ranking;
        self
    }

    /// Whether the front door (`aggregator.oauth.server.enabled`) guards `/mcp`: the gateway
    /// is shared, and [`ServerApiConfig`]'s defaults are the closed ones.
    pub fn front_door(&self) -> bool {
        self.oauth.server.enabled
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets whether downstream names are prefixed.
    pub fn with_prefix_mode(mut self, mode: PrefixMode) -> Self {
        self.prefix_mode = mode;
        self
    }

    /// Sets whether the aggregator runs.
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets `oauth.mcpClient`.
    pub fn with_mcp_client(mut self, mcp_client: McpClientConfig) -> Self {
        self.oauth.mcp_client = mcp_client;
        self
    }

    /// Sets `oauth.server`.
    pub fn with_oauth_server(mut self, server: OAuthServerConfig) -> Self {
        self.oauth.server = server;
        self
    }

    fn validate_into(&self, errors: &mut ValidationErrors) {
        self.limits.validate_into(errors);
        self.server_api.validate_into(errors);
        self.ranking.validate_into(errors);
        let has_key = self.oauth.state_key_file().is_some();
        self.oauth.server.storage.validate_into(has_key, errors);
        if self.host.trim().is_empty() {
            errors.push("aggregator.host", "aggregator.host must not be empty");
        } else if self.host.chars().any(char::is_whitespace) {
            errors.push(
                "aggregator.host",
                format!("aggregator.host \"{}\" must not contain whitespace", self.host),
            );
        }
        if !NAME_RE.is_match(&self.muster_prefix) {
            errors.push(
                "aggregator.musterPrefix",
                format!(
                    "aggregator.musterPrefix \"{}\" must match {NAME_PATTERN}",
                    self.muster_prefix
                ),
            );
        }
    }
}

/// The keys of a raw `config.yaml` document this version does not know, as dotted paths
/// (`exposure`, `aggregator.oauth.provider`), sorted. The known keys are those of
/// [`MusterConfig`]'s JSON schema, at every depth (a typo such as
/// `aggregator.limits.maxJsonDeph` is listed); maps with free keys (`toolsetPresets`) are not
/// inspected. A document that is not an object has none.
pub fn unknown_keys(doc: &Value) -> Vec<String> {
    let schema = schemars::schema_for!(MusterConfig);
    let root = schema.as_value();
    let mut unknown = Vec::new();
    collect_unknown(root, root, doc, "", &mut unknown);
    unknown.sort();
    unknown
}

/// Walks `doc` along `schema` (resolving `$ref` in `root`), pushing the keys an object schema
/// does not declare.
fn collect_unknown(root: &Value, schema: &Value, doc: &Value, path: &str, unknown: &mut Vec<String>) {
    let Some(object) = doc.as_object() else {
        return;
    };
    let Some(properties) = object_properties(root, schema, 0) else {
        return;
    };
    for (key, value) in object {
        let dotted = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match properties.get(key) {
            Some(sub) => collect_unknown(root, sub, value, &dotted, unknown),
            None => unknown.push(dotted),
        }
    }
}

/// The declared properties of an object schema, through `$ref` and the `anyOf`/`oneOf` of an
/// optional section; `None` for anything else (a map, a scalar).
fn object_properties<'a>(
    root: &'a Value,
    schema: &'a Value,
    depth: usize,
) -> Option<&'a serde_json::Map<String, Value>> {
    if depth > 16 {
        return None;
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = reference.strip_prefix('#').and_then(|pointer| root.pointer(pointer))?;
        return object_properties(root, target, depth + 1);
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        return Some(properties);
    }
    ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Value::as_array))
        .flatten()
        .find_map(|branch| object_properties(root, branch, depth + 1))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{AggregatorConfig, MusterConfig, Transport, unknown_keys};

    fn parse(doc: &str) -> MusterConfig {
        match serde_saphyr::from_str(doc) {
            Ok(config) => config,
            Err(e) => panic!("config does not parse: {e}"),
        }
    }

    #[track_caller]
    fn assert_only(config: &MusterConfig, path: &str, message: &str) {
        let errors = config.validate_config().expect_err("validation must fail");
        assert_eq!(errors.to_lines(), vec![format!("{path}: {message}")]);
    }

    #[test]
    fn empty_document_gives_the_documented_defaults() {
        let config = parse("{}");
        assert_eq!(config.aggregator.port, 8090);
        assert_eq!(config.aggregator.host, "localhost");
        assert_eq!(config.aggregator.transport, Transport::StreamableHttp);
        assert_eq!(config.aggregator.muster_prefix, "x");
        assert!(config.aggregator.enabled);
        assert_eq!(config.namespace, None);
        assert!(!config.kubernetes);
        assert!(config.toolset_presets.is_empty());
        assert_eq!(config, MusterConfig::default());
        assert!(config.validate_config().is_ok());
    }

    #[test]
    fn partial_aggregator_section_keeps_the_other_defaults() {
        let config = parse("aggregator:\n  port: 9000\n  musterPrefix: m\n");
        assert_eq!(
            config.aggregator,
            AggregatorConfig::default().with_port(9000).with_muster_prefix("m")
        );
    }

    #[test]
    fn every_known_key_parses_and_round_trips() {
        let config = parse(
            r#"
aggregator:
  port: 8091
  host: 0.0.0.0
  transport: sse
  musterPrefix: mx
  enabled: false
namespace: muster-system
kubernetes: true
toolsetPresets:
  readonly: {tools: ["x_kubernetes_get*"]}
"#,
        );
        let expected = MusterConfig::default()
            .with_aggregator(
                AggregatorConfig::default()
                    .with_port(8091)
                    .with_host("0.0.0.0")
                    .with_transport(Transport::Sse)
                    .with_muster_prefix("mx")
                    .with_enabled(false),
            )
            .with_namespace("muster-system")
            .with_kubernetes(true)
            .with_toolset_preset("readonly", json!({"tools": ["x_kubernetes_get*"]}));
        assert_eq!(config, expected);
        let written = serde_json::to_value(&config).expect("serializes");
        assert_eq!(written["aggregator"]["musterPrefix"], "mx");
        assert_eq!(written["toolsetPresets"]["readonly"]["tools"][0], "x_kubernetes_get*");
        let back: MusterConfig = serde_json::from_value(written).expect("parses");
        assert_eq!(back, config);
    }

    #[test]
    fn transports_use_the_documented_spellings() {
        for (transport, spelling) in [
            (Transport::StreamableHttp, "streamable-http"),
            (Transport::Sse, "sse"),
            (Transport::Stdio, "stdio"),
        ] {
            assert_eq!(serde_json::to_value(transport).expect("serializes"), spelling);
            assert_eq!(transport.to_string(), spelling);
        }
        let error =
            serde_saphyr::from_str::<MusterConfig>("aggregator: {transport: http}").expect_err("unknown transport");
        assert!(error.to_string().contains("unknown variant `http`"), "{error}");
    }

    #[test]
    fn the_mcp_client_section_is_read_with_muster_defaults() {
        let config = parse(
            r#"
aggregator:
  oauth:
    mcpClient:
      enabled: true
      publicUrl: https://muster.example.com
      postLoginRedirectAllowlist: [https://chat.example.com]
"#,
        );
        let client = &config.aggregator.oauth.mcp_client;
        assert!(client.enabled);
        assert_eq!(client.public_url.as_deref(), Some("https://muster.example.com"));
        assert_eq!(client.callback_path, "/oauth/proxy/callback");
        assert_eq!(client.cimd.path, "/.well-known/oauth-client.json");
        assert_eq!(client.cimd.scopes, "openid profile email groups offline_access");
        assert_eq!(client.post_login_redirect_allowlist, ["https://chat.example.com"]);
        assert!(!parse("aggregator: {port: 1}").aggregator.oauth.mcp_client.enabled);
    }

    #[test]
    fn unknown_keys_are_accepted_and_listed() {
        let doc = r#"
aggregator:
  port: 8090
  oauth: {server: {enabled: false}, provider: dex}
  admin: {enabled: true, port: 9999}
exposure: {mode: all}
kubernetes: false
"#;
        let config = parse(doc);
        assert_eq!(config.aggregator.port, 8090);
        let raw: serde_json::Value = serde_saphyr::from_str(doc).expect("parses");
        assert_eq!(
            unknown_keys(&raw),
            ["aggregator.admin", "aggregator.oauth.provider", "exposure"]
        );
        assert!(unknown_keys(&json!({"aggregator": {"port": 1}, "namespace": "a"})).is_empty());
        // Every key this version reads is known, at any depth, and a typo below is named.
        let every = json!({"aggregator": {
            "exposure": "both", "prefixMode": "never", "allowedHosts": ["*"], "allowedOrigins": [],
            "limits": {"maxJsonDepth": 8, "maxJsonDeph": 9},
            "oauth": {"mcpClient": {"enabled": true, "grantStore": {"path": "/x"}}, "server": {"clockSkewSeconds": 5}}
        }, "toolsetPresets": {"anything": {"servers": ["a"]}}});
        assert_eq!(unknown_keys(&every), ["aggregator.limits.maxJsonDeph"]);
        assert!(unknown_keys(&json!(null)).is_empty());
    }

    #[test]
    fn empty_host_is_refused() {
        let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_host(""));
        assert_only(&config, "aggregator.host", "aggregator.host must not be empty");
    }

    #[test]
    fn host_with_whitespace_is_refused() {
        let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_host("local host"));
        assert_only(
            &config,
            "aggregator.host",
            "aggregator.host \"local host\" must not contain whitespace",
        );
    }

    #[test]
    fn muster_prefix_not_matching_the_pattern_is_refused() {
        let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_muster_prefix("9x"));
        assert_only(
            &config,
            "aggregator.musterPrefix",
            "aggregator.musterPrefix \"9x\" must match ^[a-zA-Z][a-zA-Z0-9_-]*$",
        );
    }

    #[test]
    fn namespace_that_is_not_a_kubernetes_name_is_refused() {
        let config = MusterConfig::default().with_namespace("Muster_System");
        assert_only(
            &config,
            "namespace",
            "namespace \"Muster_System\" must be a Kubernetes namespace name \
             (^[a-z0-9]([-a-z0-9]*[a-z0-9])?$, at most 63 characters)",
        );
        let config = MusterConfig::default().with_namespace("a".repeat(64));
        assert!(config.validate_config().is_err());
        let config = MusterConfig::default().with_namespace("a".repeat(63));
        assert!(config.validate_config().is_ok());
        let config = MusterConfig::default().with_additional_namespaces(["team-a", "Team_B"]);
        assert_only(
            &config,
            "additionalNamespaces",
            "namespace \"Team_B\" must be a Kubernetes namespace name \
             (^[a-z0-9]([-a-z0-9]*[a-z0-9])?$, at most 63 characters)",
        );
    }

    #[test]
    fn empty_toolset_preset_name_is_refused() {
        let config = MusterConfig::default().with_toolset_preset("", json!({}));
        assert_only(&config, "toolsetPresets", "a toolset preset name must not be empty");
    }

    #[test]
    fn port_zero_is_accepted_for_a_system_chosen_port() {
        let config = MusterConfig::default().with_aggregator(AggregatorConfig::default().with_port(0));
        assert!(config.validate_config().is_ok());
    }
}
