//! What the meta-tools need beyond the catalogue and the tool service, as hooks an embedder
//! implements: [`EntryReader`] reads resources and prompts from their servers, and
//! [`UnseenTools`] answers a `call_tool` of a name the request's catalogue does not show.

use futures::future::BoxFuture;
use muster_core::{BoxError, CallContext, JsonObject, ToolError};
use rmcp::model::{CallToolResult, GetPromptResult, ReadResourceResult};

use crate::discovery::{RequestView, error_answer};

/// Reads a resource or gets a prompt from the server that exposes it: what `get_resource` and
/// `get_prompt` answer with. `()` reads nothing: no server is connected.
pub trait EntryReader: Send + Sync + 'static {
    /// Reads `uri` (the server's own URI) from `server` for the call of `ctx`.
    fn read_resource<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ReadResourceResult, EntryError>>;

    /// Gets prompt `prompt` (the server's own name) of `server` with `arguments`, for the call
    /// of `ctx`.
    fn get_prompt<'a>(
        &'a self,
        server: &'a str,
        prompt: &'a str,
        arguments: Option<JsonObject>,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<GetPromptResult, EntryError>>;
}

impl EntryReader for () {
    fn read_resource<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a CallContext,
    ) -> BoxFuture<'a, Result<ReadResourceResult, EntryError>> {
        Box::pin(async { Err(EntryError::NotConnected) })
    }

    fn get_prompt<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Option<JsonObject>,
        _: &'a CallContext,
    ) -> BoxFuture<'a, Result<GetPromptResult, EntryError>> {
        Box::pin(async { Err(EntryError::NotConnected) })
    }
}

/// Why an [`EntryReader`] could not read an entry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// The session has no connection to the entry's server.
    #[error("the server is not connected")]
    NotConnected,
    /// The server answered with an error, or could not be reached.
    #[error(transparent)]
    Failed(BoxError),
}

/// A `call_tool` of a tool the request's catalogue does not show, as [`UnseenTools`] sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Unseen<'a> {
    /// The tool asked for.
    pub name: &'a str,
    /// Its arguments.
    pub arguments: &'a JsonObject,
    /// The catalogue the request sees.
    pub request: &'a RequestView,
    /// The call's context.
    pub ctx: &'a CallContext,
    /// The refusal, when nothing else explains it: [`ToolError::OutsideToolset`] when the
    /// request's toolset hides the tool, else [`ToolError::NotFound`].
    pub refusal: ToolError,
}

impl Unseen<'_> {
    /// The answer of [`Self::refusal`]: an error result naming the toolset that hides the tool,
    /// or `Tool execution failed: ...`.
    pub fn refused(&self) -> CallToolResult {
        match &self.refusal {
            refusal @ ToolError::OutsideToolset { .. } => error_answer(refusal.to_string()),
            refusal => error_answer(format!("Tool execution failed: {refusal}")),
        }
    }
}

/// Answers a `call_tool` of a name the request's catalogue does not show. `()` answers the
/// refusal ([`Unseen::refused`]); a gateway answers with a sign-in link for a server the caller
/// has not signed in to, or why the tool's server is unavailable.
pub trait UnseenTools: Send + Sync + 'static {
    /// The answer of `call`.
    fn answer<'a>(&'a self, call: Unseen<'a>) -> BoxFuture<'a, CallToolResult>;
}

impl UnseenTools for () {
    fn answer<'a>(&'a self, call: Unseen<'a>) -> BoxFuture<'a, CallToolResult> {
        Box::pin(async move { call.refused() })
    }
}
