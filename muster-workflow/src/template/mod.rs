//! The template layer of the workflow engine: Go templates (via [`gotmpl`]) with sprig
//! functions, `missingkey=error`, and muster's type preservation.
//!
//! Templates are compiled once, when a workflow is loaded ([`CompiledTemplate::compile`],
//! [`CompiledValue::compile`]), and rendered many times against a [`Context`] that exposes
//! exactly `.input`, `.results`, `.vars` and `.context` (an alias of `.results`).
//!
//! Rendering a leaf as a value ([`CompiledTemplate::render_value`]) keeps types:
//! - a string without `{{` is returned unchanged;
//! - a bare reference path (`{{ .results.pods.items[0].name }}`) is resolved by the
//!   [path navigator](resolve_path) and keeps its JSON type at any depth;
//! - a single action (`{{ len .results.x.items }}`, `{{ printf "%02d" 8 }}`) keeps the action's
//!   real value: a number stays a number, a string keeps its exact form (`"08"`, `"1.20"`);
//!   non-finite floats become the strings `NaN`, `+Inf`, `-Inf`;
//! - literal text mixed with actions renders to a string.
//!
//! A missing key is an error naming the template and the key; calling an unknown function is
//! refused at compile time. The sprig functions are listed in [`SPRIG_FUNCTIONS`]; sprig's
//! argument order applies (the piped value comes last).
//!
//! Conditions use [`render_bool`] (a `template` gate) and [`json_path_value`] (a `jsonPath`
//! key: a path from the result, or a template seeing the result as `.result`).
//!
//! ```
//! use muster_workflow::template::{CompiledTemplate, CompiledValue, Context};
//! use serde_json::json;
//!
//! let ctx = Context::new(
//!     json!({"app_name": "shop", "environment": "prod", "image": "ghcr.io/shop"}),
//!     json!({"events": {"items": [1, 2, 3]}}),
//!     json!({}),
//! );
//! let name = CompiledTemplate::compile("args.name", "{{.input.app_name}}-{{.input.environment}}")?;
//! assert_eq!(name.render_string(&ctx)?, "shop-prod");
//!
//! let output = CompiledValue::compile(
//!     "output",
//!     &json!({
//!         "events": "{{ .results.events.items }}",
//!         "count": "{{ len .results.events.items }}",
//!         "image": "{{ .input.image | replace \"/\" \"-\" }}",
//!     }),
//! )?;
//! assert_eq!(
//!     output.render(&ctx)?,
//!     json!({"events": [1, 2, 3], "count": 3, "image": "ghcr.io-shop"})
//! );
//! # Ok::<(), muster_workflow::template::TemplateError>(())
//! ```

mod check;
mod context;
pub(crate) mod path;
mod sprig;
mod typed;

#[cfg(test)]
mod tests;

use std::{fmt, sync::Arc};

use gotmpl::{MissingKey, Template, Value as TValue};
use serde_json::Value;

pub use self::{
    context::Context,
    path::{PathError, resolve_path},
    sprig::SPRIG_FUNCTIONS,
};

/// A template failed to compile or render.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template source does not parse.
    #[error("template '{template}': {source}")]
    Parse {
        /// The template's name.
        template: String,
        /// What the parser said.
        #[source]
        source: gotmpl::TemplateError,
    },
    /// The template calls a function that does not exist.
    #[error("template '{template}': function \"{function}\" not defined")]
    UndefinedFunction {
        /// The template's name.
        template: String,
        /// The unknown function.
        function: String,
    },
    /// Executing the template failed (a missing key, a function error, ...).
    #[error("template '{template}': {source}")]
    Render {
        /// The template's name.
        template: String,
        /// What the executor said.
        #[source]
        source: gotmpl::TemplateError,
    },
    /// A bare reference path did not resolve.
    #[error("template '{template}': {source}")]
    Path {
        /// The template's name.
        template: String,
        /// Why the path did not resolve.
        #[source]
        source: PathError,
    },
}

impl TemplateError {
    /// The name of the template that failed (for a value, the leaf: `args.items[0]`).
    pub fn template(&self) -> &str {
        match self {
            Self::Parse { template, .. }
            | Self::UndefinedFunction { template, .. }
            | Self::Render { template, .. }
            | Self::Path { template, .. } => template,
        }
    }
}

