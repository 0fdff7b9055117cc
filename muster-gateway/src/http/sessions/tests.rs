use std::time::Duration;

use futures::{Stream, StreamExt as _};
use rmcp::{
    model::{
        ClientJsonRpcMessage, ClientNotification, CustomNotification, CustomRequest, GetExtensions, NumberOrString,
        ProgressNotificationParam, ProgressToken, RequestId, ServerJsonRpcMessage, ServerNotification, ServerRequest,
        ServerResult,
    },
    service::OriginatingRequestId,
    transport::{
        Transport,
        streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager},
    },
};
use serde_json::json;

use super::{
    DEFAULT_KEEP_ALIVE, SessionError, SessionTransport, Sessions,
    outbox::{MAX_KEPT, MAX_UNREAD},
};

const WAIT: Duration = Duration::from_secs(5);

fn id(n: i64) -> RequestId {
    NumberOrString::Number(n)
}

fn request(n: i64, progress: Option<&str>) -> ClientJsonRpcMessage {
    let mut params = json!({"name": "work"});
    if let Some(token) = progress {
        params["_meta"] = json!({"progressToken": token});
    }
    serde_json::from_value(json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}))
        .expect("a tools/call request")
}

fn answer(n: i64) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::response(
        ServerResult::CustomResult(rmcp::model::CustomResult(json!({"n": n}))),
        id(n),
    )
}

fn progress(token: &str, done: f64) -> ServerJsonRpcMessage {
    let params = ProgressNotificationParam::new(ProgressToken(NumberOrString::String(token.into())), done);
    ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(
        rmcp::model::Notification::new(params),
    ))
}

fn note(text: &str) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::notification(ServerNotification::CustomNotification(CustomNotification::new(
        "test/note",
        Some(json!({"text": text})),
    )))
}

/// A server request made while handling request `origin` (SEP-2260's marker).
fn asked_during(origin: i64, n: i64) -> ServerJsonRpcMessage {
    let mut request = ServerRequest::CustomRequest(CustomRequest::new("test/ask", None));
    request.extensions_mut().insert(OriginatingRequestId(id(origin)));
    ServerJsonRpcMessage::request(request, NumberOrString::Number(1000 + n))
}

async fn next(stream: &mut (impl Stream<Item = ServerSseMessage> + Unpin)) -> Option<ServerSseMessage> {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("an event or the end in time")
}

/// The event's id and its message as JSON.
fn seen(event: &ServerSseMessage) -> (String, serde_json::Value) {
    let message = event.message.as_ref().map_or(serde_json::Value::Null, |m| {
        serde_json::to_value(m.as_ref()).expect("a message serializes")
    });
    (event.event_id.clone().unwrap_or_default(), message)
}

async fn received(transport: &mut SessionTransport) -> ClientJsonRpcMessage {
    tokio::time::timeout(WAIT, transport.receive())
        .await
        .expect("a message in time")
        .expect("the session is open")
}

async fn open(sessions: &Sessions) -> (SessionId, SessionTransport) {
    sessions.create_session().await.expect("a session")
}

#[tokio::test]
async fn initialize_waits_for_the_services_answer_to_it() {
    let sessions = Sessions::default();
    let (session, mut transport) = open(&sessions).await;
    let service = tokio::spawn(async move {
        let first = received(&mut transport).await;
        assert!(
            matches!(first, ClientJsonRpcMessage::Request(ref r) if r.id == id(1)),
            "{first:?}"
        );
        // A note before the answer goes to the standalone stream, not to the handshake.
        transport.send(note("early")).await.expect("sent");
        transport.send(answer(1)).await.expect("sent");
        transport
    });
    let answer = sessions
        .initialize_session(&session, request(1, None))
        .await
        .expect("answered");
    assert_eq!(serde_json::to_value(&answer).expect("json")["result"], json!({"n": 1}));
    let _transport = service.await.expect("the service");
    // The note waits for the standalone stream.
    let mut standalone = Box::pin(sessions.create_standalone_stream(&session).await.expect("a stream"));
    let (event, message) = seen(&next(&mut standalone).await.expect("the note"));
    assert_eq!((event.as_str(), &message["params"]["text"]), ("1", &json!("early")));
}

