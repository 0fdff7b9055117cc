//! What the gateway keeps of people's sign-ins, and what it tells them: the `auth://status`
//! resource and `core_auth_status` (with `auth_urls`), `toolset_requiring_auth`, grants kept
//! encrypted on disk across a restart, and the sessions that ended being forgotten. Against a
//! real authorization server (oidc-provider on loopback).

mod common;

use std::{os::unix::fs::PermissionsExt, sync::Arc, time::Duration};

use common::{call_meta, envelope, oidc::OidcProvider, signin::SignInGateway, text, tool_names};
use muster::core::config::{AggregatorConfig, GrantStoreConfig, McpClientConfig, OAuthServerConfig};
use muster::gateway::registry::{SessionObserver, SessionReaping};
use rmcp::{RoleClient, model::ReadResourceRequestParams, service::RunningService};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

async fn client(url: &str, headers: &[(&'static str, String)], bearer: Option<String>) -> Client {
    let headers: Vec<(&'static str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    common::connect(url, &headers, bearer).await
}

/// The document a core tool answered through call_tool.
async fn core(client: &Client, name: &str, args: Value) -> Value {
    let result = call_meta(client, "call_tool", json!({"name": name, "arguments": args})).await;
    let body = envelope(&result)["content"][0]["text"]
        .as_str()
        .unwrap_or("null")
        .to_owned();
    serde_json::from_str(&body).unwrap_or(Value::String(body))
}

async fn auth_status_resource(client: &Client) -> Value {
    let read = client
        .read_resource(ReadResourceRequestParams::new("auth://status"))
        .await
        .expect("auth://status reads");
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("a text resource: {read:?}");
    };
    serde_json::from_str(text).expect("JSON")
}

async fn tools_of(client: &Client) -> Vec<String> {
    let page = call_meta(client, "list_tools", json!({"limit": 200})).await;
    tool_names(&serde_json::from_str(&text(&page)).unwrap_or(Value::Null))
}

async fn sign_in(idp: &OidcProvider, link: &str, login: &str) {
    let callback = idp.sign_in(link, login).await;
    let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
    assert_eq!(page.status(), 200, "{}", page.text().await.unwrap_or_default());
}

#[tokio::test]
async fn the_status_resource_and_tool_say_what_each_server_needs_and_issue_links_on_request() {
    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base))
    })
    .await;
    let mcp = format!("{}/mcp", gw.base);
    let alice = client(&mcp, &[], None).await;

    let listed = alice.list_resources(None).await.expect("resources list");
    assert!(listed.resources.iter().any(|r| r.uri == "auth://status"), "{listed:?}");
    let before = auth_status_resource(&alice).await;
    let entry = &before["servers"][0];
    assert_eq!(entry["name"], "protected", "{before}");
    assert_eq!(entry["kind"], "grant");
    assert_eq!(entry["grant_scope"], "session");
    assert_eq!(entry["status"], "auth_required");
    assert_eq!(entry["auth_tool"], "core_auth_login");
    assert_eq!(entry["suspended"], false);
    assert!(entry.get("auth_url").is_none(), "links only on request: {before}");

    let with_links = core(&alice, "core_auth_status", json!({"auth_urls": true})).await;
    let link = with_links["servers"][0]["auth_url"]
        .as_str()
        .unwrap_or_else(|| panic!("a link: {with_links}"))
        .to_owned();
    assert!(
        link.starts_with(&format!("{}/oauth/proxy/start?state=", gw.base)),
        "{link}"
    );
    // The same link core_auth_login gives.
    let login = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert_eq!(login["authUrl"], link.as_str(), "{login}");

    sign_in(&idp, &link, "alice").await;
    let after = auth_status_resource(&alice).await;
    let entry = &after["servers"][0];
    assert_eq!(entry["status"], "connected", "{after}");
    assert_eq!(entry["issuer"], idp.issuer());
    assert!(entry["expires_at"].is_string(), "{after}");
    assert!(entry.get("auth_tool").is_none(), "{after}");
    // Another session's document is its own.
    let bob = client(&mcp, &[], None).await;
    assert_eq!(
        auth_status_resource(&bob).await["servers"][0]["status"],
        "auth_required"
    );

    for c in [alice, bob] {
        let _ = c.cancel().await;
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_toolset_names_the_servers_a_sign_in_would_unlock_inside_it() {
    let idp = OidcProvider::start();
    let gw = SignInGateway::start(&idp, |base| {
        AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base))
    })
    .await;
    let mcp = format!("{}/mcp", gw.base);
    for (toolset, expected) in [
        ("server:protected", true),
        ("tool:x_protected_whoami", true),
        ("preset:read-only", true),
        ("server:elsewhere", false),
        ("tool:x_other_thing", false),
    ] {
        let c = client(&mcp, &[("x-muster-toolset", toolset.to_owned())], None).await;
        for meta in ["list_tools", "filter_tools"] {
            let page: Value = serde_json::from_str(&text(&call_meta(&c, meta, json!({})).await)).unwrap_or_default();
            let named: Vec<&str> = page["toolset_requiring_auth"]
                .as_array()
                .map(|a| a.iter().filter_map(|h| h["name"].as_str()).collect())
                .unwrap_or_default();
            assert_eq!(named.contains(&"protected"), expected, "{toolset} {meta}: {page}");
            // servers_requiring_auth is not narrowed by the toolset.
            assert_eq!(
                page["servers_requiring_auth"][0]["name"], "protected",
                "{toolset}: {page}"
            );
        }
        let _ = c.cancel().await;
    }
    let plain = client(&mcp, &[], None).await;
    let page: Value =
        serde_json::from_str(&text(&call_meta(&plain, "list_tools", json!({})).await)).unwrap_or_default();
    assert!(page.get("toolset_requiring_auth").is_none(), "{page}");
    let _ = plain.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn a_principals_grant_is_kept_encrypted_on_disk_and_survives_a_restart() {
    let idp = OidcProvider::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("grant.key");
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("random");
    use base64::Engine;
    std::fs::write(&key_file, base64::engine::general_purpose::STANDARD.encode(key)).expect("write key");
    let store = dir.path().join("grants");
    let issuer = idp.issuer().to_owned();
    let configure = |base: String| {
        AggregatorConfig::default()
            .with_oauth_server(OAuthServerConfig::trusting(base.clone(), vec![issuer.clone()]))
            .with_mcp_client(
                McpClientConfig::enabled_at(base).with_grant_store(GrantStoreConfig::new(
                    store.to_string_lossy(),
                    key_file.to_string_lossy(),
                )),
            )
    };
    let gw = SignInGateway::start(&idp, configure).await;
    let mcp = format!("{}/mcp", gw.base);
    let dana = client(&mcp, &[], Some(idp.token_for(&mcp, "dana").await)).await;
    let login = core(&dana, "core_auth_login", json!({"server": "protected"})).await;
    sign_in(&idp, login["authUrl"].as_str().expect("a link"), "dana").await;
    assert!(tools_of(&dana).await.contains(&"x_protected_whoami".to_owned()));

    let files: Vec<_> = std::fs::read_dir(&store)
        .expect("the store exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "grant"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let mode = std::fs::metadata(&files[0]).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        std::fs::metadata(&store).expect("metadata").permissions().mode() & 0o777,
        0o700
    );
    let bytes = std::fs::read(&files[0]).expect("read");
    // Every JWT starts with the base64 of `{"`; the grant's tokens are JWTs.
    assert!(
        !bytes.windows(3).any(|w| w == b"eyJ"),
        "a token is readable in the file"
    );
    let _ = dana.cancel().await;

    // After a restart the same person (a new token of the same client) is signed in still.
    let gw = gw.restart(configure).await;
    let mcp = format!("{}/mcp", gw.base);
    let dana = client(&mcp, &[], Some(idp.token_for(&mcp, "dana").await)).await;
    assert!(tools_of(&dana).await.contains(&"x_protected_whoami".to_owned()));
    assert_eq!(core(&dana, "x_protected_whoami", json!({})).await, json!("you are in"));
    // Someone else is not.
    let erin = client(&mcp, &[], Some(idp.token_for(&mcp, "erin").await)).await;
    assert!(!tools_of(&erin).await.iter().any(|t| t.starts_with("x_protected_")));

    // Signing out removes the file.
    let out = core(&dana, "core_auth_logout", json!({"server": "protected"})).await;
    assert_eq!(out["signed_out"], true, "{out}");
    let left = std::fs::read_dir(&store)
        .expect("the store exists")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "grant"))
        .count();
    assert_eq!(left, 0);

    for c in [dana, erin] {
        let _ = c.cancel().await;
    }
    gw.stop().await;
}

