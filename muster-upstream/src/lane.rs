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
//! - one reading of a downstream message ([`read`]), in one pass: a lane call's answer, a lane
//!   call's progress, another notification, or something else;
//! - how a call's result becomes its [`ToolOutput`] ([`Reading`]): checked for a
//!   `CallToolResult`'s shape and kept as it came, or, for a caller that reads the typed result
//!   anyway, read as one in the message's pass ([`Found`]);
//! - the budget of a call ([`CallBudget`], [`Clock`]): `idle` for the answer, restarted by each
//!   progress notification, `max_total` in all, running out with rmcp's reasons;
//! - why a call has no result ([`Failure`]);
//! - the `notifications/cancelled` that abandons a call ([`cancelled`]).
//!
//! ```ignore
//! let id = lane_id(7);
//! let bytes = serde_json::to_vec(&CallRequestLine::new(&id, &params))?;
//! match read(answer_bytes, |_| Reading::Passed) {
//!     Read::Answer(7, Ok(found)) => { /* the call's result: found.output(Reading::Passed) */ }
//!     _ => { /* rmcp's */ }
//! }
//! ```

use std::{borrow::Cow, fmt, time::Duration};

use muster_core::{CallContext, ToolOutput};
use rmcp::{
    RoleClient,
    model::{
        CallToolRequestParams, CallToolResult, CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage,
        ClientNotification, ErrorData, JsonRpcMessage, NumberOrString, ProgressNotificationParam, RequestId,
    },
    service::RequestHandle,
};
use serde::{
    Deserialize, Serialize,
    de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor},
};
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
    /// ([`CallContext::reads_typed_result`]), and the check would be work done twice.
    Typed,
}

impl Reading {
    /// How the result of a call made in `ctx` is read.
    pub(crate) fn of(ctx: &CallContext) -> Self {
        if ctx.reads_typed_result() {
            Self::Typed
        } else {
            Self::Passed
        }
    }
}

/// A lane call's result, as [`read`] found it.
#[derive(Debug)]
pub(crate) enum Found<'a> {
    /// As it lies in the message (or taken out of it).
    Json(Cow<'a, RawValue>),
    /// Read as a `CallToolResult` in the message's pass: the call reads it [typed](Reading::Typed),
    /// and the message's `id` came before its `result`.
    Typed(CallToolResult),
}

impl Found<'_> {
    /// The result, no longer borrowed from the message.
    pub(crate) fn into_owned(self) -> Found<'static> {
        match self {
            Self::Json(json) => Found::Json(Cow::Owned(json.into_owned())),
            Self::Typed(result) => Found::Typed(result),
        }
    }

    /// The call's output, the result read as `reading` says (copied only when it is kept and
    /// was borrowed).
    pub(crate) fn output(self, reading: Reading) -> Result<ToolOutput, Failure> {
        match (self, reading) {
            (Self::Typed(result), _) => Ok(result.into()),
            (Self::Json(json), Reading::Passed) => ToolOutput::from_json(json.into_owned()),
            (Self::Json(json), Reading::Typed) => {
                serde_json::from_str::<CallToolResult>(json.get()).map(ToolOutput::from)
            }
        }
        .map_err(Failure::Unreadable)
    }
}

/// A downstream message, as a lane reads it ([`read`]).
#[derive(Debug)]
pub(crate) enum Read<'a> {
    /// The answer to lane call `n`: its result ([`Found::output`] makes it the call's), or why
    /// there is none.
    Answer(u64, Result<Found<'a>, Failure>),
    /// A progress notification of lane call `n`.
    Progress(u64, ProgressNotificationParam),
    /// Another notification: its method and params.
    Notification(Cow<'a, str>, &'a RawValue),
    /// Anything else: a request, an answer to one of rmcp's requests, a message that does not read.
    Other,
}

