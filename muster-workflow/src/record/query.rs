//! Listing records, and the answers of `core_workflow_execution_list` and
//! `core_workflow_execution_get`.

use chrono::{DateTime, Utc};
use muster_core::crd::{ExecutionStatus, WorkflowExecution};
use serde::Serialize;
use serde_json::{Map, Value};

use super::format::{RecordDoc, StepDoc};
use super::store::ExecutionStore;

/// Page size when `limit` is not given.
pub const DEFAULT_LIST_LIMIT: usize = 50;

/// The largest `limit` a listing accepts.
const MAX_LIST_LIMIT: i128 = 1000;

/// A status a listing can be filtered by, as `core_workflow_execution_list` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StatusFilter {
    /// `running` (stored as `inprogress`).
    Running,
    /// `completed`.
    Completed,
    /// `failed`.
    Failed,
    /// `cancelled`: accepted for compatibility; no record has this status, so it matches none.
    Cancelled,
}

impl StatusFilter {
    /// Parses `running` (or `inprogress`), `completed`, `failed` or `cancelled`.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "running" | "inprogress" => Some(Self::Running),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }

    /// Whether a record with `status` passes the filter.
    pub fn matches(self, status: ExecutionStatus) -> bool {
        match self {
            Self::Running => status == ExecutionStatus::InProgress,
            Self::Completed => status == ExecutionStatus::Completed,
            Self::Failed => status == ExecutionStatus::Failed,
            Self::Cancelled => false,
        }
    }
}

/// Filters and paging of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecutionQuery {
    /// Only records of this workflow.
    pub workflow_name: Option<String>,
    /// Only records with this status.
    pub status: Option<StatusFilter>,
    /// Most records in the page.
    pub limit: usize,
    /// Records skipped before the page (newest first).
    pub offset: usize,
}

impl Default for ExecutionQuery {
    fn default() -> Self {
        Self {
            workflow_name: None,
            status: None,
            limit: DEFAULT_LIST_LIMIT,
            offset: 0,
        }
    }
}

impl ExecutionQuery {
    /// Only records of `workflow_name`.
    pub fn with_workflow_name(mut self, workflow_name: impl Into<String>) -> Self {
        self.workflow_name = Some(workflow_name.into());
        self
    }

    /// Only records with `status`.
    pub fn with_status(mut self, status: StatusFilter) -> Self {
        self.status = Some(status);
        self
    }

    /// At most `limit` records, after skipping `offset`.
    pub fn with_page(mut self, limit: usize, offset: usize) -> Self {
        self.limit = limit;
        self.offset = offset;
        self
    }

    /// The query of a `core_workflow_execution_list` call: `workflow_name` (`""` means no
    /// filter), `status` (`inprogress`, `completed` or `failed`; `running` and `cancelled` are
    /// accepted too), `limit` (default 50, 1 to 1000) and `offset` (default 0).
    /// A bad value is an error naming the argument, worded as Go muster words it.
    pub fn from_args(args: &Map<String, Value>) -> Result<Self, String> {
        let mut query = Self::default();
        if let Some(value) = present(args, "workflow_name") {
            let name = value.as_str().ok_or("workflow_name must be a string")?;
            if !name.is_empty() {
                query.workflow_name = Some(name.to_owned());
            }
        }
        if let Some(value) = present(args, "status") {
            let bad_status = || "status must be one of the enum values: inprogress, completed, failed".to_owned();
            let text = value.as_str().ok_or_else(bad_status)?;
            query.status = Some(StatusFilter::parse(text).ok_or_else(bad_status)?);
        }
        if let Some(value) = present(args, "limit") {
            let limit = integer(value, "limit")?;
            if limit < 1 {
                return Err("limit must be at least 1 (minimum value)".to_owned());
            }
            if limit > MAX_LIST_LIMIT {
                return Err(format!("limit must be at most {MAX_LIST_LIMIT} (maximum value)"));
            }
            query.limit = usize::try_from(limit).expect("a limit within 1..=MAX_LIST_LIMIT fits usize");
        }
        if let Some(value) = present(args, "offset") {
            let offset = integer(value, "offset")?;
            if offset < 0 {
                return Err("offset must be at least 0 (minimum value)".to_owned());
            }
            // An offset past every record is an empty page, however large it is.
            query.offset = usize::try_from(offset).unwrap_or(usize::MAX);
        }
        Ok(query)
    }

    /// Whether `summary` passes the filters.
    pub fn matches(&self, summary: &ExecutionSummary) -> bool {
        self.workflow_name
            .as_deref()
            .is_none_or(|name| summary.workflow_name == name)
            && self.status.is_none_or(|s| s.matches(summary.status))
    }
}

fn present<'a>(args: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    args.get(key).filter(|v| !v.is_null())
}

/// The integer `value` holds, or an error naming `name`. Clients built on JavaScript send
/// `10.0` for 10, so whole floats count; a float too big for `i128` saturates, which the
/// callers' range checks then refuse or clamp.
fn integer(value: &Value, name: &str) -> Result<i128, String> {
    if let Some(n) = value.as_i64() {
        return Ok(i128::from(n));
    }
    if let Some(n) = value.as_u64() {
        return Ok(i128::from(n));
    }
    match value.as_f64() {
        Some(f) if f.is_finite() && f.fract() == 0.0 => Ok(f as i128),
        _ => Err(format!("{name} must be an integer")),
    }
}

