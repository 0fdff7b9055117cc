//! What a gateway does with a downstream's `tools/call` result on its way to the client, per
//! result, in process: read it from the downstream's answer and write the client's answer.
//!
//! - `typed`: as before `ToolOutput`, and as rmcp does: the result read as rmcp's
//!   `CallToolResult`, then the JSON-RPC response written from it.
//! - `passed`: as the gateway does now: the result's JSON taken from the answer, checked for a
//!   result's shape (`ToolOutput::from_json`), and spliced into the response as it came.
//! - `passed_then_read`: `passed`, then read as the typed result too, as the `call_tool`
//!   envelope and workflow steps do (`ToolOutput::into_result`): what the shape check costs a
//!   caller that needs the typed result anyway.
//!
//! Results, each a downstream's whole answer line:
//! - `echo`: the echo server's answer (`{"content":[{"type":"text","text":"s3-c17"}]}`), the
//!   load benchmark's;
//! - `text_1k`, `text_16k`: one text block of 1 KiB and 16 KiB of JSON (a listing as text, with
//!   the quotes escaped, as tools that answer JSON write it);
//! - `structured_4k`: a text block and its structured content, 4 KiB each;
//! - `blocks_10`: ten text blocks of 100 bytes with annotations.
//!
//! Each variant checks once, before measuring, that it writes what the other writes (the same
//! JSON-RPC response, compared as JSON).
//!
//! ```text
//! cargo bench --bench result_passthrough -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Numbers and the command that produced them: `benches/README.md`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use muster::core::ToolOutput;
use rmcp::model::{CallToolResult, RequestId, ServerJsonRpcMessage, ServerResult};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json, value::RawValue};

/// A downstream's answer line, as the gateway's lanes read it: the result as it lies.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    result: &'a RawValue,
}

/// A downstream's answer line, as rmcp's typed reading (one result type) reads it.
#[derive(Deserialize)]
struct TypedAnswer {
    result: CallToolResult,
}

/// The client's answer with a result passed on.
#[derive(Serialize)]
struct Passed<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a ToolOutput,
}

fn typed(line: &str, id: &RequestId) -> Vec<u8> {
    let answer: TypedAnswer = serde_json::from_str(line).expect("a result");
    let message = ServerJsonRpcMessage::response(ServerResult::CallToolResult(answer.result), id.clone());
    serde_json::to_vec(&message).expect("writes")
}

fn passed(line: &str, id: &RequestId) -> Vec<u8> {
    let answer: Answer<'_> = serde_json::from_str(line).expect("an answer");
    let output = ToolOutput::from_json(answer.result.to_owned()).expect("a result");
    serde_json::to_vec(&Passed {
        jsonrpc: "2.0",
        id,
        result: &output,
    })
    .expect("writes")
}

fn passed_then_read(line: &str) -> CallToolResult {
    let answer: Answer<'_> = serde_json::from_str(line).expect("an answer");
    let output = ToolOutput::from_json(answer.result.to_owned()).expect("a result");
    output.into_result().expect("reads")
}

/// The answer line of `result`.
fn line(result: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": "muster-7", "result": result}).to_string()
}

fn results() -> Vec<(&'static str, String)> {
    let listing = |bytes: usize| {
        let items: Vec<Value> = (0..)
            .map(|i| json!({"name": format!("pod-{i}"), "namespace": "default", "ready": i % 3 != 0}))
            .scan(0, |size, item| {
                *size += item.to_string().len() + 1;
                (*size <= bytes).then_some(item)
            })
            .collect();
        Value::Array(items)
    };
    let text = |value: &Value| json!({"type": "text", "text": value.to_string()});
    let structured = json!({"items": listing(4096)});
    vec![
        ("echo", line(&json!({"content": [{"type": "text", "text": "s3-c17"}]}))),
        ("text_1k", line(&json!({"content": [text(&listing(1024))]}))),
        ("text_16k", line(&json!({"content": [text(&listing(16 * 1024))]}))),
        (
            "structured_4k",
            line(&json!({"content": [text(&structured)], "structuredContent": structured})),
        ),
        (
            "blocks_10",
            line(&json!({"content": (0..10).map(|i| json!({
                "type": "text",
                "text": format!("{i:0>100}"),
                "annotations": {"audience": ["user"], "priority": 0.5},
            })).collect::<Vec<_>>()})),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let id = RequestId::Number(7);
    for (name, line) in results() {
        let (a, b) = (typed(&line, &id), passed(&line, &id));
        assert_eq!(
            serde_json::from_slice::<Value>(&a).expect("JSON"),
            serde_json::from_slice::<Value>(&b).expect("JSON"),
            "{name}: the two write the same response"
        );
        let mut group = c.benchmark_group(name);
        group.bench_function("typed", |bench| bench.iter(|| typed(black_box(&line), &id)));
        group.bench_function("passed", |bench| bench.iter(|| passed(black_box(&line), &id)));
        group.bench_function("passed_then_read", |bench| {
            bench.iter(|| passed_then_read(black_box(&line)))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
