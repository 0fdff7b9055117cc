//! One copy of each distinct tool schema, shared by every tool and connection that has it.
//!
//! Each `tools/list` answer is parsed into a fresh JSON object per tool, although servers
//! describe many tools with the same schema (generated servers, families of one server on
//! several clusters, the empty `{"type": "object"}`). Held by the catalogue, those copies were
//! most of the gateway's memory with a large catalogue: 10,000 tools from 50 servers kept about
//! 22 MB of identical schema maps. [`SchemaInterner::intern_tools`] swaps each tool's input and
//! output schema for the one already held when an equal one is, so identical schemas cost one
//! copy.
//!
//! The interner only holds weak references: a schema no tool uses any more is freed as usual,
//! and its entry is swept at the next list.
//!
//! ```ignore
//! let interner = SchemaInterner::default();
//! interner.intern_tools(&mut tools); // equal schemas now share one `Arc`
//! ```

use std::{
    collections::HashMap,
    hash::{Hash, Hasher},
    sync::{Arc, LazyLock, Mutex, Weak},
};

use rmcp::model::{JsonObject, Tool};
use serde_json::Value;

/// The interner every downstream connection of the process shares.
pub(crate) static SCHEMAS: LazyLock<SchemaInterner> = LazyLock::new(SchemaInterner::default);

/// Distinct schemas by content hash; see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct SchemaInterner {
    by_hash: Mutex<HashMap<u64, Vec<Weak<JsonObject>>>>,
}

impl SchemaInterner {
    /// Gives each of `tools` the shared copy of its input and output schema, and forgets
    /// schemas no tool holds any more.
    pub(crate) fn intern_tools(&self, tools: &mut [Tool]) {
        let mut by_hash = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        by_hash.retain(|_, held| {
            held.retain(|w| w.strong_count() > 0);
            !held.is_empty()
        });
        for tool in tools {
            tool.input_schema = intern(&mut by_hash, &tool.input_schema);
            if let Some(output) = &tool.output_schema {
                tool.output_schema = Some(intern(&mut by_hash, output));
            }
        }
    }

    /// Distinct schemas held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        let by_hash = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        by_hash.values().flatten().filter(|w| w.strong_count() > 0).count()
    }
}

fn intern(by_hash: &mut HashMap<u64, Vec<Weak<JsonObject>>>, schema: &Arc<JsonObject>) -> Arc<JsonObject> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hash_object(schema, &mut hasher);
    let held = by_hash.entry(hasher.finish()).or_default();
    if let Some(same) = held.iter().filter_map(Weak::upgrade).find(|s| **s == **schema) {
        return same;
    }
    held.push(Arc::downgrade(schema));
    Arc::clone(schema)
}

/// Hashes a JSON object by content, keys in sorted order (objects equal as maps hash alike
/// whatever their order).
fn hash_object(object: &JsonObject, state: &mut impl Hasher) {
    let mut keys: Vec<&String> = object.keys().collect();
    keys.sort_unstable();
    keys.len().hash(state);
    for key in keys {
        key.hash(state);
        hash_value(&object[key.as_str()], state);
    }
}

fn hash_value(value: &Value, state: &mut impl Hasher) {
    std::mem::discriminant(value).hash(state);
    match value {
        Value::Null => {}
        Value::Bool(b) => b.hash(state),
        Value::Number(n) => n.hash(state),
        Value::String(s) => s.hash(state),
        Value::Array(items) => {
            items.len().hash(state);
            for item in items {
                hash_value(item, state);
            }
        }
        Value::Object(object) => hash_object(object, state),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: Value) -> Arc<JsonObject> {
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
        let mut first = vec![tool("a", input.clone()), tool("b", input.clone())];
        let mut second = vec![
            tool("c", input),
            tool(
                "d",
                json!({"type": "object", "properties": {"name": {"type": "integer"}}}),
            ),
        ];
        second[0].output_schema = Some(schema(json!({"type": "object"})));
        interner.intern_tools(&mut first);
        interner.intern_tools(&mut second);
        assert!(Arc::ptr_eq(&first[0].input_schema, &first[1].input_schema));
        assert!(
            Arc::ptr_eq(&first[0].input_schema, &second[0].input_schema),
            "across lists too"
        );
        assert!(!Arc::ptr_eq(&first[0].input_schema, &second[1].input_schema));
        assert_eq!(
            *second[1].input_schema,
            *schema(json!({"type": "object", "properties": {"name": {"type": "integer"}}}))
        );
        assert_eq!(interner.len(), 3, "two inputs and one output schema");
    }

    #[test]
    fn key_order_does_not_matter_and_freed_schemas_are_forgotten() {
        let interner = SchemaInterner::default();
        let mut a = vec![tool("a", json!({"type": "object", "title": "x"}))];
        let mut b = vec![tool("b", json!({"title": "x", "type": "object"}))];
        interner.intern_tools(&mut a);
        interner.intern_tools(&mut b);
        assert!(Arc::ptr_eq(&a[0].input_schema, &b[0].input_schema));
        drop((a, b));
        assert_eq!(interner.len(), 0);
        interner.intern_tools(&mut []);
        assert!(interner.by_hash.lock().expect("lock").is_empty(), "swept");
    }

    #[test]
    fn values_of_different_kinds_hash_apart() {
        let hash = |v: Value| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            hash_value(&v, &mut h);
            h.finish()
        };
        assert_ne!(hash(json!("1")), hash(json!(1)));
        assert_ne!(hash(json!([1, [2]])), hash(json!([[1], 2])));
        assert_ne!(hash(json!({"a": {}})), hash(json!({"a": []})));
        assert_eq!(hash(json!({"a": 1, "b": 2})), hash(json!({"b": 2, "a": 1})));
    }
}