/// Reads `message` (one JSON-RPC message) in one pass. The result of an answer to lane call
/// `n` is read as `reading(n)` says when the message's `id` comes before it (as rmcp, the
/// Python and the TypeScript SDKs write it), and left where it lies otherwise.
pub(crate) fn read(message: &[u8], reading: impl Fn(u64) -> Reading) -> Read<'_> {
    let mut deserializer = serde_json::Deserializer::from_slice(message);
    let read = MessageSeed(reading)
        .deserialize(&mut deserializer)
        .and_then(|message| deserializer.end().map(|()| message));
    match read {
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
        // why, rather than at its timeout. (Only an object: a derived reading would take an
        // array's items as the fields.)
        Err(_) if message.trim_ascii_start().first() != Some(&b'{') => Read::Other,
        Err(e) => match serde_json::from_slice::<Envelope<'_>>(message) {
            Ok(Envelope {
                id: Some(LaneId(Some(n))),
                method: None,
            }) => Read::Answer(n, Err(Failure::Unreadable(e))),
            _ => Read::Other,
        },
    }
}

/// A message as a lane reads it ([`MessageSeed`]).
#[derive(Default)]
struct Message<'a> {
    id: Option<LaneId>,
    method: Option<Cow<'a, str>>,
    result: Option<Found<'a>>,
    error: Option<ErrorData>,
    params: Option<&'a RawValue>,
}

/// Reads a [`Message`], an answer's result as the reading of its call says once its id is
/// known. Like a derived reading: other fields are skipped, a field twice is an error.
struct MessageSeed<F>(F);

impl<'de, F: Fn(u64) -> Reading> DeserializeSeed<'de> for MessageSeed<F> {
    type Value = Message<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Message<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, F: Fn(u64) -> Reading> Visitor<'de> for MessageSeed<F> {
    type Value = Message<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message<'de>, A::Error> {
        let mut message = Message::default();
        let mut seen = [false; Field::Other as usize];
        while let Some(field) = map.next_key::<Field>()? {
            if field != Field::Other && std::mem::replace(&mut seen[field as usize], true) {
                return Err(de::Error::duplicate_field(field.name()));
            }
            match field {
                Field::Id => message.id = map.next_value()?,
                Field::Method => message.method = map.next_value::<Option<Text<'de>>>()?.map(|text| text.0),
                Field::Result => {
                    let typed = matches!(message.id, Some(LaneId(Some(n))) if (self.0)(n) == Reading::Typed);
                    message.result = if typed {
                        map.next_value::<Option<CallToolResult>>()?.map(Found::Typed)
                    } else {
                        map.next_value::<Option<&'de RawValue>>()?
                            .map(|json| Found::Json(Cow::Borrowed(json)))
                    };
                }
                Field::Error => message.error = map.next_value()?,
                Field::Params => message.params = map.next_value()?,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(message)
    }
}

/// The fields of a message that a lane reads.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Id,
    Method,
    Result,
    Error,
    Params,
    #[serde(other)]
    Other,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Self::Id => "id",
            Self::Method => "method",
            Self::Result => "result",
            Self::Error => "error",
            Self::Params => "params",
            Self::Other => "",
        }
    }
}

