//! Three gateway replicas sharing one real `redis-server`, behind a real haproxy routing as `docs/replicas.md` says (`tests/common/haproxy.rs`): a session's
//! requests stick to the replica that opened it, everything else is round-robin. Every client
//! here talks to haproxy only.
//!
//! - A sign-in started in a session on one replica is completed through another replica (the
//!   session's replica drained in haproxy, as in a rollout), and the session calls the tool;
//!   the replicas are reference gateway processes (`gateway serve`).
//! - A person's grant (`grantScope: subject`) is used from sessions on all three replicas, and
//!   survives a restart of all three; the replicas are gateways in this process, on fixed
//!   ports (a config file refuses the provider's `http://` issuer for `grantScope`), sharing
//!   only Valkey.
//!
//! Needs `redis-server` and `haproxy` (Debian packages), the oidc-provider of `npm ci` and the
//! gateway example (`cargo build --examples`); skipped without either package, failed under
//! `CI=true`.

mod common;

use std::{collections::BTreeSet, time::Duration};

use common::{
    connect,
    haproxy::Haproxy,
    raw_session::served_by,
    remote,
    replicas::{InProcessReplica, ReplicaSettings, Replicas, SignInParts, free_port, front_door_on_valkey},
    signin::{core, tools_of},
};
use muster::core::config::MusterConfig;
use serde_json::json;

/// A running setup: Valkey, the provider, the protected server, three replicas and haproxy.
struct Cluster {
    /// Gateway processes, for the sign-in test.
    replicas: Option<Replicas>,
    /// Gateways in this process, for the subject grants (an `http://` issuer is refused in a
    /// config file).
    in_process: Vec<InProcessReplica>,
    haproxy: Haproxy,
    parts: SignInParts,
}

impl Cluster {
    /// `None` when redis-server or haproxy is missing (skipped, with a note). `subject`: the
    /// replicas in this process, the front door on, trusting the provider, and the protected
    /// server's grants the person's (`grantScope: subject`); else gateway processes.
    async fn start(subject: bool) -> Option<Self> {
        let parts = SignInParts::start(&[]).await?;
        let (valkey, key_file, idp, protected) =
            (&parts.valkey, parts.key_file.as_path(), &parts.idp, &parts.protected);
        let port = free_port();
        let public = format!("http://127.0.0.1:{port}");
        let (replicas, in_process, backends) = if subject {
            let aggregator = front_door_on_valkey(&public, idp.issuer(), valkey, key_file, "replicas:");
            let mut server = remote("protected", &protected.url);
            server.spec.auth = Some(
                serde_json::from_value(
                    json!({"authorizationServer": {"issuer": idp.issuer(), "grantScope": "subject"}}),
                )
                .expect("an auth block"),
            );
            let mut in_process = Vec::new();
            for i in 1..=3 {
                let config = MusterConfig::default().with_aggregator(aggregator.clone());
                let replica =
                    InProcessReplica::start(&format!("r{i}"), free_port(), config, vec![server.clone()]).await;
                in_process.push(replica);
            }
            let backends = in_process.iter().map(|r| (r.name.clone(), r.port)).collect();
            (None, in_process, backends)
        } else {
            let settings = ReplicaSettings::default()
                .with_public_url(&public)
                .with_valkey(valkey, key_file)
                .with_http_server("protected", &protected.url, None);
            let replicas = Replicas::start(3, &settings);
            let backends = replicas.backends();
            (Some(replicas), Vec::new(), backends)
        };
        let haproxy = Haproxy::start_on(port, &backends)?;
        for (name, _) in &backends {
            haproxy.await_server(name, true, Duration::from_secs(10));
        }
        Some(Self {
            replicas,
            in_process,
            haproxy,
            parts,
        })
    }

    /// The replica processes' logs (none in this process).
    fn logs(&self) -> String {
        self.replicas.as_ref().map(Replicas::logs).unwrap_or_default()
    }

