//! The check a downstream's result passes before it is passed on as it came ([`check`]): the
//! shape of a `CallToolResult` that a client reads, read in one pass without building it.
//!
//! Checked as rmcp reads them:
//! - the result is an object; `resultType`, when there is one, is `"complete"`; it has
//!   `content`, `structuredContent` or `isError`; `isError` is a boolean; `_meta` is an object;
//! - `content` is an array of blocks, each an object whose `type` is `text` (with a string
//!   `text`), `image` or `audio` (string `data` and `mimeType`), `resource` (a `resource` with a
//!   string `uri` and a string `text` or `blob`) or `resource_link` (string `uri` and `name`);
//! - a block's optional fields: `annotations` (`audience` of `user` and `assistant`, a numeric
//!   `priority`, a string `lastModified`), `_meta` (an object), and a link's `title`,
//!   `description`, `mimeType` (strings), `size` (a whole number) and `icons` (objects with a
//!   string `src`).
//!
//! Left to rmcp's reading, when the typed result is asked for: the fields of an icon other than
//! `src`. Nothing is copied or decoded: strings are checked where they lie.
//!
//! ```
//! use muster_core::output::shape::check;
//!
//! assert!(check(r#"{"content":[{"type":"text","text":"hi"}]}"#).is_ok());
//! let error = check(r#"{"content":[{"type":"video","data":""}]}"#).unwrap_err();
//! assert!(error.to_string().contains("unknown variant `video`"), "{error}");
//! ```

use std::fmt;

use serde::{
    Deserialize, Deserializer,
    de::{self, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor},
};
use serde_json::value::RawValue;

/// What the check learned of a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// `isError: true`.
    pub(crate) is_error: bool,
    /// No `resultType`, and `structuredContent` absent or an object: what rmcp's server sends
    /// a client before 2026-07-28 unchanged.
    pub(crate) legacy: bool,
}

/// Checks that `json` has the shape of a `CallToolResult` (see the [module](self)); the error
/// names what is wrong, as rmcp's reading would.
pub fn check(json: &str) -> Result<(), serde_json::Error> {
    read(json).map(|_| ())
}

/// [`check`], and what it learned.
pub(crate) fn read(json: &str) -> Result<Shape, serde_json::Error> {
    let result: ResultShape<'_> = serde_json::from_str(json)?;
    if result.result_type.as_ref().is_some_and(|complete| !complete.0) {
        return Err(de::Error::custom(
            "CallToolResult requires resultType to be \"complete\" when present",
        ));
    }
    if result.content.is_none() && result.structured_content.is_none() && result.is_error.is_none() {
        return Err(de::Error::custom(
            "expected at least one known CallToolResult field (content, structuredContent, or isError)",
        ));
    }
    Ok(Shape {
        is_error: result.is_error == Some(true),
        legacy: result.result_type.is_none()
            && result
                .structured_content
                .is_none_or(|value| value.get().starts_with('{')),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResultShape<'a> {
    #[serde(default)]
    result_type: Option<ResultType>,
    #[serde(default)]
    content: Option<Blocks>,
    #[serde(default, borrow, deserialize_with = "present")]
    structured_content: Option<&'a RawValue>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(rename = "_meta", default)]
    _meta: Option<Object>,
}

/// A field that is there, `null` included (rmcp keeps an explicit `null` `structuredContent`).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// The `content` array, its blocks checked one by one and not kept.
struct Blocks;

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Blocks;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of content blocks")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut blocks: A) -> Result<Blocks, A::Error> {
                while let Some(block) = blocks.next_element::<BlockShape>()? {
                    block.check().map_err(de::Error::custom)?;
                }
                Ok(Blocks)
            }
        }
        deserializer.deserialize_seq(Visit)
    }
}

/// The kinds of content block.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Text,
    Image,
    Audio,
    Resource,
    ResourceLink,
}

/// A content block: every field any kind has, each checked for its type where it is; which
/// ones the kind needs is checked after ([`BlockShape::check`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockShape {
    #[serde(rename = "type")]
    kind: Kind,
    text: Option<Str>,
    data: Option<Str>,
    mime_type: Option<Str>,
    resource: Option<ResourceShape>,
    uri: Option<Str>,
    name: Option<Str>,
    #[serde(rename = "title")]
    _title: Option<Str>,
    #[serde(rename = "description")]
    _description: Option<Str>,
    #[serde(rename = "size")]
    _size: Option<u64>,
    #[serde(rename = "icons")]
    _icons: Option<Vec<IconShape>>,
    #[serde(rename = "annotations")]
    _annotations: Option<AnnotationsShape>,
    #[serde(rename = "_meta")]
    _meta: Option<Object>,
}

