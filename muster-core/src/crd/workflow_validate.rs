//! The documented rules of a `Workflow`.
//!
//! Messages that the Go implementation's structured create/validate path produces are
//! reproduced word for word (`step 0: step ID cannot be empty`, `duplicate step ID 'x'
//! found`, `duplicate sub-step id 'x' found`, ...). Templates and jq programs are not compiled here.

use std::collections::HashSet;
use std::ops::RangeInclusive;

use super::mcpserver_validate::{check_name, check_type_meta};
use super::validate::{STEP_ID_PATTERN, STEP_ID_RE, ValidationErrors, is_set, over_limit};
use super::workflow::{
    Workflow, WorkflowCondition, WorkflowForEach, WorkflowPaginate, WorkflowSpec, WorkflowStep, WorkflowSubStep,
};

/// Most characters of `spec.description`.
pub(crate) const MAX_WORKFLOW_DESCRIPTION: usize = 1000;
/// Most characters of a step's and an argument's description.
pub(crate) const MAX_DESCRIPTION: usize = 500;
/// Most characters of a step id.
pub(crate) const MAX_STEP_ID: usize = 63;
/// Bounds of `forEach.parallelism`.
const PARALLELISM: RangeInclusive<u32> = 1..=MAX_PARALLELISM;
/// Most of `forEach.parallelism`.
pub(crate) const MAX_PARALLELISM: u32 = 50;
/// Bounds of `paginate.maxPages`.
const MAX_PAGES: RangeInclusive<u32> = 1..=MOST_PAGES;
/// Most of `paginate.maxPages`.
pub(crate) const MOST_PAGES: u32 = 1000;

impl Workflow {
    /// Checks the documented rules of the whole document and reports every violation.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errors = ValidationErrors::new();
        check_type_meta(&mut errors, &self.api_version, &self.kind, Self::KIND);
        check_name(&mut errors, &self.metadata, "workflow name is required");
        self.spec.validate_into(&mut errors);
        errors.into_result()
    }
}

impl WorkflowSpec {
    /// Checks the documented rules of the spec alone (paths start with `spec.`).
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errors = ValidationErrors::new();
        self.validate_into(&mut errors);
        errors.into_result()
    }

    fn validate_into(&self, errors: &mut ValidationErrors) {
        if let Some(description) = &self.description
            && let Some(len) = over_limit(description, MAX_WORKFLOW_DESCRIPTION)
        {
            errors.push(
                "spec.description",
                format!("description must be at most {MAX_WORKFLOW_DESCRIPTION} characters (has {len})"),
            );
        }
        for (name, arg) in &self.args {
            let p = format!("spec.args.{name}");
            if name.trim().is_empty() {
                errors.push(&p, "an argument name must not be empty");
            }
            if arg.arg_type.is_none() {
                errors.push(
                    format!("{p}.type"),
                    format!(
                        "arg '{name}': type is required (one of string, integer, boolean, \
                         number, object, array)"
                    ),
                );
            }
            if let Some(description) = &arg.description
                && let Some(len) = over_limit(description, MAX_DESCRIPTION)
            {
                errors.push(
                    format!("{p}.description"),
                    format!(
                        "arg '{name}': description must be at most {MAX_DESCRIPTION} characters \
                         (has {len})"
                    ),
                );
            }
        }
        if self.steps.is_empty() {
            errors.push("spec.steps", "workflow must have at least one step");
        }
        let mut walker = Walker {
            errors,
            ids: HashSet::new(),
            visible: Vec::new(),
        };
        for (i, step) in self.steps.iter().enumerate() {
            walker.step(i, step, &format!("spec.steps[{i}]"));
        }
        for (j, sub) in self.on_failure.iter().enumerate() {
            walker.sub_step(j, sub, &format!("spec.onFailure[{j}]"), Place::OnFailure);
            walker.visible.push(sub.id.clone());
        }
    }
}

/// Where a sub-step sits, which decides whether it may be a `forEach`.
#[derive(Clone, Copy)]
enum Place<'a> {
    /// The body of a top-level `forEach` whose loop variable is the given name.
    ForEachBody(&'a str),
    /// The body of a nested `forEach`: tool calls only.
    NestedBody,
    /// A `parallel` group.
    Parallel,
    /// The `onFailure` handlers.
    OnFailure,
}

/// Walks the steps in document order.
struct Walker<'e> {
    errors: &'e mut ValidationErrors,
    /// Every id met so far, to find duplicates across the whole workflow.
    ids: HashSet<String>,
    /// Ids whose results the next step can reference with `fromStep`.
    visible: Vec<String>,
}

