//! The gateway's MCP sessions over streamable HTTP: an rmcp
//! [`SessionManager`] with no
//! task and no channel of its own per session.
//!
//! rmcp's `LocalSessionManager` runs a worker task per session, between the HTTP handler and the
//! session's MCP service, and talks to it over channels; each channel allocates room for 32
//! messages when it is made, and an idle session held about 30 KB of them. Here a session is
//! shared state instead: an HTTP request puts its message in the session's inbox, which the
//! service reads as its transport ([`SessionTransport`]); what the service sends is routed, in
//! the sending call, to the stream it belongs to (an outbox), which the response reads.
//!
//! What it does is what rmcp's does:
//!
//! - A request's answer, its progress (by progress token), a cancellation of it and the
//!   server's requests made while handling it (SEP-2260's originating request) go on the
//!   request's stream, primed with event id `req-N-0` and a `retry`; the stream ends with the
//!   answer. Everything else goes on the standalone stream (the `GET`), with ids `1`, `2`, ...
//!   (rmcp primes that stream with `0`).
//! - A `GET` with `Last-Event-ID` resumes either: the events after it, then the rest as they
//!   come. A request stream is kept [`RETAIN`] after it ends (at most [`MAX_ENDED`] a session).
//! - A second `GET` while the standalone stream is read gets keep-alives only (a shadow).
//! - A session nobody used for its idle timeout ([`DEFAULT_KEEP_ALIVE`], 5 minutes) ends;
//!   unlike rmcp's, one whose streams are still being read does not. One task for all sessions
//!   looks for them.
//!
//! `Front::new` (in `http.rs`) gives it to rmcp's `StreamableHttpService` as its session
//! manager.

use std::{
    collections::{HashMap, VecDeque},
    future::Future,
    sync::{
        Arc, Mutex, MutexGuard, RwLock, Weak,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use futures::Stream;
use rmcp::{
    RoleServer,
    model::{
        ClientJsonRpcMessage, ClientNotification, GetExtensions, GetMeta, JsonRpcMessage, ProgressToken, RequestId,
        ServerJsonRpcMessage, ServerNotification,
    },
    service::OriginatingRequestId,
    transport::{
        Transport,
        streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager},
    },
};
use tokio::sync::oneshot;

mod outbox;
#[cfg(test)]
mod tests;

use outbox::{EventId, Outbox, Reader};

use super::kept_events::Ended;

/// How long a session nobody uses lives (rmcp's default).
pub(crate) const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(300);

/// The reconnection delay a request stream's priming event asks for (rmcp's default).
pub(crate) const DEFAULT_RETRY: Duration = Duration::from_secs(3);

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SessionError {
    /// No session has this id (it never existed, ended, or was closed).
    #[error("session {0} not found")]
    NotFound(SessionId),
    /// The session's service ended while the request was in it.
    #[error("session {0} ended")]
    Ended(SessionId),
    /// A `Last-Event-ID` that names no stream of the session.
    #[error("no stream of session {session} has event {event}")]
    UnknownEvent {
        /// The session.
        session: SessionId,
        /// The `Last-Event-ID` asked for.
        event: String,
    },
}

/// The sessions of one streamable-HTTP service (see the [module](self)).
#[derive(Debug, Clone)]
pub(crate) struct Sessions {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    sessions: RwLock<HashMap<SessionId, Arc<Session>>>,
    epoch: Instant,
    keep_alive: Duration,
    retry: Option<Duration>,
    sweeping: std::sync::Once,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::new(DEFAULT_KEEP_ALIVE, Some(DEFAULT_RETRY))
    }
}

impl Sessions {
    /// Sessions that end after `keep_alive` unused, whose request streams are primed with
    /// `retry` (none: not primed, and not resumable by a client that needs the priming id).
    #[must_use]
    pub(crate) fn new(keep_alive: Duration, retry: Option<Duration>) -> Self {
        Self {
            shared: Arc::new(Shared {
                sessions: RwLock::default(),
                epoch: Instant::now(),
                keep_alive,
                retry,
                sweeping: std::sync::Once::new(),
            }),
        }
    }

    /// How many sessions are open.
    #[must_use]
    pub(crate) fn len(&self) -> usize {
        self.shared.read().len()
    }

