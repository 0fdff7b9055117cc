//! The lane's plain-HTTP connections, driven by the task that sends on them.
//!
//! A hyper client connection has two halves: the `SendRequest` a caller sends on, and the
//! `Connection` future that reads and writes the socket, which hyper's pooled client runs as a
//! task of its own. A request then crosses between the two tasks at least three times: the
//! request to the connection's task, the response head back, and each chunk of the body back
//! again. Each crossing schedules a task, and tokio's scheduler, finding a task queued while its
//! worker is busy, wakes a parked worker thread to steal it. On the 2-core bench machine that
//! was most of the gateway's context switches per call.
//!
//! Here a connection is checked out of the [`DrivenPool`] whole, both halves, and the calling
//! task polls the connection itself while it waits for the response head and while it reads
//! the body ([`DrivenBody`]): the socket wakes the caller, and nothing else does.
//!
//! - **Wakes inside a poll stay inside.** The halves wake each other through hyper's channels,
//!   always from within the caller's own poll; handed to tokio, such a wake would reschedule the
//!   task that is running. They are polled under a [`Driver`], which polls again instead, and
//!   passes on to the task only the wakes that come from outside (the socket).
//! - **Idle connections** wait in the pool unpolled, each for at most [`POOL_IDLE`] (a task
//!   closes the expired ones while there are any), at most [`MAX_IDLE_PER_HOST`] to a host. One
//!   the server closed meanwhile is found out at checkout, where it is polled once, and dropped.
//! - **A request the connection failed before writing it** (the server closed it in the
//!   meantime) is sent again on another, as hyper's pooled client does (hyper hands such a
//!   request back, so it is not copied for the case); one that may have been written is not.
//! - **A body dropped before its end** closes its connection; one read to its end, or a response
//!   with no body, gives the connection back.
//!
//! ```ignore
//! let pool = DrivenPool::default();
//! let response = pool.send(request).await?;
//! let body = response.into_body().collect().await?;
//! ```

use std::{
    collections::HashMap,
    fmt, io,
    pin::Pin,
    sync::{Arc, Mutex, Weak},
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http::{HeaderValue, header::HOST};
use http_body_util::Full;
use hyper::{
    body::{Body, Frame, Incoming, SizeHint},
    client::conn::http1,
};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::{egress::Egress, in_task_wakes::Driver, transport::POOL_IDLE};

/// The most idle connections kept to one host.
pub(crate) const MAX_IDLE_PER_HOST: usize = 256;
/// How many times a request the connection failed before writing it is sent on another.
const MAX_RESENDS: usize = 3;

type Connection = http1::Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// Where a connection goes: host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Host {
    name: String,
    port: u16,
}

impl Host {
    fn of(uri: &http::Uri) -> io::Result<Self> {
        let name = uri
            .host()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no host in {uri}")))?;
        // `[::1]` connects as `::1`.
        let name = name.trim_start_matches('[').trim_end_matches(']').to_owned();
        Ok(Self {
            name,
            port: uri.port_u16().unwrap_or(80),
        })
    }
}

/// A connection, both halves.
struct Link {
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once the connection has ended.
    connection: Option<Connection>,
}

impl Link {
    /// Connects to `host` at an address `egress` allows (resolved anew for each connection).
    async fn connect(host: &Host, egress: Egress) -> io::Result<Self> {
        let addresses = egress.resolve(&host.name, host.port).await?;
        let stream = TcpStream::connect(addresses.as_slice()).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await.map_err(io::Error::other)?;
        Ok(Self {
            sender,
            connection: Some(connection),
        })
    }

