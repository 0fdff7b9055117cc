//! The API server double against real kube-rs clients over loopback HTTP: the verbs, watches
//! through kube's watcher, the status subresource, server-side apply, authorization and
//! impersonation, Secrets/Events/Leases (with kube-lease-manager), kubeconfigs and CEL.
#![cfg(feature = "test-util")]

use std::{collections::BTreeSet, future::Future, time::Duration};

use futures::{Stream, StreamExt};
use k8s_openapi::{
    ByteString,
    api::{
        coordination::v1::{Lease, LeaseSpec},
        core::v1::{ObjectReference, Secret},
        events::v1::Event,
    },
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Client, Config,
    api::{
        Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams,
        PostParams, WatchEvent, WatchParams,
    },
    config::{KubeConfigOptions, Kubeconfig},
    core::Status,
    runtime::{
        WatchStreamExt,
        reflector::{self, store::Writer},
        watcher,
    },
};
use muster_kube::testing::{ApiServerDouble, DoubleConfig};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const GROUP: &str = "muster.giantswarm.io";
const SA: &str = "system:serviceaccount:muster:muster";

fn mcpservers() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1alpha1", "MCPServer"), "mcpservers")
}

fn servers(client: Client) -> Api<DynamicObject> {
    Api::namespaced_with(client, "default", &mcpservers())
}

fn server(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "muster.giantswarm.io/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a valid MCPServer")
}

fn stdio(command: &str) -> Value {
    json!({"type": "stdio", "command": command})
}

/// The API error of a call that must fail.
fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn create_get_list_replace_delete_answer_as_the_api_server_does() {
    let double = ApiServerDouble::start().await;
    let api = servers(double.client());

    let created = api
        .create(&PostParams::default(), &server("alpha", stdio("a")))
        .await
        .expect("created");
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    let first_rv = created.metadata.resource_version.clone().expect("a resourceVersion");

    let again = api_error(api.create(&PostParams::default(), &server("alpha", stdio("a"))).await);
    assert_eq!((again.code, again.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(
        again.message,
        "mcpservers.muster.giantswarm.io \"alpha\" already exists"
    );

    let missing = api_error(api.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "mcpservers.muster.giantswarm.io \"nope\" not found");

    let mut labelled = server("beta", stdio("b"));
    labelled.metadata.labels = Some([("team".to_owned(), "x".to_owned())].into());
    api.create(&PostParams::default(), &labelled).await.expect("created");
    api.create(&PostParams::default(), &server("gamma", stdio("c")))
        .await
        .expect("created");

    let all = api.list(&ListParams::default()).await.expect("listed");
    let names: Vec<_> = all.items.iter().filter_map(|o| o.metadata.name.clone()).collect();
    assert_eq!(names, ["alpha", "beta", "gamma"]);
    assert!(
        all.items
            .iter()
            .all(|o| o.types.as_ref().is_some_and(|t| t.kind == "MCPServer"))
    );
    assert_eq!(
        all.metadata.resource_version,
        Some(double.resource_version().to_string())
    );
    let team = api.list(&ListParams::default().labels("team=x")).await.expect("listed");
    assert_eq!(team.items.len(), 1);
    let not_team = api
        .list(&ListParams::default().labels("team!=x"))
        .await
        .expect("listed");
    assert_eq!(not_team.items.len(), 2);
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=gamma"))
        .await
        .expect("listed");
    assert_eq!(by_name.items[0].metadata.name.as_deref(), Some("gamma"));

    let page = api.list(&ListParams::default().limit(2)).await.expect("first page");
    assert_eq!(page.items.len(), 2);
    let token = page.metadata.continue_.clone().expect("a continue token");
    let rest = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .expect("second page");
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.metadata.resource_version, page.metadata.resource_version);

    let metadata_only = api.list_metadata(&ListParams::default()).await.expect("listed");
    assert_eq!(metadata_only.items.len(), 3);

    let mut changed = api.get("alpha").await.expect("fetched");
    changed.data["spec"]["command"] = json!("a2");
    let replaced = api
        .replace("alpha", &PostParams::default(), &changed)
        .await
        .expect("replaced");
    assert_eq!(replaced.metadata.generation, Some(2));
    assert_ne!(replaced.metadata.resource_version.as_deref(), Some(first_rv.as_str()));

    let stale = api_error(api.replace("alpha", &PostParams::default(), &created).await);
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        stale.message,
        "Operation cannot be fulfilled on mcpservers.muster.giantswarm.io \"alpha\": the object has been modified; \
         please apply your changes to the latest version and try again"
    );

    let deleted = api.delete("alpha", &DeleteParams::default()).await.expect("deleted");
    let status = deleted.right().expect("a Status for an immediate deletion");
    assert_eq!(status.details.expect("details").name, "alpha");
    assert_eq!(api_error(api.get("alpha").await).code, 404);
    assert_eq!(api_error(api.delete("alpha", &DeleteParams::default()).await).code, 404);
}

