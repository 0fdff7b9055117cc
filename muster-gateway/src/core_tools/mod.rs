//! Core tools: muster's own tools (`core_*`), reached through `call_tool` like any other.
//!
//! Each core tool declares the MCP annotations the reference documents (readOnly, destructive,
//! idempotent, openWorld) so discovery reports them like a downstream server's. This version
//! provides the services (`core_service_*`), the MCP server definitions (`core_mcpserver_*`),
//! the configuration (`core_config_*`), the event log (`core_events`) and the workflows
//! (`core_workflow_list`, `_get`, `_available`, `_create`, `_update`, `_delete`, `_validate`,
//! `_execution_list`, `_execution_get`).

mod admission;
mod args;
mod config;
pub mod detect;
mod mcpservers;
mod services;
mod workflows;

use services::Control;

use std::{
    sync::{Arc, OnceLock},
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use muster_core::{ToolCall, ToolEntry, ToolError, ToolKind, ToolOutput};
use muster_workflow::record::{ExecutionStore, MemoryExecutionStore};
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tower::Service;

use crate::{
    definitions::{DefinitionStore, config_dir::ConfigStore},
    events::EventFollowers,
    registry::Registry,
};

/// The arguments of the core tools that act on one named thing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct NameArg {
    /// The name of the service, server or workflow.
    pub name: String,
}

/// The arguments of `core_auth_login` and `core_auth_logout`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ServerArg {
    /// The MCP server to sign in to or out of.
    pub server: String,
    /// `core_auth_login` only: discard the gateway's stored dynamic client registration with the
    /// server's authorization server and register anew (when sign-ins fail with invalid_client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_client_registration: Option<bool>,
}

/// The arguments of `core_auth_status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct AuthStatusArgs {
    /// Also issue the sign-in link of every server the caller has not signed in to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_urls: Option<bool>,
}

/// The arguments of the core tools that take none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The core tools this gateway provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CoreTool {
    ServiceList,
    ServiceStatus,
    ServiceStart,
    ServiceStop,
    ServiceRestart,
    McpServerList,
    McpServerGet,
    McpServerCreate,
    McpServerUpdate,
    McpServerDelete,
    McpServerValidate,
    McpServerDetect,
    ConfigGet,
    ConfigGetAggregator,
    ConfigUpdateAggregator,
    ConfigSave,
    ConfigReload,
    Events,
    WorkflowList,
    WorkflowGet,
    WorkflowAvailable,
    WorkflowCreate,
    WorkflowUpdate,
    WorkflowDelete,
    WorkflowValidate,
    WorkflowExecutionList,
    WorkflowExecutionGet,
    AuthLogin,
    AuthLogout,
    AuthStatus,
}

