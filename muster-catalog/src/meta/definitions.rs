//! The 13 meta-tools as MCP tool definitions: short descriptions (a summary line of at most 120
//! characters, then what a model needs before a call), input schemas generated from the argument
//! types, and annotations (all read-only but `call_tool`; all open-world).

use std::sync::{Arc, OnceLock};

use crate::{
    args::{
        CallToolArgs, FilterByServerArgs, FilterToolsArgs, GetPromptArgs, ListCoreToolsArgs, ListToolsArgs, NameArgs,
        NoArgs, ResourceArgs,
    },
    discovery::DiscoveryTool,
};
use rmcp::model::{Tool, ToolAnnotations};
use schemars::JsonSchema;

/// One meta-tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MetaTool {
    /// `list_tools`
    ListTools,
    /// `describe_tool`
    DescribeTool,
    /// `filter_tools`
    FilterTools,
    /// `list_core_tools`
    ListCoreTools,
    /// `call_tool`
    CallTool,
    /// `list_resources`
    ListResources,
    /// `filter_resources`
    FilterResources,
    /// `describe_resource`
    DescribeResource,
    /// `get_resource`
    GetResource,
    /// `list_prompts`
    ListPrompts,
    /// `filter_prompts`
    FilterPrompts,
    /// `describe_prompt`
    DescribePrompt,
    /// `get_prompt`
    GetPrompt,
}

impl MetaTool {
    /// Every meta-tool, in the order `tools/list` answers them.
    pub const ALL: [Self; 13] = [
        Self::ListTools,
        Self::DescribeTool,
        Self::FilterTools,
        Self::ListCoreTools,
        Self::CallTool,
        Self::ListResources,
        Self::FilterResources,
        Self::DescribeResource,
        Self::GetResource,
        Self::ListPrompts,
        Self::FilterPrompts,
        Self::DescribePrompt,
        Self::GetPrompt,
    ];

    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ListTools => "list_tools",
            Self::DescribeTool => "describe_tool",
            Self::FilterTools => "filter_tools",
            Self::ListCoreTools => "list_core_tools",
            Self::CallTool => "call_tool",
            Self::ListResources => "list_resources",
            Self::FilterResources => "filter_resources",
            Self::DescribeResource => "describe_resource",
            Self::GetResource => "get_resource",
            Self::ListPrompts => "list_prompts",
            Self::FilterPrompts => "filter_prompts",
            Self::DescribePrompt => "describe_prompt",
            Self::GetPrompt => "get_prompt",
        }
    }

    /// The meta-tool called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The catalogue service's tool this one is, when it is a discovery meta-tool (all but
    /// `call_tool`, `get_resource` and `get_prompt`).
    pub fn discovery(self) -> Option<DiscoveryTool> {
        match self {
            Self::ListTools => Some(DiscoveryTool::ListTools),
            Self::DescribeTool => Some(DiscoveryTool::DescribeTool),
            Self::FilterTools => Some(DiscoveryTool::FilterTools),
            Self::ListCoreTools => Some(DiscoveryTool::ListCoreTools),
            Self::ListResources => Some(DiscoveryTool::ListResources),
            Self::FilterResources => Some(DiscoveryTool::FilterResources),
            Self::DescribeResource => Some(DiscoveryTool::DescribeResource),
            Self::ListPrompts => Some(DiscoveryTool::ListPrompts),
            Self::FilterPrompts => Some(DiscoveryTool::FilterPrompts),
            Self::DescribePrompt => Some(DiscoveryTool::DescribePrompt),
            Self::CallTool | Self::GetResource | Self::GetPrompt => None,
        }
    }

    fn description(self) -> &'static str {
        match self {
            Self::ListTools => {
                "List one bounded page of the session's tools (summarised; 50 per page by default).\n\
                 Page with limit and offset until truncated is false. Use filter_tools to find a tool and \
                 describe_tool to learn how to call it."
            }
            Self::DescribeTool => {
                "Get detailed schema for a specific tool, and the call_tool call that invokes it.\n\
                 Returns the full description, inputSchema, server, kind and annotations."
            }
            Self::FilterTools => {
                "Discover tools cheaply (ranked, faceted, paginated).\n\
                 pattern: glob on the tool name (x_kubernetes_*); query: natural language, ranked best-first; \
                 description_filter: substring; labels: key=value facets; limit (default 5) and offset page."
            }
            Self::ListCoreTools => {
                "List only muster core tools (core_*), with their full descriptions and input schemas."
            }
            Self::CallTool => {
                "Execute any tool by name.\n\
                 Tools inside muster are callable only this way: {\"name\": \"<tool>\", \"arguments\": {...}}, \
                 arguments per the tool's inputSchema (see describe_tool). The result's first item is a JSON \
                 envelope of the tool's result."
            }
            Self::ListResources => "List available MCP resources, each with its server.",
            Self::FilterResources => {
                "Filter resources by URI pattern and/or source server, paged.\n\
                 A URI with a scheme carries no server prefix, so scope by server."
            }
            Self::DescribeResource => {
                "Get resource metadata, not its contents.\n\
                 server is needed only when several servers expose the same URI."
            }
            Self::GetResource => {
                "Read resource contents.\n\
                 server is needed only when several servers expose the same URI."
            }
            Self::ListPrompts => "List available prompts, each with its server.",
            Self::FilterPrompts => {
                "Filter prompts by name pattern and/or source server, paged (names are x_<server>_<name>)."
            }
            Self::DescribePrompt => "Get prompt details: its description and arguments.",
            Self::GetPrompt => "Execute a prompt with its arguments and return its messages.",
        }
    }

    fn definition(self) -> Tool {
        let tool = Tool::new(self.name(), self.description(), Arc::new(Default::default()));
        let tool = match self {
            Self::ListTools => with_schema::<ListToolsArgs>(tool),
            Self::DescribeTool | Self::DescribePrompt => with_schema::<NameArgs>(tool),
            Self::FilterTools => with_schema::<FilterToolsArgs>(tool),
            Self::ListCoreTools => with_schema::<ListCoreToolsArgs>(tool),
            Self::CallTool => with_schema::<CallToolArgs>(tool),
            Self::ListResources | Self::ListPrompts => with_schema::<NoArgs>(tool),
            Self::FilterResources | Self::FilterPrompts => with_schema::<FilterByServerArgs>(tool),
            Self::DescribeResource | Self::GetResource => with_schema::<ResourceArgs>(tool),
            Self::GetPrompt => with_schema::<GetPromptArgs>(tool),
        };
        let annotations = match self {
            Self::CallTool => ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
            _ => ToolAnnotations::new().read_only(true).open_world(true),
        };
        tool.with_annotations(annotations)
    }
}

