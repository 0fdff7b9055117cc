//! The MCP client connection to a running gateway, shared by the agent bridge (`agent/`) and
//! the client commands (`cli/`).
//!
//! [`connect`] opens one connection (streamable HTTP, the initialize handshake, bounded by
//! [`CONNECT_TIMEOUT`]), optionally with a bearer token, and classifies a failure the way a
//! person needs it: the gateway is not there ([`ConnectError::Unreachable`], with the root cause
//! such as "connection refused"), or it wants credentials ([`ConnectError::AuthRequired`], an
//! HTTP 401/403 with a challenge). [`unreachable_message`] is the one wording of "it is not
//! running": the endpoint, the cause and how to start the gateway.

use std::{fmt, time::Duration};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    service::{ClientInitializeError, RunningService},
    transport::{
        StreamableHttpClientTransport,
        streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError},
    },
};

use muster::gateway::upstream::progress::{ProgressHook, ProgressInOrder};

use crate::agent::duration;

/// Where the gateway serves MCP unless told otherwise.
pub(crate) const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:8090/mcp";

/// How long connecting to the gateway (the initialize handshake) may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Refuses an endpoint that is not an http(s) URL, naming it.
pub(crate) fn check_endpoint(endpoint: &str) -> Result<(), String> {
    let url = url::Url::parse(endpoint).map_err(|e| format!("invalid --endpoint {endpoint:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "invalid --endpoint {endpoint:?}: an http:// or https:// URL is needed"
        ));
    }
    Ok(())
}

/// Why there is no connection to the gateway.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The gateway could not be reached, or did not finish the handshake.
    Unreachable { endpoint: String, cause: String },
    /// The gateway asks for credentials (HTTP 401/403 with a `WWW-Authenticate` challenge).
    AuthRequired { endpoint: String, challenge: String },
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreachable { endpoint, cause } => f.write_str(&unreachable_message(endpoint, cause)),
            Self::AuthRequired { endpoint, challenge } => write!(
                f,
                "the muster gateway at {endpoint} requires authentication ({challenge})"
            ),
        }
    }
}

/// "Cannot reach the gateway": the endpoint, the cause, and how to start one or point at one.
pub(crate) fn unreachable_message(endpoint: &str, cause: &str) -> String {
    format!(
        "cannot reach the muster gateway at {endpoint}: {cause}. Is it running? Start it with \
         `gateway serve` (your config directory, else the built-in demo) or `gateway serve --config-path \
         <muster config dir>` (it serves {DEFAULT_ENDPOINT} unless told otherwise), or point --endpoint (or \
         MUSTER_ENDPOINT) at a running gateway."
    )
}

/// Connects `handler` to the gateway at `endpoint`, sending `bearer` (a token, without the
/// `Bearer ` prefix) as its `Authorization` on every request when given. Progress notifications
/// go to `progress` as they are read, before the result they precede
/// ([`ProgressInOrder`]), and then to `handler`.
pub(crate) async fn connect<H: ClientHandler, P: ProgressHook>(
    endpoint: &str,
    bearer: Option<&str>,
    handler: H,
    progress: P,
) -> Result<RunningService<RoleClient, H>, ConnectError> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(endpoint.to_owned());
    if let Some(token) = bearer {
        config = config.auth_header(token.to_owned());
    }
    let transport = ProgressInOrder::new(StreamableHttpClientTransport::from_config(config), progress);
    match tokio::time::timeout(CONNECT_TIMEOUT, handler.serve(transport)).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(classify(endpoint, &e)),
        Err(_) => Err(ConnectError::Unreachable {
            endpoint: endpoint.to_owned(),
            cause: format!(
                "no answer to the MCP handshake within {}",
                duration::format(CONNECT_TIMEOUT)
            ),
        }),
    }
}

fn classify(endpoint: &str, error: &ClientInitializeError) -> ConnectError {
    if let Some(challenge) = error.auth_challenge() {
        return ConnectError::AuthRequired {
            endpoint: endpoint.to_owned(),
            challenge: challenge.to_owned(),
        };
    }
    let cause = match error {
        ClientInitializeError::TransportError { error, .. } => reason(error),
        other => reason(other),
    };
    ConnectError::Unreachable {
        endpoint: endpoint.to_owned(),
        cause,
    }
}

/// Why `error` happened, as a person reads it: the kind of the I/O error at its root
/// ("connection refused"), else its deepest cause.
pub(crate) fn reason(error: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = error;
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind().to_string();
        }
        deepest = e;
        next = match e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            // rmcp does not name the HTTP client's error as the source: follow it by hand.
            Some(StreamableHttpError::Client(client)) => Some(client),
            _ => e.source(),
        };
    }
    deepest.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_endpoints_are_accepted() {
        assert!(check_endpoint("http://127.0.0.1:8090/mcp").is_ok());
        assert!(check_endpoint("https://muster.example/mcp").is_ok());
        assert!(check_endpoint("ftp://x/mcp").is_err());
        assert!(check_endpoint("not a url").is_err());
    }

    #[test]
    fn the_unreachable_message_names_the_endpoint_the_cause_and_how_to_start_the_gateway() {
        let text = unreachable_message("http://127.0.0.1:9/mcp", "connection refused");
        assert!(text.contains("http://127.0.0.1:9/mcp"), "{text}");
        assert!(text.contains("connection refused"), "{text}");
        assert!(text.contains("gateway serve --config-path"), "{text}");
        assert!(text.contains("MUSTER_ENDPOINT"), "{text}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable_with_its_cause() {
        // A port that was free a moment ago: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let endpoint = format!("http://127.0.0.1:{port}/mcp");
        match connect(&endpoint, None, (), ()).await {
            Err(ConnectError::Unreachable { endpoint: e, cause }) => {
                assert_eq!(e, endpoint);
                assert_eq!(cause, "connection refused");
            }
            other => panic!("expected unreachable, got {other:?}"),
        }
    }
}
