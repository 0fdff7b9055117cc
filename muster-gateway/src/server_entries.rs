//! The tool surface: how the connected servers' tools, resources and prompts become catalogue
//! entries with exposed names.
//!
//! A server's tools are exposed as `x_<toolPrefix or name>_<tool>`. Servers sharing a
//! `family.name` appear as one deduplicated surface: each tool name is grouped by its input
//! schema (descriptions, titles and examples ignored), the largest group (ties: the group of the
//! first server by name) is exposed once as `x_<family>_<tool>` with a required instance argument
//! (`family.instanceArg`, an enum of the members) and the most common description (ties: the
//! longest); the other members expose that tool under their per-server names. A family whose
//! members disagree on `instanceArg`, or a tool that already has a property of that name, falls
//! back to per-server names. Two servers producing the same exposed name is a collision: the
//! first server (by name) keeps it and the other is reported, never silently overwritten.

use std::collections::{BTreeMap, BTreeSet};

use muster_catalog::{Catalog, CatalogBuilder, rank::RankingConfig};
use muster_core::{
    CompactTool, FamilyRoute, NameRules, PromptEntry, ResourceEntry, SchemaText, ToolEntry, crd::MCPServer,
};
use serde_json::{Map, Value, json};

use muster_workflow::tools::{Availability, WorkflowEntries, WorkflowTable};

use crate::upstream::UpstreamConnection;

/// One connected server's contribution.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Contribution<'a> {
    pub(crate) definition: &'a MCPServer,
    pub(crate) conn: &'a UpstreamConnection,
    /// muster's own namespace, when configured: a server of another namespace gets its
    /// namespace in front of its prefix.
    pub(crate) home_namespace: Option<&'a str>,
}

impl Contribution<'_> {
    fn name(&self) -> &str {
        &self.definition.metadata.name
    }

    fn prefix(&self) -> String {
        let own = self.definition.spec.tool_prefix.as_deref().unwrap_or(self.name());
        match (self.definition.metadata.namespace.as_deref(), self.home_namespace) {
            (Some(ns), Some(home)) if ns != home => format!("{ns}_{own}"),
            _ => own.to_owned(),
        }
    }
}

/// An exposed name two servers produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Collision {
    /// The server whose tool was left out.
    pub(crate) server: String,
    /// The exposed name.
    pub(crate) name: String,
    /// The server that keeps the name.
    pub(crate) kept_by: String,
}

