//! `aggregator.serverApi`: what MCP server definitions written through the core tools
//! (`core_mcpserver_create`, `_update`, `_validate`) and `core_mcpserver_detect`'s probe may
//! make the gateway do. Definitions the operator puts in `mcpservers/` are not affected.
//!
//! A gateway behind the front door (`aggregator.oauth.server.enabled`) is shared: whoever holds
//! a token of a trusted issuer calls its core tools, and so does an agent a poisoned page talked
//! into a call. So behind the front door, by default,
//!
//! - a stdio server (a command the gateway would run as its own user) cannot be defined through
//!   the API: `allowStdio: true` allows it;
//! - a remote server or a probe cannot reach a link-local address (cloud metadata at
//!   `169.254.169.254`, `fe80::/10`, their IPv6-embedded forms, `fd00:ec2::254`), named or
//!   resolved, when it is written and at every connection: `allowLinkLocal: true` allows it.
//!
//! Without the front door (one person on loopback) both are allowed, as in Go muster, unless
//! set to `false`. `allowedUrls`, when not empty, limits the URLs of remote servers defined
//! through the API and of probes in every deployment.
//!
//! A URL pattern is `scheme://host[:port][/path]`: the host is exact, `*.` followed by a domain
//! (any name under it, not the domain itself) or `*`; the port is a number or `*`, and absent
//! means the scheme's default; the path is a glob where `*` is any run of characters, and
//! absent means any path. Letter case of scheme and host does not matter.
//!
//! ```
//! use muster_core::config::{MusterConfig, ServerApiConfig};
//!
//! let config: MusterConfig = serde_json::from_value(serde_json::json!({
//!     "aggregator": { "serverApi": { "allowedUrls": ["https://*.example.com/mcp*"] } }
//! }))?;
//! let api = &config.aggregator.server_api;
//! assert!(api.url_allowed(&url::Url::parse("https://tools.example.com/mcp")?));
//! assert!(!api.url_allowed(&url::Url::parse("https://example.com/mcp")?));
//! assert!(!api.url_allowed(&url::Url::parse("https://evil.test/x.example.com/mcp")?));
//! assert!(!api.allows_stdio(true)); // behind the front door: refused unless allowStdio: true
//! assert!(api.allows_stdio(false));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::crd::ValidationErrors;

/// `aggregator.serverApi`: what MCP server definitions written through the core tools
/// (`core_mcpserver_create`, `_update`, `_validate`) and `core_mcpserver_detect`'s probe may make
/// the gateway do. Behind the front door (`aggregator.oauth.server.enabled`) the gateway is
/// shared, so by default a stdio server cannot be defined through the API and no link-local
/// address (cloud metadata) can be reached; without it (one person on loopback) both are
/// allowed, as in Go muster. Files the operator puts in `mcpservers/` are not affected. Behind
/// the front door these keys cannot be changed through `core_config_update_aggregator`. See
/// SECURITY.md for the threat model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct ServerApiConfig {
    /// Whether `core_mcpserver_create`, `_update` and `_validate` accept a stdio server (a
    /// command the gateway runs as its own user, with its files, network and environment).
    /// Default: refused behind the front door (`aggregator.oauth.server.enabled`), accepted
    /// otherwise. RISK: `true` behind the front door lets every caller holding a trusted
    /// token, and every agent a prompt injection steers, run any command on the gateway's host.
    /// An update that changes only other fields of an existing stdio server is accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_stdio: Option<bool>,
    /// URL patterns the remote servers defined through the core tools, and
    /// `core_mcpserver_detect`'s probe, must match, in every deployment. A pattern is
    /// `scheme://host[:port][/path]`: the host is exact, `*.domain` (any name under the domain)
    /// or `*`; the port is a number or `*`, absent meaning the scheme's default; the path is a
    /// glob where `*` is any run of characters, absent meaning any path. Example:
    /// `https://*.example.com/mcp*`. Default: empty, any URL.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_urls: Vec<String>,
    /// Whether remote servers defined through the core tools, and `core_mcpserver_detect`'s
    /// probe, may reach link-local addresses (cloud metadata at `169.254.169.254`), by address
    /// or by a name that resolves to one (checked at every connection). Default: refused behind the front door, allowed
    /// otherwise. RISK: `true` behind the front door lets a caller read the cloud metadata
    /// service (instance credentials) through the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_link_local: Option<bool>,
}

impl ServerApiConfig {
    /// Sets `allowStdio`.
    pub fn with_allow_stdio(mut self, allow: bool) -> Self {
        self.allow_stdio = Some(allow);
        self
    }

    /// Sets `allowedUrls`.
    pub fn with_allowed_urls(mut self, patterns: Vec<String>) -> Self {
        self.allowed_urls = patterns;
        self
    }

    /// Sets `allowLinkLocal`.
    pub fn with_allow_link_local(mut self, allow: bool) -> Self {
        self.allow_link_local = Some(allow);
        self
    }

    /// Whether stdio definitions come through the API, on a gateway behind the front door or not.
    pub fn allows_stdio(&self, front_door: bool) -> bool {
        self.allow_stdio.unwrap_or(!front_door)
    }

    /// Whether link-local addresses may be reached, on a gateway behind the front door or not.
    pub fn allows_link_local(&self, front_door: bool) -> bool {
        self.allow_link_local.unwrap_or(!front_door)
    }

    /// Whether `url` matches `allowedUrls` (always, when it is empty). A pattern that does not
    /// parse matches nothing ([`MusterConfig::validate_config`](super::MusterConfig::validate_config)
    /// reports it).
    pub fn url_allowed(&self, url: &Url) -> bool {
        self.allowed_urls.is_empty()
            || self
                .allowed_urls
                .iter()
                .filter_map(|p| UrlPattern::parse(p).ok())
                .any(|p| p.matches(url))
    }

