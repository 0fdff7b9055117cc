//! [`KubeEvents`]: muster's events as Kubernetes Events (`events.k8s.io/v1`) on the object they
//! concern, the [`EventBackend`] of Kubernetes mode.
//!
//! Every event the gateway emits becomes one Event in the namespace of the MCPServer or
//! Workflow it is about, so `kubectl describe mcps <name>` and `kubectl get events` show it, and
//! `core_events` on any replica reads the events of every replica back.
//!
//! | Event field | from muster's event |
//! |---|---|
//! | `metadata.name` | `<resource name>.<16 hex digits>`, unique per replica and event (client-go names `<name>.<hex>` too) |
//! | `metadata.namespace`, `regarding.namespace` | the resource's namespace: `<namespace>_<name>` names a resource of `namespace`, another name one of muster's namespace |
//! | `regarding` | `apiVersion: muster.giantswarm.io/v1alpha1`, `kind` (MCPServer, Workflow), `name`, and the `uid` of the resource when it exists |
//! | `reason`, `action` | the reason (`MCPServerStarted`, ...), at most 128 characters |
//! | `note` | the message, cut on a character boundary to the API server's 1 KiB ([`NOTE_MAX_BYTES`]) with `…` |
//! | `type` | `Normal` or `Warning` |
//! | `eventTime` | when it happened, to the microsecond |
//! | `reportingController` | [`REPORTING_CONTROLLER`] (`muster.giantswarm.io/muster`) |
//! | `reportingInstance` | the replica: `POD_NAME`, else the host name ([`replica_name`]) |
//! | annotation [`DETAILS_ANNOTATION`] | the structured details (`EventDetails`) as JSON, when there are any |
//!
//! - **Writing never holds up the gateway.** [`record`](EventBackend::record) puts the event on
//!   a queue of [`QUEUE_CAPACITY`] that a task of this backend drains, one create at a time,
//!   each bounded by the timeout; a full queue drops the event (it stays in the replica's own
//!   memory) and a warning counts what was dropped. A refused create is logged with the API
//!   server's code, reason and message (once per run of failures, and again when writing works),
//!   never raised; a name taken already (409) is tried once more with another.
//! - **Before it is kept**, an event is [prepared](EventBackend::prepare) to what the Event will
//!   hold (its namespace, its time to the microsecond, its message and error text cut to 1 KiB),
//!   so the replica's own memory, its followers and the cluster agree.
//! - **Reading back** lists the Events of muster's namespace and of the additional namespaces
//!   (in pages of [`LIST_PAGE`]), selected on the server by `reportingController` and, as the
//!   query allows, `regarding.kind`, `regarding.name` and `type`; then converts them back,
//!   filters by time, sorts newest first and limits, as filesystem mode answers. Events another
//!   replica wrote are there; Events another controller wrote are not.
//! - **The API server keeps Events for its `--event-ttl`** (one hour by default), so
//!   `core_events` in Kubernetes mode reaches that far back. When the API server does not answer
//!   (within the timeout), the gateway answers from the replica's own memory.
//!
//! The ServiceAccount needs `create` and `list` on `events.k8s.io` `events` in every namespace
//! whose resources it serves, and `get` on the resources (for `regarding.uid`).
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! use muster_gateway::{
//!     events::{EventLog, EventLogOptions},
//!     registry::RegistryOptions,
//! };
//! use muster_kube::events::KubeEvents;
//!
//! let client = kube::Client::try_default().await?;
//! let events = KubeEvents::new(client, "muster").with_namespaces(["team-a"]);
//! let log = EventLog::with_backend(Arc::new(events), EventLogOptions::default());
//! let options = RegistryOptions::default().with_events(log);
//! # let _ = options;
//! # Ok(()) }
//! ```

use std::{
    collections::BTreeMap,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, SubsecRound, Utc};
use futures::future::BoxFuture;
use k8s_openapi::{
    api::{core::v1::ObjectReference, events::v1::Event as KubeEvent},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, PostParams},
};
use muster_core::{BoxError, crd::API_VERSION};
use muster_gateway::events::{
    Event, EventBackend, EventDetails, EventQuery, EventQueryResult, EventType, InvolvedObject, KIND_MCP_SERVER,
    KIND_WORKFLOW, SOURCE,
};
use tokio::{runtime::Handle, sync::mpsc};

