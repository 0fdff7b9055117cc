//! How the HTTP call lane's requests go out: over plain HTTP on connections of the lane's own,
//! driven by the calling task, otherwise through reqwest.
//!
//! reqwest, which rmcp posts through, wraps each request in two tower layers and a URL round
//! trip: its redirect layer parses the URL again on the way out and the response's `RequestUri`
//! on the way back (6k instructions each), then its retry layer and its pending future.
//! Underneath it is `hyper_util`'s pooled HTTP/1 client, whose connections run as tasks of their
//! own. Plain HTTP goes past both, on the lane's [`DrivenPool`] (kept-alive connections,
//! `TCP_NODELAY`, idle ones dropped after the same [`POOL_IDLE`] as the shared reqwest client's),
//! whose connections the calling task drives itself (see [`driven`](super::driven)).
//!
//! HTTPS, and every request while a proxy is configured in the environment (`HTTP_PROXY`,
//! `ALL_PROXY`, in either case), goes through reqwest, with its TLS and its proxy rules
//! (`NO_PROXY` included). The lane follows no redirect itself: a 3xx is a request turned away,
//! which goes through rmcp, whose client follows same-origin 307 and 308.
//!
//! ```ignore
//! let senders = Senders::new(Egress::Open);
//! let response = senders.send(session.plain, request).await?;
//! ```
//!
//! [`POOL_IDLE`]: crate::transport::POOL_IDLE

use std::{
    io,
    sync::{Arc, LazyLock},
};

use bytes::Bytes;
use http_body_util::{BodyExt, combinators::UnsyncBoxBody};

use super::driven::DrivenPool;
use crate::{egress::Egress, transport::http_client};

/// A response's body, whichever sender it came through.
pub(crate) type ResponseBody = UnsyncBoxBody<Bytes, io::Error>;

/// Why a request got no response.
pub(crate) type SendError = Box<dyn std::error::Error + Send + Sync>;

/// The process's pool of plain-HTTP connections for the lane, for [`Egress::Open`].
static PLAIN: LazyLock<Arc<DrivenPool>> = LazyLock::new(|| Arc::new(DrivenPool::held_to(Egress::Open)));
/// The same for [`Egress::NoLinkLocal`]: no connection is shared between the two.
static PLAIN_NO_LINK_LOCAL: LazyLock<Arc<DrivenPool>> =
    LazyLock::new(|| Arc::new(DrivenPool::held_to(Egress::NoLinkLocal)));

/// The lane's two ways out; see the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct Senders {
    plain: Option<Arc<DrivenPool>>,
    reqwest: reqwest::Client,
}

impl Senders {
    /// The plain-HTTP pool of `egress`, and the shared reqwest client of `egress` for the rest.
    pub(crate) fn new(egress: Egress) -> Self {
        let plain = match egress {
            Egress::Open => &PLAIN,
            Egress::NoLinkLocal => &PLAIN_NO_LINK_LOCAL,
        };
        Self {
            plain: Some(Arc::clone(plain)),
            reqwest: http_client(egress),
        }
    }

    /// Everything through `reqwest`.
    #[cfg(test)]
    pub(crate) fn reqwest_only(reqwest: reqwest::Client) -> Self {
        Self { plain: None, reqwest }
    }

    /// Sends `request`: on the plain-HTTP pool when `plain` ([`plain_http`]), otherwise through
    /// reqwest.
    pub(crate) async fn send(
        &self,
        plain: bool,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<ResponseBody>, SendError> {
        match (&self.plain, plain) {
            (Some(pool), true) => {
                // Boxed, as hyper's pooled client boxes its own: a call's future stays small.
                let response = Box::pin(pool.send(request)).await?;
                Ok(response.map(|body| body.map_err(io::Error::other).boxed_unsync()))
            }
            _ => {
                let request = reqwest::Request::try_from(request.map(reqwest::Body::from))?;
                let response = self.reqwest.execute(request).await?;
                Ok(http::Response::from(response).map(|body| body.map_err(io::Error::other).boxed_unsync()))
            }
        }
    }
}

/// Whether requests to `uri` may go on the plain-HTTP pool: an `http` URI, and no proxy in the
/// environment.
pub(crate) fn plain_http(uri: &http::Uri) -> bool {
    uri.scheme() == Some(&http::uri::Scheme::HTTP)
        && ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .all(|name| std::env::var_os(name).is_none_or(|value| value.is_empty()))
}
