//! What [`Discovery`](super::Discovery) asks of whoever serves it: the servers a sign-in would
//! unlock ([`AuthHints`]) and the work to do before a request's catalogue is read
//! ([`OnRequest`]). `()` is the no-op of each; a closure is one too.

use std::future::Future;

use muster_core::{CallContext, SessionId};

use crate::{pattern::NamePattern, tools::ServerAuthHint};

/// The servers a sign-in would unlock for a session: `servers_requiring_auth` of `list_tools`
/// and `filter_tools`.
///
/// `()` knows none. A closure `Fn(&SessionId, Option<&NamePattern>) -> Vec<ServerAuthHint>` is
/// one:
///
/// ```
/// use muster_catalog::{discovery::AuthHints, pattern::NamePattern, tools::ServerAuthHint};
/// use muster_core::SessionId;
///
/// let hints = |_: &SessionId, pattern: Option<&NamePattern>| {
///     let slack = ServerAuthHint {
///         name: "slack".to_owned(),
///         status: "auth_required".to_owned(),
///         auth_tool: "core_auth_login".to_owned(),
///         tool_prefix: Some("slack".to_owned()),
///         family: None,
///     };
///     // A pattern keeps the servers whose tools it could match.
///     pattern.is_none_or(|p| p.matches("x_slack_")).then_some(slack).into_iter().collect()
/// };
/// let github_only = NamePattern::new("x_github_*", false).unwrap();
/// assert_eq!(hints.servers_requiring_auth(&SessionId::default(), None).len(), 1);
/// assert!(hints.servers_requiring_auth(&SessionId::default(), Some(&github_only)).is_empty());
/// ```
pub trait AuthHints: Send + Sync + 'static {
    /// The servers `session` has not signed in to whose tools a sign-in would list; with
    /// `pattern`, only those whose tools' exposed names it could match.
    fn servers_requiring_auth(&self, session: &SessionId, pattern: Option<&NamePattern>) -> Vec<ServerAuthHint>;
}

impl AuthHints for () {
    fn servers_requiring_auth(&self, _: &SessionId, _: Option<&NamePattern>) -> Vec<ServerAuthHint> {
        Vec::new()
    }
}

impl<F> AuthHints for F
where
    F: Fn(&SessionId, Option<&NamePattern>) -> Vec<ServerAuthHint> + Send + Sync + 'static,
{
    fn servers_requiring_auth(&self, session: &SessionId, pattern: Option<&NamePattern>) -> Vec<ServerAuthHint> {
        self(session, pattern)
    }
}

/// Work done when a request arrives, before the catalogue its session sees is read: a gateway
/// connects the servers the caller's identity unlocks (grants it holds, single sign-on), so that
/// their tools are in the session's catalogue, and notes that the session is alive.
///
/// `()` does nothing. A closure `Fn(&CallContext) -> impl Future<Output = ()>` is one, when its
/// future borrows nothing of the context (clone what it needs).
pub trait OnRequest: Send + Sync + 'static {
    /// Runs before the catalogue of `ctx.session` is read.
    fn on_request(&self, ctx: &CallContext) -> impl Future<Output = ()> + Send;
}

impl OnRequest for () {
    async fn on_request(&self, _: &CallContext) {}
}

impl<F, Fut> OnRequest for F
where
    F: Fn(&CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    fn on_request(&self, ctx: &CallContext) -> impl Future<Output = ()> + Send {
        self(ctx)
    }
}
