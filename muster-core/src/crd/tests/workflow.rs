//! Workflow: parsing, defaults, deprecated spellings and one test per validation rule.

use serde_json::{Value, json};

use super::{assert_has, assert_only, assert_valid, dropped, yaml, yaml_error};
use crate::crd::{
    ArgDefinition, ArgType, DeprecatedField, Workflow, WorkflowCondition, WorkflowConditionExpectation,
    WorkflowForEach, WorkflowPaginate, WorkflowStep, WorkflowSubStep, deprecated_spellings,
};

/// A valid workflow with one tool step `list`.
fn workflow() -> Workflow {
    yaml(
        r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata:
  name: inspect
spec:
  description: Inspect the cluster
  args:
    namespace: {type: string, required: true, description: Namespace}
  steps:
    - id: list
      tool: x_kubernetes_list
      args: {namespace: "{{ .input.namespace }}"}
"#,
    )
}

fn tool_step(id: &str, tool: &str) -> WorkflowStep {
    WorkflowStep {
        id: id.to_owned(),
        tool: Some(tool.to_owned()),
        ..Default::default()
    }
}

fn tool_sub(id: &str) -> WorkflowSubStep {
    WorkflowSubStep {
        id: id.to_owned(),
        tool: Some("x_tool".to_owned()),
        ..Default::default()
    }
}

fn for_each(items: &str, steps: Vec<WorkflowSubStep>) -> WorkflowForEach {
    WorkflowForEach {
        items: items.to_owned(),
        steps,
        ..Default::default()
    }
}

/// A workflow whose only step is `step`.
fn with_step(step: WorkflowStep) -> Workflow {
    let mut wf = workflow();
    wf.spec.steps = vec![step];
    wf
}

/// A workflow whose steps are `list` and then `step`.
fn with_second_step(step: WorkflowStep) -> Workflow {
    let mut wf = workflow();
    wf.spec.steps.push(step);
    wf
}

fn loop_step(id: &str, body: Vec<WorkflowSubStep>) -> WorkflowStep {
    WorkflowStep {
        id: id.to_owned(),
        for_each: Some(for_each("{{ .input.items }}", body)),
        ..Default::default()
    }
}

