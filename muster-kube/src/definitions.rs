//! MCPServer and Workflow resources as the gateway's definitions: read once at start, then
//! watched, each change handed to the registry as the snapshot of everything the watches hold.
//!
//! [`KubeDefinitions`] watches both kinds in muster's namespace and in each namespace configured
//! besides (kube-rs' watcher: a list, then a watch from its `resourceVersion`, with bookmarks).
//! It is filesystem mode's directory watch for the cluster:
//!
//! - **Only the changed definitions are touched.** Every change is handed on as a
//!   [`DefinitionSnapshot`] of all the watches hold; `Registry::apply_snapshot` turns it into
//!   the changes that make the registry hold exactly that, so a server whose definition is
//!   unchanged keeps its connection (a status write, which changes no spec, changes nothing).
//! - **A dropped watch recovers.** A watch that ends resumes from its last `resourceVersion`;
//!   one whose version is too old for the API server (410 Gone) lists again, and the new list
//!   is handed on whole once it is complete.
//! - **The API server away.** Failed requests are retried with backoff (kube-rs' default: up
//!   to about 2 minutes apart). Meanwhile nothing is handed on, so the gateway serves the last
//!   definitions it knew.
//!
//! A resource outside muster's namespace is named `<namespace>_<name>` in the gateway (a
//! Kubernetes name has no `_`, so it cannot collide with one in muster's namespace), and a
//! server's tools are exposed under `<namespace>_<toolPrefix or name>`, as the reference says
//! (the catalogue puts the namespace in front).
//!
//! ```no_run
//! # async fn run(registry: std::sync::Arc<muster_gateway::registry::Registry>) -> Result<(), kube::Error> {
//! use muster_kube::definitions::KubeDefinitions;
//!
//! let client = kube::Client::try_default().await?;
//! let definitions = KubeDefinitions::new(client, "muster").with_namespaces(["team-a"]);
//! registry.apply_snapshot(definitions.list().await?);
//! let registry = std::sync::Arc::downgrade(&registry);
//! let _watch = definitions.watch(move |snapshot| {
//!     if let Some(registry) = registry.upgrade() {
//!         registry.apply_snapshot(snapshot);
//!     }
//! });
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, stream::BoxStream};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, ListParams},
    runtime::{WatchStreamExt, watcher},
};
use muster_core::crd::{MCPServer, Workflow};
use muster_gateway::definitions::{DefinitionSnapshot, Origin, Sourced};
use serde::de::DeserializeOwned;

use crate::naming::Naming;

/// The two kinds muster reads as definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    MCPServer,
    Workflow,
}

impl Kind {
    pub(crate) fn resource(self) -> ApiResource {
        match self {
            Self::MCPServer => crate::crd::api_resource(MCPServer::KIND, "mcpservers"),
            Self::Workflow => crate::crd::api_resource(Workflow::KIND, "workflows"),
        }
    }
}

/// One watch: a kind in a namespace.
type WatchKey = (Kind, String);

/// What a watch yields, with the watch it came from.
type KeyedEvent = (WatchKey, Result<watcher::Event<DynamicObject>, watcher::Error>);

/// What the watches hold, by watch and name, as their events say.
#[derive(Debug, Default)]
struct WatchState {
    /// The watches there are.
    watches: BTreeSet<WatchKey>,
    /// What each watch that has listed holds.
    held: BTreeMap<WatchKey, BTreeMap<String, DynamicObject>>,
    /// What a watch that is listing (again) has received so far.
    listing: BTreeMap<WatchKey, BTreeMap<String, DynamicObject>>,
    /// The watches whose last request failed (told once until one succeeds).
    failing: BTreeSet<WatchKey>,
}

