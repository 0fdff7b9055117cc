//! jq programs that reshape a step's result before it is stored (a step's `jq` field), on
//! [jaq](https://github.com/01mf02/jaq) (jaq-core, jaq-std and jaq-json).
//!
//! A program is compiled once, when a workflow is loaded or created ([`JqProgram::compile`]):
//! a syntax error, an undefined variable or an undefined filter is refused there, with a one-line
//! message naming what is wrong. It then runs many times ([`JqProgram::run`]) on the tool's result
//! (or a forEach's per-iteration records), with `$input` (the workflow's input) and `$vars` in
//! scope. A run must yield exactly one value: no value, more than one value, or a runtime error
//! is an error.
//!
//! Values cross between `serde_json` and jaq directly (no text round-trip): integers stay
//! integers (including the full `u64`/`i64` range), floats stay floats. jq's NaN becomes `null`
//! and ±infinity the largest finite float, as jq prints them. Object keys come out in
//! `serde_json::Map` order: sorted, unless serde_json's `preserve_order` feature is on, in which
//! case they keep the order the program produced. A result nested more than
//! [`MAX_RESULT_DEPTH`] levels deep is refused (serde_json could not read it back).
//!
//! The jq standard library is jaq's, with two changes for a gateway process: `env` (the
//! gateway's environment variables) is not defined, and `halt`/`halt_error` end the program
//! with an error instead of exiting the process. Modules (`import`/`include`) are not supported.
//! A run is synchronous and has no time limit: call it outside async code that must stay
//! responsive (e.g. in `spawn_blocking`) if programs are untrusted.
//!
//! ```
//! use muster_workflow::jq::JqProgram;
//! use serde_json::json;
//!
//! let program = JqProgram::compile(r#"{env: $input.environment, pods: [.items[] | .metadata.name]}"#)?;
//! let result = json!({"items": [{"metadata": {"name": "p1"}}, {"metadata": {"name": "p2"}}]});
//! let input = json!({"environment": "prod"});
//! assert_eq!(
//!     program.run(&result, &input, &json!({}))?,
//!     json!({"env": "prod", "pods": ["p1", "p2"]})
//! );
//!
//! let err = JqProgram::compile(".items[] | $nope").unwrap_err();
//! assert_eq!(err.to_string(), "jq: undefined variable $nope");
//! let err = program.run(&json!("text"), &input, &json!({})).unwrap_err();
//! assert_eq!(err.to_string(), r#"jq: cannot index "text" with "items""#);
//! # Ok::<(), muster_workflow::jq::JqError>(())
//! ```

mod convert;
mod error;

#[cfg(test)]
mod tests;

use std::{fmt, sync::Arc};

use jaq_core::{
    Compiler, Ctx, Exn, Vars,
    data::JustLut,
    load::{Arena, File, Loader},
};
use jaq_json::Val;
use serde_json::Value;

pub use self::{
    convert::MAX_RESULT_DEPTH,
    error::{JqError, SymbolKind, UndefinedSymbol},
};

/// The result type of this module.
pub type Result<T, E = JqError> = std::result::Result<T, E>;

/// The data a compiled filter runs on: jaq-json values, no extra global data.
type Data = JustLut<Val>;

/// The global variables every program sees, in the order their values are passed to a run.
const GLOBAL_VARS: [&str; 2] = ["$input", "$vars"];

/// Native filters a workflow program may not call: `env` would hand out the gateway's
/// environment (credentials included).
const DISABLED_FILTERS: &[&str] = &["env"];

/// A jq program compiled once and run many times. Cheap to clone (shared), `Send + Sync`.
#[derive(Clone)]
pub struct JqProgram {
    inner: Arc<Inner>,
}

struct Inner {
    source: Box<str>,
    filter: jaq_core::Filter<Data>,
    /// The program mentions `$input`; otherwise the input is not converted for a run.
    uses_input: bool,
    /// The program mentions `$vars`; otherwise the variables are not converted for a run.
    uses_vars: bool,
}

impl fmt::Debug for JqProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JqProgram").field("source", &self.source()).finish()
    }
}

impl JqProgram {
    /// Compiles `source` with `$input` and `$vars` in scope.
    ///
    /// Fails with [`JqError::Syntax`] when the source does not parse, [`JqError::Undefined`] when it
    /// names a variable or filter that does not exist, and [`JqError::Import`] when it imports a
    /// module.
    pub fn compile(source: &str) -> Result<Self> {
        let defs = jaq_core::defs().chain(jaq_std::defs()).chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs())
            .filter(|(name, ..)| !DISABLED_FILTERS.contains(name));
        let arena = Arena::default();
        let modules = Loader::new(defs)
            .load(&arena, File { code: source, path: () })
            .map_err(error::load_error)?;
        let filter = Compiler::default()
            .with_funs(funs)
            .with_global_vars(GLOBAL_VARS)
            .compile(modules)
            .map_err(error::compile_error)?;
        Ok(Self {
            inner: Arc::new(Inner {
                source: source.into(),
                filter,
                // A global variable can only be read by writing its name, so a program that does
                // not contain the name cannot read it (a false positive only costs a conversion).
                uses_input: source.contains(GLOBAL_VARS[0]),
                uses_vars: source.contains(GLOBAL_VARS[1]),
            }),
        })
    }

    /// Runs the program on `value` with `$input` bound to `input` and `$vars` to `vars`; the
    /// program must yield exactly one value.
    ///
    /// Fails with [`JqError::NoValue`], [`JqError::ManyValues`], [`JqError::Runtime`] (the
    /// program raised an error), [`JqError::Halted`] or [`JqError::TooDeep`].
    pub fn run(&self, value: &Value, input: &Value, vars: &Value) -> Result<Value> {
        let inner = &*self.inner;
        let global = |used: bool, v: &Value| if used { convert::to_val(v) } else { Val::Null };
        let vars = Vars::new([global(inner.uses_input, input), global(inner.uses_vars, vars)]);
        let ctx = Ctx::<Data>::new(&inner.filter.lut, vars);
        let mut outputs = inner.filter.id.run((ctx, convert::to_val(value)));
        let first = match outputs.next() {
            None => return Err(JqError::NoValue),
            Some(output) => output.map_err(exception)?,
        };
        match outputs.next() {
            None => convert::to_json(&first),
            Some(Ok(_)) => Err(JqError::ManyValues),
            Some(Err(e)) => Err(exception(e)),
        }
    }

    /// The program's source text.
    pub fn source(&self) -> &str {
        &self.inner.source
    }
}

/// What a jaq exception means for the caller. `halt` arrives here too: jaq's own
/// `unwrap_valr` would exit the process.
fn exception(exn: Exn<'_, Val>) -> JqError {
    match exn.get_err() {
        Ok(err) => JqError::Runtime {
            message: error::runtime_message(err),
        },
        Err(exn) => match exn.get_halt() {
            Ok(code) => JqError::Halted { code },
            // jaq's internal control flow (tail calls, `break`) never escapes a whole program.
            Err(_) => JqError::Runtime {
                message: "internal control flow escaped the program".to_owned(),
            },
        },
    }
}
