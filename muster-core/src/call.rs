//! The one abstraction: a tool call is a tower [`Service`].
//!
//! Everything that runs a tool is a [`ToolService`]: a downstream server's tool, a core tool, a
//! workflow. Everything that decides about a call (toolset enforcement, sign-in, timeouts,
//! metrics, the `call_tool` envelope) is a [`tower::Layer`] over one. A call carries its
//! [`CallContext`]: who is calling, in which session, under which toolset, with which budget,
//! and where progress goes.
//!
//! ```
//! use muster_core::{CallContext, ToolCall, ToolError, BoxToolService};
//! use rmcp::model::{CallToolResult, ContentBlock};
//! use tower::{ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let echo = service_fn(|call: ToolCall| async move {
//!     let text = call.arguments.get("message").and_then(|m| m.as_str()).unwrap_or_default().to_owned();
//!     Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(text)]).into())
//! });
//! let svc = BoxToolService::new(echo);
//! let args = serde_json::json!({"message": "hi"}).as_object().cloned().unwrap_or_default();
//! let output = svc.oneshot(ToolCall::new("echo", args, CallContext::default())).await.unwrap();
//! let result = output.into_result().unwrap();
//! assert_eq!(result.content[0].as_text().map(|t| t.text.as_str()), Some("hi"));
//! # }
//! ```

use std::{fmt, sync::Arc, time::Instant};

use rmcp::model::{JsonObject, ProtocolVersion};
use tokio_util::sync::CancellationToken;
use tower::Service;

use crate::{
    error::ToolError,
    output::{ReadsTypedResult, ToolOutput},
};

/// One tool call: the exposed name, the arguments, and the context it runs in.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The exposed name of the tool to run (`x_kubernetes_get_pods`, `core_service_list`, ...).
    pub name: String,
    /// The tool's arguments, a JSON object passed through untouched.
    pub arguments: JsonObject,
    /// Who calls, in which session, with which budget.
    pub ctx: CallContext,
}

impl ToolCall {
    /// A call of `name` with `arguments` in `ctx`.
    pub fn new(name: impl Into<String>, arguments: JsonObject, ctx: CallContext) -> Self {
        Self {
            name: name.into(),
            arguments,
            ctx,
        }
    }
}

/// The identity of an MCP session (a transport session, or a principal's session).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(Arc<str>);

impl SessionId {
    /// A session id from any string.
    pub fn new(id: impl AsRef<str>) -> Self {
        Self(Arc::from(id.as_ref()))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The session of an HTTP caller that has no identity: no authenticated principal and no
    /// transport session (the stateless 2026-07-28 protocol without front-door auth). Every
    /// such caller shares it, so nothing personal (a sign-in) may be kept for it.
    pub fn anonymous() -> Self {
        Self::new(ANONYMOUS_SESSION)
    }

    /// Whether this is the [anonymous](Self::anonymous) session.
    pub fn is_anonymous(&self) -> bool {
        &*self.0 == ANONYMOUS_SESSION
    }
}

const ANONYMOUS_SESSION: &str = "anonymous";

impl Default for SessionId {
    /// The session of a caller that has none (stdio, or an embedding without sessions).
    fn default() -> Self {
        Self::new("default")
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The authenticated caller, as the front door established it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Principal {
    /// The subject (`sub`) the caller authenticated as.
    pub subject: String,
    /// The issuer that vouched for the subject, when known.
    pub issuer: Option<String>,
    /// The caller's e-mail claim, when the token carried one.
    pub email: Option<String>,
    /// The client the token was issued to (`azp` or `client_id`), when known.
    pub authorized_party: Option<String>,
    /// The actor chain (RFC 8693 `act`), when the token carried one, as JSON.
    pub actor: Option<String>,
    /// The groups the token named (its `groups` claim).
    pub groups: Vec<String>,
}

impl Principal {
    /// A principal with only a subject.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            issuer: None,
            email: None,
            authorized_party: None,
            actor: None,
            groups: Vec::new(),
        }
    }

    /// Sets the groups.
    pub fn with_groups(mut self, groups: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.groups = groups.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the authorized party.
    pub fn with_authorized_party(mut self, party: impl Into<String>) -> Self {
        self.authorized_party = Some(party.into());
        self
    }

    /// Sets the actor chain.
    pub fn with_actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// Sets the issuer.
    pub fn with_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Sets the e-mail claim.
    pub fn with_email(mut self, email: impl Into<String>) -> Self {
        self.email = Some(email.into());
        self
    }
}

/// One progress report of a running call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProgressUpdate {
    /// Progress so far.
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// A human-readable message, when the reporter gave one.
    pub message: Option<String>,
}

impl ProgressUpdate {
    /// A report of `progress` out of `total`.
    pub fn new(progress: f64, total: Option<f64>) -> Self {
        Self {
            progress,
            total,
            message: None,
        }
    }