impl WatchState {
    fn new(watches: impl IntoIterator<Item = WatchKey>) -> Self {
        Self {
            watches: watches.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Takes `event` of watch `key`; `true` when what is held changed and every watch has
    /// listed, so that the whole is worth handing on. A list is taken whole at its end
    /// (`InitDone`), replacing what the watch held.
    fn on(&mut self, key: WatchKey, event: Result<watcher::Event<DynamicObject>, watcher::Error>) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                if self.failing.insert(key.clone()) {
                    tracing::warn!(kind = ?key.0, namespace = %key.1, %error,
                        "watching definitions failed; retrying with backoff, serving the last ones known");
                }
                return false;
            }
        };
        if self.failing.remove(&key) {
            tracing::info!(kind = ?key.0, namespace = %key.1, "watching definitions again");
        }
        match event {
            watcher::Event::Init => {
                self.listing.insert(key, BTreeMap::new());
                return false;
            }
            watcher::Event::InitApply(object) => {
                if let Some((name, object)) = named(object) {
                    self.listing.entry(key).or_default().insert(name, object);
                }
                return false;
            }
            watcher::Event::InitDone => {
                let listed = self.listing.remove(&key).unwrap_or_default();
                self.held.insert(key, listed);
            }
            watcher::Event::Apply(object) => {
                if let Some((name, object)) = named(object) {
                    self.held.entry(key).or_default().insert(name, object);
                }
            }
            watcher::Event::Delete(object) => {
                if let Some(name) = object.metadata.name {
                    self.held.entry(key).or_default().remove(&name);
                }
            }
        }
        self.watches.iter().all(|w| self.held.contains_key(w))
    }
}

/// MCPServer and Workflow resources of muster's namespace and of the namespaces configured
/// besides, as definitions.
#[derive(Clone)]
pub struct KubeDefinitions {
    client: Client,
    naming: Naming,
    namespaces: BTreeSet<String>,
    rejected: Rejections,
}

/// The Workflows the watches hold that muster cannot serve (they do not compile), with why, by
/// gateway name, as of the last snapshot: what their `status.validationErrors` says.
#[derive(Debug, Clone, Default)]
pub struct Rejections(std::sync::Arc<std::sync::Mutex<BTreeMap<String, Vec<String>>>>);

impl Rejections {
    /// The rejected Workflows and why.
    pub fn workflows(&self) -> BTreeMap<String, Vec<String>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn replace(&self, rejected: BTreeMap<String, Vec<String>>) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = rejected;
    }
}

impl std::fmt::Debug for KubeDefinitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeDefinitions")
            .field("muster_namespace", &self.naming.muster_namespace())
            .field("namespaces", &self.namespaces)
            .finish_non_exhaustive()
    }
}

impl KubeDefinitions {
    /// The definitions of `muster_namespace`, read through `client`.
    pub fn new(client: Client, muster_namespace: impl Into<String>) -> Self {
        let naming = Naming::new(muster_namespace);
        Self {
            client,
            namespaces: BTreeSet::from([naming.muster_namespace().to_owned()]),
            naming,
            rejected: Rejections::default(),
        }
    }

    /// Reads the definitions of `namespaces` too.
    pub fn with_namespaces(mut self, namespaces: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.namespaces.extend(namespaces.into_iter().map(Into::into));
        self
    }

    fn watches(&self) -> Vec<WatchKey> {
        [Kind::MCPServer, Kind::Workflow]
            .into_iter()
            .flat_map(|kind| self.namespaces.iter().map(move |ns| (kind, ns.clone())))
            .collect()
    }