/// Builds the catalogue of `contributions` (sorted by server name) plus `builtin` entries and
/// the entries of the available `workflows`, ranked with `ranking`; answers it with the name
/// collisions and every workflow's availability.
pub(crate) fn build(
    names: &NameRules,
    contributions: &[Contribution<'_>],
    builtin: &[ToolEntry],
    workflows: &WorkflowTable,
    ranking: &RankingConfig,
) -> (Catalog, Vec<Collision>, BTreeMap<String, Availability>) {
    let mut builder = Catalog::builder().with_ranking(ranking.clone());
    let mut collisions = Vec::new();
    let mut families: BTreeMap<&str, Vec<Contribution<'_>>> = BTreeMap::new();
    let mut solo = Vec::new();
    for c in contributions {
        match &c.definition.spec.family {
            Some(f) if !f.name.is_empty() => families.entry(f.name.as_str()).or_default().push(*c),
            _ => solo.push(*c),
        }
    }
    let mut push = |builder: &mut CatalogBuilder, entry: ToolEntry, server: &str| {
        let name = entry.name().to_owned();
        if !builder.push_tool(entry) {
            collisions.push(Collision {
                server: server.to_owned(),
                name,
                kept_by: String::new(),
            });
        }
    };
    for (family, members) in &families {
        family_surface(names, family, members, &mut builder, &mut push);
    }
    for c in &solo {
        for tool in c.conn.tools() {
            push(
                &mut builder,
                ToolEntry::downstream(names.server_tool(&c.prefix(), tool.name()), c.name(), tool.clone()),
                c.name(),
            );
        }
    }
    for c in contributions {
        builder.set_server_labels(c.name(), c.definition.metadata.labels.clone());
        for resource in c.conn.resources() {
            let exposed = names.server_resource_uri(&c.prefix(), &resource.uri);
            builder.push_resource(ResourceEntry::downstream(exposed, c.name(), resource.clone()));
        }
        for prompt in c.conn.prompts() {
            let exposed = names.server_prompt(&c.prefix(), &prompt.name);
            builder.push_prompt(PromptEntry::downstream(exposed, c.name(), prompt.clone()));
        }
    }
    for entry in builtin {
        builder.push_tool(entry.clone());
    }
    // Workflows last: whether one is available depends on the tools above.
    let WorkflowEntries {
        entries, availability, ..
    } = workflows.entries(names, |name| builder.tool(name));
    for entry in entries {
        builder.push_tool(entry);
    }
    let catalog = builder.build();
    // Name the server that kept each colliding name.
    for collision in &mut collisions {
        if let Some(winner) = catalog.tool(&collision.name) {
            collision.kept_by = winner.server.clone().unwrap_or_default();
        }
    }
    (catalog, collisions, availability)
}

/// One member's offer of a tool.
type Offer<'a> = (Contribution<'a>, &'a CompactTool);

fn family_surface(
    names: &NameRules,
    family: &str,
    members: &[Contribution<'_>],
    builder: &mut CatalogBuilder,
    push: &mut impl FnMut(&mut CatalogBuilder, ToolEntry, &str),
) {
    let instance_args: BTreeSet<&str> = members
        .iter()
        .filter_map(|m| m.definition.spec.family.as_ref().map(|f| f.instance_arg.as_str()))
        .collect();
    let solo = |builder: &mut CatalogBuilder,
                push: &mut dyn FnMut(&mut CatalogBuilder, ToolEntry, &str),
                m: &Contribution<'_>,
                tool: &CompactTool| {
        push(
            builder,
            ToolEntry::downstream(names.server_tool(&m.prefix(), tool.name()), m.name(), tool.clone()),
            m.name(),
        );
    };
    let [instance_arg] = instance_args.into_iter().collect::<Vec<_>>()[..] else {
        tracing::warn!(
            family,
            "family members disagree on instanceArg; exposing each under its own name"
        );
        for m in members {
            for tool in m.conn.tools() {
                solo(builder, push, m, tool);
            }
        }
        return;
    };
    // tool name -> schema key -> members offering it
    let mut by_name: BTreeMap<&str, BTreeMap<String, Vec<Offer<'_>>>> = BTreeMap::new();
    for m in members {
        for tool in m.conn.tools() {
            let key = Value::Object(canonical_schema(&tool.input_schema().to_object())).to_string();
            by_name
                .entry(tool.name())
                .or_default()
                .entry(key)
                .or_default()
                .push((*m, tool));
        }
    }
    for (tool_name, groups) in by_name {
        // The largest group keeps the family name; ties go to the group of the first server.
        let largest = groups
            .values()
            .max_by(|a, b| a.len().cmp(&b.len()).then_with(|| b[0].0.name().cmp(a[0].0.name())))
            .map(|g| g[0].0.name().to_owned());
        for group in groups.values() {
            let first = &group[0];
            let first_schema = first.1.input_schema().to_object();
            let keeps_family = largest.as_deref() == Some(first.0.name())
                && !first_schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| p.contains_key(instance_arg));
            if !keeps_family {
                for (m, tool) in group {
                    solo(builder, push, m, tool);
                }
                continue;
            }
            let members: BTreeMap<String, String> = group
                .iter()
                .map(|(m, t)| (m.name().to_owned(), t.name().to_owned()))
                .collect();
            let member_names: Vec<&str> = members.keys().map(String::as_str).collect();
            let mut tool = first.1.clone();
            tool.rename(names.server_tool(family, tool_name));
            let description = most_common_description(group.iter().map(|(_, t)| t.description().unwrap_or_default()));
            tool.set_description(format!(
                "{description} (available on servers: {})",
                member_names.join(", ")
            ));
            tool.set_input_schema(SchemaText::from_object(&with_instance_arg(
                &first_schema,
                instance_arg,
                &member_names,
            )));
            let route = FamilyRoute::new(family, instance_arg, members);
            push(builder, ToolEntry::family(tool, route), family);
        }
    }
}

/// The schema with the parts that do not change what it accepts (descriptions, titles,
/// examples) removed, so members that only word things differently group together.
fn canonical_schema(schema: &Map<String, Value>) -> Map<String, Value> {
    fn strip(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "description" | "title" | "examples" | "$comment"))
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    match strip(&Value::Object(schema.clone())) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn most_common_description<'a>(descriptions: impl Iterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for d in descriptions {
        *counts.entry(d).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|(a, ca), (b, cb)| ca.cmp(cb).then(a.len().cmp(&b.len())).then(b.cmp(a)))
        .map(|(d, _)| d.to_owned())
        .unwrap_or_default()
}

fn with_instance_arg(schema: &Map<String, Value>, instance_arg: &str, members: &[&str]) -> Map<String, Value> {
    let mut schema = schema.clone();
    schema.insert("type".into(), json!("object"));
    let properties = schema.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(props) = properties {
        props.insert(
            instance_arg.to_owned(),
            json!({
                "type": "string",
                "enum": members,
                "description": format!("Target instance to execute this tool on. Available: {}", members.join(", ")),
            }),
        );
    }
    let required = schema.entry("required").or_insert_with(|| json!([]));
    if let Value::Array(req) = required
        && !req.iter().any(|r| r == instance_arg)
    {
        req.push(json!(instance_arg));
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_that_differ_only_in_wording_group_together() {
        let a = json!({"type": "object", "properties": {"ns": {"type": "string", "description": "Namespace"}}});
        let b = json!({"type": "object", "properties": {"ns": {"type": "string", "description": "The namespace", "title": "NS"}}});
        let c = json!({"type": "object", "properties": {"ns": {"type": "integer"}}});
        let key = |v: &Value| Value::Object(canonical_schema(v.as_object().expect("object"))).to_string();
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
    }

    #[test]
    fn the_most_common_description_wins_and_ties_go_to_the_longest() {
        assert_eq!(most_common_description(["a", "bb", "a"].into_iter()), "a");
        assert_eq!(
            most_common_description(["short", "longer one"].into_iter()),
            "longer one"
        );
    }

    #[test]
    fn the_instance_argument_is_required_with_the_members_as_enum() {
        let schema = json!({"type": "object", "properties": {"ns": {"type": "string"}}, "required": ["ns"]});
        let out = with_instance_arg(schema.as_object().expect("object"), "cluster", &["a", "b"]);
        assert_eq!(out["properties"]["cluster"]["enum"], json!(["a", "b"]));
        assert_eq!(out["required"], json!(["ns", "cluster"]));
        assert!(
            out["properties"]["cluster"]["description"]
                .as_str()
                .is_some_and(|d| d.ends_with("Available: a, b"))
        );
    }
}
