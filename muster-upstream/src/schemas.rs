//! Downstream tools held compactly: each schema as JSON text, and one copy of each distinct text.
//!
//! Each `tools/list` answer is parsed into a fresh JSON object per tool. Held by the catalogue,
//! those maps were most of the gateway's memory with a large catalogue: a schema map takes
//! several kilobytes where its text takes a few hundred bytes (see [`muster_core::compact`]).
//! [`SchemaInterner::compact_tools`] turns each listed tool into a [`CompactTool`] and, since
//! servers describe many tools with the same schema (generated servers, families of one server
//! on several clusters, the empty `{"type": "object"}`), swaps each schema text for the one
//! already held when an equal one is, so identical schemas cost one copy.
//!
//! The interner only holds weak references: a schema no tool uses any more is freed as usual,
//! and its entry is swept at the next list.
//!
//! ```ignore
//! let interner = SchemaInterner::default();
//! let tools = interner.compact_tools(listed); // equal schemas now share one text
//! ```

use std::{
    collections::HashMap,
    hash::{Hash, Hasher},
    sync::{LazyLock, Mutex, Weak},
};

use muster_core::{CompactTool, SchemaText};
use rmcp::model::Tool;
use serde_json::value::RawValue;

/// The interner every downstream connection of the process shares.
pub(crate) static SCHEMAS: LazyLock<SchemaInterner> = LazyLock::new(SchemaInterner::default);

/// Distinct schema texts by hash; see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct SchemaInterner {
    by_hash: Mutex<HashMap<u64, Vec<Weak<RawValue>>>>,
}

impl SchemaInterner {
    /// `tools` in compact form, each schema the shared copy of its text; forgets schemas no
    /// tool holds any more.
    pub(crate) fn compact_tools(&self, tools: Vec<Tool>) -> Vec<CompactTool> {
        let mut by_hash = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        by_hash.retain(|_, held| {
            held.retain(|w| w.strong_count() > 0);
            !held.is_empty()
        });
        tools
            .into_iter()
            .map(|tool| CompactTool::new(tool).map_schemas(|schema| intern(&mut by_hash, schema)))
            .collect()
    }

    /// Distinct schemas held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        let by_hash = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        by_hash.values().flatten().filter(|w| w.strong_count() > 0).count()
    }
}

fn intern(by_hash: &mut HashMap<u64, Vec<Weak<RawValue>>>, schema: SchemaText) -> SchemaText {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    schema.hash(&mut hasher);
    let held = by_hash.entry(hasher.finish()).or_default();
    if let Some(same) = held.iter().filter_map(SchemaText::upgrade).find(|s| *s == schema) {
        return same;
    }
    held.push(schema.downgrade());
    schema
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;

    fn schema(value: Value) -> Arc<rmcp::model::JsonObject> {
        match value {
            Value::Object(object) => Arc::new(object),
            other => panic!("not an object: {other}"),
        }
    }

    fn tool(name: &str, input: Value) -> Tool {
        Tool::new(name.to_owned(), "a tool", schema(input))
    }

    #[test]
    fn equal_schemas_share_one_copy_and_different_ones_do_not() {
        let interner = SchemaInterner::default();
        let input = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let first = interner.compact_tools(vec![tool("a", input.clone()), tool("b", input.clone())]);
        let mut with_output = tool("c", input);
        with_output.output_schema = Some(schema(json!({"type": "object"})));
        let integer = json!({"type": "object", "properties": {"name": {"type": "integer"}}});
        let second = interner.compact_tools(vec![with_output, tool("d", integer.clone())]);
        assert!(first[0].input_schema().ptr_eq(first[1].input_schema()));
        assert!(
            first[0].input_schema().ptr_eq(second[0].input_schema()),
            "across lists too"
        );
        assert!(!first[0].input_schema().ptr_eq(second[1].input_schema()));
        assert_eq!(second[1].to_tool(), tool("d", integer));
        assert_eq!(interner.len(), 3, "two inputs and one output schema");
    }

    #[test]
    fn key_order_does_not_matter_and_freed_schemas_are_forgotten() {
        let interner = SchemaInterner::default();
        let a = interner.compact_tools(vec![tool("a", json!({"type": "object", "title": "x"}))]);
        let b = interner.compact_tools(vec![tool("b", json!({"title": "x", "type": "object"}))]);
        assert!(a[0].input_schema().ptr_eq(b[0].input_schema()));
        drop((a, b));
        assert_eq!(interner.len(), 0);
        interner.compact_tools(Vec::new());
        assert!(interner.by_hash.lock().expect("lock").is_empty(), "swept");
    }
}
