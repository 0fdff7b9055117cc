//! Checks on a request's head, each refusal a JSON-RPC error naming the `config.yaml` key that
//! sets the limit:
//!
//! - [`HostCheck`]: the `Host` of a request to `/mcp` must be one of `aggregator.allowedHosts`
//!   (the loopback names by default; DNS-rebinding protection), else 403. The request guard
//!   runs it, so rmcp's own check (whose 403 has a bare text body) is turned off.
//! - A request head (request line and headers, as sent) over
//!   `aggregator.limits.maxRequestHeadBytes` gets 431, on every route of the gateway, served by
//!   [`Gateway::serve`](crate::Gateway::serve) or nested from [`Gateway::router`](crate::Gateway::router).

use std::sync::Arc;

use axum::response::Response;
use http::{Request, StatusCode};

use super::guard::refusal_of;

/// The `Host` names `/mcp` answers to when `aggregator.allowedHosts` is not set.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A host allowed, lowercase and without IPv6 brackets, and its port when the entry names one.
type AllowedHost = (String, Option<u16>);

/// The `Host` values `/mcp` accepts (`aggregator.allowedHosts`). Shared, not copied: the
/// request guard that holds it is cloned for every request.
#[derive(Debug, Clone)]
pub(crate) struct HostCheck {
    /// Each allowed host; `None`: any host.
    allowed: Option<Arc<[AllowedHost]>>,
    /// The list as configured, for the refusal.
    listed: Arc<str>,
}

impl HostCheck {
    /// The check `aggregator.allowedHosts` configures: `None` the loopback names, `["*"]` any
    /// host, else the hosts listed (`host` any port, `host:port` that port only; an empty list
    /// accepts none).
    pub(crate) fn from_config(allowed_hosts: Option<&[String]>) -> Self {
        let listed: Vec<String> = match allowed_hosts {
            Some(hosts) => hosts.to_vec(),
            None => LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect(),
        };
        let allowed = (listed != ["*"]).then(|| listed.iter().filter_map(|h| authority(h.trim())).collect());
        let listed = if listed.is_empty() {
            "none listed, so every Host is refused".into()
        } else {
            listed.join(", ").into()
        };
        Self { allowed, listed }
    }

    /// Whether a request whose `Host` is `host` is accepted.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let Some(allowed) = &self.allowed else {
            return true;
        };
        // Every request to /mcp comes here: the Host is compared where it lies, without a copy;
        // only an IPv6 literal is rewritten, into the one spelling the list keeps.
        let Some((name, port)) = split_authority(host) else {
            return false;
        };
        let v6 = name
            .contains(':')
            .then(|| name.parse::<std::net::Ipv6Addr>().map(|ip| ip.to_string()))
            .transpose();
        let Ok(v6) = v6 else {
            return false;
        };
        let name = v6.as_deref().unwrap_or(name);
        allowed
            .iter()
            .any(|(a_name, a_port)| a_name.eq_ignore_ascii_case(name) && a_port.is_none_or(|p| Some(p) == port))
    }

    /// The refusal of a request whose `Host` (or, without one, URI authority) is not accepted.
    pub(crate) fn refusal<B>(&self, request: &Request<B>) -> Option<Response> {
        self.allowed.as_ref()?;
        let host = match request.headers().get(http::header::HOST) {
            Some(value) => Some(String::from_utf8_lossy(value.as_bytes())),
            None => request.uri().authority().map(|a| a.as_str().into()),
        };
        let message = match host {
            Some(host) if self.allows(&host) => return None,
            Some(host) => format!(
                "the Host {host:?} is not one this gateway answers to on /mcp (aggregator.allowedHosts: {}); add it \
                 to aggregator.allowedHosts in config.yaml",
                self.listed
            ),
            None => "the request has no Host header (aggregator.allowedHosts decides which are accepted)".to_owned(),
        };
        Some(refusal_of(None, StatusCode::FORBIDDEN, -32600, message))
    }
}

/// A request's `Host` split into its host (IPv6 brackets taken off) and port, borrowed:
/// `name[:port]` or `[v6][:port]`; `None` when it is no authority.
fn split_authority(text: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (v6, after) = rest.split_once(']')?;
            let port = match after {
                "" => None,
                after => Some(after.strip_prefix(':')?.parse().ok()?),
            };
            (v6, port)
        }
        None => match text.rsplit_once(':') {
            Some((name, port)) => (name, Some(port.parse().ok()?)),
            None => (text, None),
        },
    };
    let plain = |b: u8| b.is_ascii_graphic() && !b"/?#@[]".contains(&b);
    (!host.is_empty() && host.bytes().all(plain)).then_some((host, port))
}

