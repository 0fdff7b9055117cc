//! Results passed on from a peer of an older protocol, marked `resultType: "complete"` for a
//! client of 2026-07-28.
//!
//! On 2026-07-28 a `tools/call`, `resources/read` or `prompts/get` answer is a union: a complete
//! result, or an `InputRequiredResult`, told apart by `resultType`. A server of 2025-11-25 or
//! earlier never writes the field, and rmcp reads its answer with `result_type: None`. The
//! specification says a client must take an absent field as `"complete"`, but strict clients (the
//! official Python SDK validates the union) refuse a result without it. So a gateway that passes
//! such a result on, to a client that may speak 2026-07-28, marks it complete first. rmcp's server
//! strips the mark again for a client of an older version
//! (`ServerResult::strip_result_type_for_legacy_peer`), so marking is right for every client.
//!
//! Only an absent `resultType` is filled in; a result that says what it is keeps it.
//!
//! ```
//! use muster_core::complete::MarkComplete;
//! use rmcp::model::{CallToolResult, ResultType};
//!
//! // As rmcp reads a 2025-11-25 server's answer: no resultType.
//! let mut read: CallToolResult = serde_json::from_str(r#"{"content":[{"type":"text","text":"hi"}]}"#)?;
//! assert_eq!(read.result_type, None);
//! read.mark_complete();
//! assert_eq!(read.result_type, Some(ResultType::COMPLETE));
//! assert_eq!(serde_json::to_value(&read)?["resultType"], "complete");
//! # Ok::<(), serde_json::Error>(())
//! ```

use rmcp::model::{CallToolResult, CompleteResult, GetPromptResult, ReadResourceResult, ResultType};

/// A result that is complete when it does not say otherwise ([module docs](self)).
pub trait MarkComplete {
    /// Sets `resultType` to `"complete"` where the result has none.
    fn mark_complete(&mut self);

    /// The result, marked ([`mark_complete`](Self::mark_complete)).
    fn completed(mut self) -> Self
    where
        Self: Sized,
    {
        self.mark_complete();
        self
    }
}

macro_rules! mark_complete_for {
    ($($result:ty),+ $(,)?) => {$(
        impl MarkComplete for $result {
            fn mark_complete(&mut self) {
                self.result_type.get_or_insert(ResultType::COMPLETE);
            }
        }
    )+};
}

mark_complete_for!(CallToolResult, ReadResourceResult, GetPromptResult, CompleteResult);

#[cfg(test)]
mod tests {
    use rmcp::model::{ContentBlock, PromptMessage, ResourceContents, Role};

    use super::*;

    #[test]
    fn an_absent_result_type_becomes_complete_for_every_passed_on_result() {
        let mut call = CallToolResult::success(vec![ContentBlock::text("x")]);
        call.result_type = None;
        assert_eq!(call.completed().result_type, Some(ResultType::COMPLETE));

        let mut read = ReadResourceResult::new(vec![ResourceContents::text("x", "demo://x")]);
        read.result_type = None;
        assert_eq!(read.completed().result_type, Some(ResultType::COMPLETE));

        let mut prompt = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, "x")]);
        prompt.result_type = None;
        assert_eq!(prompt.completed().result_type, Some(ResultType::COMPLETE));
    }

    #[test]
    fn a_result_type_the_result_has_is_kept() {
        let mut call = CallToolResult::success(vec![]);
        call.result_type = Some(ResultType::INPUT_REQUIRED);
        assert_eq!(call.completed().result_type, Some(ResultType::INPUT_REQUIRED));
    }
}
