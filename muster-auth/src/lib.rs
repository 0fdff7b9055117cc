//! # muster-auth
//!
//! Sign-in of people to downstream MCP servers (OAuth discovery, registration, PKCE, grants per
//! session or subject, refresh, revocation), front-door protection of the gateway, and token
//! forwarding and exchange.
//!
//! This crate is reserved in the workspace so the dependency direction (core <- auth <- gateway)
//! is fixed from the start; it has no public API yet. The gateway of this version connects only
//! to downstream servers that need no sign-in.
