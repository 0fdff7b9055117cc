//! The URL elicitation layer: a call that needs a person to sign in somewhere, answered the way
//! the client's protocol version calls for, over any [`ToolService`](muster_core::ToolService).
//!
//! An inner service says "this needs a sign-in" by leaving a [`SignInChallenge`](super::challenge::SignInChallenge) in the call's
//! [`ChallengeSlot`] (`ChallengeSlot::record`) next to its result, which is the `auth_required`
//! result a client that knows no elicitation reads. [`UrlElicitation`] installs the slot, runs
//! the call, and answers ([`challenge::answer`]):
//!
//! - 2026-07-28 or later, URL elicitation declared: `input_required` with one URL-mode
//!   elicitation and a `requestState`. The client's retry carries the person's answer
//!   ([`SignInRetry`] in the call's extensions): declined, nothing runs; accepted, the layer
//!   waits for the sign-in to complete ([`SignInWaiter`]) and then runs the call;
//! - 2025-11-25, URL elicitation declared: the JSON-RPC error -32042 carrying the elicitation
//!   (`notifications/elicitation/complete` follows the callback: the sign-in service's);
//! - any other client: the inner result itself.
//!
//! The layer reads the protocol version from [`CallContext::protocol_version`](muster_core::CallContext::protocol_version) and the client's
//! capabilities from a [`ClientCapabilities`] in the call's extensions; an MCP server in front
//! puts them there. The meta-tools server uses [`elicit`], the same logic as a function, with the
//! capabilities read only when a challenge was left.
//!
//! ```
//! use muster_core::{CallContext, JsonObject, ToolCall, ToolError};
//! use muster_gateway::auth::{
//!     challenge::{ChallengeSlot, SignInChallenge},
//!     elicitation::{Elicited, UrlElicitationLayer},
//! };
//! use rmcp::model::{CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ElicitationCapability, ProtocolVersion, UrlElicitationCapability};
//! use tower::{Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A tool of our own that needs the person to sign in to its app first.
//! let tool = tower::service_fn(|call: ToolCall| async move {
//!     let link = "https://gateway.example.com/oauth/proxy/start?state=st4te";
//!     ChallengeSlot::record(&call.ctx, SignInChallenge::new("crm", "st4te", link));
//!     Ok::<_, ToolError>(CallToolResult::error(vec![ContentBlock::text(format!("sign in first: {link}"))]).into())
//! });
//! let layered = UrlElicitationLayer::new(None).layer(tool);
//!
//! // A 2026-07-28 client that declared URL elicitation gets input_required...
//! let mut ctx = CallContext::default().with_protocol_version(ProtocolVersion::V_2026_07_28);
//! ctx.extensions.insert(
//!     ClientCapabilities::builder()
//!         .enable_elicitation_with(ElicitationCapability::new().with_url(UrlElicitationCapability::new()))
//!         .build(),
//! );
//! let answer = layered.clone().oneshot(ToolCall::new("crm_find", JsonObject::new(), ctx)).await.unwrap();
//! assert!(matches!(answer, Elicited::Challenged(CallToolResponse::InputRequired(_))));
//!
//! // ...a client that knows no elicitation, the tool's own result.
//! let answer = layered.oneshot(ToolCall::new("crm_find", JsonObject::new(), CallContext::default())).await.unwrap();
//! assert!(matches!(answer, Elicited::Output(output) if output.is_error()));
//! # }
//! ```

use std::{
    future::Future,
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use muster_catalog::discovery::error_answer;
use muster_core::{SessionId, ToolCall, ToolError, ToolOutput, complete::MarkComplete};
use rmcp::{
    ErrorData as McpError,
    model::{CallToolResponse, ClientCapabilities, InputResponses, ProtocolVersion},
};
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service, ServiceExt};

use super::challenge::{self, ChallengeSlot, Consent, SignInState};

/// Waits for the sign-in a link started to complete (or give up), for a retry whose person
/// accepted to sign in.
pub trait SignInWaiter: Send + Sync {
    /// Resolves once the sign-in of `link` to `server`, given to `session`, completed or gave
    /// up, or `cancel` is cancelled.
    fn wait<'a>(
        &'a self,
        session: &'a SessionId,
        server: &'a str,
        link: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ()>;
}

/// A 2026-07-28 retry of a call answered with `input_required`: the `requestState` and
/// `inputResponses` of its `tools/call`, in the call's extensions.
#[derive(Debug, Clone, Default)]
pub struct SignInRetry {
    /// The state the gateway gave with `input_required`.
    pub request_state: Option<String>,
    /// The person's answers, by input key.
    pub input_responses: Option<InputResponses>,
}