#[tokio::test]
async fn names_finalizers_and_generate_name_follow_the_api_servers_rules() {
    let double = ApiServerDouble::start().await;
    let api = servers(double.client());

    let invalid = api_error(
        api.create(&PostParams::default(), &server("My_Server", stdio("a")))
            .await,
    );
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));
    assert!(
        invalid
            .message
            .starts_with("MCPServer.muster.giantswarm.io \"My_Server\" is invalid: metadata.name: Invalid value: \"My_Server\": a lowercase RFC 1123 subdomain"),
        "{}",
        invalid.message
    );

    let mut generated = server("", stdio("a"));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("srv-".to_owned());
    let created = api.create(&PostParams::default(), &generated).await.expect("created");
    let name = created.metadata.name.expect("a generated name");
    assert!(name.starts_with("srv-") && name.len() == 9, "{name}");

    let mut guarded = server("guarded", stdio("a"));
    guarded.metadata.finalizers = Some(vec!["muster.giantswarm.io/cleanup".to_owned()]);
    api.create(&PostParams::default(), &guarded).await.expect("created");
    let pending = api
        .delete("guarded", &DeleteParams::default())
        .await
        .expect("delete accepted")
        .left()
        .expect("the object, held by its finalizer");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(api.get("guarded").await.is_ok(), "still there while finalizers remain");
    api.patch(
        "guarded",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizer removed");
    assert_eq!(
        api_error(api.get("guarded").await).code,
        404,
        "gone with its last finalizer"
    );
}

/// A kube watcher (with a reflector) over MCPServers, its events forwarded to a channel.
struct Watched {
    events: mpsc::UnboundedReceiver<Result<watcher::Event<DynamicObject>, watcher::Error>>,
    store: reflector::Store<DynamicObject>,
}

impl Watched {
    fn start(client: Client) -> Self {
        let writer = Writer::new(mcpservers());
        let store = writer.as_reader();
        let stream = reflector::reflector(
            writer,
            watcher(servers(client), watcher::Config::default()).default_backoff(),
        );
        let (tx, events) = mpsc::unbounded_channel();
        tokio::spawn(forward(stream, tx));
        Self { events, store }
    }

    fn names(&self) -> BTreeSet<String> {
        self.store
            .state()
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect()
    }

    /// Waits for an event `pick` accepts, skipping others.
    async fn next_where(
        &mut self,
        what: &str,
        pick: impl Fn(&Result<watcher::Event<DynamicObject>, watcher::Error>) -> bool,
    ) {
        within(what, async {
            loop {
                let event = self.events.recv().await.expect("the watcher runs");
                if pick(&event) {
                    return;
                }
            }
        })
        .await;
    }
}

async fn forward<S>(stream: S, tx: mpsc::UnboundedSender<S::Item>)
where
    S: Stream,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        if tx.send(item).is_err() {
            return;
        }
    }
}

fn is_init_done(event: &Result<watcher::Event<DynamicObject>, watcher::Error>) -> bool {
    matches!(event, Ok(watcher::Event::InitDone))
}

fn applied(name: &'static str) -> impl Fn(&Result<watcher::Event<DynamicObject>, watcher::Error>) -> bool {
    move |event| matches!(event, Ok(watcher::Event::Apply(o)) if o.metadata.name.as_deref() == Some(name))
}

fn is_expired(event: &Result<watcher::Event<DynamicObject>, watcher::Error>) -> bool {
    matches!(event, Err(watcher::Error::WatchError(status)) if status.code == 410 && status.reason == "Expired")
}

#[tokio::test]
async fn the_kube_watcher_sees_additions_changes_and_deletions() {
    let double = ApiServerDouble::start().await;
    let api = servers(double.client());
    api.create(&PostParams::default(), &server("before", stdio("a")))
        .await
        .expect("created");
    let mut watched = Watched::start(double.client());
    watched.next_where("the initial list", is_init_done).await;
    assert_eq!(watched.names(), BTreeSet::from(["before".to_owned()]));

    api.create(&PostParams::default(), &server("new", stdio("a")))
        .await
        .expect("created");
    watched.next_where("ADDED new", applied("new")).await;
    api.patch(
        "new",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"command": "b"}})),
    )
    .await
    .expect("patched");
    watched
        .next_where(
            "MODIFIED new",
            |e| matches!(e, Ok(watcher::Event::Apply(o)) if o.data["spec"]["command"] == "b"),
        )
        .await;
    api.delete("before", &DeleteParams::default()).await.expect("deleted");
    watched
        .next_where(
            "DELETED before",
            |e| matches!(e, Ok(watcher::Event::Delete(o)) if o.metadata.name.as_deref() == Some("before")),
        )
        .await;
    assert_eq!(watched.names(), BTreeSet::from(["new".to_owned()]));
}