fn from_step_condition(step: &str) -> WorkflowCondition {
    WorkflowCondition {
        from_step: Some(step.to_owned()),
        expect: Some(WorkflowConditionExpectation {
            success: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn valid_workflow_passes() {
    assert_valid(workflow().validate());
}

#[test]
fn defaults_are_the_documented_ones() {
    let for_each: WorkflowForEach = yaml("items: '{{ .input.x }}'\nsteps: []");
    assert_eq!(for_each.var, "item");
    assert_eq!(for_each.parallelism, None);
    let paginate: WorkflowPaginate = yaml("{}");
    assert_eq!(paginate.items_field, "items");
    assert_eq!(paginate.token_field, "continue");
    assert_eq!(paginate.token_arg, "continue");
    assert_eq!(paginate.max_pages, 10);
    assert_eq!(paginate, WorkflowPaginate::default());
    let step: WorkflowStep = yaml("id: a\ntool: t");
    assert!(step.output.is_none() && step.store.is_none() && !step.allow_failure);
}

#[test]
fn unknown_spec_field_is_dropped_and_named() {
    assert_eq!(
        dropped(
            "metadata: {name: a}\nspec: {steps: [], outputs: {}}",
            Workflow::from_document
        ),
        vec![r#"unknown field "spec.outputs" (dropped)"#]
    );
}

#[test]
fn legacy_input_schema_in_the_spec_is_accepted_ignored_and_never_written() {
    let wf: Workflow = yaml(
        r#"
metadata: {name: legacy}
spec:
  input_schema:
    type: object
    properties: {who: {type: string}}
  steps:
    - id: hello
      tool: x_hello
"#,
    );
    assert_valid(wf.validate());
    assert!(wf.spec.args.is_empty(), "the legacy schema does not become args");
    assert_eq!(
        wf.spec.input_schema.as_ref().map(|v| v["type"].clone()),
        Some(json!("object"))
    );
    let written = serde_json::to_value(&wf).expect("serializes");
    assert!(written["spec"].get("input_schema").is_none(), "{written}");
    assert!(written["spec"].get("inputSchema").is_none(), "{written}");
    // Only the snake_case legacy key is read; other unknown keys are dropped with a warning.
    assert_eq!(
        dropped(
            "metadata: {name: a}\nspec: {steps: [], inputSchema: {}}",
            Workflow::from_document
        ),
        vec![r#"unknown field "spec.inputSchema" (dropped)"#]
    );
}

#[test]
fn legacy_input_schema_is_reported_as_deprecated() {
    let doc: Value = yaml("metadata: {name: a}\nspec: {input_schema: {}, steps: [{id: a, tool: t, store: true}]}");
    let found: Vec<String> = deprecated_spellings(&doc).iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        vec![
            "spec.input_schema is deprecated: use spec.args instead of input_schema",
            "spec.steps[0].store is deprecated: use output instead of store",
        ]
    );
    let bare = json!({"input_schema": {}, "steps": []});
    assert_eq!(
        deprecated_spellings(&bare),
        vec![DeprecatedField {
            path: "input_schema".to_owned(),
            deprecated: "input_schema",
            replacement: "spec.args",
        }]
    );
}

#[test]
fn unknown_step_fields_are_dropped_and_named_at_every_depth() {
    let doc = r#"
metadata: {name: a}
spec:
  args: {x: {type: string, required: true, requred: true}}
  steps:
    - id: a
      tool: t
      allowFailures: true
      args: {anything: goes}
      condition: {fromStep: a, expect: {success: true, jsonpath: {}}}
    - id: b
      forEach: {items: '{{ .input.x }}', steps: [{id: c, tool: t, retries: 2}]}
  onFailure: [{id: d, tool: t, when: always}]
"#;
    assert_eq!(
        dropped(doc, Workflow::from_document),
        vec![
            // In the order the document is read (its keys sorted).
            r#"unknown field "spec.args.x.requred" (dropped)"#,
            r#"unknown field "spec.onFailure[0].when" (dropped)"#,
            r#"unknown field "spec.steps[0].allowFailures" (dropped)"#,
            r#"unknown field "spec.steps[0].condition.expect.jsonpath" (dropped)"#,
            r#"unknown field "spec.steps[1].forEach.steps[0].retries" (dropped)"#,
        ]
    );
}

#[test]
fn wrong_kind_is_refused() {
    let mut wf = workflow();
    wf.kind = "MCPServer".to_owned();
    assert_only(wf.validate(), "kind", "kind must be Workflow (is \"MCPServer\")");
}

#[test]
fn workflow_without_name_is_refused() {
    let mut wf = workflow();
    wf.metadata.name = String::new();
    assert_only(wf.validate(), "metadata.name", "workflow name is required");
}

#[test]
fn workflow_without_steps_is_refused() {
    let mut wf = workflow();
    wf.spec.steps.clear();
    assert_only(wf.validate(), "spec.steps", "workflow must have at least one step");
}

#[test]
fn workflow_description_over_1000_characters_is_refused() {
    let mut wf = workflow();
    wf.spec.description = Some("d".repeat(1000));
    assert_valid(wf.validate());
    wf.spec.description = Some("d".repeat(1001));
    assert_only(
        wf.validate(),
        "spec.description",
        "description must be at most 1000 characters (has 1001)",
    );
}

#[test]
fn argument_without_type_is_refused() {
    let mut wf = workflow();
    wf.spec.args.insert("dry_run".to_owned(), ArgDefinition::default());
    assert_only(
        wf.validate(),
        "spec.args.dry_run.type",
        "arg 'dry_run': type is required (one of string, integer, boolean, number, object, array)",
    );
}

#[test]
fn argument_description_over_500_characters_is_refused() {
    let mut wf = workflow();
    wf.spec.args.insert(
        "n".to_owned(),
        ArgDefinition {
            arg_type: Some(ArgType::Integer),
            description: Some("d".repeat(501)),
            ..Default::default()
        },
    );
    assert_only(
        wf.validate(),
        "spec.args.n.description",
        "arg 'n': description must be at most 500 characters (has 501)",
    );
}

#[test]
fn argument_types_use_the_documented_spellings() {
    for spelling in ["string", "integer", "boolean", "number", "object", "array"] {
        let arg: ArgDefinition = yaml(&format!("type: {spelling}\ndefault: null"));
        let arg_type = arg.arg_type.expect("type parses");
        assert_eq!(arg_type.as_str(), spelling);
        assert_eq!(serde_json::to_value(arg_type).expect("serializes"), spelling);
    }
    let error = yaml_error::<ArgDefinition>("type: list");
    assert!(error.contains("unknown variant `list`"), "{error}");
}

#[test]
fn step_without_id_is_refused() {
    let wf = with_step(tool_step("", "t"));
    assert_only(wf.validate(), "spec.steps[0].id", "step 0: step ID cannot be empty");
}

#[test]
fn step_id_not_matching_the_pattern_is_refused() {
    let wf = with_step(tool_step("check db", "t"));
    assert_only(
        wf.validate(),
        "spec.steps[0].id",
        "step 0 (check db): step ID 'check db' must match ^[a-zA-Z0-9_-]+$",
    );
}

#[test]
fn step_id_over_63_characters_is_refused() {
    assert_valid(with_step(tool_step(&"a".repeat(63), "t")).validate());
    let id = "a".repeat(64);
    assert_only(
        with_step(tool_step(&id, "t")).validate(),
        "spec.steps[0].id",
        &format!("step 0 ({id}): step ID must be at most 63 characters (has 64)"),
    );
}

#[test]
fn duplicate_step_id_is_refused() {
    let wf = with_second_step(tool_step("list", "t"));
    assert_only(wf.validate(), "spec.steps[1].id", "duplicate step ID 'list' found");
}

#[test]
fn sub_step_id_equal_to_a_step_id_is_refused() {
    let wf = with_second_step(WorkflowStep {
        id: "group".to_owned(),
        parallel: Some(vec![tool_sub("list")]),
        ..Default::default()
    });
    assert_only(
        wf.validate(),
        "spec.steps[1].parallel[0].id",
        "duplicate sub-step id 'list' found",
    );
}

#[test]
fn duplicate_sub_step_ids_in_a_parallel_group_say_sub_step() {
    let step = WorkflowStep {
        id: "group".to_owned(),
        parallel: Some(vec![tool_sub("dup"), tool_sub("dup")]),
        ..Default::default()
    };
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].parallel[1].id",
        "duplicate sub-step id 'dup' found",
    );
}

#[test]
fn duplicate_sub_step_ids_in_a_for_each_body_say_sub_step() {
    let step = loop_step("clusters", vec![tool_sub("dup"), tool_sub("dup")]);
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.steps[1].id",
        "duplicate sub-step id 'dup' found",
    );
}

#[test]
fn a_step_id_equal_to_an_earlier_sub_step_id_says_step() {
    let group = WorkflowStep {
        id: "group".to_owned(),
        parallel: Some(vec![tool_sub("fetch")]),
        ..Default::default()
    };
    let mut wf = with_step(group);
    wf.spec.steps.push(tool_step("fetch", "t"));
    assert_only(wf.validate(), "spec.steps[1].id", "duplicate step ID 'fetch' found");
}

#[test]
fn on_failure_id_equal_to_a_step_id_is_refused() {
    let mut wf = workflow();
    wf.spec.on_failure = vec![tool_sub("list")];
    assert_only(
        wf.validate(),
        "spec.onFailure[0].id",
        "duplicate sub-step id 'list' found",
    );
}

#[test]
fn step_with_none_of_tool_for_each_or_parallel_is_refused() {
    let wf = with_second_step(WorkflowStep {
        id: "empty".to_owned(),
        ..Default::default()
    });
    assert_only(
        wf.validate(),
        "spec.steps[1]",
        "step 1 (empty): one of tool, forEach, or parallel is required",
    );
}

#[test]
fn step_with_tool_and_for_each_is_refused() {
    let mut step = loop_step("both", vec![tool_sub("inner")]);
    step.tool = Some("t".to_owned());
    assert_only(
        with_step(step).validate(),
        "spec.steps[0]",
        "step 0 (both): tool is mutually exclusive with forEach/parallel",
    );
}

#[test]
fn step_with_tool_and_parallel_is_refused() {
    let step = WorkflowStep {
        id: "both".to_owned(),
        tool: Some("t".to_owned()),
        parallel: Some(vec![tool_sub("a")]),
        ..Default::default()
    };
    assert_only(
        with_step(step).validate(),
        "spec.steps[0]",
        "step 0 (both): tool is mutually exclusive with forEach/parallel",
    );
}

#[test]
fn step_with_for_each_and_parallel_is_refused() {
    let mut step = loop_step("both", vec![tool_sub("inner")]);
    step.parallel = Some(vec![tool_sub("a")]);
    assert_only(
        with_step(step).validate(),
        "spec.steps[0]",
        "step 0 (both): forEach and parallel are mutually exclusive",
    );
}

#[test]
fn step_description_over_500_characters_is_refused() {
    let mut step = tool_step("a", "t");
    step.description = Some("d".repeat(501));
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].description",
        "step a: description must be at most 500 characters (has 501)",
    );
}

