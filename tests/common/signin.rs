//! A gateway in front of a protected downstream server of an [`OidcProvider`], served on a
//! loopback port, for the sign-in and front-door tests.

use muster::core::config::{AggregatorConfig, MusterConfig};
use muster::gateway::Gateway;
use serde_json::json;

use super::{fast_supervision, oidc::OidcProvider, remote, scripted::ScriptedServer};

/// The gateway, its base URL, and the protected server `protected` (tool `whoami`).
pub struct SignInGateway {
    pub base: String,
    pub gateway: Gateway,
    server: tokio::task::JoinHandle<()>,
    _protected: ScriptedServer,
}

impl SignInGateway {
    /// Starts it with the aggregator configuration `configure` makes from the base URL.
    pub async fn start(idp: &OidcProvider, configure: impl FnOnce(String) -> AggregatorConfig) -> Self {
        let protected = ScriptedServer::builder()
            .tool("whoami", true, |_| Ok(json!("you are in")))
            .serve_protected(idp.issuer())
            .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let config = MusterConfig::default().with_aggregator(configure(base.clone()));
        let gateway = Gateway::with_supervision(
            config,
            vec![remote("protected", &protected.url)],
            Vec::new(),
            fast_supervision(),
        )
        .expect("valid configuration");
        gateway.start().await;
        let app = gateway.router();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base,
            gateway,
            server,
            _protected: protected,
        }
    }

    pub async fn stop(self) {
        self.gateway.shutdown().await;
        self.server.abort();
    }
}
