//! What a caller may define through the API: the checks `core_mcpserver_create`, `_update` and
//! `_validate` make before a definition is written, and `core_mcpserver_detect` before it
//! probes, as `aggregator.serverApi` ([`ServerApiConfig`]) says. They sit in the core tools
//! themselves, so every path to them (`call_tool`, a native call, a toolset or preset, a
//! workflow step) meets them. Files in `mcpservers/` never pass through here.
//!
//! | check | single user (no front door) | behind the front door |
//! |---|---|---|
//! | stdio server (create, validate; an update of `command`, `args`, `env` or to stdio) | allowed | refused unless `allowStdio: true` |
//! | remote URL outside `allowedUrls` (when set) | refused | refused |
//! | remote URL at a link-local address, literal or resolved | allowed | refused unless `allowLinkLocal: true` |
//!
//! A name that resolves to a link-local address is refused when it is written, and again at
//! every connection: the probe's and, behind the front door, those of every server a caller
//! defined ([`Egress`], which the connections resolve through), so a name that answers with a
//! link-local address only later (DNS rebinding) is refused then.

use muster_core::{
    ToolError,
    config::ServerApiConfig,
    crd::{MCPServerSpec, ServerType},
};
use url::Url;

use crate::{
    registry::Registry,
    upstream::egress::{Egress, is_link_local},
};

/// The `aggregator.serverApi` policy in force, and whether the front door guards the gateway.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    api: ServerApiConfig,
    front_door: bool,
}

impl Admission {
    /// The policy of `registry`'s running configuration.
    pub(crate) fn of(registry: &Registry) -> Self {
        let aggregator = registry.config().aggregator;
        Self {
            front_door: aggregator.front_door(),
            api: aggregator.server_api,
        }
    }

    /// Whether probes and definitions may reach link-local addresses.
    pub(crate) fn allows_link_local(&self) -> bool {
        self.api.allows_link_local(self.front_door)
    }

    /// Where a probe may go.
    pub(crate) fn probe_egress(&self) -> Egress {
        Egress::allowing_link_local(self.allows_link_local())
    }

    /// Checks definition `spec`, which replaces `previous` on an update (`None`: a new one).
    pub(crate) async fn check_server(
        &self,
        name: &str,
        spec: &MCPServerSpec,
        previous: Option<&MCPServerSpec>,
    ) -> Result<(), ToolError> {
        if runs_command(spec)
            && !self.api.allows_stdio(self.front_door)
            && previous.is_none_or(|old| runs_another_command(old, spec))
        {
            return Err(ToolError::invalid_arguments(self.stdio_refusal(name)));
        }
        if spec.server_type.is_some_and(ServerType::is_remote)
            && let Some(url) = &spec.url
            && previous.is_none_or(|old| old.url.as_ref() != Some(url) || old.server_type != spec.server_type)
        {
            self.check_url(url)
                .await
                .map_err(|reason| ToolError::invalid_arguments(format!("MCP server {name}: {reason}")))?;
        }
        Ok(())
    }

    fn stdio_refusal(&self, name: &str) -> String {
        let why = if self.front_door {
            "this gateway is shared behind the front door (aggregator.oauth.server), and a stdio server is a \
             command the gateway would run as its own user"
        } else {
            "aggregator.serverApi.allowStdio is false in config.yaml"
        };
        format!(
            "MCP server {name}: stdio servers cannot be defined through the API: {why}. Run the MCP server as its \
             own service and register it with type streamable-http or sse (url), or have the operator put its \
             definition in mcpservers/ of the config directory; the operator can allow stdio definitions through \
             the API with aggregator.serverApi.allowStdio: true in config.yaml"
        )
    }

    /// Checks that `url` may be probed or connected to: it parses, matches `allowedUrls`, and
    /// is not (and does not resolve to) a link-local address unless allowed. The reason is for
    /// the caller.
    pub(crate) async fn check_url(&self, url: &str) -> Result<(), String> {
        let parsed = Url::parse(url.trim()).map_err(|e| format!("the URL {url:?} does not parse: {e}"))?;
        if !self.api.url_allowed(&parsed) {
            return Err(format!(
                "the URL {url} is not allowed: it matches none of aggregator.serverApi.allowedUrls ({})",
                self.api.allowed_urls.join(", ")
            ));
        }
        if self.allows_link_local() {
            return Ok(());
        }
        let refused = |address: &dyn std::fmt::Display| {
            format!(
                "the URL {url} reaches the link-local address {address} (cloud metadata lives there), which this \
                 gateway refuses behind the front door; the operator can allow it with \
                 aggregator.serverApi.allowLinkLocal: true in config.yaml"
            )
        };
        // An address literal, as every connection of the server will check it.
        Egress::NoLinkLocal
            .check_url(&parsed)
            .map_err(|literal| refused(&literal.host))?;
        let Some(url::Host::Domain(host)) = parsed.host() else {
            return Ok(());
        };
        // A name: refused when any address it resolves to now is link-local. One that does not
        // resolve now is no address to refuse; connecting fails.
        let port = parsed.port_or_known_default().unwrap_or(80);
        let addresses = tokio::net::lookup_host((host, port)).await.into_iter().flatten();
        match addresses.map(|a| a.ip()).find(|ip| is_link_local(*ip)) {
            Some(ip) => Err(refused(&ip)),
            None => Ok(()),
        }
    }
}

