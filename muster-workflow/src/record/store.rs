//! [`ExecutionStore`] and its two implementations.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, TimeDelta, Utc};
use muster_core::crd::{ExecutionStatus, WorkflowExecution};
use muster_core::fs::TEMP_MARKER;

use super::format::{RecordDoc, parse_record, relabel};
use super::guard::guard_payload;
use super::query::{ExecutionPage, ExecutionQuery, ExecutionSummary, newest_first};

/// Records whose run began longer ago than this many days are pruned.
pub const RETENTION_MAX_AGE_DAYS: i64 = 21;
/// At most this many records (the newest by `startedAt`) survive a prune.
pub const RETENTION_MAX_COUNT: usize = 10_000;
/// How often the gateway should call [`ExecutionStore::prune`].
pub const RETENTION_GC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60 * 60);
/// Error recorded on a run found in progress when the store opened.
pub const INTERRUPTED_ERROR: &str = "execution interrupted: the gateway stopped before it finished";
/// Folder of the records, under the configuration directory.
pub const EXECUTIONS_DIR: &str = "workflow_executions";

/// Errors of an [`ExecutionStore`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The record has no execution id (`metadata.name`).
    #[error("a workflow execution record needs an execution id")]
    MissingId,
    /// A file operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done, e.g. `cannot write`.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A record could not be encoded or decoded.
    #[error("workflow execution '{id}' is not valid JSON: {source}")]
    Json {
        /// The execution id.
        id: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// Result alias of this module.
pub type Result<T, E = RecordError> = std::result::Result<T, E>;

/// Where workflow execution records live.
///
/// The methods are synchronous. [`FsExecutionStore`] does blocking file I/O (with `fsync`), so
/// async callers hold the store in an `Arc<dyn ExecutionStore>` and call it inside
/// `tokio::task::spawn_blocking`; [`MemoryExecutionStore`] never blocks for long.
pub trait ExecutionStore: Send + Sync + std::fmt::Debug {
    /// Creates or replaces the record named by `execution.metadata.name`, atomically. The
    /// stored copy goes through the [payload guard](super::guard_payload); `execution` itself
    /// is not changed.
    fn put(&self, execution: &WorkflowExecution) -> Result<()>;

    /// The record of `execution_id`, if any.
    fn get(&self, execution_id: &str) -> Result<Option<WorkflowExecution>>;

    /// The page of summaries `query` selects, newest first.
    fn list(&self, query: &ExecutionQuery) -> Result<ExecutionPage>;

    /// Removes the record of `execution_id`; whether there was one.
    fn delete(&self, execution_id: &str) -> Result<bool>;

    /// Applies retention at `now`: removes records that began more than
    /// [`RETENTION_MAX_AGE_DAYS`] ago and all but the newest [`RETENTION_MAX_COUNT`]; how many
    /// were removed.
    fn prune(&self, now: DateTime<Utc>) -> Result<usize>;

    /// Marks every record still `inprogress` as failed with [`INTERRUPTED_ERROR`] (completed at
    /// `now`, duration set), since no run survives a gateway restart; the ids marked. Call it
    /// once after opening, before any run starts.
    fn recover_interrupted(&self, now: DateTime<Utc>) -> Result<Vec<String>>;
}

/// The ids retention removes from `summaries` at `now`: begun more than
/// [`RETENTION_MAX_AGE_DAYS`] ago, or past the newest [`RETENTION_MAX_COUNT`] (newest by
/// `startedAt`, ties by id). For a store of another backend's [`ExecutionStore::prune`].
pub fn expired<'a>(summaries: impl IntoIterator<Item = &'a ExecutionSummary>, now: DateTime<Utc>) -> Vec<String> {
    let cutoff = now - TimeDelta::days(RETENTION_MAX_AGE_DAYS);
    let mut all: Vec<&ExecutionSummary> = summaries.into_iter().collect();
    all.sort_by(|a, b| newest_first(a, b));
    all.into_iter()
        .enumerate()
        .filter(|(rank, s)| *rank >= RETENTION_MAX_COUNT || s.started_at < cutoff)
        .map(|(_, s)| s.execution_id.clone())
        .collect()
}

/// `execution` as failed by interruption at `now` ([`INTERRUPTED_ERROR`], the steps still in
/// progress too), relabelled. For a store of another backend's
/// [`ExecutionStore::recover_interrupted`].
pub fn interrupted(mut execution: WorkflowExecution, now: DateTime<Utc>) -> WorkflowExecution {
    let spec = &mut execution.spec;
    spec.status = ExecutionStatus::Failed;
    spec.error = Some(INTERRUPTED_ERROR.to_owned());
    spec.result = None;
    spec.completed_at = Some(now);
    spec.duration_ms = (now - spec.started_at).num_milliseconds().max(0);
    for step in &mut spec.steps {
        if step.status == ExecutionStatus::InProgress {
            step.status = ExecutionStatus::Failed;
            step.error = Some(INTERRUPTED_ERROR.to_owned());
            step.completed_at = Some(now);
            step.duration_ms = (now - step.started_at).num_milliseconds().max(0);
        }
    }
    relabel(execution)
}

