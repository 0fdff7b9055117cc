//! The `MCPServer` resource: one downstream MCP server muster connects to.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::mcpserver_validate::{MAX_DESCRIPTION, MAX_HEADER_NAME, MAX_HEADERS, MAX_TIMEOUT, MAX_URL, MIN_TIMEOUT};
use super::validate::{INSTANCE_ARG_PATTERN, NAME_PATTERN};
use super::{API_VERSION, Condition, ObjectMeta, is_false, is_zero};

/// An `MCPServer` document: `apiVersion`, `kind`, `metadata`, `spec`, `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MCPServer {
    /// Always `muster.giantswarm.io/v1alpha1` ([`API_VERSION`]); [`MCPServer::validate`] refuses another.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `MCPServer` ([`MCPServer::KIND`]); [`MCPServer::validate`] refuses another.
    #[serde(default = "mcpserver_kind")]
    pub kind: String,
    /// Name, namespace, labels and annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired server.
    #[serde(default)]
    pub spec: MCPServerSpec,
    /// Observed state, written by muster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MCPServerStatus>,
}

fn api_version() -> String {
    API_VERSION.to_owned()
}

fn mcpserver_kind() -> String {
    MCPServer::KIND.to_owned()
}

impl MCPServer {
    /// The `kind` of the resource.
    pub const KIND: &'static str = "MCPServer";

    /// A server named `name` with `spec` and no status.
    pub fn new(name: impl Into<String>, spec: MCPServerSpec) -> Self {
        Self {
            api_version: api_version(),
            kind: mcpserver_kind(),
            metadata: ObjectMeta::named(name),
            spec,
            status: None,
        }
    }

    /// Whether the server is reached with each caller's own identity: its token forwarded
    /// (`auth.forwardToken`) or exchanged (`auth.tokenExchange.enabled`). Such a server is
    /// served per session (single sign-on); the gateway holds no connection of its own to it.
    pub fn uses_callers_identity(&self) -> bool {
        self.spec
            .auth
            .as_ref()
            .is_some_and(|a| a.forward_token || a.token_exchange.as_ref().is_some_and(|t| t.enabled))
    }
}

impl Default for MCPServer {
    fn default() -> Self {
        Self::new(String::new(), MCPServerSpec::default())
    }
}

/// How muster reaches an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum ServerType {
    /// A subprocess of muster speaking MCP on stdin/stdout (filesystem mode only).
    #[serde(rename = "stdio")]
    Stdio,
    /// A remote server speaking MCP streamable HTTP.
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    /// A remote server speaking the legacy MCP HTTP+SSE transport.
    #[serde(rename = "sse")]
    Sse,
}

impl ServerType {
    /// The spelling in a document: `stdio`, `streamable-http` or `sse`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::StreamableHttp => "streamable-http",
            Self::Sse => "sse",
        }
    }

    /// Whether muster reaches the server over the network (`streamable-http`, `sse`).
    pub fn is_remote(self) -> bool {
        !matches!(self, Self::Stdio)
    }
}

