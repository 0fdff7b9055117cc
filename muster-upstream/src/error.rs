//! [`UpstreamError`]: why a connection to a downstream server could not be made, typed where a
//! caller branches on it, and the classification of a failed handshake into it.
//!
//! rmcp hands its transport's error back inside `ClientInitializeError::TransportError` as a
//! `DynamicTransportError`: the classification walks that error's `source()` chain for the typed
//! errors (`StreamableHttpError`, [`SseTransportError`], reqwest's, rmcp's `AuthRequiredError` and
//! `HttpStatusError`). One answer rmcp keeps only as text: a 4xx other than a challenged 401/403
//! is `StreamableHttpError::UnexpectedServerResponse("HTTP 404 Not Found: <body>")`, whose status
//! and body are read back from that text ([`status_in_response`]).

use std::time::Duration;

use http::StatusCode;
use rmcp::{
    service::{ClientInitializeError, ServiceError},
    transport::streamable_http_client::{
        AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
    },
};

use crate::{
    answer_text::{challenge_text, said_text, trimmed},
    sse::{NOT_AN_SSE_STREAM, SseTransportError},
    transport::TransportError,
};

/// Why a connection to a downstream server could not be made.
///
/// A remote server's refusal is classified the same way whichever transport met it (streamable
/// HTTP, or the legacy HTTP+SSE transport):
///
/// | the server | variant |
/// |---|---|
/// | answered 401, or 403 with a `WWW-Authenticate` challenge (insufficient scope) | [`AuthRequired`](Self::AuthRequired), with the challenge when there is one |
/// | answered any other status that is not success | [`HttpStatus`](Self::HttpStatus), with the start of what it said |
/// | could not be reached (connection refused, a name that does not resolve, TLS, ...) | [`Unreachable`](Self::Unreachable), with the innermost cause |
/// | failed the handshake another way | [`Initialize`](Self::Initialize), with the message |
///
/// ```
/// use muster_upstream::UpstreamError;
///
/// /// Whether people must sign in to the server, and the challenge to discover how.
/// fn sign_in_needed(error: &UpstreamError) -> Option<Option<&str>> {
///     match error {
///         UpstreamError::AuthRequired { challenge, .. } => Some(challenge.as_deref()),
///         _ => None,
///     }
/// }
///
/// let refused = UpstreamError::Initialize("connection closed: initialize response".into());
/// assert_eq!(sign_in_needed(&refused), None);
/// assert_eq!(refused.http_status(), None);
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The transport could not be set up (the command does not start, the URL is invalid, ...).
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The server requires authorization: it answered 401, or 403 with a `WWW-Authenticate`
    /// challenge (insufficient scope).
    #[error("{url} requires authorization (HTTP {status}){}", challenge_text(.challenge.as_deref()))]
    AuthRequired {
        /// The URL that answered (without user info, query or fragment).
        url: String,
        /// 401, or 403 for an insufficient scope.
        status: StatusCode,
        /// The `WWW-Authenticate` challenge, when the answer carried one (RFC 9728 discovery
        /// reads the well-known document without it).
        challenge: Option<String>,
    },
    /// The server answered with an HTTP status that is not success.
    #[error(
        "{method} {url} answered HTTP {status}{}{}",
        said_text(.said),
        stream_hint(.method, *.status)
    )]
    HttpStatus {
        /// The request answered: `POST` (a message), or `GET` (the legacy SSE transport's stream).
        method: http::Method,
        /// The URL that answered (without user info, query or fragment).
        url: String,
        /// The status.
        status: StatusCode,
        /// The start of what it said with it, trimmed; empty when nothing was read (rmcp keeps
        /// no body of a 429 or 5xx).
        said: String,
    },
    /// The server could not be reached: no connection was made, or none answered.
    #[error("cannot reach {url}: {cause}")]
    Unreachable {
        /// The URL (without user info, query or fragment).
        url: String,
        /// The innermost cause (`connection refused`, a name that does not resolve, ...).
        cause: String,
    },
    /// The MCP handshake failed another way.
    #[error("MCP initialize failed: {0}")]
    Initialize(String),
    /// A stdio server did not start: why, how its process ended and what it last wrote to stderr.
    #[error("{cause}{}{}", exited_text(.status.as_ref()), stderr_text(.stderr))]
    StdioStart {
        /// What failed (the handshake, or its timeout).
        cause: Box<UpstreamError>,
        /// How the process exited; `None` while it still runs.
        status: Option<std::process::ExitStatus>,
        /// Its last lines on stderr, oldest first.
        stderr: Vec<String>,
    },
    /// Reading the server's tools, resources or prompts failed.
    #[error("listing {what} failed: {source}")]
    List {
        /// tools, resources or prompts.
        what: &'static str,
        /// The failure.
        #[source]
        source: ServiceError,
    },
    /// The server did not answer within its timeout.
    #[error("{what} timed out after {}s", after.as_secs())]
    Timeout {
        /// What was being done.
        what: &'static str,
        /// The budget.
        after: Duration,
    },
}

