//! What went wrong in a client command, what the person can do about it, and the exit code.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | an error: the gateway is not reachable, a tool failed, a name is unknown, a check failed |
//! | 2 | a sign-in is needed: the gateway wants a token, or a server wants the person to sign in |
//! | 3 | a sign-in failed: the gateway refused the token, or signing in to a server did not complete |
//! | 64 | a command-line mistake (EX_USAGE): an unknown command or flag, a missing argument, a bad `--arg`, an unknown context |

use std::{fmt, process::ExitCode, time::Duration};

use crate::{agent::duration, connect::ConnectError};

/// The exit code of a run that went well.
pub(crate) const OK: u8 = 0;
/// The exit code of an error.
pub(crate) const ERROR: u8 = 1;
/// The exit code when a sign-in is needed.
pub(crate) const AUTH_REQUIRED: u8 = 2;
/// The exit code when a sign-in failed.
pub(crate) const AUTH_FAILED: u8 = 3;
/// The exit code of a command-line mistake (`EX_USAGE` of sysexits.h), clap's included.
pub(crate) const USAGE: u8 = 64;

/// Why a client command did not do what it was asked.
#[derive(Debug)]
pub(crate) enum CliError {
    /// The gateway could not be reached ([`crate::connect::unreachable_message`]).
    Unreachable(String),
    /// The gateway wants a bearer token and none was given.
    GatewayAuthRequired { endpoint: String },
    /// The gateway refused the bearer token given.
    GatewayAuthFailed { endpoint: String },
    /// A tool of a server the person has not signed in to.
    ServerAuthRequired {
        server: String,
        tool: String,
        url: Option<String>,
    },
    /// Signing in to a server did not complete.
    SignInFailed { server: String, reason: String },
    /// The gateway (or the tool behind it) answered an error.
    Failed { what: String, message: String },
    /// No answer within the `--timeout`.
    Timeout { what: String, after: Duration },
    /// The command line asks for something impossible (a bad `--arg`, an unknown context).
    Usage(String),
    /// The local setup cannot be used (the contexts file cannot be read or written, no context
    /// is current).
    Setup(String),
}

impl CliError {
    /// The process exit code for this error.
    pub(crate) fn code(&self) -> u8 {
        match self {
            Self::GatewayAuthRequired { .. } | Self::ServerAuthRequired { .. } => AUTH_REQUIRED,
            Self::GatewayAuthFailed { .. } | Self::SignInFailed { .. } => AUTH_FAILED,
            Self::Unreachable(_) | Self::Failed { .. } | Self::Timeout { .. } | Self::Setup(_) => ERROR,
            Self::Usage(_) => USAGE,
        }
    }

    /// The connection error as a client command reports it: a gateway wanting credentials
    /// needs a token (`token_given`: the one given was refused).
    pub(crate) fn from_connect(error: ConnectError, token_given: bool) -> Self {
        match error {
            ConnectError::AuthRequired { endpoint, .. } if token_given => Self::GatewayAuthFailed { endpoint },
            ConnectError::AuthRequired { endpoint, .. } => Self::GatewayAuthRequired { endpoint },
            unreachable @ ConnectError::Unreachable { .. } => Self::Unreachable(unreachable.to_string()),
        }
    }

    /// Prints the error on stderr and gives the exit code.
    pub(crate) fn report(&self) -> ExitCode {
        let mut stderr = std::io::stderr().lock();
        let _ = std::io::Write::write_fmt(&mut stderr, format_args!("Error: {self}\n"));
        ExitCode::from(self.code())
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreachable(message) => f.write_str(message),
            Self::GatewayAuthRequired { endpoint } => write!(
                f,
                "the muster gateway at {endpoint} requires a sign-in (its aggregator.oauth.server is on): pass an \
                 access token of an issuer it trusts with --token or MUSTER_TOKEN"
            ),
            Self::GatewayAuthFailed { endpoint } => write!(
                f,
                "the muster gateway at {endpoint} refused the token given with --token (or MUSTER_TOKEN): it may \
                 have expired, or be meant for another gateway; get a new one from an issuer the gateway trusts"
            ),
            Self::ServerAuthRequired { server, tool, url } => {
                write!(
                    f,
                    "{tool} needs you to sign in to {server}: run `gateway auth login --server {server}`"
                )?;
                if let Some(url) = url {
                    write!(f, " (or open {url})")?;
                }
                f.write_str(", then run this command again")
            }
            Self::SignInFailed { server, reason } => write!(f, "signing in to {server} failed: {reason}"),
            Self::Failed { what, message } => write!(f, "{what}: {message}"),
            Self::Timeout { what, after } => write!(
                f,
                "{what} got no answer within {} and was cancelled; pass a longer --timeout to wait longer",
                duration::format(*after)
            ),
            Self::Usage(message) | Self::Setup(message) => f.write_str(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_musters() {
        let endpoint = "http://127.0.0.1:1/mcp".to_owned();
        assert_eq!(CliError::Unreachable("x".into()).code(), 1);
        assert_eq!(
            CliError::Failed {
                what: "call".into(),
                message: "boom".into()
            }
            .code(),
            1
        );
        assert_eq!(
            CliError::GatewayAuthRequired {
                endpoint: endpoint.clone()
            }
            .code(),
            2
        );
        assert_eq!(CliError::GatewayAuthFailed { endpoint }.code(), 3);
        assert_eq!(
            CliError::SignInFailed {
                server: "s".into(),
                reason: "r".into()
            }
            .code(),
            3
        );
    }

    #[test]
    fn a_server_sign_in_names_the_login_command() {
        let e = CliError::ServerAuthRequired {
            server: "github".into(),
            tool: "x_github_me".into(),
            url: Some("http://gw/oauth/proxy/start?state=1".into()),
        };
        assert_eq!(e.code(), 2);
        let text = e.to_string();
        assert!(text.contains("gateway auth login --server github"), "{text}");
        assert!(text.contains("http://gw/oauth/proxy/start?state=1"), "{text}");
    }

    #[test]
    fn a_token_decides_between_required_and_failed() {
        let challenge = || ConnectError::AuthRequired {
            endpoint: "http://gw/mcp".into(),
            challenge: "Bearer".into(),
        };
        assert_eq!(CliError::from_connect(challenge(), false).code(), 2);
        assert_eq!(CliError::from_connect(challenge(), true).code(), 3);
        let refused = ConnectError::Unreachable {
            endpoint: "http://gw/mcp".into(),
            cause: "connection refused".into(),
        };
        let e = CliError::from_connect(refused, false);
        assert_eq!(e.code(), 1);
        assert!(e.to_string().contains("gateway serve --config-path"), "{e}");
    }
}
