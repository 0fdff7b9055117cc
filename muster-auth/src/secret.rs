//! [`Secret`]: a token, code or client secret that never shows in logs, errors or `Debug`.

use std::fmt;

use subtle::ConstantTimeEq;

/// A secret string. `Debug` and `Display` print `[redacted]`; read it with [`Secret::expose`]
/// only where it is sent; compare with [`Secret::matches`], which takes the same time whatever
/// the contents.
///
/// ```
/// use muster_auth::Secret;
///
/// let token = Secret::new("eyJhbGciOi...");
/// assert_eq!(format!("{token:?} {token}"), "Secret([redacted]) [redacted]");
/// assert!(token.matches("eyJhbGciOi..."));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `other` is this secret, compared in constant time.
    pub fn matches(&self, other: &str) -> bool {
        self.0.as_bytes().ct_eq(other.as_bytes()).into()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Whether two strings are equal, compared in constant time (issuers, states).
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}
