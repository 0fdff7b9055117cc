use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use http_body_util::BodyExt;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    sync::mpsc,
};

use super::*;

/// What the test server does on a connection.
#[derive(Clone, Copy, PartialEq)]
enum Serve {
    /// Answers every request, keeping the connection open.
    KeepAlive,
    /// Answers one request, then closes the connection a little later (without saying so).
    CloseAfterOne,
    /// Sends the head and half the body of the first connection's answer, then waits for the
    /// client to go; later connections are served [`Serve::KeepAlive`].
    HalfFirst,
    /// Answers the first request of a connection; at the second, closes it unanswered.
    DropSecond,
}

/// A raw HTTP/1.1 server on loopback: its URL, the connections it accepted, and a channel that
/// gets a message when a connection is closed by the client.
async fn server(serve: Serve) -> (String, Arc<AtomicUsize>, mpsc::UnboundedReceiver<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bound");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let accepted = Arc::new(AtomicUsize::new(0));
    let (closed_tx, closed) = mpsc::unbounded_channel();
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let k = count.fetch_add(1, Ordering::SeqCst);
            let closed_tx = closed_tx.clone();
            tokio::spawn(async move {
                let mut read = Vec::new();
                let mut buf = [0u8; 4096];
                let mut served = 0;
                loop {
                    // One request: its head, and a body of its content-length.
                    let head_end = loop {
                        if let Some(i) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => {
                                let _ = closed_tx.send(k);
                                return;
                            }
                            Ok(n) => read.extend_from_slice(&buf[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&read[..head_end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while read.len() < head_end + length {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => read.extend_from_slice(&buf[..n]),
                        }
                    }
                    served += 1;
                    if serve == Serve::DropSecond && served == 2 {
                        return;
                    }
                    let host = head
                        .lines()
                        .find_map(|l| l.strip_prefix("host:"))
                        .map(str::trim)
                        .unwrap_or_default()
                        .to_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
                    read.drain(..head_end + length);
                    let body = if path.ends_with("/empty") {
                        String::new()
                    } else {
                        format!("connection {k}, host {host}, path {path}")
                    };
                    let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                    if serve == Serve::HalfFirst && k == 0 {
                        let half = answer.len() - body.len() / 2;
                        let _ = socket.write_all(&answer.as_bytes()[..half]).await;
                        // Until the client goes.
                        while let Ok(n) = socket.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                        }
                        let _ = closed_tx.send(k);
                        return;
                    }
                    if socket.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                    if serve == Serve::CloseAfterOne {
                        // After the client has put the connection back in its pool.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        return;
                    }
                }
            });
        }
    });
    (url, accepted, closed)
}

fn post(url: &str) -> http::Request<Bytes> {
    let mut request = http::Request::new(Bytes::from_static(b"{\"jsonrpc\":\"2.0\"}"));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = url.parse().expect("uri");
    request
}

async fn text(pool: &Arc<DrivenPool>, url: &str) -> String {
    let response = tokio::time::timeout(Duration::from_secs(10), pool.send(post(url)))
        .await
        .expect("in time")
        .expect("a response");
    assert_eq!(response.status(), http::StatusCode::OK);
    let body = response.into_body().collect().await.expect("the body").to_bytes();
    String::from_utf8(body.to_vec()).expect("text")
}