#[test]
fn for_each_without_items_is_refused() {
    let mut step = loop_step("loop", vec![tool_sub("inner")]);
    if let Some(for_each) = step.for_each.as_mut() {
        for_each.items = String::new();
    }
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.items",
        "step loop: forEach.items is required",
    );
}

#[test]
fn for_each_without_sub_steps_is_refused() {
    let step = loop_step("loop", Vec::new());
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.steps",
        "step loop: forEach.steps must contain at least one sub-step",
    );
}

#[test]
fn for_each_parallelism_outside_1_to_50_is_refused() {
    for ok in [1, 50] {
        let mut step = loop_step("loop", vec![tool_sub("inner")]);
        if let Some(for_each) = step.for_each.as_mut() {
            for_each.parallelism = Some(ok);
        }
        assert_valid(with_step(step).validate());
    }
    for bad in [0, 51] {
        let mut step = loop_step("loop", vec![tool_sub("inner")]);
        if let Some(for_each) = step.for_each.as_mut() {
            for_each.parallelism = Some(bad);
        }
        assert_only(
            with_step(step).validate(),
            "spec.steps[0].forEach.parallelism",
            &format!("step loop: forEach.parallelism must be between 1 and 50 (is {bad})"),
        );
    }
}

#[test]
fn for_each_with_empty_loop_variable_is_refused() {
    let mut step = loop_step("loop", vec![tool_sub("inner")]);
    if let Some(for_each) = step.for_each.as_mut() {
        for_each.var = String::new();
    }
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.as",
        "step loop: forEach.as must not be empty",
    );
}