    /// Sets the message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// Where a call's progress reports go (usually: to the calling client, under its own token).
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(ProgressUpdate) + Send + Sync>);

impl ProgressSink {
    /// A sink that hands every report to `f`.
    pub fn new(f: impl Fn(ProgressUpdate) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Reports progress.
    pub fn report(&self, update: ProgressUpdate) {
        (self.0)(update);
    }
}

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressSink(..)")
    }
}

/// The context a call runs in: identity, session, toolset, protocol, budget, progress.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CallContext {
    /// The MCP session the call belongs to.
    pub session: SessionId,
    /// The authenticated caller, when the front door authenticated one.
    pub principal: Option<Principal>,
    /// The request's toolset selectors (`X-muster-Toolset`), as declared, when it declared one.
    pub toolset: Option<Arc<[String]>>,
    /// The protocol version the calling client speaks, when known.
    pub protocol_version: Option<ProtocolVersion>,
    /// Where progress reports go, when the caller asked for progress.
    pub progress: Option<ProgressSink>,
    /// Cancelled when the caller cancels the call (or goes away).
    pub cancellation: CancellationToken,
    /// The instant by which the call must be answered, when the caller set one.
    pub deadline: Option<Instant>,
    /// Extension data for layers (the request's HTTP parts, a parsed toolset, ...).
    pub extensions: http::Extensions,
}

impl CallContext {
    /// The context of a call in `session`, with nothing else set.
    pub fn for_session(session: SessionId) -> Self {
        Self {
            session,
            ..Self::default()
        }
    }

    /// Sets the principal.
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal = Some(principal);
        self
    }

    /// Sets the toolset selectors.
    pub fn with_toolset(mut self, selectors: impl Into<Arc<[String]>>) -> Self {
        self.toolset = Some(selectors.into());
        self
    }

    /// Sets the protocol version.
    pub fn with_protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.protocol_version = Some(version);
        self
    }

    /// Sets the progress sink.
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Sets the cancellation token.
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// Sets the deadline.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Marks the call as made by one that reads the typed result ([`ReadsTypedResult`]).
    pub fn reading_typed_result(mut self) -> Self {
        self.extensions.insert(ReadsTypedResult);
        self
    }

    /// Whether the call's maker reads the typed result ([`Self::reading_typed_result`]).
    pub fn reads_typed_result(&self) -> bool {
        self.extensions.get::<ReadsTypedResult>().is_some()
    }
}

/// Anything that runs tool calls: `Service<ToolCall, Response = ToolOutput, Error = ToolError>`,
/// cloneable and sendable. Implemented for every such service. A tool built in the process
/// answers a `CallToolResult` (`.into()` makes it a [`ToolOutput`]); a downstream server's
/// result is passed on as it came.
pub trait ToolService:
    Service<ToolCall, Response = ToolOutput, Error = ToolError, Future: Send + 'static> + Clone + Send + 'static
{
}

impl<S> ToolService for S where
    S: Service<ToolCall, Response = ToolOutput, Error = ToolError, Future: Send + 'static> + Clone + Send + 'static
{
}

/// A type-erased [`ToolService`], cloneable and shareable between threads.
pub type BoxToolService = tower::util::BoxCloneSyncService<ToolCall, ToolOutput, ToolError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_sink_hands_reports_to_its_function() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = {
            let seen = Arc::clone(&seen);
            ProgressSink::new(move |u| seen.lock().expect("lock").push(u.progress))
        };
        sink.report(ProgressUpdate::new(0.5, Some(1.0)));
        sink.report(ProgressUpdate::new(1.0, Some(1.0)).with_message("done"));
        assert_eq!(*seen.lock().expect("lock"), vec![0.5, 1.0]);
    }

    #[test]
    fn contexts_default_to_the_default_session_and_no_toolset() {
        let ctx = CallContext::default();
        assert_eq!(ctx.session.as_str(), "default");
        assert!(ctx.toolset.is_none());
        let scoped = CallContext::for_session(SessionId::new("s1")).with_toolset(vec!["preset:read-only".to_owned()]);
        assert_eq!(scoped.session.to_string(), "s1");
        assert_eq!(scoped.toolset.as_deref(), Some(&["preset:read-only".to_owned()][..]));
    }
}
