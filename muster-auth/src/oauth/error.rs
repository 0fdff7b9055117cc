//! [`AuthError`]: why a discovery, registration, sign-in, refresh or revocation failed.
//!
//! Messages name what is wrong and where; they never contain a token, code or secret.

/// Why an OAuth step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A request could not be made or answered (connection refused, timeout, ...).
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// What happened.
        reason: String,
    },
    /// A document was not found or not what it should be.
    #[error("{what} at {url}: {reason}")]
    BadDocument {
        /// What was fetched, e.g. `protected resource metadata`.
        what: &'static str,
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server has no authorization server muster can find.
    #[error("no authorization server found for {resource}: {reason}")]
    NoAuthorizationServer {
        /// The protected resource.
        resource: String,
        /// What was tried.
        reason: String,
    },
    /// An issuer is not the one expected (metadata, RFC 9207 `iss`, a token's `iss`).
    #[error("issuer mismatch: expected {expected:?}, got {got:?}")]
    IssuerMismatch {
        /// The issuer expected.
        expected: String,
        /// The issuer received.
        got: String,
    },
    /// The authorization server answered with an OAuth error.
    #[error("{endpoint} refused the request: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    OAuth {
        /// Which endpoint, e.g. `the token endpoint`.
        endpoint: &'static str,
        /// The OAuth error code, e.g. `invalid_grant`.
        error: String,
        /// The server's description, when it gave one.
        description: Option<String>,
    },
    /// The sign-in this callback answers is unknown: never started, already completed, or
    /// expired.
    #[error("this sign-in link is unknown or expired; ask for a new one")]
    UnknownState,
    /// The callback carries no code.
    #[error("the authorization server sent no code: {0}")]
    MissingCode(String),
    /// The server cannot be used the way it is configured.
    #[error("{0}")]
    Unsupported(String),
}

impl AuthError {
    /// The OAuth error code, for an [`AuthError::OAuth`].
    pub fn oauth_error(&self) -> Option<&str> {
        match self {
            Self::OAuth { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The result type of the OAuth client.
pub type Result<T, E = AuthError> = std::result::Result<T, E>;