    /// Polls the connection: reads and writes what it can.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(connection) = &mut self.connection
            && let Poll::Ready(ended) = Pin::new(connection).poll(cx)
        {
            if let Err(e) = ended {
                tracing::debug!(error = %e, "a connection of the HTTP lane ended");
            }
            self.connection = None;
        }
    }

    /// Whether the connection can take a request: polled once, it has not ended.
    fn alive(&mut self) -> bool {
        self.drive(&mut Context::from_waker(Waker::noop()));
        self.connection.is_some() && !self.sender.is_closed()
    }

    /// Sends `request`, driving the connection under `driver` until the response head has been
    /// read.
    async fn round_trip(&mut self, request: Request, driver: &Driver) -> Result<http::Response<Incoming>, Failed> {
        let ready = std::future::poll_fn(|cx| {
            driver.poll(cx, |cx| {
                self.drive(cx);
                self.sender.poll_ready(cx)
            })
        });
        if let Err(e) = ready.await {
            return Err(Failed::Unsent(e, Box::new(request)));
        }
        let response = self.sender.try_send_request(request);
        tokio::pin!(response);
        std::future::poll_fn(|cx| {
            driver.poll(cx, |cx| {
                self.drive(cx);
                response.as_mut().poll(cx)
            })
        })
        .await
        .map_err(|mut e| match e.take_message() {
            Some(request) => Failed::Unsent(e.into_error(), Box::new(request)),
            None => Failed::Sent(e.into_error()),
        })
    }
}

type Request = http::Request<Full<Bytes>>;

/// Why a round trip got no response.
enum Failed {
    /// The request was not written: it can go on another connection (boxed: the rare case).
    Unsent(hyper::Error, Box<Request>),
    /// It may have been.
    Sent(hyper::Error),
}

/// Idle connections by host; see the [module docs](self).
pub(crate) struct DrivenPool {
    idle: Mutex<Idle>,
    /// How long a connection stays idle: [`POOL_IDLE`].
    keep: Duration,
    /// Where its connections may go.
    egress: Egress,
}

impl Default for DrivenPool {
    fn default() -> Self {
        Self::held_to(Egress::Open)
    }
}

/// The pool's idle connections, the oldest of a host first.
#[derive(Default)]
struct Idle {
    links: HashMap<Host, Vec<(Link, Instant)>>,
    /// A task closes the connections that have been idle too long ([`DrivenPool::reap`]).
    reaping: bool,
}

impl Idle {
    /// Drops those of `links` idle since before `now` less `keep`.
    fn expire(links: &mut Vec<(Link, Instant)>, now: Instant, keep: Duration) {
        let expired = links
            .iter()
            .position(|(_, since)| now.duration_since(*since) < keep)
            .unwrap_or(links.len());
        links.drain(..expired);
    }
}

impl fmt::Debug for DrivenPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrivenPool").finish_non_exhaustive()
    }
}

impl DrivenPool {
    /// A pool whose connections go where `egress` allows, idle for at most [`POOL_IDLE`].
    pub(crate) fn held_to(egress: Egress) -> Self {
        Self {
            idle: Mutex::default(),
            keep: POOL_IDLE,
            egress,
        }
    }

    /// The pool with connections idle for at most `keep` (a test waits less).
    #[cfg(test)]
    pub(crate) fn keeping_idle(mut self, keep: Duration) -> Self {
        self.keep = keep;
        self
    }

