//! [`KubeExecutionStore`]: workflow run records as WorkflowExecution resources, the
//! [`ExecutionStore`] of Kubernetes mode.
//!
//! Every `workflow_<name>` run is one WorkflowExecution in muster's namespace, named by its
//! execution id, so the history survives restarts, every replica sees every run, and
//! `kubectl get wfe` shows them. The records are muster's own: they are written with muster's
//! client (its ServiceAccount), never with the caller's identity.
//!
//! - **Writes** are server-side applies (field manager `muster`, forced): one request creates
//!   or replaces a record, whichever replica wrote it last. The stored copy goes through the
//!   same payload guard as filesystem mode ([`guard_payload`], 256 KiB), so a record always fits
//!   in etcd's object size limit.
//! - **Labels**: `muster.giantswarm.io/workflow` and `muster.giantswarm.io/status`, as the
//!   reference documents, plus `muster.giantswarm.io/replica`. A Kubernetes label value has at
//!   most 63 characters from `[A-Za-z0-9-_.]`, beginning and ending with a letter or digit. A
//!   workflow name that is already such a value is the label as it is (`kubectl get wfe -l
//!   muster.giantswarm.io/workflow=deploy` works); another is mapped to one
//!   ([`label_value`]): its invalid characters become `-`, it is cut to 46 characters, and a
//!   64-bit FNV-1a hash of the whole name follows (`-` and 16 hex digits). The mapping is
//!   stable across processes and versions. The spec keeps the name itself, and a listing
//!   filtered by workflow selects by label, then compares `spec.workflowName`, so two names
//!   mapped to one label never mix.
//! - **Reads**: `get` reads the resource; `list` lists with the label selectors the query's
//!   workflow and status filters give (in pages of [`LIST_PAGE`] from the API server), then
//!   sorts newest first and applies `offset` and `limit` as [`ExecutionQuery`] says, so `total`
//!   counts every matching record. Listing reads the whole matching records: with thousands of
//!   large records that is a lot to read for one page (see "Not modelled").
//! - **Retention**: `prune` removes records that began more than [`RETENTION_MAX_AGE_DAYS`](muster_workflow::record::RETENTION_MAX_AGE_DAYS)
//!   ago and all but the newest [`RETENTION_MAX_COUNT`](muster_workflow::record::RETENTION_MAX_COUNT), as filesystem mode does. Every replica
//!   runs it; a record another replica removed first (404) counts as gone.
//! - **Replicas**: each record carries the replica running it: the label
//!   `muster.giantswarm.io/replica` ([`label_value`] of the name) and the annotation of the same
//!   key (the name itself). The name is `POD_NAME` (the reference Deployment sets it from the
//!   downward API), else the host name. [`recover_interrupted`](ExecutionStore::recover_interrupted)
//!   marks failed only the `inprogress` records of *this* replica: another replica's runs are
//!   alive while it is. A record with no replica (written by an older muster, or by hand) is
//!   left alone too. The name must be unique among the replicas that run at one time, which
//!   pod names are; two processes on one host without `POD_NAME` would share the host name.
//!
//! # Sync over async
//!
//! [`ExecutionStore`] is synchronous, and the gateway calls it inside
//! `tokio::task::spawn_blocking`. Each method runs its requests with
//! [`Handle::block_on`](tokio::runtime::Handle::block_on) of the runtime the store was made in.
//! That is sound on a blocking-pool thread: such a thread has the runtime's handle but has not
//! entered the runtime, which is what `block_on` checks, and the kube client's requests run on
//! the runtime's own tasks (its buffer and connections), which the runtime keeps driving (with
//! a `current_thread` runtime too: its thread waits in the driver on the `spawn_blocking`
//! join). On a runtime worker thread `block_on` would panic ("Cannot start a runtime from
//! within a runtime"); the store catches that and answers an error instead, and it never blocks
//! a worker. Each call is bounded by a timeout ([`with_timeout`](KubeExecutionStore::with_timeout),
//! 10 s by default): kube's client retries a 503 for minutes, and a run waits for its record.
//!
//! # Errors
//!
//! [`RecordError`] has no variant for an API server yet, so a failed request is a
//! [`RecordError::Io`] whose `action` says what failed (`cannot write WorkflowExecution`),
//! whose `path` is the resource's API path (`namespaces/muster/workflowexecutions/<id>`), and
//! whose source (an `io::Error` of the matching kind: `PermissionDenied` for 403, `NotFound`,
//! `TimedOut`, ...) carries the API server's code, reason and message.
//!
//! # Not modelled
//!
//! Runs of a replica that never comes back under its name (a Deployment's replaced pod) stay
//! `inprogress` until retention removes them: nothing tells a dead replica from a slow one
//! without a heartbeat (e.g. a Lease per replica). Listing reads whole records, not a
//! metadata-only summary.
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use muster_gateway::GatewayOptions;
//! use muster_kube::executions::KubeExecutionStore;
//! use muster_workflow::record::ExecutionStore;
//!
//! let client = kube::Client::try_default().await?;
//! let store = Arc::new(KubeExecutionStore::new(client, "muster"));
//! // This replica's runs a previous process left in progress are failed runs now.
//! let recovering = Arc::clone(&store);
//! let failed = tokio::task::spawn_blocking(move || recovering.recover_interrupted(chrono::Utc::now())).await??;
//! # let _ = failed;
//! let options = GatewayOptions::default().with_executions(store);
//! # let _ = options;
//! # Ok(()) }
//! ```

