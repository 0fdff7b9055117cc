//! [`KubernetesPolicy`]: which MCPServers run in Kubernetes mode, the rules the reference gives
//! the loader there. A refused server reads Failed with the reason in `status.lastError` and is
//! not started; `core_mcpserver_create`, `_update` and `_validate` fail with the same reason.
//!
//! - **The documented rules** (`MCPServer::validate`), which the CRD's schema and CEL rules
//!   enforce at admission: a resource written before a rule existed (a credential in a header
//!   or in the URL, say) reads Failed with every violation, as the reference says, instead of
//!   being served.
//! - **No stdio server.** It would start a command in muster's own pod under its
//!   ServiceAccount; run the MCP server as its own workload and register it over
//!   `streamable-http` or `sse`.
//! - **A server outside muster's namespace** may not name a Secret of another namespace
//!   (`clientCredentialsSecretRef.namespace`), since muster would send it to a host that
//!   server names, nor receive provider App grants (`auth.providerApps`, muster's namespace
//!   only).
//! - **In muster's namespace**, neither a server's name nor its `toolPrefix` starts with
//!   `org-`: those are the exposure names of the servers of other namespaces.
//!
//! ```
//! use muster_core::crd::{MCPServer, MCPServerSpec, ServerType};
//! use muster_gateway::registry::ServerPolicy;
//! use muster_kube::policy::KubernetesPolicy;
//!
//! let policy = KubernetesPolicy::new("muster");
//! let stdio = MCPServer::new("git", MCPServerSpec {
//!     server_type: Some(ServerType::Stdio),
//!     command: Some("npx".into()),
//!     ..MCPServerSpec::default()
//! });
//! let refusal = policy.refusal(&stdio).unwrap_or_default();
//! assert!(refusal.contains("streamable-http or sse"), "{refusal}");
//! ```

use muster_core::crd::{ClientCredentialsSecretRef, MCPServer, ServerType};
use muster_gateway::registry::ServerPolicy;

/// The names of muster's namespace that belong to other namespaces' servers.
const ORG_PREFIX: &str = "org-";

/// Which MCPServers run in Kubernetes mode, with muster in `namespace`.
#[derive(Debug, Clone)]
pub struct KubernetesPolicy {
    namespace: String,
}

impl KubernetesPolicy {
    /// The policy of a muster running in `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
        }
    }
}

impl ServerPolicy for KubernetesPolicy {
    fn refusal(&self, server: &MCPServer) -> Option<String> {
        self.placement_refusal(server).or_else(|| {
            let errors = server.validate().err()?;
            Some(format!(
                "MCPServer {} breaks muster's rules: {}",
                server.metadata.name,
                errors.to_lines().join("; ")
            ))
        })
    }
}