    /// The replica haproxy routes the session opened by `open` to: the stick table's entry
    /// that `open` added.
    async fn opened_on<T>(&self, open: impl std::future::Future<Output = T>) -> (T, String) {
        let before: BTreeSet<_> = self.haproxy.sessions().into_iter().collect();
        let opened = open.await;
        let added: Vec<_> = self
            .haproxy
            .sessions()
            .into_iter()
            .filter(|entry| !before.contains(entry))
            .collect();
        assert_eq!(added.len(), 1, "one new session in haproxy's table: {added:?}");
        (opened, added[0].1.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_started_on_one_replica_completes_through_another_behind_haproxy_and_the_session_calls_the_tool() {
    let Some(cluster) = Cluster::start(false).await else {
        return;
    };
    let (alice, holder) = cluster.opened_on(connect(&cluster.haproxy.mcp(), &[], None)).await;
    let (failed, login) = core(&alice, "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "{login}\n{}", cluster.logs());
    let link = login["authUrl"].as_str().expect("a link").to_owned();
    assert!(
        link.starts_with(&cluster.haproxy.base()),
        "the link is haproxy's: {link}"
    );

    // A rollout drains the session's replica: its sessions stay, new requests go elsewhere.
    cluster.haproxy.set_state(&holder, "drain");
    let callback = cluster.parts.idp.sign_in(&link, "alice").await;
    assert!(callback.as_str().starts_with(&cluster.haproxy.base()), "{callback}");
    let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
    let completed_on = served_by(&page).expect("haproxy names the replica");
    let status = page.status();
    let body = page.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{body}\n{}", cluster.logs());
    assert!(body.contains("Signed in to protected"), "{body}");
    assert_ne!(completed_on, holder, "the callback went to another replica");

    let tools = tools_of(&alice).await;
    assert!(tools.contains(&"x_protected_whoami".to_owned()), "{tools:?}");
    let (failed, answer) = core(&alice, "x_protected_whoami", json!({})).await;
    assert!(!failed, "{answer}\n{}", cluster.logs());
    assert_eq!(answer, json!("you are in"));
    let routed: Vec<_> = cluster.haproxy.sessions();
    assert!(
        routed.iter().all(|(_, server)| *server == holder),
        "the session stayed on {holder}: {routed:?}"
    );
    cluster.haproxy.set_state(&holder, "ready");
    let _ = alice.cancel().await;
}

/// Opens sessions of `login` through haproxy until one is on each replica; each calls the
/// protected tool with the person's grant.
async fn called_from_every_replica(cluster: &Cluster, token: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut clients = Vec::new();
    for _ in 0..9 {
        let (client, replica) = cluster
            .opened_on(connect(&cluster.haproxy.mcp(), &[], Some(token.to_owned())))
            .await;
        let (failed, answer) = core(&client, "x_protected_whoami", json!({})).await;
        assert!(!failed, "on {replica}: {answer}\n{}", cluster.logs());
        assert_eq!(answer, json!("you are in"), "on {replica}");
        seen.insert(replica);
        clients.push(client);
        if seen.len() == 3 {
            break;
        }
    }
    for client in clients {
        let _ = client.cancel().await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_grant_is_used_from_all_three_replicas_and_survives_their_restart() {
    let Some(mut cluster) = Cluster::start(true).await else {
        return;
    };
    let mcp = cluster.haproxy.mcp();
    let token = cluster.parts.idp.token_for(&mcp, "frank").await;
    let frank = connect(&mcp, &[], Some(token.clone())).await;
    let (failed, login) = core(&frank, "core_auth_login", json!({"server": "protected"})).await;
    assert!(!failed, "{login}\n{}", cluster.logs());
    let callback = cluster
        .parts
        .idp
        .sign_in(login["authUrl"].as_str().expect("a link"), "frank")
        .await;
    let page = reqwest::get(callback.as_str()).await.expect("the callback answers");
    assert_eq!(page.status(), 200, "{}", page.text().await.unwrap_or_default());
    let _ = frank.cancel().await;

    let seen = called_from_every_replica(&cluster, &token).await;
    assert_eq!(seen.len(), 3, "sessions on every replica: {seen:?}");

    // Every replica stops, then all start again: no gateway kept the grant, Valkey did.
    for replica in &mut cluster.in_process {
        replica.stop().await;
    }
    for replica in &mut cluster.in_process {
        replica.start_again().await;
        cluster
            .haproxy
            .await_server(&replica.name, true, Duration::from_secs(10));
    }
    let seen = called_from_every_replica(&cluster, &token).await;
    assert_eq!(seen.len(), 3, "after the restart, sessions on every replica: {seen:?}");
}

#[test]
fn the_haproxy_configuration_in_the_docs_is_the_one_the_tests_run() {
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/replicas.md")).expect("docs/replicas.md");
    let block = docs
        .split("```haproxy\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a haproxy block in docs/replicas.md");
    let backends: Vec<_> = (1..=3).map(|i| (format!("r{i}"), 8090 + i)).collect();
    let run = common::haproxy::config(8090, &backends, std::path::Path::new("/run/haproxy/admin.sock"));
    assert_eq!(
        block, run,
        "docs/replicas.md shows another haproxy configuration than the tests run"
    );
}
