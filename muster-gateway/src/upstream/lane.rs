//! What the call lanes share: a `tools/call` to a downstream sent and answered past rmcp's
//! client service loop, on stdio ([`super::stdio::lane`]) and on streamable HTTP
//! ([`super::http_lane`]).
//!
//! A lane call has an id of its own, `muster-N`, which is also its progress token; rmcp's own
//! requests have numeric ids, so the two never meet, and whatever a lane does not take goes on
//! to rmcp. This module holds the pieces both lanes use the same way:
//! - the id ([`lane_id`], [`lane_number`]);
//! - the request as written ([`CallRequestLine`]), rmcp's typed params without rmcp's detour
//!   through a `serde_json::Value`;
//! - one reading of a downstream message ([`read`]): a lane call's answer (its result as it
//!   lies), a lane call's progress, another notification, or something else;
//! - how the result becomes the call's [`ToolOutput`] ([`Reading`]): checked for a
//!   `CallToolResult`'s shape and kept as it came, or read as one for a caller that reads the
//!   typed result anyway;
//! - the budget of a call ([`CallBudget`], [`Clock`]): `idle` for the answer, restarted by each
//!   progress notification, `max_total` in all, running out with rmcp's reasons;
//! - why a call has no result ([`Failure`]);
//! - the `notifications/cancelled` that abandons a call ([`cancelled`]).
//!
//! ```ignore
//! let id = lane_id(7);
//! let bytes = serde_json::to_vec(&CallRequestLine::new(&id, &params))?;
//! match read(answer_bytes) {
//!     Read::Answer(7, Ok(result)) => { /* the call's result */ }
//!     _ => { /* rmcp's */ }
//! }
//! ```

use std::{borrow::Cow, fmt, time::Duration};

use muster_core::{CallContext, ToolOutput, output::ReadsTypedResult};
use rmcp::{
    RoleClient,
    model::{
        CallToolRequestParams, CallToolResult, CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage,
        ClientNotification, ErrorData, JsonRpcMessage, NumberOrString, ProgressNotificationParam, RequestId,
    },
    service::RequestHandle,
};
use serde::{Deserialize, Serialize, de};
use serde_json::value::RawValue;
use tokio::time::Instant;

/// What a lane call's id and progress token start with.
pub(crate) const ID_PREFIX: &str = "muster-";

/// Why a call through a lane has no result.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The server answered with a JSON-RPC error.
    Refused(ErrorData),
    /// The server's answer is not a `CallToolResult` (why).
    Unreadable(serde_json::Error),
    /// The request could not be sent.
    Send(Box<dyn std::error::Error + Send + Sync>),
    /// The server's output ended before the answer.
    Closed,
    /// The answer cannot come: the server took the request but what it sent back ended, or is
    /// not an answer, before the answer (why).
    Lost(String),
    /// No answer within the budget: the timeout that ran out.
    TimedOut(Duration),
    /// The caller cancelled the call.
    Cancelled,
    /// The server refused the request before running it in a way rmcp knows how to handle (an
    /// expired session, a sign-in needed): the call goes through rmcp instead.
    Fallback,
}

/// How long a call waits: `idle` for its answer, restarted by each of its progress
/// notifications, and `max_total` in all.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallBudget {
    /// The wait for an answer or the next progress notification.
    pub(crate) idle: Duration,
    /// The whole call.
    pub(crate) max_total: Duration,
}

/// A call's budget from the moment it started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    started: Instant,
    budget: CallBudget,
}

impl Clock {
    /// The budget, counted from now.
    pub(crate) fn start(budget: CallBudget) -> Self {
        Self {
            started: Instant::now(),
            budget,
        }
    }

    /// When a timeout runs out next, the last progress notification read at `progressed`.
    pub(crate) fn due(&self, progressed: Option<Instant>) -> Instant {
        (progressed.unwrap_or(self.started) + self.budget.idle).min(self.started + self.budget.max_total)
    }

