//! Discovery: from a protected MCP server to its authorization server's metadata.
//!
//! 1. The server's 401 names its protected resource metadata in `WWW-Authenticate`
//!    (`resource_metadata="..."`, RFC 9728 §5.1); without it, the well-known document
//!    `/.well-known/oauth-protected-resource{path}` (then the origin's) is read.
//! 2. The metadata lists `authorization_servers`; the first is used.
//! 3. Its metadata is RFC 8414 (`/.well-known/oauth-authorization-server{path}`), else OpenID
//!    Connect discovery; its `issuer` must be exactly the issuer asked for.
//!
//! ```
//! use muster_auth::oauth::discovery::Challenge;
//!
//! let challenges = Challenge::parse(
//!     r#"Bearer error="invalid_token", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read""#,
//! );
//! let bearer = &challenges[0];
//! assert_eq!(bearer.scheme, "Bearer");
//! assert_eq!(bearer.param("resource_metadata"), Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp"));
//! assert_eq!(bearer.param("scope"), Some("files:read"));
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use url::Url;

use super::{
    error::{AuthError, Result},
    http::OAuthHttp,
};
use crate::secret::constant_time_eq;

/// One challenge of a `WWW-Authenticate` header: a scheme and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Challenge {
    /// The scheme, e.g. `Bearer`.
    pub scheme: String,
    /// The parameters, names lower-cased.
    pub params: BTreeMap<String, String>,
}

impl Challenge {
    /// Every challenge of a `WWW-Authenticate` value (RFC 9110 §11.6.1: schemes followed by
    /// `name=value` or `name="quoted value"` parameters, separated by commas).
    pub fn parse(header: &str) -> Vec<Challenge> {
        let mut out: Vec<Challenge> = Vec::new();
        let mut rest = header.trim();
        while !rest.is_empty() {
            rest = rest.trim_start_matches([',', ' ', '\t']);
            let token_end = rest
                .find(|c: char| c == '=' || c == ',' || c.is_whitespace())
                .unwrap_or(rest.len());
            let token = &rest[..token_end];
            let after = rest[token_end..].trim_start_matches([' ', '\t']);
            if token.is_empty() {
                break;
            }
            if let Some(value_part) = after.strip_prefix('=').filter(|_| !out.is_empty()) {
                let (value, remaining) = read_value(value_part.trim_start());
                if let Some(current) = out.last_mut() {
                    current.params.insert(token.to_ascii_lowercase(), value);
                }
                rest = remaining;
            } else {
                out.push(Challenge {
                    scheme: token.to_owned(),
                    params: BTreeMap::new(),
                });
                rest = after;
            }
        }
        out
    }

    /// The parameter `name` (case-insensitive).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(&name.to_ascii_lowercase()).map(String::as_str)
    }
}

/// A parameter value (quoted or a token) and what follows it.
fn read_value(s: &str) -> (String, &str) {
    if let Some(quoted) = s.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                '"' => return (value, &quoted[i + 1..]),
                other => value.push(other),
            }
        }
        (value, "")
    } else {
        let end = s.find(',').unwrap_or(s.len());
        (s[..end].trim().to_owned(), &s[end..])
    }
}

/// RFC 9728 protected resource metadata (the fields muster reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedResourceMetadata {
    /// The resource identifier (the MCP endpoint).
    pub resource: String,
    /// Its authorization servers' issuers.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// The scopes it understands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
}

/// RFC 8414 authorization server metadata (the fields muster reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationServerMetadata {
    /// The issuer identifier.
    pub issuer: String,
    /// Where people sign in.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// RFC 7591 dynamic registration, when offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    /// RFC 7009 revocation, when offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    /// PKCE methods; muster needs `S256`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code_challenge_methods_supported: Vec<String>,
    /// Whether it sends RFC 9207 `iss` with authorization responses.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// Whether it accepts a Client ID Metadata Document URL as `client_id`.
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    /// The scopes it offers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
}

impl AuthorizationServerMetadata {
    /// Metadata for a server configured by hand (`auth.authorizationServer` with both
    /// endpoints): no discovery.
    pub fn pinned(
        issuer: &str,
        authorization_endpoint: &str,
        token_endpoint: &str,
        revocation_endpoint: Option<&str>,
    ) -> Self {
        Self {
            issuer: issuer.to_owned(),
            authorization_endpoint: authorization_endpoint.to_owned(),
            token_endpoint: token_endpoint.to_owned(),
            registration_endpoint: None,
            revocation_endpoint: revocation_endpoint.map(str::to_owned),
            code_challenge_methods_supported: vec!["S256".to_owned()],
            authorization_response_iss_parameter_supported: false,
            client_id_metadata_document_supported: false,
            scopes_supported: Vec::new(),
        }
    }
}

