//! Tool definitions that hold their JSON Schemas as compact JSON text.
//!
//! A tool's input schema, parsed into `serde_json` maps, takes several kilobytes even when its
//! text is a few hundred bytes: every object is a `BTreeMap` whose smallest node is about 600
//! bytes. A catalogue of 10,000 downstream tools, each with a schema of its own, kept about
//! 38 MB of such maps, read only when a tool is described or listed with its schema. A
//! [`CompactTool`] keeps the rest of rmcp's [`Tool`] as it is and each schema as a
//! [`SchemaText`]: the schema's compact JSON, serialized verbatim into `describe_tool` and
//! `list_tools` answers and parsed only where a whole [`Tool`] is needed again
//! ([`CompactTool::to_tool`], e.g. for a native `tools/list`).
//!
//! ```
//! use std::sync::Arc;
//! use muster_core::CompactTool;
//! use rmcp::model::Tool;
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {"ns": {"type": "string"}}});
//! let tool = Tool::new("get_pods", "List pods.", Arc::new(schema.as_object().cloned().unwrap_or_default()));
//! let compact = CompactTool::new(tool.clone());
//! assert_eq!(compact.input_schema().as_str(), r#"{"properties":{"ns":{"type":"string"}},"type":"object"}"#);
//! assert_eq!(compact.to_tool(), tool);
//! ```

use std::{
    fmt,
    hash::{Hash, Hasher},
    sync::{Arc, LazyLock},
};

use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON Schema object held as its compact JSON text; see the [module docs](self).
///
/// Cloning shares the text. Two are equal when their texts are; schemas written from equal maps
/// have equal texts (map keys are written in sorted order).
#[derive(Clone)]
pub struct SchemaText(Arc<RawValue>);

impl SchemaText {
    /// The compact JSON text of `schema`.
    pub fn from_object(schema: &JsonObject) -> Self {
        // Written straight into the raw value, not parsed back; a map of JSON values always
        // serializes.
        serde_json::value::to_raw_value(schema).map_or_else(|_| Self::empty(), |raw| Self(Arc::from(raw)))
    }

    /// A schema from its JSON text, which must be a JSON object.
    pub fn from_json(text: String) -> Result<Self, serde_json::Error> {
        let raw = RawValue::from_string(text)?;
        if !raw.get().trim_start().starts_with('{') {
            return Err(serde::de::Error::custom("a schema must be a JSON object"));
        }
        Ok(Self(Arc::from(raw)))
    }

    /// The empty schema `{}`, shared.
    pub fn empty() -> Self {
        static EMPTY: LazyLock<SchemaText> =
            LazyLock::new(|| SchemaText(Arc::from(RawValue::from_string("{}".to_owned()).expect("{} is JSON"))));
        EMPTY.clone()
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The schema parsed into a map (a fresh copy each time).
    pub fn to_object(&self) -> JsonObject {
        // The text was checked to be a JSON object when it was made.
        serde_json::from_str(self.as_str()).unwrap_or_default()
    }

    /// Calls `f` with the name and the description (if it has one) of each top-level property,
    /// in the text's order, without building the schema's maps: what ranking reads of a tool's
    /// parameters. A schema whose `properties` is not an object of objects has none.
    ///
    /// ```
    /// use muster_core::SchemaText;
    ///
    /// let schema = SchemaText::from_json(
    ///     r#"{"type":"object","properties":{"city":{"type":"string","description":"The city, e.g. \"Oslo\""},"days":{"type":"integer"}}}"#.to_owned(),
    /// ).unwrap();
    /// let mut seen = Vec::new();
    /// schema.for_each_parameter(|name, description| seen.push((name.to_owned(), description.map(str::to_owned))));
    /// assert_eq!(seen, [("city".to_owned(), Some("The city, e.g. \"Oslo\"".to_owned())), ("days".to_owned(), None)]);
    /// ```
    pub fn for_each_parameter(&self, mut f: impl FnMut(&str, Option<&str>)) {
        let Ok(schema) = serde_json::from_str::<parameters::Schema<'_>>(self.as_str()) else {
            return;
        };
        for (name, parameter) in schema.properties.map(|p| p.0).unwrap_or_default() {
            f(&name.0, parameter.description.as_ref().map(|d| &*d.0));
        }
    }

    /// Whether `self` and `other` share one text (not only equal ones).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A weak handle on the shared text (for interning).
    pub fn downgrade(&self) -> std::sync::Weak<RawValue> {
        Arc::downgrade(&self.0)
    }

    /// The schema whose text `weak` still holds, if any schema holds it.
    pub fn upgrade(weak: &std::sync::Weak<RawValue>) -> Option<Self> {
        weak.upgrade().map(Self)
    }
}

impl PartialEq for SchemaText {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.as_str() == other.as_str()
    }
}

impl Eq for SchemaText {}

