//! Step conditions: a template gate, a condition tool, or an earlier step's result, checked
//! against `expect` / `expectNot`.

use serde_json::{Value, json};

use super::{
    plan::{ConditionPlan, ConditionSource, ExpectPlan, JsonPathKey},
    response::{failure_value, is_failure_value, loose_form},
    run::Run,
};
use crate::template::{Context, render_bool, resolve_path};

impl Run<'_> {
    /// Whether the step guarded by `condition` runs. An error (a template that does not
    /// render, a missing step result) fails the step.
    pub(crate) async fn evaluate(&self, condition: &ConditionPlan, scope: &Context) -> Result<bool, String> {
        let (succeeded, value) = match &condition.source {
            ConditionSource::Template(template) => {
                return render_bool(template, scope).map_err(|e| format!("failed to evaluate condition: {e}"));
            }
            ConditionSource::Tool { tool, args } => {
                let args = args
                    .render(scope)
                    .map_err(|e| format!("failed to render condition arguments: {e}"))?;
                match self.call(tool, args).await {
                    Ok(value) => (true, value),
                    Err(error) => (false, failure_value(&error)),
                }
            }
            ConditionSource::FromStep(step) => match scope.result(step) {
                Some(mut value) if is_failure_value(&value) => {
                    if let Some(map) = value.as_object_mut() {
                        map.insert("status".into(), Value::String("failed".into()));
                    }
                    (false, value)
                }
                Some(value) => (true, value),
                // Validation guarantees the step comes earlier: no result means it was skipped.
                None => (false, json!({"success": false, "skipped": true, "status": "skipped"})),
            },
        };
        let mut passed = true;
        if let Some(expect) = &condition.expect {
            passed &= matches(expect, succeeded, &value, scope)?;
        }
        if let Some(expect_not) = &condition.expect_not {
            passed &= !matches(expect_not, succeeded, &value, scope)?;
        }
        if condition.expect.is_none() && condition.expect_not.is_none() {
            // muster's legacy default (validation now requires an expectation): expect failure.
            passed = !succeeded;
        }
        Ok(passed)
    }
}

/// Whether every expectation of `expect` holds for a call that `succeeded` with `value`.
/// Without `success`, an expectation with no `jsonPath` means "succeeded".
fn matches(expect: &ExpectPlan, succeeded: bool, value: &Value, scope: &Context) -> Result<bool, String> {
    let success_holds = match expect.success {
        Some(wanted) => succeeded == wanted,
        None => !expect.json_path.is_empty() || succeeded,
    };
    if !success_holds {
        return Ok(false);
    }
    for (key, expected) in &expect.json_path {
        let actual = match key {
            JsonPathKey::Path(path) => resolve_path(value, path).ok().cloned(),
            JsonPathKey::Template(template) => template.render_result_value(value).ok(),
        };
        let expected = expected
            .render(scope)
            .map_err(|e| format!("failed to render condition expectation: {e}"))?;
        let equal = actual
            .as_ref()
            .is_some_and(|a| *a == expected || loose_form(a) == loose_form(&expected));
        if !equal {
            return Ok(false);
        }
    }
    Ok(true)
}