impl fmt::Display for ServerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The desired state of an MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
// The rules the CustomResourceDefinition enforces at `kubectl apply` (CEL, kept out of the doc
// comment, which is the schema's description): a stdio server needs `command`, a remote one
// `url`; no credential in `headers` or in the URL, no `env` on a remote server;
// `progress.maxDuration` is at least `timeout`.
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.type != 'stdio' || has(self.command)",
     "message": "command is required when type is stdio"},
    {"rule": "self.type == 'stdio' || has(self.url)",
     "message": "url is required when type is streamable-http or sse"},
    {"rule": "self.type == 'stdio' || !has(self.env) || size(self.env) == 0",
     "message": "env is only for stdio servers: a remote server's credential goes in a Secret that headersFrom names"},
    {"rule": "!has(self.headers) || self.headers.all(k, !(k.lowerAscii() in ['authorization', 'proxy-authorization', 'cookie', 'x-api-key']) || self.headers[k] == '')",
     "message": "headers may not carry a credential (Authorization, Proxy-Authorization, Cookie, X-API-Key): name a Secret in headersFrom"},
    {"rule": "!has(self.url) || !self.url.matches('^[^:/?#]+://[^/?#]*@')",
     "message": "url may not carry a user name or password: name a Secret in headersFrom"},
    {"rule": "!has(self.progress) || !has(self.progress.maxDuration) || self.progress.maxDuration >= (has(self.timeout) ? self.timeout : 30)",
     "message": "progress.maxDuration must be at least timeout"},
]))]
#[schemars(extend("required" = ["type"]))]
pub struct MCPServerSpec {
    /// Execution method; required.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub server_type: Option<ServerType>,
    /// Per-server tool prefix used when `family` is unset; pattern `^[a-zA-Z][a-zA-Z0-9_-]*$`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(NAME_PATTERN))]
    pub tool_prefix: Option<String>,
    /// Family grouping of equivalent servers under one tool surface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<MCPServerFamily>,
    /// Human-readable description, at most 500 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_DESCRIPTION))]
    pub description: Option<String>,
    /// Start when the system initialises (stdio servers). Default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub auto_start: bool,
    /// Executable of a stdio server; required when `type` is `stdio`. A name without a slash is
    /// looked up on the gateway's `PATH`; a relative path is taken from the gateway's working
    /// directory. `@self` ([`SELF_COMMAND`](crate::crd::SELF_COMMAND)) is the running gateway's
    /// own executable, wherever it is installed: the reference gateway's demo server is
    /// `command: "@self"`, `args: [demo-server]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Command line arguments of a stdio server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Endpoint of a remote server; required when `type` is `streamable-http` or `sse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_URL))]
    pub url: Option<String>,
    /// Environment variables of a stdio server; refused on a remote server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// HTTP headers sent with every request to a remote server; never a credential.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_HEADERS))]
    pub headers: BTreeMap<String, String>,
    /// HTTP headers whose values muster reads from a Secret when it connects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_HEADERS))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub headers_from: Vec<MCPServerHeaderFrom>,
    /// Budget of every operation in seconds, a tool call included: 1 to 300, default 30.
    #[serde(default = "default_timeout")]
    #[schemars(range(min = MIN_TIMEOUT, max = MAX_TIMEOUT))]
    pub timeout: u32,
    /// Budget of a whole tool call that reports progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<MCPServerProgress>,
    /// Authentication towards a remote server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<MCPServerAuth>,
    /// Desired lifecycle: true stops the server and keeps it stopped. Default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub suspended: bool,
    /// Requests a one-shot restart when it differs from `status.lastRestartedAt`.
    #[serde(
        default,
        deserialize_with = "super::time::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub restart_requested_at: Option<DateTime<Utc>>,
}

/// Default of `spec.timeout` in seconds.
pub(crate) const DEFAULT_TIMEOUT: u32 = 30;
/// Default (and maximum) of `spec.progress.maxDuration` in seconds.
pub(crate) const DEFAULT_MAX_DURATION: u32 = 3600;

fn default_timeout() -> u32 {
    DEFAULT_TIMEOUT
}

fn default_max_duration() -> u32 {
    DEFAULT_MAX_DURATION
}

impl Default for MCPServerSpec {
    fn default() -> Self {
        Self {
            server_type: None,
            tool_prefix: None,
            family: None,
            description: None,
            auto_start: false,
            command: None,
            args: Vec::new(),
            url: None,
            env: BTreeMap::new(),
            headers: BTreeMap::new(),
            headers_from: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            progress: None,
            auth: None,
            suspended: false,
            restart_requested_at: None,
        }
    }
}

/// Family grouping: servers sharing `name` appear as one tool surface with a required
/// parameter named `instanceArg` selecting the instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "instanceArg"]))]
pub struct MCPServerFamily {
    /// Family identifier; pattern `^[a-zA-Z][a-zA-Z0-9_-]*$`. Required.
    #[serde(default)]
    #[schemars(pattern(NAME_PATTERN))]
    pub name: String,
    /// Name of the parameter selecting an instance; pattern `^[a-zA-Z][a-zA-Z0-9_]*$`. Required.
    #[serde(default)]
    #[schemars(pattern(INSTANCE_ARG_PATTERN))]
    pub instance_arg: String,
}

/// A header whose value muster reads from a Secret in the MCPServer's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "valueFrom"]))]
pub struct MCPServerHeaderFrom {
    /// HTTP header name, 1 to 256 characters, unique in the list.
    #[serde(default)]
    #[schemars(length(min = 1, max = MAX_HEADER_NAME))]
    pub name: String,
    /// Where the value is.
    #[serde(default)]
    pub value_from: HeaderValueFrom,
}

/// The object holding a header's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["type", "name", "key"]))]
pub struct HeaderValueFrom {
    /// Kind of object holding the value; required.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub source_type: Option<HeaderValueSourceType>,
    /// Name of the object, in the MCPServer's own namespace; required.
    #[serde(default)]
    pub name: String,
    /// Key in the object's data holding the value; required.
    #[serde(default)]
    pub key: String,
}