    /// Sends `request` (an absolute `http` URI) on an idle connection to its host, or a new one.
    pub(crate) async fn send(
        self: &Arc<Self>,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<DrivenBody>, DrivenError> {
        let uri = request.uri().clone();
        let failed = |source: io::Error| DrivenError {
            uri: uri.clone(),
            source: source.into(),
        };
        let host = Host::of(&uri).map_err(failed)?;
        let (mut parts, body) = request.into_parts();
        parts.uri = uri
            .path_and_query()
            .map_or_else(|| "/".parse(), |p| p.as_str().parse())
            .map_err(|e| failed(io::Error::other(e)))?;
        if let Some(authority) = uri.authority()
            && !parts.headers.contains_key(HOST)
        {
            let value = HeaderValue::from_str(authority.as_str()).map_err(|e| failed(io::Error::other(e)))?;
            parts.headers.insert(HOST, value);
        }
        let mut request = http::Request::from_parts(parts, Full::new(body));
        let driver = Driver::default();
        let mut resends = 0;
        loop {
            let (mut link, reused) = match self.checkout(&host) {
                Some(link) => (link, true),
                // Boxed: the rare path, kept out of every call's future.
                None => (
                    Box::pin(Link::connect(&host, self.egress)).await.map_err(failed)?,
                    false,
                ),
            };
            match link.round_trip(request, &driver).await {
                Ok(response) => {
                    // A response with no body (a 202 to a notification) is done with its
                    // connection already, whether or not its body is read.
                    let link = if response.body().is_end_stream() {
                        self.checkin(host.clone(), link);
                        None
                    } else {
                        Some(link)
                    };
                    let back = Back {
                        pool: Arc::downgrade(self),
                        host,
                    };
                    return Ok(response.map(|body| DrivenBody {
                        body,
                        link,
                        back,
                        driver,
                    }));
                }
                // Not written: the server closed the idle connection meanwhile.
                Err(Failed::Unsent(e, unsent)) if reused && resends < MAX_RESENDS => {
                    resends += 1;
                    request = *unsent;
                    tracing::debug!(error = %e, "an idle connection of the HTTP lane had closed; sending again");
                }
                Err(Failed::Unsent(e, _) | Failed::Sent(e)) => {
                    return Err(DrivenError { uri, source: e.into() });
                }
            }
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An idle connection to `host` that has not ended, the most recently used first.
    fn checkout(&self, host: &Host) -> Option<Link> {
        let mut idle = self.idle();
        let links = idle.links.get_mut(host)?;
        while let Some((mut link, since)) = links.pop() {
            if since.elapsed() < self.keep && link.alive() {
                return Some(link);
            }
        }
        None
    }

    /// Keeps `link`, whose last response was read to its end, for the next request to `host`.
    fn checkin(self: &Arc<Self>, host: Host, mut link: Link) {
        if !link.alive() {
            return;
        }
        let now = Instant::now();
        let mut idle = self.idle();
        let links = idle.links.entry(host).or_default();
        Idle::expire(links, now, self.keep);
        if links.len() < MAX_IDLE_PER_HOST {
            links.push((link, now));
        }
        if !std::mem::replace(&mut idle.reaping, true) {
            drop(idle);
            self.reap();
        }
    }

    /// Closes, every `keep`, the connections idle that long, until none is left (an idle
    /// connection is not polled, so nothing else would close it).
    fn reap(self: &Arc<Self>) {
        let pool = Arc::downgrade(self);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.idle().reaping = false;
            return;
        };
        let keep = self.keep;
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(keep).await;
                let Some(pool) = pool.upgrade() else {
                    return;
                };
                let now = Instant::now();
                let mut idle = pool.idle();
                idle.links.retain(|_, links| {
                    Idle::expire(links, now, keep);
                    !links.is_empty()
                });
                if idle.links.is_empty() {
                    idle.reaping = false;
                    return;
                }
            }
        });
    }

    /// How many idle connections the pool holds.
    #[cfg(test)]
    pub(crate) fn idle_count(&self) -> usize {
        self.idle().links.values().map(Vec::len).sum()
    }
}

/// Where a body's connection goes back to.
struct Back {
    pool: Weak<DrivenPool>,
    host: Host,
}

/// A response's body, read by driving its connection; see the [module docs](self).
pub(crate) struct DrivenBody {
    body: Incoming,
    /// Until the body has ended.
    link: Option<Link>,
    back: Back,
    driver: Driver,
}

impl fmt::Debug for DrivenBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrivenBody").finish_non_exhaustive()
    }
}

impl Body for DrivenBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let frame = this.driver.poll(cx, |cx| {
            if let Some(link) = &mut this.link {
                link.drive(cx);
            }
            Pin::new(&mut this.body).poll_frame(cx)
        });
        if let Poll::Ready(None) = frame
            && let Some(link) = this.link.take()
            && let Some(pool) = this.back.pool.upgrade()
        {
            pool.checkin(this.back.host.clone(), link);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request on the lane's plain-HTTP connections that got no response: the URL and the whole
/// chain of causes (hyper's own message alone is as short as `connection closed`).
#[derive(Debug)]
pub(crate) struct DrivenError {
    uri: http::Uri,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl fmt::Display for DrivenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error sending request for url ({}): {}", self.uri, self.source)?;
        let mut cause = self.source.source();
        while let Some(error) = cause {
            write!(f, ": {error}")?;
            cause = error.source();
        }
        Ok(())
    }
}

impl std::error::Error for DrivenError {}

#[cfg(test)]
mod tests;