#[test]
fn sub_step_without_id_is_refused() {
    let step = loop_step("loop", vec![tool_sub("")]);
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.steps[0].id",
        "sub-step 0: id is required",
    );
}

#[test]
fn sub_step_without_tool_in_a_parallel_group_is_refused() {
    let step = WorkflowStep {
        id: "group".to_owned(),
        parallel: Some(vec![
            tool_sub("a"),
            WorkflowSubStep {
                id: "b".to_owned(),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].parallel[1]",
        "sub-step 1 (b): tool is required",
    );
}

#[test]
fn on_failure_sub_step_without_tool_is_refused() {
    let mut wf = workflow();
    wf.spec.on_failure = vec![WorkflowSubStep {
        id: "rollback".to_owned(),
        ..Default::default()
    }];
    assert_only(
        wf.validate(),
        "spec.onFailure[0]",
        "sub-step 0 (rollback): tool is required",
    );
}

#[test]
fn empty_parallel_group_is_refused() {
    let step = WorkflowStep {
        id: "group".to_owned(),
        parallel: Some(Vec::new()),
        ..Default::default()
    };
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].parallel",
        "step group: parallel must contain at least one sub-step",
    );
}

#[test]
fn for_each_body_sub_step_without_tool_or_for_each_is_refused() {
    let step = loop_step(
        "loop",
        vec![WorkflowSubStep {
            id: "nothing".to_owned(),
            ..Default::default()
        }],
    );
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.steps[0]",
        "sub-step 0 (nothing): one of tool or forEach is required",
    );
}

