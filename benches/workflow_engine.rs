//! The workflow engine's own cost: `WorkflowEngine::run` against an in-process tool that answers
//! at once, so what is measured is the engine (argument templates, result conversion, the
//! context, step records, the response), not a downstream server.
//!
//! The tool service returns a fixed `{"ok":true}` text (the `list` tool of `output_template`
//! returns a fixed 1,000-item list); there is no observer, and no store except in the `*_store`
//! variants, which record every run in a `MemoryExecutionStore` (start and end, through the
//! payload guard, as a gateway does) and delete the record after the run.
//!
//! Groups:
//! - `sequential/{1_step,10_steps}[_store]`: tool steps whose 2-3 arguments are templates over
//!   `.input` and the previous step's result (bare paths, text with several actions, a `printf`);
//! - `foreach/1000_items_p{1,50}[_store]`: a `forEach` over 1,000 small objects with one tool
//!   sub-step whose arguments read `.vars.item`;
//! - `output_template/{large,default_response}`: one step returning 1,000 items (about 110 KB of
//!   JSON text), then an output template of 20 templated leaves and 2 constants (paths into the
//!   items, `len`, `printf`, `index`, mixed text, the whole list once), or the default response;
//! - `foreach_memory/10000_items`: a 10,000-item `forEach` run. When it is selected, first the
//!   peak RSS growth of one run (`VmHWM` in `/proc/self/status`, reset through
//!   `/proc/self/clear_refs`) is measured at 1,000 and 10,000 items, sequential and 50 at once,
//!   each in a fresh child process of this binary (the allocator keeps freed memory, so runs in
//!   one process would hide each other), and printed to stderr; once more at 10,000 items with
//!   a tool whose answer carries a 1,000-byte string, to count how many copies of each
//!   iteration's result a run keeps.
//!
//! Before measuring, each workflow runs once against a recording tool and the rendered
//! arguments and responses are checked; every measured run asserts it completed.
//!
//! ```text
//! cargo bench --bench workflow_engine -- --warm-up-time 1 --measurement-time 3
//! cargo bench --bench workflow_engine -- 'foreach/'          # one group
//! ```
//!
//! Numbers and the command that produced them: `benches/README.md`.

use std::{
    hint::black_box,
    process::Command,
    sync::{Arc, Mutex},
    time::Duration,
};

use criterion::{BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group};
use muster::{
    core::{BoxToolService, CallContext, JsonObject, ToolCall, ToolError, crd::Workflow},
    workflow::{
        engine::{CompiledWorkflow, RunOutcome, WorkflowEngine},
        record::MemoryExecutionStore,
    },
};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tower::ServiceExt;

/// The environment variable that makes this binary a memory-measuring child:
/// `<items>:<parallelism>:<tool>`.
const MEMORY_CASE_ENV: &str = "MUSTER_BENCH_WORKFLOW_MEMORY_CASE";

/// What the no-op tool answers.
const OK_TEXT: &str = r#"{"ok":true}"#;

/// The length of the `payload` string of the `kb` tool's answer (`foreach_memory` only).
const KB_PAYLOAD: usize = 1_000;

/// Items in the `list` tool's answer (`output_template`).
const LIST_ITEMS: usize = 1_000;

/// A tool service that answers every call at once with a fixed text: `list` with the
/// 1,000-item document, `kb` with `{"ok":true,"payload":"xx..."}` (1,000 `x`), anything else
/// with `{"ok":true}`.
fn noop_tools() -> BoxToolService {
    let list: Arc<str> = Arc::from(list_document().to_string());
    let kb: Arc<str> = Arc::from(json!({"ok": true, "payload": "x".repeat(KB_PAYLOAD)}).to_string());
    BoxToolService::new(tower::service_fn(move |call: ToolCall| {
        let text = match call.name.as_str() {
            "list" => list.to_string(),
            "kb" => kb.to_string(),
            _ => OK_TEXT.to_owned(),
        };
        std::future::ready(Ok::<_, ToolError>(
            CallToolResult::success(vec![ContentBlock::text(text)]).into(),
        ))
    }))
}

/// The same answers, with every call's name and arguments kept for the checks.
fn recording_tools(calls: Arc<Mutex<Vec<(String, Value)>>>) -> BoxToolService {
    let tools = noop_tools();
    BoxToolService::new(tower::service_fn(move |call: ToolCall| {
        calls
            .lock()
            .expect("the calls lock is never poisoned")
            .push((call.name.clone(), Value::Object(call.arguments.clone())));
        tools.clone().oneshot(call)
    }))
}