impl Hash for SchemaText {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for SchemaText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SchemaText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// rmcp's [`Tool`] with its schemas held as [`SchemaText`]; see the [module docs](self).
#[derive(Clone, PartialEq)]
pub struct CompactTool {
    /// Everything but the schemas: its `input_schema` is the shared empty map and its
    /// `output_schema` is `None`. Never handed out, so it cannot be mistaken for the tool.
    head: Tool,
    input_schema: SchemaText,
    output_schema: Option<SchemaText>,
}

/// The empty map every [`CompactTool`]'s head holds in place of its input schema.
fn no_schema() -> Arc<JsonObject> {
    static EMPTY: LazyLock<Arc<JsonObject>> = LazyLock::new(Arc::default);
    Arc::clone(&EMPTY)
}

impl CompactTool {
    /// `tool` with its schemas written as text.
    pub fn new(mut tool: Tool) -> Self {
        let input_schema = std::mem::replace(&mut tool.input_schema, no_schema());
        let output_schema = tool.output_schema.take();
        Self {
            head: tool,
            input_schema: SchemaText::from_object(&input_schema),
            output_schema: output_schema.map(|s| SchemaText::from_object(&s)),
        }
    }

    /// The whole tool, its schemas parsed.
    pub fn to_tool(&self) -> Tool {
        let mut tool = self.head.clone();
        tool.input_schema = Arc::new(self.input_schema.to_object());
        tool.output_schema = self.output_schema.as_ref().map(|s| Arc::new(s.to_object()));
        tool
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.head.name
    }

    /// Renames the tool, returning its former name.
    pub fn rename(&mut self, name: impl Into<String>) -> String {
        std::mem::replace(&mut self.head.name, name.into().into()).into_owned()
    }

    /// Its own title (not its annotations' one).
    pub fn title(&self) -> Option<&str> {
        self.head.title.as_deref()
    }

    /// Its description.
    pub fn description(&self) -> Option<&str> {
        self.head.description.as_deref()
    }

    /// Replaces its description.
    pub fn set_description(&mut self, description: impl Into<String>) {
        self.head.description = Some(description.into().into());
    }

    /// Its annotations (hints such as read-only).
    pub fn annotations(&self) -> Option<&ToolAnnotations> {
        self.head.annotations.as_ref()
    }

    /// Its `_meta`.
    pub fn meta(&self) -> Option<&MetaObject> {
        self.head.meta.as_ref()
    }

    /// Its `_meta`, to change.
    pub fn meta_mut(&mut self) -> &mut Option<MetaObject> {
        &mut self.head.meta
    }

    /// The input schema.
    pub fn input_schema(&self) -> &SchemaText {
        &self.input_schema
    }

    /// Replaces the input schema.
    pub fn set_input_schema(&mut self, schema: SchemaText) {
        self.input_schema = schema;
    }

    /// The output schema (the contract of its structured content), when it has one.
    pub fn output_schema(&self) -> Option<&SchemaText> {
        self.output_schema.as_ref()
    }

    /// Passes each schema through `f` (to share equal texts, say).
    pub fn map_schemas(mut self, mut f: impl FnMut(SchemaText) -> SchemaText) -> Self {
        self.input_schema = f(self.input_schema);
        self.output_schema = self.output_schema.map(&mut f);
        self
    }
}

impl From<Tool> for CompactTool {
    fn from(tool: Tool) -> Self {
        Self::new(tool)
    }
}

impl fmt::Debug for CompactTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactTool")
            .field("name", &self.head.name)
            .field("title", &self.head.title)
            .field("description", &self.head.description)
            .field("input_schema", &self.input_schema)
            .field("output_schema", &self.output_schema)
            .field("annotations", &self.head.annotations)
            .field("icons", &self.head.icons)
            .field("meta", &self.head.meta)
            .finish()
    }
}

/// What [`SchemaText::for_each_parameter`] reads of a schema: the top-level properties, in the
/// text's order, their names and descriptions borrowed from the text where it has no escapes.
mod parameters {
    use std::{borrow::Cow, fmt, marker::PhantomData};

    use serde::{
        Deserialize, Deserializer,
        de::{IgnoredAny, MapAccess, Visitor},
    };

