//! The engine against an in-process tool service (the gateway tests run it against real
//! downstream servers).

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use muster_core::{BoxToolService, CallContext, JsonObject, ToolCall, ToolError, crd::Workflow};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use super::*;
use crate::record::{ExecutionQuery, ExecutionStore, MemoryExecutionStore};

/// Tools: `echo` (its arguments back), `fail` (an error result with `message`), `pages`
/// (three pages of `items` linked by `continue`), `slow` (sleeps `ms`, tracking concurrency).
#[derive(Default)]
struct Tools {
    calls: Mutex<Vec<(String, Value)>>,
    running: AtomicUsize,
    peak: AtomicUsize,
}

impl Tools {
    fn service(self: &Arc<Self>) -> BoxToolService {
        let tools = Arc::clone(self);
        BoxToolService::new(tower::service_fn(move |call: ToolCall| {
            let tools = Arc::clone(&tools);
            async move { tools.call(call).await.map(Into::into) }
        }))
    }

    async fn call(&self, call: ToolCall) -> Result<CallToolResult, ToolError> {
        let args = Value::Object(call.arguments.clone());
        self.calls.lock().expect("lock").push((call.name.clone(), args.clone()));
        let text = |v: Value| Ok(CallToolResult::success(vec![ContentBlock::text(v.to_string())]));
        match call.name.as_str() {
            "echo" => text(args),
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
                args["message"].as_str().unwrap_or("failed").to_owned(),
            )])),
            "pages" => {
                let page = match args.get("continue").and_then(Value::as_str) {
                    None => json!({"items": [1, 2], "continue": "p2", "kind": "List"}),
                    Some("p2") => json!({"items": [3], "continue": "p3", "kind": "List"}),
                    _ => json!({"items": [4, 5], "continue": "", "kind": "List"}),
                };
                text(page)
            }
            "slow" => {
                let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
                self.peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(args["ms"].as_u64().unwrap_or(20))).await;
                self.running.fetch_sub(1, Ordering::SeqCst);
                text(args)
            }
            other => Err(ToolError::not_found(other)),
        }
    }

    fn called(&self, name: &str) -> Vec<Value> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, a)| a.clone())
            .collect()
    }
}

fn compile(spec: Value) -> CompiledWorkflow {
    let wf: Workflow = serde_json::from_value(json!({"metadata": {"name": "wf"}, "spec": spec})).expect("parses");
    CompiledWorkflow::compile(wf).unwrap_or_else(|e| panic!("invalid: {:?}", e.to_lines()))
}

fn args(v: Value) -> JsonObject {
    v.as_object().cloned().unwrap_or_default()
}

async fn run(spec: Value, input: Value) -> (RunOutcome, Arc<Tools>) {
    let tools = Arc::new(Tools::default());
    let engine = WorkflowEngine::new(tools.service());
    let outcome = engine
        .run(&compile(spec), args(input), CallContext::default())
        .await
        .expect("runs");
    (outcome, tools)
}

#[tokio::test]
async fn steps_see_earlier_results_and_arguments_keep_their_types() {
    let (outcome, tools) = run(
        json!({
            "args": {"version": {"type": "string"}, "replicas": {"type": "integer", "default": 3}},
            "steps": [
                {"id": "first", "tool": "echo", "args": {"n": "{{ .input.replicas }}", "v": "{{ .input.version }}",
                  "padded": "{{ printf \"%02d\" 8 }}", "list": ["{{ .input.replicas }}", "x-{{ .input.version }}"]}},
                {"id": "second", "tool": "echo", "args": {"from": "{{ .results.first.n }}", "ctx": "{{ .context.first.v }}",
                  "all": "{{ .results.first.list }}", "len": "{{ len .results.first.list }}"}}
            ]
        }),
        json!({"version": "1.20"}),
    )
    .await;
    assert!(!outcome.is_error, "{}", outcome.response);
    assert_eq!(
        tools.called("echo")[0],
        json!({"n": 3, "v": "1.20", "padded": "08", "list": [3, "x-1.20"]})
    );
    assert_eq!(
        tools.called("echo")[1],
        json!({"from": 3, "ctx": "1.20", "all": [3, "x-1.20"], "len": 2})
    );
    // The last step's object result is merged into the default response.
    let r = &outcome.response;
    assert_eq!(r["status"], "completed");
    assert_eq!(r["workflow"], "wf");
    assert_eq!(r["input"], json!({"version": "1.20", "replicas": 3}));
    assert_eq!(r["from"], 3);
    assert_eq!(r["template_vars"], json!(["input.replicas", "input.version"]));
    assert_eq!(r["steps"].as_array().map(Vec::len), Some(2));
    assert!(r["steps"][0].get("result").is_none(), "results only for output steps");
}

