//! How the HTTP call lane's requests go out: over plain HTTP on a hyper connection pool of the
//! lane's own, otherwise through reqwest.
//!
//! reqwest, which rmcp posts through, wraps each request in two tower layers and a URL round
//! trip: its redirect layer parses the URL again on the way out and the response's `RequestUri`
//! on the way back (6k instructions each), then its retry layer and its pending future.
//! Underneath it is `hyper_util`'s pooled HTTP/1 client, which the lane uses directly for plain
//! HTTP ([`Senders::send`] with `plain`): kept-alive connections, `TCP_NODELAY`, idle
//! connections dropped after the same [`POOL_IDLE`] as the shared reqwest client's. That took
//! 13.7% off the gateway's instructions a call through an HTTP downstream (callgrind, 246.5k to
//! 212.6k).
//!
//! HTTPS, and every request while a proxy is configured in the environment (`HTTP_PROXY`,
//! `ALL_PROXY`, in either case), goes through reqwest, with its TLS and its proxy rules
//! (`NO_PROXY` included). The lane follows no redirect itself: a 3xx is a request turned away,
//! which goes through rmcp, whose client follows same-origin 307 and 308.
//!
//! ```ignore
//! let senders = Senders::new(transport::http_client());
//! let response = senders.send(session.plain, request).await?;
//! ```

use std::{io, sync::LazyLock};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};

use crate::upstream::transport::POOL_IDLE;

/// A response's body, whichever sender it came through.
pub(crate) type ResponseBody = UnsyncBoxBody<Bytes, io::Error>;

/// Why a request got no response.
pub(crate) type SendError = Box<dyn std::error::Error + Send + Sync>;

type PlainClient = Client<HttpConnector, Full<Bytes>>;

/// The process's one pool of plain-HTTP connections for the lane.
static PLAIN: LazyLock<PlainClient> = LazyLock::new(|| {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE)
        .pool_timer(TokioTimer::new())
        .build(connector)
});

/// The lane's two ways out; see the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct Senders {
    plain: Option<PlainClient>,
    reqwest: reqwest::Client,
}

impl Senders {
    /// The plain-HTTP pool, and `reqwest` for the rest.
    pub(crate) fn new(reqwest: reqwest::Client) -> Self {
        Self {
            plain: Some(PLAIN.clone()),
            reqwest,
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
            (Some(client), true) => {
                let uri = request.uri().clone();
                let response = client
                    .request(request.map(Full::new))
                    .await
                    .map_err(|source| PlainSendError { uri, source })?;
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

/// A request on the plain-HTTP pool that got no response: the URL and the whole chain of causes
/// (hyper's own message alone is `client error (Connect)`).
#[derive(Debug)]
struct PlainSendError {
    uri: http::Uri,
    source: hyper_util::client::legacy::Error,
}

impl std::fmt::Display for PlainSendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error sending request for url ({}): {}", self.uri, self.source)?;
        let mut cause = std::error::Error::source(&self.source);
        while let Some(error) = cause {
            write!(f, ": {error}")?;
            cause = error.source();
        }
        Ok(())
    }
}

impl std::error::Error for PlainSendError {}

/// Whether requests to `uri` may go on the plain-HTTP pool: an `http` URI, and no proxy in the
/// environment.
pub(crate) fn plain_http(uri: &http::Uri) -> bool {
    uri.scheme() == Some(&http::uri::Scheme::HTTP)
        && ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .all(|name| std::env::var_os(name).is_none_or(|value| value.is_empty()))
}