#[tokio::test]
async fn a_watcher_behind_a_compacted_history_gets_410_and_relists() {
    let double = ApiServerDouble::try_start(DoubleConfig::default().with_bookmark_interval(None))
        .await
        .expect("started");
    let api = servers(double.client());
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &server(name, stdio(name)))
            .await
            .expect("created");
    }
    let mut watched = Watched::start(double.client());
    watched.next_where("the initial list", is_init_done).await;
    eventually("the watch to be open", || open_watches(&double) == 1).await;
    let lists_before = list_requests(&double);

    // A write the MCPServer watch does not see moves the resourceVersion past it; compaction
    // then leaves the watch's resourceVersion behind the history.
    Api::<Secret>::namespaced(double.client(), "default")
        .create(&PostParams::default(), &secret("other", b"x"))
        .await
        .expect("created");
    double.compact();
    double.drop_watches();

    watched.next_where("the 410 Expired event", is_expired).await;
    watched.next_where("the second initial list", is_init_done).await;
    assert!(list_requests(&double) > lists_before, "the watcher listed again");
    assert_eq!(watched.names(), BTreeSet::from(["a".to_owned(), "b".to_owned()]));

    // And it watches on from the new list.
    api.create(&PostParams::default(), &server("c", stdio("c")))
        .await
        .expect("created");
    watched.next_where("ADDED c", applied("c")).await;
}

/// Watches of MCPServers the double has started (answered 200).
fn open_watches(double: &ApiServerDouble) -> usize {
    double
        .requests()
        .iter()
        .filter(|r| {
            r.path.ends_with("/mcpservers")
                && r.query.as_deref().unwrap_or_default().contains("watch=true")
                && r.status == 200
        })
        .count()
}

fn list_requests(double: &ApiServerDouble) -> usize {
    double
        .requests()
        .iter()
        .filter(|r| {
            r.method == "GET"
                && r.path.ends_with("/mcpservers")
                && !r.query.as_deref().unwrap_or_default().contains("watch=true")
        })
        .count()
}

/// A client that shows a 503 at once instead of retrying it as kube's default client does
/// (15 times with exponential backoff from 5 ms, minutes in all).
fn no_retry_client(double: &ApiServerDouble) -> Client {
    let mut config = double.config(muster_kube::testing::ADMIN_TOKEN);
    config.default_retry = false;
    Client::try_from(config).expect("a client")
}

#[tokio::test]
async fn watchers_recover_after_the_api_server_was_away() {
    let double = ApiServerDouble::try_start(DoubleConfig::default().with_bookmark_interval(None))
        .await
        .expect("started");
    let api = servers(double.client());
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &server(name, stdio(name)))
            .await
            .expect("created");
    }
    // kube's default client retries the 503s until the double is back; without retries the
    // watcher's own backoff carries it through.
    let mut retrying = Watched::start(double.client());
    let mut plain = Watched::start(no_retry_client(&double));
    retrying.next_where("the initial list", is_init_done).await;
    plain.next_where("the initial list", is_init_done).await;
    // Both watches are open: going away must end them (they would see the changes below
    // live otherwise, and never need to re-list).
    eventually("both watches to be open", || open_watches(&double) == 2).await;

    double.set_unavailable(true);
    let refused = api_error(servers(no_retry_client(&double)).list(&ListParams::default()).await);
    assert_eq!((refused.code, refused.reason.as_str()), (503, "ServiceUnavailable"));
    assert_eq!(refused.message, "the server is currently unable to handle the request");
    // Changes while it is away, then a compaction: neither watcher can resume, both re-list.
    double.delete("mcpservers", Some("default"), "a").expect("a existed");
    double
        .put(
            json!({"apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": "c", "namespace": "default"}, "spec": stdio("c")}),
        )
        .expect("stored");
    double.compact();
    plain
        .next_where("a failed reconnect", |e| {
            matches!(e, Err(watcher::Error::WatchStartFailed(_)))
        })
        .await;
    eventually("the retrying client to retry", || {
        double.requests().iter().filter(|r| r.status == 503).count() >= 4
    })
    .await;
    double.set_unavailable(false);

    retrying.next_where("the retrying watcher's 410", is_expired).await;
    plain.next_where("the plain watcher's 410", is_expired).await;
    let expected = BTreeSet::from(["b".to_owned(), "c".to_owned()]);
    eventually("both watchers to converge on b and c", || {
        retrying.names() == expected && plain.names() == expected
    })
    .await;
}