#[tokio::test]
async fn conditions_gate_steps_by_template_tool_and_earlier_step() {
    let (outcome, tools) = run(
        json!({
            "args": {"env": {"type": "string"}},
            "steps": [
                {"id": "prod_only", "tool": "echo", "args": {"x": 1},
                 "condition": {"template": "{{ eq .input.env \"production\" }}"}},
                {"id": "check", "tool": "echo", "args": {"status": "connected", "items": [{"name": "a"}, {"name": "b"}]}},
                {"id": "by_path", "tool": "echo", "args": {"x": 2}, "output": true,
                 "condition": {"fromStep": "check", "expect": {"success": true, "jsonPath": {"status": "connected", "items[1].name": "b"}}}},
                {"id": "by_template_key", "tool": "echo", "args": {"x": 3},
                 "condition": {"tool": "echo", "args": {"v": "{{ .input.env }}"},
                   "expect": {"jsonPath": {"{{ .result.v }}": "{{ .input.env }}"}}}},
                {"id": "not_when_connected", "tool": "echo", "args": {"x": 4},
                 "condition": {"fromStep": "check", "expectNot": {"jsonPath": {"status": "connected"}}}},
                {"id": "on_failure_of_skipped", "tool": "echo", "args": {"x": 5},
                 "condition": {"fromStep": "prod_only", "expect": {"success": true}}},
                {"id": "tool_fails", "tool": "echo", "args": {"x": 6},
                 "condition": {"tool": "fail", "expect": {"success": false}}}
            ]
        }),
        json!({"env": "staging"}),
    )
    .await;
    let ran: Vec<i64> = tools.called("echo").iter().filter_map(|a| a["x"].as_i64()).collect();
    assert_eq!(ran, [2, 3, 6], "{}", outcome.response);
    let steps = &outcome.response["steps"];
    assert_eq!(steps[0]["status"], "skipped");
    assert_eq!(steps[0]["condition_evaluation"], false);
    assert_eq!(steps[0]["condition_tool"], "template");
    assert_eq!(steps[2]["condition_tool"], "from_step:check");
    assert_eq!(steps[2]["condition_evaluation"], true);
    assert_eq!(steps[2]["result"], json!({"x": 2}));
    assert_eq!(steps[3]["condition_tool"], "echo");
    assert_eq!(steps[4]["status"], "skipped");
    assert_eq!(
        steps[5]["status"], "skipped",
        "a skipped step does not count as a success"
    );
}

#[tokio::test]
async fn a_loop_keeps_one_record_per_iteration_and_per_iteration_results() {
    let (outcome, tools) = run(
        json!({
            "args": {"names": {"type": "array"}},
            "steps": [
                {"id": "loop", "forEach": {"items": "{{ .input.names }}", "as": "n", "steps": [
                    {"id": "greet", "tool": "echo", "args": {"said": "hi {{ .vars.n }} #{{ .vars.n_index }}"}, "output": true},
                    {"id": "only_b", "tool": "echo", "args": {"b": "{{ .vars.n }}"},
                     "condition": {"template": "{{ eq .vars.n \"b\" }}"}}
                ]}},
                {"id": "after", "tool": "echo", "args": {
                    "first": "{{ .results.greet_0.said }}", "last": "{{ .results.greet.said }}",
                    "b": "{{ .results.only_b.b }}", "records": "{{ len .results.loop }}",
                    "status": "{{ (index .results.loop 2).status }}"}}
            ]
        }),
        json!({"names": ["a", "b", "c"]}),
    )
    .await;
    assert!(!outcome.is_error, "{}", outcome.response);
    assert_eq!(
        tools.called("echo").last(),
        Some(&json!({"first": "hi a #0", "last": "hi c #2", "b": "b", "records": 3, "status": "completed"}))
    );
    let steps = outcome.response["steps"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&str> = steps.iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, ["greet", "only_b", "greet", "only_b", "greet", "only_b", "after"]);
    assert_eq!(steps[4]["result"], json!({"said": "hi c #2"}));
    assert_eq!(steps[5]["status"], "skipped");
}

