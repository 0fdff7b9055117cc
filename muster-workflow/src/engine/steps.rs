//! Running one step: its condition, then a tool call (with pages), a loop or a group, then
//! `jq`; the result is stored under the step's id and the step is recorded.

use std::{collections::HashMap, time::Instant};

use chrono::Utc;
use futures::{StreamExt, future::BoxFuture};
use muster_core::crd::{ExecutionStatus, WorkflowExecutionStep, WorkflowPaginate};
use serde_json::{Map, Value, json};

use super::{
    RunEventKind,
    plan::{Body, ForEachPlan, StepPlan, ToolPlan},
    response::{StepMeta, StepStatus, failure_value},
    run::{Run, Trail},
};
use crate::template::{Context, path, resolve_path};

/// How a step ended, and what it stored.
#[derive(Debug)]
pub(crate) struct StepOutcome {
    pub(crate) status: StepStatus,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<String>,
    /// The per-iteration result keys a loop added (`<id>_<index>`, `<id>_<outer>_<inner>`).
    pub(crate) keys: Vec<String>,
}

/// Where a sub-step runs inside a loop: its iteration, and the outer one for a nested loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Iteration {
    index: usize,
    outer: Option<usize>,
}

impl Iteration {
    /// The per-iteration key of `id`: `<id>_<index>`, or `<id>_<outer>_<inner>` when nested.
    fn key(self, id: &str) -> String {
        match self.outer {
            None => format!("{id}_{}", self.index),
            Some(outer) => format!("{id}_{outer}_{}", self.index),
        }
    }
}

/// One iteration's record and the per-iteration keys it added to the scope.
struct IterationOutcome {
    record: Value,
    keys: Vec<(String, String)>,
    /// A sub-step that does not allow failure failed: the loop stops unless the loop step
    /// allows failure.
    fatal: Option<String>,
}