/// The `list` tool's answer: a page of `LIST_ITEMS` pods.
fn list_document() -> Value {
    let items: Vec<Value> = (0..LIST_ITEMS)
        .map(|i| {
            json!({
                "id": i,
                "name": format!("pod-{i}"),
                "namespace": format!("ns-{}", i % 10),
                "ready": i % 7 != 0,
                "restarts": i % 5,
                "labels": {"app": format!("app-{}", i % 20), "tier": "web"},
            })
        })
        .collect();
    json!({"kind": "PodList", "total": LIST_ITEMS, "page": 1, "items": items})
}

fn compile(name: &str, spec: Value) -> CompiledWorkflow {
    let workflow: Workflow =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a Workflow document");
    CompiledWorkflow::compile(workflow).unwrap_or_else(|e| panic!("{name} does not compile: {:?}", e.to_lines()))
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// `steps` tool steps; step 1 reads only `.input`, every later one `.input` and the previous
/// step's result.
fn sequential_workflow(steps: usize) -> CompiledWorkflow {
    let steps: Vec<Value> = (1..=steps)
        .map(|i| {
            let args = if i == 1 {
                json!({
                    "name": "{{ .input.name }}",
                    "replicas": "{{ .input.replicas }}",
                    "tag": "v-{{ .input.env }}",
                })
            } else {
                let prev = format!("s{}", i - 1);
                json!({
                    "name": format!("{{{{ .input.name }}}}-{{{{ .results.{prev}.ok }}}}"),
                    "previous": format!("{{{{ .results.{prev}.ok }}}}"),
                    "slot": format!("{{{{ printf \"%s-%02d\" .input.env {i} }}}}"),
                })
            };
            json!({"id": format!("s{i}"), "tool": "noop", "args": args})
        })
        .collect();
    compile(
        "sequential",
        json!({
            "args": {
                "name": {"type": "string", "required": true},
                "env": {"type": "string", "default": "production"},
                "replicas": {"type": "integer", "default": 3},
            },
            "steps": steps,
        }),
    )
}

fn sequential_input() -> JsonObject {
    object(json!({"name": "shop"}))
}

/// A loop over `.input.items` whose one sub-step calls `tool`.
fn foreach_workflow(parallelism: u32, tool: &str) -> CompiledWorkflow {
    compile(
        "foreach",
        json!({
            "args": {"items": {"type": "array", "required": true}, "env": {"type": "string", "default": "production"}},
            "steps": [{"id": "each", "forEach": {"items": "{{ .input.items }}", "parallelism": parallelism, "steps": [
                {"id": "touch", "tool": tool, "args": {
                    "name": "{{ .vars.item.name }}",
                    "zone": "{{ .vars.item.zone }}",
                    "label": "{{ .input.env }}-{{ .vars.item.name }}",
                }},
            ]}}],
            "output": {"count": "{{ len .results.each }}"},
        }),
    )
}

fn foreach_input(items: usize) -> JsonObject {
    let items: Vec<Value> = (0..items)
        .map(|i| json!({"name": format!("item-{i}"), "zone": format!("zone-{}", i % 3), "weight": i}))
        .collect();
    object(json!({"items": items}))
}

/// One `list` step, then the output template (`with_output`) or the default response.
fn output_workflow(with_output: bool) -> CompiledWorkflow {
    let mut spec = json!({
        "args": {"cluster": {"type": "string", "required": true}},
        "steps": [{"id": "list", "tool": "list", "args": {"cluster": "{{ .input.cluster }}"}}],
    });
    if with_output {
        spec["output"] = json!({
            "kind": "{{ .results.list.kind }}",
            "count": "{{ len .results.list.items }}",
            "total": "{{ .results.list.total }}",
            "first": "{{ .results.list.items[0] }}",
            "first_name": "{{ .results.list.items[0].name }}",
            "middle_namespace": "{{ .results.list.items[500].namespace }}",
            "last_id": "{{ .results.list.items[999].id }}",
            "last_labels": "{{ .results.list.items[999].labels }}",
            "app_42": "{{ .results.list.items[42].labels.app }}",
            "ready_42": "{{ .results.list.items[42].ready }}",
            "restarts_7": "{{ .results.list.items[7].restarts }}",
            "summary": "{{ printf \"%d pods in %s\" (len .results.list.items) .input.cluster }}",
            "title": "Pods of {{ .input.cluster }} (page {{ .results.list.page }})",
            "tenth": "{{ (index .results.list.items 10).name }}",
            "ref": concat!(
                "{{ .input.cluster }}/{{ (index .results.list.items 3).namespace }}/",
                "{{ (index .results.list.items 3).name }}",
            ),
            "cluster": "{{ .input.cluster }}",
            "pair": ["{{ .results.list.items[1].name }}", "{{ .results.list.items[2].name }}"],
            "meta": {"source": "{{ .input.cluster }}", "generated": true, "items": "{{ .results.list.items }}"},
            "constant": "no template here",
        });
    }
    compile("output", spec)
}

fn output_input() -> JsonObject {
    object(json!({"cluster": "eu-west"}))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Runs once; with a store, deletes the record afterwards so the store does not grow.
async fn run_once(engine: &WorkflowEngine, workflow: &CompiledWorkflow, args: JsonObject) -> RunOutcome {
    let outcome = engine
        .run(workflow, args, CallContext::default())
        .await
        .expect("the arguments fit");
    assert!(!outcome.is_error, "the run failed: {}", outcome.response);
    if let Some(store) = engine.store() {
        assert!(store.delete(&outcome.execution_id).expect("the memory store answers"));
    }
    outcome
}

/// Each workflow once against the recording tool: the rendered arguments and the responses.
fn check_workflows(rt: &Runtime) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let engine = WorkflowEngine::new(recording_tools(Arc::clone(&calls)));
    let take = || std::mem::take(&mut *calls.lock().expect("the calls lock is never poisoned"));

    let outcome = rt.block_on(run_once(&engine, &sequential_workflow(10), sequential_input()));
    assert_eq!(
        outcome.response["ok"],
        json!(true),
        "the last result is merged into the response"
    );
    let seen = take();
    assert_eq!(seen.len(), 10);
    assert_eq!(seen[0].1, json!({"name": "shop", "replicas": 3, "tag": "v-production"}));
    assert_eq!(
        seen[9].1,
        json!({"name": "shop-true", "previous": true, "slot": "production-10"})
    );

    for parallelism in [1, 50] {
        let outcome = rt.block_on(run_once(
            &engine,
            &foreach_workflow(parallelism, "noop"),
            foreach_input(1_000),
        ));
        assert_eq!(outcome.response, json!({"count": 1_000}));
        let seen = take();
        assert_eq!(seen.len(), 1_000);
        assert_eq!(
            seen[999].1,
            json!({"name": "item-999", "zone": "zone-0", "label": "production-item-999"})
        );
    }

    let outcome = rt.block_on(run_once(&engine, &output_workflow(true), output_input()));
    let r = &outcome.response;
    assert_eq!(r["count"], json!(1_000));
    assert_eq!(r["total"], json!(1_000));
    assert_eq!(r["first_name"], "pod-0");
    assert_eq!(r["last_id"], json!(999));
    assert_eq!(r["ready_42"], json!(false));
    assert_eq!(r["summary"], "1000 pods in eu-west");
    assert_eq!(r["title"], "Pods of eu-west (page 1)");
    assert_eq!(r["tenth"], "pod-10");
    assert_eq!(r["ref"], "eu-west/ns-3/pod-3");
    assert_eq!(r["pair"], json!(["pod-1", "pod-2"]));
    assert_eq!(r["meta"]["items"].as_array().map(Vec::len), Some(1_000));
    let outcome = rt.block_on(run_once(&engine, &output_workflow(false), output_input()));
    let r = &outcome.response;
    assert_eq!(r["status"], "completed");
    assert_eq!(r["items"].as_array().map(Vec::len), Some(1_000), "the list is merged");
    assert_eq!(take().len(), 2);
    eprintln!("workflow_engine: every workflow renders the expected arguments and responses");
}

/// Measures a run of `workflow` over `args` with the engine with and without a store.
fn bench_engine_pair(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &Runtime,
    id: &str,
    workflow: &CompiledWorkflow,
    args: &JsonObject,
    with_store: bool,
) {
    let plain = WorkflowEngine::new(noop_tools());
    group.bench_function(id, |b| {
        b.iter_batched(
            || args.clone(),
            |args| rt.block_on(run_once(&plain, black_box(workflow), args)),
            BatchSize::SmallInput,
        );
    });
    if with_store {
        let stored = WorkflowEngine::new(noop_tools()).with_store(Arc::new(MemoryExecutionStore::new()));
        group.bench_function(format!("{id}_store"), |b| {
            b.iter_batched(
                || args.clone(),
                |args| rt.block_on(run_once(&stored, black_box(workflow), args)),
                BatchSize::SmallInput,
            );
        });
    }
}

fn sequential(c: &mut Criterion) {
    let rt = runtime();
    check_workflows(&rt);
    let mut group = c.benchmark_group("sequential");
    for steps in [1, 10] {
        let workflow = sequential_workflow(steps);
        group.throughput(Throughput::Elements(steps as u64));
        let id = if steps == 1 {
            "1_step".to_owned()
        } else {
            format!("{steps}_steps")
        };
        bench_engine_pair(&mut group, &rt, &id, &workflow, &sequential_input(), true);
    }
    group.finish();
}

fn foreach(c: &mut Criterion) {
    let rt = runtime();
    let args = foreach_input(1_000);
    let mut group = c.benchmark_group("foreach");
    group.sampling_mode(SamplingMode::Flat).sample_size(20);
    group.throughput(Throughput::Elements(1_000));
    for parallelism in [1, 50] {
        let workflow = foreach_workflow(parallelism, "noop");
        let id = format!("1000_items_p{parallelism}");
        bench_engine_pair(&mut group, &rt, &id, &workflow, &args, parallelism == 1);
    }
    group.finish();
}

fn output_template(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("output_template");
    group.sampling_mode(SamplingMode::Flat).sample_size(30);
    for (id, with_output) in [("large", true), ("default_response", false)] {
        let workflow = output_workflow(with_output);
        bench_engine_pair(&mut group, &rt, id, &workflow, &output_input(), false);
    }
    group.finish();
}

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`), in KiB.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// In a child: one run of the `items`-item forEach calling `tool`, printing the peak RSS
/// growth. `case` is `<items>:<parallelism>:<tool>`.
fn memory_child(case: &str) {
    let parsed = match case.split(':').collect::<Vec<_>>().as_slice() {
        [n, p, tool] => n
            .parse::<usize>()
            .ok()
            .zip(p.parse::<u32>().ok())
            .map(|(n, p)| (n, p, *tool)),
        _ => None,
    };
    let (items, parallelism, tool) =
        parsed.unwrap_or_else(|| panic!("{MEMORY_CASE_ENV} is <items>:<parallelism>:<tool>, not {case:?}"));
    let rt = runtime();
    let engine = WorkflowEngine::new(noop_tools());
    let workflow = foreach_workflow(parallelism, tool);
    // Warm the engine (lazy statics, runtime threads) on a small run, then build the input.
    rt.block_on(run_once(&engine, &workflow, foreach_input(10)));
    let args = foreach_input(items);
    let input_bytes = serde_json::to_string(&args).map(|s| s.len()).unwrap_or_default();
    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0+).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kib(if reset { "VmRSS" } else { "VmHWM" }).expect("/proc/self/status has VmRSS and VmHWM");
    let outcome = rt.block_on(run_once(&engine, &workflow, args));
    let peak = status_kib("VmHWM").expect("/proc/self/status has VmHWM");
    assert_eq!(outcome.response, json!({"count": items}));
    drop(outcome);
    let growth = peak.saturating_sub(before);
    eprintln!(
        "foreach_memory/{items}_items_p{parallelism} ({tool}): peak RSS growth during the run {growth} KiB \
         ({} bytes per item; input {input_bytes} bytes of JSON){}",
        growth * 1024 / items as u64,
        if reset {
            ""
        } else {
            " [VmHWM not reset: the figure is a lower bound]"
        },
    );
}

/// The memory figures, each from a fresh child process of this binary.
fn measure_memory_in_children() {
    let exe = std::env::current_exe().expect("the bench binary's path");
    for case in ["1000:1:noop", "10000:1:noop", "10000:50:noop", "10000:1:kb"] {
        let status = Command::new(&exe)
            .env(MEMORY_CASE_ENV, case)
            .status()
            .expect("the bench binary runs as a child");
        assert!(status.success(), "the memory child for {case} failed: {status}");
    }
}

/// The 10,000-item run timed; the memory figures first, when the benchmark is selected.
fn foreach_memory(c: &mut Criterion) {
    let rt = runtime();
    let args = foreach_input(10_000);
    let workflow = foreach_workflow(1, "noop");
    let mut group = c.benchmark_group("foreach_memory");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    group.throughput(Throughput::Elements(10_000));
    let engine = WorkflowEngine::new(noop_tools());
    let mut memory_measured = false;
    group.bench_function(BenchmarkId::from_parameter("10000_items"), |b| {
        // Criterion calls this for warm-up and for every sample: measure once. Only what runs
        // inside `iter_batched` is timed.
        if !std::mem::replace(&mut memory_measured, true) {
            measure_memory_in_children();
        }
        b.iter_batched(
            || args.clone(),
            |args| rt.block_on(run_once(&engine, black_box(&workflow), args)),
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = foreach_memory, sequential, foreach, output_template
}

// `criterion_main!` with one addition: the binary doubles as the memory-measuring child.
fn main() {
    if let Ok(case) = std::env::var(MEMORY_CASE_ENV) {
        memory_child(&case);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
