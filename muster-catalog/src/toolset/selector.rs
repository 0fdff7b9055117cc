//! Inline toolset selectors: what a request declares in `X-muster-Toolset` or in `filter_tools`'
//! `toolset` argument.

use std::{fmt, sync::Arc};

use super::ToolsetError;

/// The most selectors a request may declare inline.
pub const MAX_INLINE_SELECTORS: usize = 32;

/// One inline selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Selector {
    /// `preset:<name>`: a built-in or configured preset.
    Preset(String),
    /// `server:<name>`: every tool of an MCPServer (a family name or member selects the family).
    Server(String),
    /// `workflow:<name>`: the `workflow_<name>` tool.
    Workflow(String),
    /// `tool:<exposed name>`: one tool.
    Tool(String),
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Preset(n) => write!(f, "preset:{n}"),
            Self::Server(n) => write!(f, "server:{n}"),
            Self::Workflow(n) => write!(f, "workflow:{n}"),
            Self::Tool(n) => write!(f, "tool:{n}"),
        }
    }
}

/// A request's declared toolset: its selectors, parsed, and as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineToolset {
    declared: Arc<[String]>,
    selectors: Vec<Selector>,
}

impl InlineToolset {
    /// Parses declared selectors (already split and trimmed), with the documented refusals.
    pub fn parse(declared: Vec<String>) -> Result<Self, ToolsetError> {
        let declared: Arc<[String]> = declared.into();
        let refuse = |reason: String| ToolsetError::Invalid {
            selectors: declared.to_vec(),
            reason,
        };
        if declared.is_empty() || declared.iter().all(String::is_empty) {
            return Err(ToolsetError::Empty);
        }
        if declared.len() > MAX_INLINE_SELECTORS {
            return Err(ToolsetError::TooMany {
                selectors: declared.to_vec(),
            });
        }
        let mut selectors = Vec::with_capacity(declared.len());
        for raw in declared.iter() {
            let (kind, name) = raw.split_once(':').unwrap_or((raw.as_str(), ""));
            let well_formed = !name.is_empty() && !name.contains(|c: char| c.is_whitespace() || c == ',');
            let selector = match kind {
                "toolset" => return Err(refuse(format!("selector {raw:?} is reserved for shared toolsets"))),
                "label" => return Err(refuse(format!("selector {raw:?} is allowed inside presets only"))),
                "preset" if well_formed => Selector::Preset(name.to_owned()),
                "server" if well_formed => Selector::Server(name.to_owned()),
                "workflow" if well_formed => Selector::Workflow(name.to_owned()),
                "tool" if well_formed => Selector::Tool(name.to_owned()),
                _ => {
                    return Err(refuse(format!(
                        "selector {raw:?} is malformed; expected preset:<name>, server:<name>, workflow:<name> or tool:<name>"
                    )));
                }
            };
            selectors.push(selector);
        }
        Ok(Self { declared, selectors })
    }

    /// Parses an `X-muster-Toolset` header value: comma-separated selectors, whitespace trimmed.
    pub fn from_header_value(value: &str) -> Result<Self, ToolsetError> {
        let declared: Vec<String> = value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        Self::parse(declared)
    }

    /// The selectors as declared.
    pub fn declared(&self) -> &[String] {
        &self.declared
    }

    /// The selectors as declared, shared.
    pub fn declared_shared(&self) -> Arc<[String]> {
        Arc::clone(&self.declared)
    }

    /// The parsed selectors.
    pub fn selectors(&self) -> &[Selector] {
        &self.selectors
    }
}
