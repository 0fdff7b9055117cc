//! One event: what happened to which resource, when, and how serious it is.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The namespace of an event whose resource names none (filesystem mode), as in Go muster.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The component every event of this gateway names as its `source`.
pub const SOURCE: &str = "muster";

/// The `kind` of the resource an MCPServer event is about.
pub const KIND_MCP_SERVER: &str = "MCPServer";

/// The `kind` of the resource a Workflow event is about.
pub const KIND_WORKFLOW: &str = "Workflow";

/// How serious an event is, as in Kubernetes: `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// Nothing needs attention.
    #[default]
    Normal,
    /// Something may need attention: a failure, an unavailable tool, a failed health check.
    Warning,
}

impl EventType {
    /// The spelling on the wire: `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }

    /// Parses `Normal` or `Warning`, in any letter case.
    pub fn parse(value: &str) -> Option<Self> {
        if value.eq_ignore_ascii_case("normal") {
            Some(Self::Normal)
        } else if value.eq_ignore_ascii_case("warning") {
            Some(Self::Warning)
        } else {
            None
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The resource an event is about (Kubernetes `ObjectReference`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvolvedObject {
    /// API version of the resource, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the resource: [`KIND_MCP_SERVER`], [`KIND_WORKFLOW`], ...
    #[serde(default)]
    pub kind: String,
    /// Name of the resource.
    #[serde(default)]
    pub name: String,
    /// Namespace of the resource.
    #[serde(default)]
    pub namespace: String,
    /// Unique id of the resource (Kubernetes mode), when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// Structured facts an event carries beyond its message, for programs rather than people.
///
/// Every field is optional and omitted from JSON when unset; a document with none of them
/// has no `data` at all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EventDetails {
    /// The HTTP status a remote server answered the failed attempt with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// When the next connection attempt is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_after: Option<DateTime<Utc>>,
    /// The error text of a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The workflow execution the event belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// The workflow step the event is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// The tool a step called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Who made the change, when a core tool made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<Author>,
    /// The warnings about a definition, one per dropped field (`unknown field "spec.foo"
    /// (dropped)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Who wrote a definition through a core tool: the principal the front door authenticated
/// (issuer and subject), or, on a gateway without one, the MCP session the call came in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Author {
    /// The issuer of the caller's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The subject (`sub`) of the caller's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The caller's e-mail claim, when the token carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The MCP session the call came in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl Author {
    /// The author of the call made in `ctx`.
    pub fn of(ctx: &muster_core::CallContext) -> Self {
        let session = (!ctx.session.is_anonymous()).then(|| ctx.session.as_str().to_owned());
        match &ctx.principal {
            Some(p) => Self {
                issuer: p.issuer.clone(),
                subject: Some(p.subject.clone()),
                email: p.email.clone(),
                session,
            },
            None => Self {
                session,
                ..Self::default()
            },
        }
    }
}

impl std::fmt::Display for Author {
    /// `<subject> (<issuer>)`, `session <id>`, or `unknown`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.subject, &self.issuer, &self.session) {
            (Some(subject), Some(issuer), _) => write!(f, "{subject} ({issuer})"),
            (Some(subject), None, _) => f.write_str(subject),
            (None, _, Some(session)) => write!(f, "session {session}"),
            (None, _, None) => f.write_str("unknown"),
        }
    }
}

impl EventDetails {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Sets the HTTP status.
    pub fn with_http_status(mut self, status: u16) -> Self {
        self.http_status = Some(status);
        self
    }

    /// Sets the time of the next attempt.
    pub fn with_next_retry_after(mut self, at: DateTime<Utc>) -> Self {
        self.next_retry_after = Some(at);
        self
    }

    /// Sets the error text.
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// Sets the workflow execution id.
    pub fn with_execution_id(mut self, id: impl Into<String>) -> Self {
        self.execution_id = Some(id.into());
        self
    }

    /// Sets the workflow step id.
    pub fn with_step_id(mut self, id: impl Into<String>) -> Self {
        self.step_id = Some(id.into());
        self
    }

    /// Sets the tool name.
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Sets who made the change.
    pub fn with_author(mut self, author: Author) -> Self {
        self.author = Some(author);
        self
    }

    /// Sets the warnings about a definition.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }
}

/// One event, shaped like Go muster's stored event (`api.EventResult`), one JSON object per
/// line of `events/events-YYYY-MM-DD.json`:
///
/// ```json
/// {"timestamp":"2026-09-21T12:43:00.5Z","namespace":"default",
///  "involvedObject":{"kind":"MCPServer","name":"git","namespace":"default"},
///  "reason":"MCPServerStarted","message":"MCPServer git started","type":"Normal","source":"muster"}
/// ```
///
/// `data` ([`EventDetails`]) is this gateway's addition and is omitted when empty; Go muster
/// ignores it when it reads the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// When it happened.
    pub timestamp: DateTime<Utc>,
    /// Namespace of the resource (also in `involved_object`).
    #[serde(default)]
    pub namespace: String,
    /// The resource it is about.
    pub involved_object: InvolvedObject,
    /// What happened, one CamelCase word; see [`reasons`](super::reasons).
    pub reason: String,
    /// What happened, for people.
    #[serde(default)]
    pub message: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type", default)]
    pub event_type: EventType,
    /// The component that reported it; [`SOURCE`] for this gateway's own events.
    #[serde(default)]
    pub source: String,
    /// How many times it happened (Kubernetes aggregates repeats); 0 or 1 is once.
    #[serde(default, skip_serializing_if = "is_once")]
    pub count: u32,
    /// Structured facts beyond the message.
    #[serde(default, skip_serializing_if = "EventDetails::is_empty")]
    pub data: EventDetails,
}

fn is_once(count: &u32) -> bool {
    *count <= 1
}

impl Event {
    /// An event about the resource `kind`/`name` in [`DEFAULT_NAMESPACE`], happening now, with
    /// the type Go muster gives `reason` ([`reasons::event_type`](super::reasons::event_type)).
    pub fn new(
        kind: impl Into<String>,
        name: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let reason = reason.into();
        Self {
            timestamp: Utc::now(),
            namespace: DEFAULT_NAMESPACE.to_owned(),
            involved_object: InvolvedObject {
                kind: kind.into(),
                name: name.into(),
                namespace: DEFAULT_NAMESPACE.to_owned(),
                ..InvolvedObject::default()
            },
            event_type: super::reasons::event_type(&reason),
            reason,
            message: message.into(),
            source: SOURCE.to_owned(),
            count: 0,
            data: EventDetails::default(),
        }
    }

