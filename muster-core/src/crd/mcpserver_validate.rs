//! The documented rules of an `MCPServer`.
//!
//! Rules that depend on where muster runs (stdio refused in Kubernetes mode, `headersFrom`
//! only in Kubernetes mode, the `org-` prefix and cross-namespace rules) are the loader's:
//! these rules hold for every document.

use std::collections::HashSet;

use url::Url;

use super::mcpserver::{
    AuthType, ClientCredentialsSecretRef, DEFAULT_MAX_DURATION, MCPServer, MCPServerAuth,
    MCPServerAuthAuthorizationServer, MCPServerFamily, MCPServerHeaderFrom, MCPServerSpec, ServerType,
    TokenExchangeConfig,
};
use super::validate::{
    INSTANCE_ARG_PATTERN, INSTANCE_ARG_RE, NAME_PATTERN, NAME_RE, ValidationErrors, check_https, is_set, over_limit,
};
use super::{API_VERSION, ObjectMeta};

/// Most characters of `spec.description`.
pub(crate) const MAX_DESCRIPTION: usize = 500;
/// Most characters of `spec.url`.
pub(crate) const MAX_URL: usize = 2048;
/// Most entries of `spec.headers` and of `spec.headersFrom`.
pub(crate) const MAX_HEADERS: usize = 32;
/// Most characters of a `headersFrom` name.
pub(crate) const MAX_HEADER_NAME: usize = 256;
/// Bounds of `spec.timeout` in seconds.
const TIMEOUT_RANGE: std::ops::RangeInclusive<u32> = MIN_TIMEOUT..=MAX_TIMEOUT;
/// Least of `spec.timeout` in seconds.
pub(crate) const MIN_TIMEOUT: u32 = 1;
/// Most of `spec.timeout` in seconds.
pub(crate) const MAX_TIMEOUT: u32 = 300;
/// Headers that carry a credential and so may not have a value in `headers`.
const CREDENTIAL_HEADERS: [&str; 4] = ["Authorization", "Proxy-Authorization", "Cookie", "X-API-Key"];

impl MCPServer {
    /// Checks the documented rules of the whole document and reports every violation.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errors = ValidationErrors::new();
        check_type_meta(&mut errors, &self.api_version, &self.kind, Self::KIND);
        check_name(&mut errors, &self.metadata, "server name is required");
        self.spec.validate_into(&mut errors, "spec");
        errors.into_result()
    }
}

/// Records a wrong `apiVersion` or `kind`.
pub(crate) fn check_type_meta(errors: &mut ValidationErrors, api_version: &str, kind: &str, expected_kind: &str) {
    if api_version != API_VERSION {
        errors.push(
            "apiVersion",
            format!("apiVersion must be {API_VERSION} (is \"{api_version}\")"),
        );
    }
    if kind != expected_kind {
        errors.push("kind", format!("kind must be {expected_kind} (is \"{kind}\")"));
    }
}

/// Records a missing `metadata.name`, or one that could not be a file name inside the config
/// directory (it would escape it, or hide in it).
pub(crate) fn check_name(errors: &mut ValidationErrors, metadata: &ObjectMeta, message: &str) {
    let name = &metadata.name;
    if name.trim().is_empty() {
        errors.push("metadata.name", message);
    } else if name.contains(['/', '\\'])
        || name.contains("..")
        || name.starts_with('.')
        || name.chars().any(char::is_control)
    {
        errors.push(
            "metadata.name",
            format!(
                "name {name:?} is not allowed: a name must not contain '/', '\\', '..' or control characters, nor start with '.'"
            ),
        );
    } else if name.len() > 253 {
        errors.push(
            "metadata.name",
            format!("name is {} characters long, more than 253", name.len()),
        );
    }
}

