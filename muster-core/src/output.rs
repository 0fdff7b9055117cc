//! What a tool call returns: a [`ToolOutput`], either a `CallToolResult` built in the process or
//! the JSON of one a downstream server sent, passed on as it came.
//!
//! A gateway passes most results through unchanged. Reading a downstream's answer into rmcp's
//! typed `CallToolResult` and writing it out again cost more than the rest of the hop: serde
//! buffers every content block to read its `type` tag, then reads the block again, and every
//! text is copied twice. A [`ToolOutput`] read with [`ToolOutput::from_json`] keeps the answer's
//! JSON instead, checked for the shape a client reads ([`shape`]), and is written out byte for
//! byte. What needs the typed result asks for it ([`ToolOutput::into_result`]: the `call_tool`
//! envelope, a workflow step, a transport that writes typed messages), and marks its calls
//! ([`ReadsTypedResult`]) so that a downstream's result is read typed where it arrives; what only
//! needs to know whether the tool failed reads [`ToolOutput::is_error`].
//!
//! ```
//! use muster_core::ToolOutput;
//! use rmcp::model::{CallToolResult, ContentBlock};
//! use serde_json::value::RawValue;
//!
//! // Built in the process: typed, and written as rmcp writes it.
//! let built = ToolOutput::from(CallToolResult::success(vec![ContentBlock::text("hi")]));
//! assert!(!built.is_error());
//!
//! // Passed on: the downstream's JSON, written as it came.
//! let json = r#"{"content":[{"type":"text","text":"boom"}],"isError":true}"#;
//! let passed = ToolOutput::from_json(RawValue::from_string(json.to_owned())?)?;
//! assert!(passed.is_error());
//! assert_eq!(serde_json::to_string(&passed)?, json);
//! let typed = passed.into_result()?;
//! assert_eq!(typed.content[0].as_text().map(|t| t.text.as_str()), Some("boom"));
//!
//! // Not a result: refused, naming what is wrong.
//! let not_a_result = RawValue::from_string(r#"{"content":[{"type":"text"}]}"#.to_owned())?;
//! let refused = ToolOutput::from_json(not_a_result).unwrap_err();
//! assert!(refused.to_string().contains("missing field `text`"), "{refused}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use rmcp::model::CallToolResult;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::ToolError;

pub mod shape;

/// A tool's result: built in the process (typed), or a downstream server's JSON passed on as it
/// came ([`from_json`](Self::from_json)).
#[derive(Clone, PartialEq)]
pub struct ToolOutput(Repr);

#[derive(Clone)]
enum Repr {
    Typed(CallToolResult),
    Json { json: Box<RawValue>, shape: shape::Shape },
}

impl PartialEq for Repr {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Typed(a), Self::Typed(b)) => a == b,
            (Self::Json { json: a, .. }, Self::Json { json: b, .. }) => a.get() == b.get(),
            _ => false,
        }
    }
}

impl ToolOutput {
    /// A downstream server's result, `json`, checked for the shape of a `CallToolResult`
    /// ([`shape::check`]) and kept as it came (not copied). The error names what is wrong.
    pub fn from_json(json: Box<RawValue>) -> Result<Self, serde_json::Error> {
        let shape = shape::read(json.get())?;
        Ok(Self(Repr::Json { json, shape }))
    }

    /// Whether the tool reported a failure (`isError: true`).
    pub fn is_error(&self) -> bool {
        match &self.0 {
            Repr::Typed(result) => result.is_error == Some(true),
            Repr::Json { shape, .. } => shape.is_error,
        }
    }

    /// The JSON the result came as, when it was passed on from a downstream server.
    pub fn json(&self) -> Option<&RawValue> {
        match &self.0 {
            Repr::Typed(_) => None,
            Repr::Json { json, .. } => Some(json),
        }
    }

    /// Whether the result reads the same to a client of a protocol version before 2026-07-28 as
    /// it came: it has no `resultType`, and its `structuredContent`, if any, is an object. rmcp's
    /// server rewrites other results for such a client
    /// (`ServerResult::strip_result_type_for_legacy_peer` and
    /// `strip_non_object_output_for_legacy_peer`); a typed result always goes that way.
    pub fn passes_to_legacy_clients(&self) -> bool {
        match &self.0 {
            Repr::Typed(_) => false,
            Repr::Json { shape, .. } => shape.legacy,
        }
    }

    /// The typed result, when it was built in the process.
    pub fn as_typed(&self) -> Option<&CallToolResult> {
        match &self.0 {
            Repr::Typed(result) => Some(result),
            Repr::Json { .. } => None,
        }
    }

    /// The typed result: as built, or read from the JSON it came as. Reading fails only where
    /// the JSON has a detail the shape check leaves to rmcp's reading ([`shape`]).
    pub fn into_result(self) -> Result<CallToolResult, ToolError> {
        match self.0 {
            Repr::Typed(result) => Ok(result),
            Repr::Json { json, .. } => {
                serde_json::from_str(json.get()).map_err(|source| ToolError::UnreadableResult { source })
            }
        }
    }
}

/// A mark in a call's [extensions](crate::CallContext::extensions): whoever made the call reads
/// the typed result ([`ToolOutput::into_result`]), as the `call_tool` envelope and workflow steps
/// do. A service that has a downstream's result as JSON then reads it as a `CallToolResult` at
/// once, rather than check its shape and keep it, to be read again. Set and read with
/// [`CallContext::reading_typed_result`](crate::CallContext::reading_typed_result) and
/// [`CallContext::reads_typed_result`](crate::CallContext::reads_typed_result).
///
/// ```
/// use muster_core::CallContext;
///
/// let ctx = CallContext::default().reading_typed_result();
/// assert!(ctx.reads_typed_result());
/// assert!(!CallContext::default().reads_typed_result());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadsTypedResult;

impl From<CallToolResult> for ToolOutput {
    fn from(result: CallToolResult) -> Self {
        Self(Repr::Typed(result))
    }
}

impl Serialize for ToolOutput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Repr::Typed(result) => result.serialize(serializer),
            Repr::Json { json, .. } => json.serialize(serializer),
        }
    }
}

impl fmt::Debug for ToolOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Typed(result) => f.debug_tuple("ToolOutput::Typed").field(result).finish(),
            Repr::Json { json, .. } => f.debug_tuple("ToolOutput::Json").field(&json.get()).finish(),
        }
    }
}

#[cfg(test)]
mod tests;
