//! `aggregator.limits`: how much one request, one session and one downstream server may ask of
//! the gateway at once, and how long a shutdown waits for calls in flight.
//!
//! Every limit has a default that a single agent never meets; a deployment in front of many
//! agents tunes them. A request over a limit is refused with an error that names the limit's
//! key, and the gateway keeps serving everyone else.
//!
//! ```
//! use muster_core::config::{Limits, MusterConfig};
//!
//! let config: MusterConfig = serde_json::from_value(serde_json::json!({
//!     "aggregator": { "limits": { "maxConcurrentCallsPerSession": 4, "queueTimeoutSeconds": 5 } }
//! }))?;
//! let limits = &config.aggregator.limits;
//! assert_eq!(limits.max_concurrent_calls_per_session, 4);
//! assert_eq!(limits.max_json_depth, Limits::default().max_json_depth);
//! # Ok::<(), serde_json::Error>(())
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::crd::ValidationErrors;

/// `aggregator.limits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct Limits {
    /// The largest request body `/mcp` reads, in bytes; a larger one gets 413. Default 4 MiB.
    pub max_request_body_bytes: usize,
    /// The largest request head (request line and headers) an HTTP/1.1 connection reads, in
    /// bytes; a larger one gets 431 and the connection closes. It is also the most a connection's
    /// read buffer grows to: the default, 8 KiB (as Tomcat's and Jetty's), keeps each idle
    /// connection small. Raise it for bearer tokens over about 7 KB. At least 8192.
    pub max_request_head_bytes: usize,
    /// MCP sessions the gateway keeps open at once over HTTP; an `initialize` beyond them gets
    /// 503 with a JSON-RPC error naming this limit (sessions end when closed, or after five idle
    /// minutes). Bounds what a client opening sessions in a loop can take. Default 10000.
    pub max_sessions: usize,
    /// The deepest nesting of arrays and objects a request may have; a deeper one gets 400
    /// with a JSON-RPC "invalid request" error. Default 64.
    pub max_json_depth: usize,
    /// Calls (`tools/call`) one session may have in flight; more wait in the queue. Default 32.
    pub max_concurrent_calls_per_session: usize,
    /// Requests (calls, reads, prompts) the gateway sends one downstream server at once; more
    /// wait in the queue. Default 64.
    pub max_concurrent_calls_per_server: usize,
    /// Calls that may wait for one session's or one server's slot; the next is refused at once
    /// as busy. Default 256.
    pub max_queued_calls: usize,
    /// How long a call waits in the queue before it is refused as busy, in seconds. Default 30.
    pub queue_timeout_seconds: u64,
    /// How long a shutdown lets calls in flight finish before it ends them, in seconds.
    /// Default 30.
    pub shutdown_timeout_seconds: u64,
}

/// Default of `aggregator.limits.maxRequestBodyBytes`.
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default (and least value) of `aggregator.limits.maxRequestHeadBytes`.
pub const DEFAULT_MAX_REQUEST_HEAD_BYTES: usize = 8192;
/// Default of `aggregator.limits.maxJsonDepth`.
pub const DEFAULT_MAX_JSON_DEPTH: usize = 64;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_body_bytes: DEFAULT_MAX_REQUEST_BODY_BYTES,
            max_request_head_bytes: DEFAULT_MAX_REQUEST_HEAD_BYTES,
            max_sessions: 10_000,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_concurrent_calls_per_session: 32,
            max_concurrent_calls_per_server: 64,
            max_queued_calls: 256,
            queue_timeout_seconds: 30,
            shutdown_timeout_seconds: 30,
        }
    }
}

impl Limits {
    /// Sets `maxRequestBodyBytes`.
    pub fn with_max_request_body_bytes(mut self, bytes: usize) -> Self {
        self.max_request_body_bytes = bytes;
        self
    }

    /// Sets `maxRequestHeadBytes`.
    pub fn with_max_request_head_bytes(mut self, bytes: usize) -> Self {
        self.max_request_head_bytes = bytes;
        self
    }

