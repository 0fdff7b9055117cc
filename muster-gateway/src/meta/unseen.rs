//! The gateway's answer to a call of a tool the request's catalogue does not show
//! ([`UnseenTools`]): a sign-in link when the tool belongs to a server the session has not signed
//! in to, why single sign-on failed, its server's state, or the refusal itself. `call_tool`
//! answers with it, and so does a native call; every refusal is counted in the metrics.

use std::sync::Arc;

use futures::future::BoxFuture;
use muster_catalog::{
    discovery::error_answer,
    meta::{Unseen, UnseenTools},
};
use muster_core::{CallContext, ToolError};
use rmcp::model::CallToolResult;
use serde_json::json;

use crate::{
    auth::DownstreamAuth,
    metrics::{CallTarget, GatewayMetrics, Outcome},
    registry::Registry,
};

/// Why a tool the request does not see cannot be called, as the registry and the sign-in
/// services know it.
pub(crate) enum Refusal {
    /// The session has not signed in to the tool's server: the `auth_required` answer.
    SignIn(CallToolResult),
    /// The tool's server is served with the caller's identity, which it did not accept.
    SingleSignOn(String),
    /// The tool's server is not available (its state says why).
    Unavailable(ToolError),
}

/// The registry and the sign-in services, answering calls of tools a request does not see.
pub(crate) struct RegistryUnseen {
    registry: Arc<Registry>,
    auth: Option<DownstreamAuth>,
    /// Where each refused call is counted.
    metrics: Arc<GatewayMetrics>,
}

impl RegistryUnseen {
    pub(crate) fn new(registry: Arc<Registry>, auth: Option<DownstreamAuth>, metrics: Arc<GatewayMetrics>) -> Self {
        Self {
            registry,
            auth,
            metrics,
        }
    }

    /// Why `name` cannot be called in `ctx`, when anybody knows it.
    pub(crate) async fn refusal(&self, name: &str, ctx: &CallContext) -> Option<Refusal> {
        if let Some(answer) = self.sign_in_answer(name, ctx).await {
            return Some(Refusal::SignIn(answer));
        }
        if let Some(reason) = self.sso_failure(name, ctx) {
            return Some(Refusal::SingleSignOn(reason));
        }
        self.registry.unavailable_tool(name).map(Refusal::Unavailable)
    }

    /// Why the session could not reach the single sign-on server tool `name` belongs to, when
    /// its last attempt failed (an exchange refused, a forwarded token rejected).
    fn sso_failure(&self, name: &str, ctx: &CallContext) -> Option<String> {
        let auth = self.auth.as_ref()?;
        self.registry.servers().into_iter().find_map(|view| {
            let definition = &view.definition;
            let prefix = definition
                .spec
                .tool_prefix
                .as_deref()
                .unwrap_or(&definition.metadata.name);
            let head = self.registry.names().server_tool(prefix, "");
            (!head.is_empty() && name.starts_with(&head) && name.len() > head.len())
                .then(|| auth.sso().failure(&ctx.session, &definition.metadata.name))
                .flatten()
                .map(|reason| {
                    format!(
                        "{name} is served with your own identity, which {} did not accept: {reason}",
                        definition.metadata.name
                    )
                })
        })
    }

    /// The `auth_required` answer of a call to a tool of a server the session has not signed in
    /// to: an error result whose text and structured content carry the sign-in link.
    async fn sign_in_answer(&self, name: &str, ctx: &CallContext) -> Option<CallToolResult> {
        let service = self.auth.as_ref()?.sign_in()?;
        let hint = self
            .registry
            .servers_requiring_auth(&ctx.session, None)
            .into_iter()
            .find(|h| {
                let head = self
                    .registry
                    .names()
                    .server_tool(h.tool_prefix.as_deref().unwrap_or(&h.name), "");
                !head.is_empty() && name.starts_with(&head) && name.len() > head.len()
            })?;
        let link = match Box::pin(service.login(&self.registry, ctx, &hint.name, false)).await {
            Ok(link) => link,
            Err(e) => return Some(error_answer(format!("Tool execution failed: {e}"))),
        };
        let url = link["authUrl"].as_str().unwrap_or_default().to_owned();
        let answer = json!({
            "status": "auth_required",
            "server": hint.name,
            "tool": name,
            "authUrl": url,
            "auth_tool": "core_auth_login",
        });
        let mut result = error_answer(format!(
            "{name} needs you to sign in to {}: open {url} and call the tool again once you are signed in.",
            hint.name
        ));
        result.structured_content = Some(answer);
        Some(result)
    }
}

impl UnseenTools for RegistryUnseen {
    fn answer<'a>(&'a self, call: Unseen<'a>) -> BoxFuture<'a, CallToolResult> {
        Box::pin(async move {
            let started = std::time::Instant::now();
            let (outcome, result) = match &call.refusal {
                ToolError::OutsideToolset { .. } => (Outcome::OutsideToolset, call.refused()),
                _ => match self.refusal(call.name, call.ctx).await {
                    Some(Refusal::SignIn(answer)) => (Outcome::AuthRequired, answer),
                    Some(Refusal::SingleSignOn(reason)) => (
                        Outcome::Unavailable,
                        error_answer(format!("Tool execution failed: {reason}")),
                    ),
                    Some(Refusal::Unavailable(error)) => (
                        Outcome::of_error(&error),
                        error_answer(format!("Tool execution failed: {error}")),
                    ),
                    None => (Outcome::of_error(&call.refusal), call.refused()),
                },
            };
            let target = CallTarget::of(call.request.view.catalog(), call.name, call.arguments);
            self.metrics.record_call(&target, outcome, started.elapsed());
            result
        })
    }
}
