//! `auth status|login|logout`: your sign-ins to the MCP servers that need one
//! (`core_auth_status`, `core_auth_login`, `core_auth_logout`).
//!
//! `login --all` asks for every link at once (`core_auth_status` with `auth_urls`), prints them
//! and waits for each; `logout --all` signs out of every server signed in with a grant of yours.
//!
//! `login --server S` prints the sign-in link and opens nothing: the person opens it in a
//! browser. Then it waits (a spinner on a terminal), asking `core_auth_status` every second,
//! until the gateway reports S connected for this session (exit 0), reports an error (exit 3) or
//! `--wait` runs out (exit 3); `--no-wait` prints the link and ends.
//!
//! The gateway keeps a sign-in for the session it was made in. A command without `--token` is
//! its own MCP session, which ends when the command does, so `login` waits while the person
//! signs in and says so; with the gateway's front door (`aggregator.oauth.server`) and a
//! `--token`, the session is the person's and the sign-in lasts across commands.

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    client::Client,
    error::{CliError, OK},
    note,
    output::{Column, Out, at},
};

/// How the gateway begins the refusal of a sign-in its authorization server made impossible.
const SIGN_IN_IMPOSSIBLE: &str = "sign-in is not possible";

/// How often `login` asks whether the sign-in completed.
const POLL: Duration = Duration::from_secs(1);

const COLUMNS: &[Column] = &[
    Column::new("SERVER", |r| at(r, "name")),
    Column::new("KIND", |r| at(r, "kind")),
    Column::new("STATUS", |r| at(r, "status")).state(),
    Column::new("GRANT SCOPE", |r| at(r, "grant_scope")).wide(),
    Column::new("ISSUER", |r| at(r, "issuer")).wide(),
    Column::new("EXPIRES", |r| at(r, "expires_at")).wide(),
    Column::new("ERROR", |r| at(r, "error")),
];