#[test]
fn for_each_body_sub_step_with_tool_and_for_each_is_refused() {
    let mut sub = tool_sub("both");
    sub.for_each = Some(WorkflowForEach {
        var: "inner".to_owned(),
        ..for_each("{{ .vars.item.pods }}", vec![tool_sub("x")])
    });
    let step = loop_step("loop", vec![sub]);
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.steps[0]",
        "sub-step 0 (both): tool and forEach are mutually exclusive",
    );
}

fn nested_loop(id: &str, var: &str, body: Vec<WorkflowSubStep>) -> WorkflowSubStep {
    WorkflowSubStep {
        id: id.to_owned(),
        for_each: Some(WorkflowForEach {
            var: var.to_owned(),
            ..for_each("{{ .results.pods.items }}", body)
        }),
        ..Default::default()
    }
}

#[test]
fn nested_for_each_one_level_deep_is_accepted() {
    let step = loop_step(
        "clusters",
        vec![
            tool_sub("pods"),
            nested_loop("per_pod", "pod", vec![tool_sub("describe")]),
        ],
    );
    assert_valid(with_step(step).validate());
}

#[test]
fn for_each_nested_two_levels_deep_is_refused() {
    let step = loop_step(
        "clusters",
        vec![nested_loop(
            "per_pod",
            "pod",
            vec![nested_loop("per_container", "container", vec![tool_sub("logs")])],
        )],
    );
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.steps[0].forEach.steps[0].forEach",
        "sub-step 0 (per_container): a nested forEach body holds tool calls only (forEach nests \
         one level deep)",
    );
}

#[test]
fn nested_loop_variable_equal_to_the_outer_one_is_refused() {
    let step = loop_step(
        "clusters",
        vec![nested_loop("per_pod", "item", vec![tool_sub("describe")])],
    );
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.steps[0].forEach.as",
        "sub-step 0 (per_pod): forEach.as 'item' must differ from the outer loop's",
    );
}

#[test]
fn nested_sub_step_id_equal_to_an_outer_body_id_is_refused() {
    let step = loop_step(
        "clusters",
        vec![tool_sub("pods"), nested_loop("per_pod", "pod", vec![tool_sub("pods")])],
    );
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].forEach.steps[1].forEach.steps[0].id",
        "duplicate sub-step id 'pods' found",
    );
}

#[test]
fn for_each_in_a_parallel_group_is_refused() {
    let step = WorkflowStep {
        id: "group".to_owned(),
        parallel: Some(vec![nested_loop("loop", "x", vec![tool_sub("a")])]),
        ..Default::default()
    };
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].parallel[0].forEach",
        "sub-step 0 (loop): forEach is only allowed in a forEach body, not in parallel or \
         onFailure",
    );
}

#[test]
fn for_each_in_on_failure_is_refused() {
    let mut wf = workflow();
    wf.spec.on_failure = vec![nested_loop("cleanup", "x", vec![tool_sub("a")])];
    assert_only(
        wf.validate(),
        "spec.onFailure[0].forEach",
        "sub-step 0 (cleanup): forEach is only allowed in a forEach body, not in parallel or \
         onFailure",
    );
}

#[test]
fn condition_without_a_source_is_refused() {
    let mut step = tool_step("a", "t");
    step.condition = Some(WorkflowCondition::default());
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].condition",
        "step a: condition requires exactly one of template, tool, or fromStep",
    );
}