impl MCPServerSpec {
    /// Checks the documented rules of the spec alone (paths start with `spec.`).
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errors = ValidationErrors::new();
        self.validate_into(&mut errors, "spec");
        errors.into_result()
    }

    fn validate_into(&self, errors: &mut ValidationErrors, p: &str) {
        let stdio = self.server_type == Some(ServerType::Stdio);
        let remote = self.server_type.filter(|t| t.is_remote());
        if self.server_type.is_none() {
            errors.push(
                format!("{p}.type"),
                "type is required (one of stdio, streamable-http, sse)",
            );
        }
        if let Some(prefix) = &self.tool_prefix
            && !NAME_RE.is_match(prefix)
        {
            errors.push(
                format!("{p}.toolPrefix"),
                format!("toolPrefix \"{prefix}\" must match {NAME_PATTERN}"),
            );
        }
        if let Some(family) = &self.family {
            check_family(errors, &format!("{p}.family"), family);
        }
        if let Some(description) = &self.description
            && let Some(len) = over_limit(description, MAX_DESCRIPTION)
        {
            errors.push(
                format!("{p}.description"),
                format!("description must be at most {MAX_DESCRIPTION} characters (has {len})"),
            );
        }
        if stdio && !is_set(self.command.as_deref()) {
            errors.push(format!("{p}.command"), "command is required for a stdio server");
        }
        if remote.is_some() {
            refuse_on_remote(errors, p, "command", self.command.is_some());
            refuse_on_remote(errors, p, "args", !self.args.is_empty());
        }
        match (self.url.as_deref(), remote) {
            (Some(_), _) if stdio => refuse_on_stdio(errors, p, "url", true),
            (Some(url), _) if !url.trim().is_empty() => {
                check_server_url(errors, &format!("{p}.url"), url);
            }
            (_, Some(server_type)) => errors.push(
                format!("{p}.url"),
                format!("url is required for a {server_type} server"),
            ),
            _ => {}
        }
        if remote.is_some() {
            refuse_on_remote(errors, p, "env", !self.env.is_empty());
        }
        if stdio {
            refuse_on_stdio(errors, p, "headers", !self.headers.is_empty());
            refuse_on_stdio(errors, p, "headersFrom", !self.headers_from.is_empty());
        } else {
            self.check_headers(errors, p);
            self.check_headers_from(errors, p);
        }
        if !TIMEOUT_RANGE.contains(&self.timeout) {
            errors.push(
                format!("{p}.timeout"),
                format!(
                    "timeout must be between {} and {} seconds (is {})",
                    TIMEOUT_RANGE.start(),
                    TIMEOUT_RANGE.end(),
                    self.timeout
                ),
            );
        }
        if let Some(progress) = &self.progress {
            let path = format!("{p}.progress.maxDuration");
            if progress.max_duration < self.timeout {
                errors.push(
                    &path,
                    format!(
                        "progress.maxDuration must be at least timeout ({}) (is {})",
                        self.timeout, progress.max_duration
                    ),
                );
            }
            if progress.max_duration > DEFAULT_MAX_DURATION {
                errors.push(
                    &path,
                    format!(
                        "progress.maxDuration must be at most {DEFAULT_MAX_DURATION} seconds (is {})",
                        progress.max_duration
                    ),
                );
            }
        }
        match &self.auth {
            Some(_) if stdio => refuse_on_stdio(errors, p, "auth", true),
            Some(auth) => check_auth(errors, &format!("{p}.auth"), auth),
            None => {}
        }
    }

    fn check_headers(&self, errors: &mut ValidationErrors, p: &str) {
        if self.headers.len() > MAX_HEADERS {
            errors.push(
                format!("{p}.headers"),
                format!(
                    "headers must have at most {MAX_HEADERS} entries (has {})",
                    self.headers.len()
                ),
            );
        }
        for (name, value) in &self.headers {
            let path = format!("{p}.headers.{name}");
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                errors.push(&path, format!("\"{name}\" is not a valid HTTP header name"));
            }
            if http::HeaderValue::from_bytes(value.as_bytes()).is_err() {
                errors.push(
                    &path,
                    format!("the value of header {name} is not a valid HTTP header value"),
                );
            }
            if is_credential_header(name) && !value.trim().is_empty() {
                errors.push(
                    &path,
                    format!(
                        "header {name} carries a credential and is refused in headers: \
                         read it from a Secret with headersFrom"
                    ),
                );
            }
        }
    }

    fn check_headers_from(&self, errors: &mut ValidationErrors, p: &str) {
        if self.headers_from.len() > MAX_HEADERS {
            errors.push(
                format!("{p}.headersFrom"),
                format!(
                    "headersFrom must have at most {MAX_HEADERS} entries (has {})",
                    self.headers_from.len()
                ),
            );
        }
        let mut seen = HashSet::new();
        for (i, entry) in self.headers_from.iter().enumerate() {
            check_header_from(errors, &format!("{p}.headersFrom[{i}]"), entry, &mut seen);
        }
    }
}

fn refuse_on_stdio(errors: &mut ValidationErrors, p: &str, field: &str, present: bool) {
    if present {
        errors.push(
            format!("{p}.{field}"),
            format!("{field} is refused on a stdio server (remote servers only)"),
        );
    }
}

fn refuse_on_remote(errors: &mut ValidationErrors, p: &str, field: &str, present: bool) {
    if present {
        errors.push(
            format!("{p}.{field}"),
            format!("{field} is refused on a remote server (stdio servers only)"),
        );
    }
}

fn is_credential_header(name: &str) -> bool {
    CREDENTIAL_HEADERS.iter().any(|c| c.eq_ignore_ascii_case(name.trim()))
}

