//! `context`: named gateway endpoints, so `--endpoint` need not be typed again.
//!
//! ```text
//! gateway context add prod --endpoint https://muster.example.com/mcp --use
//! gateway context add local --endpoint http://127.0.0.1:8090/mcp
//! gateway context list                 # the current one is marked *
//! gateway context use local
//! gateway list tools --context prod    # one command against another gateway
//! ```
//!
//! Contexts live in `contexts.yaml` in the muster config folder (`$XDG_CONFIG_HOME/muster`, else
//! `~/.config/muster`; `MUSTER_CONTEXTS_FILE` names another file), written atomically:
//!
//! ```yaml
//! currentContext: prod
//! contexts:
//!   - name: prod
//!     endpoint: https://muster.example.com/mcp
//! ```
//!
//! A client command and the agent bridge reach the gateway at, first to last:
//! `--endpoint` (or `MUSTER_ENDPOINT`), the endpoint of `--context` (or `MUSTER_CONTEXT`), the
//! current context's, and `http://127.0.0.1:8090/mcp` ([`resolve_endpoint`]). A context that does
//! not exist is an error naming the known ones, never a silent fall back to another gateway.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    error::{CliError, OK},
    note,
    output::{Column, Out, at},
};
use crate::connect::{self, DEFAULT_ENDPOINT};

/// The longest context name.
const MAX_NAME: usize = 63;

/// `context` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum ContextCommand {
    /// List the contexts; the current one is marked *.
    #[command(
        visible_alias = "ls",
        after_help = "Examples:\n  gateway context list\n  gateway context ls -o json"
    )]
    List,
    /// Print the current context's name.
    #[command(after_help = "Examples:\n  gateway context current")]
    Current,
    /// Make a context the current one.
    #[command(visible_alias = "switch", after_help = "Examples:\n  gateway context use prod")]
    Use {
        /// The context.
        name: String,
    },
    /// Add a context.
    #[command(
        after_help = "Examples:\n  gateway context add prod --endpoint https://muster.example.com/mcp\n  \
                      gateway context add local --endpoint http://127.0.0.1:8090/mcp --use"
    )]
    Add {
        /// Its name (letters, digits, `.`, `_`, `-`).
        name: String,
        /// The gateway's MCP endpoint.
        #[arg(long)]
        endpoint: String,
        /// Make it the current context too.
        #[arg(long = "use")]
        make_current: bool,
    },
    /// Change a context's endpoint.
    #[command(
        visible_alias = "set",
        after_help = "Examples:\n  gateway context update prod --endpoint https://muster2.example.com/mcp"
    )]
    Update {
        /// The context.
        name: String,
        /// Its new endpoint.
        #[arg(long)]
        endpoint: String,
    },
    /// Rename a context.
    #[command(after_help = "Examples:\n  gateway context rename prod production")]
    Rename {
        /// Its name now.
        from: String,
        /// Its new name.
        to: String,
    },
    /// Delete a context (if it was the current one, there is no current context after).
    #[command(visible_alias = "rm", after_help = "Examples:\n  gateway context delete old")]
    Delete {
        /// The context.
        name: String,
    },
    /// Show a context (the current one by default).
    #[command(
        visible_aliases = ["describe", "get"],
        after_help = "Examples:\n  gateway context show\n  gateway context show prod -o yaml"
    )]
    Show {
        /// The context.
        name: Option<String>,
    },
}

/// One named endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Context {
    name: String,
    endpoint: String,
}

/// What `contexts.yaml` holds.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Contexts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current_context: Option<String>,
    #[serde(default)]
    contexts: Vec<Context>,
}

/// Where the contexts are kept.
pub(crate) fn contexts_file() -> PathBuf {
    if let Some(file) = std::env::var_os("MUSTER_CONTEXTS_FILE").filter(|v| !v.is_empty()) {
        return PathBuf::from(file);
    }
    crate::config_source::muster_config_home().join("contexts.yaml")
}

