//! The header names of MCP's streamable-HTTP transport that both sides of the gateway read and
//! write: the session's id, and the id of the last event a resumed stream saw. Lowercase, so
//! that a lookup compares without folding case.
//!
//! ```
//! use muster_upstream::headers::SESSION_ID;
//!
//! let mut headers = http::HeaderMap::new();
//! headers.insert(SESSION_ID, http::HeaderValue::from_static("abc"));
//! assert_eq!(headers["Mcp-Session-Id"], "abc");
//! ```

use http::HeaderName;

/// `Mcp-Session-Id`: the session a request belongs to.
pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `Last-Event-Id`: the last event of a stream the client saw, to resume after it.
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