use crate::{
    definitions::Kind,
    executions::{ApiFailure, DEFAULT_TIMEOUT, LIST_PAGE, fnv1a, is_resource_name, replica_name},
    naming::Naming,
};

/// The `reportingController` of muster's Events, by which muster finds its own.
pub const REPORTING_CONTROLLER: &str = "muster.giantswarm.io/muster";
/// The annotation holding an event's structured details as JSON.
pub const DETAILS_ANNOTATION: &str = "muster.giantswarm.io/event-details";
/// The most bytes of an Event's `note` (the API server refuses more).
pub const NOTE_MAX_BYTES: usize = 1024;
/// How many events may wait to be written before new ones are dropped.
pub const QUEUE_CAPACITY: usize = 1024;
/// The most characters of `reason`, `action` and `reportingInstance`.
const FIELD_MAX: usize = 128;

/// muster's events as Kubernetes Events; see the [module documentation](self).
pub struct KubeEvents {
    client: Client,
    naming: Naming,
    namespaces: Vec<String>,
    replica: String,
    timeout: Duration,
    runtime: Option<Handle>,
    /// The queue to the writing task, made with the task at the first event.
    queue: Mutex<Option<mpsc::Sender<Event>>>,
    dropped: Dropped,
}

impl std::fmt::Debug for KubeEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeEvents")
            .field("namespaces", &self.namespaces)
            .field("replica", &self.replica)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KubeEvents {
    /// Events written with `client` (muster's own) about the resources of `muster_namespace`,
    /// reported by the replica named by `POD_NAME` or else the host name ([`replica_name`]).
    ///
    /// Make it inside the tokio runtime that is to write the events; made elsewhere, it writes
    /// on the runtime of the thread that records the first event, if any.
    pub fn new(client: Client, muster_namespace: impl Into<String>) -> Self {
        let naming = Naming::new(muster_namespace);
        Self {
            client,
            namespaces: vec![naming.muster_namespace().to_owned()],
            naming,
            replica: replica_name(),
            timeout: DEFAULT_TIMEOUT,
            runtime: Handle::try_current().ok(),
            queue: Mutex::new(None),
            dropped: Dropped::default(),
        }
    }

    /// Also reads back the Events of `namespaces` (the gateway's `additionalNamespaces`).
    pub fn with_namespaces(mut self, namespaces: impl IntoIterator<Item = impl Into<String>>) -> Self {
        for namespace in namespaces {
            let namespace = namespace.into();
            if !self.namespaces.contains(&namespace) {
                self.namespaces.push(namespace);
            }
        }
        self
    }

    /// Reports the events as replica `replica` (in place of `POD_NAME` or the host name).
    pub fn with_replica(mut self, replica: impl Into<String>) -> Self {
        self.replica = replica.into();
        self
    }

    /// Waits at most `timeout` for the API server: per Event written, and per reading back.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The queue to the writing task, starting the task at the first call; `None` without a
    /// runtime to run it on.
    fn queue(&self) -> Option<mpsc::Sender<Event>> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.is_none() {
            let runtime = self.runtime.clone().or_else(|| Handle::try_current().ok())?;
            let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
            let writer = Writer {
                client: self.client.clone(),
                naming: self.naming.clone(),
                replica: self.replica.clone(),
                timeout: self.timeout,
                written: 0,
                uids: BTreeMap::new(),
            };
            runtime.spawn(writer.run(receiver));
            *queue = Some(sender);
        }
        queue.clone()
    }

    /// The Events `query` selects, from every namespace it may concern.
    async fn read(&self, query: &EventQuery) -> Result<EventQueryResult, ApiFailure> {
        let Some((namespaces, selector)) = self.selection(query) else {
            return Ok(EventQueryResult::default());
        };
        let mut events = Vec::new();
        for namespace in namespaces {
            let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), &namespace);
            let mut params = ListParams::default().fields(&selector).limit(LIST_PAGE);
            loop {
                let page = api.list(&params).await?;
                events.extend(page.items.into_iter().filter_map(|e| from_kube_event(e, &self.naming)));
                match page.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => break,
                }
            }
        }
        Ok(EventQueryResult::from_matches(events, query))
    }

    /// The namespaces to list and the field selector for `query`; `None` when no Event of
    /// muster's namespaces can match it.
    fn selection(&self, query: &EventQuery) -> Option<(Vec<String>, String)> {
        let mut terms = vec![format!("reportingController={REPORTING_CONTROLLER}")];
        let mut namespaces = self.namespaces.clone();
        if let Some(wanted) = &query.namespace {
            namespaces.retain(|n| n == wanted);
        }
        if let Some(gateway_name) = &query.resource_name {
            let (namespace, name) = self.naming.resource(gateway_name);
            namespaces.retain(|n| *n == namespace);
            terms.push(format!("regarding.name={name}"));
        }
        if let Some(kind) = &query.resource_type
            && let Some(known) = [KIND_MCP_SERVER, KIND_WORKFLOW]
                .into_iter()
                .find(|k| k.eq_ignore_ascii_case(kind))
        {
            terms.push(format!("regarding.kind={known}"));
        }
        if let Some(event_type) = query.event_type {
            terms.push(format!("type={event_type}"));
        }
        (!namespaces.is_empty()).then(|| (namespaces, terms.join(",")))
    }
}