/// A string borrowed from the message, or decoded when it has escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Text<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        deserializer.deserialize_str(Visit)
    }
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

    /// The answer to lane call 7 in `line`, its result read for a call that reads as `reading`.
    fn answer(line: &str, reading: Reading) -> Result<Found<'_>, Failure> {
        match read(line.as_bytes(), |n| if n == 7 { reading } else { Reading::Passed }) {
            Read::Answer(7, answer) => answer,
            other => panic!("not the answer to muster-7: {other:?}"),
        }
    }

    fn text(output: &ToolOutput) -> Option<&str> {
        output
            .as_typed()
            .and_then(|r| r.content[0].as_text())
            .map(|t| t.text.as_str())
    }

    #[test]
    fn a_result_is_kept_as_it_came_unless_the_caller_reads_it_typed() {
        let line = r#"{"jsonrpc":"2.0","id":"muster-7","result":{ "content" : [{"type":"text","text":"hi"}] }}"#;
        let passed = answer(line, Reading::Passed).expect("a result");
        assert!(matches!(passed, Found::Json(_)), "{passed:?}");
        let passed = passed.output(Reading::Passed).expect("a result");
        assert_eq!(
            passed.json().map(RawValue::get),
            Some(r#"{ "content" : [{"type":"text","text":"hi"}] }"#)
        );
        // Read as a CallToolResult in the message's pass.
        let typed = answer(line, Reading::Typed).expect("a result");
        assert!(matches!(typed, Found::Typed(_)), "{typed:?}");
        assert_eq!(text(&typed.output(Reading::Typed).expect("a result")), Some("hi"));

        assert_eq!(Reading::of(&CallContext::default()), Reading::Passed);
        assert_eq!(
            Reading::of(&CallContext::default().reading_typed_result()),
            Reading::Typed
        );
    }

    #[test]
    fn a_result_before_its_id_is_found_where_it_lies_and_read_typed_after() {
        let line = r#"{"result":{"content":[{"type":"text","text":"late id"}]},"jsonrpc":"2.0","id":"muster-7"}"#;
        let found = answer(line, Reading::Typed).expect("a result");
        assert!(matches!(found, Found::Json(_)), "{found:?}");
        let output = found.into_owned().output(Reading::Typed).expect("a result");
        assert_eq!(text(&output), Some("late id"));
        // Another call's answer is not read typed for call 7's sake.
        let other = r#"{"jsonrpc":"2.0","id":"muster-8","result":{"content":[]}}"#;
        assert!(matches!(
            read(other.as_bytes(), |n| if n == 7 {
                Reading::Typed
            } else {
                Reading::Passed
            }),
            Read::Answer(8, Ok(Found::Json(_)))
        ));
    }

    #[test]
    fn a_result_that_is_not_one_fails_the_call_either_way() {
        let line = r#"{"jsonrpc":"2.0","id":"muster-7","result":{"content":[{"type":"text"}]}}"#;
        for reading in [Reading::Passed, Reading::Typed] {
            let failure = answer(line, reading)
                .and_then(|found| found.output(reading))
                .expect_err("not a result");
            assert!(
                matches!(&failure, Failure::Unreadable(e) if e.to_string().contains("missing field `text`")),
                "{reading:?}: {failure:?}"
            );
        }
        let refused = r#"{"jsonrpc":"2.0","id":"muster-7","error":{"code":-32602,"message":"bad"}}"#;
        assert!(matches!(answer(refused, Reading::Typed), Err(Failure::Refused(e)) if e.message == "bad"));
    }

    #[test]
    fn a_message_reads_as_a_derived_reading_would() {
        fn read(line: &str) -> Read<'_> {
            super::read(line.as_bytes(), |_| Reading::Typed)
        }
        // Unknown fields skipped, a null id is no id, escaped method names decoded.
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":"muster-7","extra":[1,{"a":2}],"result":{"content":[]}}"#),
            Read::Answer(7, Ok(Found::Typed(_)))
        ));
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":null,"result":{"content":[]}}"#),
            Read::Other
        ));
        match read(r#"{"jsonrpc":"2.0","method":"notifications\/message","params":{"level":"info","data":1}}"#) {
            Read::Notification(method, params) => {
                assert_eq!(method, "notifications/message");
                assert_eq!(params.get(), r#"{"level":"info","data":1}"#);
            }
            other => panic!("{other:?}"),
        }
        let progress =
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"muster-7","progress":2}}"#;
        assert!(matches!(read(progress), Read::Progress(7, p) if p.progress == 2.0));
        // A field twice, trailing bytes, not an object: not a message a lane takes.
        for line in [
            r#"{"jsonrpc":"2.0","id":"muster-7","id":"muster-8","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":null,"id":"muster-7","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":"muster-7","result":{"content":[]}} x"#,
            r#"["muster-7"]"#,
        ] {
            assert!(matches!(read(line), Read::Other), "{line}");
        }
    }
}