impl UpstreamError {
    /// The HTTP status the server answered, when that is why: [`Self::AuthRequired`] and
    /// [`Self::HttpStatus`].
    pub fn http_status(&self) -> Option<StatusCode> {
        match self {
            Self::AuthRequired { status, .. } | Self::HttpStatus { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// `error` of a handshake with the server at `url` (shown in errors; `None` for a stdio
    /// server), classified ([module docs](self)).
    pub(crate) fn of_handshake(error: ClientInitializeError, url: Option<&str>) -> Self {
        match error {
            ClientInitializeError::TransportError { error, context } => {
                let transport = error.error.as_ref() as &(dyn std::error::Error + 'static);
                url.and_then(|url| classify(transport, url))
                    .unwrap_or_else(|| Self::Initialize(format!("{transport}, when {context}")))
            }
            // A refusal in the fallback to `initialize` is the server's answer to that.
            ClientInitializeError::LegacyFallbackFailed { fallback, .. } => Self::of_handshake(*fallback, url),
            other => Self::Initialize(other.to_string()),
        }
    }
}

/// The typed refusal in `error`'s source chain, if any.
fn classify(error: &(dyn std::error::Error + 'static), url: &str) -> Option<UpstreamError> {
    let auth = |status, challenge: &str| UpstreamError::AuthRequired {
        url: url.to_owned(),
        status,
        challenge: Some(challenge.trim().to_owned()).filter(|c| !c.is_empty()),
    };
    // A streamable-HTTP handshake's refusals answer its POSTs.
    let http = |method, url: &str, status, said: &str| UpstreamError::HttpStatus {
        method,
        url: url.to_owned(),
        status,
        said: trimmed(said),
    };
    let post = |status, said: &str| http(http::Method::POST, url, status, said);
    let mut next = Some(error);
    while let Some(current) = next {
        next = current.source();
        if let Some(e) = current.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            match e {
                StreamableHttpError::AuthRequired(e) => {
                    return Some(auth(StatusCode::UNAUTHORIZED, &e.www_authenticate_header));
                }
                StreamableHttpError::InsufficientScope(e) => {
                    return Some(auth(StatusCode::FORBIDDEN, &e.www_authenticate_header));
                }
                StreamableHttpError::HttpStatus(e) => return status_code(e.status).map(|s| post(s, "")),
                StreamableHttpError::UnexpectedServerResponse(text) => {
                    return status_in_response(text).map(|(status, said)| match status {
                        StatusCode::UNAUTHORIZED => auth(status, ""),
                        _ => post(status, said),
                    });
                }
                // rmcp does not name the HTTP client's error as the source: followed by hand.
                StreamableHttpError::Client(e) => next = Some(e),
                _ => {}
            }
        } else if let Some(e) = current.downcast_ref::<reqwest::Error>() {
            if let Some(status) = e.status() {
                return Some(match status {
                    StatusCode::UNAUTHORIZED => auth(status, ""),
                    _ => post(status, ""),
                });
            }
            if e.is_connect() || e.is_timeout() || e.is_request() {
                return Some(UpstreamError::Unreachable {
                    url: url.to_owned(),
                    cause: innermost_cause(e),
                });
            }
        } else if let Some(e) = current.downcast_ref::<SseTransportError>() {
            match e {
                SseTransportError::AuthRequired { url, status, challenge } => {
                    return Some(UpstreamError::AuthRequired {
                        url: url.clone(),
                        status: *status,
                        challenge: challenge.clone(),
                    });
                }
                SseTransportError::Status { url, status, said } => {
                    return Some(http(http::Method::GET, url, *status, said));
                }
                SseTransportError::PostStatus { endpoint, status, body } => {
                    return Some(http(http::Method::POST, endpoint, *status, body));
                }
                SseTransportError::Connect { url, source } => {
                    return Some(UpstreamError::Unreachable {
                        url: url.clone(),
                        cause: innermost_cause(source),
                    });
                }
                _ => {}
            }
        } else if let Some(e) = current.downcast_ref::<AuthRequiredError>() {
            return Some(auth(StatusCode::UNAUTHORIZED, &e.www_authenticate_header));
        } else if let Some(e) = current.downcast_ref::<InsufficientScopeError>() {
            return Some(auth(StatusCode::FORBIDDEN, &e.www_authenticate_header));
        } else if let Some(e) = current.downcast_ref::<HttpStatusError>() {
            return status_code(e.status).map(|s| post(s, ""));
        }
    }
    None
}

fn status_code(code: u16) -> Option<StatusCode> {
    StatusCode::from_u16(code).ok()
}

/// The status and body rmcp writes into `UnexpectedServerResponse` for a 4xx it does not type
/// (`HTTP 404 Not Found: <body>`); `None` for its other unexpected responses.
pub(crate) fn status_in_response(text: &str) -> Option<(StatusCode, &str)> {
    let rest = text.strip_prefix("HTTP ")?;
    let digits = rest.get(..3)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) || rest[3..].starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let status = StatusCode::from_bytes(digits.as_bytes()).ok()?;
    let said = rest[3..].split_once(": ").map_or("", |(_, body)| body);
    Some((status, said))
}

/// Why `error` happened, as a person reads it: the innermost cause in its source chain, and for
/// an operating-system error the kind alone (`connection refused`, not `Connection refused (os
/// error 111)`).
pub(crate) fn innermost_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = error;
    while let Some(next) = deepest.source() {
        deepest = next;
    }
    match deepest.downcast_ref::<std::io::Error>() {
        Some(io) if io.raw_os_error().is_some() => io.kind().to_string(),
        _ => deepest.to_string(),
    }
}

/// What a 4xx to a GET (the legacy SSE transport's stream) usually means.
fn stream_hint(method: &http::Method, status: StatusCode) -> String {
    if method == http::Method::GET && status.is_client_error() {
        format!(", {NOT_AN_SSE_STREAM}")
    } else {
        String::new()
    }
}

fn exited_text(status: Option<&std::process::ExitStatus>) -> String {
    match status {
        Some(status) => format!("; the process ended ({status})"),
        None => String::new(),
    }
}

fn stderr_text(lines: &[String]) -> String {
    if lines.is_empty() {
        "; it wrote nothing to stderr".to_owned()
    } else {
        format!("; its last lines on stderr: {}", lines.join(" | "))
    }
}

#[cfg(test)]
mod tests;