impl KubernetesPolicy {
    /// Why `server` may not run where it is, whatever it says otherwise.
    fn placement_refusal(&self, server: &MCPServer) -> Option<String> {
        let spec = &server.spec;
        let name = &server.metadata.name;
        if matches!(spec.server_type, Some(ServerType::Stdio) | None) {
            return Some(format!(
                "MCPServer {name} is a stdio server, which muster does not run in Kubernetes mode: \
                 it would start a command in muster's own pod under its ServiceAccount. Run the MCP \
                 server as its own workload and register it with type streamable-http or sse"
            ));
        }
        let namespace = server.metadata.namespace.as_deref().unwrap_or(&self.namespace);
        if namespace == self.namespace {
            let prefix = spec.tool_prefix.as_deref().unwrap_or_default();
            if name.starts_with(ORG_PREFIX) || prefix.starts_with(ORG_PREFIX) {
                return Some(format!(
                    "MCPServer {name} in muster's namespace may not have a name or toolPrefix starting \
                     with {ORG_PREFIX:?}: those are the exposure names of other namespaces' servers"
                ));
            }
            return None;
        }
        let auth = spec.auth.as_ref()?;
        if !auth.provider_apps.is_empty() {
            return Some(format!(
                "MCPServer {name} is outside muster's namespace ({}), where auth.providerApps is not \
                 allowed: provider App grants go only to servers of muster's namespace",
                self.namespace
            ));
        }
        let refs = [
            auth.token_exchange
                .as_ref()
                .and_then(|t| t.client_credentials_secret_ref.as_ref()),
            auth.authorization_server
                .as_ref()
                .and_then(|a| a.client_credentials_secret_ref.as_ref()),
        ];
        if let Some(foreign) = refs
            .into_iter()
            .flatten()
            .find(|r: &&ClientCredentialsSecretRef| r.namespace.as_deref().is_some_and(|ns| ns != namespace))
        {
            return Some(format!(
                "MCPServer {name} is outside muster's namespace and names the Secret {}/{}: a server \
                 outside muster's namespace may name only Secrets of its own namespace ({namespace})",
                foreign.namespace.as_deref().unwrap_or_default(),
                foreign.name
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use muster_core::crd::{MCPServerAuth, MCPServerSpec, TokenExchangeConfig};

    use super::*;

    fn remote(name: &str, namespace: &str) -> MCPServer {
        let mut server = MCPServer::new(
            name,
            MCPServerSpec {
                server_type: Some(ServerType::StreamableHttp),
                url: Some("https://mcp.example.com/mcp".into()),
                ..MCPServerSpec::default()
            },
        );
        server.metadata.namespace = Some(namespace.into());
        server
    }

    fn refusal(server: &MCPServer) -> String {
        KubernetesPolicy::new("muster").refusal(server).unwrap_or_default()
    }

    #[test]
    fn a_server_written_before_a_rule_is_refused_with_every_violation() {
        let mut server = remote("github", "muster");
        assert_eq!(KubernetesPolicy::new("muster").refusal(&server), None);
        server
            .spec
            .headers
            .insert("Authorization".into(), "Bearer ghp_s3cret".into());
        server.spec.url = Some("https://user:pass@mcp.example.com/mcp".into());
        let refused = refusal(&server);
        assert!(
            refused.starts_with("MCPServer github breaks muster's rules: "),
            "{refused}"
        );
        assert!(
            refused.contains("spec.headers") && refused.contains("spec.url"),
            "{refused}"
        );
    }

    #[test]
    fn a_remote_server_runs() {
        assert_eq!(KubernetesPolicy::new("muster").refusal(&remote("api", "muster")), None);
        assert_eq!(KubernetesPolicy::new("muster").refusal(&remote("api", "team")), None);
    }

    #[test]
    fn org_names_belong_to_other_namespaces() {
        assert!(refusal(&remote("org-acme", "muster")).contains("org-"));
        let mut server = remote("api", "muster");
        server.spec.tool_prefix = Some("org-acme".into());
        assert!(refusal(&server).contains("org-"));
        assert_eq!(
            refusal(&remote("org-acme", "org-acme")),
            "",
            "allowed in its own namespace"
        );
    }

    #[test]
    fn a_server_outside_musters_namespace_names_only_its_own_secrets() {
        let mut server = remote("api", "team");
        server.spec.auth = Some(MCPServerAuth {
            token_exchange: Some(TokenExchangeConfig {
                enabled: true,
                client_credentials_secret_ref: Some(ClientCredentialsSecretRef {
                    name: "creds".into(),
                    namespace: Some("muster".into()),
                    ..ClientCredentialsSecretRef::default()
                }),
                dex_token_endpoint: Some("https://dex.example.com/token".into()),
                connector_id: Some("cluster-b".into()),
                ..TokenExchangeConfig::default()
            }),
            ..MCPServerAuth::default()
        });
        assert!(refusal(&server).contains("muster/creds"), "{}", refusal(&server));
        server.metadata.namespace = Some("muster".into());
        assert_eq!(refusal(&server), "", "muster's namespace may name another's");

        let mut server = remote("api", "team");
        server.spec.auth = Some(MCPServerAuth {
            forward_token: true,
            provider_apps: vec!["github".into()],
            ..MCPServerAuth::default()
        });
        assert!(refusal(&server).contains("providerApps"));
    }
}
