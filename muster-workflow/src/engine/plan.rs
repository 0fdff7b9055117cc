//! [`CompiledWorkflow`]: a Workflow checked against every documented rule and compiled once
//! (templates parsed, jq programs compiled), ready to run many times.

use std::collections::BTreeSet;

use muster_core::crd::{
    ValidationErrors, Workflow, WorkflowCondition, WorkflowConditionExpectation, WorkflowForEach, WorkflowPaginate,
    WorkflowStep, WorkflowSubStep,
};
use serde_json::Value;

use crate::{
    jq::JqProgram,
    template::{CompiledTemplate, CompiledValue, TemplateError},
};

/// A Workflow that passed validation, with every template and jq program compiled.
///
/// Compiling reports every problem at once, each with its path (`spec.steps[1].args.name`):
/// the CRD rules ([`Workflow::validate`]), templates that do not parse or call an unknown
/// function, and jq programs that do not compile.
///
/// ```
/// use muster_core::crd::Workflow;
/// use muster_workflow::engine::CompiledWorkflow;
///
/// let wf: Workflow = serde_json::from_value(serde_json::json!({
///     "metadata": {"name": "greet"},
///     "spec": {"steps": [{"id": "hello", "tool": "x_demo_echo", "args": {"text": "{{ .input.who }}"}}]}
/// }))?;
/// let compiled = CompiledWorkflow::compile(wf).expect("valid");
/// assert_eq!(compiled.name(), "greet");
///
/// let bad: Workflow = serde_json::from_value(serde_json::json!({
///     "metadata": {"name": "bad"},
///     "spec": {"steps": [{"id": "s", "tool": "t", "args": {"x": "{{ nosuchfunc .input.a }}"}, "jq": ".["}]}
/// }))?;
/// let errors = CompiledWorkflow::compile(bad).unwrap_err();
/// assert_eq!(errors.len(), 2);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug)]
pub struct CompiledWorkflow {
    pub(crate) workflow: Workflow,
    pub(crate) steps: Vec<StepPlan>,
    pub(crate) on_failure: Vec<StepPlan>,
    pub(crate) output: Option<CompiledValue>,
    pub(crate) template_vars: Vec<String>,
    warnings: Vec<String>,
    tools: BTreeSet<String>,
}

impl CompiledWorkflow {
    /// Validates `workflow` and compiles it; every problem is reported.
    pub fn compile(workflow: Workflow) -> Result<Self, ValidationErrors> {
        let mut errors = match workflow.validate() {
            Ok(()) => ValidationErrors::new(),
            Err(errors) => errors,
        };
        let mut compiler = Compiler { errors: &mut errors };
        let steps = workflow
            .spec
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| compiler.step(s, &format!("spec.steps[{i}]")))
            .collect();
        let on_failure = workflow
            .spec
            .on_failure
            .iter()
            .enumerate()
            .map(|(j, s)| {
                // Handlers are best effort: each runs whatever the one before it did.
                let mut handler = compiler.sub_step(s, &format!("spec.onFailure[{j}]"));
                handler.allow_failure = true;
                handler
            })
            .collect();
        let output = workflow
            .spec
            .output
            .as_ref()
            .and_then(|o| compiler.value("spec.output", &Value::Object(o.clone())));
        if !errors.is_empty() {
            return Err(errors);
        }
        let warnings = warnings(&workflow);
        let tools = crate::referenced_tools(&workflow);
        let template_vars = input_references(&workflow);
        Ok(Self {
            template_vars,
            workflow,
            steps,
            on_failure,
            output,
            warnings,
            tools,
        })
    }

    /// The workflow's name.
    pub fn name(&self) -> &str {
        &self.workflow.metadata.name
    }

    /// The definition it was compiled from.
    pub fn workflow(&self) -> &Workflow {
        &self.workflow
    }

    /// Things that work but deserve attention: the deprecated `store` flag, per-step output
    /// flags made inert by an output template.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Every tool the workflow names (steps, conditions, loop bodies, groups, onFailure).
    pub fn referenced_tools(&self) -> &BTreeSet<String> {
        &self.tools
    }
}

/// The `input.<arg>` references in the workflow's templates, in name order (the default
/// response's `template_vars`).
fn input_references(workflow: &Workflow) -> Vec<String> {
    static INPUT_REF: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\.input\.([A-Za-z0-9_-]+)").expect("valid regex"));
    let text = serde_json::to_string(&workflow.spec).unwrap_or_default();
    let names: BTreeSet<String> = INPUT_REF
        .captures_iter(&text)
        .filter_map(|c| c.get(1))
        .map(|m| format!("input.{}", m.as_str()))
        .collect();
    names.into_iter().collect()
}