fn check_family(errors: &mut ValidationErrors, p: &str, family: &MCPServerFamily) {
    if family.name.is_empty() {
        errors.push(format!("{p}.name"), "family.name is required when family is set");
    } else if !NAME_RE.is_match(&family.name) {
        errors.push(
            format!("{p}.name"),
            format!("family.name \"{}\" must match {NAME_PATTERN}", family.name),
        );
    }
    if family.instance_arg.is_empty() {
        errors.push(
            format!("{p}.instanceArg"),
            "family.instanceArg is required when family is set",
        );
    } else if !INSTANCE_ARG_RE.is_match(&family.instance_arg) {
        errors.push(
            format!("{p}.instanceArg"),
            format!(
                "family.instanceArg \"{}\" must match {INSTANCE_ARG_PATTERN}",
                family.instance_arg
            ),
        );
    }
}

fn check_server_url(errors: &mut ValidationErrors, path: &str, value: &str) {
    if let Some(len) = over_limit(value, MAX_URL) {
        errors.push(path, format!("url must be at most {MAX_URL} characters (has {len})"));
    }
    match Url::parse(value) {
        Err(e) => errors.push(path, format!("url is not a valid URL ({e})")),
        Ok(url) => {
            if url.scheme() != "http" && url.scheme() != "https" {
                errors.push(
                    path,
                    format!("url must use the http or https scheme (is {})", url.scheme()),
                );
            }
            if !url.username().is_empty() || url.password().is_some() {
                errors.push(
                    path,
                    "url must not contain a user name or password: read credentials from a \
                     Secret with headersFrom",
                );
            }
        }
    }
}

fn check_header_from(errors: &mut ValidationErrors, p: &str, entry: &MCPServerHeaderFrom, seen: &mut HashSet<String>) {
    let name = &entry.name;
    if name.is_empty() {
        errors.push(format!("{p}.name"), "headersFrom name is required");
    } else {
        if let Some(len) = over_limit(name, MAX_HEADER_NAME) {
            errors.push(
                format!("{p}.name"),
                format!("headersFrom name must be at most {MAX_HEADER_NAME} characters (has {len})"),
            );
        } else if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            errors.push(
                format!("{p}.name"),
                format!("\"{name}\" is not a valid HTTP header name"),
            );
        }
        if !seen.insert(name.to_ascii_lowercase()) {
            errors.push(
                format!("{p}.name"),
                format!("duplicate headersFrom name \"{name}\" (names are unique, in any case)"),
            );
        }
    }
    let from = &entry.value_from;
    if from.source_type.is_none() {
        errors.push(format!("{p}.valueFrom.type"), "valueFrom.type is required (Secret)");
    }
    if from.name.trim().is_empty() {
        errors.push(format!("{p}.valueFrom.name"), "valueFrom.name is required");
    }
    if from.key.trim().is_empty() {
        errors.push(format!("{p}.valueFrom.key"), "valueFrom.key is required");
    }
}

fn check_auth(errors: &mut ValidationErrors, p: &str, auth: &MCPServerAuth) {
    let exchange = auth.token_exchange.as_ref().is_some_and(|t| t.enabled);
    let pinned = auth.authorization_server.is_some();
    if auth.forward_identity && (auth.auth_type != Some(AuthType::Oauth) || !pinned) {
        errors.push(
            format!("{p}.forwardIdentity"),
            "forwardIdentity requires auth.type oauth and auth.authorizationServer",
        );
    }
    if !auth.provider_apps.is_empty() && !auth.forward_token && !auth.forward_identity {
        errors.push(
            format!("{p}.providerApps"),
            "providerApps requires forwardToken or forwardIdentity",
        );
    }
    for (i, app) in auth.provider_apps.iter().enumerate() {
        if app.trim().is_empty() {
            errors.push(
                format!("{p}.providerApps[{i}]"),
                "a provider App name must not be empty",
            );
        }
    }
    if auth.forward_token && exchange {
        errors.push(
            format!("{p}.forwardToken"),
            "forwardToken and tokenExchange are mutually exclusive",
        );
    }
    if auth.forward_token && pinned {
        errors.push(
            format!("{p}.forwardToken"),
            "forwardToken and authorizationServer are mutually exclusive",
        );
    }
    if exchange && pinned {
        errors.push(
            format!("{p}.tokenExchange"),
            "tokenExchange and authorizationServer are mutually exclusive",
        );
    }
    for (i, audience) in auth.required_audiences.iter().enumerate() {
        let path = format!("{p}.requiredAudiences[{i}]");
        if audience.is_empty() {
            errors.push(path, "an audience must not be empty");
        } else if audience.chars().any(char::is_whitespace) {
            errors.push(path, format!("audience \"{audience}\" must not contain whitespace"));
        }
    }
    if let Some(exchange) = &auth.token_exchange {
        check_token_exchange(errors, &format!("{p}.tokenExchange"), exchange);
    }
    if let Some(server) = &auth.authorization_server {
        check_authorization_server(errors, &format!("{p}.authorizationServer"), server);
    }
}

