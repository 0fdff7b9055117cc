//! A gateway in front of a protected downstream server of an [`OidcProvider`], served on a
//! loopback port, for the sign-in and front-door tests.

use muster::core::config::{AggregatorConfig, MusterConfig};
use muster::core::crd::MCPServer;
use muster::gateway::{Gateway, GatewayOptions, registry::SessionReaping};
use serde_json::json;

use super::{fast_supervision, oidc::OidcProvider, remote, scripted::ScriptedServer};

/// The gateway, its base URL, and the protected server `protected` (tool `whoami`).
pub struct SignInGateway {
    pub base: String,
    pub gateway: Gateway,
    server: tokio::task::JoinHandle<()>,
    /// Shared by the replicas of [`SignInGateway::replica`].
    protected: std::sync::Arc<ScriptedServer>,
    definition: MCPServer,
    reaping: SessionReaping,
    secrets: Option<std::sync::Arc<dyn muster::gateway::secrets::SecretSource>>,
}

impl SignInGateway {
    /// Starts it with the aggregator configuration `configure` makes from the base URL.
    pub async fn start(idp: &OidcProvider, configure: impl FnOnce(String) -> AggregatorConfig) -> Self {
        Self::start_defining(idp, |_| {}, configure).await
    }

    /// Starts it with the protected server's definition changed by `define` (its `auth`, say).
    pub async fn start_defining(
        idp: &OidcProvider,
        define: impl FnOnce(&mut MCPServer),
        configure: impl FnOnce(String) -> AggregatorConfig,
    ) -> Self {
        Self::start_reaping(idp, SessionReaping::default(), define, configure).await
    }

    /// As [`Self::start_defining`], reaping sessions as `reaping` says.
    pub async fn start_reaping(
        idp: &OidcProvider,
        reaping: SessionReaping,
        define: impl FnOnce(&mut MCPServer),
        configure: impl FnOnce(String) -> AggregatorConfig,
    ) -> Self {
        Self::start_full(idp, reaping, None, define, configure).await
    }

    /// As [`Self::start_defining`], reading the Secrets servers name from `secrets`.
    pub async fn start_with_secrets(
        idp: &OidcProvider,
        secrets: std::sync::Arc<dyn muster::gateway::secrets::SecretSource>,
        define: impl FnOnce(&mut MCPServer),
        configure: impl FnOnce(String) -> AggregatorConfig,
    ) -> Self {
        Self::start_full(idp, SessionReaping::default(), Some(secrets), define, configure).await
    }

    async fn start_full(
        idp: &OidcProvider,
        reaping: SessionReaping,
        secrets: Option<std::sync::Arc<dyn muster::gateway::secrets::SecretSource>>,
        define: impl FnOnce(&mut MCPServer),
        configure: impl FnOnce(String) -> AggregatorConfig,
    ) -> Self {
        let protected = ScriptedServer::builder()
            .tool("whoami", true, |_| Ok(json!("you are in")))
            .serve_protected(idp.issuer())
            .await;
        let mut definition = remote("protected", &protected.url);
        define(&mut definition);
        Self::serve(std::sync::Arc::new(protected), definition, reaping, secrets, configure).await
    }

    /// Another gateway (on a port of its own) in front of the same protected server, as a
    /// replica of this one.
    pub async fn replica(&self, configure: impl FnOnce(String) -> AggregatorConfig) -> Self {
        Self::serve(
            std::sync::Arc::clone(&self.protected),
            self.definition.clone(),
            self.reaping,
            self.secrets.clone(),
            configure,
        )
        .await
    }

    /// Stops this gateway and starts a new one (on a new port) in front of the same protected
    /// server, as after a restart.
    pub async fn restart(self, configure: impl FnOnce(String) -> AggregatorConfig) -> Self {
        self.gateway.shutdown().await;
        self.server.abort();
        Self::serve(self.protected, self.definition, self.reaping, self.secrets, configure).await
    }

    async fn serve(
        protected: std::sync::Arc<ScriptedServer>,
        definition: MCPServer,
        reaping: SessionReaping,
        secrets: Option<std::sync::Arc<dyn muster::gateway::secrets::SecretSource>>,
        configure: impl FnOnce(String) -> AggregatorConfig,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let config = MusterConfig::default().with_aggregator(configure(base.clone()));
        let mut options = GatewayOptions::default()
            .with_supervision(fast_supervision())
            .with_session_reaping(reaping);
        if let Some(secrets) = &secrets {
            options = options.with_secrets(std::sync::Arc::clone(secrets));
        }
        let gateway =
            Gateway::with_options(config, vec![definition.clone()], Vec::new(), options).expect("valid configuration");
        gateway.start().await;
        let app = gateway.router();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base,
            gateway,
            server,
            protected,
            definition,
            reaping,
            secrets,
        }
    }

    pub async fn stop(self) {
        self.gateway.shutdown().await;
        self.server.abort();
    }
}

/// A 2025-11-25 client that declares URL elicitation and records the completions it is told.
#[derive(Clone, Default)]
pub struct UrlElicitingClient {
    pub completed: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl UrlElicitingClient {
    /// Whether the client is told, within 5 s, that elicitation `id` completed.
    pub async fn told_complete(&self, id: &str) -> bool {
        let told = serde_json::json!({"elicitationId": id});
        super::eventually(5, || async { self.completed.lock().expect("lock").contains(&told) }).await
    }
}

impl rmcp::ClientHandler for UrlElicitingClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        use rmcp::model::{
            ClientCapabilities, ElicitationCapability, Implementation, InitializeRequestParams, ProtocolVersion,
            UrlElicitationCapability,
        };
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new().with_url(UrlElicitationCapability::new()));
        InitializeRequestParams::new(capabilities, Implementation::new("url-eliciting-client", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        if notification.method == "notifications/elicitation/complete" {
            self.completed
                .lock()
                .expect("lock")
                .push(notification.params.unwrap_or_default());
        }
    }
}

/// An MCP client of the gateway at `url` (its `/mcp`).
pub async fn client(url: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    ().serve(rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned()))
        .await
        .expect("client connects")
}

/// The document a core tool answered through call_tool, and whether it failed (a meta-tool's
/// own refusal is its text).
pub async fn core(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
    args: serde_json::Value,
) -> (bool, serde_json::Value) {
    use serde_json::Value;
    let result = super::call_meta(client, "call_tool", json!({"name": name, "arguments": args})).await;
    let env = super::envelope(&result);
    if env.is_null() {
        return (true, Value::String(super::text(&result)));
    }
    let body = env["content"][0]["text"].as_str().unwrap_or("null").to_owned();
    (
        env["isError"] == true,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

/// The exposed tools `client` lists.
pub async fn tools_of(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Vec<String> {
    let page = super::call_meta(client, "list_tools", json!({"limit": 200})).await;
    super::tool_names(&serde_json::from_str(&super::text(&page)).unwrap_or(serde_json::Value::Null))
}
