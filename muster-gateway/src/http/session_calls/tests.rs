use rmcp::{
    ErrorData, ServerHandler,
    model::{CallToolResponse, CallToolResult, ContentBlock, ServerCapabilities, ServerConfig},
    service::NotificationContext,
    transport::{StreamableHttpServerConfig, StreamableHttpService},
};

use super::*;

/// A server whose tools answer who answered them (`front`, here, or `rmcp`) and on which
/// session; `held` answers once the test releases it (the semaphore).
#[derive(Clone)]
struct WhoAnswered(Arc<SessionTable>, Arc<tokio::sync::Semaphore>);

impl ServerHandler for WhoAnswered {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        if let Some(parts) = ctx.extensions.get::<http::request::Parts>() {
            self.0.admit(parts, ctx.peer.clone());
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "held" {
            self.1.acquire().await.expect("never closed").forget();
        }
        let who = if ctx.extensions.get::<CallStream>().is_some() {
            "front"
        } else {
            "rmcp"
        };
        let session = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get(SESSION_ID))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("{who} {session}"))]).into())
    }
}

impl AnswersCalls for WhoAnswered {}

/// Serves [`WhoAnswered`] on loopback, the session manager ending sessions idle for `idle`, the table
/// sending them to rmcp once per `touch`: its URL, and what releases a `held` call.
async fn serve(idle: Duration, touch: Duration) -> (String, Arc<tokio::sync::Semaphore>) {
    let table = Arc::new(SessionTable::default().with_touch_interval(touch));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let handler = WhoAnswered(Arc::clone(&table), Arc::clone(&release));
    let sessions = crate::http::sessions::Sessions::new(idle, Some(crate::http::sessions::DEFAULT_RETRY));
    let factory = handler.clone();
    let rmcp_service = StreamableHttpService::new(
        move || Ok(factory.clone()),
        sessions.into(),
        StreamableHttpServerConfig::default(),
    );
    let calls = SessionCalls::new(rmcp_service, Arc::new(handler), table, 1 << 20);
    let app = axum::Router::new().nest_service("/mcp", calls);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/mcp"), release)
}

/// Who answered each of 24 calls made 150 ms apart by one client that keeps no stream open,
/// whose sessions the session manager ends after 2 s unused; and how many sessions they were
/// made on (the client opens a new session when its session is gone, as the SDKs do on a 404).
async fn calls_over_time(touch: Duration) -> (Vec<String>, usize) {
    let (url, _) = serve(Duration::from_secs(2), touch).await;
    let mut session = RawSession::open(&url).await;
    let (mut who, mut sessions) = (Vec::new(), std::collections::BTreeSet::new());
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "who"}});
    for _ in 0..24 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let mut response = RawSession::post_to(&session.http, &url, Some(&session.id), &call).await;
        if response.status() == StatusCode::NOT_FOUND {
            session = RawSession::open(&url).await;
            response = RawSession::post_to(&session.http, &url, Some(&session.id), &call).await;
        }
        let body = response.text().await.expect("a body");
        let answer = body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .find_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
            .unwrap_or_else(|| panic!("an answer in {body:?}"));
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
        let (answerer, session) = text.split_once(' ').expect("who and where");
        who.push(answerer.to_owned());
        sessions.insert(session.to_owned());
    }
    (who, sessions.len())
}

#[tokio::test]
async fn a_session_used_only_for_calls_stays_alive_because_rmcp_sees_one_now_and_then() {
    let (who, sessions) = calls_over_time(Duration::from_millis(300)).await;
    assert_eq!(sessions, 1, "one session throughout: {who:?}");
    let front = who.iter().filter(|w| *w == "front").count();
    let rmcp = who.iter().filter(|w| *w == "rmcp").count();
    assert_eq!(front + rmcp, who.len(), "{who:?}");
    assert!(front >= 12, "most calls are answered in front: {who:?}");
    assert!(rmcp >= 3, "one call per interval goes to rmcp: {who:?}");
}

#[tokio::test]
async fn without_those_calls_the_session_manager_ends_a_session_in_use() {
    let (who, sessions) = calls_over_time(Duration::from_secs(3600)).await;
    assert!(
        sessions > 1,
        "the session manager ended the session it never saw: {who:?}"
    );
}

/// A raw HTTP client of one initialized session at `url`.
struct RawSession {
    http: reqwest::Client,
    url: String,
    id: String,
}

