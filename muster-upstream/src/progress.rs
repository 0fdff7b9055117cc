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
//! Logging notifications have the same race (a call's last log line relayed after its result, or
//! dropped) and are handed to the hook the same way ([`ProgressHook::logging`]).
//!
//! ```
//! use muster_upstream::progress::{ProgressHook, ProgressInOrder};
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

// Logging is deprecated by the newest MCP revision (SEP-2577), but older servers still log.
#![allow(deprecated)]

use std::{borrow::Cow, future::Future};

use rmcp::{
    RoleClient,
    model::{
        JsonRpcMessage, JsonRpcNotification, LoggingMessageNotificationParam, ProgressNotificationParam,
        ServerNotification,
    },
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use tokio::sync::mpsc;

/// Where [`ProgressInOrder`] hands each progress notification.
pub trait ProgressHook: Send + Sync + 'static {
    /// Takes one progress notification. The connection's next message is read once the
    /// returned future is done, so it should only hand the report on (queue it), not wait for
    /// anything slow.
    fn progress(&self, params: &ProgressNotificationParam) -> impl Future<Output = ()> + Send;

    /// Takes one logging notification, in order with the rest of the connection's messages
    /// (the same rule as [`Self::progress`]). By default it is left to the client handler.
    fn logging(&self, params: &LoggingMessageNotificationParam) -> impl Future<Output = ()> + Send {
        let _ = params;
        async {}
    }
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
    injected: Option<mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleClient>>>,
}

impl<T, H> ProgressInOrder<T, H> {
    /// `inner`, with its progress notifications handed to `hook` in order.
    pub fn new(inner: T, hook: H) -> Self {
        Self {
            inner,
            hook,
            injected: None,
        }
    }

    /// Also hands rmcp the messages sent to `injected`, as if `inner` had read them: those the
    /// HTTP call lane read on a call's own stream and leaves to rmcp (a sampling request, ...).
    pub(crate) fn with_injected(mut self, injected: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleClient>>) -> Self {
        self.injected = Some(injected);
        self
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
        let message = match &mut self.injected {
            // Once the lane is gone its channel is closed, and only `inner` is read.
            Some(injected) => tokio::select! {
                message = self.inner.receive() => message?,
                Some(message) = injected.recv() => message,
            },
            None => self.inner.receive().await?,
        };
        if let JsonRpcMessage::Notification(JsonRpcNotification { notification, .. }) = &message {
            match notification {
                ServerNotification::ProgressNotification(progress) => self.hook.progress(&progress.params).await,
                ServerNotification::LoggingMessageNotification(log) => self.hook.logging(&log.params).await,
                _ => {}
            }
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::VecDeque,
        sync::{Arc, Mutex},
    };

    use rmcp::model::{
        CallToolResult, LoggingLevel, LoggingMessageNotification, ProgressNotification, ProgressToken, ServerResult,
    };

    use super::*;

    /// A transport that hands out the given messages, then ends.
    struct Scripted(VecDeque<RxJsonRpcMessage<RoleClient>>);

    impl Transport<RoleClient> for Scripted {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            self.0.pop_front()
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl ProgressHook for Seen {
        async fn progress(&self, params: &ProgressNotificationParam) {
            self.0
                .lock()
                .expect("lock")
                .push(format!("progress {}", params.progress));
        }

        async fn logging(&self, params: &LoggingMessageNotificationParam) {
            self.0.lock().expect("lock").push(format!("log {}", params.data));
        }
    }

    #[tokio::test]
    async fn progress_and_log_lines_reach_the_hook_before_the_result_behind_them_is_read() {
        let messages = VecDeque::from([
            JsonRpcMessage::notification(ServerNotification::ProgressNotification(ProgressNotification::new(
                ProgressNotificationParam::new(ProgressToken(rmcp::model::NumberOrString::Number(1)), 1.0),
            ))),
            JsonRpcMessage::notification(ServerNotification::LoggingMessageNotification(
                LoggingMessageNotification::new(LoggingMessageNotificationParam::new(
                    LoggingLevel::Info,
                    serde_json::json!("done"),
                )),
            )),
            JsonRpcMessage::response(
                ServerResult::CallToolResult(CallToolResult::success(Vec::new())),
                rmcp::model::NumberOrString::Number(1),
            ),
        ]);
        let seen = Seen::default();
        let mut transport = ProgressInOrder::new(Scripted(messages), seen.clone());
        let mut taken = Vec::new();
        while let Some(message) = transport.receive().await {
            let is_result = matches!(message, JsonRpcMessage::Response(_));
            taken.push(message);
            if is_result {
                assert_eq!(*seen.0.lock().expect("lock"), ["progress 1", "log \"done\""]);
            }
        }
        assert_eq!(taken.len(), 3, "every message still goes on to rmcp");
    }
}
