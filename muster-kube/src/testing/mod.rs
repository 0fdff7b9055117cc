//! An in-memory API server on a loopback port that kube-rs clients (and a gateway process,
//! through a kubeconfig) talk plain HTTP to.
//!
//! It serves what muster depends on, with the real server's answers: Secrets, `events.k8s.io`
//! Events, Leases and muster's custom resources (MCPServer, Workflow, WorkflowExecution) by
//! default, more with [`ApiServerDouble::add_resource_type`](crate::testing::ApiServerDouble::add_resource_type). Per type: get, list (label and
//! field selectors, `limit`/`continue`), watch (resourceVersion resume, bookmarks, 410 on a
//! compacted history), create, replace (resourceVersion conflicts), delete (finalizers,
//! preconditions), merge and JSON patches and server-side apply with field ownership and
//! conflicts; the status subresource; `uid`, `resourceVersion`, `generation`,
//! `creationTimestamp` and `managedFields`; bearer tokens, RBAC-style rules, impersonation;
//! the validation of `events.k8s.io` Events at create; and, for a type given a schema, CEL
//! admission. Errors are `Status` bodies worded as the API
//! server words them, so `kube::Error::Api` carries the same code, reason and message.
//!
//! Tests steer it directly: [`compact`](crate::testing::ApiServerDouble::compact) the history,
//! [`drop_watches`](crate::testing::ApiServerDouble::drop_watches), make it
//! [unavailable](crate::testing::ApiServerDouble::set_unavailable), send a
//! [bookmark](crate::testing::ApiServerDouble::bookmark_now), read and write the store without HTTP
//! ([`put`](crate::testing::ApiServerDouble::put), [`get`](crate::testing::ApiServerDouble::get),
//! [`list`](crate::testing::ApiServerDouble::list), [`delete`](crate::testing::ApiServerDouble::delete)), and read the
//! [request log](crate::testing::ApiServerDouble::requests) and the [audit log](crate::testing::ApiServerDouble::audit_log).
//!
//! # Example
//!
//! ```
//! use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
//! use muster_kube::testing::ApiServerDouble;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kube::Error> {
//! let double = ApiServerDouble::start().await;
//! let gvk = GroupVersionKind::gvk("muster.giantswarm.io", "v1alpha1", "MCPServer");
//! let resource = ApiResource::from_gvk_with_plural(&gvk, "mcpservers");
//! let servers: Api<DynamicObject> = Api::namespaced_with(double.client(), "default", &resource);
//!
//! let server: DynamicObject = serde_json::from_value(serde_json::json!({
//!     "apiVersion": "muster.giantswarm.io/v1alpha1",
//!     "kind": "MCPServer",
//!     "metadata": {"name": "kubernetes"},
//!     "spec": {"type": "stdio", "command": "mcp-kubernetes"},
//! }))
//! .expect("a valid object");
//! let created = servers.create(&PostParams::default(), &server).await?;
//! assert_eq!(created.metadata.generation, Some(1));
//!
//! let listed = servers.list(&ListParams::default()).await?;
//! assert_eq!(listed.items.len(), 1);
//! assert_eq!(listed.items[0].data["spec"]["command"], "mcp-kubernetes");
//! # Ok(())
//! # }
//! ```
//!
//! # What it does not model
//!
//! Namespaces as objects (every namespace exists), admission webhooks and policies, schema
//! pruning and OpenAPI type checks (only CEL rules and defaults of a registered schema),
//! validation ratcheting, list-type and map-type lists in server-side apply (every list is
//! atomic), strategic merge directives, YAML bodies, `dryRun`, reads at an exact older
//! `resourceVersion` (lists are served at the current one), `resourceNames` in rules,
//! aggregated discovery, protobuf, TLS and client certificates.

mod apply;
mod auth;
mod cel;
mod event_rules;
mod http;
mod patch;
mod resource;
mod select;
mod status;
mod store;
mod watch;
mod write;

use std::{
    io,
    net::SocketAddr,
    path::Path,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};
use tokio::{sync::broadcast, task::JoinHandle};

use self::{
    auth::Auth,
    resource::Registry,
    status::ApiError,
    store::{Filter, Key, Store},
};
pub use self::{
    auth::{AuditEntry, RequestRecord, UserInfo},
    resource::ResourceType,
};