    pub(super) fn validate_into(&self, errors: &mut ValidationErrors) {
        for pattern in &self.allowed_urls {
            if let Err(reason) = UrlPattern::parse(pattern) {
                errors.push(
                    "aggregator.serverApi.allowedUrls",
                    format!("aggregator.serverApi.allowedUrls: {pattern:?} {reason}"),
                );
            }
        }
    }
}

/// One `allowedUrls` pattern, parsed.
#[derive(Debug, PartialEq, Eq)]
struct UrlPattern<'a> {
    scheme: String,
    host: String,
    /// `None`: `*`.
    port: Option<Option<u16>>,
    path: Option<&'a str>,
}

impl<'a> UrlPattern<'a> {
    fn parse(pattern: &'a str) -> Result<Self, &'static str> {
        let (scheme, rest) = pattern.split_once("://").ok_or("must start with a scheme (https://)")?;
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(scheme.as_str(), "http" | "https") {
            return Err("must be an http or https pattern");
        }
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], Some(&rest[at..])),
            None => (rest, None),
        };
        if authority.contains('@') {
            return Err("must not contain a user name");
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, "*")) if !host.ends_with(']') || authority.starts_with('[') => (host, None),
            Some((host, port)) if !port.contains(']') => (
                host,
                Some(Some(
                    port.parse::<u16>()
                        .map_err(|_| "has a port that is not a number or *")?,
                )),
            ),
            _ => (authority, Some(None)),
        };
        let host = host.to_ascii_lowercase();
        let name = host.strip_prefix("*.").unwrap_or(&host);
        if host.is_empty() || (host != "*" && (name.is_empty() || name.contains('*'))) {
            return Err("must have a host: a name, *.domain or *");
        }
        Ok(Self {
            scheme,
            host,
            port,
            path,
        })
    }

    fn matches(&self, url: &Url) -> bool {
        let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
            return false;
        };
        let host_matches = match self.host.strip_prefix("*.") {
            _ if self.host == "*" => true,
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => host == self.host,
        };
        let port_matches = match self.port {
            None => true,
            Some(None) => url.port().is_none(),
            Some(Some(port)) => url.port_or_known_default() == Some(port),
        };
        let path_matches = self.path.is_none_or(|glob| glob_matches(glob, url.path()));
        self.scheme == url.scheme() && host_matches && port_matches && path_matches
    }
}

/// Whether `text` matches `glob`, where `*` is any run of characters and the rest is literal.
fn glob_matches(glob: &str, text: &str) -> bool {
    let mut parts = glob.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(patterns: &[&str], url: &str) -> bool {
        ServerApiConfig::default()
            .with_allowed_urls(patterns.iter().map(|p| (*p).to_owned()).collect())
            .url_allowed(&Url::parse(url).expect("a URL"))
    }

    #[test]
    fn an_empty_allowlist_allows_every_url() {
        assert!(allowed(&[], "http://169.254.169.254/latest"));
    }

    #[test]
    fn a_wildcard_host_matches_names_under_the_domain_only() {
        let p = &["https://*.example.com"];
        assert!(allowed(p, "https://a.example.com/mcp"));
        assert!(allowed(p, "https://a.b.EXAMPLE.com/"));
        assert!(!allowed(p, "https://example.com/mcp"));
        assert!(!allowed(p, "https://badexample.com/mcp"));
        assert!(!allowed(p, "https://a.example.com.evil.test/mcp"));
        assert!(!allowed(p, "http://a.example.com/mcp"), "the scheme counts");
        assert!(
            !allowed(p, "https://a.example.com:8443/mcp"),
            "no port: the default only"
        );
    }

    #[test]
    fn ports_and_paths_are_matched_as_written() {
        assert!(allowed(&["http://127.0.0.1:*/mcp"], "http://127.0.0.1:4000/mcp"));
        assert!(!allowed(&["http://127.0.0.1:*/mcp"], "http://127.0.0.1:4000/mcp/x"));
        assert!(allowed(&["https://h.test:443/mcp*"], "https://h.test/mcp/v2"));
        assert!(!allowed(&["https://h.test:8443/"], "https://h.test/"));
        assert!(allowed(&["https://h.test/a/*/mcp"], "https://h.test/a/b/c/mcp"));
        assert!(!allowed(&["https://h.test/a/*/mcp"], "https://h.test/a/mcp"));
    }

    #[test]
    fn a_user_name_does_not_move_the_host() {
        assert!(!allowed(&["https://good.test"], "https://good.test@evil.test/"));
    }

    #[test]
    fn malformed_patterns_are_reported_and_match_nothing() {
        for bad in [
            "example.com",
            "ftp://x.test",
            "https://",
            "https://*x.test",
            "https://h.test:port",
            "https://u@h.test",
        ] {
            let api = ServerApiConfig::default().with_allowed_urls(vec![bad.to_owned()]);
            let mut errors = ValidationErrors::new();
            api.validate_into(&mut errors);
            assert!(errors.into_result().is_err(), "{bad} is refused");
            assert!(!api.url_allowed(&Url::parse("https://h.test/").expect("url")));
        }
    }

    #[test]
    fn the_defaults_depend_on_the_front_door() {
        let api = ServerApiConfig::default();
        assert!(api.allows_stdio(false) && api.allows_link_local(false));
        assert!(!api.allows_stdio(true) && !api.allows_link_local(true));
        let opted = api.with_allow_stdio(true).with_allow_link_local(true);
        assert!(opted.allows_stdio(true) && opted.allows_link_local(true));
        let closed = ServerApiConfig::default().with_allow_stdio(false);
        assert!(!closed.allows_stdio(false));
    }
}
