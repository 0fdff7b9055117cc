//! Kubernetes mode with the real gateway binary: `kubernetes: true` in config.yaml, and an API
//! server double (`muster_kube::testing`) the binary reaches through a kubeconfig (`KUBECONFIG`),
//! as it would a cluster. The downstream servers are real (the demo server over streamable HTTP)
//! and so is the client (rmcp).

mod common;

use std::{path::Path, time::Duration};

use common::{
    DemoHttp, connect, eventually,
    gateway_process::GatewayChild,
    kubernetes::{GATEWAY_USER, cluster, core, echo, listed, mcpserver, remote, spawn_replica, tool_shown},
    replicas::free_port,
};
use muster_kube::testing::ApiServerDouble;
use serde_json::{Value, json};

/// `gateway serve` of `dir` on `port`, reaching the double through `KUBECONFIG`.
fn spawn_gateway(dir: &Path, port: u16) -> GatewayChild {
    spawn_replica(dir, port, &dir.join("kubeconfig"), "replica-1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_appear_change_and_go_while_calls_run() {
    let (double, dir) = cluster("").await;
    let steady = DemoHttp::start();
    let changing = DemoHttp::start();
    double
        .put(mcpserver("muster", "steady", remote(&steady.url)))
        .expect("stored");
    let port = free_port();
    let gateway = spawn_gateway(dir.path(), port);
    let endpoint = gateway.endpoint(Duration::from_secs(60));
    let client = connect(&endpoint, &[], None).await;
    assert!(
        tool_shown(&client, "x_steady_echo", true, 30).await,
        "{}",
        gateway.log()
    );

    // Calls to the steady server run the whole time the other one comes, changes and goes.
    let calls_client = connect(&endpoint, &[], None).await;
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&answered);
    let calls = tokio::spawn(async move {
        let mut failed = Vec::new();
        loop {
            match echo(&calls_client, "x_steady_echo").await {
                Ok(()) => _ = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
                Err(e) => failed.push(e),
            }
            if stopped.try_recv().is_ok() {
                return failed;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let calls_before = || answered.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        eventually(10, || async { calls_before() >= 3 }).await,
        "the calls started"
    );

    double
        .put(mcpserver("muster", "changing", remote(&changing.url)))
        .expect("stored");
    assert!(
        tool_shown(&client, "x_changing_echo", true, 30).await,
        "added: {}",
        gateway.log()
    );
    echo(&client, "x_changing_echo").await.expect("the new server answers");

    let mut prefixed = remote(&changing.url);
    prefixed["toolPrefix"] = json!("renamed");
    double.put(mcpserver("muster", "changing", prefixed)).expect("stored");
    assert!(
        tool_shown(&client, "x_renamed_echo", true, 30).await,
        "changed: {}",
        gateway.log()
    );
    assert!(!listed(&client).await.contains(&"x_changing_echo".to_owned()));

    double
        .delete("mcpservers", Some("muster"), "changing")
        .expect("deleted");
    assert!(
        tool_shown(&client, "x_renamed_echo", false, 30).await,
        "removed: {}",
        gateway.log()
    );

    let during = calls_before();
    assert!(
        eventually(10, || async { calls_before() >= during + 3 }).await,
        "the calls go on"
    );
    let _ = stop.send(());
    let failed = calls.await.expect("the calls ran");
    assert!(failed.is_empty(), "calls to the unchanged server failed: {failed:?}");
    let reconnects = gateway
        .lines()
        .iter()
        .filter(|l| l.contains("steady") && l.contains("connected"))
        .count();
    assert!(
        reconnects <= 1,
        "the unchanged server was reconnected: {}",
        gateway.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_resource_is_refused_and_another_namespaces_server_is_named_for_it() {
    let (double, dir) = cluster("").await;
    let demo = DemoHttp::start();
    double
        .put(mcpserver(
            "muster",
            "local",
            json!({"type": "stdio", "command": "sh", "args": ["-c", "sleep 60"]}),
        ))
        .expect("stored");
    double
        .put(mcpserver("team", "docs", remote(&demo.url)))
        .expect("stored");
    // Written before the CRD's rules refused a credential in a header.
    let mut leaky = remote(&demo.url);
    leaky["headers"] = json!({"Authorization": "Bearer ghp_l3aked"});
    double.put(mcpserver("muster", "leaky", leaky)).expect("stored");
    let gateway = spawn_gateway(dir.path(), free_port());
    let client = connect(&gateway.endpoint(Duration::from_secs(60)), &[], None).await;

    assert!(
        tool_shown(&client, "x_team_docs_echo", true, 30).await,
        "{:?}: {}",
        listed(&client).await,
        gateway.log()
    );
    echo(&client, "x_team_docs_echo")
        .await
        .expect("the namespaced server answers");

    let (ok, local) = core(&client, "core_mcpserver_get", json!({"name": "local"})).await;
    assert!(ok, "{local}");
    let state = local["state"]
        .as_str()
        .or(local["status"]["state"].as_str())
        .unwrap_or_default();
    assert_eq!(state, "Failed", "{local}");
    assert!(local.to_string().contains("streamable-http or sse"), "{local}");
    let (ok, leaky) = core(&client, "core_mcpserver_get", json!({"name": "leaky"})).await;
    assert!(ok, "{leaky}");
    assert!(leaky.to_string().contains("breaks muster's rules"), "{leaky}");
    assert!(!listed(&client).await.iter().any(|t| t.starts_with("x_leaky_")));
    assert!(
        eventually(20, || async {
            let held = double.get("mcpservers", Some("muster"), "leaky").unwrap_or_default();
            held["status"]["state"] == "Failed"
                && held["status"]["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("spec.headers"))
        })
        .await,
        "{:?}",
        double.get("mcpservers", Some("muster"), "leaky")
    );
    assert!(!gateway.log().contains("ghp_l3aked"), "{}", gateway.log());
    let (ok, team) = core(&client, "core_mcpserver_get", json!({"name": "team_docs"})).await;
    assert!(ok, "the other namespace's server is team_docs: {team}");

    let (ok, refused) = core(
        &client,
        "core_mcpserver_create",
        json!({"name": "another", "type": "stdio", "command": "true"}),
    )
    .await;
    assert!(
        !ok && refused.to_string().contains("streamable-http or sse"),
        "{refused}"
    );
    assert!(double.get("mcpservers", Some("muster"), "another").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_is_dropped_and_the_api_server_is_away_for_a_minute() {
    let (double, dir) = cluster("").await;
    let first = DemoHttp::start();
    let second = DemoHttp::start();
    double
        .put(mcpserver("muster", "first", remote(&first.url)))
        .expect("stored");
    let gateway = spawn_gateway(dir.path(), free_port());
    let client = connect(&gateway.endpoint(Duration::from_secs(60)), &[], None).await;
    assert!(tool_shown(&client, "x_first_echo", true, 30).await, "{}", gateway.log());

    // The watch ends, and the history it would resume from is gone: 410, and a new list.
    double.compact();
    double.drop_watches();
    double
        .put(mcpserver("muster", "second", remote(&second.url)))
        .expect("stored");
    assert!(
        tool_shown(&client, "x_second_echo", true, 60).await,
        "after 410: {}",
        gateway.log()
    );

    // The API server goes away for a minute: the gateway serves what it knew.
    double.set_unavailable(true);
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(10)).await;
        echo(&client, "x_first_echo")
            .await
            .expect("served while the API server is away");
        echo(&client, "x_second_echo")
            .await
            .expect("served while the API server is away");
    }
    // Meanwhile the definitions changed: the watch catches up once it is back.
    double.delete("mcpservers", Some("muster"), "second").expect("deleted");
    double.set_unavailable(false);
    assert!(
        tool_shown(&client, "x_second_echo", false, 120).await,
        "caught up after the outage: {}",
        gateway.log()
    );
    echo(&client, "x_first_echo").await.expect("still served");
    // The gateway did meet the outage (kube-rs retries each refused request with backoff).
    assert!(gateway.log().contains("503"), "{}", gateway.log());
}

/// config.yaml lines putting the front door of `issuer` before a gateway on `port`.
fn front_door(port: u16, issuer: &str) -> String {
    format!(
        "aggregator:\n  host: 127.0.0.1\n  oauth:\n    server:\n      enabled: true\n      \
         baseUrl: http://127.0.0.1:{port}\n      trustedIssuers: [\"{issuer}\"]\n"
    )
}

/// An MCPServer create through the gateway by the person of `token`: the tool's answer.
async fn create_as(endpoint: &str, token: String, name: &str, url: &str) -> (bool, Value) {
    let client = connect(endpoint, &[], Some(token)).await;
    let args = json!({"name": name, "type": "streamable-http", "url": url});
    core(&client, "core_mcpserver_create", args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_as_the_caller_impersonated_and_rbac_decides() {
    // Dora's tokens name her groups; the API server would prefix them with `oidc:`.
    let idp = common::oidc::OidcProvider::start_with_env(&[("OIDC_GROUPS", "dora=platform|ops")]);
    let port = free_port();
    let writes = "kubernetesWrites:\n  identity: impersonate\n  groupsPrefix: \"oidc:\"\n";
    let (double, dir) = cluster(&format!("{}{writes}", front_door(port, idp.issuer()))).await;
    // Bob may write MCPServers in muster's namespace; Alice may not.
    let bob = format!("{}#bob", idp.issuer());
    double.allow(
        &bob,
        &["get", "create", "update", "delete"],
        "muster.giantswarm.io",
        "mcpservers",
        Some("muster"),
    );
    let demo = DemoHttp::start();
    let gateway = spawn_gateway(dir.path(), port);
    let endpoint = gateway.endpoint(Duration::from_secs(60));

    let (ok, refused) = create_as(
        &endpoint,
        idp.token_for(&endpoint, "alice").await,
        "by-alice",
        &demo.url,
    )
    .await;
    assert!(!ok, "{refused}");
    let message = refused.to_string();
    assert!(
        message.contains("403") && message.contains("forbidden"),
        "the API server's reason: {message}"
    );
    assert!(
        message.contains(&format!("{}#alice", idp.issuer())),
        "names the person: {message}"
    );
    assert!(double.get("mcpservers", Some("muster"), "by-alice").is_none());

    let (ok, created) = create_as(&endpoint, idp.token_for(&endpoint, "bob").await, "by-bob", &demo.url).await;
    assert!(ok, "{created}");
    let stored = double
        .get("mcpservers", Some("muster"), "by-bob")
        .expect("written to the cluster");
    assert_eq!(
        stored["metadata"]["annotations"]["ui.giantswarm.io/registered-by"],
        "bob"
    );
    let audit = double.audit_log();
    let write = audit
        .iter()
        .find(|e| e.name == "by-bob" && e.verb == "create")
        .expect("audited");
    assert_eq!(write.user, bob);
    assert_eq!(write.impersonated_by.as_deref(), Some(GATEWAY_USER));
    assert!(
        !audit
            .iter()
            .any(|e| e.resource == "mcpservers" && e.user == GATEWAY_USER && e.impersonated_by.is_none())
    );

    // Dora has no right of her own; her group has: RBAC bound to groups applies.
    double.allow(
        "oidc:platform",
        &["get", "create", "update", "delete"],
        "muster.giantswarm.io",
        "mcpservers",
        Some("muster"),
    );
    let (ok, created) = create_as(&endpoint, idp.token_for(&endpoint, "dora").await, "by-dora", &demo.url).await;
    assert!(ok, "{created}");
    assert!(double.get("mcpservers", Some("muster"), "by-dora").is_some());
    let (ok, refused) = create_as(
        &endpoint,
        idp.token_for(&endpoint, "alice").await,
        "by-alice",
        &demo.url,
    )
    .await;
    assert!(!ok, "a group's right is not everyone's: {refused}");

    // The watch brings it back as a definition: its tools are served.
    let client = connect(&endpoint, &[], Some(idp.token_for(&endpoint, "bob").await)).await;
    assert!(
        tool_shown(&client, "x_by-bob_echo", true, 30).await,
        "{}",
        gateway.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_with_the_callers_own_token() {
    let idp = common::oidc::OidcProvider::start();
    let port = free_port();
    let (double, dir) = cluster(&front_door(port, idp.issuer())).await;
    let demo = DemoHttp::start();
    let gateway = spawn_gateway(dir.path(), port);
    let endpoint = gateway.endpoint(Duration::from_secs(60));

    // The API server trusts the same issuer: Carol's token is Carol to it.
    let token = idp.token_for(&endpoint, "carol").await;
    double.add_token(&token, "carol", &[]);
    double.allow(
        "carol",
        &["get", "create", "update", "delete"],
        "muster.giantswarm.io",
        "mcpservers",
        Some("muster"),
    );
    let (ok, created) = create_as(&endpoint, token.clone(), "by-carol", &demo.url).await;
    assert!(ok, "{created}");
    let write = double
        .audit_log()
        .into_iter()
        .find(|e| e.name == "by-carol" && e.verb == "create")
        .expect("audited");
    assert_eq!((write.user.as_str(), write.impersonated_by), ("carol", None));

    // A token the API server does not know is refused there, and the refusal reaches Dave.
    let (ok, refused) = create_as(&endpoint, idp.token_for(&endpoint, "dave").await, "by-dave", &demo.url).await;
    assert!(!ok && refused.to_string().contains("401"), "{refused}");
    assert!(double.get("mcpservers", Some("muster"), "by-dave").is_none());
}

/// The status writes to MCPServer `name` the double audited, by user.
fn status_writes(double: &ApiServerDouble, name: &str, user: &str) -> usize {
    double
        .audit_log()
        .iter()
        .filter(|e| e.name == name && e.subresource.as_deref() == Some("status") && e.user == user)
        .count()
}

/// The `status.state` the double holds for MCPServer `name` of muster's namespace.
fn state_held(double: &ApiServerDouble, name: &str) -> String {
    double
        .get("mcpservers", Some("muster"), name)
        .and_then(|o| o["status"]["state"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_writes_status_and_another_replica_takes_over() {
    let (double, dir) = cluster("").await;
    // The empty Lease deploy/ creates: the replicas take it over (elsewhere they create it).
    double
        .apply_manifests(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/lease.yaml"))
        .expect("deploy/lease.yaml applies");
    // Two replicas, each its own ServiceAccount token, so the audit log tells them apart.
    let kubeconfigs: Vec<_> = ["replica-a", "replica-b"]
        .iter()
        .map(|replica| {
            let token = format!("{replica}-token");
            double.add_token(&token, replica, &["system:serviceaccounts"]);
            double.allow_all(replica);
            let path = dir.path().join(format!("{replica}.kubeconfig"));
            double.write_kubeconfig(&path, &token, "muster").expect("a kubeconfig");
            path
        })
        .collect();
    let demo = DemoHttp::start();
    double
        .put(mcpserver("muster", "api", remote(&demo.url)))
        .expect("stored");

    let a = spawn_replica(dir.path(), free_port(), &kubeconfigs[0], "replica-a");
    assert!(
        eventually(30, || async { state_held(&double, "api") == "Connected" }).await,
        "replica a writes the status: {}",
        a.log()
    );
    let held = double.get("mcpservers", Some("muster"), "api").expect("held");
    assert_eq!(held["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(held["status"]["conditions"][0]["status"], "True");
    let managers: Vec<&str> = held["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["subresource"] == "status")
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["muster"], "server-side apply as muster: {held}");
    assert_eq!(held["spec"]["url"], demo.url, "the spec is untouched");

    let b = spawn_replica(dir.path(), free_port(), &kubeconfigs[1], "replica-b");
    b.endpoint(Duration::from_secs(60));
    b.log_shows("connected server=api", Duration::from_secs(30)).await;
    // Steady: nothing changes, nothing is written; and b, not holding the Lease, writes nothing.
    let before = status_writes(&double, "api", "replica-a");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        status_writes(&double, "api", "replica-a"),
        before,
        "a steady status is not written again"
    );
    assert_eq!(
        status_writes(&double, "api", "replica-b"),
        0,
        "b does not hold the Lease"
    );

    // The holder dies; the server goes away. Within the Lease's duration b takes over and
    // writes what it sees.
    drop(a);
    drop(demo);
    assert!(
        eventually(30, || async { status_writes(&double, "api", "replica-b") > 0 }).await,
        "b took over: {}",
        b.log()
    );
    assert!(
        eventually(30, || async { state_held(&double, "api") != "Connected" }).await,
        "b wrote the server's new state"
    );
    assert!(b.log().contains("holding the status Lease"), "{}", b.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_stop_start_and_restart_are_writes_of_the_spec_as_the_caller() {
    let idp = common::oidc::OidcProvider::start();
    let port = free_port();
    let (double, dir) = cluster(&front_door(port, idp.issuer())).await;
    let demo = DemoHttp::start();
    double
        .put(mcpserver("muster", "api", remote(&demo.url)))
        .expect("stored");
    let gateway = spawn_gateway(dir.path(), port);
    let endpoint = gateway.endpoint(Duration::from_secs(60));
    let token = idp.token_for(&endpoint, "erin").await;
    double.add_token(&token, "erin", &[]);
    double.allow(
        "erin",
        &["get", "update"],
        "muster.giantswarm.io",
        "mcpservers",
        Some("muster"),
    );
    let client = connect(&endpoint, &[], Some(token)).await;
    assert!(tool_shown(&client, "x_api_echo", true, 30).await, "{}", gateway.log());
    let spec = |field: &str| {
        double
            .get("mcpservers", Some("muster"), "api")
            .map(|o| o["spec"][field].clone())
    };
    let erins_updates = || {
        double
            .audit_log()
            .iter()
            .filter(|e| e.name == "api" && e.verb == "update" && e.user == "erin")
            .count()
    };

    let (ok, stopped) = core(&client, "core_service_stop", json!({"name": "api"})).await;
    assert!(ok, "{stopped}");
    assert_eq!(spec("suspended"), Some(json!(true)));
    assert_eq!(erins_updates(), 1, "written as Erin");
    assert!(
        eventually(30, || async { state_held(&double, "api") == "Disconnected" }).await,
        "the status follows: {:?}",
        double.get("mcpservers", Some("muster"), "api")
    );
    assert!(tool_shown(&client, "x_api_echo", false, 30).await);

    let (ok, started) = core(&client, "core_service_start", json!({"name": "api"})).await;
    assert!(ok, "{started}");
    assert_ne!(spec("suspended"), Some(json!(true)));
    assert!(
        spec("restartRequestedAt").is_some_and(|at| at.is_string()),
        "a stopped server restarts"
    );
    assert!(tool_shown(&client, "x_api_echo", true, 30).await, "{}", gateway.log());

    let before = spec("restartRequestedAt");
    let (ok, restarted) = core(&client, "core_service_restart", json!({"name": "api"})).await;
    assert!(ok, "{restarted}");
    let requested = spec("restartRequestedAt").expect("written");
    assert_ne!(Some(requested.clone()), before, "a new restart request");
    assert!(
        eventually(30, || async {
            double
                .get("mcpservers", Some("muster"), "api")
                .is_some_and(|o| o["status"]["lastRestartedAt"] == requested)
        })
        .await,
        "status.lastRestartedAt mirrors the processed request: {:?}",
        double.get("mcpservers", Some("muster"), "api")
    );
    assert_eq!(erins_updates(), 3);
    echo(&client, "x_api_echo").await.expect("running again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_status_says_whether_it_is_valid() {
    let (double, dir) = cluster("").await;
    let workflow = |name: &str, args: Value| {
        json!({
            "apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": "muster"},
            "spec": {"steps": [
                {"id": "one", "tool": "x_api_echo", "args": args},
                {"id": "two", "tool": "core_service_list"},
            ]},
        })
    };
    double
        .put(workflow("good", json!({"message": "{{ .input.m }}"})))
        .expect("stored");
    double
        .put(workflow("broken", json!({"message": "{{ .input.m "})))
        .expect("stored");
    let gateway = spawn_gateway(dir.path(), free_port());
    gateway.endpoint(Duration::from_secs(60));
    let status = |name: &str| {
        double
            .get("workflows", Some("muster"), name)
            .map(|o| o["status"].clone())
            .unwrap_or_default()
    };
    assert!(
        eventually(30, || async {
            status("good")["valid"] == true && status("broken")["valid"] == false
        })
        .await,
        "{} / {}: {}",
        status("good"),
        status("broken"),
        gateway.log()
    );
    assert_eq!(status("good")["stepCount"], 2);
    assert_eq!(
        status("good")["referencedTools"],
        json!(["core_service_list", "x_api_echo"])
    );
    let errors = status("broken")["validationErrors"].to_string();
    assert!(
        errors.contains("steps[0]") && errors.contains("unclosed action"),
        "says what is wrong where: {errors}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_that_appears_after_its_server_was_defined_is_read_when_it_connects() {
    use base64::Engine;
    const KEY: &str = "k3y-fr0m-the-secret";
    let (double, dir) = cluster("").await;
    double
        .apply_manifests(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/admission-policy.yaml"))
        .expect("the admission policy deploy/ installs");
    let downstream = common::scripted::ScriptedServer::builder()
        .tool("ping", true, |_| Ok(json!("pong")))
        .serve_requiring("x-api-key", KEY)
        .await;
    let mut spec = remote(&downstream.url);
    spec["headersFrom"] =
        json!([{"name": "X-API-Key", "valueFrom": {"type": "Secret", "name": "keyed-api", "key": "token"}}]);
    double.put(mcpserver("muster", "keyed", spec)).expect("stored");
    let gateway = spawn_gateway(dir.path(), free_port());
    let client = connect(&gateway.endpoint(Duration::from_secs(60)), &[], None).await;

    // No Secret yet: Failed, naming it, in the core tools and in the status written back.
    let failed = eventually(30, || async {
        let (_, server) = core(&client, "core_mcpserver_get", json!({"name": "keyed"})).await;
        server.to_string().contains("Secret muster/keyed-api not found")
    })
    .await;
    let (_, server) = core(&client, "core_mcpserver_get", json!({"name": "keyed"})).await;
    assert!(failed, "{server}\n{}", gateway.log());
    assert!(
        eventually(20, || async { state_held(&double, "keyed") == "Failed" }).await,
        "{:?}",
        double.get("mcpservers", Some("muster"), "keyed")
    );
    let status = double.get("mcpservers", Some("muster"), "keyed").expect("the resource")["status"].clone();
    assert!(
        status["lastError"]
            .as_str()
            .unwrap_or_default()
            .contains("headersFrom X-API-Key: Secret muster/keyed-api not found"),
        "{status}"
    );
    assert!(!listed(&client).await.iter().any(|t| t.starts_with("x_keyed_")));

    // The Secret appears (with the trailing newline an editor leaves): the next attempt reads it.
    let value = base64::engine::general_purpose::STANDARD.encode(format!("{KEY}\n"));
    double
        .put(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "keyed-api", "namespace": "muster"}, "data": {"token": value}}))
        .expect("stored");
    assert!(
        tool_shown(&client, "x_keyed_ping", true, 30).await,
        "{:?}\n{}",
        listed(&client).await,
        gateway.log()
    );
    let (ok, answer) = core(&client, "x_keyed_ping", json!({})).await;
    assert!(ok, "{answer}");
    assert_eq!(
        downstream
            .headers_of("ping")
            .last()
            .and_then(|h| h.get("x-api-key").cloned())
            .as_deref(),
        Some(KEY),
        "the value, without its newline, reached the server"
    );
    assert!(
        eventually(20, || async { state_held(&double, "keyed") == "Connected" }).await,
        "{:?}",
        double.get("mcpservers", Some("muster"), "keyed")
    );
    // The value never enters the core tools' output, the resource or the log.
    let (_, server) = core(&client, "core_mcpserver_get", json!({"name": "keyed"})).await;
    assert!(!server.to_string().contains(KEY), "{server}");
    let resource = double.get("mcpservers", Some("muster"), "keyed").expect("the resource");
    assert!(!resource.to_string().contains(KEY), "{resource}");
    assert!(!gateway.log().contains(KEY), "{}", gateway.log());
}