fn check_id(execution: &WorkflowExecution) -> Result<()> {
    if execution.metadata.name.trim().is_empty() {
        return Err(RecordError::MissingId);
    }
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Records in memory: for embedding and tests. Same semantics as [`FsExecutionStore`],
/// including the payload guard; nothing survives the process.
#[derive(Debug, Default)]
pub struct MemoryExecutionStore {
    /// Keyed by sanitized id, like the files of [`FsExecutionStore`].
    records: Mutex<HashMap<String, WorkflowExecution>>,
}

impl MemoryExecutionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl ExecutionStore for MemoryExecutionStore {
    fn put(&self, execution: &WorkflowExecution) -> Result<()> {
        check_id(execution)?;
        let stored = relabel(guard_payload(execution).into_owned());
        lock(&self.records).insert(sanitize_id(&stored.metadata.name), stored);
        Ok(())
    }

    fn get(&self, execution_id: &str) -> Result<Option<WorkflowExecution>> {
        Ok(lock(&self.records)
            .get(&sanitize_id(execution_id))
            .filter(|e| e.metadata.name == execution_id)
            .cloned())
    }

    fn list(&self, query: &ExecutionQuery) -> Result<ExecutionPage> {
        let records = lock(&self.records);
        let summaries: Vec<ExecutionSummary> = records.values().map(ExecutionSummary::of).collect();
        Ok(ExecutionPage::select(&summaries, query))
    }

    fn delete(&self, execution_id: &str) -> Result<bool> {
        let mut records = lock(&self.records);
        let key = sanitize_id(execution_id);
        if records.get(&key).is_none_or(|e| e.metadata.name != execution_id) {
            return Ok(false);
        }
        records.remove(&key);
        Ok(true)
    }

    fn prune(&self, now: DateTime<Utc>) -> Result<usize> {
        let mut records = lock(&self.records);
        let summaries: Vec<ExecutionSummary> = records.values().map(ExecutionSummary::of).collect();
        let doomed = expired(&summaries, now);
        for id in &doomed {
            records.remove(&sanitize_id(id));
        }
        Ok(doomed.len())
    }

    fn recover_interrupted(&self, now: DateTime<Utc>) -> Result<Vec<String>> {
        let mut records = lock(&self.records);
        let mut ids: Vec<String> = records
            .values()
            .filter(|e| e.spec.status == ExecutionStatus::InProgress)
            .map(|e| e.metadata.name.clone())
            .collect();
        ids.sort();
        for id in &ids {
            let key = sanitize_id(id);
            if let Some(execution) = records.remove(&key) {
                records.insert(key, interrupted(execution, now));
            }
        }
        Ok(ids)
    }
}

/// Records as files: `<config_dir>/workflow_executions/<sanitized-id>.yaml`, each holding the
/// indented Go-shape JSON of one record (JSON is valid YAML; the layout and content are Go
/// muster's, so either implementation reads the other's folder).
///
/// Writes are atomic (temporary file in the same folder, synced, renamed, folder synced).
/// Listing, pruning and recovery use a summary index loaded at [`open`](Self::open); `get`
/// reads the file. The store assumes it is the only writer of its folder.
#[derive(Debug)]
pub struct FsExecutionStore {
    dir: PathBuf,
    /// Summaries keyed by file stem (the sanitized id), so ids that sanitize alike share one
    /// entry just as they share one file.
    index: Mutex<HashMap<String, ExecutionSummary>>,
}

impl FsExecutionStore {
    /// Opens (creating if needed) the records folder under `config_dir`, removes temporary
    /// files a crash left behind, and indexes every record. A file that does not parse is
    /// logged and skipped.
    pub fn open(config_dir: impl AsRef<Path>) -> Result<Self> {
        let dir = config_dir.as_ref().join(EXECUTIONS_DIR);
        std::fs::create_dir_all(&dir).map_err(io_error("cannot create", &dir))?;
        let mut index = HashMap::new();
        let entries = std::fs::read_dir(&dir).map_err(io_error("cannot read", &dir))?;
        for entry in entries {
            let entry = entry.map_err(io_error("cannot read", &dir))?;
            let path = entry.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if is_temp_file(name) {
                if let Err(error) = std::fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), %error, "cannot remove a leftover temporary execution file");
                }
                continue;
            }
            if !name.ends_with(".yaml") || !path.is_file() {
                continue;
            }
            match read_record(&path) {
                Ok(execution) => {
                    let stem = sanitize_id(&execution.metadata.name);
                    if name.strip_suffix(".yaml") != Some(stem.as_str()) {
                        tracing::warn!(path = %path.display(), execution_id = %execution.metadata.name, "skipping a workflow execution record whose file name does not match its id");
                        continue;
                    }
                    index.insert(stem, ExecutionSummary::of(&execution));
                }
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "skipping an unreadable workflow execution record");
                }
            }
        }
        Ok(Self {
            dir,
            index: Mutex::new(index),
        })
    }

    /// The records folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `execution_id`.
    pub fn path_of(&self, execution_id: &str) -> PathBuf {
        self.dir.join(format!("{}.yaml", sanitize_id(execution_id)))
    }

    fn write(&self, execution: &WorkflowExecution) -> Result<()> {
        let id = &execution.metadata.name;
        let json = serde_json::to_vec_pretty(&RecordDoc::from_execution(execution))
            .map_err(|source| RecordError::Json { id: id.clone(), source })?;
        write_atomic(&self.path_of(id), &json)
    }
}