impl BlockShape {
    /// The field the block's kind needs and lacks.
    fn check(&self) -> Result<(), &'static str> {
        let missing = match self.kind {
            Kind::Text => self.text.is_none().then_some("missing field `text`"),
            Kind::Image | Kind::Audio => self
                .data
                .is_none()
                .then_some("missing field `data`")
                .or(self.mime_type.is_none().then_some("missing field `mimeType`")),
            Kind::Resource => self.resource.is_none().then_some("missing field `resource`"),
            Kind::ResourceLink => self
                .uri
                .is_none()
                .then_some("missing field `uri`")
                .or(self.name.is_none().then_some("missing field `name`")),
        };
        missing.map_or(Ok(()), Err)
    }
}

/// An embedded resource's contents: a `uri`, and its `text` or its `blob`.
struct ResourceShape;

impl<'de> Deserialize<'de> for ResourceShape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Fields {
            uri: Option<Str>,
            #[serde(rename = "mimeType")]
            _mime_type: Option<Str>,
            text: Option<Str>,
            blob: Option<Str>,
            #[serde(rename = "_meta")]
            _meta: Option<Object>,
        }
        let fields = Fields::deserialize(deserializer)?;
        if fields.uri.is_none() || (fields.text.is_none() && fields.blob.is_none()) {
            return Err(de::Error::custom(
                "data did not match any variant of untagged enum ResourceContents",
            ));
        }
        Ok(Self)
    }
}

#[derive(Deserialize)]
struct IconShape {
    #[serde(rename = "src")]
    _src: Str,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnnotationsShape {
    #[serde(rename = "audience")]
    _audience: Option<Vec<Role>>,
    #[serde(rename = "priority")]
    _priority: Option<f64>,
    #[serde(rename = "lastModified")]
    _last_modified: Option<Str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum Role {
    User,
    Assistant,
}

/// A string, checked where it lies and not kept: skipped as serde_json skips a value it
/// ignores (its escapes well formed, not decoded), then checked to be a string whose `\u`
/// escapes pair their surrogates, as decoding it would.
struct Str;

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&RawValue>::deserialize(deserializer)?;
        if !raw.get().starts_with('"') {
            return Err(de::Error::invalid_type(unexpected(raw.get()), &"a string"));
        }
        paired_surrogates(raw.get()).map_err(de::Error::custom)?;
        Ok(Str)
    }
}

/// Whether the `\u` escapes of `string`, a JSON string whose escapes are well formed, give
/// UTF-16 surrogates only in pairs, a leading one then a trailing one; else the error
/// serde_json gives when it decodes the string.
fn paired_surrogates(string: &str) -> Result<(), &'static str> {
    const LONE: &str = "lone leading surrogate in hex escape";
    const END: &str = "unexpected end of hex escape";
    if !string.contains("\\u") {
        return Ok(());
    }
    let bytes = string.as_bytes();
    let hex = |at: usize| {
        std::str::from_utf8(bytes.get(at..at + 4).unwrap_or_default())
            .ok()
            .and_then(|digits| u16::from_str_radix(digits, 16).ok())
    };
    let mut at = 0;
    while let Some(found) = string[at..].find('\\') {
        let escape = at + found;
        if bytes.get(escape + 1) != Some(&b'u') {
            at = escape + 2;
            continue;
        }
        at = escape + 6;
        match hex(escape + 2) {
            Some(0xDC00..=0xDFFF) => return Err(LONE),
            Some(0xD800..=0xDBFF) => {
                if bytes.get(at..at + 2) != Some(&b"\\u"[..]) {
                    return Err(END);
                }
                if !matches!(hex(at + 2), Some(0xDC00..=0xDFFF)) {
                    return Err(LONE);
                }
                at += 6;
            }
            _ => {}
        }
    }
    Ok(())
}

/// What `json` (a JSON value that is not a string) is, as serde names it in an error.
fn unexpected(json: &str) -> Unexpected<'_> {
    match json.as_bytes().first() {
        Some(b't') => Unexpected::Bool(true),
        Some(b'f') => Unexpected::Bool(false),
        Some(b'n') => Unexpected::Unit,
        Some(b'[') => Unexpected::Seq,
        Some(b'{') => Unexpected::Map,
        _ => match (json.parse::<u64>(), json.parse::<i64>(), json.parse::<f64>()) {
            (Ok(n), _, _) => Unexpected::Unsigned(n),
            (_, Ok(n), _) => Unexpected::Signed(n),
            (_, _, Ok(n)) => Unexpected::Float(n),
            _ => Unexpected::Other(json),
        },
    }
}

/// A `resultType`: whether it is `"complete"`.
struct ResultType(bool);

impl<'de> Deserialize<'de> for ResultType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl Visitor<'_> for Visit {
            type Value = ResultType;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<ResultType, E> {
                Ok(ResultType(s == "complete"))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

/// A JSON object, checked and not kept.
struct Object;

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Object;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Object)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}