/// The protected resource metadata of the MCP endpoint `resource`, from the 401's
/// `WWW-Authenticate` value when it names the document, else from the well-known locations.
pub async fn protected_resource_metadata(
    http: &OAuthHttp,
    resource: &str,
    www_authenticate: Option<&str>,
) -> Result<ProtectedResourceMetadata> {
    const WHAT: &str = "protected resource metadata";
    let named = www_authenticate
        .map(Challenge::parse)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        .and_then(|c| c.param("resource_metadata").map(str::to_owned));
    let candidates = match named {
        Some(url) => vec![url],
        None => well_known(resource, "oauth-protected-resource")?,
    };
    for url in &candidates {
        if let Some(metadata) = http.get_json::<ProtectedResourceMetadata>(WHAT, url).await? {
            if metadata.authorization_servers.is_empty() {
                return Err(AuthError::BadDocument {
                    what: WHAT,
                    url: url.clone(),
                    reason: "it names no authorization_servers".to_owned(),
                });
            }
            return Ok(metadata);
        }
    }
    Err(AuthError::NoAuthorizationServer {
        resource: resource.to_owned(),
        reason: format!("no protected resource metadata at {}", candidates.join(" or ")),
    })
}

/// The metadata of the authorization server `issuer`: RFC 8414 first, then OpenID Connect
/// discovery; refused when the document's `issuer` is not exactly `issuer`.
pub async fn authorization_server_metadata(http: &OAuthHttp, issuer: &str) -> Result<AuthorizationServerMetadata> {
    const WHAT: &str = "authorization server metadata";
    let mut candidates = well_known(issuer, "oauth-authorization-server")?;
    candidates.truncate(1);
    candidates.push(format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    ));
    candidates.extend(well_known(issuer, "openid-configuration")?.into_iter().take(1));
    candidates.dedup();
    for url in &candidates {
        if let Some(metadata) = http.get_json::<AuthorizationServerMetadata>(WHAT, url).await? {
            if !constant_time_eq(&metadata.issuer, issuer) {
                return Err(AuthError::IssuerMismatch {
                    expected: issuer.to_owned(),
                    got: metadata.issuer,
                });
            }
            return Ok(metadata);
        }
    }
    Err(AuthError::NoAuthorizationServer {
        resource: issuer.to_owned(),
        reason: format!("no authorization server metadata at {}", candidates.join(" or ")),
    })
}

/// `{origin}/.well-known/{name}{path}` and, when the path is not empty, `{origin}/.well-known/{name}`.
fn well_known(base: &str, name: &str) -> Result<Vec<String>> {
    let url = Url::parse(base).map_err(|e| AuthError::Unsupported(format!("{base:?} is not a URL: {e}")))?;
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut out = vec![format!("{origin}/.well-known/{name}{path}")];
    if !path.is_empty() {
        out.push(format!("{origin}/.well-known/{name}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_with_quoted_and_bare_parameters_parse() {
        let c = Challenge::parse(
            r#"Bearer realm="mcp", error=invalid_token, error_description="a \"quoted\" word", Basic realm=x"#,
        );
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].param("realm"), Some("mcp"));
        assert_eq!(c[0].param("error"), Some("invalid_token"));
        assert_eq!(c[0].param("error_description"), Some(r#"a "quoted" word"#));
        assert_eq!(c[1].scheme, "Basic");
        assert_eq!(c[1].param("realm"), Some("x"));
        assert!(Challenge::parse("").is_empty());
        assert_eq!(Challenge::parse("Bearer")[0].scheme, "Bearer");
    }

    #[test]
    fn well_known_locations_insert_the_path_after_the_name() {
        assert_eq!(
            well_known("https://a.example/tenant/mcp", "oauth-protected-resource").expect("url"),
            [
                "https://a.example/.well-known/oauth-protected-resource/tenant/mcp",
                "https://a.example/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            well_known("https://a.example", "oauth-authorization-server").expect("url"),
            ["https://a.example/.well-known/oauth-authorization-server"]
        );
    }
}
