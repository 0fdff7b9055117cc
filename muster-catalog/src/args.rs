//! Reading meta-tool arguments from the JSON object a call carries, with the documented errors.
//!
//! The argument structs here derive [`schemars::JsonSchema`]: they are the source of the
//! meta-tools' input schemas. Values are read with the `opt_*` helpers rather than serde so that a
//! wrong value gets muster's exact message (`limit must be a number`, `offset must be at least 0`).

use std::collections::BTreeMap;

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::CatalogError;

/// The default page size of `list_tools`.
pub const LIST_TOOLS_DEFAULT_LIMIT: usize = 50;
/// The default page size of `filter_tools`, `filter_resources` and `filter_prompts`.
pub const FILTER_DEFAULT_LIMIT: usize = 5;

/// A page request: how many entries, after how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    /// At most this many entries (at least 1).
    pub limit: usize,
    /// Skip this many entries first.
    pub offset: usize,
}

impl Paging {
    /// Reads `limit` and `offset` from `args`, with `default_limit` when `limit` is absent.
    pub fn from_args(args: &JsonObject, default_limit: usize) -> Result<Self, CatalogError> {
        let limit = match args.get("limit") {
            None | Some(Value::Null) => default_limit,
            Some(v) => {
                let n = v
                    .as_f64()
                    .ok_or_else(|| CatalogError::invalid("limit must be a number"))?;
                if n < 1.0 {
                    return Err(CatalogError::invalid("limit must be at least 1"));
                }
                float_to_usize(n)
            }
        };
        let offset = match args.get("offset") {
            None | Some(Value::Null) => 0,
            Some(v) => {
                let n = v
                    .as_f64()
                    .ok_or_else(|| CatalogError::invalid("offset must be a number"))?;
                if n < 0.0 {
                    return Err(CatalogError::invalid("offset must be at least 0"));
                }
                float_to_usize(n)
            }
        };
        Ok(Self { limit, offset })
    }

    /// The page of `items` this request selects, and whether more follow it.
    pub fn page<'a, T>(&self, items: &'a [T]) -> (&'a [T], bool) {
        let start = self.offset.min(items.len());
        let end = start.saturating_add(self.limit).min(items.len());
        (&items[start..end], end < items.len())
    }
}

fn float_to_usize(n: f64) -> usize {
    // JSON numbers arrive as f64; anything beyond usize saturates, fractions are dropped.
    if n >= usize::MAX as f64 { usize::MAX } else { n as usize }
}

/// An optional string argument; `<name> must be a string` otherwise.
pub fn opt_string<'a>(args: &'a JsonObject, name: &str) -> Result<Option<&'a str>, CatalogError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(CatalogError::invalid(format!("{name} must be a string"))),
    }
}

/// A required string argument; `<name> argument is required` when absent or empty.
pub fn required_string<'a>(args: &'a JsonObject, name: &str) -> Result<&'a str, CatalogError> {
    match opt_string(args, name)? {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(CatalogError::invalid(format!("{name} argument is required"))),
    }
}

/// An optional boolean argument with a default; `<name> must be a boolean` otherwise.
pub fn opt_bool(args: &JsonObject, name: &str, default: bool) -> Result<bool, CatalogError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(CatalogError::invalid(format!("{name} must be a boolean"))),
    }
}

/// An optional object of string values (`labels`); `<name> must be an object of strings` otherwise.
pub fn opt_string_map(args: &JsonObject, name: &str) -> Result<BTreeMap<String, String>, CatalogError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(CatalogError::invalid(format!("{name} must be an object of strings"))),
            })
            .collect(),
        Some(_) => Err(CatalogError::invalid(format!("{name} must be an object of strings"))),
    }
}

/// The arguments of `list_tools`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ListToolsArgs {
    /// Max tools in this page (at least 1; default 50).
    pub limit: Option<u32>,
    /// Tools to skip before this page (default 0).
    pub offset: Option<u32>,
}