#[tokio::test]
async fn raw_watches_resume_filter_by_label_bookmark_and_expire() {
    let double = ApiServerDouble::start().await;
    let api = servers(double.client());
    let created = api
        .create(&PostParams::default(), &server("w", stdio("a")))
        .await
        .expect("created");
    let rv = created.metadata.resource_version.clone().expect("rv");

    let mut events = api
        .watch(&WatchParams::default().labels("watched=yes"), &rv)
        .await
        .expect("watching")
        .boxed();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"watched": "yes"}}})),
    )
    .await
    .expect("labelled");
    let first = within("an event", events.next()).await.expect("an event").expect("ok");
    assert!(
        matches!(first, WatchEvent::Added(_)),
        "starting to match is ADDED: {first:?}"
    );
    double.bookmark_now();
    let bookmark = within("a bookmark", events.next())
        .await
        .expect("an event")
        .expect("ok");
    match bookmark {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, double.resource_version().to_string()),
        other => panic!("expected a bookmark, got {other:?}"),
    }
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"watched": "no"}}})),
    )
    .await
    .expect("relabelled");
    let gone = within("an event", events.next()).await.expect("an event").expect("ok");
    assert!(
        matches!(gone, WatchEvent::Deleted(_)),
        "stopping to match is DELETED: {gone:?}"
    );

    double.compact();
    let mut expired = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("the watch starts")
        .boxed();
    match within("an event", expired.next()).await.expect("an event").expect("ok") {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert_eq!(
                status.message,
                format!("too old resource version: {rv} ({})", double.resource_version())
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(
        within("the end", expired.next()).await.is_none(),
        "the stream ends after the error"
    );
}

#[tokio::test]
async fn status_subresource_writes_touch_only_status_and_main_writes_never_do() {
    let double = ApiServerDouble::start().await;
    let api = servers(double.client());
    let mut with_status = server("s", stdio("a"));
    with_status.data["status"] = json!({"state": "Forged"});
    let created = api.create(&PostParams::default(), &with_status).await.expect("created");
    assert!(created.data.get("status").is_none(), "create drops status");

    let patched = api
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"state": "Running"}, "spec": {"command": "sneaky"}})),
        )
        .await
        .expect("status patched");
    assert_eq!(patched.data["status"]["state"], "Running");
    assert_eq!(
        patched.data["spec"]["command"], "a",
        "the status subresource ignores spec"
    );
    assert_eq!(
        patched.metadata.generation,
        Some(1),
        "status changes keep the generation"
    );

    let main = api
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"command": "b"}, "status": {"state": "Hacked"}})),
        )
        .await
        .expect("patched");
    assert_eq!(main.data["spec"]["command"], "b");
    assert_eq!(
        main.data["status"]["state"], "Running",
        "the main resource ignores status"
    );
    assert_eq!(main.metadata.generation, Some(2));

    let mut replaced = main.clone();
    replaced.data["spec"]["command"] = json!("c");
    replaced.data["status"]["state"] = json!("Ready");
    let after = api
        .replace_status("s", &PostParams::default(), &replaced)
        .await
        .expect("status replaced");
    assert_eq!(
        (
            after.data["spec"]["command"].clone(),
            after.data["status"]["state"].clone()
        ),
        (json!("b"), json!("Ready"))
    );

    // WorkflowExecutions have no status subresource: status is written with the object.
    let executions = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1alpha1", "WorkflowExecution"),
        "workflowexecutions",
    );
    let executions: Api<DynamicObject> = Api::namespaced_with(double.client(), "default", &executions);
    let mut execution: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "WorkflowExecution",
        "metadata": {"name": "run-1"}, "spec": {"workflow": "deploy"}, "status": {"phase": "Pending"},
    }))
    .expect("valid");
    execution = executions
        .create(&PostParams::default(), &execution)
        .await
        .expect("created");
    assert_eq!(execution.data["status"]["phase"], "Pending");
    assert_eq!(
        api_error(executions.get_status("run-1").await).code,
        404,
        "no status subresource"
    );
}

fn managers(object: &DynamicObject) -> Vec<(String, String, Option<String>)> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
                m.subresource.clone(),
            )
        })
        .collect()
}

fn owns(object: &DynamicObject, manager: &str, path: &[&str]) -> bool {
    object.metadata.managed_fields.iter().flatten().any(|m| {
        m.manager.as_deref() == Some(manager) && {
            let fields = serde_json::to_value(&m.fields_v1).expect("json");
            let pointer: String = path.iter().map(|p| format!("/f:{p}")).collect();
            fields.pointer(&pointer).is_some()
        }
    })
}

