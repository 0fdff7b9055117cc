//! Exposed names: how the gateway names what it aggregates.
//!
//! muster exposes every downstream tool as `<musterPrefix>_<server prefix>_<tool>` (the
//! `musterPrefix` is `x` unless `config.yaml` says otherwise; the server prefix is the MCPServer's
//! `spec.toolPrefix`, else its name). When the downstream tool's own name already starts with
//! `<server prefix>_`, the prefix is not repeated. Prompts follow the same rule. A resource URI
//! with a scheme (`file:///…`, `demo://…`) is left unchanged; other URIs get the prefix. Core tools
//! are `core_*`, and each workflow is exposed as `workflow_<name>`.
//!
//! ```
//! use muster_core::naming::NameRules;
//!
//! let names = NameRules::default();
//! assert_eq!(names.server_tool("github", "github_search"), "x_github_search");
//! assert_eq!(names.server_resource_uri("docs", "guide.md"), "x_docs_guide.md");
//! assert_eq!(names.server_resource_uri("docs", "file:///guide.md"), "file:///guide.md");
//! assert!(NameRules::is_core_tool("core_service_list"));
//! ```

/// The prefix of every core tool.
pub const CORE_TOOL_PREFIX: &str = "core_";
/// The prefix of every workflow execution tool.
pub const WORKFLOW_TOOL_PREFIX: &str = "workflow_";
/// The default `aggregator.musterPrefix`.
pub const DEFAULT_MUSTER_PREFIX: &str = "x";

/// The naming rules of one gateway: its `musterPrefix` applied to server prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRules {
    muster_prefix: String,
    unprefixed: bool,
}

impl Default for NameRules {
    fn default() -> Self {
        Self::new(DEFAULT_MUSTER_PREFIX)
    }
}

impl NameRules {
    /// Rules with the given `musterPrefix` (`x` by default; empty for no global prefix).
    pub fn new(muster_prefix: impl Into<String>) -> Self {
        Self {
            muster_prefix: muster_prefix.into(),
            unprefixed: false,
        }
    }

    /// The same rules exposing downstream names unchanged (`prefixMode: never`) when
    /// `unprefixed`.
    pub fn unprefixed(mut self, unprefixed: bool) -> Self {
        self.unprefixed = unprefixed;
        self
    }

    /// Whether downstream names are exposed unchanged.
    pub fn is_unprefixed(&self) -> bool {
        self.unprefixed
    }

    /// The `musterPrefix` in force.
    pub fn muster_prefix(&self) -> &str {
        &self.muster_prefix
    }

    /// The exposed name of downstream tool `tool` of a server whose prefix is `server_prefix`.
    pub fn server_tool(&self, server_prefix: &str, tool: &str) -> String {
        if self.unprefixed {
            return tool.to_owned();
        }
        let local = match tool.strip_prefix(server_prefix) {
            Some(rest) if rest.starts_with('_') => tool.to_owned(),
            _ => format!("{server_prefix}_{tool}"),
        };
        if self.muster_prefix.is_empty() {
            local
        } else {
            format!("{}_{local}", self.muster_prefix)
        }
    }

    /// The exposed name of a downstream prompt: the same rule as tools.
    pub fn server_prompt(&self, server_prefix: &str, prompt: &str) -> String {
        self.server_tool(server_prefix, prompt)
    }

    /// The exposed URI of a downstream resource: unchanged when it has a scheme, else prefixed.
    pub fn server_resource_uri(&self, server_prefix: &str, uri: &str) -> String {
        if uri.contains("://") {
            uri.to_owned()
        } else {
            self.server_tool(server_prefix, uri)
        }
    }

    /// The exposed name of the execution tool of workflow `name`.
    pub fn workflow_tool(&self, name: &str) -> String {
        format!("{WORKFLOW_TOOL_PREFIX}{name}")
    }

    /// Whether `name` is a core tool's name (`core_*`).
    pub fn is_core_tool(name: &str) -> bool {
        name.starts_with(CORE_TOOL_PREFIX)
    }

    /// The workflow a `workflow_<name>` tool runs, if `name` is one.
    pub fn workflow_of(name: &str) -> Option<&str> {
        name.strip_prefix(WORKFLOW_TOOL_PREFIX).filter(|w| !w.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unprefixed_rules_expose_downstream_names_unchanged() {
        let names = NameRules::default().unprefixed(true);
        assert_eq!(names.server_tool("kubernetes", "get_pods"), "get_pods");
        assert_eq!(names.server_prompt("kubernetes", "triage"), "triage");
        assert_eq!(names.server_resource_uri("kubernetes", "notes"), "notes");
        assert_eq!(names.workflow_tool("deploy"), "workflow_deploy");
    }

    #[test]
    fn server_tools_get_the_global_and_the_server_prefix() {
        let names = NameRules::default();
        assert_eq!(names.server_tool("kubernetes", "get_pods"), "x_kubernetes_get_pods");
        assert_eq!(names.server_tool("prometheus", "query"), "x_prometheus_query");
    }

    #[test]
    fn the_server_prefix_is_not_repeated_when_the_tool_already_carries_it() {
        let names = NameRules::default();
        assert_eq!(names.server_tool("github", "github_search"), "x_github_search");
        // A tool that merely starts with the same letters is still prefixed.
        assert_eq!(names.server_tool("git", "github_search"), "x_git_github_search");
        // The prefix alone, without the separator, is not "already prefixed".
        assert_eq!(names.server_tool("time", "time"), "x_time_time");
    }

    #[test]
    fn an_empty_muster_prefix_leaves_only_the_server_prefix() {
        let names = NameRules::new("");
        assert_eq!(names.server_tool("kubernetes", "get_pods"), "kubernetes_get_pods");
        let custom = NameRules::new("m");
        assert_eq!(custom.server_tool("k8s", "get_pods"), "m_k8s_get_pods");
    }

    #[test]
    fn prompts_follow_the_tool_rule_and_resources_keep_their_scheme() {
        let names = NameRules::default();
        assert_eq!(
            names.server_prompt("everything", "simple_prompt"),
            "x_everything_simple_prompt"
        );
        assert_eq!(names.server_resource_uri("demo", "demo://greeting"), "demo://greeting");
        assert_eq!(names.server_resource_uri("demo", "greeting"), "x_demo_greeting");
    }

    #[test]
    fn core_and_workflow_names_are_recognised() {
        let names = NameRules::default();
        assert_eq!(names.workflow_tool("deploy-webapp"), "workflow_deploy-webapp");
        assert_eq!(NameRules::workflow_of("workflow_deploy-webapp"), Some("deploy-webapp"));
        assert_eq!(NameRules::workflow_of("workflow_"), None);
        assert!(NameRules::is_core_tool("core_service_list"));
        assert!(!NameRules::is_core_tool("x_core_service_list"));
    }
}