use std::{future::Future, io, path::PathBuf, time::Duration};

use chrono::{DateTime, Utc};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams},
};
use muster_core::crd::{ExecutionStatus, WORKFLOW_LABEL, WORKFLOW_STATUS_LABEL, WorkflowExecution};
use muster_workflow::record::{
    ExecutionPage, ExecutionQuery, ExecutionStore, ExecutionSummary, RecordError, Result, expired, guard_payload,
    interrupted,
};
use tokio::runtime::Handle;

use crate::crd;

/// Label (a [`label_value`]) and annotation (the name itself) naming the replica that runs a
/// run.
pub const REPLICA_KEY: &str = "muster.giantswarm.io/replica";
/// The field manager of muster's server-side applies of records.
pub const FIELD_MANAGER: &str = "muster";
/// How many records one list request asks the API server for.
pub const LIST_PAGE: u32 = 250;
/// How long a method waits for the API server by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Workflow run records as WorkflowExecution resources in muster's namespace.
///
/// See the [module documentation](self).
#[derive(Clone)]
pub struct KubeExecutionStore {
    api: Api<DynamicObject>,
    namespace: String,
    replica: String,
    runtime: Option<Handle>,
    timeout: Duration,
}

impl std::fmt::Debug for KubeExecutionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeExecutionStore")
            .field("namespace", &self.namespace)
            .field("replica", &self.replica)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KubeExecutionStore {
    /// Records in `namespace`, written with `client` (muster's own), for the replica named by
    /// `POD_NAME` or else the host name ([`replica_name`]).
    ///
    /// Make it inside the tokio runtime whose blocking threads will call it (as `client` is);
    /// made elsewhere, it uses the runtime of the thread calling it, if any.
    pub fn new(client: Client, namespace: impl Into<String>) -> Self {
        let namespace = namespace.into();
        let resource = crd::api_resource(WorkflowExecution::KIND, "workflowexecutions");
        Self {
            api: Api::namespaced_with(client, &namespace, &resource),
            namespace,
            replica: replica_name(),
            runtime: Handle::try_current().ok(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Names this replica `replica` (in place of `POD_NAME` or the host name).
    pub fn with_replica(mut self, replica: impl Into<String>) -> Self {
        self.replica = replica.into();
        self
    }

    /// Waits at most `timeout` for the API server in each method.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The name of the replica this store writes runs as.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// muster's namespace, where the records are.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The API path of record `name`, as errors name it.
    fn path(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("namespaces/{}/workflowexecutions/{name}", self.namespace))
    }

    /// Runs `request` to completion on the store's runtime from this (blocking) thread, within
    /// the timeout; a failure is `action` on `path`.
    fn block<T>(
        &self,
        action: &'static str,
        path: PathBuf,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T> {
        let fail = |failure: ApiFailure| RecordError::Io {
            action,
            path: path.clone(),
            source: failure.into_io(),
        };
        let runtime = match self.runtime.clone().or_else(|| Handle::try_current().ok()) {
            Some(runtime) => runtime,
            None => return Err(fail(ApiFailure::NoRuntime)),
        };
        let timeout = self.timeout;
        // `block_on` panics on a runtime worker thread (the store was called outside
        // `spawn_blocking`): an error, not a panic, and the worker is not blocked.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(async { tokio::time::timeout(timeout, request).await })
        }));
        match ran {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(error))) => Err(fail(ApiFailure::from(error))),
            Ok(Err(_elapsed)) => Err(fail(ApiFailure::TimedOut(timeout))),
            Err(_panic) => Err(fail(ApiFailure::OnRuntimeThread)),
        }
    }

    /// Every record the label `selector` selects, read in pages of [`LIST_PAGE`].
    fn list_all(&self, selector: &str) -> Result<Vec<WorkflowExecution>> {
        let api = self.api.clone();
        let selector = selector.to_owned();
        let objects = self.block(
            "cannot list WorkflowExecutions",
            PathBuf::from(format!("namespaces/{}/workflowexecutions", self.namespace)),
            async move {
                let mut objects = Vec::new();
                let mut params = ListParams::default().labels(&selector).limit(LIST_PAGE);
                loop {
                    let page = api.list(&params).await?;
                    objects.extend(page.items);
                    match page.metadata.continue_.filter(|c| !c.is_empty()) {
                        Some(token) => params = params.continue_token(&token),
                        None => return Ok(objects),
                    }
                }
            },
        )?;
        let mut records = Vec::with_capacity(objects.len());
        for object in objects {
            let name = object.metadata.name.clone().unwrap_or_default();
            match from_object(object) {
                Ok(record) => records.push(record),
                // One damaged record does not hide the others; `get` names its fault.
                Err(error) => tracing::warn!(execution_id = %name, %error, "skipping an unreadable WorkflowExecution"),
            }
        }
        Ok(records)
    }

    /// Writes `execution` as it is (labels and annotations set here), by server-side apply.
    fn apply(&self, execution: &WorkflowExecution) -> Result<()> {
        let name = execution.metadata.name.clone();
        let document = self.document(execution)?;
        let api = self.api.clone();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.block("cannot write WorkflowExecution", self.path(&name), async move {
            api.patch(&name, &params, &Patch::Apply(&document)).await.map(drop)
        })
    }

    /// The resource document of `execution`: in muster's namespace, labelled with valid label
    /// values, with this replica as its runner.
    fn document(&self, execution: &WorkflowExecution) -> Result<serde_json::Value> {
        let mut stored = execution.clone();
        let metadata = &mut stored.metadata;
        metadata.namespace = Some(self.namespace.clone());
        metadata
            .labels
            .insert(WORKFLOW_LABEL.to_owned(), label_value(&stored.spec.workflow_name));
        metadata
            .labels
            .insert(WORKFLOW_STATUS_LABEL.to_owned(), stored.spec.status.as_str().to_owned());
        metadata
            .labels
            .insert(REPLICA_KEY.to_owned(), label_value(&self.replica));
        metadata
            .annotations
            .insert(REPLICA_KEY.to_owned(), self.replica.clone());
        serde_json::to_value(&stored).map_err(|source| RecordError::Json {
            id: stored.metadata.name.clone(),
            source,
        })
    }
}

