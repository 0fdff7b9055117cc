//! The three answers to a call that needs a sign-in, as the official Python SDK (`mcp` 2.3.0,
//! `tests/clients/sign_in.py`) sees them: a 2026-07-28 client that declares URL elicitation is
//! asked to open the link (`input_required`) and its retry runs the call once the person signed
//! in; a 2025-11-25 client gets -32042 and `notifications/elicitation/complete`; a client that
//! declares no elicitation gets the `auth_required` result. The person's browser is played here
//! against a real authorization server (oidc-provider on loopback).

mod common;

use std::{path::PathBuf, process::Stdio, time::Duration};

use common::{oidc::OidcProvider, signin::SignInGateway};
use muster::core::config::{AggregatorConfig, McpClientConfig, OAuthServerConfig};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};

/// The Python SDK client of `tests/clients/sign_in.py`, and the events it reports.
struct PythonClient {
    child: tokio::process::Child,
    events: Lines<BufReader<tokio::process::ChildStdout>>,
}

impl PythonClient {
    fn spawn(url: &str, args: &[&str]) -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let python = root.join(".venv/bin/python");
        assert!(
            python.is_file(),
            "{} is missing: scripts/test creates it from requirements.txt",
            python.display()
        );
        let mut child = tokio::process::Command::new(python)
            .arg(root.join("tests/clients/sign_in.py"))
            .arg(url)
            .args(args)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the Python client");
        let events = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self { child, events }
    }

    /// The next event the client reports.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(90), self.events.next_line())
            .await
            .expect("the Python client reports within 90 s")
            .expect("reads its output");
        let Some(line) = line else {
            let status = self.child.wait().await;
            panic!("the Python client ended without reporting ({status:?}); its stderr is above");
        };
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not an event: {line:?}: {e}"))
    }

    /// The next event, which must be `event`.
    async fn expect(&mut self, event: &str) -> Value {
        let next = self.next().await;
        assert_eq!(next["event"], event, "{next}");
        next
    }
}

fn link_state(url: &str) -> &str {
    url.split("state=").nth(1).unwrap_or_default()
}

/// Completes the person's sign-in through `link`: the provider's pages, then the gateway's
/// callback, which must answer `status`.
async fn sign_in(idp: &OidcProvider, link: &str, login: &str) {
    let callback = idp.sign_in(link, login).await;
    let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
    assert_eq!(page.status(), 200, "{}", page.text().await.unwrap_or_default());
}

fn front_door_and_sign_in(base: String, issuer: &str) -> AggregatorConfig {
    AggregatorConfig::default()
        .with_oauth_server(OAuthServerConfig::trusting(base.clone(), vec![issuer.to_owned()]))
        .with_mcp_client(McpClientConfig::enabled_at(base))
}

#[tokio::test]
async fn a_2026_07_28_client_opens_the_link_and_its_retry_runs_the_call_once_signed_in() {
    let idp = OidcProvider::start();
    let issuer = idp.issuer().to_owned();
    let gw = SignInGateway::start(&idp, |base| front_door_and_sign_in(base, &issuer)).await;
    let mcp = format!("{}/mcp", gw.base);
    let token = idp.token_for(&mcp, "alice").await;
    let mut client = PythonClient::spawn(&mcp, &["--protocol", "2026-07-28", "--bearer", &token]);
    assert_eq!(client.expect("connected").await["protocol"], "2026-07-28");

    // Asked to open a link, not shown it as a result.
    let first = client.expect("elicitation").await;
    assert_eq!(first["mode"], "url", "{first}");
    let first_url = first["url"].as_str().expect("a link").to_owned();
    assert!(
        first_url.starts_with(&format!("{}/oauth/proxy/start?state=", gw.base)),
        "{first}"
    );
    assert_eq!(first["message"], "Sign in to protected to continue");

    // The person is refused at the provider: the waiting retry is answered with a new link.
    let refused = format!(
        "{}/oauth/proxy/callback?error=access_denied&state={}&iss={}",
        gw.base,
        link_state(&first_url),
        issuer
    );
    assert_eq!(reqwest::get(&refused).await.expect("answers").status(), 400);
    let second = client.expect("elicitation").await;
    let second_url = second["url"].as_str().expect("a link").to_owned();
    assert_ne!(second_url, first_url, "a refused sign-in's link is not offered again");

    // This time they sign in; the retry that waited runs the call.
    sign_in(&idp, &second_url, "alice").await;
    let result = client.expect("result").await;
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["text"].as_str().unwrap_or_default().contains("you are in"),
        "{result}"
    );
    assert!(
        !result.to_string().contains("oauth/proxy"),
        "no link reaches the model: {result}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_2026_07_28_client_that_declines_gets_a_tool_error_without_the_link() {
    let idp = OidcProvider::start();
    let issuer = idp.issuer().to_owned();
    let gw = SignInGateway::start(&idp, |base| front_door_and_sign_in(base, &issuer)).await;
    let mcp = format!("{}/mcp", gw.base);
    let token = idp.token_for(&mcp, "bob").await;
    let mut client = PythonClient::spawn(
        &mcp,
        &["--protocol", "2026-07-28", "--bearer", &token, "--consent", "decline"],
    );
    client.expect("connected").await;
    client.expect("elicitation").await;
    let result = client.expect("result").await;
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["structured"]["status"], "sign_in_declined", "{result}");
    assert_eq!(result["structured"]["server"], "protected", "{result}");
    assert!(!result.to_string().contains("oauth/proxy"), "{result}");
    gw.stop().await;
}