#[test]
fn condition_template_with_tool_or_from_step_is_refused() {
    let mut condition = from_step_condition("list");
    condition.template = Some("{{ eq .input.env \"prod\" }}".to_owned());
    let mut step = tool_step("a", "t");
    step.condition = Some(condition);
    assert_only(
        with_second_step(step).validate(),
        "spec.steps[1].condition",
        "step a: condition.template is mutually exclusive with tool/fromStep",
    );
}

#[test]
fn condition_with_tool_and_from_step_is_refused() {
    let mut condition = from_step_condition("list");
    condition.tool = Some("x_check".to_owned());
    let mut step = tool_step("a", "t");
    step.condition = Some(condition);
    assert_only(
        with_second_step(step).validate(),
        "spec.steps[1].condition",
        "step a: condition: tool and fromStep are mutually exclusive (set exactly one of \
         template, tool, or fromStep)",
    );
}

#[test]
fn tool_or_from_step_condition_without_expectation_is_refused() {
    let message = "step a: a tool or fromStep condition requires expect or expectNot";
    let mut step = tool_step("a", "t");
    step.condition = Some(WorkflowCondition {
        tool: Some("x_check".to_owned()),
        ..Default::default()
    });
    assert_only(with_step(step.clone()).validate(), "spec.steps[0].condition", message);
    step.condition = Some(WorkflowCondition {
        from_step: Some("list".to_owned()),
        ..Default::default()
    });
    assert_only(
        with_second_step(step.clone()).validate(),
        "spec.steps[1].condition",
        message,
    );
    step.condition = Some(WorkflowCondition {
        from_step: Some("list".to_owned()),
        expect_not: Some(WorkflowConditionExpectation::default()),
        ..Default::default()
    });
    assert_valid(with_second_step(step).validate());
}

#[test]
fn template_condition_needs_no_expectation() {
    let mut step = tool_step("a", "t");
    step.condition = Some(WorkflowCondition {
        template: Some("{{ eq .input.env \"prod\" }}".to_owned()),
        ..Default::default()
    });
    assert_valid(with_step(step).validate());
}

#[test]
fn from_step_naming_no_earlier_step_is_refused() {
    let mut step = tool_step("a", "t");
    step.condition = Some(from_step_condition("later"));
    let mut wf = with_second_step(step);
    wf.spec.steps.push(tool_step("later", "t"));
    assert_only(
        wf.validate(),
        "spec.steps[1].condition.fromStep",
        "step a condition references non-existent step result: later (condition.fromStep must name an earlier step)",
    );
}

#[test]
fn from_step_naming_the_step_itself_is_refused() {
    let mut step = tool_step("a", "t");
    step.condition = Some(from_step_condition("a"));
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].condition.fromStep",
        "step a condition references non-existent step result: a (condition.fromStep must name an earlier step)",
    );
}

#[test]
fn from_step_naming_a_parallel_sibling_is_refused() {
    let mut second = tool_sub("b");
    second.condition = Some(from_step_condition("a"));
    let step = WorkflowStep {
        id: "group".to_owned(),
        parallel: Some(vec![tool_sub("a"), second]),
        ..Default::default()
    };
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].parallel[1].condition.fromStep",
        "sub-step 1 (b) condition references non-existent step result: a (condition.fromStep must name an earlier step)",
    );
}

#[test]
fn from_step_naming_earlier_steps_and_sub_steps_is_accepted() {
    let mut in_body = tool_sub("describe");
    in_body.condition = Some(from_step_condition("pods"));
    let mut after = tool_step("after", "t");
    after.condition = Some(from_step_condition("describe"));
    let mut wf = with_second_step(loop_step("loop", vec![tool_sub("pods"), in_body]));
    wf.spec.steps.push(after);
    let mut rollback = tool_sub("rollback");
    rollback.condition = Some(from_step_condition("after"));
    wf.spec.on_failure = vec![rollback];
    assert_valid(wf.validate());
}