impl EventBackend for KubeEvents {
    fn prepare(&self, event: &mut Event) {
        let (namespace, _) = self.naming.resource(event.name());
        event.involved_object.namespace.clone_from(&namespace);
        event.namespace = namespace;
        if is_muster_kind(event.kind()) {
            event.involved_object.api_version = API_VERSION.to_owned();
        }
        event.timestamp = event.timestamp.trunc_subsecs(6);
        event.reason = cut(&event.reason, FIELD_MAX);
        event.message = cut(&event.message, NOTE_MAX_BYTES);
        if let Some(error) = &mut event.data.error {
            *error = cut(error, NOTE_MAX_BYTES);
        }
    }

    fn record(&self, event: &Event) {
        let Some(queue) = self.queue() else {
            self.dropped.add("no async runtime to write Events on");
            return;
        };
        match queue.try_send(event.clone()) {
            Ok(()) => self.dropped.caught_up(),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.dropped.add("the API server is behind: Events are not written")
            }
            Err(mpsc::error::TrySendError::Closed(_)) => self.dropped.add("the Event writer has stopped"),
        }
    }

    fn query<'a>(&'a self, query: &'a EventQuery) -> BoxFuture<'a, Result<EventQueryResult, BoxError>> {
        Box::pin(async move {
            match tokio::time::timeout(self.timeout, self.read(query)).await {
                Ok(Ok(found)) => Ok(found),
                Ok(Err(failure)) => Err(BoxError::from(failure)),
                Err(_elapsed) => Err(BoxError::from(ApiFailure::TimedOut(self.timeout))),
            }
        })
    }
}

/// Events dropped before they were queued, counted while the queue refuses them.
#[derive(Debug, Default)]
struct Dropped {
    count: AtomicU64,
    dropping: AtomicBool,
}

impl Dropped {
    /// One more dropped; the first of a run is logged with `why`.
    fn add(&self, why: &str) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if !self.dropping.swap(true, Ordering::Relaxed) {
            tracing::warn!("{why}; events stay in this replica's memory only");
        }
    }

    /// The queue took an event again: the run of drops, if any, ends with its count.
    fn caught_up(&self) {
        if self.dropping.swap(false, Ordering::Relaxed) {
            let dropped = self.count.swap(0, Ordering::Relaxed);
            tracing::warn!(dropped, "writing Events again; the ones in between were not written");
        }
    }
}

/// The task writing the queued events, one create at a time.
struct Writer {
    client: Client,
    naming: Naming,
    replica: String,
    timeout: Duration,
    /// Events written (or tried), which makes each name unique within the replica.
    written: u64,
    /// The uids read lately, by kind, namespace and name, with when: a run's many step events
    /// read the Workflow once. One kept across a delete names the object that was deleted.
    uids: BTreeMap<(Kind, String, String), (Option<String>, std::time::Instant)>,
}

/// How long a uid read is reused.
const UID_REUSE: Duration = Duration::from_secs(30);