fn apply_body(spec: Value) -> Value {
    json!({"apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer", "metadata": {"name": "ssa"}, "spec": spec})
}

#[tokio::test]
async fn server_side_apply_tracks_owners_conflicts_and_removals() {
    let double = ApiServerDouble::start().await;
    let api = servers(double.client());
    let gitops = PatchParams::apply("gitops");
    let operator = PatchParams::apply("operator");

    let first = api
        .patch(
            "ssa",
            &gitops,
            &Patch::Apply(apply_body(json!({"type": "stdio", "command": "a", "args": ["x"]}))),
        )
        .await
        .expect("apply creates");
    assert_eq!(managers(&first), [("gitops".to_owned(), "Apply".to_owned(), None)]);
    assert!(owns(&first, "gitops", &["spec", "command"]));
    let entry = &first.metadata.managed_fields.as_ref().expect("managedFields")[0];
    assert_eq!(entry.fields_type.as_deref(), Some("FieldsV1"));
    assert_eq!(entry.api_version.as_deref(), Some("muster.giantswarm.io/v1alpha1"));

    let conflict = api_error(
        api.patch("ssa", &operator, &Patch::Apply(apply_body(json!({"command": "b"}))))
            .await,
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        conflict.message,
        "Apply failed with 1 conflict: conflict with \"gitops\": .spec.command"
    );

    let shared = api
        .patch("ssa", &operator, &Patch::Apply(apply_body(json!({"command": "a"}))))
        .await
        .expect("the same value is co-owned");
    assert!(owns(&shared, "gitops", &["spec", "command"]) && owns(&shared, "operator", &["spec", "command"]));

    let forced = api
        .patch(
            "ssa",
            &operator.clone().force(),
            &Patch::Apply(apply_body(json!({"command": "b"}))),
        )
        .await
        .expect("force takes over");
    assert_eq!(forced.data["spec"]["command"], "b");
    assert!(
        !owns(&forced, "gitops", &["spec", "command"]),
        "gitops lost .spec.command"
    );
    assert!(owns(&forced, "gitops", &["spec", "args"]));

    let trimmed = api
        .patch("ssa", &gitops, &Patch::Apply(apply_body(json!({"type": "stdio"}))))
        .await
        .expect("gitops applies less");
    assert!(
        trimmed.data["spec"].get("args").is_none(),
        "args only gitops owned: removed"
    );
    assert_eq!(trimmed.data["spec"]["command"], "b", "command is the operator's: kept");

    // A merge patch is an Update: it takes the field without conflict, and the appliers lose it.
    let updated = api
        .patch(
            "ssa",
            &PatchParams {
                field_manager: Some("kubectl-edit".to_owned()),
                ..Default::default()
            },
            &Patch::Merge(json!({"spec": {"command": "c"}})),
        )
        .await
        .expect("updated");
    assert!(owns(&updated, "kubectl-edit", &["spec", "command"]));
    let after_update = api_error(
        api.patch("ssa", &operator, &Patch::Apply(apply_body(json!({"command": "d"}))))
            .await,
    );
    assert_eq!(
        after_update.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using muster.giantswarm.io/v1alpha1: .spec.command"
    );

    let status = api
        .patch_status(
            "ssa",
            &PatchParams::apply("status-writer"),
            &Patch::Apply(
                json!({"apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer",
                "metadata": {"name": "ssa"}, "status": {"state": "Running"}}),
            ),
        )
        .await
        .expect("status applied");
    assert!(managers(&status).contains(&(
        "status-writer".to_owned(),
        "Apply".to_owned(),
        Some("status".to_owned())
    )));

    let unchanged_rv = status.metadata.resource_version.clone();
    let again = api
        .patch(
            "ssa",
            &PatchParams::apply("gitops"),
            &Patch::Apply(apply_body(json!({"type": "stdio"}))),
        )
        .await
        .expect("a no-op apply");
    assert_eq!(
        again.metadata.resource_version, unchanged_rv,
        "no change, no new resourceVersion"
    );
}

