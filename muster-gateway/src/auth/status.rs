//! The caller's sign-in state on every server: the `auth://status` document, and the answer of
//! `core_auth_status` (which with `auth_urls` also issues the links `core_auth_login` would).
//!
//! Per server: `name`, `status`, `kind` (`grant`: the person signs in with `core_auth_login`;
//! `sso`: the muster sign-in is forwarded or exchanged, never a link; `none`), `suspended`, and
//! as they apply `grant_scope`, `issuer`, `scope`, `expires_at`, `auth_tool`, `error`,
//! `auth_url` and the SSO flags `token_forwarding_enabled` / `token_exchange_enabled`.

use std::sync::Arc;

use muster_core::{
    CallContext,
    crd::{GrantScope, MCPServerState},
};
use serde_json::{Map, Value, json};

use super::SignInService;
use crate::registry::{Registry, ServerView};

/// How a server's caller gets its credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Grant,
    Sso,
    None,
}

fn kind_of(view: &ServerView) -> Kind {
    let auth = view.definition.spec.auth.as_ref();
    if auth.is_some_and(|a| a.forward_token || a.token_exchange.as_ref().is_some_and(|t| t.enabled)) {
        Kind::Sso
    } else if view.runtime.state == MCPServerState::AuthRequired
        || view.runtime.auth_challenge.is_some()
        || auth.is_some_and(|a| a.authorization_server.is_some())
    {
        Kind::Grant
    } else {
        Kind::None
    }
}

/// The caller's state on every server. With `auth_urls`, every `grant` server that waits for the
/// caller's sign-in and is not suspended carries the link `core_auth_login` would give (issuing
/// them counts as one sign-in attempt), or the reason it cannot in `error`; a server whose grant
/// the caller already holds is connected by the call. Without sign-in configured
/// (`aggregator.oauth.mcpClient`), `grant` servers carry no link.
pub async fn status_document(
    registry: &Registry,
    sign_in: Option<&Arc<SignInService>>,
    ctx: &CallContext,
    auth_urls: bool,
) -> Value {
    let service = sign_in;
    let views = registry.servers();
    let mut attempt = None;
    let mut servers = Vec::with_capacity(views.len());
    for view in views {
        let name = view.definition.metadata.name.clone();
        let kind = kind_of(&view);
        let suspended = view.definition.spec.suspended;
        let mut entry = Map::new();
        entry.insert("name".into(), json!(name));
        entry.insert(
            "kind".into(),
            json!(match kind {
                Kind::Grant => "grant",
                Kind::Sso => "sso",
                Kind::None => "none",
            }),
        );
        entry.insert("suspended".into(), json!(suspended));
        match kind {
            Kind::Grant => {
                let pinned = view
                    .definition
                    .spec
                    .auth
                    .as_ref()
                    .and_then(|a| a.authorization_server.as_ref());
                let scope = pinned.map(|p| p.grant_scope).unwrap_or_default();
                entry.insert(
                    "grant_scope".into(),
                    json!(if scope == GrantScope::Subject {
                        "subject"
                    } else {
                        "session"
                    }),
                );
                if let Some(service) = service.filter(|_| auth_urls && !suspended)
                    && registry.session_connection(&ctx.session, &name).is_none()
                {
                    // One attempt for all the links of this call.
                    let counted = match attempt {
                        Some(ref counted) => counted,
                        None => attempt.insert(service.count_attempt(&ctx.session, &name, registry, false).await),
                    };
                    match counted {
                        Ok(()) => match service.link(registry, ctx, &name, false).await {
                            Ok((answer, _)) => {
                                if let Some(url) = answer.get("authUrl") {
                                    entry.insert("auth_url".into(), url.clone());
                                }
                            }
                            Err(e) => {
                                entry.insert("error".into(), json!(e.to_string()));
                            }
                        },
                        Err(e) => {
                            entry.insert("error".into(), json!(e.to_string()));
                        }
                    }
                }
                let connected = registry.session_connection(&ctx.session, &name).is_some();
                let status = if suspended {
                    "disconnected"
                } else if connected {
                    "connected"
                } else {
                    "auth_required"
                };
                entry.insert("status".into(), json!(status));
                let held = match service {
                    Some(s) => s
                        .store
                        .grant(&s.owner(registry, ctx, &name), &name)
                        .await
                        .ok()
                        .flatten(),
                    None => None,
                };
                let issuer = held
                    .as_ref()
                    .map(|h| h.grant.issuer.clone())
                    .or_else(|| pinned.map(|p| p.issuer.clone()));
                if let Some(issuer) = issuer {
                    entry.insert("issuer".into(), json!(issuer));
                }
                if let Some(held) = &held {
                    if let Some(scope) = &held.grant.scope {
                        entry.insert("scope".into(), json!(scope));
                    }
                    if let Some(at) = held.grant.expires_at {
                        entry.insert(
                            "expires_at".into(),
                            json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                        );
                    }
                }
                if !suspended && !connected {
                    entry.insert("auth_tool".into(), json!("core_auth_login"));
                }
                if let Some(conflict) = registry.issuer_conflict(&name) {
                    entry.insert("error".into(), json!(conflict.to_string()));
                }
            }
            Kind::Sso => {
                let auth = view.definition.spec.auth.as_ref();
                entry.insert("status".into(), json!(state_of(&view)));
                entry.insert(
                    "token_forwarding_enabled".into(),
                    json!(auth.is_some_and(|a| a.forward_token)),
                );
                entry.insert(
                    "token_exchange_enabled".into(),
                    json!(auth.and_then(|a| a.token_exchange.as_ref()).is_some_and(|t| t.enabled)),
                );
            }
            Kind::None => {
                entry.insert("status".into(), json!(state_of(&view)));
            }
        }
        if !entry.contains_key("error")
            && let Some(error) = &view.runtime.last_error
            && kind != Kind::Grant
        {
            entry.insert("error".into(), json!(error));
        }
        servers.push(Value::Object(entry));
    }
    json!({"servers": servers})
}

/// `connected`, `disconnected` (suspended or stopped) or the server's state.
fn state_of(view: &ServerView) -> String {
    match view.runtime.state {
        _ if view.definition.spec.suspended => "disconnected".to_owned(),
        MCPServerState::Connected => "connected".to_owned(),
        other => other.to_string().to_lowercase().replace(' ', "_"),
    }
}