impl CoreTool {
    const ALL: [Self; 30] = [
        Self::WorkflowList,
        Self::WorkflowGet,
        Self::WorkflowAvailable,
        Self::WorkflowCreate,
        Self::WorkflowUpdate,
        Self::WorkflowDelete,
        Self::WorkflowValidate,
        Self::WorkflowExecutionList,
        Self::WorkflowExecutionGet,
        Self::ServiceList,
        Self::ServiceStatus,
        Self::ServiceStart,
        Self::ServiceStop,
        Self::ServiceRestart,
        Self::ConfigGet,
        Self::ConfigGetAggregator,
        Self::ConfigUpdateAggregator,
        Self::ConfigSave,
        Self::ConfigReload,
        Self::McpServerList,
        Self::McpServerGet,
        Self::McpServerCreate,
        Self::McpServerUpdate,
        Self::McpServerDelete,
        Self::McpServerValidate,
        Self::McpServerDetect,
        Self::Events,
        Self::AuthLogin,
        Self::AuthLogout,
        Self::AuthStatus,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::ServiceList => "core_service_list",
            Self::ServiceStatus => "core_service_status",
            Self::ServiceStart => "core_service_start",
            Self::ServiceStop => "core_service_stop",
            Self::ServiceRestart => "core_service_restart",
            Self::McpServerList => "core_mcpserver_list",
            Self::McpServerGet => "core_mcpserver_get",
            Self::McpServerCreate => "core_mcpserver_create",
            Self::McpServerUpdate => "core_mcpserver_update",
            Self::McpServerDelete => "core_mcpserver_delete",
            Self::McpServerValidate => "core_mcpserver_validate",
            Self::McpServerDetect => "core_mcpserver_detect",
            Self::ConfigUpdateAggregator => "core_config_update_aggregator",
            Self::ConfigSave => "core_config_save",
            Self::ConfigReload => "core_config_reload",
            Self::Events => "core_events",
            Self::ConfigGet => "core_config_get",
            Self::ConfigGetAggregator => "core_config_get_aggregator",
            Self::WorkflowList => "core_workflow_list",
            Self::WorkflowGet => "core_workflow_get",
            Self::WorkflowAvailable => "core_workflow_available",
            Self::WorkflowCreate => "core_workflow_create",
            Self::WorkflowUpdate => "core_workflow_update",
            Self::WorkflowDelete => "core_workflow_delete",
            Self::WorkflowValidate => "core_workflow_validate",
            Self::WorkflowExecutionList => "core_workflow_execution_list",
            Self::WorkflowExecutionGet => "core_workflow_execution_get",
            Self::AuthLogin => "core_auth_login",
            Self::AuthLogout => "core_auth_logout",
            Self::AuthStatus => "core_auth_status",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    fn description(self) -> &'static str {
        match self {
            Self::ServiceList => "List all services (the aggregator and every MCP server) with their state and health.",
            Self::ServiceStatus => "Get the current state, health and last error of one service.",
            Self::ServiceStart => {
                "Start a stopped or failed service (an MCP server) and wait for its first connection attempt."
            }
            Self::ServiceStop => "Stop a service (an MCP server) and keep it stopped until started again.",
            Self::ServiceRestart => "Restart a service (an MCP server): stop it, then start it again.",
            Self::McpServerList => "List all configured MCP server definitions.",
            Self::McpServerGet => "Get one MCP server definition.",
            Self::McpServerCreate => {
                "Create an MCP server definition; it starts when autoStart is true (stdio) or always (remote)."
            }
            Self::McpServerUpdate => {
                "Update an MCP server definition; only the given fields change, and the server reconnects."
            }
            Self::McpServerDelete => "Delete an MCP server definition; stop the server with core_service_stop first.",
            Self::McpServerValidate => "Validate an MCP server definition without creating it.",
            Self::McpServerDetect => {
                "Probe a remote MCP server URL for its transport (streamable-http or sse); never fails."
            }
            Self::ConfigUpdateAggregator => {
                "Update the aggregator configuration in memory; core_config_save persists it."
            }
            Self::ConfigSave => "Save the running configuration to config.yaml.",
            Self::ConfigReload => "Reload the configuration, servers and workflows from the config directory.",
            Self::Events => {
                "List recent events (server state changes, tool list changes, definition changes), newest first."
            }
            Self::ConfigGet => "Get the complete muster configuration.",
            Self::ConfigGetAggregator => "Get the aggregator configuration.",
            Self::WorkflowList => "List all workflow definitions with their availability.",
            Self::WorkflowGet => {
                "Get one workflow definition: every field as structured data (args, steps with their args, \
                 conditions and flags, output, onFailure), its availability, and its YAML text in yaml."
            }
            Self::WorkflowAvailable => {
                "Check whether a workflow can run now (every tool it names is present) and which tools are missing."
            }
            Self::WorkflowCreate => {
                "Create a workflow definition; it runs as the tool workflow_<name>. Step tools that do not exist yet \
                 are reported, not refused."
            }
            Self::WorkflowUpdate => {
                "Update a workflow definition; only the given fields change (steps replaces every step)."
            }
            Self::WorkflowDelete => "Delete a workflow definition; running executions and their history are kept.",
            Self::WorkflowValidate => {
                "Validate a workflow definition without creating it: errors, warnings and missing tools."
            }
            Self::WorkflowExecutionList => {
                "List workflow executions, newest first, filtered by workflow and status, with paging."
            }
            Self::WorkflowExecutionGet => {
                "Get one workflow execution with its input, result and steps, or only one of its steps."
            }
            Self::AuthLogin => {
                "Get a link to sign in to an MCP server that needs your own sign-in; once you completed it, the \
                 server's tools appear in your session."
            }
            Self::AuthLogout => "Sign out of an MCP server: the grant is revoked and its tools leave your session.",
            Self::AuthStatus => "Your sign-in state on every MCP server that needs one.",
        }
    }