impl Run<'_> {
    /// Runs `plan` in `scope`, storing its result there and recording it in `trail`.
    pub(crate) fn step<'s>(
        &'s self,
        plan: &'s StepPlan,
        scope: &'s mut Context,
        trail: &'s mut Trail,
        at: Option<Iteration>,
    ) -> BoxFuture<'s, StepOutcome> {
        Box::pin(async move {
            let tool = plan.tool();
            let mut condition = None;
            if let Some(guard) = &plan.condition {
                let label = guard.source.label();
                match self.evaluate(guard, scope).await {
                    Ok(passed) => {
                        let mut event = self.event(RunEventKind::ConditionEvaluated);
                        event.step_id = Some(&plan.id);
                        event.tool = Some(&label);
                        event.passed = Some(passed);
                        self.notify(&event);
                        if !passed {
                            let mut event = self.event(RunEventKind::StepSkipped);
                            event.step_id = Some(&plan.id);
                            event.tool = tool;
                            self.notify(&event);
                            trail
                                .metas
                                .push(meta(plan, StepStatus::Skipped, Some((label, false)), None, None));
                            return StepOutcome {
                                status: StepStatus::Skipped,
                                result: None,
                                error: None,
                                keys: Vec::new(),
                            };
                        }
                        condition = Some((label, true));
                    }
                    Err(error) => {
                        return self.fail_early(plan, scope, trail, at, Some((label, false)), error);
                    }
                }
            }

            let mut event = self.event(RunEventKind::StepStarted);
            event.step_id = Some(&plan.id);
            event.tool = tool;
            self.notify(&event);
            let started_at = Utc::now();
            let clock = Instant::now();
            // A loop or group is shown by its sub-steps' entries; it gets its own entry only
            // when it fails as a whole.
            let container = !matches!(plan.body, Body::Tool(_));
            let meta_at = trail.metas.len();
            if !container {
                trail
                    .metas
                    .push(meta(plan, StepStatus::InProgress, condition.clone(), None, None));
            }
            let record_at = trail.records.len();
            trail.records.push(record(plan, at, started_at));

            let mut input = None;
            let mut keys = Vec::new();
            let produced = match &plan.body {
                Body::Tool(call) => self.tool_step(call, scope, &mut input).await,
                Body::ForEach(each) => self.for_each(plan, each, scope, trail, at, &mut keys).await,
                Body::Parallel(group) => self.parallel(group, scope, trail).await,
            };
            let produced = produced.and_then(|value| match &plan.jq {
                Some(program) => program
                    .run(&value, &self.input, &scope.vars())
                    .map_err(|e| e.to_string()),
                None => Ok(value),
            });
            let (status, result, error) = match produced {
                Ok(value) => (StepStatus::Completed, value, None),
                Err(error) => (StepStatus::Failed, failure_value(&error), Some(error)),
            };
            scope.insert_result(&plan.id, &result);

            let duration_ms = i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX);
            if let Some(entry) = trail.records.get_mut(record_at) {
                entry.status = if status == StepStatus::Failed {
                    ExecutionStatus::Failed
                } else {
                    ExecutionStatus::Completed
                };
                entry.completed_at = Some(Utc::now());
                entry.duration_ms = duration_ms;
                entry.input = Some(input.unwrap_or_else(|| Value::Object(Map::new())));
                entry.error = error.clone();
                // Inside a loop the result lives in the loop's records; keep it once, and only
                // when the run is recorded.
                if at.is_none() && self.recorded {
                    entry.result = Some(result.clone());
                }
            }
            if !container {
                if let Some(entry) = trail.metas.get_mut(meta_at) {
                    entry.status = status;
                    // Only a result the response shows is kept for it.
                    if plan.output || self.debug {
                        entry.result = Some(result.clone());
                    }
                    entry.error = error.clone();
                }
            } else if status == StepStatus::Failed {
                trail
                    .metas
                    .push(meta(plan, status, condition, Some(result.clone()), error.clone()));
            }
            let mut event = self.event(if status == StepStatus::Failed {
                RunEventKind::StepFailed
            } else {
                RunEventKind::StepCompleted
            });
            event.step_id = Some(&plan.id);
            event.tool = tool;
            event.error = error.as_deref();
            event.duration_ms = Some(duration_ms);
            self.notify(&event);
            StepOutcome {
                status,
                result: Some(result),
                error,
                keys,
            }
        })
    }

    /// A step that failed before it started (its condition could not be evaluated).
    fn fail_early(
        &self,
        plan: &StepPlan,
        scope: &mut Context,
        trail: &mut Trail,
        at: Option<Iteration>,
        condition: Option<(String, bool)>,
        error: String,
    ) -> StepOutcome {
        let result = failure_value(&error);
        scope.insert_result(&plan.id, &result);
        let mut entry = record(plan, at, Utc::now());
        entry.status = ExecutionStatus::Failed;
        entry.completed_at = Some(Utc::now());
        entry.error = Some(error.clone());
        entry.input = Some(Value::Object(Map::new()));
        trail.records.push(entry);
        trail.metas.push(meta(
            plan,
            StepStatus::Failed,
            condition,
            Some(result.clone()),
            Some(error.clone()),
        ));
        let mut event = self.event(RunEventKind::StepFailed);
        event.step_id = Some(&plan.id);
        event.tool = plan.tool();
        event.error = Some(&error);
        self.notify(&event);
        StepOutcome {
            status: StepStatus::Failed,
            result: Some(result),
            error: Some(error),
            keys: Vec::new(),
        }
    }

    async fn tool_step(&self, call: &ToolPlan, scope: &Context, input: &mut Option<Value>) -> Result<Value, String> {
        let args = call
            .args
            .render(scope)
            .map_err(|e| format!("failed to render arguments: {e}"))?;
        *input = Some(args.clone());
        match &call.paginate {
            None => self.call(&call.tool, args).await,
            Some(paginate) => self.paginate(&call.tool, args, paginate).await,
        }
    }

    /// Follows the tool's next-page token: the last page with every page's items, plus
    /// `pagination.pages` and `pagination.truncated`.
    async fn paginate(&self, tool: &str, args: Value, paginate: &WorkflowPaginate) -> Result<Value, String> {
        let mut args = match args {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let mut page = self.call(tool, Value::Object(args.clone())).await?;
        let mut items = page_items(&page, &paginate.items_field, 1)?;
        let mut pages = 1u32;
        let mut truncated = false;
        loop {
            let token = match resolve_path(&page, &paginate.token_field) {
                Ok(Value::String(s)) if !s.is_empty() => Value::String(s.clone()),
                Ok(n @ Value::Number(_)) => n.clone(),
                _ => break,
            };
            if pages >= paginate.max_pages {
                truncated = true;
                break;
            }
            if self.ctx.cancellation.is_cancelled() {
                return Err("execution cancelled by the caller".to_owned());
            }
            args.insert(paginate.token_arg.clone(), token);
            page = self.call(tool, Value::Object(args.clone())).await?;
            pages += 1;
            items.extend(page_items(&page, &paginate.items_field, pages)?);
        }
        set_path(&mut page, &paginate.items_field, Value::Array(items))?;
        if let Value::Object(map) = &mut page {
            map.insert("pagination".into(), json!({"pages": pages, "truncated": truncated}));
        }
        Ok(page)
    }

    /// Runs a loop: one record per iteration that ran, in item order. `produced` receives
    /// every per-iteration result key the loop added to `scope`.
    async fn for_each(
        &self,
        plan: &StepPlan,
        each: &ForEachPlan,
        scope: &mut Context,
        trail: &mut Trail,
        at: Option<Iteration>,
        produced: &mut Vec<String>,
    ) -> Result<Value, String> {
        let items = match each.items.render_value(scope).map_err(|e| e.to_string())? {
            Value::Array(items) => items,
            Value::Null => {
                return Err(format!("items expression {:?} resolved to nil", each.items.source()));
            }
            other => {
                return Err(format!(
                    "items expression {:?} resolved to {}, expected a list",
                    each.items.source(),
                    kind_of(&other)
                ));
            }
        };
        let outer = at.map(|a| a.index);
        let mut records = Vec::with_capacity(items.len());
        let mut last_ran: HashMap<&str, String> = HashMap::new();
        let mut stopped = None;
        let mut note = |outcome: IterationOutcome, records: &mut Vec<Value>| {
            produced.extend(outcome.keys.iter().map(|(_, key)| key.clone()));
            for (id, key) in &outcome.keys {
                if let Some(sub) = each.steps.iter().find(|s| &s.id == id) {
                    last_ran.insert(sub.id.as_str(), key.clone());
                }
            }
            records.push(outcome.record);
            outcome.fatal
        };

        if each.parallelism <= 1 {
            let saved = (scope.var(&each.var), scope.var(&each.index_var));
            for (index, item) in items.into_iter().enumerate() {
                if self.ctx.cancellation.is_cancelled() {
                    stopped = Some("execution cancelled by the caller".to_owned());
                    break;
                }
                let place = Iteration { index, outer };
                let outcome = self.iteration(each, scope, trail, place, item).await;
                if let Some(fatal) = note(outcome, &mut records)
                    && !plan.allow_failure
                {
                    stopped = Some(format!("iteration {index}: {fatal}"));
                    break;
                }
            }
            restore_var(scope, &each.var, saved.0);
            restore_var(scope, &each.index_var, saved.1);
        } else {
            let base = scope.clone();
            let runs = items.into_iter().enumerate().map(|(index, item)| {
                let mut ctx = base.clone();
                async move {
                    let mut local = Trail::default();
                    let place = Iteration { index, outer };
                    let outcome = self.iteration(each, &mut ctx, &mut local, place, item).await;
                    (outcome, ctx, local)
                }
            });
            let mut results = futures::stream::iter(runs).buffered(each.parallelism);
            while let Some((outcome, ctx, local)) = results.next().await {
                for (_, key) in &outcome.keys {
                    scope.copy_result_from(&ctx, key);
                }
                trail.append(local);
                let index = records.len();
                if let Some(fatal) = note(outcome, &mut records)
                    && !plan.allow_failure
                {
                    stopped = Some(format!("iteration {index}: {fatal}"));
                    break;
                }
            }
        }

        // After the loop, `.results.<sub>` is the last iteration that ran the sub-step.
        for sub in &each.steps {
            match last_ran.get(sub.id.as_str()) {
                Some(key) => scope.alias_result(key, &sub.id),
                None => scope.remove_result(&sub.id),
            }
        }
        match stopped {
            Some(error) => Err(error),
            None => Ok(Value::Array(records)),
        }
    }

    /// One pass of a loop body over `item`, in `scope` (the loop's own context when the loop
    /// runs one iteration at a time, a copy when iterations run at once).
    async fn iteration(
        &self,
        each: &ForEachPlan,
        scope: &mut Context,
        trail: &mut Trail,
        place: Iteration,
        item: Value,
    ) -> IterationOutcome {
        scope.set_var(&each.var, &item);
        scope.set_var(&each.index_var, &Value::from(place.index));
        for sub in &each.steps {
            scope.remove_result(&sub.id);
        }
        let mut results = Map::new();
        let mut keys = Vec::new();
        let mut error = None;
        let mut fatal = None;
        if self.ctx.cancellation.is_cancelled() {
            let message = "execution cancelled by the caller".to_owned();
            error = Some(message.clone());
            fatal = Some(message);
        }
        for sub in each.steps.iter().take(if fatal.is_some() { 0 } else { usize::MAX }) {
            let outcome = self.step(sub, scope, trail, Some(place)).await;
            // A nested loop's own per-iteration keys travel with this iteration's.
            keys.extend(outcome.keys.iter().map(|key| (String::new(), key.clone())));
            if outcome.status == StepStatus::Skipped {
                continue;
            }
            let key = place.key(&sub.id);
            scope.alias_result(&sub.id, &key);
            keys.push((sub.id.clone(), key));
            if let Some(result) = outcome.result {
                results.insert(sub.id.clone(), result);
            }
            if outcome.status == StepStatus::Failed {
                let message = format!(
                    "step {}: {}",
                    sub.id,
                    outcome.error.as_deref().unwrap_or("unknown error")
                );
                error.get_or_insert(message.clone());
                if !sub.allow_failure {
                    fatal = Some(message);
                    break;
                }
            }
        }
        let mut record = Map::new();
        record.insert("index".into(), Value::from(place.index));
        record.insert("item".into(), item);
        record.insert(
            "status".into(),
            Value::String(if error.is_some() { "failed" } else { "completed" }.into()),
        );
        record.insert("results".into(), Value::Object(results));
        if let Some(error) = error {
            record.insert("error".into(), Value::String(error));
        }
        IterationOutcome {
            record: Value::Object(record),
            keys,
            fatal,
        }
    }

    /// Runs a group's sub-steps at once on a snapshot of the results; their results are
    /// merged in declaration order, and the group's result is an object of them.
    async fn parallel(&self, group: &[StepPlan], scope: &mut Context, trail: &mut Trail) -> Result<Value, String> {
        let snapshot = scope.clone();
        let branches = group.iter().map(|sub| {
            let mut ctx = snapshot.clone();
            async move {
                let mut local = Trail::default();
                let outcome = self.step(sub, &mut ctx, &mut local, None).await;
                (outcome, local)
            }
        });
        let outcomes = futures::future::join_all(branches).await;
        let mut results = Map::new();
        let mut failure = None;
        for (sub, (outcome, local)) in group.iter().zip(outcomes) {
            trail.append(local);
            if let Some(result) = &outcome.result {
                scope.insert_result(&sub.id, result);
                results.insert(sub.id.clone(), result.clone());
            }
            if outcome.status == StepStatus::Failed && !sub.allow_failure && failure.is_none() {
                failure = Some(format!(
                    "parallel step {}: {}",
                    sub.id,
                    outcome.error.as_deref().unwrap_or("unknown error")
                ));
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(Value::Object(results)),
        }
    }
}

fn restore_var(scope: &mut Context, name: &str, saved: Option<Value>) {
    match saved {
        Some(value) => scope.set_var(name, &value),
        None => scope.remove_var(name),
    }
}

fn meta(
    plan: &StepPlan,
    status: StepStatus,
    condition: Option<(String, bool)>,
    result: Option<Value>,
    error: Option<String>,
) -> StepMeta {
    StepMeta {
        id: plan.id.clone(),
        tool: plan.tool().map(str::to_owned),
        status,
        condition,
        allow_failure: plan.allow_failure,
        output: plan.output,
        result,
        error,
    }
}

fn record(plan: &StepPlan, at: Option<Iteration>, started_at: chrono::DateTime<Utc>) -> WorkflowExecutionStep {
    WorkflowExecutionStep {
        step_id: plan.id.clone(),
        tool: plan.tool().unwrap_or_default().to_owned(),
        status: ExecutionStatus::InProgress,
        started_at,
        completed_at: None,
        duration_ms: 0,
        input: None,
        result: None,
        error: None,
        stored_as: at.map(|a| a.key(&plan.id)),
    }
}

fn page_items(page: &Value, field: &str, n: u32) -> Result<Vec<Value>, String> {
    match resolve_path(page, field) {
        Ok(Value::Array(items)) => Ok(items.clone()),
        Ok(Value::Null) | Err(_) if n > 1 => Ok(Vec::new()),
        _ => Err(format!("paginate: page {n} has no list at '{field}'")),
    }
}

/// Sets the dotted `field` of `page` (keys only) to `value`.
fn set_path(page: &mut Value, field: &str, value: Value) -> Result<(), String> {
    let segments = path::segments(field).map_err(|e| e.to_string())?;
    let mut current = page;
    let mut value = Some(value);
    for (i, segment) in segments.iter().enumerate() {
        let path::Segment::Key(key) = segment else {
            return Err(format!("paginate: itemsField '{field}' must be dotted keys"));
        };
        let Value::Object(map) = current else {
            return Err(format!("paginate: the last page has no object at '{field}'"));
        };
        if i + 1 == segments.len() {
            map.insert((*key).to_owned(), value.take().unwrap_or(Value::Null));
            return Ok(());
        }
        current = map
            .entry((*key).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    Ok(())
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "nil",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}