    fn api(&self, (kind, namespace): &WatchKey) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &kind.resource())
    }

    /// The Workflows muster cannot serve, as the last snapshot found them (for their status).
    pub fn rejections(&self) -> Rejections {
        self.rejected.clone()
    }

    /// Every definition now: one list of each kind in each namespace. For the gateway's start;
    /// an error (the API server unreachable, no right to list) is the caller's to report.
    pub async fn list(&self) -> Result<DefinitionSnapshot, kube::Error> {
        let mut held = BTreeMap::new();
        for key in self.watches() {
            let listed = self.api(&key).list(&ListParams::default()).await?;
            let objects = listed.items.into_iter().filter_map(named).collect();
            held.insert(key, objects);
        }
        Ok(self.snapshot(&held))
    }

    /// Watches until the returned handle is dropped, handing `apply` the snapshot of every
    /// definition held after each change, once every watch has listed.
    pub fn watch(self, mut apply: impl FnMut(DefinitionSnapshot) + Send + 'static) -> WatchHandle {
        let streams: Vec<BoxStream<'static, KeyedEvent>> = self
            .watches()
            .into_iter()
            .map(|key| {
                let events = watcher(self.api(&key), watcher::Config::default()).default_backoff();
                events.map(move |event| (key.clone(), event)).boxed()
            })
            .collect();
        let task = tokio::spawn(async move {
            let mut state = WatchState::new(self.watches());
            let mut merged = futures::stream::select_all(streams);
            while let Some((key, event)) = merged.next().await {
                if state.on(key, event) {
                    apply(self.snapshot(&state.held));
                }
            }
        });
        WatchHandle { task }
    }

    /// The snapshot of `held`: each resource read as muster's type and named for the gateway.
    fn snapshot(&self, held: &BTreeMap<WatchKey, BTreeMap<String, DynamicObject>>) -> DefinitionSnapshot {
        let mut snapshot = DefinitionSnapshot::new(Origin::Other("Kubernetes".to_owned()));
        let mut rejected = BTreeMap::new();
        for ((kind, namespace), objects) in held {
            for (name, object) in objects {
                let origin = Origin::Other(format!("{} {namespace}/{name}", kind_name(*kind)));
                match kind {
                    // One that breaks muster's rules is held too: the policy reads it Failed.
                    Kind::MCPServer => match read::<MCPServer>(object) {
                        Ok(server) => snapshot
                            .servers
                            .push(Sourced::new(self.naming.server_for_gateway(server), origin)),
                        Err(error) => {
                            tracing::warn!(%origin, %error, "an MCPServer muster cannot read; keeping its last good definition");
                            snapshot.kept_servers.insert(self.naming.gateway_name(namespace, name));
                        }
                    },
                    Kind::Workflow => match read::<Workflow>(object).map_err(|e| vec![e]).and_then(valid_workflow) {
                        Ok(workflow) => snapshot
                            .workflows
                            .push(Sourced::new(self.naming.workflow_for_gateway(workflow), origin)),
                        Err(errors) => {
                            tracing::warn!(%origin, errors = %errors.join("; "), "a Workflow muster cannot serve; keeping its last good definition");
                            let name = self.naming.gateway_name(namespace, name);
                            snapshot.kept_workflows.insert(name.clone());
                            rejected.insert(name, errors);
                        }
                    },
                }
            }
        }
        self.rejected.replace(rejected);
        snapshot
    }
}

