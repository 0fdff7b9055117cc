//! Where a connection to a downstream server may go: anywhere ([`Egress::Open`]), or anywhere
//! but a link-local address ([`Egress::NoLinkLocal`]: cloud metadata lives at
//! `169.254.169.254`, `fd00:ec2::254` and their IPv6 spellings).
//!
//! The refusal holds at every connection, not only when a definition is written: a URL whose
//! host is an address literal is checked when the transport is set up, and a name is resolved
//! through `LinkLocalRefusing` each time a connection is opened (by reqwest, for the
//! streamable-HTTP and legacy SSE transports, and by the HTTP call lane's own pool), so a name
//! that answers with a link-local address later (DNS rebinding) is refused then.
//!
//! [`Egress::of`] says which applies to a definition: behind the front door, one a caller wrote
//! through the API (it carries the `registered-by` annotation the core tools stamp) is held to
//! [`Egress::NoLinkLocal`] unless `aggregator.serverApi.allowLinkLocal` is true. The operator's
//! own files are [`Egress::Open`].
//!
//! ```
//! use muster_core::{config::AggregatorConfig, crd::MCPServer};
//! use muster_upstream::Egress;
//!
//! let server = MCPServer::new("tools", Default::default());
//! assert_eq!(Egress::of(&server, &AggregatorConfig::default()), Egress::Open);
//! ```

use std::{
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
};

use muster_core::{
    config::AggregatorConfig,
    crd::{MCPServer, REGISTERED_BY_ANNOTATION},
};

/// Where a downstream connection may go; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Egress {
    /// Any address.
    #[default]
    Open,
    /// Any address but a link-local one, by literal or by name.
    NoLinkLocal,
}

impl Egress {
    /// The egress of `server` under `aggregator`: [`Egress::NoLinkLocal`] for a definition
    /// written through the API behind the front door (it carries the `registered-by`
    /// annotation), unless `aggregator.serverApi.allowLinkLocal` allows link-local addresses.
    pub fn of(server: &MCPServer, aggregator: &AggregatorConfig) -> Self {
        let through_api = server.metadata.annotations.contains_key(REGISTERED_BY_ANNOTATION);
        if through_api && !aggregator.server_api.allows_link_local(aggregator.front_door()) {
            Self::NoLinkLocal
        } else {
            Self::Open
        }
    }

    /// The egress of a probe or definition under a policy that does or does not allow
    /// link-local addresses.
    pub fn allowing_link_local(allowed: bool) -> Self {
        if allowed { Self::Open } else { Self::NoLinkLocal }
    }

    /// Refuses `url` when its host is a link-local address literal (a literal is never
    /// resolved, so the resolver does not see it). Names pass: they are refused when resolved.
    pub fn check_url(self, url: &url::Url) -> Result<(), LinkLocalRefused> {
        if self == Self::Open {
            return Ok(());
        }
        let address = match url.host() {
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
            _ => return Ok(()),
        };
        if is_link_local(address) {
            return Err(LinkLocalRefused {
                host: address.to_string(),
            });
        }
        Ok(())
    }

    /// The resolver reqwest clients of this egress resolve names with (`None`: reqwest's own).
    pub fn resolver(self) -> Option<Arc<dyn reqwest::dns::Resolve>> {
        match self {
            Self::Open => None,
            Self::NoLinkLocal => Some(Arc::new(LinkLocalRefusing::system())),
        }
    }

    /// The addresses to connect to for `host` and `port`, minus those this egress refuses.
    pub(crate) async fn resolve(self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
        match self {
            Self::Open => Ok(resolved),
            Self::NoLinkLocal => without_link_local(host, resolved).map_err(io::Error::other),
        }
    }
}

/// A connection refused because it would reach a link-local address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{host} is or resolves to a link-local address (cloud metadata lives there), which this gateway refuses for \
     a server defined through the API behind the front door; the operator can allow it with \
     aggregator.serverApi.allowLinkLocal: true in config.yaml"
)]
pub struct LinkLocalRefused {
    /// The host refused: an address literal or a name.
    pub host: String,
}

/// Whether `ip` is link-local, or an IPv6 form that carries a link-local IPv4 address (mapped,
/// compatible, NAT64, 6to4) or names a cloud metadata service (`fd00:ec2::254`).
pub fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
            (s[0] & 0xffc0) == 0xfe80
                || v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
                || v6.to_ipv4().is_some_and(|v4| v4.is_link_local())
                || (s[0] == 0x64 && s[1] == 0xff9b && embedded(s[6], s[7]).is_link_local())
                || (s[0] == 0x2002 && embedded(s[1], s[2]).is_link_local())
        }
    }
}

/// A reqwest DNS resolver that answers as the one it wraps (the system's, by default), minus
/// link-local addresses: a name that resolves only to such addresses is an error naming the
/// refusal. reqwest consults it at every new connection.
#[derive(Clone)]
pub(crate) struct LinkLocalRefusing {
    /// The resolver asked first; `None`: the system's (`getaddrinfo`).
    inner: Option<Arc<dyn reqwest::dns::Resolve>>,
}

impl LinkLocalRefusing {
    /// Over the system's resolver.
    pub(crate) fn system() -> Self {
        Self { inner: None }
    }

    /// Over `inner` (a test's resolver, which answers what it is told).
    #[cfg(test)]
    pub(crate) fn over(inner: Arc<dyn reqwest::dns::Resolve>) -> Self {
        Self { inner: Some(inner) }
    }
}

impl reqwest::dns::Resolve for LinkLocalRefusing {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let inner = self.inner.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> = match inner {
                Some(inner) => inner.resolve(name).await?.collect(),
                None => tokio::net::lookup_host((host.as_str(), 0)).await?.collect(),
            };
            let addresses: reqwest::dns::Addrs = Box::new(without_link_local(&host, resolved)?.into_iter());
            Ok(addresses)
        })
    }
}

/// The addresses `host` resolved to, minus link-local ones; an error when that leaves none.
fn without_link_local(host: &str, resolved: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, LinkLocalRefused> {
    let any = !resolved.is_empty();
    let kept: Vec<SocketAddr> = resolved.into_iter().filter(|a| !is_link_local(a.ip())).collect();
    if kept.is_empty() && any {
        return Err(LinkLocalRefused { host: host.to_owned() });
    }
    Ok(kept)
}

#[cfg(test)]
mod tests;