#[tokio::test]
async fn a_response_read_to_its_end_gives_its_connection_back_for_the_next_request() {
    let (url, accepted, _closed) = server(Serve::KeepAlive).await;
    let pool = Arc::new(DrivenPool::default());
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    for _ in 0..3 {
        assert_eq!(
            text(&pool, &url).await,
            format!("connection 0, host {authority}, path /mcp"),
            "the request goes in origin form, with the host header"
        );
        assert_eq!(pool.idle_count(), 1);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection served all three");
}

#[tokio::test]
async fn requests_at_once_each_get_a_connection_and_all_go_back_to_the_pool() {
    let (url, accepted, _closed) = server(Serve::KeepAlive).await;
    let pool = Arc::new(DrivenPool::default());
    let (a, b, c) = tokio::join!(text(&pool, &url), text(&pool, &url), text(&pool, &url));
    let mut served = [a, b, c].map(|t| t.split(',').next().unwrap_or_default().to_owned());
    served.sort();
    assert_eq!(served, ["connection 0", "connection 1", "connection 2"]);
    assert_eq!(pool.idle_count(), 3);
    text(&pool, &url).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "the fourth request reused one");
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_not_used_again() {
    let (url, accepted, mut closed) = server(Serve::CloseAfterOne).await;
    let pool = Arc::new(DrivenPool::default());
    assert!(text(&pool, &url).await.starts_with("connection 0"));
    // The server has closed it (its task ended after the answer); the pool does not know yet.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(pool.idle_count(), 1);
    assert!(text(&pool, &url).await.starts_with("connection 1"));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert!(closed.try_recv().is_err(), "the server closed them, not the client");
}

#[tokio::test]
async fn a_body_dropped_before_its_end_closes_its_connection() {
    let (url, accepted, mut closed) = server(Serve::HalfFirst).await;
    let pool = Arc::new(DrivenPool::default());
    let response = pool.send(post(&url)).await.expect("a response");
    let mut body = response.into_body();
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("in time")
        .expect("a frame")
        .expect("data");
    assert!(first.is_data());
    drop(body);
    assert_eq!(pool.idle_count(), 0, "not given back");
    let gone = tokio::time::timeout(Duration::from_secs(10), closed.recv())
        .await
        .expect("the connection is closed");
    assert_eq!(gone, Some(0));
    assert!(text(&pool, &url).await.starts_with("connection 1"));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_request_that_gets_no_response_fails_naming_the_url_and_the_cause() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    drop(listener);
    let pool = Arc::new(DrivenPool::default());
    let error = pool.send(post(&url)).await.expect_err("nobody listens").to_string();
    assert!(error.contains(&url), "{error}");
    assert!(error.to_ascii_lowercase().contains("refused"), "{error}");
}

#[tokio::test]
async fn a_response_with_no_body_gives_its_connection_back_unread() {
    let (url, accepted, _closed) = server(Serve::KeepAlive).await;
    let pool = Arc::new(DrivenPool::default());
    let empty = url.replace("/mcp", "/empty");
    let response = pool.send(post(&empty)).await.expect("a response");
    assert_eq!(response.status(), http::StatusCode::OK);
    drop(response);
    assert_eq!(pool.idle_count(), 1);
    assert!(text(&pool, &url).await.starts_with("connection 0"));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn idle_connections_are_closed_once_they_have_been_idle_too_long() {
    let (url, _accepted, mut closed) = server(Serve::KeepAlive).await;
    let keep = Duration::from_millis(200);
    let pool = Arc::new(DrivenPool::default().keeping_idle(keep));
    text(&pool, &url).await;
    assert_eq!(pool.idle_count(), 1);
    tokio::time::sleep(keep * 2 + Duration::from_millis(100)).await;
    assert_eq!(pool.idle_count(), 0, "reaped");
    let gone = tokio::time::timeout(Duration::from_secs(10), closed.recv())
        .await
        .expect("the server sees it closed");
    assert_eq!(gone, Some(0));
}

#[tokio::test]
async fn a_request_the_connection_may_have_written_is_not_sent_again() {
    let (url, accepted, _closed) = server(Serve::DropSecond).await;
    let pool = Arc::new(DrivenPool::default());
    assert!(text(&pool, &url).await.starts_with("connection 0"));
    let error = tokio::time::timeout(Duration::from_secs(10), pool.send(post(&url)))
        .await
        .expect("in time")
        .expect_err("closed unanswered");
    assert!(error.to_string().contains(&url), "{error}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "not sent again on a new connection");
}

#[tokio::test]
async fn a_pool_held_to_no_link_local_refuses_the_metadata_address_and_reaches_loopback() {
    let held = Arc::new(DrivenPool::held_to(Egress::NoLinkLocal));
    let refused = tokio::time::timeout(
        Duration::from_secs(10),
        held.send(post("http://169.254.169.254/latest/meta-data")),
    )
    .await
    .expect("refused before any connection is tried")
    .expect_err("refused");
    let chain = std::iter::successors(Some(&refused as &dyn std::error::Error), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ");
    assert!(
        chain.contains("link-local") && chain.contains("allowLinkLocal"),
        "{chain}"
    );

    let (url, accepted, _closed) = server(Serve::KeepAlive).await;
    assert!(text(&held, &url).await.starts_with("connection 0"));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}