impl ExecutionStore for KubeExecutionStore {
    fn put(&self, execution: &WorkflowExecution) -> Result<()> {
        if execution.metadata.name.trim().is_empty() {
            return Err(RecordError::MissingId);
        }
        self.apply(&guard_payload(execution))
    }

    fn get(&self, execution_id: &str) -> Result<Option<WorkflowExecution>> {
        // No resource can have a name that is not one; and such a name must not reach a URL.
        if !is_resource_name(execution_id) {
            return Ok(None);
        }
        let api = self.api.clone();
        let name = execution_id.to_owned();
        let object = self.block("cannot read WorkflowExecution", self.path(execution_id), async move {
            api.get_opt(&name).await
        })?;
        object.map(from_object).transpose()
    }

    fn list(&self, query: &ExecutionQuery) -> Result<ExecutionPage> {
        let Some(selector) = selector(query) else {
            return Ok(ExecutionPage::select(&[], query));
        };
        let summaries: Vec<ExecutionSummary> = self.list_all(&selector)?.iter().map(ExecutionSummary::of).collect();
        Ok(ExecutionPage::select(&summaries, query))
    }

    fn delete(&self, execution_id: &str) -> Result<bool> {
        if !is_resource_name(execution_id) {
            return Ok(false);
        }
        let api = self.api.clone();
        let name = execution_id.to_owned();
        self.block("cannot delete WorkflowExecution", self.path(execution_id), async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
                Err(error) => Err(error),
            }
        })
    }

    fn prune(&self, now: DateTime<Utc>) -> Result<usize> {
        let summaries: Vec<ExecutionSummary> = self.list_all("")?.iter().map(ExecutionSummary::of).collect();
        let mut removed = 0;
        for id in expired(&summaries, now) {
            match self.delete(&id) {
                // Gone already: another replica pruned it first.
                Ok(_) => removed += 1,
                // The next prune tries again.
                Err(error) => tracing::warn!(execution_id = %id, %error, "cannot remove an expired WorkflowExecution"),
            }
        }
        Ok(removed)
    }

    fn recover_interrupted(&self, now: DateTime<Utc>) -> Result<Vec<String>> {
        let selector = format!(
            "{WORKFLOW_STATUS_LABEL}={},{REPLICA_KEY}={}",
            ExecutionStatus::InProgress.as_str(),
            label_value(&self.replica)
        );
        let mut ours: Vec<WorkflowExecution> = self
            .list_all(&selector)?
            .into_iter()
            // The label of another name could map to ours; the annotation is the name itself.
            .filter(|e| e.metadata.annotations.get(REPLICA_KEY) == Some(&self.replica))
            .filter(|e| e.spec.status == ExecutionStatus::InProgress)
            .collect();
        ours.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut marked = Vec::with_capacity(ours.len());
        for execution in ours {
            let id = execution.metadata.name.clone();
            self.apply(&interrupted(execution, now))?;
            marked.push(id);
        }
        Ok(marked)
    }
}