    #[derive(Deserialize)]
    pub(super) struct Schema<'a> {
        #[serde(borrow, default)]
        pub(super) properties: Option<Properties<'a>>,
    }

    /// A property's description: `None` also for a property that is not an object (`true`) or
    /// whose description is not a string.
    pub(super) struct Parameter<'a> {
        pub(super) description: Option<Text<'a>>,
    }

    impl<'de: 'a, 'a> Deserialize<'de> for Parameter<'a> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visit<'a>(PhantomData<&'a ()>);
            impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
                type Value = Parameter<'a>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a parameter schema")
                }
                fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                    let mut description = None;
                    while let Some(key) = map.next_key::<Text<'de>>()? {
                        if key.0 == "description" && description.is_none() {
                            // Only a string is a description; anything else is passed over.
                            let raw = map.next_value::<&'de serde_json::value::RawValue>()?;
                            description = serde_json::from_str::<Text<'de>>(raw.get()).ok();
                        } else {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                    Ok(Parameter { description })
                }
                fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                    Ok(Parameter { description: None })
                }
            }
            deserializer.deserialize_any(Visit(PhantomData))
        }
    }

    /// A JSON string, borrowed when it can be.
    pub(super) struct Text<'a>(pub(super) Cow<'a, str>);

    impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visit<'a>(PhantomData<&'a ()>);
            impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
                type Value = Text<'a>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a string")
                }
                fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                    Ok(Text(Cow::Borrowed(v)))
                }
                fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                    Ok(Text(Cow::Owned(v.to_owned())))
                }
            }
            deserializer.deserialize_str(Visit(PhantomData))
        }
    }

    /// The properties object as its pairs, in the text's order.
    pub(super) struct Properties<'a>(pub(super) Vec<(Text<'a>, Parameter<'a>)>);

    impl<'de: 'a, 'a> Deserialize<'de> for Properties<'a> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visit<'a>(PhantomData<&'a ()>);
            impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
                type Value = Properties<'a>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an object of parameter schemas")
                }
                fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                    let mut pairs = Vec::new();
                    while let Some(pair) = map.next_entry()? {
                        pairs.push(pair);
                    }
                    Ok(Properties(pairs))
                }
            }
            deserializer.deserialize_map(Visit(PhantomData))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: serde_json::Value) -> JsonObject {
        v.as_object().cloned().expect("an object")
    }

    #[test]
    fn a_tool_comes_back_whole_from_its_compact_form() {
        let mut tool = Tool::new(
            "get",
            "Gets it.",
            Arc::new(object(
                json!({"type": "object", "required": ["id"], "properties": {"id": {"type": "integer", "minimum": 1}}}),
            )),
        );
        tool.output_schema = Some(Arc::new(object(
            json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
        )));
        tool.title = Some("Get".to_owned());
        let compact = CompactTool::new(tool.clone());
        assert_eq!(compact.to_tool(), tool);
        assert_eq!(compact.name(), "get");
        assert_eq!(compact.title(), Some("Get"));
        assert_eq!(
            compact.output_schema().map(SchemaText::as_str),
            Some(r#"{"properties":{"ok":{"type":"boolean"}},"type":"object"}"#)
        );
    }

    #[test]
    fn a_schema_serializes_as_the_json_object_it_holds() {
        let schema = SchemaText::from_object(&object(json!({"b": [1, 2.5, "x"], "a": {"c": null}})));
        assert_eq!(
            serde_json::to_string(&schema).expect("json"),
            r#"{"a":{"c":null},"b":[1,2.5,"x"]}"#
        );
        assert_eq!(
            serde_json::to_value(&schema).expect("value"),
            json!({"a": {"c": null}, "b": [1, 2.5, "x"]})
        );
    }

    #[test]
    fn schemas_from_equal_maps_are_equal_whatever_the_key_order() {
        let a = SchemaText::from_json(r#"{"type":"object","properties":{}}"#.to_owned()).expect("json");
        let b = SchemaText::from_json(r#"{"properties":{},"type":"object"}"#.to_owned()).expect("json");
        assert_ne!(a, b, "texts differ");
        assert_eq!(
            SchemaText::from_object(&a.to_object()),
            SchemaText::from_object(&b.to_object())
        );
    }

    #[test]
    fn only_a_json_object_is_a_schema() {
        assert!(SchemaText::from_json("[1]".to_owned()).is_err());
        assert!(SchemaText::from_json("{".to_owned()).is_err());
        assert!(SchemaText::from_json(" {}".to_owned()).is_ok());
    }

    fn parameters(schema: &str) -> Vec<(String, Option<String>)> {
        let schema = SchemaText::from_json(schema.to_owned()).unwrap_or_else(|e| panic!("{schema}: {e}"));
        let mut seen = Vec::new();
        schema.for_each_parameter(|name, description| seen.push((name.to_owned(), description.map(str::to_owned))));
        seen
    }

    #[test]
    fn parameters_are_read_in_order_whatever_else_the_schema_says() {
        let seen = parameters(
            r#"{"required":["z"],"properties":{"z":{"type":"string","description":"Last\nletter","enum":["a"]},"a":true,"m":{"description":7,"properties":{"inner":{"description":"nested"}}},"q":{"description":"\u0051uery"}},"type":"object"}"#,
        );
        assert_eq!(
            seen,
            [
                ("z".to_owned(), Some("Last\nletter".to_owned())),
                ("a".to_owned(), None),
                ("m".to_owned(), None),
                ("q".to_owned(), Some("Query".to_owned())),
            ]
        );
    }

    #[test]
    fn a_schema_without_an_object_of_properties_has_no_parameters() {
        assert!(parameters("{}").is_empty());
        assert!(parameters(r#"{"type":"object","properties":[]}"#).is_empty());
        assert!(parameters(r#"{"properties":{"a":"string"}}"#).is_empty());
    }
}