#[tokio::test]
async fn impersonation_is_authorized_and_audited_as_the_api_server_does() {
    let double = ApiServerDouble::start().await;
    double.add_token(
        "sa-token",
        SA,
        &["system:serviceaccounts", "system:serviceaccounts:muster"],
    );
    double.add_token("other-token", "system:serviceaccount:muster:other", &[]);
    double.allow(SA, &["impersonate"], "", "users", None);
    double.allow(SA, &["impersonate"], "", "groups", None);

    let as_alice = servers(double.client_impersonating("sa-token", "alice", &["muster-users"]));
    let denied = api_error(as_alice.create(&PostParams::default(), &server("x", stdio("a"))).await);
    assert_eq!((denied.code, denied.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        denied.message,
        "mcpservers.muster.giantswarm.io is forbidden: User \"alice\" cannot create resource \"mcpservers\" \
         in API group \"muster.giantswarm.io\" in the namespace \"default\""
    );
    let details = denied.details.expect("details");
    assert_eq!((details.group.as_str(), details.kind.as_str()), (GROUP, "mcpservers"));
    let get_denied = api_error(as_alice.get("x").await);
    assert_eq!(
        get_denied.message,
        "mcpservers.muster.giantswarm.io \"x\" is forbidden: User \"alice\" cannot get resource \"mcpservers\" \
         in API group \"muster.giantswarm.io\" in the namespace \"default\""
    );

    // Rights through a group the impersonated user is put in.
    double.allow("muster-users", &["create", "get"], GROUP, "mcpservers", Some("default"));
    as_alice
        .create(&PostParams::default(), &server("x", stdio("a")))
        .await
        .expect("alice may create now");
    let audit = double.audit_log();
    let last = audit.last().expect("an audit entry");
    assert_eq!(
        (last.user.as_str(), last.impersonated_by.as_deref(), last.verb.as_str()),
        ("alice", Some(SA), "create")
    );
    assert_eq!(
        (last.resource.as_str(), last.namespace.as_deref(), last.name.as_str()),
        ("mcpservers", Some("default"), "x")
    );
    let in_other_namespace: Api<DynamicObject> = Api::namespaced_with(
        double.client_impersonating("sa-token", "alice", &["muster-users"]),
        "elsewhere",
        &mcpservers(),
    );
    assert_eq!(
        api_error(
            in_other_namespace
                .create(&PostParams::default(), &server("y", stdio("a")))
                .await
        )
        .code,
        403
    );

    let not_allowed = servers(double.client_impersonating("other-token", "alice", &[]));
    let refused = api_error(not_allowed.get("x").await);
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "users \"alice\" is forbidden: User \"system:serviceaccount:muster:other\" cannot impersonate resource \
         \"users\" in API group \"\" at the cluster scope"
    );

    let unknown = api_error(servers(double.client_as("who-knows")).get("x").await);
    assert_eq!((unknown.code, unknown.reason.as_str()), (401, "Unauthorized"));

    let logged = double.requests();
    assert!(logged.iter().any(|r| r.user.as_deref() == Some(SA)
        && r.impersonated_user.as_deref() == Some("alice")
        && r.method == "POST"
        && r.status == 201));
}

#[tokio::test]
async fn a_service_account_may_be_allowed_everything() {
    let double = ApiServerDouble::start().await;
    double.add_token("sa-token", SA, &[]);
    double.add_token("nobody-token", "nobody", &[]);
    double.allow_all(SA);
    let api = servers(double.client_as("sa-token"));
    api.create(&PostParams::default(), &server("x", stdio("a")))
        .await
        .expect("allowed");
    api.patch_status(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"state": "Running"}})),
    )
    .await
    .expect("status too");
    let denied = api_error(
        servers(double.client_as("nobody-token"))
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        denied.message,
        "mcpservers.muster.giantswarm.io is forbidden: User \"nobody\" cannot list resource \"mcpservers\" \
         in API group \"muster.giantswarm.io\" in the namespace \"default\""
    );
}

