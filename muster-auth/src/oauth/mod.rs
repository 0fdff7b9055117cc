//! The gateway as an OAuth 2.1 client of downstream servers' authorization servers.
//!
//! - [`discovery`]: from a 401 to the authorization server's metadata (RFC 9728, RFC 8414,
//!   OpenID Connect discovery), issuers checked exactly;
//! - [`registration`]: RFC 7591 dynamic registration, the Client ID Metadata Document, or a
//!   pre-registered client;
//! - [`flow`]: PKCE S256 authorization links with a `resource` (RFC 8707), states that expire and
//!   are used once, the callback with its RFC 9207 `iss` check, and the code exchange;
//! - [`grant`]: the resulting tokens, refreshed before expiry and revoked (RFC 7009);
//! - [`http`]: the HTTP client all of them use (no redirects, bounded time and size).
//!
//! Tokens, codes, verifiers and client secrets are [`Secret`](crate::Secret)s: no `Debug`,
//! `Display` or error message shows them.

pub mod discovery;
pub mod error;
pub mod flow;
pub mod grant;
pub mod http;
pub mod registration;
pub mod store;

pub use error::{AuthError, Result};