/// The label selector of `query`'s filters, or `None` when they can match no record (status
/// `cancelled`).
fn selector(query: &ExecutionQuery) -> Option<String> {
    let mut terms = Vec::new();
    if let Some(name) = &query.workflow_name {
        terms.push(format!("{WORKFLOW_LABEL}={}", label_value(name)));
    }
    if let Some(filter) = query.status {
        let statuses: Vec<ExecutionStatus> = [
            ExecutionStatus::InProgress,
            ExecutionStatus::Completed,
            ExecutionStatus::Failed,
        ]
        .into_iter()
        .filter(|s| filter.matches(*s))
        .collect();
        match statuses.as_slice() {
            [] => return None,
            [one] => terms.push(format!("{WORKFLOW_STATUS_LABEL}={}", one.as_str())),
            // Several: `ExecutionPage::select` filters.
            _ => {}
        }
    }
    Some(terms.join(","))
}

/// The record `object` holds (labels as stored; server-set metadata dropped).
fn from_object(object: DynamicObject) -> Result<WorkflowExecution> {
    let id = object.metadata.name.clone().unwrap_or_default();
    serde_json::to_value(&object)
        .and_then(serde_json::from_value::<WorkflowExecution>)
        .map_err(|source| RecordError::Json { id, source })
}

/// The most characters of a label value.
const LABEL_VALUE_MAX: usize = 63;
/// The characters kept of a value that is mapped: 63 less `-` and 16 hex digits.
const MAPPED_PREFIX_MAX: usize = LABEL_VALUE_MAX - 17;

/// `value` as a valid Kubernetes label value: itself when it is one (at most 63 characters of
/// `[A-Za-z0-9-_.]`, beginning and ending with a letter or digit, or empty); otherwise its
/// invalid characters replaced by `-`, cut to 46 characters, trimmed to begin and end with a
/// letter or digit, then `-` and the 64-bit FNV-1a hash of `value` in 16 hex digits.
///
/// ```
/// use muster_kube::executions::label_value;
///
/// assert_eq!(label_value("deploy-app"), "deploy-app");
/// assert_eq!(label_value("team_deploy"), "team_deploy");
/// let mapped = label_value("déploie l'app");
/// assert!(mapped.starts_with("d-ploie-l-app-") && mapped.len() == 14 + 16);
/// assert!(label_value(&"x".repeat(100)).len() <= 63);
/// ```
pub fn label_value(value: &str) -> String {
    if is_label_value(value) {
        return value.to_owned();
    }
    let replaced: String = value
        .chars()
        .map(|c| if label_char(c) { c } else { '-' })
        .take(MAPPED_PREFIX_MAX)
        .collect();
    let prefix = replaced.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let hash = format!("{:016x}", fnv1a(value.as_bytes()));
    if prefix.is_empty() {
        hash
    } else {
        format!("{prefix}-{hash}")
    }
}

fn label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