    /// Whether no session is open.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether session `id` is open.
    #[must_use]
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.shared.read().contains_key(id)
    }

    fn session(&self, id: &SessionId) -> Result<Arc<Session>, SessionError> {
        let session = self
            .shared
            .read()
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound(id.clone()))?;
        session.touch(self.shared.now());
        Ok(session)
    }

    fn remove(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.shared
            .sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }
}

impl Shared {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<SessionId, Arc<Session>>> {
        self.sessions.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Milliseconds since the manager was made.
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Ends the sessions unused for `keep_alive` whose streams nobody reads.
    fn sweep(&self) {
        let now = self.now();
        let idle_ms = u64::try_from(self.keep_alive.as_millis()).unwrap_or(u64::MAX);
        let expired: Vec<SessionId> = self
            .read()
            .iter()
            .filter(|(_, s)| now.saturating_sub(s.seen.load(Ordering::Relaxed)) >= idle_ms && !s.being_read())
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let session = self.sessions.write().unwrap_or_else(|e| e.into_inner()).remove(&id);
            if let Some(session) = session {
                tracing::debug!(session = %id, "session idle for {:?}, ended", self.keep_alive);
                session.end();
            }
        }
    }
}

/// Sweeps `shared` every so often while it is there.
async fn sweep(shared: Weak<Shared>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(shared) = shared.upgrade() else { return };
        shared.sweep();
    }
}