impl Walker<'_> {
    fn step(&mut self, i: usize, step: &WorkflowStep, p: &str) {
        let id = step.id.as_str();
        if id.is_empty() {
            self.errors
                .push(format!("{p}.id"), format!("step {i}: step ID cannot be empty"));
        } else {
            self.check_id(&format!("{p}.id"), &format!("step {i} ({id})"), id, false);
        }
        let label = if id.is_empty() {
            format!("step {i}")
        } else {
            format!("step {id}")
        };

        let has_tool = is_set(step.tool.as_deref());
        let has_for_each = step.for_each.is_some();
        let has_parallel = step.parallel.is_some();
        if !has_tool && !has_for_each && !has_parallel {
            self.errors.push(
                p,
                format!("step {i} ({id}): one of tool, forEach, or parallel is required"),
            );
        } else if has_tool && (has_for_each || has_parallel) {
            self.errors.push(
                p,
                format!("step {i} ({id}): tool is mutually exclusive with forEach/parallel"),
            );
        } else if has_for_each && has_parallel {
            self.errors.push(
                p,
                format!("step {i} ({id}): forEach and parallel are mutually exclusive"),
            );
        }

        if let Some(description) = &step.description
            && let Some(len) = over_limit(description, MAX_DESCRIPTION)
        {
            self.errors.push(
                format!("{p}.description"),
                format!("{label}: description must be at most {MAX_DESCRIPTION} characters (has {len})"),
            );
        }
        self.common(
            &label,
            p,
            has_tool,
            step.condition.as_ref(),
            step.paginate.as_ref(),
            step.jq.as_deref(),
        );

        if let Some(for_each) = &step.for_each {
            self.for_each(&label, &format!("{p}.forEach"), for_each, None);
        }
        if let Some(parallel) = &step.parallel {
            if parallel.is_empty() {
                self.errors.push(
                    format!("{p}.parallel"),
                    format!("{label}: parallel must contain at least one sub-step"),
                );
            }
            // Siblings run on a snapshot taken before the group: none sees another's
            // result, so their ids become visible only after the group.
            for (j, sub) in parallel.iter().enumerate() {
                self.sub_step(j, sub, &format!("{p}.parallel[{j}]"), Place::Parallel);
            }
            self.visible.extend(parallel.iter().map(|s| s.id.clone()));
        }
        self.visible.push(step.id.clone());
    }

    fn sub_step(&mut self, j: usize, sub: &WorkflowSubStep, p: &str, place: Place<'_>) {
        let id = sub.id.as_str();
        let label = if id.is_empty() {
            self.errors
                .push(format!("{p}.id"), format!("sub-step {j}: id is required"));
            format!("sub-step {j}")
        } else {
            let label = format!("sub-step {j} ({id})");
            self.check_id(&format!("{p}.id"), &label, id, true);
            label
        };

        let has_tool = is_set(sub.tool.as_deref());
        match (place, &sub.for_each) {
            (Place::ForEachBody(outer_var), Some(nested)) => {
                if has_tool {
                    self.errors
                        .push(p, format!("{label}: tool and forEach are mutually exclusive"));
                }
                self.for_each(&label, &format!("{p}.forEach"), nested, Some(outer_var));
            }
            (Place::ForEachBody(_), None) => {
                if !has_tool {
                    self.errors
                        .push(p, format!("{label}: one of tool or forEach is required"));
                }
            }
            (Place::NestedBody, Some(_)) => self.errors.push(
                format!("{p}.forEach"),
                format!(
                    "{label}: a nested forEach body holds tool calls only (forEach nests one \
                     level deep)"
                ),
            ),
            (Place::Parallel | Place::OnFailure, Some(_)) => self.errors.push(
                format!("{p}.forEach"),
                format!(
                    "{label}: forEach is only allowed in a forEach body, not in parallel or \
                     onFailure"
                ),
            ),
            (Place::NestedBody | Place::Parallel | Place::OnFailure, None) => {
                if !has_tool {
                    self.errors.push(p, format!("{label}: tool is required"));
                }
            }
        }
        self.common(
            &label,
            p,
            has_tool,
            sub.condition.as_ref(),
            sub.paginate.as_ref(),
            sub.jq.as_deref(),
        );
    }

    fn for_each(&mut self, label: &str, p: &str, for_each: &WorkflowForEach, outer_var: Option<&str>) {
        if for_each.items.trim().is_empty() {
            self.errors
                .push(format!("{p}.items"), format!("{label}: forEach.items is required"));
        }
        if for_each.var.trim().is_empty() {
            self.errors
                .push(format!("{p}.as"), format!("{label}: forEach.as must not be empty"));
        } else if outer_var == Some(for_each.var.as_str()) {
            self.errors.push(
                format!("{p}.as"),
                format!(
                    "{label}: forEach.as '{}' must differ from the outer loop's",
                    for_each.var
                ),
            );
        }
        if let Some(parallelism) = for_each.parallelism
            && !PARALLELISM.contains(&parallelism)
        {
            self.errors.push(
                format!("{p}.parallelism"),
                format!(
                    "{label}: forEach.parallelism must be between {} and {} (is {parallelism})",
                    PARALLELISM.start(),
                    PARALLELISM.end()
                ),
            );
        }
        if for_each.steps.is_empty() {
            self.errors.push(
                format!("{p}.steps"),
                format!("{label}: forEach.steps must contain at least one sub-step"),
            );
        }
        let place = match outer_var {
            None => Place::ForEachBody(&for_each.var),
            Some(_) => Place::NestedBody,
        };
        // A body runs in order: each sub-step sees the results of the ones before it.
        for (j, sub) in for_each.steps.iter().enumerate() {
            self.sub_step(j, sub, &format!("{p}.steps[{j}]"), place);
            self.visible.push(sub.id.clone());
        }
    }

    /// Records a malformed or duplicate id. A duplicate met on a sub-step (a `parallel` group,
    /// a `forEach` body or `onFailure`) says `duplicate sub-step id`, as Go muster does.
    fn check_id(&mut self, path: &str, label: &str, id: &str, sub_step: bool) {
        if !STEP_ID_RE.is_match(id) {
            self.errors
                .push(path, format!("{label}: step ID '{id}' must match {STEP_ID_PATTERN}"));
        }
        if let Some(len) = over_limit(id, MAX_STEP_ID) {
            self.errors.push(
                path,
                format!("{label}: step ID must be at most {MAX_STEP_ID} characters (has {len})"),
            );
        }
        if !self.ids.insert(id.to_owned()) {
            let message = if sub_step {
                format!("duplicate sub-step id '{id}' found")
            } else {
                format!("duplicate step ID '{id}' found")
            };
            self.errors.push(path, message);
        }
    }

    /// Rules shared by steps and sub-steps: condition, paginate and jq.
    fn common(
        &mut self,
        label: &str,
        p: &str,
        has_tool: bool,
        condition: Option<&WorkflowCondition>,
        paginate: Option<&WorkflowPaginate>,
        jq: Option<&str>,
    ) {
        if let Some(condition) = condition {
            self.condition(label, &format!("{p}.condition"), condition);
        }
        if let Some(paginate) = paginate {
            self.paginate(label, &format!("{p}.paginate"), paginate, has_tool);
        }
        if let Some(jq) = jq
            && jq.trim().is_empty()
        {
            self.errors
                .push(format!("{p}.jq"), format!("{label}: jq must not be empty"));
        }
    }

    fn condition(&mut self, label: &str, p: &str, condition: &WorkflowCondition) {
        let template = is_set(condition.template.as_deref());
        let tool = is_set(condition.tool.as_deref());
        let from_step = is_set(condition.from_step.as_deref());
        if template && (tool || from_step) {
            self.errors.push(
                p,
                format!("{label}: condition.template is mutually exclusive with tool/fromStep"),
            );
        } else if !template && !tool && !from_step {
            self.errors.push(
                p,
                format!("{label}: condition requires exactly one of template, tool, or fromStep"),
            );
        } else if tool && from_step {
            self.errors.push(
                p,
                format!(
                    "{label}: condition: tool and fromStep are mutually exclusive (set exactly \
                     one of template, tool, or fromStep)"
                ),
            );
        }
        if !template && (tool || from_step) && condition.expect.is_none() && condition.expect_not.is_none() {
            self.errors.push(
                p,
                format!("{label}: a tool or fromStep condition requires expect or expectNot"),
            );
        }
        if let Some(reference) = condition.from_step.as_deref()
            && from_step
            && !self.visible.iter().any(|id| id == reference)
        {
            self.errors.push(
                format!("{p}.fromStep"),
                // muster's runtime words, which scripts grep for, then why.
                format!(
                    "{label} condition references non-existent step result: {reference} (condition.fromStep \
                     must name an earlier step)"
                ),
            );
        }
    }

    fn paginate(&mut self, label: &str, p: &str, paginate: &WorkflowPaginate, has_tool: bool) {
        if !has_tool {
            self.errors
                .push(p, format!("{label}: paginate is only allowed on a tool call"));
        }
        if !MAX_PAGES.contains(&paginate.max_pages) {
            self.errors.push(
                format!("{p}.maxPages"),
                format!(
                    "{label}: paginate.maxPages must be between {} and {} (is {})",
                    MAX_PAGES.start(),
                    MAX_PAGES.end(),
                    paginate.max_pages
                ),
            );
        }
        let fields = [
            ("itemsField", &paginate.items_field),
            ("tokenField", &paginate.token_field),
            ("tokenArg", &paginate.token_arg),
        ];
        for (field, value) in fields {
            if value.trim().is_empty() {
                self.errors.push(
                    format!("{p}.{field}"),
                    format!("{label}: paginate.{field} must not be empty"),
                );
            }
        }
    }
}
