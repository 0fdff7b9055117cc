//! The classification of a handshake's failure, against real loopback servers: one answering
//! 401 with a challenge, one answering 503, one refusing connections; over streamable HTTP and
//! the legacy SSE transport.

use std::net::SocketAddr;

use axum::{
    Router,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{any, get, post},
};
use futures::StreamExt;
use muster_core::crd::{MCPServer, MCPServerSpec, ServerType};

use super::*;
use crate::{Egress, UpstreamConnection};

/// Serves `app` on a loopback port.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// A loopback address nothing listens on.
async fn refusing() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr")
}

/// The error of connecting to `url` as a server of `server_type`.
async fn connect(server_type: ServerType, url: &str) -> UpstreamError {
    let spec = MCPServerSpec {
        server_type: Some(server_type),
        url: Some(url.to_owned()),
        timeout: 10,
        ..MCPServerSpec::default()
    };
    UpstreamConnection::connect(&MCPServer::new("probe", spec), None, Egress::Open)
        .await
        .expect_err("the server refuses")
}

/// An answer of `status` with `challenge` as its `WWW-Authenticate`, when given, and `body`.
fn refusal(status: StatusCode, challenge: Option<&'static str>, body: &'static str) -> Response {
    let mut response = (status, body).into_response();
    if let Some(challenge) = challenge {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    }
    response
}

const CHALLENGE: &str = r#"Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp""#;
const SCOPE_CHALLENGE: &str = r#"Bearer error="insufficient_scope", scope="files:write""#;

/// Every message a client sends, and its stream, answered with `status`.
async fn answering(status: StatusCode, challenge: Option<&'static str>, body: &'static str) -> SocketAddr {
    serve(Router::new().route("/mcp", any(move || async move { refusal(status, challenge, body) }))).await
}

/// A legacy SSE server whose stream opens and names `/message`, which answers with `status`.
async fn sse_posts_answering(status: StatusCode, challenge: Option<&'static str>) -> SocketAddr {
    let stream = || async {
        (
            [(header::CONTENT_TYPE, "text/event-stream")],
            axum::body::Body::from_stream(
                futures::stream::iter([Ok::<_, std::convert::Infallible>(
                    "event: endpoint\ndata: /message?sessionId=abc\n\n",
                )])
                .chain(futures::stream::pending()),
            ),
        )
    };
    serve(Router::new().route("/sse", get(stream)).route(
        "/message",
        post(move || async move { refusal(status, challenge, "go away") }),
    ))
    .await
}

fn assert_no_type_names(error: &UpstreamError) {
    let text = error.to_string();
    assert!(!text.contains("rmcp::") && !text.contains('<'), "{text}");
}

#[tokio::test]
async fn a_401_with_a_challenge_requires_authorization_over_streamable_http_and_sse() {
    let addr = answering(StatusCode::UNAUTHORIZED, Some(CHALLENGE), "").await;
    for (server_type, url) in [
        (ServerType::StreamableHttp, format!("http://{addr}/mcp")),
        (ServerType::Sse, format!("http://{addr}/mcp")),
    ] {
        let error = connect(server_type, &format!("{url}?token=secret")).await;
        let UpstreamError::AuthRequired {
            url: refused,
            status,
            challenge,
        } = &error
        else {
            panic!("{server_type}: not an auth refusal: {error:?}");
        };
        assert_eq!(refused, &url, "{server_type}: the URL, without its query");
        assert_eq!(*status, StatusCode::UNAUTHORIZED);
        assert_eq!(challenge.as_deref(), Some(CHALLENGE), "{server_type}");
        assert_eq!(error.http_status(), Some(StatusCode::UNAUTHORIZED));
        assert_eq!(
            error.to_string(),
            format!("{url} requires authorization (HTTP 401 Unauthorized): {CHALLENGE}")
        );
    }
}

#[tokio::test]
async fn a_401_without_a_challenge_requires_authorization_too() {
    let addr = answering(StatusCode::UNAUTHORIZED, None, "who are you?").await;
    for server_type in [ServerType::StreamableHttp, ServerType::Sse] {
        let url = format!("http://{addr}/mcp");
        let error = connect(server_type, &url).await;
        assert!(
            matches!(
                &error,
                UpstreamError::AuthRequired {
                    status: StatusCode::UNAUTHORIZED,
                    challenge: None,
                    ..
                }
            ),
            "{server_type}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("{url} requires authorization (HTTP 401 Unauthorized) with no WWW-Authenticate challenge")
        );
    }
}

#[tokio::test]
async fn a_403_for_an_insufficient_scope_requires_authorization() {
    let addr = answering(StatusCode::FORBIDDEN, Some(SCOPE_CHALLENGE), "").await;
    for server_type in [ServerType::StreamableHttp, ServerType::Sse] {
        let error = connect(server_type, &format!("http://{addr}/mcp")).await;
        assert!(
            matches!(
                &error,
                UpstreamError::AuthRequired { status: StatusCode::FORBIDDEN, challenge: Some(c), .. } if c == SCOPE_CHALLENGE
            ),
            "{server_type}: {error:?}"
        );
    }
}