impl Contexts {
    /// The contexts in `path`; none when it does not exist.
    fn load(path: &Path) -> Result<Self, CliError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(CliError::Setup(format!("cannot read {}: {e}", path.display()))),
        };
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_saphyr::from_str(&text).map_err(|e| {
            CliError::Setup(format!(
                "{} is not a contexts file ({e}); fix or remove it",
                path.display()
            ))
        })
    }

    fn save(&self, path: &Path) -> Result<(), CliError> {
        let text = serde_saphyr::to_string(self).map_err(|e| CliError::Setup(format!("cannot write contexts: {e}")))?;
        muster::core::fs::write_atomic(path, text.as_bytes()).map_err(|e| CliError::Setup(e.to_string()))
    }

    fn get(&self, name: &str) -> Result<&Context, CliError> {
        self.contexts
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| self.unknown(name))
    }

    fn get_mut(&mut self, name: &str) -> Result<&mut Context, CliError> {
        match self.contexts.iter().position(|c| c.name == name) {
            Some(i) => Ok(&mut self.contexts[i]),
            None => Err(self.unknown(name)),
        }
    }

    fn unknown(&self, name: &str) -> CliError {
        let known: Vec<&str> = self.contexts.iter().map(|c| c.name.as_str()).collect();
        let hint = if known.is_empty() {
            "there are none; add one with `gateway context add <name> --endpoint <url>`".to_owned()
        } else {
            format!("known: {}", known.join(", "))
        };
        CliError::Usage(format!("no context {name:?} in {} ({hint})", contexts_file().display()))
    }

    fn row(&self, context: &Context) -> Value {
        let current = self.current_context.as_deref() == Some(context.name.as_str());
        json!({"name": context.name, "endpoint": context.endpoint, "current": current})
    }
}

/// The endpoint a command reaches: `endpoint` when given, else that of the context named
/// `context`, else that of the current context, else the default.
pub(crate) fn resolve_endpoint(endpoint: Option<&str>, context: Option<&str>) -> Result<String, CliError> {
    if let Some(endpoint) = endpoint.filter(|e| !e.is_empty()) {
        return Ok(endpoint.to_owned());
    }
    let path = contexts_file();
    let contexts = Contexts::load(&path)?;
    if let Some(name) = context.filter(|c| !c.is_empty()) {
        return Ok(contexts.get(name)?.endpoint.clone());
    }
    match contexts.current_context.as_deref() {
        Some(current) => Ok(contexts
            .get(current)
            .map_err(|_| {
                CliError::Setup(format!(
                    "the current context {current:?} is not in {}; choose one with `gateway context use <name>`",
                    path.display()
                ))
            })?
            .endpoint
            .clone()),
        None => Ok(DEFAULT_ENDPOINT.to_owned()),
    }
}

fn check_name(name: &str) -> Result<(), CliError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "invalid context name {name:?}: use 1 to {MAX_NAME} letters, digits, '.', '_' or '-'"
        )))
    }
}

fn check_endpoint(endpoint: &str) -> Result<(), CliError> {
    connect::check_endpoint(endpoint).map_err(CliError::Usage)
}

const COLUMNS: &[Column] = &[
    Column::new("CURRENT", |r| {
        if r.get("current").and_then(Value::as_bool) == Some(true) {
            "*".to_owned()
        } else {
            String::new()
        }
    }),
    Column::new("NAME", |r| at(r, "name")),
    Column::new("ENDPOINT", |r| at(r, "endpoint")),
];