/// Most uids kept; past it they are all read again.
const UIDS_KEPT: usize = 4096;

impl Writer {
    async fn run(mut self, mut queue: mpsc::Receiver<Event>) {
        let mut failing = false;
        while let Some(event) = queue.recv().await {
            match self.write(&event).await {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("writing Events works again");
                }
                Ok(()) => {}
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(
                        kind = %event.kind(), name = %event.name(), reason = %event.reason, %error,
                        "cannot write an Event; it stays in this replica's memory (retrying with the next)"
                    );
                }
                Err(error) => tracing::debug!(name = %event.name(), %error, "cannot write an Event"),
            }
        }
    }

    async fn write(&mut self, event: &Event) -> Result<(), ApiFailure> {
        let (namespace, name) = self.naming.resource(event.name());
        let uid = self.uid(event.kind(), &namespace, &name).await;
        let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), &namespace);
        let mut retried = false;
        loop {
            let object_name = self.next_name(&name, event.timestamp);
            let object = to_kube_event(event, &namespace, &name, uid.clone(), &self.replica, object_name);
            match tokio::time::timeout(self.timeout, api.create(&PostParams::default(), &object)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(kube::Error::Api(status))) if status.code == 409 && !retried => retried = true,
                Ok(Err(error)) => return Err(ApiFailure::from(error)),
                Err(_elapsed) => return Err(ApiFailure::TimedOut(self.timeout)),
            }
        }
    }

    /// The uid of resource `namespace`/`name` of `kind`, when it exists and can be read (read
    /// again after [`UID_REUSE`]).
    async fn uid(&mut self, kind: &str, namespace: &str, name: &str) -> Option<String> {
        let kind = match kind {
            KIND_MCP_SERVER => Kind::MCPServer,
            KIND_WORKFLOW => Kind::Workflow,
            _ => return None,
        };
        if !is_resource_name(name) {
            return None;
        }
        let key = (kind, namespace.to_owned(), name.to_owned());
        if let Some((uid, at)) = self.uids.get(&key)
            && at.elapsed() < UID_REUSE
        {
            return uid.clone();
        }
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &kind.resource());
        let uid = match tokio::time::timeout(self.timeout, api.get_opt(name)).await {
            Ok(Ok(object)) => object.and_then(|o| o.metadata.uid),
            Ok(Err(error)) => {
                tracing::debug!(%error, namespace, name, "cannot read the resource of an Event; no uid");
                return None;
            }
            Err(_elapsed) => return None,
        };
        if self.uids.len() >= UIDS_KEPT {
            self.uids.clear();
        }
        self.uids.insert(key, (uid.clone(), std::time::Instant::now()));
        uid
    }

    /// `<name>.<16 hex digits>`: a hash of the replica, the time and a count, so no two events
    /// of one replica, nor of two, share a name. A name that is not a resource name is `muster`.
    fn next_name(&mut self, name: &str, at: DateTime<Utc>) -> String {
        self.written += 1;
        let seed = format!(
            "{}/{}/{}",
            self.replica,
            at.timestamp_nanos_opt().unwrap_or_default(),
            self.written
        );
        let suffix = format!(".{:016x}", fnv1a(seed.as_bytes()));
        let prefix = if is_resource_name(name) { name } else { "muster" };
        let mut prefix = prefix[..prefix.len().min(253 - suffix.len())].to_owned();
        while prefix.ends_with(['-', '.']) {
            prefix.pop();
        }
        prefix + &suffix
    }
}

fn is_muster_kind(kind: &str) -> bool {
    kind == KIND_MCP_SERVER || kind == KIND_WORKFLOW
}