    /// The timeout that has run out by now, and the reason rmcp gives the server for it.
    pub(crate) fn expired(&self, progressed: Option<Instant>) -> Option<(Duration, &'static str)> {
        let now = Instant::now();
        if progressed.unwrap_or(self.started) + self.budget.idle <= now {
            Some((self.budget.idle, RequestHandle::<RoleClient>::REQUEST_TIMEOUT_REASON))
        } else if self.started + self.budget.max_total <= now {
            Some((
                self.budget.max_total,
                RequestHandle::<RoleClient>::REQUEST_MAX_TOTAL_TIMEOUT_REASON,
            ))
        } else {
            None
        }
    }
}

/// The id (and progress token) of lane call `n`.
pub(crate) fn lane_id(n: u64) -> RequestId {
    NumberOrString::String(format!("{ID_PREFIX}{n}").into())
}

/// The number of a lane id or token (`muster-N`).
pub(crate) fn lane_number(id: &NumberOrString) -> Option<u64> {
    match id {
        NumberOrString::String(s) => number_of(s),
        NumberOrString::Number(_) => None,
    }
}

/// The `notifications/cancelled` telling the server that lane call `n` is abandoned, for
/// `reason` (rmcp's texts for its timeouts).
pub(crate) fn cancelled(n: u64, reason: &str) -> ClientJsonRpcMessage {
    JsonRpcMessage::notification(ClientNotification::CancelledNotification(CancelledNotification::new(
        CancelledNotificationParam::new(Some(lane_id(n)), Some(reason.to_owned())),
    )))
}

/// The number of `muster-N`.
fn number_of(id: &str) -> Option<u64> {
    id.strip_prefix(ID_PREFIX)?.parse().ok()
}

/// A `tools/call` request as written, params and all, with rmcp's typed params.
///
/// rmcp's own message type writes the same JSON, but it turns the params into a
/// `serde_json::Value` first, to merge the request's extension `_meta` into them (it has none
/// here): 10k instructions a call, against 3.4k this way (callgrind).
#[derive(Serialize)]
pub(crate) struct CallRequestLine<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'static str,
    params: &'a CallToolRequestParams,
}

impl<'a> CallRequestLine<'a> {
    pub(crate) fn new(id: &'a RequestId, params: &'a CallToolRequestParams) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            method: "tools/call",
            params,
        }
    }
}

/// How a lane call's result becomes its [`ToolOutput`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Checked for a result's shape and kept as it came, to be passed on unchanged.
    Passed,
    /// Read as a `CallToolResult`: the caller reads the typed result anyway
    /// ([`ReadsTypedResult`]), and the check would be work done twice.
    Typed,
}

impl Reading {
    /// How the result of a call made in `ctx` is read.
    pub(crate) fn of(ctx: &CallContext) -> Self {
        if ctx.extensions.get::<ReadsTypedResult>().is_some() {
            Self::Typed
        } else {
            Self::Passed
        }
    }

    /// The call's output from its `result`, borrowed where it lies in the server's message or
    /// already taken out of it (copied only when it is kept and was borrowed).
    pub(crate) fn output(self, result: Cow<'_, RawValue>) -> Result<ToolOutput, Failure> {
        match self {
            Self::Passed => ToolOutput::from_json(result.into_owned()),
            Self::Typed => serde_json::from_str::<CallToolResult>(result.get()).map(ToolOutput::from),
        }
        .map_err(Failure::Unreadable)
    }
}

/// A downstream message, as a lane reads it ([`read`]).
#[derive(Debug)]
pub(crate) enum Read<'a> {
    /// The answer to lane call `n`: its result as it lies ([`Reading`] makes it the call's),
    /// or why there is none.
    Answer(u64, Result<&'a RawValue, Failure>),
    /// A progress notification of lane call `n`.
    Progress(u64, ProgressNotificationParam),
    /// Another notification: its method and params.
    Notification(Cow<'a, str>, &'a RawValue),
    /// Anything else: a request, an answer to one of rmcp's requests, a message that does not read.
    Other,
}