fn secret(name: &str, password: &[u8]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        data: Some([("password".to_owned(), ByteString(password.to_vec()))].into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn secrets_events_and_leases_round_trip() {
    let double = ApiServerDouble::start().await;
    let secrets: Api<Secret> = Api::namespaced(double.client(), "default");
    secrets
        .create(&PostParams::default(), &secret("token", b"hunter2"))
        .await
        .expect("created");
    let stored = double.get("secrets", Some("default"), "token").expect("stored");
    assert_eq!(stored["data"]["password"], "aHVudGVyMg==", "data is base64 on the wire");
    assert!(
        stored["metadata"].get("generation").is_none(),
        "built-in types carry no generation"
    );
    let read = secrets.get("token").await.expect("read");
    assert_eq!(read.data.expect("data")["password"].0, b"hunter2");

    let events: Api<Event> = Api::namespaced(double.client(), "default");
    for (name, regarding) in [("e1", "x"), ("e2", "y")] {
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            event_time: Some(MicroTime(Timestamp::now())),
            regarding: Some(ObjectReference {
                kind: Some("MCPServer".to_owned()),
                name: Some(regarding.to_owned()),
                namespace: Some("default".to_owned()),
                ..Default::default()
            }),
            reason: Some("Started".to_owned()),
            note: Some("server started".to_owned()),
            type_: Some("Normal".to_owned()),
            action: Some("Start".to_owned()),
            reporting_controller: Some("muster.giantswarm.io/gateway".to_owned()),
            reporting_instance: Some("gateway-0".to_owned()),
            ..Default::default()
        };
        events.create(&PostParams::default(), &event).await.expect("created");
    }
    let about_x = events
        .list(&ListParams::default().fields("regarding.name=x"))
        .await
        .expect("listed");
    assert_eq!(about_x.items.len(), 1);
    assert_eq!(about_x.items[0].metadata.name.as_deref(), Some("e1"));
    let unsupported = api_error(events.list(&ListParams::default().fields("note=x")).await);
    assert_eq!(
        (unsupported.code, unsupported.message.as_str()),
        (400, "field label not supported: note")
    );

    let leases: Api<Lease> = Api::namespaced(double.client(), "default");
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("leader".to_owned()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("a".to_owned()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    };
    let created = leases.create(&PostParams::default(), &lease).await.expect("created");
    let mut taken = created.clone();
    taken.spec.as_mut().expect("spec").holder_identity = Some("b".to_owned());
    let replaced = leases
        .replace("leader", &PostParams::default(), &taken)
        .await
        .expect("replaced");
    let stale = api_error(leases.replace("leader", &PostParams::default(), &created).await);
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert!(
        stale
            .message
            .starts_with("Operation cannot be fulfilled on leases.coordination.k8s.io \"leader\"")
    );
    let patched = leases
        .patch(
            "leader",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"leaseTransitions": 1}})),
        )
        .await
        .expect("strategic merge patches work on built-in types");
    assert_eq!(patched.spec.expect("spec").lease_transitions, Some(1));
    assert_ne!(patched.metadata.resource_version, replaced.metadata.resource_version);

    let strategic_on_crd = api_error(
        servers(double.client())
            .patch("x", &PatchParams::default(), &Patch::Strategic(json!({"spec": {}})))
            .await,
    );
    assert_eq!(
        strategic_on_crd.code, 415,
        "custom resources take no strategic merge patch"
    );
}

#[tokio::test]
async fn two_lease_managers_never_hold_the_lease_together() {
    use kube_lease_manager::LeaseManagerBuilder;

    let double = ApiServerDouble::start().await;
    let build = |identity: &'static str| {
        LeaseManagerBuilder::new(double.client(), "gateway-leader")
            .with_namespace("default")
            .with_identity(identity)
            .with_duration(3)
            .with_grace(1)
            .build()
    };
    let (first, second) = (build("gw-1").await.expect("built"), build("gw-2").await.expect("built"));
    let (first_rx, first_task) = first.watch().await;
    let (second_rx, second_task) = second.watch().await;

    let holder = |double: &ApiServerDouble| {
        double
            .get("leases", Some("default"), "gateway-leader")
            .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
    };
    eventually("one manager to lead", || *first_rx.borrow() || *second_rx.borrow()).await;
    // Through a few renewals, exactly one leads and the lease names it.
    for _ in 0..20 {
        let (a, b) = (*first_rx.borrow(), *second_rx.borrow());
        assert!(a != b, "exactly one leader (gw-1 {a}, gw-2 {b})");
        let expected = if a { "gw-1" } else { "gw-2" };
        assert_eq!(holder(&double).as_deref(), Some(expected));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let leader_was_first = *first_rx.borrow();
    let leader = if leader_was_first { "gw-1" } else { "gw-2" };

    // The lock is the leader's server-side apply of the holder: another applier conflicts.
    let leases: Api<Lease> = Api::namespaced(double.client(), "default");
    let intruder = api_error(
        leases
            .patch(
                "gateway-leader",
                &PatchParams::apply("intruder"),
                &Patch::Apply(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "gateway-leader"}, "spec": {"holderIdentity": "intruder"}})),
            )
            .await,
    );
    // (kube-lease-manager names its field manager after an identity of its own.)
    assert!(
        intruder
            .message
            .starts_with("Apply failed with 1 conflict: conflict with \"kube-lease-manager-")
            && intruder.message.ends_with("\": .spec.holderIdentity"),
        "{}",
        intruder.message
    );

    // The leader steps down (its channel closes, it releases); the other takes over.
    let (leader_task, follower_rx) = if leader_was_first {
        drop(first_rx);
        (first_task, second_rx)
    } else {
        drop(second_rx);
        (second_task, first_rx)
    };
    within("the leader to release", leader_task)
        .await
        .expect("the task ends")
        .expect("released cleanly");
    eventually("the follower to lead", || *follower_rx.borrow()).await;
    let follower = if leader == "gw-1" { "gw-2" } else { "gw-1" };
    eventually("the lease to name the follower", || {
        holder(&double).as_deref() == Some(follower)
    })
    .await;
}