/// How a call through the layer was answered.
#[derive(Debug)]
pub enum Elicited {
    /// The inner service's output: no sign-in was asked for, or the client reads the result
    /// itself.
    Output(ToolOutput),
    /// What the sign-in challenge made of it (`input_required`, for a 2026-07-28 client).
    Challenged(CallToolResponse),
}

impl Elicited {
    /// The answer as rmcp's typed response. An output passed on as it came is read here, and one
    /// that does not read is the tool's error result, as an unreadable answer is.
    pub fn into_response(self) -> CallToolResponse {
        match self {
            Self::Output(output) => output
                .into_result()
                .unwrap_or_else(|e| error_answer(e.to_string()))
                .completed()
                .into(),
            Self::Challenged(response) => response,
        }
    }
}

/// Answers calls whose inner service left a sign-in challenge by the client's protocol version;
/// see the [module](self).
#[derive(Clone, Default)]
pub struct UrlElicitationLayer {
    waiter: Option<Arc<dyn SignInWaiter>>,
}

impl UrlElicitationLayer {
    /// The layer; `waiter` makes an accepting retry wait for its sign-in (without one, the retry
    /// runs at once).
    pub fn new(waiter: Option<Arc<dyn SignInWaiter>>) -> Self {
        Self { waiter }
    }
}

impl std::fmt::Debug for UrlElicitationLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlElicitationLayer")
            .field("waits", &self.waiter.is_some())
            .finish()
    }
}

impl<S> Layer<S> for UrlElicitationLayer {
    type Service = UrlElicitation<S>;

    fn layer(&self, inner: S) -> UrlElicitation<S> {
        UrlElicitation {
            inner,
            waiter: self.waiter.clone(),
        }
    }
}

/// The service [`UrlElicitationLayer`] makes.
#[derive(Clone)]
pub struct UrlElicitation<S> {
    inner: S,
    waiter: Option<Arc<dyn SignInWaiter>>,
}

impl<S> std::fmt::Debug for UrlElicitation<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlElicitation").finish_non_exhaustive()
    }
}

impl<S> Service<ToolCall> for UrlElicitation<S>
where
    S: Service<ToolCall, Response = ToolOutput, Error = ToolError> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Elicited;
    type Error = McpError;
    type Future = BoxFuture<'static, Result<Elicited, McpError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), McpError>> {
        self.inner.poll_ready(cx).map_err(McpError::from)
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        // The readied service runs this call; the clone is readied for the next.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let waiter = self.waiter.clone();
        Box::pin(async move {
            let retry = call.ctx.extensions.get::<SignInRetry>().cloned();
            let version = call.ctx.protocol_version.clone();
            let capabilities = call.ctx.extensions.get::<ClientCapabilities>().cloned();
            elicit(
                call,
                retry.as_ref(),
                waiter.as_deref(),
                |call| async move { inner.oneshot(call).await.map_err(McpError::from) },
                || (version, capabilities),
            )
            .await
        })
    }
}

/// The layer's logic as a function: answers `retry` (declined: the declining answer, nothing
/// runs; accepted: waits with `waiter`), runs `call` with `inner` with a [`ChallengeSlot`]
/// installed, and when a challenge was left, answers it for the client `protocol` describes
/// (read only then).
pub async fn elicit<F, Fut, P>(
    mut call: ToolCall,
    retry: Option<&SignInRetry>,
    waiter: Option<&dyn SignInWaiter>,
    inner: F,
    protocol: P,
) -> Result<Elicited, McpError>
where
    F: FnOnce(ToolCall) -> Fut,
    Fut: Future<Output = Result<ToolOutput, McpError>>,
    P: FnOnce() -> (Option<ProtocolVersion>, Option<ClientCapabilities>),
{
    if let Some(retry) = retry
        && let Some(state) = retry.request_state.as_deref().and_then(SignInState::decode)
    {
        match challenge::consent(retry.input_responses.as_ref()) {
            Consent::Declined => return Ok(Elicited::Output(challenge::declined(&state.server).into())),
            Consent::Accepted => {
                if let Some(waiter) = waiter {
                    let cancel = call.ctx.cancellation.clone();
                    waiter.wait(&call.ctx.session, &state.server, &state.link, cancel).await;
                }
            }
            Consent::Missing => {}
        }
    }
    let slot = ChallengeSlot::install(&mut call.ctx);
    let output = inner(call).await?;
    match slot.take() {
        None => Ok(Elicited::Output(output)),
        Some(challenge) => {
            let (version, capabilities) = protocol();
            if !challenge::elicits(version.as_ref(), capabilities.as_ref()) {
                return Ok(Elicited::Output(output));
            }
            let result = output.into_result().unwrap_or_else(|e| error_answer(e.to_string()));
            challenge::answer(challenge, result, version.as_ref(), capabilities.as_ref()).map(Elicited::Challenged)
        }
    }
}

#[cfg(test)]
mod tests;