    /// Sets `maxSessions`.
    pub fn with_max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions;
        self
    }

    /// Sets `maxJsonDepth`.
    pub fn with_max_json_depth(mut self, depth: usize) -> Self {
        self.max_json_depth = depth;
        self
    }

    /// Sets `maxConcurrentCallsPerSession`.
    pub fn with_max_concurrent_calls_per_session(mut self, calls: usize) -> Self {
        self.max_concurrent_calls_per_session = calls;
        self
    }

    /// Sets `maxConcurrentCallsPerServer`.
    pub fn with_max_concurrent_calls_per_server(mut self, calls: usize) -> Self {
        self.max_concurrent_calls_per_server = calls;
        self
    }

    /// Sets `maxQueuedCalls`.
    pub fn with_max_queued_calls(mut self, calls: usize) -> Self {
        self.max_queued_calls = calls;
        self
    }

    /// Sets `queueTimeoutSeconds`.
    pub fn with_queue_timeout_seconds(mut self, seconds: u64) -> Self {
        self.queue_timeout_seconds = seconds;
        self
    }

    /// Sets `shutdownTimeoutSeconds`.
    pub fn with_shutdown_timeout_seconds(mut self, seconds: u64) -> Self {
        self.shutdown_timeout_seconds = seconds;
        self
    }

    pub(super) fn validate_into(&self, errors: &mut ValidationErrors) {
        let positive = [
            ("maxRequestBodyBytes", self.max_request_body_bytes),
            ("maxJsonDepth", self.max_json_depth),
            ("maxSessions", self.max_sessions),
            ("maxConcurrentCallsPerSession", self.max_concurrent_calls_per_session),
            ("maxConcurrentCallsPerServer", self.max_concurrent_calls_per_server),
        ];
        for (key, value) in positive {
            if value == 0 {
                errors.push(
                    format!("aggregator.limits.{key}"),
                    format!("aggregator.limits.{key} must be at least 1"),
                );
            }
        }
        if self.max_request_head_bytes < DEFAULT_MAX_REQUEST_HEAD_BYTES {
            errors.push(
                "aggregator.limits.maxRequestHeadBytes",
                format!(
                    "aggregator.limits.maxRequestHeadBytes must be at least {DEFAULT_MAX_REQUEST_HEAD_BYTES} (the \
                     smallest read buffer of an HTTP/1.1 connection), not {}",
                    self.max_request_head_bytes
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_camel_case_and_default_when_absent() {
        let limits: Limits = serde_json::from_value(serde_json::json!({
            "maxJsonDepth": 8,
            "maxQueuedCalls": 0
        }))
        .expect("valid limits");
        assert_eq!(limits.max_json_depth, 8);
        assert_eq!(limits.max_queued_calls, 0);
        assert_eq!(limits.max_request_body_bytes, DEFAULT_MAX_REQUEST_BODY_BYTES);
    }

    #[test]
    fn a_zero_limit_that_would_refuse_everything_is_named() {
        let mut errors = ValidationErrors::new();
        Limits::default()
            .with_max_json_depth(0)
            .with_max_concurrent_calls_per_server(0)
            .with_max_request_head_bytes(4096)
            .validate_into(&mut errors);
        let text = errors.into_result().expect_err("zero limits are refused").to_string();
        assert!(
            text.contains("aggregator.limits.maxJsonDepth must be at least 1"),
            "{text}"
        );
        assert!(
            text.contains("aggregator.limits.maxConcurrentCallsPerServer must be at least 1"),
            "{text}"
        );
        assert!(
            text.contains("aggregator.limits.maxRequestHeadBytes must be at least 8192") && text.contains("not 4096"),
            "{text}"
        );
        let mut errors = ValidationErrors::new();
        Limits::default()
            .with_max_request_head_bytes(8192)
            .validate_into(&mut errors);
        assert!(errors.into_result().is_ok(), "8192 is allowed");
    }
}
