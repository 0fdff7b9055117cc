//! # muster-auth
//!
//! Sign-in of people to downstream MCP servers, front-door protection of the gateway, and token
//! forwarding and exchange.
//!
//! This version provides the OAuth client the sign-in is built on ([`oauth`]): discovery of a
//! protected server's authorization server, client registration, PKCE sign-in links, the
//! callback, refresh and revocation, tested against a real authorization server
//! (`oidc-provider`). The gateway does not use it yet: sessions, the sign-in tools, per-session
//! connections and visibility, and elicitation are the next steps.
//!
//! ```
//! use muster_auth::oauth::discovery::Challenge;
//!
//! // A protected MCP server's 401 names its metadata document.
//! let header = r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource""#;
//! let bearer = &Challenge::parse(header)[0];
//! assert!(bearer.param("resource_metadata").is_some());
//! ```

pub mod jwt;
pub mod oauth;
pub mod resource;
mod secret;

pub use secret::{Secret, constant_time_eq};
