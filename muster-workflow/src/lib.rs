//! # muster-workflow
//!
//! The workflow side of muster: templates, the engine that runs a Workflow through a tool
//! service, and the durable record of every run.
//!
//! - [`engine`]: [`engine::CompiledWorkflow`] (a Workflow checked against every documented rule,
//!   its templates parsed and jq programs compiled once) and [`engine::WorkflowEngine`], which
//!   runs it step by step through any [`ToolService`](muster_core::ToolService): conditions,
//!   `forEach` (up to 50 iterations at once, one nested level), `parallel` groups, `paginate`,
//!   `jq`, `allowFailure`, `onFailure` and the `output` template;
//! - [`template`]: Go text/template syntax on gotmpl with `missingkey=error`, the sprig functions
//!   workflows use, parse-once templates and the documented type preservation;
//! - [`jq`]: jq programs on jaq, with `$input` and `$vars`;
//! - [`record`]: execution records and their filesystem store (atomic writes, the 256 KB payload
//!   guard, retention, recovery of executions a crash cut off, the list/get tool answers);
//! - [`tools`]: the `workflow_<name>` tools as a tower service ([`tools::WorkflowTools`]) over
//!   a table of compiled workflows ([`tools::WorkflowTable`]), with their catalogue entries and
//!   availability, and the late-bound handle ([`tools::LateBoundTools`]) through which steps
//!   call a stack that contains the service itself;
//! - [`referenced_tools`] walks every place a Workflow names a tool (steps, conditions, forEach
//!   bodies one level deep, parallel groups, onFailure), and [`missing_tools`] says which of them
//!   a catalogue lacks (availability).
//!
//! The engine runs a workflow's steps through whatever [`ToolService`](muster_core::ToolService)
//! it is given (in a gateway, the gateway's whole stack):
//!
//! ```
//! use muster_core::{BoxToolService, CallContext, ToolCall, ToolError};
//! use muster_workflow::engine::{CompiledWorkflow, WorkflowEngine};
//! use rmcp::model::{CallToolResult, ContentBlock};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The tools: one that answers `{"text": <its text argument, upper-cased>}`.
//! let tools = BoxToolService::new(tower::service_fn(|call: ToolCall| async move {
//!     let text = call.arguments["text"].as_str().unwrap_or_default().to_uppercase();
//!     let answer = json!({ "text": text }).to_string();
//!     Ok::<_, ToolError>(CallToolResult::success(vec![ContentBlock::text(answer)]).into())
//! }));
//! let workflow = serde_json::from_value(json!({
//!     "metadata": {"name": "shout"},
//!     "spec": {
//!         "args": {"who": {"type": "string", "required": true}},
//!         "steps": [{"id": "up", "tool": "x_text_upper", "args": {"text": "hello {{ .input.who }}"}}],
//!         "output": {"said": "{{ .results.up.text }}"}
//!     }
//! }))?;
//! let workflow = CompiledWorkflow::compile(workflow).map_err(|e| e.to_string())?;
//! let args = json!({"who": "world"}).as_object().cloned().unwrap_or_default();
//! let outcome = WorkflowEngine::new(tools).run(&workflow, args, CallContext::default()).await?;
//! assert_eq!(outcome.response, json!({"said": "HELLO WORLD"}));
//! # Ok(()) }
//! ```
//!
//! What a workflow needs from a catalogue:
//!
//! ```
//! use muster_core::crd::{Workflow, WorkflowSpec, WorkflowStep};
//!
//! let mut step = WorkflowStep::default();
//! step.id = "pods".into();
//! step.tool = Some("x_k8s_list_pods".into());
//! let wf = Workflow::new("inspect", WorkflowSpec { steps: vec![step], ..Default::default() });
//! let tools = muster_workflow::referenced_tools(&wf);
//! assert!(tools.contains("x_k8s_list_pods"));
//! assert_eq!(muster_workflow::missing_tools(&wf, |t| t == "x_k8s_list_pods"), Vec::<String>::new());
//! ```

pub mod jq;
pub mod template;

pub mod engine;

pub mod record;

pub mod tools;

/// The Rust blocks of this crate's `README.md` (its crates.io page), compiled and run as doc tests
/// so that the page stays true to the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

use std::collections::BTreeSet;

use muster_core::crd::{Workflow, WorkflowCondition, WorkflowSubStep};

/// Every tool `workflow` names, in its steps, conditions, loop bodies, parallel groups and
/// onFailure handlers.
pub fn referenced_tools(workflow: &Workflow) -> BTreeSet<String> {
    let mut tools = BTreeSet::new();
    for step in &workflow.spec.steps {
        tools.extend(step.tool.clone());
        condition_tool(&mut tools, step.condition.as_ref());
        if let Some(each) = &step.for_each {
            sub_steps(&mut tools, &each.steps);
        }
        if let Some(group) = &step.parallel {
            sub_steps(&mut tools, group);
        }
    }
    sub_steps(&mut tools, &workflow.spec.on_failure);
    tools
}

/// The tools `workflow` names that `is_available` says are missing, in name order.
pub fn missing_tools(workflow: &Workflow, is_available: impl Fn(&str) -> bool) -> Vec<String> {
    referenced_tools(workflow)
        .into_iter()
        .filter(|t| !is_available(t))
        .collect()
}

fn sub_steps(tools: &mut BTreeSet<String>, steps: &[WorkflowSubStep]) {
    for sub in steps {
        tools.extend(sub.tool.clone());
        condition_tool(tools, sub.condition.as_ref());
        if let Some(nested) = &sub.for_each {
            sub_steps(tools, &nested.steps);
        }
    }
}

fn condition_tool(tools: &mut BTreeSet<String>, condition: Option<&WorkflowCondition>) {
    if let Some(tool) = condition.and_then(|c| c.tool.clone()) {
        tools.insert(tool);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_collected_from_every_place_a_workflow_names_one() {
        let yaml = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata: {name: all-places}
spec:
  steps:
    - id: a
      tool: t_step
      condition: {tool: t_condition, expect: {success: true}}
    - id: loop
      forEach:
        items: "{{ .input.xs }}"
        steps:
          - id: body
            tool: t_body
          - id: nested
            forEach:
              items: "{{ .vars.item.ys }}"
              as: inner
              steps:
                - id: deep
                  tool: t_nested
    - id: group
      parallel:
        - id: p1
          tool: t_parallel
  onFailure:
    - id: cleanup
      tool: t_cleanup
"#;
        let wf: Workflow = serde_saphyr::from_str(yaml).expect("valid yaml");
        let tools: Vec<String> = referenced_tools(&wf).into_iter().collect();
        assert_eq!(
            tools,
            ["t_body", "t_cleanup", "t_condition", "t_nested", "t_parallel", "t_step"]
        );
        assert_eq!(
            missing_tools(&wf, |t| t != "t_cleanup" && t != "t_nested"),
            ["t_cleanup", "t_nested"]
        );
    }
}