/// Kind of object a header value is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum HeaderValueSourceType {
    /// A Kubernetes Secret.
    Secret,
}

/// Budget of a tool call that reports progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MCPServerProgress {
    /// Seconds a whole tool call may run while progress notifications keep restarting
    /// `timeout`: at least `timeout`, at most 3600, default 3600.
    #[serde(default = "default_max_duration")]
    #[schemars(range(min = MIN_TIMEOUT, max = DEFAULT_MAX_DURATION))]
    pub max_duration: u32,
}

impl Default for MCPServerProgress {
    fn default() -> Self {
        Self {
            max_duration: DEFAULT_MAX_DURATION,
        }
    }
}

/// Authentication type of a remote server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum AuthType {
    /// OAuth 2.1 (sign-in through muster, forwarding or exchange).
    Oauth,
    /// No authentication.
    None,
}

/// Authentication towards a remote server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
// The CRD's rules: `forwardIdentity` needs `type: oauth` and `authorizationServer`;
// `forwardToken` and `authorizationServer` exclude each other.
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.forwardIdentity) || !self.forwardIdentity || (has(self.type) && self.type == 'oauth' && has(self.authorizationServer))",
     "message": "forwardIdentity requires type oauth and authorizationServer"},
    {"rule": "!has(self.forwardToken) || !self.forwardToken || !has(self.authorizationServer)",
     "message": "forwardToken and authorizationServer are mutually exclusive"},
]))]
pub struct MCPServerAuth {
    /// `oauth` or `none`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub auth_type: Option<AuthType>,
    /// Forward muster's ID token for SSO. Default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub forward_token: bool,
    /// Send the session's ID token in `X-Muster-Id-Token` next to the pinned grant.
    /// Requires `type: oauth` and `authorizationServer`. Default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub forward_identity: bool,
    /// Provider Apps whose grants the server receives; requires `forwardToken` or
    /// `forwardIdentity`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_apps: Vec<String>,
    /// Additional audiences requested from the IdP; no whitespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_audiences: Vec<String>,
    /// RFC 8693 token exchange for cross-cluster SSO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<TokenExchangeConfig>,
    /// Pins the OAuth authorization server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_server: Option<MCPServerAuthAuthorizationServer>,
}

/// Default of `tokenExchange.scopes`.
pub(crate) const DEFAULT_TOKEN_EXCHANGE_SCOPES: &str = "openid profile email groups";

fn default_token_exchange_scopes() -> String {
    DEFAULT_TOKEN_EXCHANGE_SCOPES.to_owned()
}

/// RFC 8693 token exchange with a remote Dex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenExchangeConfig {
    /// Enable token exchange. Default false.
    #[serde(default)]
    pub enabled: bool,
    /// URL of Dex's token endpoint (may be a proxy); https, required when enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dex_token_endpoint: Option<String>,
    /// Expected `iss` of the exchanged token; https. Default: `dexTokenEndpoint`
    /// without its `/token` suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_issuer: Option<String>,
    /// ID of the OIDC connector on the remote Dex; required when enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_id: Option<String>,
    /// Scopes requested for the exchanged token. Default `openid profile email groups`.
    #[serde(default = "default_token_exchange_scopes")]
    pub scopes: String,
    /// Secret holding the client credentials the remote Dex requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials_secret_ref: Option<ClientCredentialsSecretRef>,
}

impl Default for TokenExchangeConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            dex_token_endpoint: None,
            expected_issuer: None,
            connector_id: None,
            scopes: default_token_exchange_scopes(),
            client_credentials_secret_ref: None,
        }
    }
}

fn default_client_id_key() -> String {
    "client-id".to_owned()
}

fn default_client_secret_key() -> String {
    "client-secret".to_owned()
}

/// Reference to a Secret holding an OAuth client ID and secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name"]))]
pub struct ClientCredentialsSecretRef {
    /// Name of the Secret; required.
    #[serde(default)]
    pub name: String,
    /// Namespace of the Secret. Default: the MCPServer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Key holding the client ID. Default `client-id`.
    #[serde(default = "default_client_id_key")]
    pub client_id_key: String,
    /// Key holding the client secret. Default `client-secret`.
    #[serde(default = "default_client_secret_key")]
    pub client_secret_key: String,
}

impl Default for ClientCredentialsSecretRef {
    fn default() -> Self {
        Self {
            name: String::new(),
            namespace: None,
            client_id_key: default_client_id_key(),
            client_secret_key: default_client_secret_key(),
        }
    }
}

