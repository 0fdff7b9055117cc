//! # muster-auth
//!
//! Sign-in of people to downstream MCP servers, front-door protection of the gateway, and token
//! forwarding and exchange.
//!
//! - [`oauth`]: the OAuth client people sign in to downstream servers with: discovery of a
//!   protected server's authorization server, client registration, PKCE sign-in links, the
//!   callback, refresh and revocation (the link, the code exchange and the refresh are the
//!   `oauth2` crate's; [`oauth`] says what is ours and why);
//! - [`jwt`]: bearer JWTs checked against trusted issuers (JWKS with rotation);
//! - [`resource`]: an MCP endpoint as a protected resource (the 401 challenge, RFC 9728
//!   metadata);
//! - [`exchange`]: RFC 8693 token exchange of a caller's token at another authorization server
//!   (Dex's connector-based exchange), the issued token's issuer checked, cached per key with one
//!   exchange at a time and failures classified as the caller's own or shared.
//!
//! - [`state`]: where a gateway keeps sign-in state (pending sign-ins, client registrations,
//!   grants, sign-in attempts, refreshes in flight, exchanged tokens): [`state::SignInStore`],
//!   in memory by default ([`state::MemorySignInStore`]), in Valkey for replicas
//!   (`state::ValkeyStore`, feature `valkey`), or in a store of the embedder's; over a store
//!   across the network, [`state::GrantFallback`] keeps a transport session's grant (and a
//!   person's whose refresh token does not rotate) usable and refreshable on the replica while
//!   that store is away.
//!
//! - [`issuers`]: one description per authorization server: the MCPServers that pin the same
//!   issuer share its sign-in, so they must describe it alike; the conflicts when they do not.
//!
//! The gateway composes them (`muster_gateway::auth`, its front door); all of it is tested
//! against a real authorization server (`oidc-provider`). Token forwarding needs nothing here:
//! the gateway sends the front door's validated bearer as it is.
//!
//! The front door is a tower layer over any axum route: without a valid bearer token of a
//! trusted issuer a request gets 401 and a challenge naming the RFC 9728 metadata, which the
//! resource serves itself.
//!
//! ```
//! use axum::{Router, body::Body, routing::post};
//! use http::{Request, StatusCode};
//! use muster_auth::{jwt::{JwtValidator, TrustedIssuer}, resource::{BearerAuthLayer, ProtectedResource}};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let resource = ProtectedResource::new("https://muster.example.com/mcp", vec!["https://idp.example.com".into()]);
//! let validator = JwtValidator::new(vec![
//!     TrustedIssuer::new("https://idp.example.com").with_audience("https://muster.example.com/mcp"),
//! ]);
//! let app = Router::new()
//!     .route("/mcp", post(|| async { "MCP" }))
//!     .layer(BearerAuthLayer::new(validator, &resource))
//!     .merge(resource.metadata_route());
//!
//! let anonymous = Request::post("/mcp").body(Body::empty()).unwrap();
//! let refused = app.clone().oneshot(anonymous).await.unwrap();
//! assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
//! assert_eq!(
//!     refused.headers()["www-authenticate"],
//!     r#"Bearer resource_metadata="https://muster.example.com/.well-known/oauth-protected-resource/mcp""#
//! );
//! let metadata = Request::get("/.well-known/oauth-protected-resource/mcp").body(Body::empty()).unwrap();
//! assert_eq!(app.oneshot(metadata).await.unwrap().status(), StatusCode::OK);
//! # }
//! ```
//!
//! Signing in to a downstream server starts from its 401:
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
pub mod issuers;
pub mod jwt;
pub mod oauth;
pub mod resource;
mod secret;
pub mod state;

pub use secret::{Secret, constant_time_eq};

/// The Rust blocks of this crate's `README.md` (its crates.io page), compiled and run as doc tests
/// so that the page stays true to the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
