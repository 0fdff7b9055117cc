//! # muster-auth
//!
//! Sign-in of people to downstream MCP servers, front-door protection of the gateway, and token
//! forwarding and exchange.
//!
//! - [`oauth`]: the OAuth client people sign in to downstream servers with: discovery of a
//!   protected server's authorization server, client registration, PKCE sign-in links, the
//!   callback, refresh and revocation;
//! - [`jwt`]: bearer JWTs checked against trusted issuers (JWKS with rotation);
//! - [`resource`]: an MCP endpoint as a protected resource (the 401 challenge, RFC 9728
//!   metadata);
//! - [`exchange`]: RFC 8693 token exchange of a caller's token at another authorization server
//!   (Dex's connector-based exchange), the issued token's issuer checked, cached per key with one
//!   exchange at a time and failures classified as the caller's own or shared.
//!
//! The gateway composes them (`muster_gateway::auth`, its front door); all of it is tested
//! against a real authorization server (`oidc-provider`). Token forwarding needs nothing here:
//! the gateway sends the front door's validated bearer as it is.
//!
//! ```
//! use muster_auth::oauth::discovery::Challenge;
//!
//! // A protected MCP server's 401 names its metadata document.
//! let header = r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource""#;
//! let bearer = &Challenge::parse(header)[0];
//! assert!(bearer.param("resource_metadata").is_some());
//! ```

pub mod exchange;
pub mod jwt;
pub mod oauth;
pub mod resource;
mod secret;

pub use secret::{Secret, constant_time_eq};