#[tokio::test]
async fn a_requests_answer_progress_and_server_requests_go_on_its_stream_and_others_on_the_standalone() {
    let sessions = Sessions::default();
    let (session, mut transport) = open(&sessions).await;
    let mut stream = Box::pin(
        sessions
            .create_stream(&session, request(7, Some("tok")))
            .await
            .expect("a stream"),
    );
    let mut other = Box::pin(
        sessions
            .create_stream(&session, request(8, None))
            .await
            .expect("a stream"),
    );
    assert!(matches!(received(&mut transport).await, ClientJsonRpcMessage::Request(r) if r.id == id(7)));
    assert!(matches!(received(&mut transport).await, ClientJsonRpcMessage::Request(r) if r.id == id(8)));

    transport.send(progress("tok", 1.0)).await.expect("sent");
    transport.send(asked_during(7, 1)).await.expect("sent");
    transport.send(note("everyone")).await.expect("sent");
    transport.send(progress("unknown", 1.0)).await.expect("sent");
    transport.send(answer(7)).await.expect("sent");
    transport.send(progress("tok", 2.0)).await.expect("sent"); // after the answer: not its stream

    let priming = next(&mut stream).await.expect("the priming event");
    assert_eq!(
        (priming.event_id.as_deref(), priming.message.is_none(), priming.retry),
        (Some("req-0-0"), true, Some(super::DEFAULT_RETRY))
    );
    let mut on_stream = Vec::new();
    while let Some(event) = next(&mut stream).await {
        on_stream.push(seen(&event));
    }
    let ids: Vec<&str> = on_stream.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["req-0-1", "req-0-2", "req-0-3"], "{on_stream:?}");
    assert_eq!(on_stream[0].1["method"], "notifications/progress");
    assert_eq!(on_stream[1].1["method"], "test/ask");
    assert_eq!(on_stream[2].1["result"], json!({"n": 7}));

    // Request 8's stream is primed and has nothing yet.
    assert_eq!(
        next(&mut other).await.and_then(|e| e.event_id),
        Some("req-1-0".to_owned())
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(50), other.next())
            .await
            .is_err()
    );

    let mut standalone = Box::pin(sessions.create_standalone_stream(&session).await.expect("a stream"));
    let mut rest = Vec::new();
    for _ in 0..3 {
        rest.push(seen(&next(&mut standalone).await.expect("an event")));
    }
    assert_eq!(rest[0].1["params"]["text"], "everyone");
    assert_eq!(rest[1].1["params"]["progressToken"], "unknown");
    assert_eq!(
        (rest[2].0.as_str(), &rest[2].1["params"]["progress"]),
        ("3", &json!(2.0))
    );
}

#[tokio::test]
async fn a_request_stream_that_broke_is_resumed_after_its_last_event_also_after_its_answer() {
    let sessions = Sessions::default();
    let (session, mut transport) = open(&sessions).await;
    let mut stream = Box::pin(
        sessions
            .create_stream(&session, request(3, Some("p")))
            .await
            .expect("a stream"),
    );
    received(&mut transport).await;
    transport.send(progress("p", 1.0)).await.expect("sent");
    next(&mut stream).await.expect("priming");
    assert_eq!(seen(&next(&mut stream).await.expect("progress")).0, "req-0-1");
    drop(stream); // the connection broke

    transport.send(progress("p", 2.0)).await.expect("sent");
    let mut resumed = Box::pin(sessions.resume(&session, "req-0-1".into()).await.expect("resumed"));
    let (event, message) = seen(&next(&mut resumed).await.expect("the second progress"));
    assert_eq!(
        (event.as_str(), &message["params"]["progress"]),
        ("req-0-2", &json!(2.0))
    );
    // A second resume takes over: the first ends.
    let mut again = Box::pin(sessions.resume(&session, "req-0-0".into()).await.expect("resumed"));
    assert!(next(&mut resumed).await.is_none(), "replaced by the newer resume");
    assert_eq!(seen(&next(&mut again).await.expect("replayed")).0, "req-0-1");
    assert_eq!(seen(&next(&mut again).await.expect("replayed")).0, "req-0-2");
    transport.send(answer(3)).await.expect("sent");
    assert_eq!(
        seen(&next(&mut again).await.expect("the answer")).1["result"],
        json!({"n": 3})
    );
    assert!(next(&mut again).await.is_none(), "the stream ends with its answer");

    // After the answer, the stream is still there to resume.
    let mut late = Box::pin(sessions.resume(&session, "req-0-2".into()).await.expect("resumed"));
    assert_eq!(seen(&next(&mut late).await.expect("the answer")).0, "req-0-3");
    assert!(next(&mut late).await.is_none());

    for unknown in ["req-9-0", "req-x-1", "call-0-1", "nonsense"] {
        let resumed = sessions.resume(&session, unknown.into()).await;
        assert!(matches!(resumed, Err(SessionError::UnknownEvent { .. })), "{unknown}");
    }
}

#[tokio::test]
async fn a_second_get_is_a_shadow_until_the_first_goes_and_a_resume_replays_after_its_event() {
    let sessions = Sessions::default();
    let (session, mut transport) = open(&sessions).await;
    let mut first = Box::pin(sessions.create_standalone_stream(&session).await.expect("a stream"));
    let mut shadow = Box::pin(sessions.create_standalone_stream(&session).await.expect("a stream"));
    transport.send(note("a")).await.expect("sent");
    transport.send(note("b")).await.expect("sent");
    assert_eq!(seen(&next(&mut first).await.expect("a")).0, "1");
    assert!(
        tokio::time::timeout(Duration::from_millis(50), shadow.next())
            .await
            .is_err(),
        "a shadow gets no events"
    );
    drop(first);
    let mut resumed = Box::pin(sessions.resume(&session, "1".into()).await.expect("resumed"));
    let (event, message) = seen(&next(&mut resumed).await.expect("b"));
    assert_eq!((event.as_str(), &message["params"]["text"]), ("2", &json!("b")));
    // Closing the session ends every stream, and the service's transport.
    sessions.close_session(&session).await.expect("closed");
    assert!(next(&mut resumed).await.is_none());
    assert!(next(&mut shadow).await.is_none());
    assert!(
        tokio::time::timeout(WAIT, transport.receive())
            .await
            .expect("in time")
            .is_none()
    );
    assert!(!sessions.has_session(&session).await.expect("answers"));
    assert!(transport.send(note("late")).await.is_err(), "the session ended");
}

