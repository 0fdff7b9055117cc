//! One description per issuer: the MCPServers that pin the same authorization server
//! (`spec.auth.authorizationServer.issuer`) share its sign-in, so they must describe it the same
//! way: the same endpoints, `expectedIssuer`, `revocationEndpoint`,
//! `clientCredentialsSecretRef` and `grantScope` (`scopes` may differ).
//!
//! The description used is the oldest pinning server's (one that pins an endpoint, client
//! credentials or `grantScope: subject`; then the first by name); without any, the oldest
//! server's. A server that describes the issuer otherwise is in conflict
//! ([`AuthorizationServerConflict`]): it reads Failed, `core_auth_login` refuses it, and no grant
//! connects it, until both agree or the other server goes.
//!
//! ```
//! use muster_core::crd::MCPServer;
//! use muster_auth::issuers::conflict;
//!
//! let server = |name: &str, scope: &str| -> MCPServer {
//!     serde_saphyr::from_str(&format!(
//!         "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata: {{name: {name}}}\n\
//!          spec: {{type: streamable-http, url: 'https://{name}.example.com/mcp',\n\
//!          auth: {{authorizationServer: {{issuer: 'https://idp.example.com', grantScope: {scope}}}}}}}\n"
//!     ))
//!     .expect("an MCPServer")
//! };
//! let (github, wiki) = (server("github", "subject"), server("wiki", "session"));
//! let servers = [(&github, 1), (&wiki, 2)];
//! let found = conflict(servers.iter().copied(), "wiki").expect("wiki describes it otherwise");
//! assert_eq!(found.used, "github");
//! assert!(conflict(servers.iter().copied(), "github").is_none());
//! ```

use muster_core::crd::{ClientCredentialsSecretRef, GrantScope, MCPServer};

/// How a server describes its authorization server: what must agree among the servers of one
/// issuer. Serializable, so that a sign-in state store can keep it with a pending sign-in.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Description {
    /// The issuer.
    pub issuer: String,
    authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    expected_issuer: Option<String>,
    revocation_endpoint: Option<String>,
    client_credentials: Option<ClientCredentialsSecretRef>,
    grant_scope: GrantScope,
}

impl Description {
    /// `server`'s description, when it pins an authorization server.
    pub fn of(server: &MCPServer) -> Option<Self> {
        let pin = server.spec.auth.as_ref()?.authorization_server.as_ref()?;
        Some(Self {
            issuer: pin.issuer.trim_end_matches('/').to_owned(),
            authorization_endpoint: pin.authorization_endpoint.clone(),
            token_endpoint: pin.token_endpoint.clone(),
            expected_issuer: pin.expected_issuer.clone(),
            revocation_endpoint: pin.revocation_endpoint.clone(),
            client_credentials: pin.client_credentials_secret_ref.clone(),
            grant_scope: pin.grant_scope,
        })
    }

    fn pins_something(&self) -> bool {
        self.authorization_endpoint.is_some()
            || self.client_credentials.is_some()
            || self.grant_scope == GrantScope::Subject
    }
}

/// A server that describes its issuer otherwise than the description in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationServerConflict {
    /// The server in conflict.
    pub server: String,
    /// The issuer.
    pub issuer: String,
    /// The server whose description is used.
    pub used: String,
}

impl std::fmt::Display for AuthorizationServerConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AuthorizationServerConflict: MCPServer {} describes authorization server {} differently from MCPServer {}, \
             whose description is used (servers naming one issuer must pin the same endpoints, expectedIssuer, \
             revocationEndpoint, clientCredentialsSecretRef and grantScope); make them agree or remove one",
            self.server, self.issuer, self.used
        )
    }
}