#[tokio::test]
async fn a_2025_11_25_client_gets_32042_then_the_completion_notice_and_its_retry_succeeds() {
    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base))
    })
    .await;
    let mcp = format!("{}/mcp", gw.base);
    let mut client = PythonClient::spawn(&mcp, &["--protocol", "2025-11-25", "--retries", "1"]);
    assert_eq!(client.expect("connected").await["protocol"], "2025-11-25");

    let required = client.expect("url_elicitation_required").await;
    let elicitation = &required["elicitations"][0];
    assert_eq!(elicitation["mode"], "url", "{required}");
    let url = elicitation["url"].as_str().expect("a link").to_owned();
    assert_eq!(elicitation["elicitationId"], link_state(&url), "{required}");

    sign_in(&idp, &url, "carol").await;
    let complete = client.expect("elicitation_complete").await;
    assert_eq!(complete["elicitation_id"], elicitation["elicitationId"]);
    let result = client.expect("result").await;
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["text"].as_str().unwrap_or_default().contains("you are in"),
        "{result}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn clients_that_declare_no_elicitation_get_the_auth_required_result() {
    let idp = OidcProvider::start();
    let issuer = idp.issuer().to_owned();
    let gw = SignInGateway::start(&idp, |base| front_door_and_sign_in(base, &issuer)).await;
    let mcp = format!("{}/mcp", gw.base);
    for protocol in ["2025-11-25", "2026-07-28"] {
        let token = idp.token_for(&mcp, "dave").await;
        let mut client = PythonClient::spawn(&mcp, &["--protocol", protocol, "--bearer", &token, "--consent", "none"]);
        assert_eq!(client.expect("connected").await["protocol"], protocol);
        let result = client.expect("result").await;
        assert_eq!(result["is_error"], true, "{protocol}: {result}");
        let answer = &result["structured"];
        assert_eq!(answer["status"], "auth_required", "{protocol}: {result}");
        assert_eq!(answer["server"], "protected");
        let link = answer["authUrl"].as_str().unwrap_or_default();
        assert!(
            link.starts_with(&format!("{}/oauth/proxy/start?state=", gw.base)),
            "{result}"
        );
        assert!(result["text"].as_str().unwrap_or_default().contains(link), "{result}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_caller_without_any_identity_is_not_given_a_shared_sign_in() {
    // No front door and the stateless protocol: every such caller would share one sign-in.
    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base))
    })
    .await;
    let mcp = format!("{}/mcp", gw.base);
    let mut client = PythonClient::spawn(&mcp, &["--protocol", "2026-07-28"]);
    client.expect("connected").await;
    let result = client.expect("result").await;
    assert_eq!(result["is_error"], true, "{result}");
    let text = result["text"].as_str().unwrap_or_default();
    assert!(text.contains("needs a session of your own"), "{result}");
    assert!(!text.contains("oauth/proxy"), "{result}");
    gw.stop().await;
}