    fn definition(self) -> Tool {
        let tool = match self {
            Self::ServiceStatus
            | Self::ServiceStart
            | Self::ServiceStop
            | Self::ServiceRestart
            | Self::McpServerGet
            | Self::McpServerDelete => {
                Tool::new(self.name(), self.description(), Arc::new(Default::default())).with_input_schema::<NameArg>()
            }
            Self::WorkflowGet | Self::WorkflowAvailable | Self::WorkflowDelete => {
                Tool::new(self.name(), self.description(), Arc::new(Default::default()))
                    .with_input_schema::<args::WorkflowNameArgs>()
            }
            Self::WorkflowCreate | Self::WorkflowValidate => Tool::new(
                self.name(),
                self.description(),
                args::workflow_schema(&["name", "steps"]),
            ),
            Self::WorkflowUpdate => Tool::new(self.name(), self.description(), args::workflow_schema(&["name"])),
            Self::WorkflowExecutionList => Tool::new(self.name(), self.description(), Arc::new(Default::default()))
                .with_input_schema::<args::ExecutionListArgs>(),
            Self::WorkflowExecutionGet => Tool::new(self.name(), self.description(), Arc::new(Default::default()))
                .with_input_schema::<args::ExecutionGetArgs>(),
            Self::McpServerCreate | Self::McpServerValidate => Tool::new(
                self.name(),
                self.description(),
                args::mcpserver_schema(&["name", "type"]),
            ),
            Self::McpServerUpdate => Tool::new(self.name(), self.description(), args::mcpserver_schema(&["name"])),
            Self::McpServerDetect => Tool::new(self.name(), self.description(), Arc::new(Default::default()))
                .with_input_schema::<args::DetectArgs>(),
            Self::ConfigUpdateAggregator => Tool::new(self.name(), self.description(), Arc::new(Default::default()))
                .with_input_schema::<args::UpdateAggregatorArgs>(),
            Self::Events => Tool::new(self.name(), self.description(), Arc::new(Default::default()))
                .with_input_schema::<args::EventsArgs>(),
            Self::AuthLogin | Self::AuthLogout => {
                Tool::new(self.name(), self.description(), Arc::new(Default::default()))
                    .with_input_schema::<ServerArg>()
            }
            Self::AuthStatus => Tool::new(self.name(), self.description(), Arc::new(Default::default()))
                .with_input_schema::<AuthStatusArgs>(),
            _ => Tool::new(self.name(), self.description(), Arc::new(Default::default())).with_input_schema::<NoArgs>(),
        };
        // (readOnly, destructive, idempotent, openWorld), as the reference's annotation table says.
        let (read_only, destructive, idempotent) = match self {
            Self::ServiceStart => (false, false, true),
            Self::ServiceStop => (false, true, true),
            Self::ServiceRestart => (false, true, false),
            Self::McpServerCreate | Self::WorkflowCreate => (false, false, false),
            Self::McpServerUpdate
            | Self::WorkflowUpdate
            | Self::ConfigUpdateAggregator
            | Self::ConfigSave
            | Self::ConfigReload => (false, true, true),
            Self::McpServerDelete | Self::WorkflowDelete => (false, true, false),
            Self::AuthLogout => (false, false, true),
            _ => (true, false, true),
        };
        tool.with_annotations(
            ToolAnnotations::new()
                .read_only(read_only)
                .destructive(destructive)
                .idempotent(idempotent)
                .open_world(matches!(
                    self,
                    Self::McpServerDetect | Self::AuthLogin | Self::AuthStatus
                )),
        )
    }
}

