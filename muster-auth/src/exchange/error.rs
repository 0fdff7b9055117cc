//! [`ExchangeError`]: why a token exchange failed, classified by who shares the failure.

/// Why a token exchange failed.
///
/// The class decides what the gateway does with it: a failure of the caller's own token
/// ([`ExchangeError::Caller`]) is that caller's, while the others fail every caller alike
/// ([`ExchangeError::is_shared`]) and put the server in `Failed`, with
/// [`ExchangeError::ready_reason`] as its Ready reason. Messages name the endpoint and the OAuth
/// error; they never contain a token or a client secret. The type is `Clone`: callers waiting on
/// one exchange all get its error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The issued token's `iss` is not the expected issuer (a proxied token endpoint without
    /// `expectedIssuer`, or a token substitution).
    #[error("issuer mismatch: expected \"{expected}\", got \"{got}\"")]
    IssuerMismatch {
        /// The issuer expected (configured, or derived from the token endpoint).
        expected: String,
        /// The issuer the token names (empty when it names none).
        got: String,
    },
    /// The endpoint refused the caller's own token: `invalid_grant` (an expired or invalid
    /// subject token), a rejected audience or scope, another 4xx OAuth error about the request.
    #[error(
        "token exchange failed: {error}{}",
        description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
    )]
    Caller {
        /// The OAuth error code, e.g. `invalid_grant`.
        error: String,
        /// The server's description, when it gave one.
        description: Option<String>,
    },
    /// The token endpoint does not answer (connection refused, DNS, timeout), answers 5xx,
    /// a 404, or something that is not a token response.
    #[error("token exchange failed: {0}")]
    Endpoint(String),
    /// The endpoint refused the client: `invalid_client`, `unauthorized_client`, or a 401.
    #[error("token exchange failed: {0}")]
    Credentials(String),
    /// The endpoint does not know the connector.
    #[error("token exchange failed: {0}")]
    Connector(String),
}

impl ExchangeError {
    /// Whether every caller's exchange fails alike (everything but [`ExchangeError::Caller`]):
    /// the configuration or the endpoint is at fault, not the caller's token.
    pub fn is_shared(&self) -> bool {
        !matches!(self, Self::Caller { .. })
    }

    /// The Ready condition reason of a server whose exchange fails this way for every caller:
    /// `TokenExchangeEndpoint`, `TokenExchangeCredentials` or `TokenExchangeConnector`. `None`
    /// for a caller's failure and for an issuer mismatch (shared, but a configuration error of
    /// its own: the server reads plainly `Failed`).
    pub fn ready_reason(&self) -> Option<&'static str> {
        match self {
            Self::Endpoint(_) => Some("TokenExchangeEndpoint"),
            Self::Credentials(_) => Some("TokenExchangeCredentials"),
            Self::Connector(_) => Some("TokenExchangeConnector"),
            Self::IssuerMismatch { .. } | Self::Caller { .. } => None,
        }
    }
}
