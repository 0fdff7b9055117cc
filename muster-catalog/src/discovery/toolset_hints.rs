//! `toolset_requiring_auth`: which of the servers a sign-in would unlock the request's toolset
//! could select tools of, once their tools are listed.
//!
//! Their tools are not in the catalogue before the sign-in, so the toolset cannot be resolved
//! against them: a server counts when a selector names it (`server:`, or a preset's server
//! rule, by its name or its family's), when a `tool:` selector or a preset's tool rule or name
//! pattern could match the exposed names its tools will carry, or when a preset selects by
//! annotation (read-only) or selects everything (their annotations are unknown until then).

use muster_core::NameRules;

use crate::{
    tools::ServerAuthHint,
    toolset::{InlineToolset, Presets, Rule, Selector},
};

/// How deep presets including presets are followed (cycles are refused when presets are built;
/// this bounds a bad set).
const MAX_PRESET_DEPTH: usize = 8;

/// The servers among `requiring` whose tools `toolset` could select once the caller signed in.
pub(crate) fn toolset_requiring_auth(
    requiring: &[ServerAuthHint],
    toolset: &InlineToolset,
    presets: &Presets,
    names: &NameRules,
) -> Vec<ServerAuthHint> {
    requiring
        .iter()
        .filter(|hint| {
            let server = Unlisted::of(hint, names);
            toolset.selectors().iter().any(|selector| match selector {
                Selector::Server(name) => server.is_named(name),
                Selector::Tool(tool) => tool.starts_with(&server.head),
                Selector::Workflow(_) => false,
                Selector::Preset(preset) => preset_could_select(presets, preset, &server, 0),
            })
        })
        .cloned()
        .collect()
}

/// A server whose tools are not listed yet: what names it, and how its tools' exposed names
/// begin.
struct Unlisted<'a> {
    hint: &'a ServerAuthHint,
    /// The exposed name of its tools up to the tool's own name (`x_slack_`).
    head: String,
}

impl<'a> Unlisted<'a> {
    fn of(hint: &'a ServerAuthHint, names: &NameRules) -> Self {
        let prefix = hint.tool_prefix.as_deref().unwrap_or(&hint.name);
        Self {
            hint,
            head: names.server_tool(prefix, ""),
        }
    }

    /// Whether `name` is the server's name or its family's.
    fn is_named(&self, name: &str) -> bool {
        name == self.hint.name || self.hint.family.as_deref() == Some(name)
    }
}

/// Whether preset `name` could select a tool of `server`.
fn preset_could_select(presets: &Presets, name: &str, server: &Unlisted<'_>, depth: usize) -> bool {
    let Some(preset) = presets.get(name).filter(|_| depth < MAX_PRESET_DEPTH) else {
        return false;
    };
    preset.include.iter().any(|rule| match rule {
        Rule::All | Rule::ReadOnly => true,
        Rule::Server(n) => server.is_named(n),
        Rule::Tool(t) => t.starts_with(&server.head),
        // A tool name is the head and at least one more character.
        Rule::Pattern(p) => p.matches(&server.head) || p.matches(&format!("{}x", server.head)),
        Rule::Preset(inner) => preset_could_select(presets, inner, server, depth + 1),
        Rule::Workflow(_) | Rule::Label(_) => false,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::*;

    fn hint(name: &str, prefix: Option<&str>, family: Option<&str>) -> ServerAuthHint {
        ServerAuthHint {
            name: name.to_owned(),
            status: "auth_required".to_owned(),
            auth_tool: "core_auth_login".to_owned(),
            tool_prefix: prefix.map(str::to_owned),
            family: family.map(str::to_owned),
        }
    }

    fn presets(config: Value) -> Presets {
        let map: BTreeMap<String, Value> = serde_json::from_value(config).expect("an object");
        Presets::from_config(&map).expect("valid presets")
    }

    /// The names of the servers among slack (prefix `chat`), github and eu-k8s (family `k8s`)
    /// that `header` could select.
    fn selected(header: &str, presets: &Presets, names: &NameRules) -> Vec<String> {
        let requiring = [
            hint("slack", Some("chat"), None),
            hint("github", None, None),
            hint("eu-k8s", Some("eu"), Some("k8s")),
        ];
        let toolset = InlineToolset::from_header_value(header).expect("a valid toolset");
        toolset_requiring_auth(&requiring, &toolset, presets, names)
            .into_iter()
            .map(|h| h.name)
            .collect()
    }

    #[test]
    fn a_server_selector_names_a_server_by_its_name_or_its_family() {
        let (p, n) = (Presets::default(), NameRules::default());
        assert_eq!(selected("server:github", &p, &n), ["github"]);
        assert_eq!(selected("server:k8s", &p, &n), ["eu-k8s"]);
        assert!(selected("server:chat", &p, &n).is_empty(), "the prefix is not the name");
    }

    #[test]
    fn a_tool_selector_counts_by_the_head_of_the_names_the_servers_tools_will_carry() {
        let (p, n) = (Presets::default(), NameRules::default());
        assert_eq!(selected("tool:x_chat_post", &p, &n), ["slack"]);
        assert!(selected("tool:x_slack_post", &p, &n).is_empty());
        assert_eq!(selected("tool:chat_post", &p, &NameRules::new("")), ["slack"]);
    }

    #[test]
    fn read_only_and_full_presets_could_select_every_server_and_none_no_server() {
        let (p, n) = (Presets::default(), NameRules::default());
        assert_eq!(selected("preset:read-only", &p, &n), ["slack", "github", "eu-k8s"]);
        assert_eq!(selected("preset:full", &p, &n), ["slack", "github", "eu-k8s"]);
        assert!(selected("preset:none", &p, &n).is_empty());
        assert!(selected("workflow:deploy", &p, &n).is_empty());
    }

    #[test]
    fn configured_presets_count_by_their_rules_through_nested_presets() {
        let p = presets(json!({
            "chat": {"include": [{"pattern": "x_chat_*"}]},
            "code": {"include": [{"server": "github"}]},
            "both": {"include": [{"preset": "chat"}, {"preset": "code"}]},
            "labelled": {"include": [{"label": "group=infra"}]},
            "one-tool": {"include": [{"tool": "x_eu_get_pods"}]}
        }));
        let n = NameRules::default();
        assert_eq!(selected("preset:chat", &p, &n), ["slack"]);
        assert_eq!(selected("preset:code", &p, &n), ["github"]);
        assert_eq!(selected("preset:both", &p, &n), ["slack", "github"]);
        assert_eq!(selected("preset:one-tool", &p, &n), ["eu-k8s"]);
        assert!(
            selected("preset:labelled", &p, &n).is_empty(),
            "labels are unknown before the sign-in"
        );
    }
}