/// Where the definition tools write: the definition store, when there is one (else their
/// changes are kept in memory only).
type Writes<'a> = Option<&'a Arc<dyn DefinitionStore>>;

/// muster's own `core_*` tools as one [`ToolService`](muster_core::ToolService): a call of a
/// name in [`CoreTools::entries`] is run here, any other is [`ToolError::NotFound`].
///
/// It holds what the tools act on and nothing else: the registry (its servers, workflows and
/// configuration), where definition writes go ([`CoreTools::with_definition_store`]), the
/// config directory (`core_config_save` and `_reload`), the sessions following the events
/// (`core_events` with `follow: true`), and sign-in by link (`core_auth_*`). The dispatcher
/// routes the core tools' names to it (`Dispatcher::with_tools`).
///
/// ```
/// use std::sync::Arc;
/// use muster_core::{CallContext, JsonObject, ToolCall};
/// use muster_core::config::MusterConfig;
/// use muster_gateway::{core_tools::CoreTools, registry::{Registry, RegistryOptions}};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = Registry::new(MusterConfig::default(), Vec::new(), Vec::new(), RegistryOptions::default())?;
/// let core = CoreTools::new(Arc::clone(&registry));
/// let call = |name: &str| ToolCall::new(name, JsonObject::new(), CallContext::default());
///
/// let services = core.clone().oneshot(call("core_service_list")).await?.into_result()?;
/// assert_eq!(services.structured_content.unwrap()["services"][0]["name"], "mcp-aggregator");
/// // No config directory was given: there is nowhere to save to.
/// let refused = core.oneshot(call("core_config_save")).await.unwrap_err();
/// assert_eq!(refused.to_string(), "this gateway has no config directory to save to");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CoreTools {
    registry: Arc<Registry>,
    sign_in: Option<Arc<crate::auth::SignInService>>,
    definitions: Option<Arc<dyn DefinitionStore>>,
    config_dir: Option<ConfigStore>,
    followers: Arc<EventFollowers>,
    /// Where `core_workflow_execution_*` read the workflow runs' records.
    executions: Arc<dyn ExecutionStore>,
}

impl std::fmt::Debug for CoreTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreTools")
            .field("sign_in", &self.sign_in.is_some())
            .field("definitions", &self.definitions.is_some())
            .field("config_dir", &self.config_dir.as_ref().map(ConfigStore::dir))
            .finish_non_exhaustive()
    }
}