#[tokio::test]
async fn a_skipped_sub_step_has_no_result_in_that_iteration() {
    let (outcome, _) = run(
        json!({
            "steps": [
                {"id": "loop", "forEach": {"items": "{{ .input.xs }}", "steps": [
                    {"id": "maybe", "tool": "echo", "args": {"v": "{{ .vars.item }}"},
                     "condition": {"template": "{{ eq .vars.item 1 }}"}}
                ]}, "output": true}
            ],
            "output": {"records": "{{ .results.loop }}", "last": "{{ .results.maybe.v }}"}
        }),
        json!({"xs": [1, 2]}),
    )
    .await;
    assert_eq!(
        outcome.response["records"],
        json!([
            {"index": 0, "item": 1, "status": "completed", "results": {"maybe": {"v": 1}}},
            {"index": 1, "item": 2, "status": "completed", "results": {}}
        ])
    );
    assert_eq!(outcome.response["last"], 1, "the last iteration that ran it");
}

#[tokio::test]
async fn parallel_iterations_run_at_once_and_come_out_in_item_order() {
    let items: Vec<Value> = (0..12).map(|i| json!({"i": i, "ms": 30 - 2 * i})).collect();
    let (outcome, tools) = run(
        json!({
            "steps": [{"id": "loop", "forEach": {"items": "{{ .input.items }}", "parallelism": 4, "steps": [
                {"id": "work", "tool": "slow", "args": {"ms": "{{ .vars.item.ms }}", "i": "{{ .vars.item.i }}"}}
            ]}}],
            "output": {"order": "{{ .results.loop }}", "k5": "{{ .results.work_5.i }}"}
        }),
        json!({"items": items}),
    )
    .await;
    assert!(!outcome.is_error, "{}", outcome.response);
    let order: Vec<i64> = outcome.response["order"]
        .as_array()
        .map(|r| r.iter().filter_map(|x| x["results"]["work"]["i"].as_i64()).collect())
        .unwrap_or_default();
    assert_eq!(order, (0..12).collect::<Vec<_>>());
    assert_eq!(outcome.response["k5"], 5);
    let peak = tools.peak.load(Ordering::SeqCst);
    assert!((2..=4).contains(&peak), "peak concurrency {peak}");
}

#[tokio::test]
async fn a_nested_loop_keys_results_by_outer_and_inner_index() {
    let (outcome, _) = run(
        json!({
            "steps": [{"id": "outer", "forEach": {"items": "{{ .input.groups }}", "as": "g", "parallelism": 2, "steps": [
                {"id": "members", "tool": "echo", "args": {"items": "{{ .vars.g.members }}"}},
                {"id": "inner", "forEach": {"items": "{{ .results.members.items }}", "as": "m", "parallelism": 2, "steps": [
                    {"id": "visit", "tool": "echo", "args": {"who": "{{ .vars.g.name }}/{{ .vars.m }}"}}
                ]}}
            ]}}],
            "output": {
                "x": "{{ .results.visit_1_0.who }}",
                "inner_records": "{{ len (index .results.outer 1).results.inner }}",
                "visits": "{{ (index (index .results.outer 0).results.inner 1).results.visit.who }}"
            }
        }),
        json!({"groups": [{"name": "g0", "members": ["a", "b"]}, {"name": "g1", "members": ["c"]}]}),
    )
    .await;
    assert_eq!(
        outcome.response,
        json!({"x": "g1/c", "inner_records": 1, "visits": "g0/b"}),
        "{}",
        outcome.response
    );
}