    /// An event about the MCPServer `name`.
    pub fn mcp_server(name: impl Into<String>, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(KIND_MCP_SERVER, name, reason, message)
    }

    /// An event about the Workflow `name`.
    pub fn workflow(name: impl Into<String>, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(KIND_WORKFLOW, name, reason, message)
    }

    /// The Warning event about the fields dropped from definition `kind`/`name`
    /// ([`KIND_MCP_SERVER`] or [`KIND_WORKFLOW`]); `None` when none were.
    pub fn fields_dropped(kind: &str, name: &str, warnings: &[String]) -> Option<Self> {
        if warnings.is_empty() {
            return None;
        }
        let reason = if kind == KIND_MCP_SERVER {
            super::reasons::MCP_SERVER_FIELDS_DROPPED
        } else {
            super::reasons::WORKFLOW_FIELDS_DROPPED
        };
        let message = format!("{kind} {name}: {}", warnings.join("; "));
        Some(
            Self::new(kind, name, reason, message)
                .with_details(EventDetails::default().with_warnings(warnings.to_vec())),
        )
    }

    /// Moves the event to `namespace` (an empty one keeps [`DEFAULT_NAMESPACE`]).
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        let namespace = namespace.into();
        if !namespace.is_empty() {
            self.involved_object.namespace.clone_from(&namespace);
            self.namespace = namespace;
        }
        self
    }

    /// Overrides the type derived from the reason.
    pub fn with_type(mut self, event_type: EventType) -> Self {
        self.event_type = event_type;
        self
    }

    /// Sets the time it happened.
    pub fn with_timestamp(mut self, timestamp: DateTime<Utc>) -> Self {
        self.timestamp = timestamp;
        self
    }

    /// Attaches structured facts.
    pub fn with_details(mut self, data: EventDetails) -> Self {
        self.data = data;
        self
    }

    /// The kind of the resource it is about.
    pub fn kind(&self) -> &str {
        &self.involved_object.kind
    }

    /// The name of the resource it is about.
    pub fn name(&self) -> &str {
        &self.involved_object.name
    }

    /// The event as one entry of the `core_events` answer and as the params of a
    /// `notifications/muster/event` notification, the shape Go muster shows:
    ///
    /// ```json
    /// {"timestamp":"2026-09-21 12:43:00","resource_type":"MCPServer","resource_name":"git",
    ///  "namespace":"default","reason":"MCPServerStarted","message":"...","type":"Normal"}
    /// ```
    ///
    /// The timestamp is UTC, to the second. `count` appears when above 1 and `data` when set.
    pub fn to_display_json(&self) -> Value {
        let mut entry = Map::new();
        entry.insert(
            "timestamp".into(),
            json!(self.timestamp.format("%Y-%m-%d %H:%M:%S").to_string()),
        );
        entry.insert("resource_type".into(), json!(self.involved_object.kind));
        entry.insert("resource_name".into(), json!(self.involved_object.name));
        entry.insert("namespace".into(), json!(self.namespace));
        entry.insert("reason".into(), json!(self.reason));
        entry.insert("message".into(), json!(self.message));
        entry.insert("type".into(), json!(self.event_type.as_str()));
        if self.count > 1 {
            entry.insert("count".into(), json!(self.count));
        }
        if !self.data.is_empty() {
            entry.insert("data".into(), json!(self.data));
        }
        Value::Object(entry)
    }
}