impl SessionManager for Sessions {
    type Error = SessionError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, SessionTransport), SessionError> {
        let shared = &self.shared;
        shared.sweeping.call_once(|| {
            let every = (shared.keep_alive / 4).clamp(Duration::from_millis(10), Duration::from_secs(30));
            tokio::spawn(sweep(Arc::downgrade(shared), every));
        });
        let id: SessionId = uuid::Uuid::new_v4().to_string().into();
        let session = Arc::new(Session::new(id.clone(), shared.retry, shared.now()));
        shared
            .sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), Arc::clone(&session));
        Ok((id, SessionTransport { session }))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionError> {
        let session = self.session(id)?;
        let answer = {
            let (tx, rx) = oneshot::channel();
            if let JsonRpcMessage::Request(request) = &message {
                session.routes().initialize = Some((request.id.clone(), tx));
            }
            session.deliver(message)?;
            rx
        };
        answer.await.map_err(|_| SessionError::Ended(id.clone()))
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionError> {
        Ok(self.shared.read().contains_key(id))
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionError> {
        if let Some(session) = self.remove(id) {
            session.end();
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        let session = self.session(id)?;
        let JsonRpcMessage::Request(request) = &message else {
            // rmcp sends only requests here; anything else has no answer to stream.
            session.deliver(message)?;
            let nothing = Outbox::standalone();
            nothing.end();
            return Ok(nothing.shadow());
        };
        let outbox = session.open_request(request.id.clone(), request.request.get_meta().get_progress_token());
        let reader = outbox.reader(0, true);
        session.deliver(message)?;
        Ok(reader)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), SessionError> {
        let session = self.session(id)?;
        if let JsonRpcMessage::Notification(notification) = &message
            && let ClientNotification::CancelledNotification(cancelled) = &notification.notification
            && let Some(request) = &cancelled.params.request_id
        {
            session.close_request(request);
        }
        session.deliver(message)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        let session = self.session(id)?;
        Ok(session.standalone_reader(0))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        let session = self.session(id)?;
        let unknown = || SessionError::UnknownEvent {
            session: id.clone(),
            event: last_event_id.clone(),
        };
        match EventId::parse(&last_event_id).ok_or_else(unknown)? {
            EventId::Standalone(after) => Ok(session.standalone_reader(after)),
            EventId::Request(n, after) => {
                let outbox = session.routes().streams.get(&n).map(|s| Arc::clone(&s.outbox));
                Ok(outbox.ok_or_else(unknown)?.reader(after, false))
            }
        }
    }
}

/// One session: the messages for its service, and where its service's messages go.
#[derive(Debug)]
struct Session {
    id: SessionId,
    inbox: Mutex<Inbox>,
    routes: Mutex<Routes>,
    standalone: Arc<Outbox>,
    retry: Option<Duration>,
    /// When a request of the session last came (milliseconds since the manager was made).
    seen: AtomicU64,
}

#[derive(Debug, Default)]
struct Inbox {
    messages: VecDeque<Box<ClientJsonRpcMessage>>,
    waker: Option<Waker>,
    ended: bool,
}

#[derive(Debug, Default)]
struct Routes {
    next_stream: u64,
    /// The request streams, open and recently ended.
    streams: HashMap<u64, RequestStream>,
    /// The order they ended in. Their events are typed messages, not counted in bytes.
    ended: Ended,
    /// The open request streams by the id and the progress token of their request.
    by_request: HashMap<RequestId, u64>,
    by_progress: HashMap<ProgressToken, u64>,
    /// The `initialize` request waiting for its answer.
    initialize: Option<(RequestId, oneshot::Sender<ServerJsonRpcMessage>)>,
}

#[derive(Debug)]
struct RequestStream {
    outbox: Arc<Outbox>,
    request: RequestId,
    progress: Option<ProgressToken>,
}

/// Where a message of the service goes.
enum Route {
    Initialize(oneshot::Sender<ServerJsonRpcMessage>),
    Request { stream: u64, last: bool },
    Standalone,
}

impl Session {
    fn new(id: SessionId, retry: Option<Duration>, now: u64) -> Self {
        Self {
            id,
            inbox: Mutex::default(),
            routes: Mutex::default(),
            standalone: Outbox::standalone(),
            retry,
            seen: AtomicU64::new(now),
        }
    }

    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self, now: u64) {
        self.seen.fetch_max(now, Ordering::Relaxed);
    }

    /// Whether any of the session's streams is being read.
    fn being_read(&self) -> bool {
        self.standalone.being_read() || self.routes().streams.values().any(|s| s.outbox.being_read())
    }

    /// Hands `message` to the session's service.
    fn deliver(&self, message: ClientJsonRpcMessage) -> Result<(), SessionError> {
        let mut inbox = self.inbox();
        if inbox.ended {
            return Err(SessionError::Ended(self.id.clone()));
        }
        inbox.messages.push_back(Box::new(message));
        let waker = inbox.waker.take();
        drop(inbox);
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// A new stream for request `id`, registered by its id and progress token. Ended streams
    /// past [`RETAIN`], and the oldest over [`MAX_ENDED`], are forgotten.
    fn open_request(&self, request: RequestId, progress: Option<ProgressToken>) -> Arc<Outbox> {
        let mut routes = self.routes();
        let Routes { ended, streams, .. } = &mut *routes;
        ended.forget(Instant::now(), streams);
        let n = routes.next_stream;
        routes.next_stream += 1;
        let outbox = Outbox::request(n, self.retry);
        routes.by_request.insert(request.clone(), n);
        if let Some(token) = &progress {
            routes.by_progress.insert(token.clone(), n);
        }
        routes.streams.insert(
            n,
            RequestStream {
                outbox: Arc::clone(&outbox),
                request,
                progress,
            },
        );
        outbox
    }

    /// Ends the stream of request `id` (the client cancelled it): what the service still sends
    /// about it goes to the standalone stream.
    fn close_request(&self, id: &RequestId) {
        let mut routes = self.routes();
        if let Some(n) = routes.by_request.get(id).copied() {
            routes.finish(n);
        }
    }

    /// A reader of the standalone stream from after `after`; a shadow while another reads it.
    fn standalone_reader(&self, after: usize) -> Reader {
        if self.standalone.has_primary() {
            self.standalone.shadow()
        } else {
            self.standalone.reader(after, false)
        }
    }

    /// Sends `message` of the service where it belongs.
    fn route(&self, message: ServerJsonRpcMessage) {
        let mut routes = self.routes();
        match routes.route_of(&message) {
            Route::Initialize(answer) => {
                drop(routes);
                let _ = answer.send(message);
            }
            Route::Request { stream, last } => {
                let outbox = routes.streams.get(&stream).map(|s| Arc::clone(&s.outbox));
                if last {
                    routes.unregister(stream);
                    routes.ended(stream);
                }
                drop(routes);
                match outbox {
                    Some(outbox) => {
                        outbox.push(message);
                        if last {
                            outbox.end();
                        }
                    }
                    None => self.standalone.push(message),
                }
            }
            Route::Standalone => {
                drop(routes);
                self.standalone.push(message);
            }
        }
    }

    /// Ends the session: its service reads no more, and its streams end.
    fn end(&self) {
        let waker = {
            let mut inbox = self.inbox();
            inbox.ended = true;
            inbox.messages.clear();
            inbox.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        let open: Vec<Arc<Outbox>> = {
            let mut routes = self.routes();
            routes.initialize = None;
            routes.by_request.clear();
            routes.by_progress.clear();
            routes.streams.drain().map(|(_, s)| s.outbox).collect()
        };
        for outbox in open {
            outbox.end();
        }
        self.standalone.end();
    }

    fn poll_receive(&self, cx: &mut Context<'_>) -> Poll<Option<ClientJsonRpcMessage>> {
        let mut inbox = self.inbox();
        if let Some(message) = inbox.messages.pop_front() {
            return Poll::Ready(Some(*message));
        }
        if inbox.ended {
            return Poll::Ready(None);
        }
        inbox.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Routes {
    fn route_of(&mut self, message: &ServerJsonRpcMessage) -> Route {
        let answered = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered {
            if self.initialize.as_ref().is_some_and(|(init, _)| init == id)
                && let Some((_, answer)) = self.initialize.take()
            {
                return Route::Initialize(answer);
            }
            return self.request_route(id, true);
        }
        match message {
            JsonRpcMessage::Request(request) => match request.request.extensions().get::<OriginatingRequestId>() {
                Some(origin) => self.request_route(&origin.0, false),
                None => Route::Standalone,
            },
            JsonRpcMessage::Notification(notification) => match &notification.notification {
                ServerNotification::ProgressNotification(progress) => {
                    match self.by_progress.get(&progress.params.progress_token) {
                        Some(&stream) => Route::Request { stream, last: false },
                        None => Route::Standalone,
                    }
                }
                ServerNotification::CancelledNotification(cancelled) => match &cancelled.params.request_id {
                    Some(id) => self.request_route(id, false),
                    None => Route::Standalone,
                },
                _ => Route::Standalone,
            },
            _ => Route::Standalone,
        }
    }

    fn request_route(&self, id: &RequestId, last: bool) -> Route {
        match self.by_request.get(id) {
            Some(&stream) => Route::Request { stream, last },
            None => Route::Standalone,
        }
    }

    /// Unregisters stream `n`'s request and progress token: it is answered.
    fn unregister(&mut self, n: u64) {
        if let Some(stream) = self.streams.get(&n) {
            self.by_request.remove(&stream.request);
            if let Some(token) = &stream.progress {
                self.by_progress.remove(token);
            }
        }
    }

    /// Notes that stream `n` ended (it is kept for a while; [`Ended`]).
    fn ended(&mut self, n: u64) {
        self.ended.push(Instant::now(), n, 0, &mut self.streams);
    }

    /// Unregisters stream `n` and ends it.
    fn finish(&mut self, n: u64) {
        self.unregister(n);
        if let Some(stream) = self.streams.get(&n) {
            stream.outbox.end();
        }
        self.ended(n);
    }
}

/// A session's side of its MCP service: what the service receives (the session's inbox) and
/// where what it sends goes. Dropping it (the service ended) ends the session's streams.
#[derive(Debug)]
pub(crate) struct SessionTransport {
    session: Arc<Session>,
}

impl Transport<RoleServer> for SessionTransport {
    type Error = SessionError;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), SessionError>> + Send + 'static {
        let result = if self.session.inbox().ended {
            Err(SessionError::Ended(self.session.id.clone()))
        } else {
            self.session.route(item);
            Ok(())
        };
        std::future::ready(result)
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        futures::future::poll_fn(|cx| self.session.poll_receive(cx))
    }

    fn close(&mut self) -> impl Future<Output = Result<(), SessionError>> + Send {
        self.session.end();
        std::future::ready(Ok(()))
    }
}

impl Drop for SessionTransport {
    fn drop(&mut self) {
        self.session.end();
    }
}