fn is_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= LABEL_VALUE_MAX
            && value.chars().all(label_char)
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// 64-bit FNV-1a: a hash that is the same in every process and Rust version.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Whether `name` can name a resource: a DNS subdomain (at most 253 characters of lowercase
/// letters, digits, `-` and `.`, each part beginning and ending with a letter or digit), as an
/// execution UUID is.
pub(crate) fn is_resource_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// The name of this replica: `POD_NAME` (the reference Deployment sets it from the downward
/// API), else `HOSTNAME`, else the kernel's host name, else `unknown`.
pub fn replica_name() -> String {
    let set = |v: String| Some(v.trim().to_owned()).filter(|v| !v.is_empty());
    std::env::var("POD_NAME")
        .ok()
        .and_then(set)
        .or_else(|| std::env::var("HOSTNAME").ok().and_then(set))
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok().and_then(set))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Why a request to the API server failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiFailure {
    /// The API server answered with an error Status.
    #[error("the API server answered {code} {reason}: {message}")]
    Refused { code: u16, reason: String, message: String },
    /// The request did not get an answer (connection, TLS, decoding, ...).
    #[error("the API server could not be reached: {0}")]
    Unreachable(#[source] kube::Error),
    /// No answer within the store's timeout.
    #[error("no answer from the API server within {0:?}")]
    TimedOut(Duration),
    /// Called on a runtime worker thread, where it may not block.
    #[error("called on an async runtime thread: call an ExecutionStore inside tokio::task::spawn_blocking")]
    OnRuntimeThread,
    /// Called outside any tokio runtime, and made outside one.
    #[error("no tokio runtime to run the request on: make the store inside the runtime that calls it")]
    NoRuntime,
}

impl From<kube::Error> for ApiFailure {
    fn from(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => Self::Refused {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            other => Self::Unreachable(other),
        }
    }
}

impl ApiFailure {
    fn into_io(self) -> io::Error {
        let kind = match &self {
            Self::Refused { code: 401 | 403, .. } => io::ErrorKind::PermissionDenied,
            Self::Refused { code: 404, .. } => io::ErrorKind::NotFound,
            Self::Refused { code: 409, .. } => io::ErrorKind::AlreadyExists,
            Self::Refused { code: 400 | 422, .. } => io::ErrorKind::InvalidData,
            Self::TimedOut(_) => io::ErrorKind::TimedOut,
            Self::Unreachable(_) => io::ErrorKind::ConnectionRefused,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_label_value_is_kept_and_another_is_mapped_to_a_valid_stable_one() {
        for valid in ["", "a", "deploy", "team_deploy", "v1.2-x", &"a".repeat(63)] {
            assert_eq!(label_value(valid), valid);
        }
        for odd in [
            "-leading",
            "trailing.",
            "with space",
            "ünïcode",
            "a/b:c",
            "!!!",
            &"a".repeat(64),
            &"é".repeat(40),
        ] {
            let mapped = label_value(odd);
            assert!(is_label_value(&mapped) && !mapped.is_empty(), "{odd:?} -> {mapped:?}");
            assert_ne!(mapped, odd);
            assert_eq!(label_value(odd), mapped, "stable");
        }
        assert_ne!(label_value(&"a".repeat(64)), label_value(&"a".repeat(65)));
        // FNV-1a 64 of "a" (the published test vector): the same in every process.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_query_becomes_label_selectors() {
        use muster_workflow::record::StatusFilter;
        let all = ExecutionQuery::default();
        assert_eq!(selector(&all).as_deref(), Some(""));
        let q = ExecutionQuery::default()
            .with_workflow_name("a b")
            .with_status(StatusFilter::Running);
        assert_eq!(
            selector(&q),
            Some(format!(
                "{WORKFLOW_LABEL}={},{WORKFLOW_STATUS_LABEL}=inprogress",
                label_value("a b")
            ))
        );
        assert_eq!(
            selector(&ExecutionQuery::default().with_status(StatusFilter::Cancelled)),
            None
        );
    }

    #[test]
    fn only_dns_subdomains_are_resource_names() {
        assert!(is_resource_name("0b6f6f2e-5d7c-4a55-9d0e-6f4c1f1f3a11"));
        for bad in ["", "../x", "a/b", "UPPER", "-a", "a..b", &"a".repeat(254)] {
            assert!(!is_resource_name(bad), "{bad:?}");
        }
    }
}