fn with_schema<T: JsonSchema + 'static>(tool: Tool) -> Tool {
    tool.with_input_schema::<T>()
}

/// The definitions of the 13 meta-tools, built once.
pub fn definitions() -> &'static [Tool] {
    static DEFINITIONS: OnceLock<Vec<Tool>> = OnceLock::new();
    DEFINITIONS.get_or_init(|| MetaTool::ALL.into_iter().map(MetaTool::definition).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_thirteen_meta_tools_with_short_summaries() {
        let defs = definitions();
        assert_eq!(defs.len(), 13);
        for t in defs {
            let summary = t
                .description
                .as_deref()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or_default();
            assert!(summary.chars().count() <= 120, "{}: {summary}", t.name);
            assert_eq!(
                t.input_schema.get("type").and_then(|v| v.as_str()),
                Some("object"),
                "{}",
                t.name
            );
        }
    }

    #[test]
    fn every_meta_tool_is_read_only_but_call_tool_and_all_are_open_world() {
        for t in definitions() {
            let a = t.annotations.as_ref().expect("annotations");
            assert_eq!(a.open_world_hint, Some(true), "{}", t.name);
            if t.name == "call_tool" {
                assert_eq!(
                    (a.read_only_hint, a.destructive_hint, a.idempotent_hint),
                    (Some(false), Some(true), Some(false))
                );
            } else {
                assert_eq!(a.read_only_hint, Some(true), "{}", t.name);
            }
        }
    }

    #[test]
    fn the_ten_discovery_meta_tools_are_the_catalogue_services_of_the_same_name() {
        let discovery: Vec<&str> = MetaTool::ALL
            .into_iter()
            .filter_map(|tool| tool.discovery().map(|d| (tool, d)))
            .map(|(tool, d)| {
                assert_eq!(tool.name(), d.name());
                d.name()
            })
            .collect();
        assert_eq!(discovery.len(), DiscoveryTool::ALL.len());
        let own: Vec<&str> = MetaTool::ALL
            .into_iter()
            .filter(|tool| tool.discovery().is_none())
            .map(MetaTool::name)
            .collect();
        assert_eq!(own, ["call_tool", "get_resource", "get_prompt"]);
    }

    #[test]
    fn call_tool_requires_a_name_and_describe_tool_too() {
        let required = |name: &str| {
            let t = definitions().iter().find(|t| t.name == name).expect("defined");
            t.input_schema.get("required").cloned().unwrap_or_default()
        };
        assert_eq!(required("call_tool"), serde_json::json!(["name"]));
        assert_eq!(required("describe_tool"), serde_json::json!(["name"]));
    }
}