#[tokio::test]
async fn an_ended_session_is_forgotten_with_its_grants() {
    let idp = OidcProvider::start();
    let reaping = SessionReaping {
        interval: Duration::from_millis(100),
        idle: Duration::from_secs(3600),
    };
    let gw = SignInGateway::start_reaping(
        &idp,
        reaping,
        |_| {},
        |base| AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base)),
    )
    .await;
    let forgotten = Arc::new(Forgotten::default());
    gw.gateway.registry().observe_sessions(Arc::clone(&forgotten) as _);
    let mcp = format!("{}/mcp", gw.base);
    let carol = client(&mcp, &[], None).await;
    let login = core(&carol, "core_auth_login", json!({"server": "protected"})).await;
    sign_in(&idp, login["authUrl"].as_str().expect("a link"), "carol").await;
    assert!(tools_of(&carol).await.contains(&"x_protected_whoami".to_owned()));

    // A live session stays, reap after reap.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(forgotten.sessions().is_empty(), "a live session stays");
    assert!(tools_of(&carol).await.contains(&"x_protected_whoami".to_owned()));

    let _ = carol.cancel().await;
    let reaped = common::eventually(10, || {
        let forgotten = Arc::clone(&forgotten);
        async move { !forgotten.sessions().is_empty() }
    })
    .await;
    assert!(reaped, "the ended session was reaped");
    let sessions = forgotten.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(sessions[0].1, "forgotten as ended, its grants with it: {sessions:?}");
    gw.stop().await;
}