/// The token [`ApiServerDouble::client`] sends; its user is in `system:masters`.
pub const ADMIN_TOKEN: &str = "muster-double-admin";
/// The user behind [`ADMIN_TOKEN`].
pub const ADMIN_USER: &str = "double-admin";

/// How a double starts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DoubleConfig {
    /// The namespace clients and kubeconfigs default to (`default`).
    pub default_namespace: String,
    /// How many changes the watch history keeps (1000); older resourceVersions get 410.
    pub history_limit: usize,
    /// How often open watches that allow bookmarks get one (`None`: only on
    /// [`bookmark_now`](ApiServerDouble::bookmark_now)). Defaults to 30 s.
    pub bookmark_interval: Option<Duration>,
    /// The resource types served ([`ResourceType::defaults`]).
    pub resource_types: Vec<ResourceType>,
}

impl Default for DoubleConfig {
    fn default() -> Self {
        Self {
            default_namespace: "default".to_owned(),
            history_limit: 1000,
            bookmark_interval: Some(Duration::from_secs(30)),
            resource_types: ResourceType::defaults(),
        }
    }
}

impl DoubleConfig {
    /// Sets the default namespace.
    pub fn with_default_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.default_namespace = namespace.into();
        self
    }

    /// Sets how many changes the history keeps.
    pub fn with_history_limit(mut self, limit: usize) -> Self {
        self.history_limit = limit;
        self
    }

    /// Sets the periodic bookmark interval (`None`: on demand only).
    pub fn with_bookmark_interval(mut self, interval: Option<Duration>) -> Self {
        self.bookmark_interval = interval;
        self
    }
}

/// What can go wrong driving the double directly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoubleError {
    /// The loopback listener could not be bound.
    #[error("binding 127.0.0.1:0 failed")]
    Bind(#[source] io::Error),
    /// No served type has this name (`plural` or `plural.group`).
    #[error("no resource type {0:?} is served")]
    UnknownResource(String),
    /// A manifest file could not be read as YAML documents.
    #[error("manifest {0}")]
    Manifest(String),
    /// The double refused the write, with the Status an HTTP client would get.
    #[error("{message} ({code} {reason})")]
    Refused {
        /// The HTTP status code.
        code: u16,
        /// The Status reason (`Invalid`, `BadRequest`, ...).
        reason: String,
        /// The Status message.
        message: String,
    },
}

impl From<ApiError> for DoubleError {
    fn from(error: ApiError) -> Self {
        Self::Refused {
            code: error.code,
            reason: error.reason.to_owned(),
            message: error.message,
        }
    }
}

/// State shared by the HTTP handlers and the handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) auth: Mutex<Auth>,
    unavailable: AtomicBool,
    /// Bumped to end every open watch.
    pub(crate) epoch: tokio::sync::watch::Sender<u64>,
    pub(crate) bookmark_interval: Option<Duration>,
    pub(crate) addr: SocketAddr,
}

impl Shared {
    pub(crate) fn is_unavailable(&self) -> bool {
        self.unavailable.load(Ordering::SeqCst)
    }

    fn end_watches(&self) {
        self.epoch.send_modify(|epoch| *epoch += 1);
    }
}

/// Locks a mutex; a panic elsewhere while holding it leaves data a test may still read.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Now, as the API server writes timestamps.
pub(crate) fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Stops the server task when the last handle goes.
#[derive(Debug)]
struct ServerTask {
    task: JoinHandle<()>,
    shared: Arc<Shared>,
}

impl Drop for ServerTask {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.end_watches();
    }
}

/// A running API server double; cheap to clone, stopped when the last clone is dropped.
///
/// See the [module documentation](self) for what it serves and an example.
#[derive(Debug, Clone)]
pub struct ApiServerDouble {
    shared: Arc<Shared>,
    default_namespace: String,
    _server: Arc<ServerTask>,
}

impl ApiServerDouble {
    /// Starts a double with the default configuration on `127.0.0.1:0`.
    ///
    /// # Panics
    ///
    /// If no loopback port can be bound (see [`try_start`](Self::try_start)).
    pub async fn start() -> Self {
        Self::try_start(DoubleConfig::default())
            .await
            .expect("the API server double binds a loopback port")
    }