fn warnings(workflow: &Workflow) -> Vec<String> {
    let mut out = Vec::new();
    let has_output = workflow.spec.output.is_some();
    let mut flag = |path: String, store: Option<bool>, output: Option<bool>| {
        if store.is_some() {
            out.push(format!("{path}: store is deprecated; use output"));
        }
        if let (Some(output), Some(store)) = (output, store)
            && output != store
        {
            out.push(format!(
                "{path}: output ({output}) and the deprecated store ({store}) disagree; output decides"
            ));
        }
        if has_output && (store == Some(true) || output == Some(true)) {
            out.push(format!(
                "{path}: the {} flag has no effect because the workflow declares an output template",
                if output == Some(true) { "output" } else { "store" }
            ));
        }
    };
    for (i, step) in workflow.spec.steps.iter().enumerate() {
        flag(format!("spec.steps[{i}] ({})", step.id), step.store, step.output);
        let subs = step
            .for_each
            .iter()
            .flat_map(|f| f.steps.iter())
            .chain(step.parallel.iter().flatten());
        for sub in subs {
            flag(
                format!("spec.steps[{i}] ({}) sub-step {}", step.id, sub.id),
                sub.store,
                sub.output,
            );
        }
    }
    out
}

/// One step or sub-step, compiled.
#[derive(Debug)]
pub(crate) struct StepPlan {
    pub(crate) id: String,
    pub(crate) body: Body,
    pub(crate) condition: Option<ConditionPlan>,
    pub(crate) jq: Option<JqProgram>,
    pub(crate) output: bool,
    pub(crate) allow_failure: bool,
}

impl StepPlan {
    /// The tool a tool step calls.
    pub(crate) fn tool(&self) -> Option<&str> {
        match &self.body {
            Body::Tool(call) => Some(&call.tool),
            _ => None,
        }
    }
}

/// What a step does.
#[derive(Debug)]
pub(crate) enum Body {
    Tool(ToolPlan),
    ForEach(ForEachPlan),
    Parallel(Vec<StepPlan>),
}

#[derive(Debug)]
pub(crate) struct ToolPlan {
    pub(crate) tool: String,
    pub(crate) args: CompiledValue,
    pub(crate) paginate: Option<WorkflowPaginate>,
}

#[derive(Debug)]
pub(crate) struct ForEachPlan {
    pub(crate) items: CompiledTemplate,
    pub(crate) var: String,
    pub(crate) index_var: String,
    pub(crate) parallelism: usize,
    pub(crate) steps: Vec<StepPlan>,
}

#[derive(Debug)]
pub(crate) struct ConditionPlan {
    pub(crate) source: ConditionSource,
    pub(crate) expect: Option<ExpectPlan>,
    pub(crate) expect_not: Option<ExpectPlan>,
}

#[derive(Debug)]
pub(crate) enum ConditionSource {
    Template(CompiledTemplate),
    Tool { tool: String, args: CompiledValue },
    FromStep(String),
}

impl ConditionSource {
    /// How step records name the source: `template`, `from_step:<id>` or the tool.
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Template(_) => "template".to_owned(),
            Self::Tool { tool, .. } => tool.clone(),
            Self::FromStep(id) => format!("from_step:{id}"),
        }
    }
}

#[derive(Debug)]
pub(crate) struct ExpectPlan {
    pub(crate) success: Option<bool>,
    pub(crate) json_path: Vec<(JsonPathKey, CompiledValue)>,
}

/// A `jsonPath` key: a path from the result, or a template seeing the result as `.result`.
#[derive(Debug)]
pub(crate) enum JsonPathKey {
    Path(String),
    Template(CompiledTemplate),
}

struct Compiler<'e> {
    errors: &'e mut ValidationErrors,
}