/// Whether `spec` is a command the gateway runs: a stdio server, or one of no type (the
/// connection treats it as stdio; validation refuses it first).
fn runs_command(spec: &MCPServerSpec) -> bool {
    matches!(spec.server_type, Some(ServerType::Stdio) | None)
}

/// Whether an update from `old` to `new` would run a command `old` did not: another command,
/// arguments or environment, or a server that was not stdio before.
fn runs_another_command(old: &MCPServerSpec, new: &MCPServerSpec) -> bool {
    !runs_command(old) || old.command != new.command || old.args != new.args || old.env != new.env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(command: &str) -> MCPServerSpec {
        MCPServerSpec {
            server_type: Some(ServerType::Stdio),
            command: Some(command.to_owned()),
            ..MCPServerSpec::default()
        }
    }

    fn shared() -> Admission {
        Admission {
            api: ServerApiConfig::default(),
            front_door: true,
        }
    }

    #[tokio::test]
    async fn behind_the_front_door_stdio_is_refused_unless_only_other_fields_change() {
        let refused = shared()
            .check_server("x", &stdio("sh"), None)
            .await
            .expect_err("refused");
        let text = refused.to_string();
        assert!(
            text.contains("streamable-http or sse") && text.contains("aggregator.serverApi.allowStdio: true"),
            "{text}"
        );
        let old = stdio("server");
        let mut described = old.clone();
        described.description = Some("new words".into());
        assert!(shared().check_server("x", &described, Some(&old)).await.is_ok());
        let mut with_env = old.clone();
        with_env.env.insert("LD_PRELOAD".into(), "/tmp/x.so".into());
        assert!(shared().check_server("x", &with_env, Some(&old)).await.is_err());
        let mut with_args = old.clone();
        with_args.args.push("--evil".into());
        assert!(shared().check_server("x", &with_args, Some(&old)).await.is_err());
        let remote = MCPServerSpec {
            server_type: Some(ServerType::StreamableHttp),
            url: Some("http://127.0.0.1:1/mcp".into()),
            ..MCPServerSpec::default()
        };
        assert!(
            shared().check_server("x", &old, Some(&remote)).await.is_err(),
            "remote to stdio"
        );
    }

    #[tokio::test]
    async fn a_single_user_gateway_allows_stdio_and_link_local() {
        let single = Admission {
            api: ServerApiConfig::default(),
            front_door: false,
        };
        assert!(single.check_server("x", &stdio("sh"), None).await.is_ok());
        assert!(
            single
                .check_url("http://169.254.169.254/latest/meta-data")
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_single_user_gateway_can_close_stdio_too() {
        let closed = Admission {
            api: ServerApiConfig::default().with_allow_stdio(false),
            front_door: false,
        };
        let refused = closed.check_server("x", &stdio("sh"), None).await.expect_err("refused");
        assert!(refused.to_string().contains("allowStdio is false"), "{refused}");
    }

    #[tokio::test]
    async fn the_allowlist_applies_without_the_front_door() {
        let listed = Admission {
            api: ServerApiConfig::default().with_allowed_urls(vec!["https://*.example.com/mcp".into()]),
            front_door: false,
        };
        assert!(listed.check_url("https://tools.example.com/mcp").await.is_ok());
        let reason = listed
            .check_url("http://127.0.0.1:9/mcp")
            .await
            .expect_err("not listed");
        assert!(reason.contains("allowedUrls"), "{reason}");
    }

    #[tokio::test]
    async fn link_local_urls_are_refused_in_every_spelling() {
        let shared = shared();
        for url in [
            "http://169.254.169.254/latest",
            "http://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
        ] {
            let reason = shared.check_url(url).await.expect_err(url);
            assert!(
                reason.contains("link-local") && reason.contains("allowLinkLocal"),
                "{reason}"
            );
        }
        assert!(shared.check_url("http://127.0.0.1:9/mcp").await.is_ok());
    }
}
