//! The server table: every MCPServer definition with its runtime state, its live connection and
//! the control channel of its supervisor.
//!
//! Each definition is a slot with a generation: a changed definition is a new generation, and
//! what a supervisor of an older one reports ([`Key`]) changes nothing. A slot is created with
//! its control channel; the supervisor takes the receiving end when supervision starts
//! ([`ServerTable::take_unsupervised`]), so nothing above the table has to be told to start one.
//!
//! The table records what happens to a server (connected, lists changed, lost, failed for every
//! caller) in its runtime state and as events; deciding what follows (rebuilding the catalogue,
//! telling clients) is the registry's.

use std::{
    collections::BTreeMap,
    sync::{
        RwLock, RwLockReadGuard, RwLockWriteGuard,
        atomic::{AtomicU64, Ordering},
    },
};

use chrono::Utc;
use muster_core::{
    NameRules, ToolError,
    crd::{Applied, MCPServer, MCPServerHealth, MCPServerState, ServerType},
};
use tokio::sync::mpsc;

use super::runtime::{ServerRuntime, starts_automatically};
use crate::{
    events::{Event, EventDetails, EventLog, reasons},
    upstream::SharedConnection,
};

/// What a supervisor is asked to do.
#[derive(Debug)]
pub(crate) enum Command {
    /// Run the server (no-op when it runs).
    Start,
    /// Stop the server and keep it stopped.
    Stop,
    /// Stop it and start it again now.
    Restart,
}

/// Which supervisor: a server's name and the generation of its definition. A supervisor whose
/// generation is not the slot's current one (the definition changed, the server was removed)
/// changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) name: String,
    pub(crate) generation: u64,
}

/// A server whose supervisor is to start: its key, its commands, and whether it starts by itself.
#[derive(Debug)]
pub(crate) struct Unsupervised {
    pub(crate) key: Key,
    pub(crate) commands: mpsc::UnboundedReceiver<Command>,
    pub(crate) autostart: bool,
}

#[derive(Debug)]
pub(super) struct ServerSlot {
    pub(super) definition: MCPServer,
    /// When the registry first learned of the server (lower is older), for the one description
    /// per issuer rule.
    pub(super) since: u64,
    pub(super) runtime: ServerRuntime,
    pub(super) connection: Option<SharedConnection>,
    /// The supervisor's commands; `None` once the gateway shut down.
    control: Option<mpsc::UnboundedSender<Command>>,
    /// The receiving end, until a supervisor takes it.
    commands: Option<mpsc::UnboundedReceiver<Command>>,
    generation: u64,
}

impl ServerSlot {
    fn new(definition: MCPServer, since: u64, generation: u64) -> Self {
        let (control, commands) = mpsc::unbounded_channel();
        Self {
            since,
            runtime: ServerRuntime::initial(&definition),
            definition,
            connection: None,
            control: Some(control),
            commands: Some(commands),
            generation,
        }
    }