#[tokio::test]
async fn a_cancelled_requests_stream_ends_and_what_follows_about_it_goes_to_the_standalone_stream() {
    let sessions = Sessions::default();
    let (session, mut transport) = open(&sessions).await;
    let mut stream = Box::pin(
        sessions
            .create_stream(&session, request(4, Some("c")))
            .await
            .expect("a stream"),
    );
    received(&mut transport).await;
    let cancel = ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(
        rmcp::model::Notification::new(rmcp::model::CancelledNotificationParam::new(Some(id(4)), None)),
    ));
    sessions.accept_message(&session, cancel).await.expect("accepted");
    assert!(matches!(
        received(&mut transport).await,
        ClientJsonRpcMessage::Notification(_)
    ));
    next(&mut stream).await.expect("priming");
    assert!(
        next(&mut stream).await.is_none(),
        "the cancelled request's stream ended"
    );
    transport.send(progress("c", 1.0)).await.expect("sent");
    let mut standalone = Box::pin(sessions.create_standalone_stream(&session).await.expect("a stream"));
    assert_eq!(
        seen(&next(&mut standalone).await.expect("progress")).1["params"]["progressToken"],
        "c"
    );
}

#[tokio::test]
async fn an_unused_session_ends_after_its_keep_alive_and_one_being_read_does_not() {
    let sessions = Sessions::new(Duration::from_millis(100), None);
    let (idle, mut idle_transport) = open(&sessions).await;
    let (watched, mut watched_transport) = open(&sessions).await;
    let mut standalone = Box::pin(sessions.create_standalone_stream(&watched).await.expect("a stream"));
    let ended = tokio::time::timeout(WAIT, idle_transport.receive())
        .await
        .expect("ended in time");
    assert!(ended.is_none(), "the idle session's service reads no more");
    assert!(!sessions.has_session(&idle).await.expect("answers"));
    assert!(matches!(
        sessions.create_stream(&idle, request(1, None)).await,
        Err(SessionError::NotFound(_))
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        sessions.has_session(&watched).await.expect("answers"),
        "its stream is read"
    );
    watched_transport.send(note("still here")).await.expect("sent");
    assert_eq!(
        seen(&next(&mut standalone).await.expect("the note")).1["params"]["text"],
        "still here"
    );
    drop(standalone);
    let ended = tokio::time::timeout(WAIT, watched_transport.receive())
        .await
        .expect("ended in time");
    assert!(ended.is_none(), "unread, it ends too");
    assert!(sessions.is_empty());
    assert_eq!(DEFAULT_KEEP_ALIVE, Duration::from_secs(300));
}

#[tokio::test]
async fn the_service_ending_ends_the_session_streams_and_a_waiting_initialize() {
    let sessions = Sessions::default();
    let (session, transport) = open(&sessions).await;
    let mut stream = Box::pin(
        sessions
            .create_stream(&session, request(2, None))
            .await
            .expect("a stream"),
    );
    let waiting = {
        let sessions = sessions.clone();
        let session = session.clone();
        tokio::spawn(async move { sessions.initialize_session(&session, request(1, None)).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(transport);
    let initialized = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("in time")
        .expect("joined");
    assert!(matches!(initialized, Err(SessionError::Ended(_))), "{initialized:?}");
    next(&mut stream).await.expect("priming");
    assert!(next(&mut stream).await.is_none());
    assert!(matches!(
        sessions.accept_message(&session, request(3, None)).await,
        Err(SessionError::Ended(_))
    ));
}

#[tokio::test]
async fn an_unread_stream_keeps_what_its_reader_has_not_read_up_to_a_bound() {
    let sessions = Sessions::default();
    let (session, mut transport) = open(&sessions).await;
    let mut standalone = Box::pin(sessions.create_standalone_stream(&session).await.expect("a stream"));
    let sent = MAX_UNREAD + MAX_KEPT + 10;
    for i in 0..sent {
        transport.send(note(&i.to_string())).await.expect("sent");
    }
    // The reader gets the oldest still kept, then every one after it.
    let (first, message) = seen(&next(&mut standalone).await.expect("an event"));
    let first: usize = first.parse().expect("a standalone id");
    assert_eq!(first, sent - (MAX_UNREAD + MAX_KEPT) + 1, "{message}");
    let mut last = first;
    while last < sent {
        let (event, _) = seen(&next(&mut standalone).await.expect("an event"));
        last = event.parse().expect("a standalone id");
    }
    assert_eq!(last, sent);
}