#[tokio::test]
async fn a_parallel_group_runs_on_a_snapshot_and_merges_in_declaration_order() {
    let (outcome, tools) = run(
        json!({
            "steps": [
                {"id": "seed", "tool": "echo", "args": {"v": "base"}},
                {"id": "fan", "parallel": [
                    {"id": "p1", "tool": "slow", "args": {"ms": 40, "saw": "{{ .results.seed.v }}"}},
                    {"id": "p2", "tool": "slow", "args": {"ms": 5, "saw": "{{ .results.seed.v }}"}}
                ]},
                {"id": "combine", "tool": "echo", "args": {"both": "{{ .results.p1.saw }}|{{ .results.fan.p2.saw }}"}}
            ]
        }),
        json!({}),
    )
    .await;
    assert_eq!(outcome.response["both"], "base|base", "{}", outcome.response);
    assert_eq!(tools.peak.load(Ordering::SeqCst), 2);
    let ids: Vec<&str> = outcome.response["steps"]
        .as_array()
        .map(|s| s.iter().filter_map(|x| x["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["seed", "p1", "p2", "combine"]);
}

#[tokio::test]
async fn pagination_follows_tokens_and_reports_truncation() {
    let (outcome, tools) = run(
        json!({
            "steps": [
                {"id": "all", "tool": "pages", "paginate": {}},
                {"id": "two", "tool": "pages", "paginate": {"maxPages": 2}}
            ],
            "output": {"all": "{{ .results.all }}", "two": "{{ .results.two }}"}
        }),
        json!({}),
    )
    .await;
    assert_eq!(
        outcome.response["all"],
        json!({"items": [1, 2, 3, 4, 5], "continue": "", "kind": "List", "pagination": {"pages": 3, "truncated": false}})
    );
    assert_eq!(
        outcome.response["two"],
        json!({"items": [1, 2, 3], "continue": "p3", "kind": "List", "pagination": {"pages": 2, "truncated": true}})
    );
    assert_eq!(tools.called("pages").len(), 5);
}

#[tokio::test]
async fn jq_reshapes_a_result_with_input_and_vars_in_scope() {
    let (outcome, _) = run(
        json!({
            "args": {"suffix": {"type": "string"}},
            "steps": [
                {"id": "list", "tool": "echo", "args": {"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]},
                 "jq": "[.items[] | .metadata.name + $input.suffix]"},
                {"id": "loop", "forEach": {"items": "{{ .results.list }}", "steps": [
                    {"id": "e", "tool": "echo", "args": {"n": "{{ .vars.item }}"}}
                ]}, "jq": "[.[] | .results.e.n]"}
            ],
            "output": {"names": "{{ .results.list }}", "looped": "{{ .results.loop }}"}
        }),
        json!({"suffix": "!"}),
    )
    .await;
    assert_eq!(outcome.response, json!({"names": ["a!", "b!"], "looped": ["a!", "b!"]}));
}

#[tokio::test]
async fn a_failure_runs_on_failure_handlers_and_fails_the_run() {
    let (outcome, tools) = run(
        json!({
            "steps": [
                {"id": "risky", "tool": "fail", "args": {"message": "tolerated"}, "allowFailure": true},
                {"id": "inspect", "tool": "echo", "args": {"seen": "{{ .results.risky.isError }}"}, "output": true},
                {"id": "explode", "tool": "fail", "args": {"message": "main step exploded"}},
                {"id": "never", "tool": "echo", "args": {"never": true}}
            ],
            "onFailure": [
                {"id": "bad_cleanup", "tool": "fail", "args": {"message": "cleanup broke"}},
                {"id": "good_cleanup", "tool": "echo", "args": {"failed": "{{ .results.explode.error }}"}}
            ]
        }),
        json!({}),
    )
    .await;
    assert!(outcome.is_error);
    let r = &outcome.response;
    assert_eq!(r["status"], "failed");
    assert_eq!(r["error"], "step explode failed: main step exploded");
    let statuses: Vec<(&str, &str)> = r["steps"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|x| (x["id"].as_str().unwrap_or(""), x["status"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        statuses,
        [
            ("risky", "failed"),
            ("inspect", "completed"),
            ("explode", "failed"),
            ("bad_cleanup", "failed"),
            ("good_cleanup", "completed")
        ]
    );
    assert_eq!(r["steps"][1]["result"], json!({"seen": true}));
    assert_eq!(
        tools.called("echo").last(),
        Some(&json!({"failed": "main step exploded"}))
    );
    assert!(tools.called("echo").iter().all(|a| a.get("never").is_none()));
}

#[tokio::test]
async fn a_missing_key_fails_the_step_naming_the_key() {
    let (outcome, _) = run(
        json!({"steps": [{"id": "bad", "tool": "echo", "args": {"text": "{{ .context.non_existent_value }}"}}]}),
        json!({}),
    )
    .await;
    assert!(outcome.is_error);
    let error = outcome.response["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("failed to render arguments") && error.contains("non_existent_value"),
        "{error}"
    );
}

#[tokio::test]
async fn debug_shows_every_result_and_the_rendered_output() {
    let spec = json!({
        "steps": [{"id": "a", "tool": "echo", "args": {"v": 1}}],
        "output": {"v": "{{ .results.a.v }}"}
    });
    let (plain, _) = run(spec.clone(), json!({})).await;
    assert_eq!(plain.response, json!({"v": 1}));
    let (debug, _) = run(spec, json!({"_debug": true})).await;
    assert_eq!(debug.response["steps"][0]["result"], json!({"v": 1}));
    assert_eq!(debug.response["output"], json!({"v": 1}));
    assert!(debug.response["input"].get("_debug").is_none());

    let (broken, _) = run(
        json!({"steps": [{"id": "a", "tool": "echo"}], "output": {"v": "{{ .results.a.missing }}"}}),
        json!({}),
    )
    .await;
    assert!(broken.is_error);
    assert!(
        broken.response["output_error"]
            .as_str()
            .is_some_and(|e| e.contains("missing"))
    );
    assert_eq!(
        broken.response["steps"][0]["result"],
        json!({}),
        "a failed output shows every result"
    );
}

#[tokio::test]
async fn bad_input_and_deep_nesting_are_refused_before_anything_runs() {
    let tools = Arc::new(Tools::default());
    let store = Arc::new(MemoryExecutionStore::new());
    let engine = WorkflowEngine::new(tools.service()).with_store(store.clone());
    let wf = compile(
        json!({"args": {"name": {"type": "string", "required": true}}, "steps": [{"id": "a", "tool": "echo"}]}),
    );
    let err = engine
        .run(&wf, args(json!({})), CallContext::default())
        .await
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        ToolError::invalid_arguments("input validation failed: required field 'name' is missing").to_string()
    );
    let mut deep = CallContext::default();
    deep.extensions.insert(Nesting(MAX_NESTING));
    assert!(engine.run(&wf, args(json!({"name": "x"})), deep).await.is_err());
    assert!(tools.called("echo").is_empty());
    assert_eq!(store.list(&ExecutionQuery::default()).map(|p| p.total).unwrap_or(99), 0);
}

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<String>>);

impl RunObserver for Recorder {
    fn on_event(&self, event: &RunEvent<'_>) {
        let line = format!(
            "{:?} {} {}",
            event.kind,
            event.step_id.unwrap_or("-"),
            event.error.unwrap_or("")
        );
        self.0.lock().expect("lock").push(line.trim_end().to_owned());
    }
}

#[tokio::test]
async fn each_run_is_recorded_and_its_events_observed() {
    let tools = Arc::new(Tools::default());
    let store = Arc::new(MemoryExecutionStore::new());
    let recorder = Arc::new(Recorder::default());
    let engine = WorkflowEngine::new(tools.service())
        .with_store(store.clone())
        .with_observer(recorder.clone());
    let wf = compile(json!({"steps": [
        {"id": "a", "tool": "echo", "args": {"x": 1}, "condition": {"template": "true"}},
        {"id": "b", "tool": "fail", "args": {"message": "boom"}}
    ]}));
    let outcome = engine
        .run(&wf, args(json!({"k": "v"})), CallContext::default())
        .await
        .expect("runs");
    let record = store.get(&outcome.execution_id).expect("reads").expect("recorded");
    assert_eq!(record.spec.status, muster_core::crd::ExecutionStatus::Failed);
    assert_eq!(record.spec.error.as_deref(), Some("step b failed: boom"));
    assert_eq!(record.spec.input, Some(json!({"k": "v"})));
    let steps: Vec<(&str, &str)> = record
        .spec
        .steps
        .iter()
        .map(|s| (s.step_id.as_str(), s.status.as_str()))
        .collect();
    assert_eq!(steps, [("a", "completed"), ("b", "failed")]);
    assert_eq!(record.spec.steps[0].input, Some(json!({"x": 1})));
    assert_eq!(record.spec.steps[0].result, Some(json!({"x": 1})));
    assert_eq!(
        *recorder.0.lock().expect("lock"),
        [
            "ExecutionStarted -",
            "ConditionEvaluated a",
            "StepStarted a",
            "StepCompleted a",
            "StepStarted b",
            "StepFailed b boom",
            "ExecutionFailed - step b failed: boom"
        ]
    );
    let meta = outcome.into_call_result().meta.map(|m| m.0).unwrap_or_default();
    assert_eq!(meta[EXECUTION_META_KEY]["status"], "failed");
}

#[test]
fn compile_errors_name_every_bad_template_and_jq_program() {
    let wf: Workflow = serde_json::from_value(json!({"metadata": {"name": "wf"}, "spec": {
        "steps": [
            {"id": "a", "tool": "t", "args": {"x": "{{ nosuch .input.a }}"}},
            {"id": "b", "tool": "t", "jq": ".items[", "condition": {"template": "{{ if }}"}},
            {"id": "c", "forEach": {"items": "{{ .input.xs ", "steps": [{"id": "d", "tool": "t"}]}}
        ],
        "output": {"o": "{{ .results.a | nosuch }}"}
    }}))
    .expect("parses");
    let errors = CompiledWorkflow::compile(wf).expect_err("invalid").to_lines();
    let paths: Vec<&str> = errors.iter().map(|l| l.split(':').next().unwrap_or("")).collect();
    assert_eq!(
        paths,
        [
            "spec.steps[0].args.x",
            "spec.steps[1].condition.template",
            "spec.steps[1].jq",
            "spec.steps[2].forEach.items",
            "spec.output.o"
        ],
        "{errors:#?}"
    );
}