#[test]
fn paginate_on_a_for_each_step_is_refused() {
    let mut step = loop_step("loop", vec![tool_sub("inner")]);
    step.paginate = Some(WorkflowPaginate::default());
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].paginate",
        "step loop: paginate is only allowed on a tool call",
    );
}

#[test]
fn paginate_max_pages_outside_1_to_1000_is_refused() {
    for (pages, ok) in [(1, true), (1000, true), (0, false), (1001, false)] {
        let mut step = tool_step("a", "t");
        step.paginate = Some(WorkflowPaginate {
            max_pages: pages,
            ..Default::default()
        });
        let result = with_step(step).validate();
        if ok {
            assert_valid(result);
        } else {
            assert_only(
                result,
                "spec.steps[0].paginate.maxPages",
                &format!("step a: paginate.maxPages must be between 1 and 1000 (is {pages})"),
            );
        }
    }
}

#[test]
fn paginate_with_an_empty_field_is_refused() {
    let mut step = tool_step("a", "t");
    step.paginate = Some(WorkflowPaginate {
        token_arg: String::new(),
        ..Default::default()
    });
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].paginate.tokenArg",
        "step a: paginate.tokenArg must not be empty",
    );
}

#[test]
fn empty_jq_program_is_refused() {
    let mut step = tool_step("a", "t");
    step.jq = Some("  ".to_owned());
    assert_only(
        with_step(step).validate(),
        "spec.steps[0].jq",
        "step a: jq must not be empty",
    );
}

#[test]
fn jq_is_not_compiled_here() {
    let mut step = tool_step("a", "t");
    step.jq = Some("[.items[] | ".to_owned());
    assert_valid(with_step(step).validate());
}

#[test]
fn output_or_deprecated_store_returns_the_result() {
    let mut step = tool_step("a", "t");
    assert!(!step.returns_output());
    step.store = Some(true);
    assert!(step.returns_output());
    step.store = Some(false);
    step.output = Some(true);
    assert!(step.returns_output());
    let mut sub = tool_sub("b");
    assert!(!sub.returns_output());
    sub.store = Some(true);
    assert!(sub.returns_output());
}

#[test]
fn output_decides_over_store_when_both_are_set() {
    let mut step = tool_step("a", "t");
    step.output = Some(false);
    step.store = Some(true);
    assert!(!step.returns_output(), "output: false wins over store: true");
    step.output = Some(true);
    step.store = Some(false);
    assert!(step.returns_output(), "output: true wins over store: false");
    let mut sub = tool_sub("b");
    sub.output = Some(false);
    sub.store = Some(true);
    assert!(!sub.returns_output());
}

const SNAKE_CASE: &str = r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: Workflow
metadata: {name: legacy}
spec:
  steps:
    - id: risky
      tool: external_api_call
      allow_failure: true
      store: true
      args: {store: keep, allow_failure: "is the tool's business"}
    - id: cleanup
      tool: cleanup_resources
      condition:
        from_step: risky
        expect_not:
          success: true
          json_path: {status: ok}
    - id: loop
      forEach:
        items: "{{ .input.items }}"
        steps:
          - id: inner
            tool: t
            allow_failure: true
  onFailure:
    - id: rollback
      tool: restore
      store: true
"#;

#[test]
fn snake_case_aliases_parse() {
    let wf: Workflow = yaml(SNAKE_CASE);
    assert_valid(wf.validate());
    let risky = &wf.spec.steps[0];
    assert!(risky.allow_failure && risky.store == Some(true) && risky.returns_output());
    let condition = wf.spec.steps[1].condition.as_ref().expect("condition");
    assert_eq!(condition.from_step.as_deref(), Some("risky"));
    let expect_not = condition.expect_not.as_ref().expect("expectNot");
    assert_eq!(expect_not.json_path.get("status"), Some(&json!("ok")));
    let inner = &wf.spec.steps[2].for_each.as_ref().expect("forEach").steps[0];
    assert!(inner.allow_failure);
}