/// The result type of this module.
pub type Result<T, E = TemplateError> = std::result::Result<T, E>;

/// A template compiled once and rendered many times. Cheap to clone (shared), `Send + Sync`.
#[derive(Clone)]
pub struct CompiledTemplate {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    source: String,
    kind: Kind,
}

enum Kind {
    /// No `{{`: returned unchanged.
    Literal,
    /// `{{ .a.b[0] }}`: resolved by the navigator.
    Path(String),
    /// One value action: `text` prints it, `capture` hands over its value.
    Single { text: Template, capture: Template },
    /// Anything else: rendered as text.
    Text(Template),
}

impl CompiledTemplate {
    /// Compiles `source`; `name` (e.g. `steps[2].args.image`) appears in every error.
    pub fn compile(name: impl Into<String>, source: &str) -> Result<Self> {
        let name = name.into();
        let trimmed = source.trim();
        let kind = if !source.contains("{{") {
            Kind::Literal
        } else if let Some(path) = typed::bare_path(trimmed) {
            path::segments(path).map_err(|source| TemplateError::Path {
                template: name.clone(),
                source,
            })?;
            Kind::Path(path.to_owned())
        } else {
            let analysis = check::analyse(&name, source)?;
            let text = parse(&name, source)?;
            let capture = analysis
                .single_action
                .then(|| typed::action_pipeline(trimmed))
                .flatten()
                .and_then(|p| parse(&name, &format!("{{{{ {} ({p}) }}}}", typed::CAPTURE)).ok());
            match capture {
                Some(capture) => Kind::Single { text, capture },
                None => Kind::Text(text),
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                name,
                source: source.to_owned(),
                kind,
            }),
        })
    }

    /// A template that renders `source` unchanged.
    pub(crate) fn literal(source: &str) -> Self {
        Self {
            inner: Arc::new(Inner {
                name: source.to_owned(),
                source: source.to_owned(),
                kind: Kind::Literal,
            }),
        }
    }

    /// The template's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The template's source.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// Renders to text, as text/template prints (a bare path to a list prints `[a b]`).
    pub fn render_string(&self, ctx: &Context) -> Result<String> {
        self.string_in(ctx)
    }

    /// Renders to a JSON value, preserving types (see the [module docs](self)).
    pub fn render_value(&self, ctx: &Context) -> Result<Value> {
        self.value_in(ctx)
    }

    /// Renders to a JSON value with `.result` (a tool or step result) as the only top-level
    /// key: the full-template form of a condition's `jsonPath` key
    /// (`{{ (index .result.items 0).name }}`).
    pub fn render_result_value(&self, result: &Value) -> Result<Value> {
        self.value_in(&ResultScope::new(result))
    }

    fn string_in(&self, scope: &impl Scope) -> Result<String> {
        match &self.inner.kind {
            Kind::Literal => Ok(self.inner.source.clone()),
            Kind::Path(path) => Ok(typed::print_form(&typed::to_template(&self.resolve(scope, path)?))),
            Kind::Single { text, .. } | Kind::Text(text) => self.execute(text, scope),
        }
    }

    fn value_in(&self, scope: &impl Scope) -> Result<Value> {
        match &self.inner.kind {
            Kind::Literal => Ok(Value::String(self.inner.source.clone())),
            Kind::Path(path) => self.resolve(scope, path),
            Kind::Single { capture, .. } => {
                typed::reset_capture();
                self.execute(capture, scope)?;
                Ok(typed::take_capture().map_or(Value::Null, |v| typed::to_json(&v)))
            }
            Kind::Text(text) => self.execute(text, scope).map(Value::String),
        }
    }

    fn resolve(&self, scope: &impl Scope, path: &str) -> Result<Value> {
        scope.resolve(path).map_err(|source| TemplateError::Path {
            template: self.inner.name.clone(),
            source,
        })
    }

    fn execute(&self, template: &Template, scope: &impl Scope) -> Result<String> {
        template
            .execute_to_string(scope.data())
            .map_err(|source| TemplateError::Render {
                template: self.inner.name.clone(),
                source,
            })
    }
}

/// What a template renders against: the template data and the bare-path resolver.
trait Scope {
    fn data(&self) -> &TValue;
    fn resolve(&self, path: &str) -> Result<Value, PathError>;
}

impl Scope for Context {
    fn data(&self) -> &TValue {
        Context::data(self)
    }