/// The sessions the registry forgot, and whether each ended.
#[derive(Debug, Default)]
struct Forgotten(std::sync::Mutex<Vec<(String, bool)>>);

impl Forgotten {
    fn sessions(&self) -> Vec<(String, bool)> {
        self.0.lock().expect("lock").clone()
    }
}

impl SessionObserver for Forgotten {
    fn session_forgotten(&self, session: &muster::core::SessionId, ended: bool) {
        self.0.lock().expect("lock").push((session.as_str().to_owned(), ended));
    }
}

fn pinned(issuer: &str, grant_scope: &str) -> muster::core::crd::MCPServerAuth {
    serde_json::from_value(json!({"authorizationServer": {"issuer": issuer, "grantScope": grant_scope}}))
        .expect("an auth block")
}

#[tokio::test]
async fn servers_naming_one_issuer_must_describe_it_alike() {
    let idp = OidcProvider::start();
    let issuer = idp.issuer().to_owned();
    let gw = SignInGateway::start_defining(
        &idp,
        |server| server.spec.auth = Some(pinned(&issuer, "session")),
        |base| AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base)),
    )
    .await;
    let registry = std::sync::Arc::clone(gw.gateway.registry());
    let state = |name: &'static str| {
        let registry = std::sync::Arc::clone(&registry);
        move || registry.server(name).map(|s| s.runtime)
    };
    assert_eq!(
        state("protected")().map(|r| r.state),
        Some(muster::core::crd::MCPServerState::AuthRequired)
    );
    let mcp = format!("{}/mcp", gw.base);
    let alice = client(&mcp, &[], None).await;

    // A second server pins the same issuer with grantScope: subject: its description is used
    // (it pins something), so `protected` is refused, naming it.
    let protected_url = registry
        .server("protected")
        .and_then(|s| s.definition.spec.url)
        .expect("a url");
    let mut wiki = common::remote("wiki", &protected_url);
    wiki.spec.auth = Some(pinned(&issuer, "subject"));
    registry.apply_server(wiki);
    let refused = common::eventually(10, || {
        let runtime = state("protected")();
        async move { runtime.is_some_and(|r| r.conflicts_with.as_deref() == Some("wiki")) }
    })
    .await;
    assert!(
        refused,
        "protected is refused for the conflict: {:?}",
        state("protected")()
    );
    let status = registry
        .server("protected")
        .map(|s| s.runtime.to_status(false))
        .expect("status");
    assert_eq!(status.conditions[0].reason, "AuthorizationServerConflict");
    assert!(
        status.conditions[0].message.contains("wiki"),
        "{:?}",
        status.conditions[0]
    );
    let login = call_meta(
        &alice,
        "call_tool",
        json!({"name": "core_auth_login", "arguments": {"server": "protected"}}),
    )
    .await;
    assert_eq!(login.is_error, Some(true));
    let answer = text(&login);
    assert!(
        answer.contains("AuthorizationServerConflict") && answer.contains("wiki"),
        "{answer}"
    );
    let doc = auth_status_resource(&alice).await;
    let entry = doc["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|e| e["name"] == "protected"))
        .cloned()
        .unwrap_or_default();
    assert!(
        entry["error"]
            .as_str()
            .unwrap_or_default()
            .contains("AuthorizationServerConflict"),
        "{doc}"
    );
    // The server whose description is used signs people in.
    let wiki_login = core(&alice, "core_auth_login", json!({"server": "wiki"})).await;
    assert!(wiki_login["authUrl"].is_string(), "{wiki_login}");

    // When the other server goes, `protected` waits for sign-ins again.
    registry.remove_server("wiki");
    let back = common::eventually(10, || {
        let runtime = state("protected")();
        async move {
            runtime.is_some_and(|r| {
                r.state == muster::core::crd::MCPServerState::AuthRequired && r.conflicts_with.is_none()
            })
        }
    })
    .await;
    assert!(back, "{:?}", state("protected")());
    let login = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert!(login["authUrl"].is_string(), "{login}");
    let _ = alice.cancel().await;
    gw.stop().await;
}