/// The servers of a `core_auth_status` answer, only `server` when given.
fn servers(answer: &Value, server: Option<&str>) -> Vec<Value> {
    answer
        .get("servers")
        .and_then(Value::as_array)
        .map(|all| {
            all.iter()
                .filter(|s| server.is_none_or(|name| s.get("name").and_then(Value::as_str) == Some(name)))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

async fn status_of(client: &Client) -> Result<Value, CliError> {
    client
        .core("core_auth_status", json!({}), "reading sign-in status")
        .await
}

/// `auth status [--server S]`.
pub(crate) async fn status(client: &Client, out: &Out, server: Option<&str>) -> Result<u8, CliError> {
    let answer = status_of(client).await?;
    let listed = servers(&answer, server);
    if let Some(name) = server
        && listed.is_empty()
    {
        return Err(CliError::Failed {
            what: "auth status".to_owned(),
            message: format!("no server {name} (see `gateway list mcpservers`)"),
        });
    }
    if !out.format.is_table() {
        let mut document = answer;
        document["servers"] = Value::Array(listed);
        out.data(&document);
        return Ok(OK);
    }
    if listed.is_empty() {
        note("No MCP servers.");
        return Ok(OK);
    }
    out.write_table(COLUMNS, &listed);
    for entry in &listed {
        if entry.get("auth_tool").is_some() {
            let name = at(entry, "name");
            note(&format!("Sign in to {name} with `gateway auth login --server {name}`"));
        }
    }
    Ok(OK)
}

/// `auth login --server S [--no-wait] [--wait D]`.
pub(crate) async fn login(
    client: &Client,
    out: &Out,
    server: &str,
    wait: Option<Duration>,
    token_given: bool,
) -> Result<u8, CliError> {
    let answer = client
        .core(
            "core_auth_login",
            json!({"server": server}),
            &format!("asking for a sign-in link to {server}"),
        )
        .await
        .map_err(|e| match e {
            // The authorization server could not be used: the sign-in failed. Anything else
            // (OAuth not configured, an unknown server) is an error of its own.
            CliError::Failed { message, .. } if message.starts_with(SIGN_IN_IMPOSSIBLE) => CliError::SignInFailed {
                server: server.to_owned(),
                reason: message,
            },
            other => other,
        })?;
    let Some(url) = answer.get("authUrl").and_then(Value::as_str).map(str::to_owned) else {
        // Already signed in, or nothing to sign in to: the gateway says which.
        if out.format.is_table() {
            out.line(&at(&answer, "message"));
        } else {
            out.data(&answer);
        }
        return Ok(OK);
    };
    if out.format.is_table() {
        out.line(&format!("Open this link in a browser to sign in to {server}:"));
        out.line(&format!("  {url}"));
    } else {
        out.data(&answer);
    }
    let Some(wait) = wait else {
        if !token_given {
            note(
                "Without --token this sign-in belongs to this command's session, which has ended: sign in from \
                 your MCP client instead, or leave out --no-wait to use it from here.",
            );
        }
        return Ok(OK);
    };
    let again = format!("gateway auth login --server {server}");
    wait_for_sign_ins(client, &[server.to_owned()], wait, token_given, &again).await?;
    if out.format.is_table() {
        out.line(&format!("Signed in to {server}."));
    }
    Ok(OK)
}

/// `auth login --all`: the sign-in links of every server waiting for one (`core_auth_status`
/// with `auth_urls`, one call), then, unless `wait` is `None`, waits until each is signed in.
pub(crate) async fn login_all(
    client: &Client,
    out: &Out,
    wait: Option<Duration>,
    token_given: bool,
) -> Result<u8, CliError> {
    let answer = client
        .core(
            "core_auth_status",
            json!({"auth_urls": true}),
            "asking for the sign-in links",
        )
        .await?;
    let all = servers(&answer, None);
    let pending: Vec<Value> = all.iter().filter(|s| s.get("auth_url").is_some()).cloned().collect();
    // A server the gateway could not issue a link for carries the reason.
    let refused: Vec<&Value> = all
        .iter()
        .filter(|s| s.get("auth_url").is_none() && s.get("auth_tool").is_some() && s.get("error").is_some())
        .collect();
    for server in &refused {
        note(&format!(
            "No sign-in link for {}: {}",
            at(server, "name"),
            at(server, "error")
        ));
    }
    if !out.format.is_table() {
        out.data(&json!({"servers": pending}));
    } else if !pending.is_empty() {
        out.line("Open each link in a browser to sign in:");
        for server in &pending {
            out.line(&format!("  {}: {}", at(server, "name"), at(server, "auth_url")));
        }
    }
    if pending.is_empty() {
        if let Some(first) = refused.first() {
            return Err(CliError::SignInFailed {
                server: at(first, "name"),
                reason: at(first, "error"),
            });
        }
        note("Nothing to sign in to: every server that needs a sign-in has one.");
        return Ok(OK);
    }
    let names: Vec<String> = pending.iter().map(|s| at(s, "name")).collect();
    let Some(wait) = wait else {
        return Ok(OK);
    };
    wait_for_sign_ins(client, &names, wait, token_given, "gateway auth login --all").await?;
    if out.format.is_table() {
        out.line(&format!("Signed in to {}.", names.join(", ")));
    }
    Ok(OK)
}

/// Waits up to `wait` until the gateway reports each of `servers` connected for this session,
/// noting each on stderr as it is; a server the gateway reports an error for, or one still
/// waiting at the end, fails the sign-in (`again` is the command to run again).
async fn wait_for_sign_ins(
    client: &Client,
    servers: &[String],
    wait: Duration,
    token_given: bool,
    again: &str,
) -> Result<(), CliError> {
    if !token_given {
        note(&format!(
            "Waiting for you to sign in to {} (up to {}). Without --token the gateway keeps a sign-in only for \
             this command's session.",
            servers.join(", "),
            crate::agent::duration::format(wait)
        ));
    }
    let mut left = servers.to_vec();
    let waited = tokio::time::timeout(wait, async {
        while !left.is_empty() {
            tokio::time::sleep(POLL).await;
            let answer = status_of(client).await?;
            let mut still = Vec::new();
            for name in &left {
                if settled(&answer, name)? {
                    note(&format!("Signed in to {name}."));
                } else {
                    still.push(name.clone());
                }
            }
            left = still;
        }
        Ok::<(), CliError>(())
    })
    .await;
    waited.unwrap_or_else(|_| {
        Err(CliError::SignInFailed {
            server: left.join(", "),
            reason: format!(
                "no sign-in completed within {}; run `{again}` again (--wait for longer)",
                crate::agent::duration::format(wait)
            ),
        })
    })
}

/// Whether `server` is signed in according to a `core_auth_status` answer: `true` when
/// connected, `false` while it waits, an error when the gateway reports one or lost it.
fn settled(answer: &Value, server: &str) -> Result<bool, CliError> {
    let Some(entry) = servers(answer, Some(server)).into_iter().next() else {
        return Err(CliError::SignInFailed {
            server: server.to_owned(),
            reason: "the gateway no longer has this server".to_owned(),
        });
    };
    if entry.get("status").and_then(Value::as_str) == Some("connected") {
        return Ok(true);
    }
    if let Some(error) = entry.get("error").and_then(Value::as_str) {
        return Err(CliError::SignInFailed {
            server: server.to_owned(),
            reason: format!("{error}; run `gateway auth login --server {server}` again"),
        });
    }
    Ok(false)
}

/// `auth logout --server S`.
pub(crate) async fn logout(client: &Client, out: &Out, server: &str) -> Result<u8, CliError> {
    let answer = client
        .core(
            "core_auth_logout",
            json!({"server": server}),
            &format!("signing out of {server}"),
        )
        .await?;
    if out.format.is_table() {
        out.line(&at(&answer, "message"));
    } else {
        out.data(&answer);
    }
    Ok(OK)
}

/// `auth logout --all`: signs out of every server you hold a sign-in of your own for.
pub(crate) async fn logout_all(client: &Client, out: &Out) -> Result<u8, CliError> {
    let answer = status_of(client).await?;
    let signed_in: Vec<String> = servers(&answer, None)
        .iter()
        .filter(|s| {
            s.get("kind").and_then(Value::as_str) == Some("grant")
                && s.get("status").and_then(Value::as_str) == Some("connected")
        })
        .map(|s| at(s, "name"))
        .collect();
    if signed_in.is_empty() {
        note("Not signed in to any server.");
        if !out.format.is_table() {
            out.data(&json!({"servers": []}));
        }
        return Ok(OK);
    }
    let mut answers = Vec::new();
    for server in &signed_in {
        let answer = client
            .core(
                "core_auth_logout",
                json!({"server": server}),
                &format!("signing out of {server}"),
            )
            .await?;
        if out.format.is_table() {
            out.line(&at(&answer, "message"));
        }
        answers.push(json!({"name": server, "answer": answer}));
    }
    if !out.format.is_table() {
        out.data(&json!({"servers": answers}));
    }
    Ok(OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_narrows_to_the_server_asked_for() {
        let answer =
            json!({"servers": [{"name": "a", "status": "connected"}, {"name": "b", "status": "auth_required"}]});
        assert_eq!(servers(&answer, None).len(), 2);
        assert_eq!(
            servers(&answer, Some("b")),
            vec![json!({"name": "b", "status": "auth_required"})]
        );
        assert!(servers(&answer, Some("c")).is_empty());
    }

    #[test]
    fn a_sign_in_is_settled_when_connected_and_failed_on_an_error() {
        let answer = json!({"servers": [
            {"name": "a", "status": "connected"},
            {"name": "b", "status": "auth_required"},
            {"name": "c", "status": "auth_required", "error": "the authorization server refused the code"}
        ]});
        assert!(matches!(settled(&answer, "a"), Ok(true)));
        assert!(matches!(settled(&answer, "b"), Ok(false)));
        assert!(matches!(settled(&answer, "c"), Err(CliError::SignInFailed { .. })));
        assert!(matches!(settled(&answer, "gone"), Err(CliError::SignInFailed { .. })));
    }
}
