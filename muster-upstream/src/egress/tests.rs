use std::sync::{
    Mutex,
    atomic::{AtomicUsize, Ordering},
};

use muster_core::{
    config::{AggregatorConfig, ServerApiConfig},
    crd::MCPServerSpec,
};

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an address")
}

#[test]
fn cloud_metadata_in_every_spelling_is_link_local() {
    for address in [
        "169.254.169.254",
        "169.254.0.1",
        "fe80::1",
        "febf::1",
        "::ffff:169.254.169.254",
        "::169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
        "fd00:ec2::254",
    ] {
        assert!(is_link_local(ip(address)), "{address}");
    }
}

#[test]
fn ordinary_addresses_are_not_link_local() {
    for address in [
        "127.0.0.1",
        "10.0.0.1",
        "8.8.8.8",
        "::1",
        "fec0::1",
        "2001:db8::1",
        "::ffff:10.0.0.1",
        "fd00:ec2::253",
    ] {
        assert!(!is_link_local(ip(address)), "{address}");
    }
}

#[test]
fn link_local_answers_are_dropped_and_a_name_with_only_those_is_refused() {
    let at = |a: &str| SocketAddr::new(ip(a), 0);
    let mixed = without_link_local(
        "rebound.test",
        vec![at("169.254.169.254"), at("10.0.0.7"), at("fe80::1")],
    );
    assert_eq!(mixed, Ok(vec![at("10.0.0.7")]));
    let only = without_link_local("imds.test", vec![at("169.254.169.254"), at("::ffff:169.254.169.254")]);
    let refused = only.expect_err("refused");
    assert_eq!(refused.host, "imds.test");
    assert!(refused.to_string().contains("allowLinkLocal"), "{refused}");
    assert_eq!(without_link_local("none.test", Vec::new()), Ok(Vec::new()));
}

fn through_api(server: MCPServer) -> MCPServer {
    let mut server = server;
    server
        .metadata
        .annotations
        .insert(REGISTERED_BY_ANNOTATION.to_owned(), "dana".to_owned());
    server
}

fn behind_front_door(api: ServerApiConfig) -> AggregatorConfig {
    let mut aggregator = AggregatorConfig::default();
    aggregator.oauth.server.enabled = true;
    aggregator.server_api = api;
    aggregator
}

#[test]
fn only_definitions_written_through_the_api_behind_the_front_door_are_held() {
    let file = MCPServer::new("tools", MCPServerSpec::default());
    let api = through_api(file.clone());
    let shared = behind_front_door(ServerApiConfig::default());
    assert_eq!(Egress::of(&api, &shared), Egress::NoLinkLocal);
    assert_eq!(Egress::of(&file, &shared), Egress::Open, "the operator's file");
    assert_eq!(
        Egress::of(&api, &AggregatorConfig::default()),
        Egress::Open,
        "single user"
    );
    let opted = behind_front_door(ServerApiConfig::default().with_allow_link_local(true));
    assert_eq!(Egress::of(&api, &opted), Egress::Open, "allowLinkLocal: true");
}

#[test]
fn address_literals_are_refused_when_the_transport_is_set_up() {
    for url in [
        "http://169.254.169.254/latest/meta-data",
        "http://[fd00:ec2::254]/",
        "https://[::ffff:169.254.169.254]:8443/mcp",
    ] {
        let url = url::Url::parse(url).expect("a URL");
        assert!(Egress::NoLinkLocal.check_url(&url).is_err(), "{url}");
        assert!(Egress::Open.check_url(&url).is_ok(), "{url}");
    }
    for url in ["http://127.0.0.1:9/mcp", "http://metadata.internal/mcp"] {
        let url = url::Url::parse(url).expect("a URL");
        assert!(Egress::NoLinkLocal.check_url(&url).is_ok(), "{url}");
    }
}

#[tokio::test]
async fn the_lane_resolution_refuses_a_link_local_literal_and_passes_loopback() {
    let refused = Egress::NoLinkLocal
        .resolve("169.254.169.254", 80)
        .await
        .expect_err("refused");
    assert!(refused.to_string().contains("link-local"), "{refused}");
    let open = Egress::Open.resolve("169.254.169.254", 80).await.expect("resolved");
    assert_eq!(open, vec![SocketAddr::new(ip("169.254.169.254"), 80)]);
    let loopback = Egress::NoLinkLocal.resolve("127.0.0.1", 8).await.expect("resolved");
    assert_eq!(loopback, vec![SocketAddr::new(ip("127.0.0.1"), 8)]);
}

/// A DNS server in a box: answers every name with the address it is set to, counting lookups.
#[derive(Default)]
struct Rebinding {
    answer: Mutex<Option<IpAddr>>,
    lookups: AtomicUsize,
}

impl reqwest::dns::Resolve for Rebinding {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        let answer = *self.answer.lock().expect("not poisoned");
        Box::pin(async move {
            let addresses: reqwest::dns::Addrs = Box::new(answer.map(|ip| SocketAddr::new(ip, 0)).into_iter());
            Ok(addresses)
        })
    }
}

/// The DNS-rebinding attack: a name that answered with loopback when the definition was checked
/// answers with the metadata address later. Each new connection resolves again, and is refused.
#[tokio::test]
async fn a_name_that_rebinds_to_a_link_local_address_is_refused_at_the_next_connection() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bound");
    let port = listener.local_addr().expect("an address").port();
    let app = axum::Router::new().route("/mcp", axum::routing::get(|| async { "ok" }));
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dns = Arc::new(Rebinding::default());
    *dns.answer.lock().expect("not poisoned") = Some(ip("127.0.0.1"));
    let client = reqwest::Client::builder()
        .dns_resolver(Arc::new(LinkLocalRefusing::over(dns.clone())))
        .pool_max_idle_per_host(0)
        .build()
        .expect("a client");
    let url = format!("http://rebound.test:{port}/mcp");
    let first = client.get(&url).send().await.expect("reached through loopback");
    assert_eq!(first.text().await.expect("a body"), "ok");

    *dns.answer.lock().expect("not poisoned") = Some(ip("169.254.169.254"));
    let refused = client.get(&url).send().await.expect_err("refused after the rebind");
    let chain = std::iter::successors(Some(&refused as &dyn std::error::Error), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ");
    assert!(
        chain.contains("rebound.test") && chain.contains("link-local"),
        "{chain}"
    );
    assert_eq!(dns.lookups.load(Ordering::SeqCst), 2, "one lookup per connection");
}
