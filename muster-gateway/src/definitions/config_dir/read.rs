//! Reading the config directory: [`load`] reads `config.yaml` and every definition file.
//!
//! Loading never fails as a whole because of one bad file: a file that does not parse or
//! validate is reported as a [`LoadProblem`] (file, field, reason) and left out, and the rest
//! loads. Only an unreadable directory is an error.
//!
//! A field the schema does not know (or, on an MCPServer, one that does not apply to its type)
//! does not keep a file out: it is dropped, logged, and reported as a [`LoadWarning`], as
//! Kubernetes does with field validation `Warn`. A known field with a wrong value is a problem.

use std::{
    collections::BTreeSet,
    fmt,
    path::{Path, PathBuf},
};

use muster_core::{
    config::MusterConfig,
    crd::{DefinitionResult, FieldWarning, MCPServer, ValidationErrors, Workflow, deprecated_spellings},
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{CONFIG_FILE, MCPSERVERS_DIR, WORKFLOWS_DIR, relative_path};

/// The most bytes a definition file may have; a larger one is refused, not read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// A file that was left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadProblem {
    /// The file.
    pub file: PathBuf,
    /// The field at fault (`spec.timeout`), when the problem is one field's.
    pub field: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl LoadProblem {
    /// The problem as an answer may show it: the file named relative to the config directory
    /// `dir` ([`relative_path`]).
    pub fn relative_to(&self, dir: &Path) -> String {
        let file = relative_path(dir, &self.file);
        match &self.field {
            Some(field) => format!("{file}: {field}: {}", self.reason),
            None => format!("{file}: {}", self.reason),
        }
    }
}

impl fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}: {field}: {}", self.file.display(), self.reason),
            None => write!(f, "{}: {}", self.file.display(), self.reason),
        }
    }
}

/// A field of a definition file that was dropped: the definition loaded without it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadWarning {
    /// The file.
    pub file: PathBuf,
    /// Kind of the definition: `MCPServer` or `Workflow`.
    pub kind: &'static str,
    /// Name of the definition.
    pub name: String,
    /// The field and why it was dropped.
    pub warning: FieldWarning,
}

impl LoadWarning {
    /// The warning as an answer may show it: the file named relative to the config directory
    /// `dir` ([`relative_path`]).
    pub fn relative_to(&self, dir: &Path) -> String {
        format!("{}: {}", relative_path(dir, &self.file), self.warning)
    }
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.warning)
    }
}

/// What a config directory holds.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct LoadedConfig {
    /// The directory.
    pub path: PathBuf,
    /// `config.yaml`, or the defaults.
    pub config: MusterConfig,
    /// The valid MCPServers, by file name order.
    pub servers: Vec<MCPServer>,
    /// The valid Workflows, by file name order.
    pub workflows: Vec<Workflow>,
    /// The files left out.
    pub problems: Vec<LoadProblem>,
    /// The fields dropped from the definitions that loaded (already logged).
    pub warnings: Vec<LoadWarning>,
    /// The file of each valid MCPServer, by file.
    pub server_files: std::collections::BTreeMap<PathBuf, String>,
    /// The file of each valid Workflow, by file.
    pub workflow_files: std::collections::BTreeMap<PathBuf, String>,
}

/// Loads the config directory at `path`. A missing directory loads as empty (defaults).
pub fn load(path: &Path) -> std::io::Result<LoadedConfig> {
    let mut loaded = LoadedConfig {
        path: path.to_owned(),
        ..LoadedConfig::default()
    };
    let config_file = path.join(CONFIG_FILE);
    if config_file.exists() {
        match read_document::<MusterConfig>(&config_file) {
            Ok((config, raw)) => {
                for key in muster_core::config::unknown_keys(&raw) {
                    tracing::warn!(file = %config_file.display(), key = %key, "unknown configuration key ignored");
                }
                match config.validate_config() {
                    Ok(()) => loaded.config = config,
                    Err(errors) => loaded.problems.extend(validation_problems(&config_file, &errors)),
                }
            }
            Err(problem) => loaded.problems.push(problem),
        }
    }

    let mut names = BTreeSet::new();
    for file in yaml_files(&path.join(MCPSERVERS_DIR))? {
        match read_resource(&file, MCPServer::KIND, MCPServer::from_document, MCPServer::validate) {
            Ok((server, _)) if !names.insert(server.metadata.name.clone()) => loaded.problems.push(LoadProblem {
                file,
                field: Some("metadata.name".into()),
                reason: format!("an MCPServer named {:?} is already defined", server.metadata.name),
            }),
            Ok((server, warnings)) => {
                loaded
                    .warnings
                    .extend(load_warnings(&file, MCPServer::KIND, &server.metadata.name, warnings));
                loaded.server_files.insert(file, server.metadata.name.clone());
                loaded.servers.push(server);
            }
            Err(problems) => loaded.problems.extend(problems),
        }
    }
    let mut names = BTreeSet::new();
    for file in yaml_files(&path.join(WORKFLOWS_DIR))? {
        match read_resource(&file, Workflow::KIND, Workflow::from_document, compiles) {
            Ok((workflow, _)) if !names.insert(workflow.metadata.name.clone()) => loaded.problems.push(LoadProblem {
                file,
                field: Some("metadata.name".into()),
                reason: format!("a Workflow named {:?} is already defined", workflow.metadata.name),
            }),
            Ok((workflow, warnings)) => {
                loaded
                    .warnings
                    .extend(load_warnings(&file, Workflow::KIND, &workflow.metadata.name, warnings));
                loaded.workflow_files.insert(file, workflow.metadata.name.clone());
                loaded.workflows.push(workflow);
            }
            Err(problems) => loaded.problems.extend(problems),
        }
    }
    Ok(loaded)
}

