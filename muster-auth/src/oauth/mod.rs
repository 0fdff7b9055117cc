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
//! Tokens, codes, verifiers and client secrets are [`Secret`](crate::Secret)s (or, between the
//! `oauth2` crate's calls, its own secret types, which are redacted the same way): no `Debug`,
//! `Display` or error message shows them.
//!
//! # What the `oauth2` crate does here, and what it does not
//!
//! [`oauth2`](https://docs.rs/oauth2/5) (default features off) does what it does well:
//!
//! - the PKCE S256 verifier and challenge, and the `state` (32 random bytes each, from `rand`'s
//!   thread-local CSPRNG);
//! - the authorization URL, with the `scope` and the `resource` of RFC 8707;
//! - the code exchange and the refresh: the form, the client authentication (HTTP Basic with
//!   the id and secret form-encoded first when the client has a secret, RFC 6749 §2.3.1; the
//!   `client_id` in the form when it has none) and reading the token response. A token
//!   response must be JSON (when it says its `Content-Type`) with a `token_type` (RFC 6749
//!   §5.1); what oauth2 finds wrong with one is an [`AuthError::BadDocument`] that never
//!   quotes the body.
//!
//! Its requests go through [`http::OAuthHttp`], never through oauth2's own `reqwest` feature
//! (which would pull a second reqwest, 0.12, next to the 0.13 rmcp uses): no redirect
//! followed, 15 seconds, 1 MiB, and a refusal turned into [`AuthError::OAuth`] with the
//! server's `error` and `error_description`, like every other request of this module.
//!
//! Kept as our own code, because oauth2 has none of it or cannot do it the way muster needs:
//!
//! - discovery (RFC 9728 protected resource metadata, RFC 8414 and OpenID Connect authorization
//!   server metadata) and RFC 7591 dynamic registration: not in oauth2;
//! - RFC 8693 token exchange (the crate's `exchange` module): oauth2 5 has no token-exchange grant. Its
//!   `BasicTokenResponse` would read the answer, but the exchange classifies a failure by status
//!   and error code itself (the caller's own or shared), reads only `access_token` and
//!   `expires_in`, and accepts an answer without `token_type`; the response type would refuse
//!   that and add nothing;
//! - RFC 7009 revocation ([`grant::Grant::revoke`]): oauth2's `revoke_token` refuses every
//!   revocation URL that is not `https` (`ConfigurationError::InsecureUrl`), with no way to
//!   allow another. Configured endpoints must be `https` (the CRD says so), but a discovered
//!   authorization server may be on a loopback `http` address (a local Dex or Keycloak, and the
//!   oidc-provider muster's tests sign in at), and logout must revoke there too. It is one form
//!   post through [`http::OAuthHttp`] with the same client authentication.

pub mod discovery;
pub mod error;
pub mod flow;
pub mod grant;
pub mod http;
pub mod registration;
pub mod store;

pub use error::{AuthError, Result};
