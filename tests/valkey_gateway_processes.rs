//! Two reference gateway processes (`gateway serve`, each with its own config directory and
//! port on loopback) sharing one real `redis-server`: a sign-in started on replica one is
//! completed through replica two's callback (as a load balancer may send it), and the session on
//! replica one then calls the protected tool.
//!
//! Needs the `redis-server` binary (Debian package `redis-server`), the oidc-provider of
//! `npm ci` and the gateway example (`cargo build --examples`); skipped without redis-server,
//! failed under `CI=true`.

mod common;

use std::{net::TcpListener, path::Path, process::Command, time::Duration};

use common::{
    gateway_binary,
    gateway_process::GatewayChild,
    oidc::OidcProvider,
    scripted::ScriptedServer,
    signin::{client, core, tools_of},
    valkey::{ValkeyServer, write_state_key},
};
use serde_json::json;

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds a loopback port");
    listener.local_addr().expect("its address").port()
}

/// A replica's config directory in `dir`: listening on `port`, sign-in at its own address, the
/// state in `valkey` sealed with `key_file`, the protected server at `protected`.
fn config_dir(dir: &Path, port: u16, valkey: &ValkeyServer, key_file: &Path, protected: &str) {
    std::fs::create_dir_all(dir.join("mcpservers")).expect("creates the config directory");
    let config = format!(
        r#"aggregator:
  host: 127.0.0.1
  port: {port}
  oauth:
    mcpClient:
      enabled: true
      publicUrl: http://127.0.0.1:{port}
    server:
      encryptionKeyFile: {key}
      storage:
        type: valkey
        valkey:
          url: {url}
          keyPrefix: "e2e:"
"#,
        key = key_file.display(),
        url = valkey.url(),
    );
    std::fs::write(dir.join("config.yaml"), config).expect("writes config.yaml");
    let server = format!(
        "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: protected\n\
         spec:\n  type: streamable-http\n  url: {protected}\n  timeout: 5\n"
    );
    std::fs::write(dir.join("mcpservers/protected.yaml"), server).expect("writes the server");
}

fn serve(dir: &Path) -> GatewayChild {
    let mut command = Command::new(gateway_binary());
    command
        .args(["serve", "--config-path"])
        .arg(dir)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    GatewayChild::spawn(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_started_on_one_gateway_process_completes_through_another_and_the_first_calls_the_tool() {
    let Some(valkey) = ValkeyServer::start() else { return };
    let idp = OidcProvider::start();
    let protected = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected(idp.issuer())
        .await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key_file = write_state_key(dir.path());
    let (one_port, two_port) = (free_port(), free_port());
    let (one_dir, two_dir) = (dir.path().join("one"), dir.path().join("two"));
    config_dir(&one_dir, one_port, &valkey, &key_file, &protected.url);
    config_dir(&two_dir, two_port, &valkey, &key_file, &protected.url);
    let one = serve(&one_dir);
    let two = serve(&two_dir);
    let one_mcp = one.endpoint(Duration::from_secs(60));
    two.endpoint(Duration::from_secs(60));
    let (one_base, two_base) = (
        format!("http://127.0.0.1:{one_port}"),
        format!("http://127.0.0.1:{two_port}"),
    );

    let alice = client(&one_mcp).await;
    let (failed, login) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "{login}\nreplica one:\n{}", one.log());
    let link = login["authUrl"].as_str().expect("a link").to_owned();
    assert!(link.starts_with(&one_base), "{link}");

    let callback = idp.sign_in(&link, "alice").await;
    let on_two = callback.as_str().replacen(&one_base, &two_base, 1);
    assert_ne!(on_two, callback.as_str(), "the callback goes to replica two");
    let page = reqwest::get(&on_two).await.expect("replica two answers the callback");
    let status = page.status();
    let body = page.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{body}\nreplica two:\n{}", two.log());
    assert!(body.contains("Signed in to protected"), "{body}");

    let tools = tools_of(&alice).await;
    assert!(tools.contains(&"x_protected_whoami".to_owned()), "{tools:?}");
    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed, "{answer}");
    assert_eq!(answer, json!("you are in"));
    assert!(
        two.log().contains("the sign-in state is kept in valkey"),
        "replica two says where its state is:\n{}",
        two.log()
    );

    let _ = alice.cancel().await;
}
