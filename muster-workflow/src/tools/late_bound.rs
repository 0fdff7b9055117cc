//! The handle a workflow's steps call through: bound to the tool stack once the stack is built,
//! and holding it only weakly.
//!
//! In a gateway the steps of a run call the gateway's whole stack, and that stack contains the
//! workflow service, whose engine holds the handle. Were the handle to own the stack, the stack
//! would own itself and never be dropped. So [`LateBoundTools::bind`] takes the built stack and
//! answers the stack to serve calls with: every clone of that answer, and every call made through
//! one until it ends, keeps the stack alive, and the handle only refers to it. Once the last
//! clone is dropped and the last call has ended, the stack goes, and with it everything it
//! holds; a step called after that is refused with [`ToolError::ServerUnavailable`] (`the
//! gateway is shutting down`).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, RwLock, Weak},
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use muster_core::{BoxToolService, ToolCall, ToolError, ToolOutput};
use tower::{Service, ServiceExt};

/// A [`ToolService`](muster_core::ToolService) that calls the stack it was
/// [bound](Self::bind) to, without keeping that stack alive. Clones share the binding.
#[derive(Clone, Default)]
pub struct LateBoundTools {
    stack: Arc<RwLock<Option<Weak<BoxToolService>>>>,
}

impl fmt::Debug for LateBoundTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LateBoundTools")
            .field("bound", &self.is_bound())
            .field("live", &self.is_live())
            .finish()
    }
}

impl LateBoundTools {
    /// A handle bound to nothing yet: calls are refused until [`bind`](Self::bind).
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds this handle (and every clone of it) to `stack`, and answers the stack to serve
    /// calls with: `stack` itself, kept alive by every clone of the answer and by every call
    /// made through one until that call ends. Binding again points later calls at the new
    /// stack.
    pub fn bind(&self, stack: BoxToolService) -> BoxToolService {
        let owner = Arc::new(stack.clone());
        *self.stack.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(&owner));
        BoxToolService::new(Kept { stack, owner })
    }

    /// Whether a stack was bound (it may be gone since).
    pub fn is_bound(&self) -> bool {
        self.stack.read().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Whether a stack is bound and still alive, so that a call would reach it.
    pub fn is_live(&self) -> bool {
        self.reachable().is_ok()
    }

    /// Whether a call would reach a stack: `Ok` when one is bound and alive, else the refusal
    /// the call would get ([`ToolError::ServerUnavailable`] of server `muster`: `the gateway is
    /// shutting down` once the stack is gone, `workflow steps have no tool stack to call yet`
    /// before one is bound).
    pub fn reachable(&self) -> Result<(), ToolError> {
        self.upgrade().map(drop)
    }

    /// The bound stack, when it is alive; the refusal otherwise.
    fn upgrade(&self) -> Result<Arc<BoxToolService>, ToolError> {
        let slot = self.stack.read().unwrap_or_else(|e| e.into_inner());
        let reason = match slot.as_ref().map(Weak::upgrade) {
            Some(Some(stack)) => return Ok(stack),
            Some(None) => "the gateway is shutting down",
            None => "workflow steps have no tool stack to call yet",
        };
        Err(ToolError::ServerUnavailable {
            server: "muster".to_owned(),
            reason: reason.to_owned(),
        })
    }
}

impl Service<ToolCall> for LateBoundTools {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        // Readiness is the bound stack's: it is polled in `call`, on the clone the call uses.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        match self.upgrade() {
            Ok(stack) => Box::pin((*stack).clone().oneshot(call)),
            Err(refused) => Box::pin(std::future::ready(Err(refused))),
        }
    }
}

/// The bound stack as callers hold it: the stack, plus the shared owner a [`LateBoundTools`]
/// refers to weakly.
#[derive(Clone)]
struct Kept {
    stack: BoxToolService,
    owner: Arc<BoxToolService>,
}

impl Service<ToolCall> for Kept {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = KeptCall;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        self.stack.poll_ready(cx)
    }

    fn call(&mut self, call: ToolCall) -> KeptCall {
        KeptCall {
            call: self.stack.call(call),
            _owner: Arc::clone(&self.owner),
        }
    }
}

/// A call through a [`Kept`] stack, which keeps the stack alive until the call ends: a caller
/// may drop its last clone of the stack once it has called it (`ServiceExt::oneshot` does), and
/// the steps of a workflow run by that call still reach the stack.
struct KeptCall {
    call: <BoxToolService as Service<ToolCall>>::Future,
    _owner: Arc<BoxToolService>,
}

impl Future for KeptCall {
    type Output = Result<ToolOutput, ToolError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.call.as_mut().poll(cx)
    }
}