/// The `.yaml` and `.yml` files of `dir`, sorted; none when `dir` does not exist.
pub(super) fn yaml_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

/// A workflow file is valid when the workflow compiles: the CRD rules, its templates and its
/// jq programs.
fn compiles(workflow: &Workflow) -> Result<(), ValidationErrors> {
    muster_workflow::engine::CompiledWorkflow::compile(workflow.clone()).map(|_| ())
}

/// Logs each dropped field of definition `kind`/`name` read from `file`.
fn load_warnings(file: &Path, kind: &'static str, name: &str, warnings: Vec<FieldWarning>) -> Vec<LoadWarning> {
    warnings
        .into_iter()
        .map(|warning| {
            tracing::warn!(file = %file.display(), kind, name, field = %warning.path, "{warning}");
            LoadWarning {
                file: file.to_owned(),
                kind,
                name: name.to_owned(),
                warning,
            }
        })
        .collect()
}

/// Parses a definition document with its dropped fields.
type Parse<T> = fn(&Value) -> DefinitionResult<T>;

fn read_resource<T>(
    file: &Path,
    kind: &str,
    parse: Parse<T>,
    validate: fn(&T) -> Result<(), ValidationErrors>,
) -> Result<(T, Vec<FieldWarning>), Vec<LoadProblem>> {
    let mut raw = read_yaml(file).map_err(|p| vec![p])?;
    // `status` is observed state that muster writes, not a definition: a stale or foreign one
    // (Go muster wrote lowercase service states there) must not keep the definition out.
    if let Some(object) = raw.as_object_mut() {
        object.remove("status");
    }
    let found_kind = raw.get("kind").and_then(Value::as_str).unwrap_or_default();
    if found_kind != kind {
        return Err(vec![LoadProblem {
            file: file.to_owned(),
            field: Some("kind".into()),
            reason: format!("expected kind {kind}, found {found_kind:?}"),
        }]);
    }
    let (resource, warnings) = parse(&raw).map_err(|e| {
        vec![LoadProblem {
            file: file.to_owned(),
            field: e.path,
            reason: e.message,
        }]
    })?;
    for deprecated in deprecated_spellings(&raw) {
        tracing::warn!(
            file = %file.display(),
            field = %deprecated.path,
            replacement = deprecated.replacement,
            "deprecated spelling; still accepted"
        );
    }
    validate(&resource).map_err(|errors| {
        // A field dropped from a definition left out may be why (`comand:` for `command:`).
        let dropped = warnings.iter().map(|w| LoadProblem {
            file: file.to_owned(),
            field: Some(w.path.clone()),
            reason: w.to_string(),
        });
        validation_problems(file, &errors)
            .into_iter()
            .chain(dropped)
            .collect::<Vec<_>>()
    })?;
    Ok((resource, warnings))
}

/// Parses one YAML document into `T`, keeping the raw document too.
fn read_document<T: DeserializeOwned>(file: &Path) -> Result<(T, Value), LoadProblem> {
    let raw = read_yaml(file)?;
    let typed = typed(file, &raw)?;
    Ok((typed, raw))
}

/// The text of `file`, or why not: files over [`MAX_FILE_BYTES`] are refused, and no more than
/// that is ever read (even from a file that grew after its size was looked at).
pub(crate) fn read_small_file(file: &Path) -> Result<String, String> {
    let too_large = |size: u64| format!("file is {size} bytes, more than the {MAX_FILE_BYTES} allowed");
    let size = std::fs::metadata(file).map_err(|e| e.to_string())?.len();
    if size > MAX_FILE_BYTES {
        return Err(too_large(size));
    }
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_FILE_BYTES + 1), &mut text))
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(text.len() as u64));
    }
    Ok(text)
}

/// Reads one YAML document (a mapping), refusing files over [`MAX_FILE_BYTES`].
fn read_yaml(file: &Path) -> Result<Value, LoadProblem> {
    let problem = |reason: String| LoadProblem {
        file: file.to_owned(),
        field: None,
        reason,
    };
    let text = read_small_file(file).map_err(problem)?;
    let raw: Value = serde_saphyr::from_str(&text).map_err(|e| problem(format!("invalid YAML: {e}")))?;
    if !raw.is_object() {
        return Err(problem("the document is not a mapping".into()));
    }
    Ok(raw)
}

/// Deserializes a raw document, naming the field at fault when it does not fit `T`.
fn typed<T: DeserializeOwned>(file: &Path, raw: &Value) -> Result<T, LoadProblem> {
    serde_path_to_error::deserialize(raw).map_err(|e| {
        let path = e.path().to_string();
        LoadProblem {
            file: file.to_owned(),
            field: (path != ".").then_some(path),
            reason: e.into_inner().to_string(),
        }
    })
}

fn validation_problems(file: &Path, errors: &ValidationErrors) -> Vec<LoadProblem> {
    errors
        .iter()
        .map(|e| LoadProblem {
            file: file.to_owned(),
            field: Some(e.path.clone()),
            reason: e.message.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