impl Compiler<'_> {
    fn step(&mut self, step: &WorkflowStep, p: &str) -> StepPlan {
        let body = if let Some(each) = &step.for_each {
            Body::ForEach(self.for_each(each, &format!("{p}.forEach")))
        } else if let Some(group) = &step.parallel {
            Body::Parallel(
                group
                    .iter()
                    .enumerate()
                    .map(|(j, s)| self.sub_step(s, &format!("{p}.parallel[{j}]")))
                    .collect(),
            )
        } else {
            self.tool(step.tool.as_deref(), &step.args, step.paginate.as_ref(), p)
        };
        StepPlan {
            id: step.id.clone(),
            body,
            condition: step
                .condition
                .as_ref()
                .map(|c| self.condition(c, &format!("{p}.condition"))),
            jq: self.jq(step.jq.as_deref(), p),
            output: step.returns_output(),
            allow_failure: step.allow_failure,
        }
    }

    fn sub_step(&mut self, sub: &WorkflowSubStep, p: &str) -> StepPlan {
        let body = match &sub.for_each {
            Some(each) => Body::ForEach(self.for_each(each, &format!("{p}.forEach"))),
            None => self.tool(sub.tool.as_deref(), &sub.args, sub.paginate.as_ref(), p),
        };
        StepPlan {
            id: sub.id.clone(),
            body,
            condition: sub
                .condition
                .as_ref()
                .map(|c| self.condition(c, &format!("{p}.condition"))),
            jq: self.jq(sub.jq.as_deref(), p),
            output: sub.returns_output(),
            allow_failure: sub.allow_failure,
        }
    }

    fn tool(
        &mut self,
        tool: Option<&str>,
        args: &serde_json::Map<String, Value>,
        paginate: Option<&WorkflowPaginate>,
        p: &str,
    ) -> Body {
        let args = self
            .value(&format!("{p}.args"), &Value::Object(args.clone()))
            .unwrap_or(CompiledValue::Constant(Value::Object(Default::default())));
        Body::Tool(ToolPlan {
            tool: tool.unwrap_or_default().to_owned(),
            args,
            paginate: paginate.cloned(),
        })
    }

    fn for_each(&mut self, each: &WorkflowForEach, p: &str) -> ForEachPlan {
        let items = self
            .template(&format!("{p}.items"), &each.items)
            .unwrap_or_else(|| placeholder(&format!("{p}.items")));
        ForEachPlan {
            items,
            index_var: format!("{}_index", each.var),
            var: each.var.clone(),
            parallelism: each.parallelism.unwrap_or(1).max(1) as usize,
            steps: each
                .steps
                .iter()
                .enumerate()
                .map(|(j, s)| self.sub_step(s, &format!("{p}.steps[{j}]")))
                .collect(),
        }
    }

    fn condition(&mut self, condition: &WorkflowCondition, p: &str) -> ConditionPlan {
        let source = if let Some(template) = condition.template.as_deref().filter(|t| !t.trim().is_empty()) {
            ConditionSource::Template(
                self.template(&format!("{p}.template"), template)
                    .unwrap_or_else(|| placeholder(p)),
            )
        } else if let Some(tool) = condition.tool.as_deref().filter(|t| !t.trim().is_empty()) {
            ConditionSource::Tool {
                tool: tool.to_owned(),
                args: self
                    .value(&format!("{p}.args"), &Value::Object(condition.args.clone()))
                    .unwrap_or(CompiledValue::Constant(Value::Null)),
            }
        } else {
            ConditionSource::FromStep(condition.from_step.clone().unwrap_or_default())
        };
        // With a template gate, expect/expectNot are ignored (as documented).
        let is_template = matches!(source, ConditionSource::Template(_));
        ConditionPlan {
            expect: condition
                .expect
                .as_ref()
                .filter(|_| !is_template)
                .map(|e| self.expect(e, &format!("{p}.expect"))),
            expect_not: condition
                .expect_not
                .as_ref()
                .filter(|_| !is_template)
                .map(|e| self.expect(e, &format!("{p}.expectNot"))),
            source,
        }
    }

    fn expect(&mut self, expect: &WorkflowConditionExpectation, p: &str) -> ExpectPlan {
        let json_path = expect
            .json_path
            .iter()
            .map(|(key, expected)| {
                let name = format!("{p}.jsonPath.{key}");
                let key = if key.contains("{{") {
                    JsonPathKey::Template(self.template(&name, key).unwrap_or_else(|| placeholder(&name)))
                } else {
                    JsonPathKey::Path(key.clone())
                };
                let expected = self
                    .value(&name, expected)
                    .unwrap_or(CompiledValue::Constant(Value::Null));
                (key, expected)
            })
            .collect();
        ExpectPlan {
            success: expect.success,
            json_path,
        }
    }

    fn jq(&mut self, source: Option<&str>, p: &str) -> Option<JqProgram> {
        let source = source.filter(|s| !s.trim().is_empty())?;
        match JqProgram::compile(source) {
            Ok(program) => Some(program),
            Err(e) => {
                self.errors.push(format!("{p}.jq"), e.to_string());
                None
            }
        }
    }

    fn template(&mut self, name: &str, source: &str) -> Option<CompiledTemplate> {
        CompiledTemplate::compile(name, source).map_err(|e| self.report(e)).ok()
    }

    fn value(&mut self, name: &str, value: &Value) -> Option<CompiledValue> {
        CompiledValue::compile(name, value).map_err(|e| self.report(e)).ok()
    }

    fn report(&mut self, error: TemplateError) {
        self.errors.push(error.template().to_owned(), error.to_string());
    }
}

/// Stands in for a template that failed to compile; the plan is discarded with the errors.
fn placeholder(name: &str) -> CompiledTemplate {
    CompiledTemplate::literal(name)
}