/// Reads `message` (one JSON-RPC message), a lane call's result where it lies.
pub(crate) fn read(message: &[u8]) -> Read<'_> {
    match serde_json::from_slice::<Message<'_>>(message) {
        Ok(Message {
            id: Some(LaneId(Some(n))),
            method: None,
            result,
            error,
            ..
        }) => match (result, error) {
            (Some(result), _) => Read::Answer(n, Ok(result)),
            (None, Some(error)) => Read::Answer(n, Err(Failure::Refused(error))),
            (None, None) => Read::Other,
        },
        Ok(Message {
            id: None,
            method: Some(method),
            params: Some(params),
            ..
        }) => {
            if method == "notifications/progress"
                && let Ok(progress) = serde_json::from_str::<ProgressNotificationParam>(params.get())
                && let Some(n) = lane_number(&progress.progress_token.0)
            {
                Read::Progress(n, progress)
            } else {
                Read::Notification(method, params)
            }
        }
        Ok(_) => Read::Other,
        // It may still be the answer to a call, one that does not read: the call fails with
        // why, rather than at its timeout.
        Err(e) => match serde_json::from_slice::<Envelope<'_>>(message) {
            Ok(Envelope {
                id: Some(LaneId(Some(n))),
                method: None,
            }) => Read::Answer(n, Err(Failure::Unreadable(e))),
            _ => Read::Other,
        },
    }
}

/// A message as a lane reads it: an answer's result as it lies.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default)]
    id: Option<LaneId>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorData>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

/// What a lane reads of a message that is not a [`Message`]: whether it answers a lane call.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    id: Option<LaneId>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
}

/// A JSON-RPC id, read as the number of a lane id, or `None` for any other id.
struct LaneId(Option<u64>);

impl<'de> Deserialize<'de> for LaneId {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl de::Visitor<'_> for Visit {
            type Value = LaneId;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC id")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<LaneId, E> {
                Ok(LaneId(number_of(s)))
            }

            fn visit_u64<E: de::Error>(self, _: u64) -> Result<LaneId, E> {
                Ok(LaneId(None))
            }

            fn visit_i64<E: de::Error>(self, _: i64) -> Result<LaneId, E> {
                Ok(LaneId(None))
            }

            fn visit_f64<E: de::Error>(self, _: f64) -> Result<LaneId, E> {
                Ok(LaneId(None))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Result<&RawValue, Failure> {
        match read(line.as_bytes()) {
            Read::Answer(7, answer) => answer,
            other => panic!("not the answer to muster-7: {other:?}"),
        }
    }

    #[test]
    fn a_result_is_kept_as_it_came_unless_the_caller_reads_it_typed() {
        let line = r#"{"jsonrpc":"2.0","id":"muster-7","result":{ "content" : [{"type":"text","text":"hi"}] }}"#;
        let result = answer(line).expect("a result");
        let passed = Reading::Passed.output(Cow::Borrowed(result)).expect("a result");
        assert_eq!(
            passed.json().map(RawValue::get),
            Some(r#"{ "content" : [{"type":"text","text":"hi"}] }"#)
        );
        let typed = Reading::Typed.output(Cow::Borrowed(result)).expect("a result");
        let text = typed
            .as_typed()
            .and_then(|r| r.content[0].as_text())
            .map(|t| t.text.as_str());
        assert_eq!(text, Some("hi"));

        let mut ctx = CallContext::default();
        assert_eq!(Reading::of(&ctx), Reading::Passed);
        ctx.extensions.insert(ReadsTypedResult);
        assert_eq!(Reading::of(&ctx), Reading::Typed);
    }

    #[test]
    fn a_result_that_is_not_one_fails_the_call_either_way() {
        let line = r#"{"jsonrpc":"2.0","id":"muster-7","result":{"content":[{"type":"text"}]}}"#;
        for reading in [Reading::Passed, Reading::Typed] {
            let failure = answer(line)
                .and_then(|result| reading.output(Cow::Borrowed(result)))
                .expect_err("not a result");
            assert!(
                matches!(&failure, Failure::Unreadable(e) if e.to_string().contains("missing field `text`")),
                "{reading:?}: {failure:?}"
            );
        }
        let refused = r#"{"jsonrpc":"2.0","id":"muster-7","error":{"code":-32602,"message":"bad"}}"#;
        assert!(matches!(answer(refused), Err(Failure::Refused(e)) if e.message == "bad"));
    }
}