    /// Starts a double with `config` on `127.0.0.1:0` (loopback only).
    pub async fn try_start(config: DoubleConfig) -> Result<Self, DoubleError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(DoubleError::Bind)?;
        let addr = listener.local_addr().map_err(DoubleError::Bind)?;
        let (signals, _) = broadcast::channel(1024);
        let mut auth = Auth::default();
        auth.add_token(ADMIN_TOKEN, ADMIN_USER, &["system:masters"]);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(
                Registry::new(config.resource_types),
                config.history_limit,
                signals,
            )),
            auth: Mutex::new(auth),
            unavailable: AtomicBool::new(false),
            epoch: tokio::sync::watch::Sender::new(0),
            bookmark_interval: config.bookmark_interval,
            addr,
        });
        let router = http::router(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            // The listener only fails when the runtime shuts down; the test is over then.
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            default_namespace: config.default_namespace,
            _server: Arc::new(ServerTask {
                task,
                shared: Arc::clone(&shared),
            }),
            shared,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// The namespace clients default to.
    pub fn default_namespace(&self) -> &str {
        &self.default_namespace
    }

    /// A kube `Config` for this double sending `token`, in the default namespace. Set
    /// `auth_info.impersonate` / `impersonate_groups` on it to impersonate.
    pub fn config(&self, token: &str) -> kube::Config {
        let url = self.url().parse().expect("a loopback socket address makes a valid URI");
        let mut config = kube::Config::new(url);
        config.default_namespace = self.default_namespace.clone();
        config.auth_info.token = Some(token.to_owned().into());
        config
    }

    /// A client acting as the admin ([`ADMIN_TOKEN`], in `system:masters`).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (kube's client spawns its buffer task).
    pub fn client(&self) -> kube::Client {
        self.client_as(ADMIN_TOKEN)
    }

    /// A client sending `token` (see [`add_token`](Self::add_token)).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn client_as(&self, token: &str) -> kube::Client {
        kube::Client::try_from(self.config(token)).expect("kube builds a client for a plain-http loopback URL")
    }

    /// A client sending `token` and impersonating `user` with `groups`.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn client_impersonating(&self, token: &str, user: &str, groups: &[&str]) -> kube::Client {
        let mut config = self.config(token);
        config.auth_info.impersonate = Some(user.to_owned());
        if !groups.is_empty() {
            config.auth_info.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
        }
        kube::Client::try_from(config).expect("kube builds a client for a plain-http loopback URL")
    }

    /// Writes a kubeconfig (JSON, which kubeconfig readers take as YAML) whose current
    /// context reaches this double with `token` in `namespace`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>, token: &str, namespace: &str) -> io::Result<()> {
        let kubeconfig = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "double", "cluster": {"server": self.url()}}],
            "users": [{"name": "double-user", "user": {"token": token}}],
            "contexts": [{"name": "double", "context": {"cluster": "double", "user": "double-user", "namespace": namespace}}],
            "current-context": "double",
            "preferences": {},
        });
        std::fs::write(path, serde_json::to_vec_pretty(&kubeconfig)?)
    }

    /// Accepts `token` as `user` in `groups` (plus `system:authenticated`).
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        lock(&self.shared.auth).add_token(token, user, groups);
    }

    /// Allows `subject` (a user or group) the `verbs` on `resource` (`mcpservers`,
    /// `mcpservers/status`, `*`) in API `group` (`""` core, `*` any), in `namespace` or
    /// cluster-wide (`None`). The first rule switches authorization on: from then on only
    /// what a rule allows (and anything for `system:masters`) is allowed.
    pub fn allow(&self, subject: &str, verbs: &[&str], group: &str, resource: &str, namespace: Option<&str>) {
        lock(&self.shared.auth).allow(subject, verbs, group, resource, namespace);
    }

    /// Allows `subject` everything, everywhere (impersonation included).
    pub fn allow_all(&self, subject: &str) {
        self.allow(subject, &["*"], "*", "*", None);
    }

    /// Switches authorization on without adding a rule.
    pub fn enforce_rbac(&self) {
        lock(&self.shared.auth).enforce();
    }

    /// Serves another resource type (or replaces one with the same group, version, plural).
    pub fn add_resource_type(&self, resource_type: ResourceType) {
        lock(&self.shared.store).registry.add(resource_type);
    }

    /// Validates creates, updates and applies of `resource` (`plural` or `plural.group`)
    /// against `schema` (a CRD version's `openAPIV3Schema`): defaults, then CEL rules.
    pub fn set_schema(&self, resource: &str, schema: Value) -> Result<(), DoubleError> {
        let mut store = lock(&self.shared.store);
        let index = store
            .registry
            .resolve(resource)
            .ok_or_else(|| DoubleError::UnknownResource(resource.to_owned()))?;
        store.schemas.insert(index, schema);
        Ok(())
    }

    /// [`set_schema`](Self::set_schema) as a builder step.
    ///
    /// # Panics
    ///
    /// If no served type is called `resource`.
    pub fn with_schema(self, resource: &str, schema: Value) -> Self {
        if let Err(error) = self.set_schema(resource, schema) {
            panic!("with_schema: {error}");
        }
        self
    }

    /// Forgets the watch history (and paginated lists in progress): a watch resuming from
    /// any earlier resourceVersion gets a 410 `Expired` event, a `continue` token 410.
    pub fn compact(&self) {
        lock(&self.shared.store).compact();
    }

    /// Ends every open watch stream (clients see the stream end and resume).
    pub fn drop_watches(&self) {
        self.shared.end_watches();
    }

    /// While unavailable, every request is answered 503 `ServiceUnavailable` and open watches
    /// end, as when the API server is away.
    ///
    /// kube's default client retries a 503 up to 15 times with exponential backoff from 5 ms
    /// (minutes in all), so its requests wait for the double to come back; set
    /// `default_retry = false` on the [`config`](Self::config) to get the 503 at once.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.shared.unavailable.store(unavailable, Ordering::SeqCst);
        if unavailable {
            self.shared.end_watches();
        }
    }

    /// Sends a `BOOKMARK` at the current resourceVersion to every open watch that allows them.
    pub fn bookmark_now(&self) {
        lock(&self.shared.store).bookmark();
    }

    /// The current (last written) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).resource_version()
    }

    /// Stores `object` without HTTP, authorization or field-manager bookkeeping: its type
    /// from `apiVersion` and `kind`, `.status` included, `uid`, `creationTimestamp`,
    /// `generation` and `resourceVersion` set by the store, watches told. A namespaced object
    /// without a namespace goes to `default`. A registered schema still applies.
    pub fn put(&self, object: Value) -> Result<Value, DoubleError> {
        Ok(write::put_raw(&mut lock(&self.shared.store), object, now())?)
    }

    /// Stores every document of the manifest file at `path` (multi-document YAML, as
    /// `kubectl apply -f` reads it) with [`put`](Self::put); the stored objects.
    ///
    /// # Errors
    ///
    /// A file that cannot be read or is not YAML, or a document the store refuses.
    pub fn apply_manifests(&self, path: impl AsRef<Path>) -> Result<Vec<Value>, DoubleError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|e| DoubleError::Manifest(format!("{}: {e}", path.display())))?;
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| DoubleError::Manifest(format!("{}: {e}", path.display())))?;
        documents
            .into_iter()
            .filter(|document| !document.is_null())
            .map(|document| self.put(document))
            .collect()
    }

    fn key(&self, store: &Store, resource: &str, namespace: Option<&str>, name: &str) -> Option<Key> {
        let type_index = store.registry.resolve(resource)?;
        Some(Key {
            type_index,
            namespace: namespace.unwrap_or_default().to_owned(),
            name: name.to_owned(),
        })
    }

    /// The stored object, if any (`resource` is `plural` or `plural.group`).
    pub fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let store = lock(&self.shared.store);
        let key = self.key(&store, resource, namespace, name)?;
        store.get(&key).cloned()
    }

    /// The stored objects of `resource`, in one namespace or all (`None`).
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Vec<Value> {
        let store = lock(&self.shared.store);
        match store.registry.resolve(resource) {
            Some(index) => store.matching(&Filter::everything(index, namespace.map(str::to_owned))),
            None => Vec::new(),
        }
    }

    /// Removes an object at once (finalizers ignored); watches see it deleted.
    pub fn delete(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let mut store = lock(&self.shared.store);
        let key = self.key(&store, resource, namespace, name)?;
        store.commit(key, None)
    }

    /// Every request answered so far, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.shared.auth).requests.clone()
    }

    /// Every write accepted over HTTP so far, oldest first.
    pub fn audit_log(&self) -> Vec<AuditEntry> {
        lock(&self.shared.auth).audit.clone()
    }

    /// Empties the request and audit logs.
    pub fn clear_logs(&self) {
        let mut auth = lock(&self.shared.auth);
        auth.requests.clear();
        auth.audit.clear();
    }
}