#[test]
fn deprecated_spellings_are_reported_with_their_paths() {
    let doc: Value = yaml(SNAKE_CASE);
    let found: Vec<String> = deprecated_spellings(&doc).iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        vec![
            "spec.steps[0].allow_failure is deprecated: use allowFailure instead of allow_failure",
            "spec.steps[0].store is deprecated: use output instead of store",
            "spec.steps[1].condition.from_step is deprecated: use fromStep instead of from_step",
            "spec.steps[1].condition.expect_not is deprecated: use expectNot instead of \
             expect_not",
            "spec.steps[1].condition.expect_not.json_path is deprecated: use jsonPath instead of \
             json_path",
            "spec.steps[2].forEach.steps[0].allow_failure is deprecated: use allowFailure \
             instead of allow_failure",
            "spec.onFailure[0].store is deprecated: use output instead of store",
        ]
    );
}

#[test]
fn deprecated_spellings_of_a_bare_spec_have_spec_relative_paths() {
    let doc = json!({
        "steps": [{"id": "a", "tool": "t", "parallel": [{"id": "b", "tool": "t", "store": true}]}]
    });
    assert_eq!(
        deprecated_spellings(&doc),
        vec![DeprecatedField {
            path: "steps[0].parallel[0].store".to_owned(),
            deprecated: "store",
            replacement: "output",
        }]
    );
}

#[test]
fn camel_case_document_has_no_deprecated_spellings() {
    let doc = serde_json::to_value(workflow()).expect("serializes");
    assert!(deprecated_spellings(&doc).is_empty());
    assert!(deprecated_spellings(&json!("not an object")).is_empty());
}

#[test]
fn both_spellings_of_one_field_do_not_parse() {
    let error = yaml_error::<Workflow>(
        "metadata: {name: a}\nspec: {steps: [{id: a, tool: t, allowFailure: true, allow_failure: true}]}",
    );
    assert!(error.contains("duplicate field `allowFailure`"), "{error}");
}

#[test]
fn a_workflow_with_several_violations_reports_all_of_them() {
    let wf: Workflow = yaml(
        r#"
metadata: {name: ""}
spec:
  args:
    x: {}
  steps:
    - id: ""
      tool: t
    - id: dup
      tool: t
    - id: dup
    - id: loop
      forEach:
        items: ""
        parallelism: 0
        steps:
          - id: inner
            condition: {tool: check}
  onFailure:
    - id: undo
"#,
    );
    let result = wf.validate();
    let errors = result.clone().expect_err("refused");
    assert_eq!(
        errors.to_lines(),
        vec![
            "metadata.name: workflow name is required",
            "spec.args.x.type: arg 'x': type is required (one of string, integer, boolean, \
             number, object, array)",
            "spec.steps[0].id: step 0: step ID cannot be empty",
            "spec.steps[2].id: duplicate step ID 'dup' found",
            "spec.steps[2]: step 2 (dup): one of tool, forEach, or parallel is required",
            "spec.steps[3].forEach.items: step loop: forEach.items is required",
            "spec.steps[3].forEach.parallelism: step loop: forEach.parallelism must be between \
             1 and 50 (is 0)",
            "spec.steps[3].forEach.steps[0]: sub-step 0 (inner): one of tool or forEach is \
             required",
            "spec.steps[3].forEach.steps[0].condition: sub-step 0 (inner): a tool or fromStep \
             condition requires expect or expectNot",
            "spec.onFailure[0]: sub-step 0 (undo): tool is required",
        ]
    );
    assert_has(&result, "spec.steps[0].id", "step 0: step ID cannot be empty");
    assert_eq!(errors.to_string().lines().count(), 10);
}

#[test]
fn deprecated_spellings_serialize_in_camel_case() {
    let wf: Workflow = yaml(SNAKE_CASE);
    let json = serde_json::to_value(&wf).expect("serializes");
    assert_eq!(json["spec"]["steps"][0]["allowFailure"], true);
    assert_eq!(json["spec"]["steps"][0]["store"], true);
    assert!(json["spec"]["steps"][0].get("allow_failure").is_none());
    let back: Workflow = serde_json::from_value(json).expect("parses");
    assert_eq!(back, wf);
}