/// Whom a grant of a pinned authorization server belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum GrantScope {
    /// The muster session that obtained it (the default).
    #[default]
    Session,
    /// The person: every session of the same person reuses it.
    Subject,
}

/// The pinned OAuth authorization server of a remote server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["issuer"]))]
pub struct MCPServerAuthAuthorizationServer {
    /// Issuer URL; https, no trailing slash, query or fragment. Required.
    #[serde(default)]
    pub issuer: String,
    /// Authorization endpoint of a server without discovery; set with `tokenEndpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    /// Token endpoint of such a server; set with `authorizationEndpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// Issuer in the RFC 9207 `iss` parameter when it differs from `issuer`; needs both
    /// endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_issuer: Option<String>,
    /// RFC 7009 revocation endpoint; https.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    /// Secret holding a client registered out of band.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials_secret_ref: Option<ClientCredentialsSecretRef>,
    /// Whom a token belongs to. Default `session`.
    #[serde(default)]
    pub grant_scope: GrantScope,
    /// OAuth `scope` parameter value (space-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<String>,
}

/// Infrastructure state of an MCP server, as written to `status.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum MCPServerState {
    /// The process is running (stdio).
    Running,
    /// The process is starting (stdio).
    Starting,
    /// The process is stopped (stdio).
    Stopped,
    /// Reachable and authenticated: muster's own connection, or a session's.
    Connected,
    /// Reachable; a person signs in to it through muster before it connects.
    #[serde(rename = "Auth Required")]
    AuthRequired,
    /// Reachable and served per session with the caller's identity; no session connected.
    #[serde(rename = "Awaiting Session")]
    AwaitingSession,
    /// A connection is being established.
    Connecting,
    /// Not connected, intentionally.
    Disconnected,
    /// Unreachable, or its token exchange is broken for every caller.
    Failed,
}

impl MCPServerState {
    /// Every state, in declaration order (for a gauge per state, or a table of them).
    pub const ALL: [Self; 9] = [
        Self::Running,
        Self::Starting,
        Self::Stopped,
        Self::Connected,
        Self::AuthRequired,
        Self::AwaitingSession,
        Self::Connecting,
        Self::Disconnected,
        Self::Failed,
    ];

    /// The spelling in `status.state`, e.g. `Auth Required`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "Running",
            Self::Starting => "Starting",
            Self::Stopped => "Stopped",
            Self::Connected => "Connected",
            Self::AuthRequired => "Auth Required",
            Self::AwaitingSession => "Awaiting Session",
            Self::Connecting => "Connecting",
            Self::Disconnected => "Disconnected",
            Self::Failed => "Failed",
        }
    }

    /// Whether the `Ready` condition is `True` in this state (the server is reachable).
    pub fn is_ready(self) -> bool {
        matches!(
            self,
            Self::Running | Self::Connected | Self::AuthRequired | Self::AwaitingSession
        )
    }
}

impl fmt::Display for MCPServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Health of an MCP server, as written to `status.health`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum MCPServerHealth {
    /// Not known yet.
    #[default]
    Unknown,
    /// The last check passed.
    Healthy,
    /// The last check failed.
    Unhealthy,
    /// A check is running.
    Checking,
}

/// Observed state of an MCP server, written by muster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MCPServerStatus {
    /// Infrastructure state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<MCPServerState>,
    /// Health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<MCPServerHealth>,
    /// Error of the most recent operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the server was last connected.
    #[serde(
        default,
        deserialize_with = "super::time::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_connected: Option<DateTime<Utc>>,
    /// How many times the server was restarted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restart_count: u32,
    /// The `spec.restartRequestedAt` most recently processed.
    #[serde(
        default,
        deserialize_with = "super::time::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_restarted_at: Option<DateTime<Utc>>,
    /// Connection attempts that failed in a row (remote servers).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consecutive_failures: u32,
    /// When the last connection attempt was made.
    #[serde(
        default,
        deserialize_with = "super::time::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_attempt: Option<DateTime<Utc>>,
    /// When muster tries again; absent while no retry is scheduled.
    #[serde(
        default,
        deserialize_with = "super::time::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_retry_after: Option<DateTime<Utc>>,
    /// HTTP status of the last failed attempt, when it got an HTTP response.
    #[serde(rename = "lastFailureHTTPStatus", default, skip_serializing_if = "Option::is_none")]
    pub last_failure_http_status: Option<u16>,
    /// Standard conditions; muster keeps one, `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