/// Runs a `context` subcommand; its exit code.
pub(crate) fn run(command: &ContextCommand, out: &Out) -> Result<u8, CliError> {
    let path = contexts_file();
    let mut contexts = Contexts::load(&path)?;
    match command {
        ContextCommand::List => {
            let rows: Vec<Value> = contexts.contexts.iter().map(|c| contexts.row(c)).collect();
            if rows.is_empty() && out.format.is_table() {
                note("No contexts. Add one with `gateway context add <name> --endpoint <url>`.");
                return Ok(OK);
            }
            out.list(&Value::Array(rows), COLUMNS);
        }
        ContextCommand::Current => match &contexts.current_context {
            Some(current) => out.line(current),
            None => {
                return Err(CliError::Setup(
                    "no current context; choose one with `gateway context use <name>`".to_owned(),
                ));
            }
        },
        ContextCommand::Use { name } => {
            contexts.get(name)?;
            contexts.current_context = Some(name.clone());
            contexts.save(&path)?;
            note(&format!("Switched to context {name}."));
        }
        ContextCommand::Add {
            name,
            endpoint,
            make_current,
        } => {
            check_name(name)?;
            check_endpoint(endpoint)?;
            if contexts.get(name).is_ok() {
                return Err(CliError::Usage(format!(
                    "context {name} exists; change it with `gateway context update {name} --endpoint <url>`"
                )));
            }
            contexts.contexts.push(Context {
                name: name.clone(),
                endpoint: endpoint.clone(),
            });
            if *make_current {
                contexts.current_context = Some(name.clone());
            }
            contexts.save(&path)?;
            note(&format!(
                "Added context {name}{}.",
                if *make_current { ", now the current one" } else { "" }
            ));
        }
        ContextCommand::Update { name, endpoint } => {
            check_endpoint(endpoint)?;
            contexts.get_mut(name)?.endpoint.clone_from(endpoint);
            contexts.save(&path)?;
            note(&format!("Context {name} now points at {endpoint}."));
        }
        ContextCommand::Rename { from, to } => {
            check_name(to)?;
            if contexts.get(to).is_ok() {
                return Err(CliError::Usage(format!("context {to} exists already")));
            }
            contexts.get_mut(from)?.name.clone_from(to);
            if contexts.current_context.as_deref() == Some(from.as_str()) {
                contexts.current_context = Some(to.clone());
            }
            contexts.save(&path)?;
            note(&format!("Renamed context {from} to {to}."));
        }
        ContextCommand::Delete { name } => {
            contexts.get(name)?;
            contexts.contexts.retain(|c| &c.name != name);
            let was_current = contexts.current_context.as_deref() == Some(name.as_str());
            if was_current {
                contexts.current_context = None;
            }
            contexts.save(&path)?;
            note(&format!(
                "Deleted context {name}{}.",
                if was_current {
                    "; there is no current context now"
                } else {
                    ""
                }
            ));
        }
        ContextCommand::Show { name } => {
            let name = match name.as_deref().or(contexts.current_context.as_deref()) {
                Some(name) => name.to_owned(),
                None => {
                    return Err(CliError::Setup(
                        "no current context; name one (`gateway context show <name>`) or choose one with \
                         `gateway context use <name>`"
                            .to_owned(),
                    ));
                }
            };
            let row = contexts.row(contexts.get(&name)?);
            out.object(&row);
        }
    }
    Ok(OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contexts_file_round_trips_and_refuses_unknown_keys() {
        let contexts = Contexts {
            current_context: Some("prod".into()),
            contexts: vec![Context {
                name: "prod".into(),
                endpoint: "https://gw.example.com/mcp".into(),
            }],
        };
        let text = serde_saphyr::to_string(&contexts).expect("serializes");
        assert!(text.contains("currentContext: prod"), "{text}");
        let back: Contexts = serde_saphyr::from_str(&text).expect("parses");
        assert_eq!(back, contexts);
        assert!(serde_saphyr::from_str::<Contexts>("contexts: []\ncurentContext: x\n").is_err());
    }

    #[test]
    fn context_names_are_checked() {
        assert!(check_name("prod-eu.1_a").is_ok());
        for bad in ["", "a b", "ü", "a/b", &"x".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