/// Whether server `name` among `servers` (each with its arrival order, lower is older) is in
/// conflict with the description in use for its issuer.
pub fn conflict<'a>(
    servers: impl Iterator<Item = (&'a MCPServer, u64)>,
    name: &str,
) -> Option<AuthorizationServerConflict> {
    let mut mine = None;
    let mut peers = Vec::new();
    for (server, since) in servers {
        let Some(description) = Description::of(server) else {
            continue;
        };
        if server.metadata.name == name {
            mine = Some(description.clone());
        }
        peers.push((since, server.metadata.name.as_str(), description));
    }
    let mine = mine?;
    peers.retain(|(_, _, d)| d.issuer == mine.issuer);
    // Oldest first, then by name; a pinning server's description wins over the others.
    peers.sort_by(|a, b| {
        b.2.pins_something()
            .cmp(&a.2.pins_something())
            .then(a.0.cmp(&b.0))
            .then(a.1.cmp(b.1))
    });
    let (_, used, description) = peers.first()?;
    (*used != name && *description != mine).then(|| AuthorizationServerConflict {
        server: name.to_owned(),
        issuer: mine.issuer.clone(),
        used: (*used).to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, auth: &str) -> MCPServer {
        serde_saphyr::from_str(&format!(
            "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata: {{name: {name}}}\n\
             spec: {{type: streamable-http, url: 'https://{name}.example.com/mcp', auth: {{authorizationServer: {auth}}}}}\n"
        ))
        .expect("an MCPServer")
    }

    #[test]
    fn servers_that_agree_share_the_issuer_and_scopes_may_differ() {
        let a = server("a", "{issuer: 'https://idp', scopes: 'read'}");
        let b = server("b", "{issuer: 'https://idp/', scopes: 'write'}");
        let all = [(&a, 1), (&b, 2)];
        assert_eq!(conflict(all.iter().copied(), "a"), None);
        assert_eq!(conflict(all.iter().copied(), "b"), None);
    }

    #[test]
    fn the_oldest_pinning_description_is_used_and_the_other_is_refused_naming_it() {
        let plain = server("plain", "{issuer: 'https://idp'}");
        let pinned = server(
            "pinned",
            "{issuer: 'https://idp', authorizationEndpoint: 'https://idp/auth', tokenEndpoint: 'https://idp/token'}",
        );
        // `plain` is older, but `pinned` pins endpoints: its description is used.
        let all = [(&plain, 1), (&pinned, 2)];
        let found = conflict(all.iter().copied(), "plain").expect("conflict");
        assert_eq!((found.server.as_str(), found.used.as_str()), ("plain", "pinned"));
        assert!(
            found
                .to_string()
                .starts_with("AuthorizationServerConflict: MCPServer plain")
        );
        assert_eq!(conflict(all.iter().copied(), "pinned"), None);
    }

    #[test]
    fn among_pinning_servers_the_oldest_wins_then_the_first_by_name() {
        let x = server("x", "{issuer: 'https://idp', grantScope: subject}");
        let y = server(
            "y",
            "{issuer: 'https://idp', revocationEndpoint: 'https://idp/revoke', grantScope: subject}",
        );
        let older_y = [(&x, 5), (&y, 3)];
        assert_eq!(
            conflict(older_y.iter().copied(), "x").map(|c| c.used),
            Some("y".to_owned())
        );
        let same_age = [(&x, 3), (&y, 3)];
        assert_eq!(
            conflict(same_age.iter().copied(), "y").map(|c| c.used),
            Some("x".to_owned())
        );
        // When the used one goes, the next takes over and nothing conflicts.
        let alone = [(&x, 5)];
        assert_eq!(conflict(alone.iter().copied(), "x"), None);
    }

    #[test]
    fn other_issuers_and_servers_without_a_pin_are_not_compared() {
        let a = server("a", "{issuer: 'https://one', grantScope: subject}");
        let b = server("b", "{issuer: 'https://two'}");
        let all = [(&a, 1), (&b, 2)];
        assert_eq!(conflict(all.iter().copied(), "b"), None);
        assert_eq!(conflict(all.iter().copied(), "nope"), None);
    }
}