#[tokio::test]
async fn a_503_is_an_http_status_over_streamable_http() {
    let addr = answering(StatusCode::SERVICE_UNAVAILABLE, None, "overloaded").await;
    let url = format!("http://{addr}/mcp");
    let error = connect(ServerType::StreamableHttp, &url).await;
    let UpstreamError::HttpStatus {
        method,
        url: answered,
        status,
        said,
    } = &error
    else {
        panic!("not an HTTP status: {error:?}");
    };
    assert_eq!(
        (method, answered, *status),
        (&http::Method::POST, &url, StatusCode::SERVICE_UNAVAILABLE)
    );
    // rmcp keeps no body of a 5xx.
    assert_eq!(said, "");
    assert_eq!(error.http_status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(
        error.to_string(),
        format!("POST {url} answered HTTP 503 Service Unavailable")
    );
}

#[tokio::test]
async fn a_503_to_the_sse_stream_is_an_http_status_with_what_the_server_said() {
    let addr = answering(StatusCode::SERVICE_UNAVAILABLE, None, "  down for\n maintenance  ").await;
    let url = format!("http://{addr}/mcp");
    let error = connect(ServerType::Sse, &url).await;
    assert!(
        matches!(
            &error,
            UpstreamError::HttpStatus { method, status: StatusCode::SERVICE_UNAVAILABLE, said, .. }
                if method == http::Method::GET && said == "down for maintenance"
        ),
        "{error:?}"
    );
    // A 5xx is no sign of the wrong transport: no hint.
    assert_eq!(
        error.to_string(),
        format!("GET {url} answered HTTP 503 Service Unavailable: down for maintenance")
    );
}

#[tokio::test]
async fn a_4xx_keeps_what_the_server_said_and_on_the_sse_stream_what_it_means() {
    let addr = answering(StatusCode::NOT_FOUND, None, "no MCP here").await;
    let url = format!("http://{addr}/mcp");
    let error = connect(ServerType::StreamableHttp, &url).await;
    assert!(
        matches!(&error, UpstreamError::HttpStatus { status: StatusCode::NOT_FOUND, said, .. } if said == "no MCP here"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!("POST {url} answered HTTP 404 Not Found: no MCP here")
    );

    let error = connect(ServerType::Sse, &url).await;
    assert!(
        matches!(
            &error,
            UpstreamError::HttpStatus {
                status: StatusCode::NOT_FOUND,
                ..
            }
        ),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "GET {url} answered HTTP 404 Not Found: no MCP here, not an SSE stream"
        )),
        "{text}"
    );
    assert!(text.contains("type: streamable-http"), "{text}");
}

#[tokio::test]
async fn a_refused_post_on_the_sse_transport_is_classified_as_a_refused_stream() {
    let addr = sse_posts_answering(StatusCode::UNAUTHORIZED, Some(CHALLENGE)).await;
    let error = connect(ServerType::Sse, &format!("http://{addr}/sse")).await;
    assert!(
        matches!(
            &error,
            UpstreamError::AuthRequired { url, status: StatusCode::UNAUTHORIZED, challenge: Some(c) }
                if *url == format!("http://{addr}/message") && c == CHALLENGE
        ),
        "{error:?}"
    );

    let addr = sse_posts_answering(StatusCode::BAD_GATEWAY, None).await;
    let error = connect(ServerType::Sse, &format!("http://{addr}/sse")).await;
    assert!(
        matches!(
            &error,
            UpstreamError::HttpStatus { method, status: StatusCode::BAD_GATEWAY, said, .. }
                if method == http::Method::POST && said == "go away"
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_server_that_refuses_connections_is_unreachable_named_by_its_url_and_cause() {
    let addr = refusing().await;
    for server_type in [ServerType::StreamableHttp, ServerType::Sse] {
        let url = format!("http://{addr}/mcp");
        let error = connect(server_type, &url).await;
        assert!(
            matches!(&error, UpstreamError::Unreachable { url: u, cause } if *u == url && cause == "connection refused"),
            "{server_type}: {error:?}"
        );
        assert_eq!(error.to_string(), format!("cannot reach {url}: connection refused"));
        assert_eq!(error.http_status(), None);
        assert_no_type_names(&error);
    }
}

#[tokio::test]
async fn any_other_failed_handshake_keeps_its_message_without_rusts_type_names() {
    let addr = serve(Router::new().route(
        "/mcp",
        post(|| async { ([(header::CONTENT_TYPE, "text/plain")], "hello") }),
    ))
    .await;
    let error = connect(ServerType::StreamableHttp, &format!("http://{addr}/mcp")).await;
    let UpstreamError::Initialize(message) = &error else {
        panic!("not the rest: {error:?}");
    };
    assert!(message.contains("text/plain"), "{message}");
    assert!(
        !message.contains("rmcp::") && !message.contains("Transport ["),
        "{message}"
    );
}

#[test]
fn statuses_are_read_back_only_from_rmcps_text_of_an_untyped_4xx() {
    assert_eq!(
        status_in_response("HTTP 404 Not Found: no such path"),
        Some((StatusCode::NOT_FOUND, "no such path"))
    );
    assert_eq!(
        status_in_response("HTTP 418 I'm a teapot: "),
        Some((StatusCode::IM_A_TEAPOT, ""))
    );
    assert_eq!(status_in_response("HTTP 4040 Not Found: x"), None);
    assert_eq!(status_in_response("could not parse JSON response: HTTP 404"), None);
    assert_eq!(status_in_response("HTTP 99 x"), None);
}
