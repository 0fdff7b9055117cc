//! [`JqError`] and the translation of jaq's load, compile and runtime errors into it.

use std::fmt;

use jaq_core::{
    compile::{self, Undefined},
    load::{self, lex},
};
use jaq_json::Val;

/// A jq program failed to compile or to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JqError {
    /// The program does not parse.
    #[error("jq: syntax error {}: expected {expected}", site(.near, *.line, *.column))]
    Syntax {
        /// The text at the error (an unclosed delimiter, the unexpected token); `None` at the end
        /// of the program.
        near: Option<String>,
        /// 1-based line of the error in the program.
        line: usize,
        /// 1-based column (in characters) of the error in its line.
        column: usize,
        /// What the parser expected instead, e.g. `closing bracket` or `term`.
        expected: String,
    },
    /// The program names variables or filters that do not exist.
    #[error("jq: {}", list(.symbols))]
    Undefined {
        /// Each undefined name once, in the order the compiler met them.
        symbols: Vec<UndefinedSymbol>,
    },
    /// The program imports or includes a module; workflow programs are self-contained.
    #[error("jq: cannot load module {path:?}: {reason}")]
    Import {
        /// The module path as written in the program.
        path: String,
        /// Why it was not loaded.
        reason: String,
    },
    /// The program raised an error while running (`error(..)`, indexing a string, ...).
    #[error("jq: {message}")]
    Runtime {
        /// jaq's message, or the error value (a string as itself, anything else as JSON).
        message: String,
    },
    /// The program yielded no value (e.g. `empty`, or `select` rejecting its input).
    #[error("jq program yielded no value")]
    NoValue,
    /// The program yielded a second value (e.g. `.[]` on an array of two).
    #[error("jq program yielded more than one value; it must yield exactly one")]
    ManyValues,
    /// The program called `halt` or `halt_error`.
    #[error("jq program stopped with halt (exit code {code})")]
    Halted {
        /// The exit code it asked for.
        code: i32,
    },
    /// The result nests arrays and objects deeper than the limit.
    #[error("jq program result nests deeper than {limit} levels")]
    TooDeep {
        /// The limit, [`MAX_RESULT_DEPTH`](super::MAX_RESULT_DEPTH).
        limit: usize,
    },
}

/// A variable or filter a program names but nobody defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndefinedSymbol {
    /// What sort of name it is.
    pub kind: SymbolKind,
    /// The name as written (variables with their `$`).
    pub name: String,
}

/// The sort of an [`UndefinedSymbol`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SymbolKind {
    /// A variable such as `$nope`.
    Variable,
    /// A filter called with `arity` arguments.
    Filter {
        /// Number of arguments at the call.
        arity: usize,
    },
    /// A label (`break $name`).
    Label,
    /// A module.
    Module,
    /// A name of a sort this version does not know.
    Other,
}

impl fmt::Display for UndefinedSymbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match self.kind {
            SymbolKind::Variable if name.starts_with('$') => write!(f, "undefined variable {name}"),
            SymbolKind::Variable => write!(f, "undefined variable ${name}"),
            SymbolKind::Filter { arity } => write!(f, "undefined filter {name}/{arity}"),
            SymbolKind::Label => write!(f, "undefined label {name}"),
            SymbolKind::Module => write!(f, "undefined module {name}"),
            SymbolKind::Other => write!(f, "undefined symbol {name}"),
        }
    }
}

fn site(near: &Option<String>, line: usize, column: usize) -> String {
    match near {
        Some(near) => format!("near {near:?} at line {line}, column {column}"),
        None => "at end of program".to_owned(),
    }
}

fn list(symbols: &[UndefinedSymbol]) -> String {
    let all: Vec<String> = symbols.iter().map(ToString::to_string).collect();
    all.join(", ")
}

/// The first of jaq's load (lex, parse, import) errors; the first is the one to fix.
pub(super) fn load_error(errors: load::Errors<&str, ()>) -> JqError {
    let Some((file, error)) = errors.into_iter().next() else {
        return syntax(None, "", "", "a jq program".to_owned());
    };
    let code = file.code;
    match error {
        load::Error::Io(io) => match io.into_iter().next() {
            Some((path, reason)) => JqError::Import {
                path: path.to_owned(),
                reason,
            },
            None => syntax(None, code, "", "a jq program".to_owned()),
        },
        load::Error::Lex(lex) => match lex.into_iter().next() {
            // An unclosed delimiter: point at the delimiter itself.
            Some((lex::Expect::Delim(open), _)) => syntax(Some(open), code, open, closing(open).to_owned()),
            Some((expect, rest)) => syntax(snippet(rest), code, rest, expect.as_str().to_owned()),
            None => syntax(None, code, "", "a jq program".to_owned()),
        },
        load::Error::Parse(parse) => match parse.into_iter().next() {
            Some((expect, found)) => syntax(snippet(found), code, found, expect.as_str().to_owned()),
            None => syntax(None, code, "", "a jq program".to_owned()),
        },
    }
}

/// Every undefined name jaq's compiler reports, each once.
pub(super) fn compile_error(errors: compile::Errors<&str, ()>) -> JqError {
    let mut symbols: Vec<UndefinedSymbol> = Vec::new();
    for (name, undefined) in errors.into_iter().flat_map(|(_file, undefined)| undefined) {
        let kind = match undefined {
            Undefined::Var => SymbolKind::Variable,
            Undefined::Filter(arity) => SymbolKind::Filter { arity },
            Undefined::Label => SymbolKind::Label,
            Undefined::Mod => SymbolKind::Module,
            _ => SymbolKind::Other,
        };
        let symbol = UndefinedSymbol {
            kind,
            name: name.to_owned(),
        };
        if !symbols.contains(&symbol) {
            symbols.push(symbol);
        }
    }
    JqError::Undefined { symbols }
}

/// A runtime error's message: a string error value as itself, anything else as jaq prints it.
pub(super) fn runtime_message(error: jaq_core::Error<Val>) -> String {
    match error.into_val() {
        Val::TStr(bytes) | Val::BStr(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        other => other.to_string(),
    }
}

fn closing(open: &str) -> &'static str {
    match open {
        "(" => "closing parenthesis",
        "[" => "closing bracket",
        "{" => "closing brace",
        "\"" => "closing quote",
        _ => "closing delimiter",
    }
}

/// At most the first word (20 characters) of `text`; `None` when it is empty (end of program).
fn snippet(text: &str) -> Option<&str> {
    let word = text.split_whitespace().next()?;
    Some(word.char_indices().nth(20).map_or(word, |(end, _)| &word[..end]))
}

/// A syntax error at `part`, a slice of `code` (the end of `code` when it is not one).
fn syntax(near: Option<&str>, code: &str, part: &str, expected: String) -> JqError {
    let offset = offset_in(code, part).unwrap_or(code.len());
    let before = &code[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    JqError::Syntax {
        near: near.map(str::to_owned),
        line,
        column,
        expected,
    }
}

/// Where `part` starts inside `whole`, if it is a slice of it.
fn offset_in(whole: &str, part: &str) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (start + part.len() <= whole.len() && whole.is_char_boundary(start)).then_some(start)
}