impl CoreTools {
    /// The core tools over `registry`, with nowhere to write definitions (changes are kept in
    /// memory only), no config directory, no sign-in and no workflow run records.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            registry,
            sign_in: None,
            definitions: None,
            config_dir: None,
            followers: Arc::default(),
            executions: Arc::new(MemoryExecutionStore::new()),
        }
    }

    /// Writes definition changes to `store` before applying them (on behalf of the caller).
    #[must_use]
    pub fn with_definition_store(mut self, store: Arc<dyn DefinitionStore>) -> Self {
        self.definitions = Some(store);
        self
    }

    /// `core_workflow_execution_list` and `_get` read the records of workflow runs in `store`:
    /// the store the workflows' engine writes them to
    /// ([`GatewayWorkflows`](crate::workflows::GatewayWorkflows)).
    #[must_use]
    pub fn with_executions(mut self, store: Arc<dyn ExecutionStore>) -> Self {
        self.executions = store;
        self
    }

    /// Filesystem mode: `core_config_save` writes `config.yaml` in `dir`, `core_config_reload`
    /// reloads the directory, and definitions are written there unless
    /// [`CoreTools::with_definition_store`] sets another store.
    #[must_use]
    pub fn with_config_dir(mut self, dir: ConfigStore) -> Self {
        if self.definitions.is_none() {
            self.definitions = Some(Arc::new(dir.clone()));
        }
        self.config_dir = Some(dir);
        self
    }

    /// Takes part in signing people in: `core_auth_login`/`_logout` and `core_auth_status`
    /// answer with the sign-in state. Without it they say that OAuth is not configured.
    #[must_use]
    pub fn with_auth(mut self, auth: &crate::auth::DownstreamAuth) -> Self {
        self.sign_in = auth.sign_in().cloned();
        self
    }

    /// The catalogue entries of the core tools, built once.
    pub fn entries() -> &'static [ToolEntry] {
        static ENTRIES: OnceLock<Vec<ToolEntry>> = OnceLock::new();
        ENTRIES.get_or_init(|| {
            CoreTool::ALL
                .into_iter()
                .map(|t| ToolEntry::builtin(ToolKind::Core, t.definition()))
                .collect()
        })
    }

    /// The config directory `core_config_save` and `_reload` use, in filesystem mode.
    pub fn config_dir(&self) -> Option<&ConfigStore> {
        self.config_dir.as_ref()
    }

    /// The sessions following the events (`core_events` with `follow: true`).
    pub fn event_followers(&self) -> &EventFollowers {
        &self.followers
    }

    /// Runs core tool `call.name`.
    async fn run(self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        let Self {
            registry,
            sign_in,
            definitions,
            config_dir,
            followers,
            executions,
        } = &self;
        let sign_in = sign_in.as_ref();
        let store = definitions.as_ref();
        let config_dir = config_dir.as_ref();
        let call = &call;
        let tool = CoreTool::from_name(&call.name).ok_or_else(|| ToolError::not_found(&call.name))?;
        let args = &call.arguments;
        let value = match tool {
            CoreTool::ServiceList => services::service_list(registry),
            CoreTool::ServiceStatus => services::service_status(registry, required_name(args)?)?,
            CoreTool::ServiceStart => {
                services::service_control(registry, store, required_name(args)?, Control::Start, &call.ctx).await?
            }
            CoreTool::ServiceStop => {
                services::service_control(registry, store, required_name(args)?, Control::Stop, &call.ctx).await?
            }
            CoreTool::ServiceRestart => {
                services::service_control(registry, store, required_name(args)?, Control::Restart, &call.ctx).await?
            }
            CoreTool::McpServerList => services::mcpserver_list(registry),
            CoreTool::McpServerGet => services::mcpserver_get(registry, required_name(args)?)?,
            CoreTool::ConfigGet => config::get(registry)?,
            CoreTool::ConfigGetAggregator => config::get_aggregator(registry)?,
            CoreTool::ConfigUpdateAggregator => config::update_aggregator(registry, args, &call.ctx)?,
            CoreTool::ConfigSave => config::save(registry, config_dir, &call.ctx).await?,
            CoreTool::ConfigReload => config::reload(registry, config_dir, &call.ctx).await?,
            CoreTool::McpServerCreate => mcpservers::create(registry, store, args, &call.ctx).await?,
            CoreTool::McpServerUpdate => mcpservers::update(registry, store, args, &call.ctx).await?,
            CoreTool::McpServerDelete => mcpservers::delete(registry, store, args, &call.ctx).await?,
            CoreTool::McpServerValidate => mcpservers::validate(registry, args).await?,
            CoreTool::McpServerDetect => mcpservers::detect(registry, args).await?,
            CoreTool::Events => {
                let query = crate::events::EventQuery::from_args(args).map_err(ToolError::invalid_arguments)?;
                // From where the events are recorded: every replica's in Kubernetes mode.
                let answer = query.answer_recorded(registry.events()).await;
                // `follow: true` also pushes the matching events from now on to the caller's session.
                if query.follow
                    && !call.ctx.session.is_anonymous()
                    && let Some(crate::upstream::ClientPeer(peer)) = call.ctx.extensions.get()
                {
                    followers.follow(registry.events(), call.ctx.session.as_str(), &query, peer.clone());
                }
                answer
            }
            CoreTool::WorkflowList => workflows::list(registry),
            CoreTool::WorkflowGet => workflows::get(registry, required_name(args)?)?,
            CoreTool::WorkflowAvailable => workflows::available(registry, required_name(args)?)?,
            CoreTool::WorkflowCreate => workflows::create(registry, store, args, &call.ctx).await?,
            CoreTool::WorkflowUpdate => workflows::update(registry, store, args, &call.ctx).await?,
            CoreTool::WorkflowDelete => workflows::delete(registry, store, args, &call.ctx).await?,
            CoreTool::WorkflowValidate => return workflows::validate(registry, args).map(Into::into),
            CoreTool::WorkflowExecutionList => workflows::execution_list(executions, args).await?,
            CoreTool::WorkflowExecutionGet => workflows::execution_get(executions, args).await?,
            CoreTool::AuthStatus => {
                let auth_urls = args
                    .get("auth_urls")
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false);
                let mut status = crate::auth::status_document(registry, sign_in, &call.ctx, auth_urls).await;
                if let Some(principal) = &call.ctx.principal {
                    status["principal"] = serde_json::json!({
                        "subject": principal.subject,
                        "issuer": principal.issuer,
                        "email": principal.email,
                        "authorized_party": principal.authorized_party,
                    });
                }
                status
            }
            CoreTool::AuthLogin | CoreTool::AuthLogout => {
                let service = sign_in.ok_or_else(|| {
                    ToolError::invalid_arguments(
                        "OAuth is not configured: enable aggregator.oauth.mcpClient (enabled, publicUrl) in config.yaml",
                    )
                })?;
                match tool {
                    CoreTool::AuthLogin => {
                        let reset = args
                            .get("reset_client_registration")
                            .and_then(serde_json::Value::as_bool)
                            .unwrap_or(false);
                        service
                            .login(registry, &call.ctx, required_server(args)?, reset)
                            .await?
                    }
                    _ => service.logout(registry, &call.ctx, required_server(args)?).await?,
                }
            }
        };
        Ok(json_result(&value).into())
    }
}