/// What a listing shows of one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExecutionSummary {
    /// The execution UUID.
    pub execution_id: String,
    /// The workflow that ran.
    pub workflow_name: String,
    /// Status of the run.
    pub status: ExecutionStatus,
    /// When the run began.
    pub started_at: DateTime<Utc>,
    /// When the run finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
    /// Duration in milliseconds.
    pub duration_ms: i64,
    /// How many steps ran.
    pub step_count: usize,
    /// Error of a failed run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ExecutionSummary {
    /// The summary of `execution`.
    pub fn of(execution: &WorkflowExecution) -> Self {
        let spec = &execution.spec;
        Self {
            execution_id: execution.metadata.name.clone(),
            workflow_name: spec.workflow_name.clone(),
            status: spec.status,
            started_at: spec.started_at,
            completed_at: spec.completed_at,
            duration_ms: spec.duration_ms,
            step_count: spec.steps.len(),
            error: spec.error.clone(),
        }
    }
}

/// One page of a listing; serializes as the `core_workflow_execution_list` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExecutionPage {
    /// The records of the page, newest first.
    pub executions: Vec<ExecutionSummary>,
    /// How many records pass the filters, over all pages.
    pub total: usize,
    /// The page size asked for.
    pub limit: usize,
    /// The records skipped.
    pub offset: usize,
    /// Whether records follow this page.
    pub has_more: bool,
}

impl ExecutionPage {
    /// The page `query` selects from `summaries` (any order): filtered, sorted newest first
    /// (ties by id), then `offset`/`limit` applied.
    pub fn select<'a>(summaries: impl IntoIterator<Item = &'a ExecutionSummary>, query: &ExecutionQuery) -> Self {
        let mut matching: Vec<&ExecutionSummary> = summaries.into_iter().filter(|s| query.matches(s)).collect();
        matching.sort_by(|a, b| newest_first(a, b));
        let total = matching.len();
        let executions: Vec<ExecutionSummary> = matching
            .into_iter()
            .skip(query.offset)
            .take(query.limit)
            .cloned()
            .collect();
        let has_more = query.offset.saturating_add(executions.len()) < total;
        Self {
            executions,
            total,
            limit: query.limit,
            offset: query.offset,
            has_more,
        }
    }
}

/// Orders summaries newest `started_at` first, ties by execution id.
pub(crate) fn newest_first(a: &ExecutionSummary, b: &ExecutionSummary) -> std::cmp::Ordering {
    b.started_at
        .cmp(&a.started_at)
        .then_with(|| a.execution_id.cmp(&b.execution_id))
}

/// The answer of `core_workflow_execution_list` for `args`.
pub fn execution_list_result(store: &dyn ExecutionStore, args: &Map<String, Value>) -> Result<Value, String> {
    let query = ExecutionQuery::from_args(args)?;
    let page = store
        .list(&query)
        .map_err(|e| format!("failed to list workflow executions: {e}"))?;
    serde_json::to_value(page).map_err(|e| format!("failed to encode workflow executions: {e}"))
}

/// The answer of `core_workflow_execution_get` for `args`: the record (Go JSON shape,
/// snake_case keys) with its steps, or only the step named by `step_id`. Every step carries an
/// `input` (`{}` when none was recorded). With `include_steps: false` the steps are left out,
/// and so are the `steps` and `template_vars` keys of an object `result` (the default workflow
/// answer embeds them), as Go muster's `filterStepDataFromResult` does. An unknown execution or
/// step is an error naming it.
pub fn execution_get_result(store: &dyn ExecutionStore, args: &Map<String, Value>) -> Result<Value, String> {
    let execution_id = match present(args, "execution_id") {
        None => return Err("execution_id is required".to_owned()),
        Some(Value::String(id)) if id.trim().is_empty() => return Err("execution_id must not be empty".to_owned()),
        Some(Value::String(id)) => id.clone(),
        Some(_) => return Err("execution_id must be a string".to_owned()),
    };
    let include_steps = match present(args, "include_steps") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("include_steps must be a boolean".to_owned()),
    };
    // Unlike the other arguments, an explicit null or empty step_id is refused, as Go muster does.
    let step_id = match args.get("step_id") {
        None => None,
        Some(Value::Null) => return Err("step_id cannot be null".to_owned()),
        Some(Value::String(s)) if s.is_empty() => return Err("step_id is invalid: cannot be empty".to_owned()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("step_id must be a string".to_owned()),
    };
    let execution = store
        .get(&execution_id)
        .map_err(|e| format!("failed to read workflow execution '{execution_id}': {e}"))?
        .ok_or_else(|| format!("workflow execution '{execution_id}' not found"))?;
    let encode = |e: serde_json::Error| format!("failed to encode workflow execution '{execution_id}': {e}");
    if let Some(step_id) = step_id {
        let step = execution
            .spec
            .steps
            .iter()
            .find(|s| s.step_id == step_id)
            .ok_or_else(|| format!("step '{step_id}' not found in execution '{execution_id}'"))?;
        return serde_json::to_value(answer_step(StepDoc::from_step(step))).map_err(encode);
    }
    let mut doc = RecordDoc::from_execution(&execution);
    if include_steps {
        doc.steps = doc.steps.map(|steps| steps.into_iter().map(answer_step).collect());
    } else {
        doc.steps = None;
        if let Some(Value::Object(result)) = &mut doc.result {
            result.remove("steps");
            result.remove("template_vars");
        }
    }
    serde_json::to_value(doc).map_err(encode)
}

/// `step` as a `get` answer shows it: with an `input`, `{}` when none was recorded (Go muster
/// always writes one).
fn answer_step(mut step: StepDoc) -> StepDoc {
    if step.input.is_none() {
        step.input = Some(Value::Object(Map::new()));
    }
    step
}
