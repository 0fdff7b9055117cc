//! Progress notifications taken in order: before the result they precede.
//!
//! rmcp reads a connection's messages in order, but runs each notification handler
//! (`ClientHandler::on_progress`) in a task of its own, while a response goes straight to the
//! request waiting for it. A client that relays progress from its handler can therefore see a
//! call's last report after the call returned, when nobody listens for it any more: the gateway
//! lost server-everything's final report that way, and so did the agent bridge.
//!
//! [`ProgressInOrder`] wraps any client transport and hands each progress notification to a
//! [`ProgressHook`] as it is read, before the next message is read. A report is therefore relayed
//! before the result behind it is even read. The notification still goes on to rmcp, which uses
//! it to restart the request's timeout (`reset_timeout_on_progress`) and to call the handler.
//!
//! ```
//! use muster_gateway::upstream::progress::{ProgressHook, ProgressInOrder};
//! use rmcp::model::ProgressNotificationParam;
//!
//! struct Print;
//!
//! impl ProgressHook for Print {
//!     async fn progress(&self, params: &ProgressNotificationParam) {
//!         println!("{} of {:?}", params.progress, params.total);
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let transport = rmcp::transport::StreamableHttpClientTransport::from_uri("http://127.0.0.1:8090/mcp");
//! let _in_order = ProgressInOrder::new(transport, Print);
//! // `().serve(_in_order).await` connects as with the transport itself.
//! # }
//! ```

use std::{borrow::Cow, future::Future};

use rmcp::{
    RoleClient,
    model::{JsonRpcMessage, JsonRpcNotification, ProgressNotificationParam, ServerNotification},
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};

/// Where [`ProgressInOrder`] hands each progress notification.
pub trait ProgressHook: Send + Sync + 'static {
    /// Takes one progress notification. The connection's next message is read once the
    /// returned future is done, so it should only hand the report on (queue it), not wait for
    /// anything slow.
    fn progress(&self, params: &ProgressNotificationParam) -> impl Future<Output = ()> + Send;
}

/// No hook: the notifications go to the client handler only.
impl ProgressHook for () {
    async fn progress(&self, _params: &ProgressNotificationParam) {}
}

/// A client transport that hands each progress notification to a [`ProgressHook`] as it is
/// read; see the [module docs](self).
#[derive(Debug)]
pub struct ProgressInOrder<T, H> {
    inner: T,
    hook: H,
}

impl<T, H> ProgressInOrder<T, H> {
    /// `inner`, with its progress notifications handed to `hook` in order.
    pub fn new(inner: T, hook: H) -> Self {
        Self { inner, hook }
    }
}

impl<T: Transport<RoleClient>, H: ProgressHook> Transport<RoleClient> for ProgressInOrder<T, H> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ServerNotification::ProgressNotification(progress),
            ..
        }) = &message
        {
            self.hook.progress(&progress.params).await;
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