    fn view(&self) -> ServerView {
        ServerView {
            definition: self.definition.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

/// One MCPServer as the registry sees it now.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerView {
    /// Its definition.
    pub definition: MCPServer,
    /// Its runtime state.
    pub runtime: ServerRuntime,
}

/// Every MCPServer definition with its runtime state and connection, by name.
#[derive(Debug)]
pub(super) struct ServerTable {
    slots: RwLock<BTreeMap<String, ServerSlot>>,
    /// How many servers the table has learned of (their arrival order).
    arrivals: AtomicU64,
    events: EventLog,
}

impl ServerTable {
    /// A table of `servers`, none supervised yet.
    pub(super) fn new(servers: Vec<MCPServer>, events: EventLog) -> Self {
        let arrivals = servers.len() as u64;
        let slots = servers
            .into_iter()
            .zip(0u64..)
            .map(|(definition, since)| (definition.metadata.name.clone(), ServerSlot::new(definition, since, 0)))
            .collect();
        Self {
            slots: RwLock::new(slots),
            arrivals: AtomicU64::new(arrivals),
            events,
        }
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, ServerSlot>> {
        self.slots.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, ServerSlot>> {
        self.slots.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `definition`, or replaces the definition of the server of that name with a new
    /// generation (dropping the old slot's control channel ends its supervisor, which closes its
    /// connection). `Unchanged` when it is defined exactly so.
    pub(super) fn insert(&self, definition: MCPServer) -> Applied {
        let name = definition.metadata.name.clone();
        let mut slots = self.write();
        let (applied, generation, since) = match slots.get(&name) {
            Some(old) if old.definition.spec == definition.spec && old.definition.metadata == definition.metadata => {
                return Applied::Unchanged;
            }
            Some(old) => (Applied::Updated, old.generation + 1, old.since),
            None => (Applied::Added, 0, self.arrivals.fetch_add(1, Ordering::Relaxed)),
        };
        slots.insert(name, ServerSlot::new(definition, since, generation));
        applied
    }

    /// Removes server `name`, closing its connection; whether it was defined.
    pub(super) fn remove(&self, name: &str) -> bool {
        let removed = self.write().remove(name);
        if let Some(conn) = removed.as_ref().and_then(|slot| slot.connection.as_ref()) {
            conn.close();
        }
        removed.is_some()
    }

    /// The servers whose supervisor has not started, handing over their commands.
    pub(crate) fn take_unsupervised(&self) -> Vec<Unsupervised> {
        self.write()
            .iter_mut()
            .filter(|(_, slot)| slot.control.is_some())
            .filter_map(|(name, slot)| {
                Some(Unsupervised {
                    commands: slot.commands.take()?,
                    key: Key {
                        name: name.clone(),
                        generation: slot.generation,
                    },
                    autostart: starts_automatically(&slot.definition),
                })
            })
            .collect()
    }

    /// Asks the supervisor of `name` to start, stop or restart it. `false` when no such server
    /// is supervised; with `pending`, a server whose supervisor is about to start (supervision
    /// runs) gets the command when it does.
    pub(crate) fn command(&self, name: &str, command: Command, pending: bool) -> bool {
        self.read()
            .get(name)
            .filter(|slot| pending || slot.commands.is_none())
            .and_then(|slot| slot.control.as_ref())
            .is_some_and(|control| control.send(command).is_ok())
    }

    /// Ends every supervisor and marks each server Stopped; the connections to close.
    pub(super) fn stop_all(&self) -> Vec<SharedConnection> {
        self.write()
            .values_mut()
            .filter_map(|slot| {
                slot.control = None;
                slot.commands = None;
                slot.runtime.state = MCPServerState::Stopped;
                slot.connection.take()
            })
            .collect()
    }

    /// Every server's name and state, without copying definitions.
    pub(super) fn states(&self) -> Vec<(String, MCPServerState)> {
        self.read()
            .iter()
            .map(|(name, slot)| (name.clone(), slot.runtime.state))
            .collect()
    }

    /// The servers `keep` accepts, copying only those.
    pub(super) fn views(&self, keep: impl Fn(&MCPServer, &ServerRuntime) -> bool) -> Vec<ServerView> {
        self.read()
            .values()
            .filter(|slot| keep(&slot.definition, &slot.runtime))
            .map(ServerSlot::view)
            .collect()
    }

    /// One server.
    pub(super) fn view(&self, name: &str) -> Option<ServerView> {
        self.read().get(name).map(ServerSlot::view)
    }

    /// The live connection to server `name`.
    pub(super) fn connection(&self, name: &str) -> Option<SharedConnection> {
        self.read().get(name).and_then(|slot| slot.connection.clone())
    }

    /// The definition of the server of `key`, while that generation is current.
    pub(crate) fn definition(&self, key: &Key) -> Option<MCPServer> {
        self.read()
            .get(&key.name)
            .filter(|slot| slot.generation == key.generation)
            .map(|slot| slot.definition.clone())
    }

    /// Updates the runtime state of the server of `key`.
    pub(crate) fn mark(&self, key: &Key, f: impl FnOnce(&mut ServerRuntime)) {
        if let Some(slot) = self
            .write()
            .get_mut(&key.name)
            .filter(|slot| slot.generation == key.generation)
        {
            f(&mut slot.runtime);
        }
    }

    /// Makes `conn` the connection of the server of `key` (Running for stdio, else Connected);
    /// `false` when that generation is gone.
    pub(super) fn install(&self, key: &Key, conn: SharedConnection, reconnect: bool) -> bool {
        let name = key.name.as_str();
        let mut slots = self.write();
        let Some(slot) = slots.get_mut(name).filter(|slot| slot.generation == key.generation) else {
            return false;
        };
        let stdio = matches!(slot.definition.spec.server_type, Some(ServerType::Stdio) | None);
        let runtime = &mut slot.runtime;
        runtime.state = if stdio {
            MCPServerState::Running
        } else {
            MCPServerState::Connected
        };
        runtime.health = MCPServerHealth::Healthy;
        runtime.last_error = None;
        runtime.failure_class = None;
        runtime.consecutive_failures = 0;
        runtime.last_failure_http_status = None;
        runtime.next_retry_after = None;
        runtime.last_connected = Some(Utc::now());
        runtime.tool_count = conn.tools().len();
        if reconnect {
            runtime.restart_count += 1;
        }
        tracing::info!(server = %name, tools = conn.tools().len(), "connected");
        let (reason, verb) = if reconnect {
            (reasons::MCP_SERVER_RECONNECTED, "reconnected")
        } else {
            (reasons::MCP_SERVER_STARTED, "started")
        };
        self.events.emit(Event::mcp_server(
            name,
            reason,
            format!("MCP server {name} {verb}; it offers {} tools", conn.tools().len()),
        ));
        slot.connection = Some(conn);
        true
    }

    /// Replaces the connection of the server of `key` with one carrying refreshed lists.
    pub(super) fn replace_lists(&self, key: &Key, conn: SharedConnection) -> bool {
        let mut slots = self.write();
        let Some(slot) = slots
            .get_mut(&key.name)
            .filter(|slot| slot.generation == key.generation)
        else {
            return false;
        };
        slot.runtime.tool_count = conn.tools().len();
        self.events.emit(Event::mcp_server(
            &key.name,
            reasons::MCP_SERVER_TOOLS_CHANGED,
            format!(
                "MCP server {} changed its lists; it now offers {} tools",
                key.name,
                conn.tools().len()
            ),
        ));
        slot.connection = Some(conn);
        true
    }

    /// Drops the connection of the server of `key`, recording why (`error`) and its new state;
    /// `false` when that generation is gone.
    pub(super) fn uninstall(&self, key: &Key, error: Option<String>, state: MCPServerState) -> bool {
        let mut slots = self.write();
        let Some(slot) = slots
            .get_mut(&key.name)
            .filter(|slot| slot.generation == key.generation)
        else {
            return false;
        };
        slot.connection = None;
        slot.runtime.state = state;
        slot.runtime.state_since = Utc::now();
        slot.runtime.tool_count = 0;
        if let Some(error) = error {
            self.events.emit(
                Event::mcp_server(
                    &key.name,
                    reasons::MCP_SERVER_FAILED,
                    format!("MCP server {} failed: {error}", key.name),
                )
                .with_details(EventDetails::default().with_error(error.clone())),
            );
            slot.runtime.health = MCPServerHealth::Unhealthy;
            slot.runtime.last_error = Some(error);
        } else {
            self.events.emit(Event::mcp_server(
                &key.name,
                reasons::MCP_SERVER_STOPPED,
                format!("MCP server {} stopped", key.name),
            ));
            slot.runtime.health = MCPServerHealth::Unknown;
        }
        true
    }

    /// Puts server `name` in Failed for a failure every caller shares (`class` is the Ready
    /// reason), unless it is already.
    pub(super) fn fail_shared(&self, name: &str, class: &str, message: &str) {
        let changed = match self.write().get_mut(name) {
            Some(slot)
                if slot.runtime.last_error.as_deref() != Some(message)
                    || slot.runtime.state != MCPServerState::Failed =>
            {
                slot.runtime.state = MCPServerState::Failed;
                slot.runtime.state_since = Utc::now();
                slot.runtime.last_error = Some(message.to_owned());
                slot.runtime.failure_class = Some(class.to_owned());
                true
            }
            _ => false,
        };
        if changed {
            self.events.emit(Event::mcp_server(
                name,
                reasons::MCP_SERVER_FAILED,
                format!("MCP server {name} failed for every caller: {message}"),
            ));
        }
    }

    /// Records that a session's token was just exchanged for server `name`.
    pub(super) fn note_exchange(&self, name: &str) {
        if let Some(slot) = self.write().get_mut(name) {
            slot.runtime.last_exchange = Some(Utc::now());
        }
    }

    /// Takes server `name` out of a Failed state that a shared failure caused: Awaiting Session
    /// until a session holds a connection.
    pub(super) fn recover_shared(&self, name: &str) {
        if let Some(slot) = self.write().get_mut(name)
            && slot.runtime.failure_class.is_some()
        {
            slot.runtime.failure_class = None;
            slot.runtime.last_error = None;
            slot.runtime.state = MCPServerState::AwaitingSession;
            slot.runtime.state_since = Utc::now();
        }
    }

    /// For a server served per session (`per_session` says which are): `Connected` while a
    /// session holds a connection to it (`held`), else `Awaiting Session`; other states are the
    /// supervisor's.
    pub(super) fn set_session_held(&self, server: &str, held: bool, per_session: impl Fn(&MCPServer) -> bool) {
        let mut slots = self.write();
        if let Some(slot) = slots.get_mut(server)
            && per_session(&slot.definition)
            && matches!(
                slot.runtime.state,
                MCPServerState::AwaitingSession | MCPServerState::Connected
            )
        {
            let state = if held {
                MCPServerState::Connected
            } else {
                MCPServerState::AwaitingSession
            };
            if slot.runtime.state != state {
                slot.runtime.state = state;
                slot.runtime.state_since = Utc::now();
            }
        }
    }

    /// Records on each server the name collisions it lost (`lost`: the server, then its
    /// sentences), once per distinct message.
    pub(super) fn record_collisions(&self, lost: BTreeMap<&str, Vec<String>>) {
        let mut slots = self.write();
        for (server, names) in lost {
            let message = format!(
                "exposed tool name collision: {} also produced by another server; this server's tools of those names are not exposed",
                names.join(", ")
            );
            if let Some(slot) = slots.get_mut(server)
                && slot.runtime.last_error.as_deref() != Some(message.as_str())
            {
                tracing::warn!(server, collisions = %names.join(", "), "exposed tool name collision");
                self.events.emit(Event::mcp_server(
                    server,
                    reasons::MCP_SERVER_TOOL_NAME_COLLISION,
                    message.clone(),
                ));
                slot.runtime.last_error = Some(message);
            }
        }
    }

    /// Why exposed tool `name`, absent from the catalogue, cannot run: it belongs (by its
    /// exposed prefix) to a defined server that is not connected.
    pub(super) fn unavailable(&self, names: &NameRules, name: &str) -> Option<ToolError> {
        self.read()
            .values()
            .filter(|slot| slot.connection.is_none())
            .find(|slot| {
                let d = &slot.definition;
                let own = d.spec.tool_prefix.as_deref().unwrap_or(&d.metadata.name);
                let mut prefixes = vec![own.to_owned()];
                if let Some(ns) = &d.metadata.namespace {
                    prefixes.push(format!("{ns}_{own}"));
                }
                if let Some(family) = &d.spec.family {
                    prefixes.push(family.name.clone());
                }
                prefixes.iter().any(|p| {
                    let head = names.server_tool(p, "");
                    name.starts_with(&head) && name.len() > head.len()
                })
            })
            .map(|slot| ToolError::ServerUnavailable {
                server: slot.definition.metadata.name.clone(),
                reason: format!(
                    "server not found among the connected servers (it is {})",
                    slot.runtime.state
                ),
            })
    }
}

#[cfg(test)]
mod tests {
    use muster_core::crd::MCPServerSpec;

    use super::*;

    fn remote(name: &str, url: &str) -> MCPServer {
        MCPServer::new(
            name,
            MCPServerSpec {
                server_type: Some(ServerType::StreamableHttp),
                url: Some(url.to_owned()),
                ..MCPServerSpec::default()
            },
        )
    }

    #[test]
    fn a_changed_definition_is_a_new_generation_and_the_old_supervisors_reports_change_nothing() {
        let table = ServerTable::new(vec![remote("a", "http://127.0.0.1:1/mcp")], EventLog::in_memory());
        let first = table.take_unsupervised().pop().expect("one to supervise");
        assert_eq!(first.key.generation, 0);
        assert!(first.autostart, "a remote server starts by itself");
        assert!(table.take_unsupervised().is_empty(), "taken once");

        assert_eq!(table.insert(remote("a", "http://127.0.0.1:1/mcp")), Applied::Unchanged);
        assert_eq!(table.insert(remote("a", "http://127.0.0.1:2/mcp")), Applied::Updated);
        table.mark(&first.key, |rt| rt.last_error = Some("late".into()));
        assert_eq!(table.view("a").expect("defined").runtime.last_error, None);
        let second = table.take_unsupervised().pop().expect("the new generation");
        assert_eq!(second.key.generation, 1);
    }

    #[test]
    fn commands_reach_only_a_supervised_server() {
        let table = ServerTable::new(vec![remote("a", "http://127.0.0.1:1/mcp")], EventLog::in_memory());
        assert!(!table.command("a", Command::Start, false), "not supervised yet");
        assert!(
            table.command("a", Command::Restart, true),
            "kept for the supervisor about to start"
        );
        let mut supervised = table.take_unsupervised().pop().expect("one");
        assert!(table.command("a", Command::Stop, false));
        assert!(matches!(supervised.commands.try_recv(), Ok(Command::Restart)));
        assert!(matches!(supervised.commands.try_recv(), Ok(Command::Stop)));
        assert!(!table.command("b", Command::Stop, true), "not defined");
        assert!(table.stop_all().is_empty());
        assert!(!table.command("a", Command::Start, true), "shut down");
    }

    #[test]
    fn a_disconnected_server_claims_the_tools_of_its_prefix() {
        let table = ServerTable::new(vec![remote("github", "http://127.0.0.1:1/mcp")], EventLog::in_memory());
        let names = NameRules::new("x".to_owned());
        let refusal = table.unavailable(&names, "x_github_create_issue").expect("claimed");
        assert!(refusal.to_string().contains("github"), "{refusal}");
        assert!(table.unavailable(&names, "x_gitlab_create_issue").is_none());
    }
}