impl RawSession {
    async fn open(url: &str) -> Self {
        let http = reqwest::Client::new();
        let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        let response = Self::post_to(&http, url, None, &initialize).await;
        let id = response.headers().get(SESSION_ID).and_then(|v| v.to_str().ok());
        let id = id.expect("a session id").to_owned();
        let _ = response.bytes().await;
        let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = Self::post_to(&http, url, Some(&id), &initialized).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        Self {
            http,
            url: url.to_owned(),
            id,
        }
    }

    async fn post_to(
        http: &reqwest::Client,
        url: &str,
        session: Option<&str>,
        message: &serde_json::Value,
    ) -> reqwest::Response {
        let mut request = http
            .post(url)
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header(header::CONTENT_TYPE, "application/json")
            .header(PROTOCOL_VERSION, "2025-06-18")
            .json(message);
        if let Some(session) = session {
            request = request.header(SESSION_ID, session);
        }
        request.send().await.expect("an answer")
    }

    /// Calls `tool`; resolves with the response's head.
    async fn call(&self, tool: &str) -> reqwest::Response {
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool}});
        let response = Self::post_to(&self.http, &self.url, Some(&self.id), &call).await;
        assert_eq!(response.status(), StatusCode::OK);
        response
    }
}

#[tokio::test]
async fn a_quick_calls_head_waits_for_its_answer_and_a_slow_calls_does_not() {
    let (url, release) = serve(Duration::from_secs(60), TOUCH_INTERVAL).await;
    let session = RawSession::open(&url).await;

    // A quick call: the first bytes of the stream are its priming event and its answer,
    // answered in front.
    let mut quick = session.call("who").await;
    // With the headers of rmcp's streams.
    let headers = quick.headers();
    assert_eq!(headers[header::CONTENT_TYPE], "text/event-stream");
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
    assert_eq!(
        headers["x-accel-buffering"], "no",
        "a proxy must not hold the stream back"
    );
    let first = quick.chunk().await.expect("readable").expect("an event");
    let first = String::from_utf8_lossy(&first).into_owned();
    let answer = first
        .strip_prefix("data: \nid: call-0-0\nretry: 3000\n\n")
        .unwrap_or_default();
    assert!(answer.starts_with("data: {") && answer.contains("front"), "{first:?}");

    // A held call: its head waits for a first event (it cannot come before HEAD_WAIT), then
    // comes while the call is still running (it is released only after), with an SSE
    // comment first; then the answer.
    let call = session.call("held");
    tokio::pin!(call);
    let early = tokio::time::timeout(HEAD_WAIT / 2, call.as_mut()).await;
    assert!(early.is_err(), "the head waits for the call's first event");
    let mut held = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the head does not wait for the answer");
    let comment = held.chunk().await.expect("readable").expect("a comment");
    assert_eq!(
        &comment[..],
        b"data: \nid: call-1-0\nretry: 3000\n\n:\n\n",
        "primed, then a comment"
    );
    release.add_permits(1);
    let rest = held.bytes().await.expect("the rest");
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.starts_with("data: ") && rest.contains("front"), "{rest:?}");
}

impl RawSession {
    /// Resumes the stream of a call after the event `last`.
    async fn resume(&self, last: &str) -> reqwest::Response {
        self.http
            .get(&self.url)
            .header(header::ACCEPT, "text/event-stream")
            .header(PROTOCOL_VERSION, "2025-06-18")
            .header(SESSION_ID, &self.id)
            .header(LAST_EVENT_ID, last)
            .send()
            .await
            .expect("an answer")
    }
}