/// `object` as muster's type `T` (its status is observed state, not definition).
fn read<T: DeserializeOwned>(object: &DynamicObject) -> Result<T, String> {
    let mut value = serde_json::to_value(object).map_err(|e| e.to_string())?;
    if let Some(object) = value.as_object_mut() {
        object.remove("status");
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// `workflow`, if it compiles: the rules, its templates and its jq programs; else why not.
fn valid_workflow(workflow: Workflow) -> Result<Workflow, Vec<String>> {
    muster_workflow::engine::CompiledWorkflow::compile(workflow.clone()).map_err(|e| e.to_lines())?;
    Ok(workflow)
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::MCPServer => MCPServer::KIND,
        Kind::Workflow => Workflow::KIND,
    }
}

/// `object` with its name, unless it has none.
fn named(object: DynamicObject) -> Option<(String, DynamicObject)> {
    Some((object.metadata.name.clone()?, object))
}

/// Watches definitions while it is held; dropping it stops the watches.
#[derive(Debug)]
pub struct WatchHandle {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(kind: Kind, namespace: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
        let mut object = DynamicObject::new(name, &kind.resource()).within(namespace);
        object.data = json!({"spec": spec});
        object
    }

    fn server(namespace: &str, name: &str) -> DynamicObject {
        object(
            Kind::MCPServer,
            namespace,
            name,
            json!({"type": "streamable-http", "url": format!("https://{name}.example.com/mcp")}),
        )
    }

    fn key(kind: Kind, namespace: &str) -> WatchKey {
        (kind, namespace.to_owned())
    }

    fn names(state: &WatchState) -> Vec<String> {
        state
            .held
            .values()
            .flat_map(|objects| objects.keys().cloned())
            .collect()
    }

    #[test]
    fn nothing_is_handed_on_before_every_watch_listed_and_a_list_replaces_whole() {
        let servers = key(Kind::MCPServer, "muster");
        let workflows = key(Kind::Workflow, "muster");
        let mut state = WatchState::new([servers.clone(), workflows.clone()]);
        assert!(!state.on(servers.clone(), Ok(watcher::Event::Init)));
        assert!(!state.on(servers.clone(), Ok(watcher::Event::InitApply(server("muster", "a")))));
        assert!(!state.on(servers.clone(), Ok(watcher::Event::InitApply(server("muster", "b")))));
        assert!(
            !state.on(servers.clone(), Ok(watcher::Event::InitDone)),
            "the workflows are not listed yet"
        );
        assert!(!state.on(workflows.clone(), Ok(watcher::Event::Init)));
        assert!(state.on(workflows.clone(), Ok(watcher::Event::InitDone)));
        assert_eq!(names(&state), ["a", "b"]);

        assert!(state.on(servers.clone(), Ok(watcher::Event::Apply(server("muster", "c")))));
        assert!(state.on(servers.clone(), Ok(watcher::Event::Delete(server("muster", "a")))));
        assert_eq!(names(&state), ["b", "c"]);

        // The watch failed, and its version was too old: it lists again. What it held stays
        // until the new list is complete, which then replaces it.
        let failure = watcher::Error::NoResourceVersion;
        assert!(!state.on(servers.clone(), Err(failure)));
        assert!(!state.on(servers.clone(), Ok(watcher::Event::Init)));
        assert!(!state.on(servers.clone(), Ok(watcher::Event::InitApply(server("muster", "c")))));
        assert_eq!(names(&state), ["b", "c"], "served while the list runs");
        assert!(state.on(servers, Ok(watcher::Event::InitDone)));
        assert_eq!(names(&state), ["c"], "b was deleted while the watch was away");
    }

    fn definitions() -> KubeDefinitions {
        let unreachable = tower::service_fn(|_request: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                "no API server in this test",
            ))
        });
        KubeDefinitions::new(Client::new(unreachable, "muster"), "muster").with_namespaces(["team"])
    }

    #[tokio::test]
    async fn a_resource_outside_musters_namespace_is_named_for_its_namespace() {
        let definitions = definitions();
        let mut held = BTreeMap::new();
        let mut prefixed = server("team", "docs");
        prefixed.data["spec"]["toolPrefix"] = json!("kb");
        held.insert(
            key(Kind::MCPServer, "muster"),
            BTreeMap::from([("api".to_owned(), server("muster", "api"))]),
        );
        held.insert(
            key(Kind::MCPServer, "team"),
            BTreeMap::from([("api".to_owned(), server("team", "api")), ("docs".to_owned(), prefixed)]),
        );
        let snapshot = definitions.snapshot(&held);
        let named: Vec<(String, Option<String>)> = snapshot
            .servers
            .iter()
            .map(|s| {
                (
                    s.definition.metadata.name.clone(),
                    s.definition.spec.tool_prefix.clone(),
                )
            })
            .collect();
        assert_eq!(
            named,
            [
                ("api".to_owned(), None),
                ("team_api".to_owned(), Some("api".to_owned())),
                ("team_docs".to_owned(), Some("kb".to_owned())),
            ]
        );
    }

    #[tokio::test]
    async fn a_definition_muster_cannot_serve_keeps_its_last_good_one() {
        let definitions = definitions();
        let broken_workflow = object(
            Kind::Workflow,
            "muster",
            "broken",
            json!({"steps": [{"id": "a", "tool": "t", "args": {"x": "{{ .input.x "}}]}),
        );
        let broken_server = object(
            Kind::MCPServer,
            "team",
            "bad",
            json!({"type": "sse", "timeout": "soon"}),
        );
        // Read, but breaking a rule (no url): held, for the policy to read it Failed.
        let rule_breaker = object(Kind::MCPServer, "team", "nourl", json!({"type": "sse"}));
        let held = BTreeMap::from([
            (
                key(Kind::Workflow, "muster"),
                BTreeMap::from([("broken".to_owned(), broken_workflow)]),
            ),
            (
                key(Kind::MCPServer, "team"),
                BTreeMap::from([("bad".to_owned(), broken_server), ("nourl".to_owned(), rule_breaker)]),
            ),
        ]);
        let snapshot = definitions.snapshot(&held);
        assert!(snapshot.workflows.is_empty());
        let served: Vec<_> = snapshot
            .servers
            .iter()
            .map(|s| s.definition.metadata.name.as_str())
            .collect();
        assert_eq!(served, ["team_nourl"]);
        assert_eq!(snapshot.kept_workflows, BTreeSet::from(["broken".to_owned()]));
        assert_eq!(snapshot.kept_servers, BTreeSet::from(["team_bad".to_owned()]));
        let rejected = definitions.rejections().workflows();
        assert!(
            rejected["broken"].iter().any(|e| e.contains("unclosed action")),
            "why, for its status: {rejected:?}"
        );
    }
}