impl ExecutionStore for FsExecutionStore {
    fn put(&self, execution: &WorkflowExecution) -> Result<()> {
        check_id(execution)?;
        let stored = guard_payload(execution);
        let mut index = lock(&self.index);
        self.write(&stored)?;
        index.insert(sanitize_id(&stored.metadata.name), ExecutionSummary::of(&stored));
        Ok(())
    }

    fn get(&self, execution_id: &str) -> Result<Option<WorkflowExecution>> {
        if execution_id.trim().is_empty() {
            return Ok(None);
        }
        let path = self.path_of(execution_id);
        match read_record(&path) {
            // Distinct ids can sanitize to one file name; only the named record counts.
            Ok(execution) if execution.metadata.name == execution_id => Ok(Some(execution)),
            Ok(_) => Ok(None),
            Err(RecordError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn list(&self, query: &ExecutionQuery) -> Result<ExecutionPage> {
        Ok(ExecutionPage::select(lock(&self.index).values(), query))
    }

    fn delete(&self, execution_id: &str) -> Result<bool> {
        let mut index = lock(&self.index);
        let stem = sanitize_id(execution_id);
        // The file of an id that merely sanitizes alike belongs to another record.
        if index.get(&stem).is_none_or(|s| s.execution_id != execution_id) {
            return Ok(false);
        }
        let path = self.path_of(execution_id);
        match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(&self.dir)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(RecordError::Io {
                    action: "cannot remove",
                    path,
                    source,
                });
            }
        }
        index.remove(&stem);
        Ok(true)
    }

    fn prune(&self, now: DateTime<Utc>) -> Result<usize> {
        let mut index = lock(&self.index);
        let doomed = expired(index.values(), now);
        let mut removed = 0;
        for id in &doomed {
            let path = self.path_of(id);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    // Keep it indexed; the next prune tries again.
                    tracing::warn!(path = %path.display(), %error, "cannot remove an expired workflow execution record");
                    continue;
                }
            }
            index.remove(&sanitize_id(id));
            removed += 1;
        }
        if removed > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(removed)
    }

    fn recover_interrupted(&self, now: DateTime<Utc>) -> Result<Vec<String>> {
        let mut index = lock(&self.index);
        let mut ids: Vec<String> = index
            .values()
            .filter(|s| s.status == ExecutionStatus::InProgress)
            .map(|s| s.execution_id.clone())
            .collect();
        ids.sort();
        let mut marked = Vec::with_capacity(ids.len());
        for id in ids {
            let execution = match read_record(&self.path_of(&id)) {
                Ok(execution) => execution,
                Err(error) => {
                    // Gone or damaged since open: nothing left to mark; stop listing it.
                    tracing::warn!(execution_id = %id, %error, "cannot read an interrupted workflow execution record");
                    index.remove(&sanitize_id(&id));
                    continue;
                }
            };
            let failed = interrupted(execution, now);
            self.write(&failed)?;
            index.insert(sanitize_id(&id), ExecutionSummary::of(&failed));
            marked.push(id);
        }
        Ok(marked)
    }
}

/// The file name stem of `execution_id`: each of `/ \ : * ? " < > | .` replaced by `_`
/// (Go's sanitising), so no id can leave the folder.
pub fn sanitize_id(execution_id: &str) -> String {
    execution_id
        .chars()
        .map(|c| match c {
            '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|' | '.' => '_',
            other => other,
        })
        .collect()
}

fn is_temp_file(name: &str) -> bool {
    name.starts_with('.') && name.contains(TEMP_MARKER)
}

fn read_record(path: &Path) -> Result<WorkflowExecution> {
    let bytes = std::fs::read(path).map_err(io_error("cannot read", path))?;
    parse_record(&bytes).map_err(|source| RecordError::Json {
        id: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        source,
    })
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> RecordError {
    let path = path.to_owned();
    move |source| RecordError::Io { action, path, source }
}

fn write_atomic(target: &Path, contents: &[u8]) -> Result<()> {
    muster_core::fs::write_atomic(target, contents).map_err(RecordError::from)
}

fn sync_dir(folder: &Path) -> Result<()> {
    muster_core::fs::sync_dir(folder).map_err(RecordError::from)
}