/// The arguments of `filter_tools`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct FilterToolsArgs {
    /// Glob match on the tool name (e.g. x_kubernetes_*).
    pub pattern: Option<String>,
    /// Case-insensitive substring match on the full description.
    pub description_filter: Option<String>,
    /// Natural-language query; matches are ranked best-first with a score.
    pub query: Option<String>,
    /// Label facets as key=value pairs; a tool must carry every given label.
    pub labels: Option<BTreeMap<String, String>>,
    /// Case-sensitive name matching (default false).
    pub case_sensitive: Option<bool>,
    /// Return full descriptions and input schemas instead of one-line summaries (default false).
    pub include_schema: Option<bool>,
    /// Max tools per page (default 5).
    pub limit: Option<u32>,
    /// Tools to skip before this page (default 0).
    pub offset: Option<u32>,
    /// Inline toolset selectors (`preset:<name>`, `server:<name>`, `workflow:<name>`, `tool:<name>`).
    pub toolset: Option<Vec<String>>,
    /// Add the known toolset presets to the response (default false).
    pub include_presets: Option<bool>,
    /// With `query`: explain each tool's score (per query term its idf and contribution, per
    /// field its term frequency and weight), to debug a ranking (default false).
    pub explain: Option<bool>,
}

/// The arguments of `describe_tool` and `describe_prompt`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct NameArgs {
    /// The exposed name.
    pub name: String,
}

/// The arguments of `list_core_tools`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ListCoreToolsArgs {
    /// Include full descriptions and input schemas (default true).
    pub include_schema: Option<bool>,
}

/// The arguments of `call_tool`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct CallToolArgs {
    /// The exposed name of the tool to run.
    pub name: String,
    /// The tool's arguments, per its inputSchema.
    pub arguments: Option<JsonObject>,
}

/// The arguments of `list_resources` and `list_prompts`: none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The arguments of `filter_resources` and `filter_prompts`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct FilterByServerArgs {
    /// Glob match on the URI (resources) or the exposed name (prompts).
    pub pattern: Option<String>,
    /// Only entries of this server.
    pub server: Option<String>,
    /// Case-sensitive matching (default false).
    pub case_sensitive: Option<bool>,
    /// Max entries per page (default 5).
    pub limit: Option<u32>,
    /// Entries to skip before this page (default 0).
    pub offset: Option<u32>,
}

/// The arguments of `describe_resource` and `get_resource`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ResourceArgs {
    /// The resource URI.
    pub uri: String,
    /// The server to read it from; needed only when several servers expose the URI.
    pub server: Option<String>,
}

/// The arguments of `get_prompt`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct GetPromptArgs {
    /// The exposed prompt name.
    pub name: String,
    /// The prompt's arguments (values are sent as strings).
    pub arguments: Option<BTreeMap<String, Value>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn paging_defaults_and_bounds_have_the_documented_errors() {
        assert_eq!(
            Paging::from_args(&obj(json!({})), 50),
            Ok(Paging { limit: 50, offset: 0 })
        );
        assert_eq!(
            Paging::from_args(&obj(json!({"limit": "ten"})), 5),
            Err(CatalogError::invalid("limit must be a number"))
        );
        assert_eq!(
            Paging::from_args(&obj(json!({"limit": 0})), 5),
            Err(CatalogError::invalid("limit must be at least 1"))
        );
        assert_eq!(
            Paging::from_args(&obj(json!({"offset": true})), 5),
            Err(CatalogError::invalid("offset must be a number"))
        );
        assert_eq!(
            Paging::from_args(&obj(json!({"offset": -1})), 5),
            Err(CatalogError::invalid("offset must be at least 0"))
        );
    }

    #[test]
    fn a_page_past_the_end_is_empty_and_not_truncated() {
        let items = [1, 2, 3];
        let p = Paging { limit: 2, offset: 0 };
        assert_eq!(p.page(&items), (&items[..2], true));
        let last = Paging { limit: 2, offset: 2 };
        assert_eq!(last.page(&items), (&items[2..], false));
        let past = Paging { limit: 2, offset: 10 };
        assert_eq!(past.page(&items), (&items[3..], false));
    }

    #[test]
    fn typed_readers_name_the_argument_in_their_errors() {
        let args = obj(json!({"pattern": 3, "case_sensitive": "yes", "labels": {"a": []}}));
        assert_eq!(
            opt_string(&args, "pattern"),
            Err(CatalogError::invalid("pattern must be a string"))
        );
        assert_eq!(
            opt_bool(&args, "case_sensitive", false),
            Err(CatalogError::invalid("case_sensitive must be a boolean"))
        );
        assert!(opt_string_map(&args, "labels").is_err());
        assert_eq!(
            required_string(&obj(json!({})), "name"),
            Err(CatalogError::invalid("name argument is required"))
        );
    }
}