/// A host and its port, lowercase and without IPv6 brackets; `None` when it is no authority.
fn authority(text: &str) -> Option<AllowedHost> {
    // A bare IPv6 address (`::1`, as allowedHosts lists it) is a host without a port; an
    // authority writes it in brackets (`[::1]:8090`). Either way it compares in one spelling.
    if let Ok(ip) = text.parse::<std::net::Ipv6Addr>() {
        return Some((ip.to_string(), None));
    }
    let parsed = http::uri::Authority::try_from(text).ok()?;
    let host = parsed.host().trim_start_matches('[').trim_end_matches(']');
    let host = host
        .parse::<std::net::Ipv6Addr>()
        .map_or_else(|_| host.to_ascii_lowercase(), |ip| ip.to_string());
    Some((host, parsed.port_u16()))
}

/// The size of a request's head as an HTTP/1.1 client sent it: the request line, each header
/// line and the blank line that ends them.
pub(crate) fn head_bytes<B>(request: &Request<B>) -> usize {
    let target = request
        .uri()
        .path_and_query()
        .map_or(request.uri().path().len(), |p| p.as_str().len());
    // "METHOD target HTTP/1.1\r\n"
    let request_line = request.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let headers: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    request_line + headers + 2
}

/// The 431 answering a request whose head is over `max` bytes (`maxRequestHeadBytes`).
pub(crate) fn head_too_large<B>(request: &Request<B>, max: usize) -> Option<Response> {
    let size = head_bytes(request);
    (size > max).then(|| {
        tracing::warn!(
            size,
            max,
            "a request head over aggregator.limits.maxRequestHeadBytes was refused with 431"
        );
        refusal_of(
            None,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            -32600,
            format!(
                "the request head (request line and headers) is {size} bytes, more than the {max} allowed \
                 (aggregator.limits.maxRequestHeadBytes); send smaller headers, or raise the limit"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(host: Option<&str>, extra: &[(&str, &str)]) -> Request<()> {
        let mut request = http::Request::post("/mcp");
        if let Some(host) = host {
            request = request.header("host", host);
        }
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        request.body(()).expect("a request")
    }

    #[test]
    fn loopback_by_default_a_listed_host_with_its_port_or_anything_under_a_star() {
        let loopback = HostCheck::from_config(None);
        assert!(loopback.allows("127.0.0.1:8090"));
        assert!(loopback.allows("[::1]:8090"));
        assert!(!loopback.allows("evil.example.com"));
        let listed = HostCheck::from_config(Some(&["muster.example.com:443".to_owned()]));
        assert!(listed.allows("muster.example.com:443"));
        assert!(!listed.allows("muster.example.com:8443"));
        assert!(HostCheck::from_config(Some(&["*".to_owned()])).allows("anything.example"));
    }

    #[test]
    fn a_host_outside_the_list_is_refused_naming_allowed_hosts() {
        let check = HostCheck::from_config(None);
        assert!(check.refusal(&parts(Some("localhost:8090"), &[])).is_none());
        let refused = check.refusal(&parts(Some("evil.example.com"), &[])).expect("refused");
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert!(check.refusal(&parts(None, &[])).is_some(), "no host at all");
        assert!(
            HostCheck::from_config(Some(&["*".to_owned()]))
                .refusal(&parts(None, &[]))
                .is_none(),
            "* accepts even none"
        );
    }

    #[test]
    fn hosts_compare_without_case_and_brackets_and_by_port_when_listed() {
        let check = HostCheck::from_config(Some(&["Muster.Example.com".to_owned(), "[::1]:9000".to_owned()]));
        assert!(check.allows("muster.example.com:8443"));
        assert!(check.allows("[::1]:9000"));
        assert!(!check.allows("[::1]:9001"));
        assert!(!check.allows("not a host"));
        assert!(!check.allows("muster.example.com:port"));
        assert!(!check.allows("user@muster.example.com"));
        assert!(!check.allows("[::1]x"));
        assert!(!check.allows("[:::]:9000"));
    }

    #[test]
    fn the_ipv6_loopback_is_a_default_host_in_any_spelling() {
        // allowedHosts lists it bare (`::1`); a Host header writes it in brackets.
        let loopback = HostCheck::from_config(None);
        assert!(loopback.allows("[::1]:8090"));
        assert!(loopback.allows("[::1]"));
        assert!(loopback.allows("[0:0:0:0:0:0:0:1]:8090"));
        assert!(!loopback.allows("[::2]:8090"));
        let listed = HostCheck::from_config(Some(&["fd00::1".to_owned()]));
        assert!(listed.allows("[fd00:0::1]:443"));
        assert!(!listed.allows("[fd00::2]:443"));
    }

    #[test]
    fn the_head_counts_the_request_line_and_every_header_line() {
        let head = parts(Some("h"), &[("x-a", "12345")]);
        // "POST /mcp HTTP/1.1\r\n" + "host: h\r\n" + "x-a: 12345\r\n" + "\r\n"
        assert_eq!(head_bytes(&head), 20 + 9 + 12 + 2);
        assert!(head_too_large(&head, 43).is_none());
        let refused = head_too_large(&head, 42).expect("over by one");
        assert_eq!(refused.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }
}