/// `text` cut to at most `max` bytes on a character boundary, ending with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The Event `object_name` of `namespace` about `event`'s resource `name` there.
fn to_kube_event(
    event: &Event,
    namespace: &str,
    name: &str,
    uid: Option<String>,
    replica: &str,
    object_name: String,
) -> KubeEvent {
    let annotations = (!event.data.is_empty())
        .then(|| serde_json::to_string(&event.data).ok())
        .flatten()
        .map(|details| BTreeMap::from([(DETAILS_ANNOTATION.to_owned(), details)]));
    let reason = cut(&event.reason, FIELD_MAX);
    KubeEvent {
        metadata: ObjectMeta {
            name: Some(object_name),
            namespace: Some(namespace.to_owned()),
            annotations,
            ..ObjectMeta::default()
        },
        event_time: Timestamp::from_microsecond(event.timestamp.timestamp_micros())
            .ok()
            .map(MicroTime),
        regarding: Some(ObjectReference {
            api_version: is_muster_kind(event.kind()).then(|| API_VERSION.to_owned()),
            kind: Some(event.kind().to_owned()),
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            uid,
            ..ObjectReference::default()
        }),
        action: Some(reason.clone()),
        reason: Some(reason),
        note: Some(cut(&event.message, NOTE_MAX_BYTES)),
        type_: Some(event.event_type.as_str().to_owned()),
        reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
        reporting_instance: Some(cut(replica, FIELD_MAX)),
        ..KubeEvent::default()
    }
}

/// muster's event back from `object`; `None` for an Event muster did not write or one without a
/// time.
fn from_kube_event(object: KubeEvent, naming: &Naming) -> Option<Event> {
    if object.reporting_controller.as_deref() != Some(REPORTING_CONTROLLER) {
        return None;
    }
    let regarding = object.regarding.unwrap_or_default();
    let namespace = regarding
        .namespace
        .or(object.metadata.namespace)
        .unwrap_or_else(|| naming.muster_namespace().to_owned());
    let name = regarding.name.unwrap_or_default();
    let timestamp = object
        .event_time
        .and_then(|t| DateTime::from_timestamp_micros(t.0.as_microsecond()))?;
    let data = match object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DETAILS_ANNOTATION))
    {
        Some(details) => serde_json::from_str::<EventDetails>(details).unwrap_or_else(|error| {
            tracing::debug!(%error, "skipping the unreadable details of an Event");
            EventDetails::default()
        }),
        None => EventDetails::default(),
    };
    Some(Event {
        timestamp,
        involved_object: InvolvedObject {
            api_version: regarding.api_version.unwrap_or_default(),
            kind: regarding.kind.unwrap_or_default(),
            name: naming.gateway_name(&namespace, &name),
            namespace: namespace.clone(),
            uid: regarding.uid.unwrap_or_default(),
        },
        namespace,
        reason: object.reason.unwrap_or_default(),
        message: object.note.unwrap_or_default(),
        event_type: object.type_.as_deref().and_then(EventType::parse).unwrap_or_default(),
        source: SOURCE.to_owned(),
        count: object
            .series
            .and_then(|s| u32::try_from(s.count).ok())
            .unwrap_or_default(),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(replica: &str) -> Writer {
        Writer {
            client: Client::new(
                tower::service_fn(|_| async {
                    Err::<http::Response<kube::client::Body>, BoxError>("no API server".into())
                }),
                "muster",
            ),
            naming: Naming::new("muster"),
            replica: replica.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            written: 0,
            uids: BTreeMap::new(),
        }
    }

    #[test]
    fn text_is_cut_on_a_character_boundary_with_a_mark() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("abcdefghij", 10), "abcdefghij");
        assert_eq!(cut("abcdefghijk", 10), "abcdefg…");
        let cut_accents = cut(&"é".repeat(10), 10);
        assert_eq!(cut_accents, "ééé…", "{} bytes", cut_accents.len());
        assert!(cut(&"é".repeat(1000), NOTE_MAX_BYTES).len() <= NOTE_MAX_BYTES);
    }

    #[tokio::test]
    async fn event_names_are_resource_names_unique_per_replica_and_event() {
        let at = Utc::now();
        let mut one = writer("muster-one");
        let mut two = writer("muster-two");
        let first = one.next_name("git", at);
        let second = one.next_name("git", at);
        let other = two.next_name("git", at);
        assert!(first.starts_with("git.") && first.len() == 4 + 16, "{first}");
        assert!(first != second && first != other && second != other);
        let long = one.next_name(&format!("{}-x", "a".repeat(250)), at);
        assert!(long.len() <= 253 && is_resource_name(&long), "{long}");
        let odd = one.next_name("Not A Name", at);
        assert!(odd.starts_with("muster.") && is_resource_name(&odd), "{odd}");
    }
}