    fn resolve(&self, path: &str) -> Result<Value, PathError> {
        Context::resolve(self, path)
    }
}

/// `.result` alone, for condition `jsonPath` templates.
struct ResultScope<'a> {
    result: &'a Value,
    data: TValue,
}

impl<'a> ResultScope<'a> {
    fn new(result: &'a Value) -> Self {
        let data = TValue::Map(Arc::new(
            [(Arc::from("result"), typed::to_template(result))]
                .into_iter()
                .collect(),
        ));
        Self { result, data }
    }
}

impl Scope for ResultScope<'_> {
    fn data(&self) -> &TValue {
        &self.data
    }

    fn resolve(&self, path: &str) -> Result<Value, PathError> {
        let segments = path::segments(path)?;
        match segments.split_first() {
            Some((path::Segment::Key("result"), rest)) => path::walk(self.result, rest, path).cloned(),
            _ => Err(PathError::NotFound { path: path.to_owned() }),
        }
    }
}

/// The value a condition's `jsonPath` key selects from `result`: a key containing `{{` is a
/// template that sees the result as `.result`; any other key is a path navigated from the
/// result (`items[0].name`). Compiles the key on each call.
pub fn json_path_value(key: &str, result: &Value) -> Result<Value> {
    if key.contains("{{") {
        CompiledTemplate::compile(format!("jsonPath.{key}"), key)?.render_result_value(result)
    } else {
        resolve_path(result, key)
            .cloned()
            .map_err(|source| TemplateError::Path {
                template: format!("jsonPath.{key}"),
                source,
            })
    }
}

impl fmt::Debug for CompiledTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledTemplate")
            .field("name", &self.inner.name)
            .field("source", &self.inner.source)
            .finish()
    }
}

fn parse(name: &str, source: &str) -> Result<Template> {
    Template::new(name)
        .missing_key(MissingKey::Error)
        .funcs(sprig::func_map().clone())
        .func(typed::CAPTURE, typed::capture)
        .parse(source)
        .map_err(|source| TemplateError::Parse {
            template: name.to_owned(),
            source,
        })
}

/// A JSON value whose string leaves are compiled templates (step args, the output template).
#[derive(Debug, Clone)]
pub enum CompiledValue {
    /// A string leaf.
    Template(CompiledTemplate),
    /// An array, rendered element by element.
    Array(Vec<CompiledValue>),
    /// An object, rendered value by value (keys are not templated).
    Object(Vec<(String, CompiledValue)>),
    /// null, a bool or a number: returned as is.
    Constant(Value),
}

impl CompiledValue {
    /// Compiles every string leaf of `value`; leaves are named `name.key[0]...`.
    pub fn compile(name: &str, value: &Value) -> Result<Self> {
        Ok(match value {
            Value::String(s) => Self::Template(CompiledTemplate::compile(name, s)?),
            Value::Array(items) => Self::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Self::compile(&format!("{name}[{i}]"), v))
                    .collect::<Result<_>>()?,
            ),
            Value::Object(map) => Self::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), Self::compile(&format!("{name}.{k}"), v)?)))
                    .collect::<Result<_>>()?,
            ),
            other => Self::Constant(other.clone()),
        })
    }

    /// Renders every leaf with [`CompiledTemplate::render_value`], keeping the structure.
    pub fn render(&self, ctx: &Context) -> Result<Value> {
        Ok(match self {
            Self::Template(t) => t.render_value(ctx)?,
            Self::Array(items) => Value::Array(items.iter().map(|v| v.render(ctx)).collect::<Result<_>>()?),
            Self::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), v.render(ctx)?)))
                    .collect::<Result<_>>()?,
            ),
            Self::Constant(v) => v.clone(),
        })
    }
}

/// Compiles and renders `args` in one go (leaves are named `args...`); prefer
/// [`CompiledValue`] when the same arguments render more than once.
pub fn render_args(args: &Value, ctx: &Context) -> Result<Value> {
    CompiledValue::compile("args", args)?.render(ctx)
}

/// Renders a condition gate: true only for the bool `true` or the string `"true"`.
pub fn render_bool(template: &CompiledTemplate, ctx: &Context) -> Result<bool> {
    Ok(match template.render_value(ctx)? {
        Value::Bool(b) => b,
        Value::String(s) => s == "true",
        _ => false,
    })
}