#[tokio::test]
async fn a_call_whose_stream_broke_is_resumed_from_its_last_event() {
    let (url, release) = serve(Duration::from_secs(60), TOUCH_INTERVAL).await;
    let session = RawSession::open(&url).await;

    // The stream is primed: the client has an event id before anything else comes.
    let mut held = session.call("held").await;
    let primed = held.chunk().await.expect("readable").expect("the priming event");
    let primed = String::from_utf8_lossy(&primed).into_owned();
    assert!(
        primed.starts_with("data: \nid: call-0-0\nretry: 3000\n\n"),
        "{primed:?}"
    );
    // The connection breaks while the call runs; the client comes back for the rest, asking
    // again (as an SDK does after `retry`) until the gateway has seen the stream go.
    drop(held);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let resumed = loop {
        let mut resumed = session.resume("call-0-0").await;
        assert_eq!(resumed.status(), StatusCode::OK);
        match tokio::time::timeout(Duration::from_millis(300), resumed.chunk()).await {
            // Open and waiting for the call: the stream is the call's.
            Err(_) => break resumed,
            Ok(chunk) => assert_eq!(chunk.expect("readable"), None, "nothing before the answer"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the broken stream was never taken for one"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    release.add_permits(1);
    let rest = rest_of(resumed).await;
    assert!(
        rest.starts_with("data: {") && rest.contains("front") && rest.ends_with("\nid: call-0-1\n\n"),
        "{rest:?}"
    );
    // Delivered, and kept: a client that lost that too gets the answer again.
    let again = rest_of(session.resume("call-0-0").await).await;
    assert_eq!(again, rest);
    // So does one whose stream reached its end, answer and all.
    let whole = rest_of(session.call("quick").await).await;
    assert!(whole.ends_with("\nid: call-1-1\n\n"), "{whole:?}");
    let lost = rest_of(session.resume("call-1-0").await).await;
    assert!(lost.starts_with("data: {") && whole.ends_with(&lost), "{lost:?}");
}

/// Everything a stream sent, to its end.
async fn rest_of(mut stream: reqwest::Response) -> String {
    let mut rest = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
        .await
        .expect("the stream ends in time")
        .expect("readable")
    {
        rest.extend_from_slice(&chunk);
    }
    String::from_utf8(rest).expect("text")
}

#[tokio::test]
async fn a_call_through_rmcp_whose_stream_broke_is_resumed_by_the_session_manager() {
    // Never touched here: every call goes to rmcp, and its stream is the session manager's.
    let (url, release) = serve(Duration::from_secs(60), Duration::ZERO).await;
    let session = RawSession::open(&url).await;
    let mut held = session.call("held").await;
    let primed = held.chunk().await.expect("readable").expect("the priming event");
    let primed = String::from_utf8_lossy(&primed).into_owned();
    let id = primed
        .strip_prefix("data: \nid: ")
        .and_then(|rest| rest.split_once('\n'))
        .map(|(id, _)| id.to_owned())
        .unwrap_or_else(|| panic!("a primed stream: {primed:?}"));
    assert!(id.starts_with("req-") && id.ends_with("-0"), "{id}");
    drop(held);

    let resumed = session.resume(&id).await;
    assert_eq!(resumed.status(), StatusCode::OK);
    release.add_permits(1);
    let answer_id = format!("{}-1", id.strip_suffix("-0").unwrap_or_default());
    let rest = rest_of(resumed).await;
    assert!(
        rest.contains("rmcp") && rest.contains(&format!("id: {answer_id}\n")),
        "the answer, after the event the client had: {rest:?}"
    );
    // The stream is kept after its answer: a client that lost that too gets it again.
    let again = rest_of(session.resume(&id).await).await;
    assert!(again.contains("rmcp") && again.contains(&answer_id), "{again:?}");
    // An id the session never gave is an empty stream.
    let unknown = rest_of(session.resume("req-999-0").await).await;
    assert_eq!(unknown, "");
}

#[tokio::test]
async fn a_call_whose_stream_is_dropped_runs_on_into_its_replay() {
    use futures::StreamExt as _;
    let replays = Arc::new(replay::Replays::default());
    let (answer, answered) = tokio::sync::oneshot::channel::<()>();
    let (progress, outbox) = mpsc::unbounded_channel();
    let call: CallFuture = Box::pin(async move {
        let _ = answered.await;
        Outgoing::Message(ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::empty(()),
            RequestId::Number(7),
        ))
    });
    let mut body = CallBody::new(call, outbox, Arc::clone(&replays));
    progress
        .send(Box::new(ServerJsonRpcMessage::notification(
            rmcp::model::ServerNotification::ToolListChangedNotification(Default::default()),
        )))
        .expect("queued");
    let first = body.next().await.expect("an event").expect("bytes");
    assert!(String::from_utf8_lossy(&first).ends_with("id: call-0-1\n\n"));
    drop(body);
    answer.send(()).expect("the call waits");

    // The answer is resumed after the event the client had.
    let response = replay::resume(&replays, 0, 1, KEEP_ALIVE);
    let rest = response
        .into_body()
        .into_data_stream()
        .map(|b| b.expect("bytes"))
        .collect();
    let rest: Vec<Bytes> = tokio::time::timeout(Duration::from_secs(10), rest)
        .await
        .expect("the call ran on to its end");
    assert_eq!(rest.len(), 1, "{rest:?}");
    let answer = String::from_utf8_lossy(&rest[0]);
    assert!(
        answer.starts_with("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: call-0-2\n\n"),
        "{answer}"
    );
}