#[tokio::test]
async fn a_subject_grant_follows_the_person_into_every_session_until_they_sign_out() {
    let idp = OidcProvider::start();
    let issuer = idp.issuer().to_owned();
    let gw = SignInGateway::start_defining(
        &idp,
        |server| server.spec.auth = Some(pinned(&issuer, "subject")),
        |base| {
            AggregatorConfig::default()
                .with_oauth_server(OAuthServerConfig::trusting(base.clone(), vec![issuer.clone()]))
                .with_mcp_client(McpClientConfig::enabled_at(base))
        },
    )
    .await;
    let mcp = format!("{}/mcp", gw.base);
    // Frank through two applications (two sessions: another authorized party), and Grace.
    let frank_chat = client(&mcp, &[], Some(idp.token_for(&mcp, "frank").await)).await;
    let frank_ide = client(&mcp, &[], Some(idp.token_for_new_client(&mcp, "frank").await)).await;
    let grace = client(&mcp, &[], Some(idp.token_for_new_client(&mcp, "grace").await)).await;

    // A workflow of the server's tool is available to a session that can call the tool.
    let workflow: muster::core::crd::Workflow = serde_json::from_value(json!({
        "metadata": {"name": "ask"},
        "spec": {"steps": [{"id": "who", "tool": "x_protected_whoami", "args": {}}]},
    }))
    .expect("a workflow");
    gw.gateway.registry().apply_workflow(workflow).expect("applied");
    assert!(!tools_of(&frank_chat).await.contains(&"workflow_ask".to_owned()));

    let status = core(&frank_chat, "core_auth_status", json!({})).await;
    assert_eq!(status["servers"][0]["grant_scope"], "subject", "{status}");
    let login = core(&frank_chat, "core_auth_login", json!({"server": "protected"})).await;
    sign_in(&idp, login["authUrl"].as_str().expect("a link"), "frank").await;

    // Frank's other session has the server without signing in again; Grace does not.
    assert!(tools_of(&frank_ide).await.contains(&"x_protected_whoami".to_owned()));
    assert_eq!(
        core(&frank_ide, "x_protected_whoami", json!({})).await,
        json!("you are in")
    );
    assert!(!tools_of(&grace).await.iter().any(|t| t.starts_with("x_protected_")));
    assert!(tools_of(&frank_ide).await.contains(&"workflow_ask".to_owned()));
    assert!(!tools_of(&grace).await.contains(&"workflow_ask".to_owned()));
    let ran = core(&frank_ide, "workflow_ask", json!({})).await;
    assert_eq!(ran["status"], "completed", "{ran}");
    assert_eq!(ran["steps"][0]["status"], "completed", "{ran}");
    let again = core(&frank_ide, "core_auth_login", json!({"server": "protected"})).await;
    assert_eq!(again["status"], "connected", "{again}");

    // Signing out in one session signs the person out everywhere.
    let out = core(&frank_ide, "core_auth_logout", json!({"server": "protected"})).await;
    assert_eq!(out["revoked"], true, "{out}");
    for session in [&frank_chat, &frank_ide] {
        assert!(!tools_of(session).await.iter().any(|t| t.starts_with("x_protected_")));
    }
    for c in [frank_chat, frank_ide, grace] {
        let _ = c.cancel().await;
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_pinned_authorization_servers_client_registered_out_of_band_comes_from_its_secret() {
    const CLIENT_SECRET: &str = "pinned-cl1ent-s3cret";
    let idp = OidcProvider::start_with_env(&[
        ("OIDC_STATIC_CLIENT_ID", "muster-pinned"),
        ("OIDC_STATIC_CLIENT_SECRET", CLIENT_SECRET),
        // A native client's loopback redirect URI matches on any port (RFC 8252).
        ("OIDC_STATIC_REDIRECT_URI", "http://127.0.0.1/oauth/proxy/callback"),
    ]);
    let issuer = idp.issuer().to_owned();
    let secrets_dir = tempfile::tempdir().expect("a secrets directory");
    let secrets = Arc::new(muster::gateway::secrets::DirectorySecrets::new(secrets_dir.path()));
    let gw = SignInGateway::start_with_secrets(
        &idp,
        secrets,
        |server| {
            server.spec.auth = Some(
                serde_json::from_value(json!({"authorizationServer": {
                    "issuer": issuer, "clientCredentialsSecretRef": {"name": "pinned-app"}}}))
                .expect("an auth section"),
            )
        },
        |base| AggregatorConfig::default().with_mcp_client(McpClientConfig::enabled_at(base)),
    )
    .await;
    let mcp = format!("{}/mcp", gw.base);
    let frank = client(&mcp, &[], None).await;

    // No Secret yet: the sign-in says which one it needs, and no link is issued.
    let refused = call_meta(
        &frank,
        "call_tool",
        json!({"name": "core_auth_login", "arguments": {"server": "protected"}}),
    )
    .await;
    let said = text(&refused);
    assert!(
        said.contains("auth.authorizationServer.clientCredentialsSecretRef")
            && said.contains("Secret pinned-app not found"),
        "{said}"
    );

    std::fs::write(
        secrets_dir.path().join("pinned-app.yaml"),
        format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: pinned-app}}\nstringData:\n  client-id: muster-pinned\n  client-secret: {CLIENT_SECRET}\n"),
    )
    .expect("the Secret");
    let login = core(&frank, "core_auth_login", json!({"server": "protected"})).await;
    let link = login["authUrl"].as_str().expect("a link").to_owned();
    // The link sends the browser to the provider as the client registered out of band.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let start = no_redirects.get(&link).send().await.expect("the link answers");
    let location = start
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let authorize = url::Url::parse(&location).expect("a redirect to the provider");
    assert!(
        authorize
            .query_pairs()
            .any(|(k, v)| k == "client_id" && v == "muster-pinned"),
        "{location}"
    );
    // The code is exchanged with the client's secret (client_secret_basic): a wrong one is
    // invalid_client, and the sign-in would fail.
    sign_in(&idp, &link, "frank").await;
    assert_eq!(
        idp.token_requests("authorization_code"),
        (1, 0),
        "one code exchanged, none refused"
    );
    assert_eq!(core(&frank, "x_protected_whoami", json!({})).await, json!("you are in"));
    let _ = frank.cancel().await;
    gw.stop().await;
}