fn check_token_exchange(errors: &mut ValidationErrors, p: &str, exchange: &TokenExchangeConfig) {
    let endpoint_path = format!("{p}.dexTokenEndpoint");
    match exchange.dex_token_endpoint.as_deref() {
        Some(endpoint) if !endpoint.trim().is_empty() => {
            check_https(errors, &endpoint_path, "tokenExchange.dexTokenEndpoint", endpoint);
        }
        _ if exchange.enabled => errors.push(
            endpoint_path,
            "tokenExchange.dexTokenEndpoint is required when token exchange is enabled",
        ),
        _ => {}
    }
    if exchange.enabled && !is_set(exchange.connector_id.as_deref()) {
        errors.push(
            format!("{p}.connectorId"),
            "tokenExchange.connectorId is required when token exchange is enabled",
        );
    }
    if let Some(issuer) = &exchange.expected_issuer {
        check_https(
            errors,
            &format!("{p}.expectedIssuer"),
            "tokenExchange.expectedIssuer",
            issuer,
        );
    }
    if let Some(secret) = &exchange.client_credentials_secret_ref {
        check_secret_ref(errors, &format!("{p}.clientCredentialsSecretRef"), secret);
    }
}

fn check_authorization_server(errors: &mut ValidationErrors, p: &str, server: &MCPServerAuthAuthorizationServer) {
    let issuer_path = format!("{p}.issuer");
    let issuer = server.issuer.as_str();
    if issuer.trim().is_empty() {
        errors.push(issuer_path, "authorizationServer.issuer is required");
    } else {
        check_https(errors, &issuer_path, "authorizationServer.issuer", issuer);
        if issuer.ends_with('/') {
            errors.push(&issuer_path, "authorizationServer.issuer must not end with a slash");
        }
        if let Ok(url) = Url::parse(issuer) {
            if url.query().is_some() {
                errors.push(&issuer_path, "authorizationServer.issuer must not have a query");
            }
            if url.fragment().is_some() {
                errors.push(&issuer_path, "authorizationServer.issuer must not have a fragment");
            }
        }
    }
    let authorization = server.authorization_endpoint.as_deref();
    let token = server.token_endpoint.as_deref();
    match (authorization, token) {
        (Some(_), None) => errors.push(
            format!("{p}.tokenEndpoint"),
            "authorizationServer.authorizationEndpoint and tokenEndpoint are set together: \
             tokenEndpoint is missing",
        ),
        (None, Some(_)) => errors.push(
            format!("{p}.authorizationEndpoint"),
            "authorizationServer.authorizationEndpoint and tokenEndpoint are set together: \
             authorizationEndpoint is missing",
        ),
        _ => {}
    }
    let https_fields = [
        ("authorizationEndpoint", authorization),
        ("tokenEndpoint", token),
        ("expectedIssuer", server.expected_issuer.as_deref()),
        ("revocationEndpoint", server.revocation_endpoint.as_deref()),
    ];
    for (field, value) in https_fields {
        if let Some(value) = value {
            check_https(
                errors,
                &format!("{p}.{field}"),
                &format!("authorizationServer.{field}"),
                value,
            );
        }
    }
    if server.expected_issuer.is_some() && (authorization.is_none() || token.is_none()) {
        errors.push(
            format!("{p}.expectedIssuer"),
            "authorizationServer.expectedIssuer needs authorizationEndpoint and tokenEndpoint",
        );
    }
    if let Some(secret) = &server.client_credentials_secret_ref {
        check_secret_ref(errors, &format!("{p}.clientCredentialsSecretRef"), secret);
    }
}

fn check_secret_ref(errors: &mut ValidationErrors, p: &str, secret: &ClientCredentialsSecretRef) {
    if secret.name.trim().is_empty() {
        errors.push(format!("{p}.name"), "clientCredentialsSecretRef.name is required");
    }
    if secret.client_id_key.trim().is_empty() {
        errors.push(
            format!("{p}.clientIdKey"),
            "clientCredentialsSecretRef.clientIdKey must not be empty",
        );
    }
    if secret.client_secret_key.trim().is_empty() {
        errors.push(
            format!("{p}.clientSecretKey"),
            "clientCredentialsSecretRef.clientSecretKey must not be empty",
        );
    }
}