#[tokio::test]
async fn a_kubeconfig_written_by_the_double_reaches_it_with_the_token() {
    let double = ApiServerDouble::start().await;
    double.add_token("gw-token", SA, &[]);
    let path = std::env::temp_dir().join(format!(
        "muster-double-{}-{}.kubeconfig",
        std::process::id(),
        double.addr().port()
    ));
    double.write_kubeconfig(&path, "gw-token", "muster").expect("written");

    let kubeconfig = Kubeconfig::read_from(&path).expect("kube reads it");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a config");
    std::fs::remove_file(&path).expect("removed");
    assert_eq!(config.default_namespace, "muster");
    let client = Client::try_from(config).expect("a client");
    Api::<Secret>::default_namespaced(client)
        .create(&PostParams::default(), &secret("from-kubeconfig", b"x"))
        .await
        .expect("created");
    assert!(double.get("secrets", Some("muster"), "from-kubeconfig").is_some());
    let request = double.requests().into_iter().last().expect("a request");
    assert_eq!(request.user.as_deref(), Some(SA));
    assert_eq!(request.path, "/api/v1/namespaces/muster/secrets");
}

fn mcpserver_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["stdio", "streamable-http", "sse"]},
                    "command": {"type": "string"},
                    "autoStart": {"type": "boolean", "default": false},
                },
                "required": ["type"],
                "x-kubernetes-validations": [{
                    "rule": "self.type != 'stdio' || has(self.command)",
                    "message": "command is required when type is stdio",
                }],
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
        "x-kubernetes-validations": [{"rule": "self.metadata.name.size() <= 12"}],
    })
}

#[tokio::test]
async fn cel_rules_of_a_registered_schema_are_enforced_with_the_api_servers_message() {
    let double = ApiServerDouble::start()
        .await
        .with_schema("mcpservers", mcpserver_schema());
    let api = servers(double.client());

    let invalid = api_error(
        api.create(&PostParams::default(), &server("bad", json!({"type": "stdio"})))
            .await,
    );
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        invalid.message,
        "MCPServer.muster.giantswarm.io \"bad\" is invalid: spec: Invalid value: \"object\": command is required when type is stdio"
    );
    let cause = &invalid.details.expect("details").causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str()),
        ("FieldValueInvalid", "spec")
    );

    let long = api_error(
        api.create(&PostParams::default(), &server("much-too-long-a-name", stdio("a")))
            .await,
    );
    assert_eq!(
        long.message,
        "MCPServer.muster.giantswarm.io \"much-too-long-a-name\" is invalid: <nil>: Invalid value: \"object\": \
         failed rule: self.metadata.name.size() <= 12"
    );

    let created = api
        .create(&PostParams::default(), &server("good", stdio("a")))
        .await
        .expect("valid");
    assert_eq!(created.data["spec"]["autoStart"], false, "schema defaults are applied");

    let removed = api_error(
        api.patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"command": null}})),
        )
        .await,
    );
    assert_eq!(
        (removed.code, removed.reason.as_str()),
        (422, "Invalid"),
        "patches are admitted too"
    );
    let applied = api_error(
        api.patch(
            "fresh",
            &PatchParams::apply("gitops"),
            &Patch::Apply(
                json!({"apiVersion": "muster.giantswarm.io/v1alpha1", "kind": "MCPServer",
                "metadata": {"name": "fresh"}, "spec": {"type": "stdio"}}),
            ),
        )
        .await,
    );
    assert_eq!(applied.code, 422, "and applies");
    assert!(double.get("mcpservers", Some("default"), "fresh").is_none());
}

#[tokio::test]
async fn kube_discovery_finds_the_served_types() {
    use kube::discovery::{Discovery, Scope};

    let double = ApiServerDouble::start().await;
    let client = double.client();
    let version = client.apiserver_version().await.expect("a version");
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));
    let discovery = Discovery::new(client).run().await.expect("discovered");
    let group = discovery.get(GROUP).expect("muster's group");
    let (resource, caps) = group.recommended_kind("MCPServer").expect("MCPServer is served");
    assert_eq!(
        (resource.plural.as_str(), resource.version.as_str()),
        ("mcpservers", "v1alpha1")
    );
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.subresources.iter().any(|(sub, _)| sub.plural == "status"));
    let (_, execution_caps) = group.recommended_kind("WorkflowExecution").expect("served");
    assert!(execution_caps.subresources.is_empty(), "no status subresource");
    let (secrets, _) = discovery
        .get("")
        .and_then(|core| core.recommended_kind("Secret"))
        .expect("core Secrets");
    assert_eq!(secrets.api_version, "v1");
    assert!(discovery.get("coordination.k8s.io").is_some() && discovery.get("events.k8s.io").is_some());
}