impl Service<ToolCall> for CoreTools {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        Box::pin(self.clone().run(call))
    }
}

fn required_server(args: &muster_core::JsonObject) -> Result<&str, ToolError> {
    match args.get("server").and_then(|v| v.as_str()) {
        Some(server) if !server.is_empty() => Ok(server),
        _ => Err(ToolError::invalid_arguments("server argument is required")),
    }
}

fn required_name(args: &muster_core::JsonObject) -> Result<&str, ToolError> {
    match args.get("name").and_then(|v| v.as_str()) {
        Some(name) if !name.is_empty() => Ok(name),
        _ => Err(ToolError::invalid_arguments("name argument is required")),
    }
}

/// The fields dropped from definition `kind`/`name` given to a create, update or validate
/// tool, each logged as a warning, as the answer's `warnings` lists them.
pub(crate) fn dropped_fields(kind: &str, name: &str, warnings: &[muster_core::crd::FieldWarning]) -> Vec<String> {
    warnings
        .iter()
        .map(|warning| {
            tracing::warn!(kind, name, field = %warning.path, "{warning}");
            warning.to_string()
        })
        .collect()
}

/// Emits the Warning event about the fields dropped from definition `kind`/`name`, if any.
pub(crate) fn report_dropped_fields(registry: &Registry, kind: &str, name: &str, dropped: &[String]) {
    if let Some(event) = crate::events::Event::fields_dropped(kind, name, dropped) {
        registry.emit(event);
    }
}

/// A successful result whose one text item is `value` as JSON, mirrored as structuredContent
/// when it is an object.
pub(crate) fn json_result(value: &serde_json::Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    if value.is_object() {
        result.structured_content = Some(value.clone());
    }
    result
}
